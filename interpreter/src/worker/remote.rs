//! The worker's side of the worker–server protocol (SIAL-SPEC §7.3.3–§7.6): fetched copies of
//! distributed and served blocks, asynchronous gets (the first read waits), puts, barriers,
//! collectives, and the worker memory budget for fetched blocks (§7.3.4).

use crate::cluster::message::{Origin, ServerStats, ToServer, ToWorker};
use crate::cluster::{Abort, WorkerLink};
use crate::error::{Result, RuntimeError};
use crate::store::{Block, BlockKey};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The blocks of one array at one server.
type Blocks = Vec<(BlockKey, Arc<Block>)>;

/// A fetched block of this section.
enum Slot {
    /// Requested; the reply has not arrived.
    Pending,
    Ready(Arc<Block>),
    /// Dropped to make room; a read fetches it again.
    Evicted,
}

struct Entry {
    slot: Slot,
    /// Fetched in a scope that is still open: not evictable.
    active: bool,
    last_use: u64,
    bytes: usize,
}

/// Figures of one worker for the end-of-run summary and `--stats`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerStats {
    pub wait_blocks: Duration,
    pub barrier: Duration,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub gets: u64,
    pub get_hits: u64,
    pub puts: u64,
    pub blocks_fetched: u64,
    pub blocks_evicted: u64,
    pub refetched: u64,
    pub cache_peak_bytes: u64,
    pub barriers: u64,
}

impl WorkerStats {
    pub fn add(&mut self, o: &WorkerStats) {
        self.wait_blocks += o.wait_blocks;
        self.barrier += o.barrier;
        self.messages_sent += o.messages_sent;
        self.messages_received += o.messages_received;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.gets += o.gets;
        self.get_hits += o.get_hits;
        self.puts += o.puts;
        self.blocks_fetched += o.blocks_fetched;
        self.blocks_evicted += o.blocks_evicted;
        self.refetched += o.refetched;
        self.cache_peak_bytes = self.cache_peak_bytes.max(o.cache_peak_bytes);
        self.barriers += o.barriers;
    }
}

pub(crate) struct Net<'a> {
    pub link: &'a mut dyn WorkerLink,
    cache: HashMap<(u32, BlockKey), Entry>,
    pub section: u32,
    cached_bytes: usize,
    budget: usize,
    clock: u64,
    synced: usize,
    snapshots: Vec<(u32, Blocks)>,
    ended: Vec<ServerStats>,
    pub stats: WorkerStats,
}

/// What a get needs to know besides the key.
pub(crate) struct Wanted<'t> {
    pub array: u32,
    pub key: BlockKey,
    pub bytes: usize,
    pub owner: usize,
    pub line: u32,
    pub text: &'t dyn Fn() -> String,
}

impl<'a> Net<'a> {
    pub fn new(link: &'a mut dyn WorkerLink, budget: usize) -> Net<'a> {
        Net {
            link,
            cache: HashMap::new(),
            section: 0,
            cached_bytes: 0,
            budget,
            clock: 0,
            synced: 0,
            snapshots: Vec::new(),
            ended: Vec::new(),
            stats: WorkerStats::default(),
        }
    }

    pub fn origin(&self, line: u32) -> Origin {
        Origin {
            worker: self.link.rank() as u32,
            section: self.section,
            line,
        }
    }

    fn send(&mut self, server: usize, msg: ToServer) -> Result<()> {
        self.stats.messages_sent += 1;
        self.stats.bytes_sent += msg.payload_bytes() as u64;
        self.link.send(server, msg)
    }

    /// Receives one reply and files it.
    fn receive_one(&mut self) -> Result<()> {
        let msg = self.link.recv()?;
        self.stats.messages_received += 1;
        self.stats.bytes_received += msg.payload_bytes() as u64;
        match msg {
            ToWorker::Block {
                array,
                key,
                section,
                block,
            } => {
                // A reply to a get of an earlier section was discarded at the barrier.
                if section == self.section
                    && let Some(e) = self.cache.get_mut(&(array, key))
                    && matches!(e.slot, Slot::Pending)
                {
                    e.slot = Slot::Ready(block);
                }
            }
            ToWorker::Synced { .. } => self.synced += 1,
            ToWorker::Snapshot { array, blocks, .. } => self.snapshots.push((array, blocks)),
            ToWorker::Ended { stats, .. } => self.ended.push(stats),
        }
        Ok(())
    }

    /// `get`/`request`: nothing to do when the block was fetched in this section; otherwise
    /// the request goes out and the worker continues.
    pub fn get(&mut self, w: &Wanted<'_>, active: bool) -> Result<bool> {
        self.stats.gets += 1;
        self.clock += 1;
        let clock = self.clock;
        if let Some(e) = self.cache.get_mut(&(w.array, w.key)) {
            e.last_use = clock;
            e.active |= active;
            if !matches!(e.slot, Slot::Evicted) {
                self.stats.get_hits += 1;
                return Ok(false);
            }
            self.make_room(w)?;
            if let Some(e) = self.cache.get_mut(&(w.array, w.key)) {
                e.slot = Slot::Pending;
            }
            self.cached_bytes += w.bytes;
            self.stats.refetched += 1;
        } else {
            self.make_room(w)?;
            self.cache.insert(
                (w.array, w.key),
                Entry {
                    slot: Slot::Pending,
                    active,
                    last_use: clock,
                    bytes: w.bytes,
                },
            );
            self.cached_bytes += w.bytes;
        }
        self.stats.blocks_fetched += 1;
        self.stats.cache_peak_bytes = self.stats.cache_peak_bytes.max(self.cached_bytes as u64);
        let from = self.origin(w.line);
        self.send(
            w.owner,
            ToServer::Get {
                from,
                array: w.array,
                key: w.key,
            },
        )?;
        Ok(true)
    }

    /// Evicts the least recently used cached blocks until `w` fits in the budget.
    fn make_room(&mut self, w: &Wanted<'_>) -> Result<()> {
        while self.cached_bytes + w.bytes > self.budget {
            let victim = self
                .cache
                .iter()
                .filter(|(_, e)| !e.active && matches!(e.slot, Slot::Ready(_)))
                .min_by_key(|(_, e)| e.last_use)
                .map(|(k, _)| *k);
            let Some(victim) = victim else {
                return Err(RuntimeError::program(format!(
                    "worker memory budget exceeded: block {} needs {} bytes, {} of the {} byte budget are held by blocks in use (give more with --worker-memory)",
                    (w.text)(),
                    w.bytes,
                    self.cached_bytes,
                    self.budget
                )));
            };
            if let Some(e) = self.cache.get_mut(&victim) {
                e.slot = Slot::Evicted;
                self.cached_bytes -= e.bytes;
                self.stats.blocks_evicted += 1;
            }
        }
        Ok(())
    }

    /// The data of a block fetched in this section, waiting for it if needed; `None` when it
    /// was not fetched.
    pub fn read(&mut self, w: &Wanted<'_>) -> Result<Option<Arc<Block>>> {
        let Some(e) = self.cache.get_mut(&(w.array, w.key)) else {
            return Ok(None);
        };
        self.clock += 1;
        e.last_use = self.clock;
        if matches!(e.slot, Slot::Evicted) {
            self.get(w, false)?;
        }
        let started = Instant::now();
        let mut waited = false;
        loop {
            match self.cache.get(&(w.array, w.key)).map(|e| &e.slot) {
                Some(Slot::Ready(b)) => {
                    let b = Arc::clone(b);
                    if waited {
                        self.stats.wait_blocks += started.elapsed();
                    }
                    return Ok(Some(b));
                }
                Some(Slot::Pending) => {
                    waited = true;
                    self.receive_one()?;
                }
                _ => return Err(RuntimeError::new("internal: fetched block lost")),
            }
        }
    }

    /// A block this worker put: its fetched copy (if any) is stale and is fetched again when
    /// read.
    pub fn put(&mut self, server: usize, msg: ToServer, array: u32, key: BlockKey) -> Result<()> {
        self.stats.puts += 1;
        if let Some(e) = self.cache.get_mut(&(array, key)) {
            if !matches!(e.slot, Slot::Evicted) {
                self.cached_bytes -= e.bytes;
            }
            e.slot = Slot::Evicted;
        }
        self.send(server, msg)
    }

    /// Blocks fetched in a scope that closes become evictable.
    pub fn release(&mut self, array: u32, key: BlockKey) {
        if let Some(e) = self.cache.get_mut(&(array, key)) {
            e.active = false;
        }
    }

    /// Drops the fetched copies of one array (`delete`).
    pub fn forget(&mut self, array: u32) {
        let mut freed = 0;
        self.cache.retain(|(a, _), e| {
            let keep = *a != array;
            if !keep && !matches!(e.slot, Slot::Evicted) {
                freed += e.bytes;
            }
            keep
        });
        self.cached_bytes -= freed;
    }

    /// Sends `msg(server)` to every server.
    pub fn tell_all_servers(&mut self, msg: impl Fn(Origin) -> ToServer, line: u32) -> Result<()> {
        let from = self.origin(line);
        for s in 0..self.link.servers() {
            self.send(s, msg(from))?;
        }
        Ok(())
    }

    /// `sip_barrier` (SIAL-SPEC §7.6): drop every fetched copy; wait until every server has
    /// applied this worker's requests; meet the other workers; start the next section.
    pub fn barrier(&mut self, line: u32) -> Result<()> {
        let started = Instant::now();
        self.cache.clear();
        self.cached_bytes = 0;
        self.synced = 0;
        self.tell_all_servers(|from| ToServer::Sync { from }, line)?;
        while self.synced < self.link.servers() {
            self.receive_one()?;
        }
        self.link.all_gather(Vec::new())?;
        self.section += 1;
        self.stats.barriers += 1;
        self.stats.barrier += started.elapsed();
        Ok(())
    }

    /// Every block of `array` held by the servers (after a barrier).
    pub fn snapshot(&mut self, array: u32) -> Result<Blocks> {
        self.tell_all_servers(|from| ToServer::Snapshot { from, array }, 0)?;
        let mut blocks = Vec::new();
        let mut got = 0;
        while got < self.link.servers() {
            if let Some(i) = self.snapshots.iter().position(|(a, _)| *a == array) {
                blocks.extend(self.snapshots.swap_remove(i).1);
                got += 1;
            } else {
                self.receive_one()?;
            }
        }
        Ok(blocks)
    }

    /// Ends the program at every server (worker 0 only); returns the servers' figures.
    pub fn end_program(&mut self) -> Result<Vec<ServerStats>> {
        self.ended.clear();
        self.tell_all_servers(|from| ToServer::EndProgram { from }, 0)?;
        while self.ended.len() < self.link.servers() {
            self.receive_one()?;
        }
        Ok(std::mem::take(&mut self.ended))
    }

    pub fn check_abort(&self) -> Result<()> {
        if self.link.aborted() {
            Err(Abort::stopped())
        } else {
            Ok(())
        }
    }
}
