//! The MPI transport (feature `mpi`): every rank is a process of `MPI_COMM_WORLD`, started by
//! `mpirun`, with the roles of [`super::layout`] (SIAL-SPEC §7.2). Requests and replies are a
//! small header (the message without its block data, in a compact binary form) followed by the
//! block data as raw `f64` messages, received straight into the block's buffer. The collectives
//! among workers run on a communicator of the workers only.
//!
//! Sends are non-blocking and the sender keeps the buffer until MPI is done with it: a worker
//! sending a large put while its server sends it a large block would otherwise wait on each
//! other forever (MPI's standard send may wait for the matching receive). One thread per process
//! does the rank's communication; the [`heartbeat`] thread beside it sends and hears only beats
//! on a communicator of its own.

use super::message::{Payload, ToServer, ToWorker};
use super::{ServerLink, WorkerLink, layout};
use crate::error::{Result, RuntimeError};
use crate::store::Block;
use ::mpi::collective::{CommunicatorCollectives, Root};
use ::mpi::datatype::{Equivalence, PartitionMut};
use ::mpi::environment::Universe;
use ::mpi::ffi;
use ::mpi::point_to_point::{MatchedReceiveVec, Source};
use ::mpi::raw::AsRaw;
use ::mpi::topology::{Color, Communicator, SimpleCommunicator};
use std::collections::VecDeque;
use std::sync::Arc;

mod codec;
pub mod heartbeat;
mod outbox;

use codec::*;
use outbox::*;

/// Tag of everything a server receives.
const TO_SERVER: i32 = 1;
/// Tag of everything a worker receives from a server.
const TO_WORKER: i32 = 2;

/// A worker process's link: requests to the servers over the world, collectives over the
/// workers' communicator.
pub struct MpiWorker {
    world: SimpleCommunicator,
    team: SimpleCommunicator,
    rank: usize,
    workers: usize,
    /// Global rank of each server.
    servers: Vec<i32>,
    outbox: Outbox,
}

/// A server process's link.
pub struct MpiServer {
    world: SimpleCommunicator,
    rank: usize,
    /// Global rank of each worker.
    workers: Vec<i32>,
    outbox: Outbox,
}

impl WorkerLink for MpiWorker {
    fn rank(&self) -> usize {
        self.rank
    }
    fn workers(&self) -> usize {
        self.workers
    }
    fn servers(&self) -> usize {
        self.servers.len()
    }
    fn send(&mut self, server: usize, msg: ToServer) -> Result<()> {
        let dest = *self
            .servers
            .get(server)
            .ok_or_else(|| RuntimeError::new(format!("internal: no server {server}")))?;
        self.outbox.reap();
        let (header, data) = encode_request(msg);
        self.outbox.post(dest, TO_SERVER, Held::Bytes(header))?;
        if let Some(data) = data {
            self.outbox.post(dest, TO_SERVER, Held::Data(data))?;
        }
        Ok(())
    }
    fn recv(&mut self) -> Result<ToWorker> {
        self.outbox.reap();
        receive(&self.world, TO_WORKER, decode_reply)
    }
    fn try_recv(&mut self) -> Result<Option<ToWorker>> {
        self.outbox.reap();
        let Some(probed) = self
            .world
            .any_process()
            .immediate_matched_probe_with_tag(TO_WORKER)
        else {
            return Ok(None);
        };
        let (header, status) = probed.matched_receive_vec::<u8>();
        let from = self.world.process_at_rank(status.source_rank());
        decode_reply(&header, &mut |data| {
            from.receive_into_with_tag(data, TO_WORKER);
        })
        .map(Some)
    }
    fn all_gather(&mut self, data: Vec<f64>) -> Result<Vec<Vec<f64>>> {
        self.outbox.reap();
        let mine = count_of(data.len())?;
        let mut counts = vec![0i32; self.workers];
        ::mpi::request::scope(|scope| {
            wait_request(
                self.team
                    .immediate_all_gather_into(scope, &mine, &mut counts[..]),
            );
        });
        let mut displs = Vec::with_capacity(counts.len());
        let mut total = 0i32;
        for &c in &counts {
            displs.push(total);
            total = total
                .checked_add(c)
                .ok_or_else(|| RuntimeError::new("all-gather too large for one MPI message"))?;
        }
        let mut all = vec![0.0; total as usize];
        {
            let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            ::mpi::request::scope(|scope| {
                wait_request(self.team.immediate_all_gather_varcount_into(
                    scope,
                    &data[..],
                    &mut part,
                ));
            });
        }
        let mut out = Vec::with_capacity(counts.len());
        let mut rest = &all[..];
        for &c in &counts {
            let (head, tail) = rest.split_at(c as usize);
            out.push(head.to_vec());
            rest = tail;
        }
        Ok(out)
    }
    fn broadcast(&mut self, root: usize, data: Vec<f64>) -> Result<Vec<f64>> {
        self.outbox.reap();
        let root_rank = i32::try_from(root)
            .ok()
            .filter(|&r| (r as usize) < self.workers)
            .ok_or_else(|| RuntimeError::new(format!("internal: no worker {root}")))?;
        let root = self.team.process_at_rank(root_rank);
        let mut len = if self.rank == root_rank as usize {
            data.len() as u64
        } else {
            0
        };
        ::mpi::request::scope(|scope| {
            wait_request(root.immediate_broadcast_into(scope, &mut len));
        });
        let mut buffer = if self.rank == root_rank as usize {
            data
        } else {
            vec![0.0; len as usize]
        };
        ::mpi::request::scope(|scope| {
            wait_request(root.immediate_broadcast_into(scope, &mut buffer[..]));
        });
        Ok(buffer)
    }
    fn aborted(&self) -> bool {
        // A failing rank calls MPI_Abort, which ends every process: nobody is left to ask.
        false
    }
}

impl ServerLink for MpiServer {
    fn rank(&self) -> usize {
        self.rank
    }
    fn servers(&self) -> usize {
        // Not needed by a server beyond its own rank; the world knows.
        self.world.size() as usize - self.workers.len()
    }
    fn recv(&mut self) -> Result<ToServer> {
        self.outbox.reap();
        receive(&self.world, TO_SERVER, decode_request)
    }
    fn send(&mut self, worker: usize, msg: ToWorker) -> Result<()> {
        let dest = *self
            .workers
            .get(worker)
            .ok_or_else(|| RuntimeError::new(format!("internal: no worker {worker}")))?;
        let (header, blocks) = encode_reply(msg);
        self.outbox.post(dest, TO_WORKER, Held::Bytes(header))?;
        for block in blocks {
            self.outbox.post(dest, TO_WORKER, Held::Block(block))?;
        }
        Ok(())
    }
}

fn count_of(len: usize) -> Result<i32> {
    i32::try_from(len)
        .map_err(|_| RuntimeError::new(format!("{len} values are too many for one MPI message")))
}

/// Decodes a message from its header; the callback receives each data message that follows
/// into the buffer it is given.
type Decode<T> = fn(&[u8], &mut dyn FnMut(&mut [f64])) -> Result<T>;

/// Polls `probe` until it finds a message. MPI's own blocking probe spins on the core, which
/// starves the other ranks when there are more ranks than cores (a laptop, a CI machine): after
/// a short spin this yields the core, then sleeps for a few microseconds at a time.
fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    let mut idle = 0u32;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        idle = idle.saturating_add(1);
        if idle < 64 {
            std::hint::spin_loop();
        } else if idle < 256 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

/// Waits for a non-blocking collective with the polling of [`wait_for`].
fn wait_request<'a, D: ?Sized, S: ::mpi::request::Scope<'a>>(
    request: ::mpi::request::Request<'a, D, S>,
) {
    let mut pending = Some(request);
    wait_for(|| match pending.take()?.test() {
        Ok(_) => Some(()),
        Err(still) => {
            pending = Some(still);
            None
        }
    });
}

/// The next message with `tag` from any rank: its header, decoded with the data messages that
/// follow it from the same rank (each received straight into its own buffer).
fn receive<T>(world: &SimpleCommunicator, tag: i32, decode: Decode<T>) -> Result<T> {
    let probed = wait_for(|| world.any_process().immediate_matched_probe_with_tag(tag));
    let (header, status) = probed.matched_receive_vec::<u8>();
    let from = world.process_at_rank(status.source_rank());
    decode(&header, &mut |data| {
        from.receive_into_with_tag(data, tag);
    })
}

/// This process's end of the transport.
pub enum Link {
    Worker(MpiWorker),
    Server(MpiServer),
}

impl Link {
    /// Waits until every message this process sent has left (before MPI is finalised).
    pub fn flush(&mut self) {
        match self {
            Link::Worker(w) => w.outbox.drain(),
            Link::Server(s) => s.outbox.drain(),
        }
    }
}

/// This process's link, by its place in `layout(workers, servers)` (which must cover the
/// world). Collective: every process of the world calls it.
pub fn connect(universe: &Universe, workers: usize, servers: usize) -> Result<Link> {
    let world = universe.world();
    let size = world.size() as usize;
    if workers + servers != size || workers == 0 || servers == 0 {
        return Err(RuntimeError::input(format!(
            "{workers} workers and {servers} servers do not fit {size} MPI processes"
        )));
    }
    let roles = layout(workers, servers);
    let me = world.rank() as usize;
    let (is_server, rank) = super::role_of(&roles, me);
    let global = |server: bool| -> Vec<i32> {
        (0..size as i32)
            .filter(|&g| roles[g as usize] == server)
            .collect()
    };
    // Key = global rank: worker k is rank k of the workers' communicator.
    let team = world.split_by_color_with_key(Color::with_value(i32::from(is_server)), me as i32);
    if is_server {
        let outbox = Outbox::new(&world, None);
        return Ok(Link::Server(MpiServer {
            world,
            rank,
            workers: global(false),
            outbox,
        }));
    }
    let team = team.ok_or_else(|| RuntimeError::new("internal: no communicator of the workers"))?;
    let outbox = Outbox::new(&world, Some(WORKER_IN_FLIGHT));
    Ok(Link::Worker(MpiWorker {
        world,
        team,
        rank,
        workers,
        servers: global(true),
        outbox,
    }))
}
