//! The MPI transport (feature `mpi`): every rank is a process of `MPI_COMM_WORLD`, started by
//! `mpirun`, with the roles of [`super::layout`] (SIAL-SPEC §7.2). Requests and replies are
//! records of a compact binary form with small block data inline; larger block data follows as
//! raw `f64` messages, received straight into the block's buffer ([`codec`]). Records to one
//! rank travel together in one message ([`batch`]): a worker holds its requests that have no
//! reply (puts, claims, deletes, prefetches of coming iterations) until one whose reply it wants
//! soon, the size limit, or a wait; a server holds its replies while requests of the message in
//! hand are still to be handled. Messages between two ranks stay in the order they were sent,
//! so a server still applies each worker's requests in its order. The collectives among
//! workers run on a communicator of the workers only.
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
use ::mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use ::mpi::datatype::{Equivalence, PartitionMut};
use ::mpi::environment::Universe;
use ::mpi::ffi;
use ::mpi::point_to_point::Source;
use ::mpi::raw::AsRaw;
use ::mpi::topology::{Color, Communicator, SimpleCommunicator};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod batch;
mod codec;
mod fixed;
pub mod heartbeat;
mod outbox;
mod waits;

use batch::*;
use codec::*;
use outbox::*;
pub use waits::Places;
use waits::{wait_for, wait_request};

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
    /// Requests held for each server.
    requests: Batches,
    replies: Inbox,
    outbox: Outbox,
}

/// A server process's link.
pub struct MpiServer {
    world: SimpleCommunicator,
    rank: usize,
    /// Replies held for each worker.
    replies: Batches,
    requests: Inbox,
    outbox: Outbox,
    /// Time spent waiting for requests.
    idle: Duration,
}

impl WorkerLink for MpiWorker {
    fn rank(&self) -> usize {
        self.rank
    }
    fn workers(&self) -> usize {
        self.workers
    }
    fn servers(&self) -> usize {
        self.requests.len()
    }
    fn send(&mut self, server: usize, msg: ToServer) -> Result<()> {
        // A request with a reply waits only for the requests the worker makes right after it
        // (a loop of gets): the worker sends what it holds before other work or a wait.
        let (dest, batch) = self.requests.of(server)?;
        let data = encode_request(msg, batch)?;
        if data.is_some() || self.requests.full(server) {
            // Sends complete a batch at a time: testing them at every request cost a small
            // put a tenth of its time.
            self.outbox.reap();
            self.requests.flush(server, &mut self.outbox)?;
        }
        if let Some(data) = data {
            self.outbox.post(dest, TO_SERVER, Held::Data(data))?;
        }
        Ok(())
    }
    fn send_held(&mut self) -> Result<()> {
        self.requests.flush_all(&mut self.outbox)
    }
    fn recv(&mut self) -> Result<ToWorker> {
        self.outbox.reap();
        if !self.replies.poll(&self.world) {
            // Nothing held waits with the worker (the servers apply it meanwhile).
            self.requests.flush_all(&mut self.outbox)?;
            self.replies.wait(&self.world);
        }
        self.replies.next(&self.world, decode_reply)
    }
    fn try_recv(&mut self) -> Result<Option<ToWorker>> {
        self.outbox.reap();
        if !self.replies.poll(&self.world) {
            return Ok(None);
        }
        self.replies.next(&self.world, decode_reply).map(Some)
    }
    fn all_gather(&mut self, data: Vec<f64>) -> Result<Vec<Vec<f64>>> {
        self.outbox.reap();
        self.requests.flush_all(&mut self.outbox)?;
        all_gather(&self.team, &data)
    }
    fn barrier(&mut self) -> Result<()> {
        self.outbox.reap();
        self.requests.flush_all(&mut self.outbox)?;
        wait_request(self.team.immediate_barrier());
        Ok(())
    }
    fn barrier_meet(&mut self, bits: &mut [u64], counts: &mut [u64]) -> Result<()> {
        if bits.is_empty() && counts.is_empty() {
            return self.barrier();
        }
        self.outbox.reap();
        self.requests.flush_all(&mut self.outbox)?;
        // One summing reduction does both (`tally`): the barrier costs one meeting.
        let mine = super::tally(bits, counts, self.workers);
        let mut all = vec![0; mine.len()];
        ::mpi::request::scope(|scope| {
            wait_request(self.team.immediate_all_reduce_into(
                scope,
                &mine[..],
                &mut all[..],
                SystemOperation::sum(),
            ));
        });
        super::untally(&all, bits, counts, self.workers);
        Ok(())
    }
    fn broadcast(&mut self, root: usize, data: Vec<f64>) -> Result<Vec<f64>> {
        self.outbox.reap();
        self.requests.flush_all(&mut self.outbox)?;
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
        self.world.size() as usize - self.replies.len()
    }
    fn recv(&mut self) -> Result<ToServer> {
        self.outbox.reap();
        if !self.requests.in_hand() {
            // The requests of the message in hand are handled: their replies go out together
            // (held on while more messages arrived, they kept a worker waiting that had sent
            // its requests a few at a time).
            self.replies.flush_all(&mut self.outbox)?;
            if !self.requests.poll(&self.world) {
                let waiting = Instant::now();
                self.requests.wait(&self.world);
                self.idle += waiting.elapsed();
            }
        }
        self.requests.next(&self.world, decode_request)
    }
    fn send(&mut self, worker: usize, msg: ToWorker) -> Result<()> {
        let (dest, batch) = self.replies.of(worker)?;
        let blocks = encode_reply(msg, batch)?;
        if !blocks.is_empty() || self.replies.full(worker) || !self.requests.in_hand() {
            // The reply to the last request of the message in hand goes now: the server may
            // wait for the next message, or end.
            self.replies.flush_all(&mut self.outbox)?;
        }
        for block in blocks {
            self.outbox.post(dest, TO_WORKER, Held::Block(block))?;
        }
        Ok(())
    }
    fn idle(&self) -> Duration {
        self.idle
    }
}

/// Every process's `data`, in rank order, on every process of `comm` (collective; waits with
/// the polling of [`wait_for`]).
pub fn all_gather<T: Equivalence + Clone + Default>(
    comm: &SimpleCommunicator,
    data: &[T],
) -> Result<Vec<Vec<T>>> {
    let mine = count_of(data.len())?;
    let mut counts = vec![0i32; comm.size() as usize];
    ::mpi::request::scope(|scope| {
        wait_request(comm.immediate_all_gather_into(scope, &mine, &mut counts[..]));
    });
    let mut displs = Vec::with_capacity(counts.len());
    let mut total = 0i32;
    for &c in &counts {
        displs.push(total);
        total = total
            .checked_add(c)
            .ok_or_else(|| RuntimeError::new("all-gather too large for one MPI message"))?;
    }
    let mut all = vec![T::default(); total as usize];
    {
        let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        ::mpi::request::scope(|scope| {
            wait_request(comm.immediate_all_gather_varcount_into(scope, data, &mut part));
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

fn count_of(len: usize) -> Result<i32> {
    i32::try_from(len)
        .map_err(|_| RuntimeError::new(format!("{len} values are too many for one MPI message")))
}

/// Decodes the first record of a batch, returning the bytes after it; the callback receives
/// each data message that follows the batch into the buffer it is given.
type Decode<T> = for<'b> fn(&'b [u8], &mut dyn FnMut(&mut [f64])) -> Result<(T, &'b [u8])>;

/// This process's end of the transport.
pub enum Link {
    Worker(MpiWorker),
    Server(MpiServer),
}

impl Link {
    /// Sends what is held and waits until every message this process sent has left (before
    /// MPI is finalised).
    pub fn flush(&mut self) -> Result<()> {
        let (batches, outbox) = match self {
            Link::Worker(w) => (&mut w.requests, &mut w.outbox),
            Link::Server(s) => (&mut s.replies, &mut s.outbox),
        };
        batches.flush_all(outbox)?;
        outbox.drain();
        Ok(())
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
            replies: Batches::new(global(false), TO_WORKER),
            requests: Inbox::new(TO_SERVER),
            outbox,
            idle: Duration::ZERO,
        }));
    }
    let team = team.ok_or_else(|| RuntimeError::new("internal: no communicator of the workers"))?;
    let outbox = Outbox::new(&world, Some(WORKER_IN_FLIGHT));
    Ok(Link::Worker(MpiWorker {
        world,
        team,
        rank,
        workers,
        requests: Batches::new(global(true), TO_SERVER),
        replies: Inbox::new(TO_WORKER),
        outbox,
    }))
}
