//! Plain rsmpi between two ranks: the baseline of `benches/mpi_rates.sh` (docs/benchmarks.md,
//! "MPI message rates and bandwidth"). For each block size, the time of COUNT one-way messages
//! of the block (blocking sends, each received into a fresh buffer, then one acknowledgement:
//! a put) and of COUNT small requests each answered with the block (all requests first, then
//! the replies, each into a fresh buffer: a get), and of the put again with the receiver
//! keeping every block until the end, as a server does (its memory is new to the process, not
//! the warm buffer the allocator hands back each time in the first put), and the get again
//! with the requester keeping every block, as a worker does until its barrier.
//!
//! ```sh
//! cargo build --release --features mpi --example raw_mpi
//! mpirun -n 2 target/release/examples/raw_mpi BYTES:COUNT...
//! ```
//!
//! Prints `BYTES COUNT PUT_SECONDS GET_SECONDS KEPT_PUT_SECONDS KEPT_GET_SECONDS` for each
//! argument.

use mpi::collective::CommunicatorCollectives;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, Process};
use std::process::ExitCode;
use std::time::Instant;

/// Bytes of a request: about those of sial's `Get`.
const REQUEST_BYTES: usize = 40;

fn main() -> ExitCode {
    let sizes: Vec<(usize, usize)> = match std::env::args().skip(1).map(|a| size(&a)).collect() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("raw_mpi: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(universe) = mpi::initialize() else {
        eprintln!("raw_mpi: MPI is already initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    if world.size() != 2 {
        eprintln!("raw_mpi: run under mpirun -n 2");
        return ExitCode::FAILURE;
    }
    let first = world.rank() == 0;
    let other = world.process_at_rank(1 - world.rank());
    for (bytes, count) in sizes {
        let values = bytes.div_ceil(8);
        world.barrier();
        let started = Instant::now();
        put(first, &other, values, count, false);
        let put_s = started.elapsed().as_secs_f64();
        world.barrier();
        let started = Instant::now();
        get(first, &other, values, count, false);
        let get_s = started.elapsed().as_secs_f64();
        world.barrier();
        let started = Instant::now();
        let kept = put(first, &other, values, count, true);
        let put_kept_s = started.elapsed().as_secs_f64();
        drop(kept);
        world.barrier();
        let started = Instant::now();
        let kept = get(first, &other, values, count, true);
        let get_kept_s = started.elapsed().as_secs_f64();
        drop(kept);
        if first {
            println!("{bytes} {count} {put_s:.6} {get_s:.6} {put_kept_s:.6} {get_kept_s:.6}");
        }
    }
    ExitCode::SUCCESS
}

/// `BYTES:COUNT`.
fn size(arg: &str) -> Result<(usize, usize), String> {
    let parsed = arg
        .split_once(':')
        .and_then(|(b, c)| Some((b.parse().ok()?, c.parse().ok()?)));
    parsed.ok_or_else(|| format!("{arg}: expected BYTES:COUNT"))
}

/// Rank 0 sends `count` blocks of `values` doubles, rank 1 receives each into a fresh buffer
/// and acknowledges the last. With `keep`, rank 1 keeps every block it received (returned, to
/// be dropped after the time is taken), as a server does.
fn put(first: bool, other: &Process<'_>, values: usize, count: usize, keep: bool) -> Vec<Vec<f64>> {
    let mut kept = Vec::new();
    if first {
        let block = vec![1.0f64; values];
        for _ in 0..count {
            other.send(&block[..]);
        }
        let _ack = other.receive::<u8>();
    } else {
        receive_blocks(other, values, count, keep, &mut kept);
        other.send(&0u8);
    }
    kept
}

/// Rank 0 sends `count` requests, then receives as many blocks into fresh buffers; rank 1
/// answers each request with a block. With `keep`, rank 0 keeps every block it received
/// (returned, to be dropped after the time is taken), as a worker does until its barrier.
fn get(first: bool, other: &Process<'_>, values: usize, count: usize, keep: bool) -> Vec<Vec<f64>> {
    let mut kept = Vec::new();
    if first {
        let request = [0u8; REQUEST_BYTES];
        for _ in 0..count {
            other.send(&request[..]);
        }
        receive_blocks(other, values, count, keep, &mut kept);
    } else {
        let block = vec![2.0f64; values];
        let mut request = [0u8; REQUEST_BYTES];
        for _ in 0..count {
            other.receive_into(&mut request[..]);
            other.send(&block[..]);
        }
    }
    kept
}

/// Receives `count` blocks of `values` doubles from `other`, each into a fresh buffer, kept in
/// `kept` if `keep` (otherwise freed at once, so the allocator hands the next one back warm).
fn receive_blocks(
    other: &Process<'_>,
    values: usize,
    count: usize,
    keep: bool,
    kept: &mut Vec<Vec<f64>>,
) {
    for _ in 0..count {
        let mut block = vec![0.0f64; values];
        other.receive_into(&mut block[..]);
        if keep {
            kept.push(block);
        }
    }
}
