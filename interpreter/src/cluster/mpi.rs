//! The MPI transport (feature `mpi`): every rank is a process of `MPI_COMM_WORLD`, started by
//! `mpirun`, with the roles of [`super::layout`] (SIAL-SPEC §7.2). Requests and replies are a
//! small header (the message without its block data, in a compact binary form) followed by the
//! block data as raw `f64` messages, received straight into the block's buffer. The collectives
//! among workers run on a communicator of the workers only.
//!
//! Sends are non-blocking and the sender keeps the buffer until MPI is done with it: a worker
//! sending a large put while its server sends it a large block would otherwise wait on each
//! other forever (MPI's standard send may wait for the matching receive). One thread per process
//! calls MPI (`MPI_THREAD_FUNNELED`).

use super::message::{Claim, Origin, Payload, ServerStats, ToServer, ToWorker};
use super::{ServerLink, WorkerLink, layout};
use crate::error::{Result, RuntimeError};
use crate::job::{self, Fault, Options, Report};
use crate::server::blocks::DiskStats;
use crate::setup::Setup;
use crate::specials::Registry;
use crate::store::{Block, BlockKey};
use crate::worker::prefetch::SiteStats;
use crate::worker::{FinalState, LineProfile, WorkerStats};
use ::mpi::Threading;
use ::mpi::collective::{CommunicatorCollectives, Root};
use ::mpi::datatype::{Equivalence, PartitionMut};
use ::mpi::environment::Universe;
use ::mpi::ffi;
use ::mpi::point_to_point::{MatchedReceiveVec, Source};
use ::mpi::raw::AsRaw;
use ::mpi::topology::{Color, Communicator, SimpleCommunicator};
use sial_bytecode::{Program, PutOp};
use std::collections::VecDeque;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tag of everything a server receives.
const TO_SERVER: i32 = 1;
/// Tag of everything a worker receives from a server.
const TO_WORKER: i32 = 2;

/// Buffers of sends still in flight; MPI reads them until the send completes.
enum Held {
    Bytes(Vec<u8>),
    Data(Vec<f64>),
    Block(Arc<Block>),
}

/// Non-blocking sends on one communicator, with their buffers, oldest first.
struct Outbox {
    comm: ffi::MPI_Comm,
    pending: VecDeque<(ffi::MPI_Request, Held)>,
    /// Bytes of the pending sends.
    bytes: usize,
    /// Past this many pending bytes, `post` waits for the oldest sends (None: never waits).
    limit: Option<usize>,
}

/// Bytes a worker may have in flight before its puts wait for the servers (its memory).
const WORKER_IN_FLIGHT: usize = 256 << 20;

impl Held {
    fn bytes(&self) -> usize {
        match self {
            Held::Bytes(b) => b.len(),
            Held::Data(d) => d.len() * 8,
            Held::Block(b) => b.data.len() * 8,
        }
    }
}

impl Outbox {
    fn new(comm: &SimpleCommunicator, limit: Option<usize>) -> Outbox {
        Outbox {
            comm: comm.as_raw(),
            pending: VecDeque::new(),
            bytes: 0,
            limit,
        }
    }

    fn post(&mut self, dest: i32, tag: i32, held: Held) -> Result<()> {
        let (ptr, count, datatype) = match &held {
            Held::Bytes(b) => (
                b.as_ptr().cast::<std::ffi::c_void>(),
                b.len(),
                u8::equivalent_datatype().as_raw(),
            ),
            Held::Data(d) => (
                d.as_ptr().cast(),
                d.len(),
                f64::equivalent_datatype().as_raw(),
            ),
            Held::Block(b) => (
                b.data.as_ptr().cast(),
                b.data.len(),
                f64::equivalent_datatype().as_raw(),
            ),
        };
        let count = i32::try_from(count).map_err(|_| {
            RuntimeError::new(format!(
                "a message of {count} elements is too large for one MPI message"
            ))
        })?;
        // SAFETY: the buffer lives in `held`, which stays in `pending` (its heap storage does
        // not move, and an `Arc<Block>` shared here cannot be mutated) until MPI reports the
        // send complete in `reap` or `wait_oldest`. MPI's default error handler aborts on
        // failure, so the return codes need no check.
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        unsafe {
            ffi::MPI_Isend(ptr, count, datatype, dest, tag, self.comm, &mut request);
        }
        self.bytes += held.bytes();
        self.pending.push_back((request, held));
        // Only a worker waits here: a server must always come back to receiving, or a worker
        // waiting for its put to be received and the server waiting for its reply to be
        // received would wait for each other.
        if let Some(limit) = self.limit {
            while self.bytes > limit && self.pending.len() > 1 {
                self.wait_oldest();
            }
        }
        Ok(())
    }

    /// Frees the buffers of the completed sends at the front (sends complete mostly in order;
    /// testing only the front keeps this cheap with many sends in flight).
    fn reap(&mut self) {
        while let Some((request, _)) = self.pending.front_mut() {
            let mut done: i32 = 0;
            // SAFETY: `request` is an active request from `MPI_Isend`; MPI sets it to null
            // when it completes.
            unsafe {
                ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE);
            }
            if done == 0 {
                break;
            }
            self.pop();
        }
    }

    fn wait_oldest(&mut self) {
        if let Some((request, _)) = self.pending.front_mut() {
            // SAFETY: as in `reap`.
            unsafe {
                ffi::MPI_Wait(request, ffi::RSMPI_STATUS_IGNORE);
            }
            self.pop();
        }
    }

    fn pop(&mut self) {
        if let Some((_, held)) = self.pending.pop_front() {
            self.bytes -= held.bytes();
        }
    }

    /// Waits until every send is complete.
    fn drain(&mut self) {
        while !self.pending.is_empty() {
            self.wait_oldest();
        }
    }
}

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
        decode_reply(&header, &mut |len| {
            let mut data = vec![0.0; len];
            from.receive_into_with_tag(&mut data[..], TO_WORKER);
            data
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

// ---- the header codec ----------------------------------------------------------------------
// Little-endian fixed-width fields; block data never goes through here.

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn origin(&mut self, o: Origin) {
        self.u32(o.worker);
        self.u32(o.section);
        self.u32(o.line);
    }
    fn key(&mut self, k: &BlockKey) {
        for v in k.segments.iter().chain(&k.parents) {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
    }
    fn shape(&mut self, s: &[usize]) {
        self.u64(s.len() as u64);
        for &e in s {
            self.u64(e as u64);
        }
    }
    fn text(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

struct Reader<'a>(&'a [u8]);

fn malformed() -> RuntimeError {
    RuntimeError::new("internal: malformed MPI message")
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(malformed)?;
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn len(&mut self) -> Result<usize> {
        usize::try_from(self.u64()?).map_err(|_| malformed())
    }
    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take()?))
    }
    fn origin(&mut self) -> Result<Origin> {
        Ok(Origin {
            worker: self.u32()?,
            section: self.u32()?,
            line: self.u32()?,
        })
    }
    fn key(&mut self) -> Result<BlockKey> {
        let mut k = BlockKey {
            segments: [0; 6],
            parents: [0; 6],
        };
        for v in k.segments.iter_mut().chain(k.parents.iter_mut()) {
            *v = i32::from_le_bytes(self.take()?);
        }
        Ok(k)
    }
    fn shape(&mut self) -> Result<Vec<usize>> {
        let n = self.len()?;
        if n > 64 {
            return Err(malformed());
        }
        (0..n).map(|_| self.len()).collect()
    }
    fn text(&mut self) -> Result<String> {
        let n = self.len()?;
        if n > self.0.len() {
            return Err(malformed());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8(head.to_vec()).map_err(|_| malformed())
    }
    fn end(&self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(malformed())
        }
    }
}

fn put_op(op: PutOp) -> u8 {
    match op {
        PutOp::Replace => 0,
        PutOp::Accumulate => 1,
        PutOp::Scale => 2,
    }
}

fn put_op_of(v: u8) -> Result<PutOp> {
    match v {
        0 => Ok(PutOp::Replace),
        1 => Ok(PutOp::Accumulate),
        2 => Ok(PutOp::Scale),
        _ => Err(malformed()),
    }
}

/// The header of a request, and the block data that follows it.
fn encode_request(msg: ToServer) -> (Vec<u8>, Option<Vec<f64>>) {
    let mut w = Writer::default();
    let mut data = None;
    match msg {
        ToServer::Get {
            from,
            array,
            key,
            prefetch,
        } => {
            w.u8(0);
            w.origin(from);
            w.u32(array);
            w.key(&key);
            w.u8(u8::from(prefetch));
        }
        ToServer::Put {
            from,
            array,
            key,
            shape,
            op,
            payload,
        } => {
            w.u8(1);
            w.origin(from);
            w.u32(array);
            w.key(&key);
            w.shape(&shape);
            w.u8(put_op(op));
            match payload {
                Payload::Block(d) => {
                    w.u8(0);
                    w.u64(d.len() as u64);
                    data = Some(d);
                }
                Payload::Scalar(v) => {
                    w.u8(1);
                    w.f64(v);
                }
            }
        }
        ToServer::Delete { from, array } => {
            w.u8(2);
            w.origin(from);
            w.u32(array);
        }
        ToServer::Sync { from } => {
            w.u8(3);
            w.origin(from);
        }
        ToServer::SetPersistent { from, array, label } => {
            w.u8(4);
            w.origin(from);
            w.u32(array);
            w.text(&label);
        }
        ToServer::RestorePersistent { from, array, label } => {
            w.u8(5);
            w.origin(from);
            w.u32(array);
            w.text(&label);
        }
        ToServer::Snapshot { from, array } => {
            w.u8(6);
            w.origin(from);
            w.u32(array);
        }
        ToServer::EndProgram { from } => {
            w.u8(7);
            w.origin(from);
        }
        ToServer::Claims { from, blocks } => {
            w.u8(8);
            w.origin(from);
            w.u64(blocks.len() as u64);
            for c in blocks {
                w.u32(c.array);
                w.key(&c.key);
                w.u32(c.line);
            }
        }
    }
    (w.0, data)
}

/// A request from its header; `data(n)` receives the `n` values of block data that follow.
/// Decodes a header; the callback receives the next data message of the given length.
type Decode<T> = fn(&[u8], &mut dyn FnMut(usize) -> Vec<f64>) -> Result<T>;

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
    decode(&header, &mut |len| {
        let mut data = vec![0.0; len];
        from.receive_into_with_tag(&mut data[..], tag);
        data
    })
}

fn decode_request(header: &[u8], data: &mut dyn FnMut(usize) -> Vec<f64>) -> Result<ToServer> {
    let mut r = Reader(header);
    let msg = match r.u8()? {
        0 => ToServer::Get {
            from: r.origin()?,
            array: r.u32()?,
            key: r.key()?,
            prefetch: match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(malformed()),
            },
        },
        1 => {
            let from = r.origin()?;
            let array = r.u32()?;
            let key = r.key()?;
            let shape = r.shape()?;
            let op = put_op_of(r.u8()?)?;
            let payload = match r.u8()? {
                0 => {
                    let n = r.len()?;
                    r.end()?;
                    Payload::Block(data(n))
                }
                1 => Payload::Scalar(r.f64()?),
                _ => return Err(malformed()),
            };
            ToServer::Put {
                from,
                array,
                key,
                shape,
                op,
                payload,
            }
        }
        2 => ToServer::Delete {
            from: r.origin()?,
            array: r.u32()?,
        },
        3 => ToServer::Sync { from: r.origin()? },
        4 => ToServer::SetPersistent {
            from: r.origin()?,
            array: r.u32()?,
            label: r.text()?,
        },
        5 => ToServer::RestorePersistent {
            from: r.origin()?,
            array: r.u32()?,
            label: r.text()?,
        },
        6 => ToServer::Snapshot {
            from: r.origin()?,
            array: r.u32()?,
        },
        7 => ToServer::EndProgram { from: r.origin()? },
        8 => {
            let from = r.origin()?;
            let n = r.len()?;
            let mut blocks = Vec::new();
            for _ in 0..n {
                blocks.push(Claim {
                    array: r.u32()?,
                    key: r.key()?,
                    line: r.u32()?,
                });
            }
            ToServer::Claims { from, blocks }
        }
        _ => return Err(malformed()),
    };
    r.end()?;
    Ok(msg)
}

/// The header of a reply, and the blocks whose data follows it (in order).
fn encode_reply(msg: ToWorker) -> (Vec<u8>, Vec<Arc<Block>>) {
    let mut w = Writer::default();
    let mut blocks = Vec::new();
    match msg {
        ToWorker::Block {
            array,
            key,
            section,
            block,
        } => {
            w.u8(0);
            w.u32(array);
            w.key(&key);
            w.u32(section);
            w.shape(&block.shape);
            w.u64(block.data.len() as u64);
            blocks.push(block);
        }
        ToWorker::Synced { server } => {
            w.u8(1);
            w.u32(server);
        }
        ToWorker::Missing {
            array,
            key,
            section,
        } => {
            w.u8(4);
            w.u32(array);
            w.key(&key);
            w.u32(section);
        }
        ToWorker::Snapshot {
            server,
            array,
            blocks: all,
        } => {
            w.u8(2);
            w.u32(server);
            w.u32(array);
            w.u64(all.len() as u64);
            for (key, block) in all {
                w.key(&key);
                w.shape(&block.shape);
                w.u64(block.data.len() as u64);
                blocks.push(block);
            }
        }
        ToWorker::Ended { server, stats } => {
            w.u8(3);
            w.u32(server);
            let ServerStats {
                messages,
                bytes_in,
                bytes_out,
                blocks_held_peak,
                bytes_held_peak,
                busy_seconds,
                disk,
            } = stats;
            let DiskStats {
                peak_memory,
                bytes_written,
                bytes_read,
                blocks_spilled,
                blocks_reloaded,
            } = disk;
            for v in [
                messages,
                bytes_in,
                bytes_out,
                blocks_held_peak,
                bytes_held_peak,
                peak_memory,
                bytes_written,
                bytes_read,
                blocks_spilled,
                blocks_reloaded,
            ] {
                w.u64(v);
            }
            w.f64(busy_seconds);
        }
    }
    (w.0, blocks)
}

/// A reply from its header; `data(n)` receives the `n` values of each block that follows.
fn decode_reply(header: &[u8], data: &mut dyn FnMut(usize) -> Vec<f64>) -> Result<ToWorker> {
    let mut r = Reader(header);
    // Shape and number of values of a block whose data follows.
    fn block(r: &mut Reader<'_>) -> Result<(Vec<usize>, usize)> {
        let shape = r.shape()?;
        let n = r.len()?;
        Ok((shape, n))
    }
    let msg = match r.u8()? {
        0 => {
            let array = r.u32()?;
            let key = r.key()?;
            let section = r.u32()?;
            let (shape, n) = block(&mut r)?;
            r.end()?;
            ToWorker::Block {
                array,
                key,
                section,
                block: Arc::new(Block {
                    shape,
                    data: data(n),
                }),
            }
        }
        1 => ToWorker::Synced { server: r.u32()? },
        4 => ToWorker::Missing {
            array: r.u32()?,
            key: r.key()?,
            section: r.u32()?,
        },
        2 => {
            let server = r.u32()?;
            let array = r.u32()?;
            let count = r.len()?;
            let mut heads = Vec::new();
            for _ in 0..count {
                let key = r.key()?;
                heads.push((key, block(&mut r)?));
            }
            r.end()?;
            let blocks = heads
                .into_iter()
                .map(|(key, (shape, n))| {
                    (
                        key,
                        Arc::new(Block {
                            shape,
                            data: data(n),
                        }),
                    )
                })
                .collect();
            ToWorker::Snapshot {
                server,
                array,
                blocks,
            }
        }
        3 => {
            let server = r.u32()?;
            let mut v = [0u64; 10];
            for x in &mut v {
                *x = r.u64()?;
            }
            let busy_seconds = r.f64()?;
            let [
                messages,
                bytes_in,
                bytes_out,
                blocks_held_peak,
                bytes_held_peak,
                peak_memory,
                bytes_written,
                bytes_read,
                blocks_spilled,
                blocks_reloaded,
            ] = v;
            ToWorker::Ended {
                server,
                stats: ServerStats {
                    messages,
                    bytes_in,
                    bytes_out,
                    blocks_held_peak,
                    bytes_held_peak,
                    busy_seconds,
                    disk: DiskStats {
                        peak_memory,
                        bytes_written,
                        bytes_read,
                        blocks_spilled,
                        blocks_reloaded,
                    },
                },
            }
        }
        _ => return Err(malformed()),
    };
    r.end()?;
    Ok(msg)
}

/// A worker's figures as numbers for the gather to worker 0.
fn stats_out(s: &WorkerStats) -> Vec<f64> {
    let WorkerStats {
        wait_blocks,
        barrier,
        messages_sent,
        messages_received,
        bytes_sent,
        bytes_received,
        gets,
        get_hits,
        puts,
        blocks_fetched,
        blocks_evicted,
        refetched,
        cache_peak_bytes,
        barriers,
        ref sites,
        ref lines,
        ref gpu,
    } = *s;
    let mut v = vec![wait_blocks.as_secs_f64(), barrier.as_secs_f64()];
    // Counts stay exact as f64 below 2^53.
    v.extend(
        [
            messages_sent,
            messages_received,
            bytes_sent,
            bytes_received,
            gets,
            get_hits,
            puts,
            blocks_fetched,
            blocks_evicted,
            refetched,
            cache_peak_bytes,
            barriers,
        ]
        .map(|x| x as f64),
    );
    v.push(sites.len() as f64);
    for t in sites {
        v.extend([
            t.program as f64,
            t.line as f64,
            t.gets as f64,
            t.reads as f64,
            t.waited as f64,
            t.wait.as_secs_f64(),
            t.requested as f64,
            t.used as f64,
            t.wasted as f64,
            t.max_depth as f64,
        ]);
    }
    v.push(lines.len() as f64);
    for l in lines {
        v.extend([
            l.program as f64,
            l.line as f64,
            l.instructions as f64,
            l.time.as_secs_f64(),
        ]);
    }
    // The device figures (the device's name stays with its worker).
    match gpu {
        None => v.push(0.0),
        Some(g) => {
            v.push(1.0);
            v.extend(
                [
                    g.uploads,
                    g.upload_bytes,
                    g.downloads,
                    g.download_bytes,
                    g.device_instructions,
                    g.host_instructions,
                    g.kernel_launches,
                    g.evictions,
                    g.write_backs,
                    g.pinned.hits,
                    g.pinned.misses,
                    g.pinned.peak_bytes as u64,
                ]
                .map(|x| x as f64),
            );
            v.push(g.pinned.alloc_seconds);
        }
    }
    v
}

fn stats_in(v: &[f64]) -> WorkerStats {
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    let n = |i: usize| at(i) as u64;
    let secs = |i: usize| Duration::try_from_secs_f64(at(i)).unwrap_or_default();
    let at_lines = 15 + 10 * n(14) as usize;
    let at_gpu = at_lines + 1 + 4 * n(at_lines) as usize;
    WorkerStats {
        wait_blocks: secs(0),
        barrier: secs(1),
        messages_sent: n(2),
        messages_received: n(3),
        bytes_sent: n(4),
        bytes_received: n(5),
        gets: n(6),
        get_hits: n(7),
        puts: n(8),
        blocks_fetched: n(9),
        blocks_evicted: n(10),
        refetched: n(11),
        cache_peak_bytes: n(12),
        barriers: n(13),
        sites: (0..n(14) as usize)
            .map(|k| {
                let b = 15 + 10 * k;
                SiteStats {
                    program: n(b) as u32,
                    line: n(b + 1) as u32,
                    gets: n(b + 2),
                    reads: n(b + 3),
                    waited: n(b + 4),
                    wait: secs(b + 5),
                    requested: n(b + 6),
                    used: n(b + 7),
                    wasted: n(b + 8),
                    max_depth: n(b + 9),
                }
            })
            .collect(),
        lines: {
            (0..n(at_lines) as usize)
                .map(|k| {
                    let b = at_lines + 1 + 4 * k;
                    LineProfile {
                        program: n(b) as u32,
                        line: n(b + 1) as u32,
                        instructions: n(b + 2),
                        time: secs(b + 3),
                    }
                })
                .collect()
        },
        gpu: {
            (n(at_gpu) == 1).then(|| {
                let g = |k: usize| n(at_gpu + 1 + k);
                let mut s = crate::device::GpuStats {
                    device: "GPU".into(),
                    uploads: g(0),
                    upload_bytes: g(1),
                    downloads: g(2),
                    download_bytes: g(3),
                    device_instructions: g(4),
                    host_instructions: g(5),
                    kernel_launches: g(6),
                    evictions: g(7),
                    write_backs: g(8),
                    ..Default::default()
                };
                s.pinned.hits = g(9);
                s.pinned.misses = g(10);
                s.pinned.peak_bytes = g(11) as usize;
                s.pinned.alloc_seconds = at(at_gpu + 13);
                s.pinned_hit_ratio = s.pinned.hit_ratio();
                s
            })
        },
    }
}

// ---- the job runner -----------------------------------------------------------------------

/// This process's part of a job started by `mpirun`: worker or server by its rank's place in
/// `layout(options.workers, options.servers)`, which must account for every process. Returns
/// the report on global rank 0 (worker 0, which alone gets `out` and `done`) and `None` on the
/// other ranks. A failure on any rank prints `FATAL ERROR: ...` and aborts every process with
/// status 1 (`MPI_Abort`): it does not return.
pub fn run(
    programs: &[Program],
    setup: &Setup,
    registry: &Registry,
    out: &mut (dyn Write + Send),
    options: &Options,
    mut done: impl FnMut(&FinalState<'_>),
) -> Result<Option<Report>> {
    let started = Instant::now();
    let Some((universe, _)) = ::mpi::initialize_with_threading(Threading::Funneled) else {
        return Err(RuntimeError::new("MPI cannot be initialised twice"));
    };
    let world = universe.world();
    let size = world.size() as usize;
    let (workers, servers) = (options.workers, options.servers);
    if workers + servers != size || workers == 0 || servers == 0 {
        // Every rank sees the same numbers and stops the same way; only rank 0 says why.
        let error = RuntimeError::input(format!(
            "{workers} workers and {servers} servers do not fit {size} MPI processes (an MPI job needs at least one of each, and workers + servers = processes)"
        ));
        return if world.rank() == 0 {
            Err(error)
        } else {
            Ok(None)
        };
    }
    let link = connect(&universe, workers, servers);
    let options = &agree_on_checkpoints(&world, options);
    let who = match &link {
        Ok(Link::Server(s)) => format!("server {}", s.rank),
        Ok(Link::Worker(w)) => format!("worker {}", w.rank),
        Err(_) => format!("rank {}", world.rank()),
    };
    let body = catch_unwind(AssertUnwindSafe(|| -> Result<Option<Report>> {
        options.check_scratch()?;
        let resume = job::resume_point(programs, options)?;
        let todo = &programs[resume.completed.min(programs.len())..];
        match link? {
            Link::Server(mut link) => {
                let rank = link.rank;
                serve_all(todo, &mut link, options, rank)?;
                link.outbox.drain();
                Ok(None)
            }
            Link::Worker(mut link) => {
                let mut report = work_all(
                    todo, &resume, setup, registry, out, options, &mut link, &mut done,
                )?;
                link.outbox.drain();
                if let Some(r) = &mut report {
                    r.programs = programs.iter().map(|p| p.name.clone()).collect();
                }
                Ok(report)
            }
        }
    }));
    let failure = match body {
        Ok(Ok(report)) => {
            let report = report.map(|mut r| {
                r.wall = started.elapsed();
                r
            });
            if !options.keep_scratch {
                let _ = std::fs::remove_dir_all(options.scratch());
            }
            // Dropping the universe finalises MPI: every rank waits for the others here.
            drop(world);
            drop(universe);
            return Ok(report);
        }
        Ok(Err(e)) => e,
        Err(p) => RuntimeError::new(format!(
            "{who} died: {} (the job was stopped)",
            job::panic_text(p.as_ref())
        )),
    };
    let _ = out.flush();
    eprintln!("{failure}");
    if world.rank() == 0
        && let Some(dir) = &options.checkpoints
        && let Ok(c) = dir.read_worker()
    {
        eprintln!(
            "sial: {} of {} programs completed; restart the job from there with --restart {} (checkpoints in {})",
            c.completed,
            programs.len(),
            dir.id,
            dir.path().display()
        );
    }
    if !options.keep_scratch {
        let _ = std::fs::remove_dir_all(options.scratch());
    }
    // The launcher forwards a rank's output through a pipe; an abort (this rank's or another
    // failing rank's) can tear the pipe down before the message is through. Every failing
    // rank prints first, then waits a moment before aborting.
    std::thread::sleep(std::time::Duration::from_millis(200));
    world.abort(1)
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
    let is_server = roles[me];
    let rank = roles[..me].iter().filter(|&&r| r == is_server).count();
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

/// Every rank writes its checkpoints under the name rank 0 chose (the default name contains
/// the process id, which differs between ranks).
fn agree_on_checkpoints(world: &SimpleCommunicator, options: &Options) -> Options {
    let mut options = options.clone();
    if let Some(dir) = &options.checkpoints {
        let root = world.process_at_rank(0);
        let mut id = dir.id.clone().into_bytes();
        let mut len = id.len() as u64;
        root.broadcast_into(&mut len);
        id.resize(len as usize, 0);
        root.broadcast_into(&mut id[..]);
        let id = String::from_utf8_lossy(&id).into_owned();
        options.checkpoints = Some(crate::checkpoint::JobDir::new(&options.work_dir, &id));
    }
    options
}

fn serve_all(todo: &[Program], link: &mut MpiServer, options: &Options, rank: usize) -> Result<()> {
    if options.fault == Some(Fault::ServerPanic(rank)) {
        let _ = link.recv();
        // A testing aid: die as a killed process would, without a word.
        std::process::abort();
    }
    job::serve_job(todo, link, options, rank)
}

#[allow(clippy::too_many_arguments)]
fn work_all(
    todo: &[Program],
    resume: &crate::checkpoint::WorkerCheckpoint,
    setup: &Setup,
    registry: &Registry,
    out: &mut (dyn Write + Send),
    options: &Options,
    link: &mut MpiWorker,
    done: &mut dyn FnMut(&FinalState<'_>),
) -> Result<Option<Report>> {
    let rank = link.rank;
    if !todo.is_empty() && options.fault == Some(Fault::WorkerPanic(rank)) {
        // A testing aid: die as a killed process would, without a word.
        std::process::abort();
    }
    let mut stdout = std::io::stdout();
    let (mine, mut servers) = if rank == 0 {
        job::work_job(todo, resume, setup, registry, out, options, link, done)?
    } else {
        job::work_job(
            todo,
            resume,
            setup,
            registry,
            &mut stdout,
            options,
            link,
            &mut |_| {},
        )?
    };
    // Every worker's figures to worker 0 for the summary.
    let all = link.all_gather(stats_out(&mine))?;
    if rank != 0 {
        return Ok(None);
    }
    if let Some(dir) = &options.checkpoints {
        dir.remove();
    }
    servers.resize(options.servers, ServerStats::default());
    let mut workers: Vec<WorkerStats> = all.iter().map(|v| stats_in(v)).collect();
    // Worker 0's device keeps its name.
    if let (Some(w), Some(g)) = (workers.first_mut(), &mine.gpu) {
        w.gpu = Some(g.clone());
    }
    Ok(Some(Report {
        workers,
        servers,
        devices: crate::worker::gpu::describe(&options.gpu),
        ..Report::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> BlockKey {
        BlockKey {
            segments: [1, -2, 3, 0, 0, 0],
            parents: [0, 0, 7, 0, 0, 0],
        }
    }

    #[test]
    fn requests_survive_the_header_codec() {
        let from = Origin {
            worker: 3,
            section: 9,
            line: 42,
        };
        let msgs = vec![
            ToServer::Get {
                from,
                array: 2,
                key: key(),
                prefetch: true,
            },
            ToServer::Claims {
                from,
                blocks: vec![
                    Claim {
                        array: 1,
                        key: key(),
                        line: 12,
                    },
                    Claim {
                        array: 4,
                        key: key(),
                        line: 13,
                    },
                ],
            },
            ToServer::Put {
                from,
                array: 1,
                key: key(),
                shape: vec![2, 3],
                op: PutOp::Accumulate,
                payload: Payload::Block(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5]),
            },
            ToServer::Put {
                from,
                array: 1,
                key: key(),
                shape: vec![4],
                op: PutOp::Scale,
                payload: Payload::Scalar(-0.25),
            },
            ToServer::Delete { from, array: 5 },
            ToServer::Sync { from },
            ToServer::SetPersistent {
                from,
                array: 1,
                label: "t2_ab".into(),
            },
            ToServer::RestorePersistent {
                from,
                array: 1,
                label: "t2_ab".into(),
            },
            ToServer::Snapshot { from, array: 0 },
            ToServer::EndProgram { from },
        ];
        for msg in msgs {
            let text = format!("{msg:?}");
            let (header, data) = encode_request(msg);
            let mut data = data;
            let back = decode_request(&header, &mut |n| {
                let d = data.take().unwrap_or_default();
                assert_eq!(d.len(), n);
                d
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
            assert!(decode_request(&header[..header.len() - 1], &mut |_| Vec::new()).is_err());
        }
    }

    #[test]
    fn replies_survive_the_header_codec() {
        let block = |n: usize| {
            Arc::new(Block {
                shape: vec![n, 1],
                data: (0..n).map(|i| i as f64 * 0.5).collect(),
            })
        };
        let stats = ServerStats {
            messages: 10,
            bytes_in: 800,
            busy_seconds: 0.125,
            disk: DiskStats {
                bytes_read: 64,
                ..DiskStats::default()
            },
            ..ServerStats::default()
        };
        let msgs = vec![
            ToWorker::Block {
                array: 1,
                key: key(),
                section: 4,
                block: block(3),
            },
            ToWorker::Synced { server: 2 },
            ToWorker::Missing {
                array: 2,
                key: key(),
                section: 7,
            },
            ToWorker::Snapshot {
                server: 1,
                array: 3,
                blocks: vec![
                    (key(), block(2)),
                    (
                        BlockKey {
                            segments: [0; 6],
                            parents: [0; 6],
                        },
                        block(0),
                    ),
                ],
            },
            ToWorker::Ended { server: 0, stats },
        ];
        for msg in msgs {
            let text = format!("{msg:?}");
            let (header, blocks) = encode_reply(msg);
            let mut blocks = blocks.into_iter();
            let back = decode_reply(&header, &mut |n| {
                let b = blocks.next().expect("a block follows");
                assert_eq!(b.data.len(), n);
                b.data.clone()
            })
            .expect("decodes");
            assert_eq!(format!("{back:?}"), text);
        }
    }

    #[test]
    fn worker_figures_survive_the_gather() {
        let s = WorkerStats {
            wait_blocks: Duration::from_millis(1500),
            gets: 7,
            barriers: 3,
            cache_peak_bytes: 1 << 40,
            sites: vec![SiteStats {
                program: 1,
                line: 17,
                gets: 9,
                reads: 8,
                waited: 2,
                wait: Duration::from_millis(250),
                requested: 7,
                used: 6,
                wasted: 1,
                max_depth: 4,
            }],
            lines: vec![LineProfile {
                program: 0,
                line: 3,
                instructions: 40,
                time: Duration::from_millis(125),
            }],
            gpu: Some(crate::device::GpuStats {
                device: "GPU".into(),
                uploads: 3,
                upload_bytes: 24,
                downloads: 1,
                download_bytes: 8,
                device_instructions: 10,
                host_instructions: 2,
                kernel_launches: 11,
                evictions: 1,
                write_backs: 1,
                pinned: crate::device::PinnedStats {
                    hits: 9,
                    misses: 1,
                    alloc_seconds: 0.5,
                    peak_bytes: 4096,
                    ..Default::default()
                },
                pinned_hit_ratio: 0.9,
            }),
            ..WorkerStats::default()
        };
        let back = stats_in(&stats_out(&s));
        assert_eq!(format!("{back:?}"), format!("{s:?}"));
    }
}
