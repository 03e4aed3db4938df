//! Put/get throughput of the MPI transport between one worker and one server, against plain
//! rsmpi blocking send/receive of the same sizes (docs/benchmarks.md, "MPI transport").
//!
//! ```sh
//! cargo build --release --features mpi -p sial-interpreter --example mpi_transfer
//! mpirun -n 2 target/release/examples/mpi_transfer
//! ```
//!
//! Put: the worker streams puts (header + block data) and then a `Sync`; the server receives
//! each one into a fresh buffer. Get: the worker sends gets; the server answers each with a
//! block (shared, not copied); the worker receives each into a fresh buffer. Baseline: the same
//! number of blocks of the same size with `send`/`receive_into` and one acknowledgement.

use mpi::collective::CommunicatorCollectives;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::Communicator;
use sial_compiler::bytecode::PutOp;
use sial_interpreter::cluster::message::{Origin, Payload, ToServer, ToWorker};
use sial_interpreter::cluster::mpi::{Link, Places, connect};
use sial_interpreter::cluster::{ServerLink, WorkerLink};
use sial_interpreter::store::{Block, BlockKey};
use std::sync::Arc;
use std::time::Instant;

const KEY: BlockKey = BlockKey {
    segments: [1; 6],
    parents: [0; 6],
};
const FROM: Origin = Origin {
    worker: 0,
    section: 0,
    line: 1,
};

/// Bytes moved per size and direction (at least 4 blocks).
const VOLUME: usize = 512 << 20;

fn main() {
    let Some(universe) = mpi::initialize() else {
        eprintln!("MPI is already initialised");
        std::process::exit(1);
    };
    let world = universe.world();
    if world.size() != 2 {
        eprintln!("run under mpirun -n 2");
        std::process::exit(1);
    }
    // Waits as in `sial run`: without naps where each rank has a core.
    match Places::gather(&world) {
        Ok(places) => places.choose_waits(),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
    let mut link = match connect(&universe, 1, 1) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let sizes: Vec<usize> = (13..=25).step_by(2).map(|p| 1usize << p).collect();
    if world.rank() == 0 {
        println!("| block | blocks | put GB/s | get GB/s | rsmpi send GB/s | rsmpi recv GB/s |");
        println!("|---:|---:|---:|---:|---:|---:|");
    }
    for &bytes in &sizes {
        let n = bytes / 8;
        let count = (VOLUME / bytes).max(4);
        match &mut link {
            Link::Worker(w) => {
                let payloads: Vec<Vec<f64>> = (0..count).map(|i| vec![i as f64; n]).collect();
                world.barrier();
                let t = Instant::now();
                for p in payloads {
                    let put = ToServer::Put {
                        from: FROM,
                        array: 0,
                        key: KEY,
                        shape: [n].into(),
                        op: PutOp::Replace,
                        payload: Payload::Block(p),
                    };
                    w.send(0, put).expect("put");
                }
                // A reply leaves after every earlier put is applied: a prefetch, answered
                // without data.
                let get = ToServer::Get {
                    from: FROM,
                    array: 0,
                    key: KEY,
                    prefetch: true,
                };
                w.send(0, get).expect("prefetch");
                let _ = w.recv().expect("missing");
                let put = t.elapsed().as_secs_f64();

                world.barrier();
                let t = Instant::now();
                for _ in 0..count {
                    w.send(
                        0,
                        ToServer::Get {
                            from: FROM,
                            array: 0,
                            key: KEY,
                            prefetch: false,
                        },
                    )
                    .expect("get");
                }
                for _ in 0..count {
                    let _ = w.recv().expect("block");
                }
                let get = t.elapsed().as_secs_f64();

                // Plain rsmpi: worker → server, then server → worker.
                let server = world.process_at_rank(1);
                let data = vec![1.0f64; n];
                world.barrier();
                let t = Instant::now();
                for _ in 0..count {
                    server.send(&data[..]);
                }
                let (_, _) = server.receive::<u8>();
                let send = t.elapsed().as_secs_f64();
                world.barrier();
                let t = Instant::now();
                for _ in 0..count {
                    let mut buf = vec![0.0f64; n];
                    server.receive_into(&mut buf[..]);
                }
                let recv = t.elapsed().as_secs_f64();

                let gbs = |s: f64| (count * bytes) as f64 / s / 1e9;
                println!(
                    "| {} | {count} | {:.2} | {:.2} | {:.2} | {:.2} |",
                    human(bytes),
                    gbs(put),
                    gbs(get),
                    gbs(send),
                    gbs(recv)
                );
            }
            Link::Server(s) => {
                let block = Arc::new(Block {
                    shape: [n].into(),
                    data: vec![2.0; n],
                });
                world.barrier();
                loop {
                    match s.recv().expect("request") {
                        ToServer::Get { .. } => {
                            let reply = ToWorker::Missing {
                                array: 0,
                                key: KEY,
                                section: 0,
                            };
                            s.send(0, reply).expect("missing");
                            break;
                        }
                        ToServer::Put { .. } => {}
                        _ => panic!("unexpected request"),
                    }
                }
                world.barrier();
                for _ in 0..count {
                    let _ = s.recv().expect("get");
                    s.send(
                        0,
                        ToWorker::Block {
                            array: 0,
                            key: KEY,
                            section: 0,
                            block: Arc::clone(&block),
                        },
                    )
                    .expect("block");
                }

                let worker = world.process_at_rank(0);
                world.barrier();
                for _ in 0..count {
                    let mut buf = vec![0.0f64; n];
                    worker.receive_into(&mut buf[..]);
                }
                worker.send(&1u8);
                let data = vec![2.0f64; n];
                world.barrier();
                for _ in 0..count {
                    worker.send(&data[..]);
                }
            }
        }
    }
    link.flush().expect("flush");
}

fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}
