//! The worker's side of the worker–server protocol (SIAL-SPEC §7.3.3–§7.6): asynchronous gets
//! (the first read waits) and prefetches into the [`Cache`], puts, barriers, collectives, and
//! the worker's figures. The link carries the messages; the cache holds the copies; the
//! [`Sites`] judge how far each `get` looks ahead.

use super::cache::{Cache, Entry, Slot};
use super::prefetch::{SiteStats, Sites, merge_sites};
use super::sums::Sums;
use crate::cluster::message::{Claim, Origin, Payload, ServerStats, ToServer, ToWorker};
use crate::cluster::{Abort, WorkerLink};
use crate::error::{Result, RuntimeError};
use crate::options::PrefetchMode;
use crate::store::{Block, BlockKey};
use sial_bytecode::PutOp;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The blocks of one array at one server.
type Blocks = Vec<(BlockKey, Arc<Block>)>;

/// What became of a prefetch request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prefetched {
    Requested,
    /// Already fetched or on its way.
    Present,
    /// The worker memory budget has no room without evicting blocks in use.
    NoRoom,
}

/// Figures of one worker for the end-of-run summary and `--stats`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
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
    /// Requests carrying a put's data: `put +=` terms summed per block go together.
    pub put_messages: u64,
    pub blocks_fetched: u64,
    pub blocks_evicted: u64,
    pub refetched: u64,
    /// Gets served by a copy kept from an earlier section.
    pub kept_hits: u64,
    pub cache_peak_bytes: u64,
    pub barriers: u64,
    /// Per `get` site (program, line), merged over programs.
    pub sites: Vec<SiteStats>,
    /// Per source line (with `--profile`).
    pub lines: Vec<LineProfile>,
    /// The device's figures, when the worker had one.
    pub gpu: Option<crate::device::GpuStats>,
}

/// Time and instruction count of one source line (`--profile`).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LineProfile {
    pub program: u32,
    pub line: u32,
    pub instructions: u64,
    pub time: Duration,
}

/// Adds `more` into `total`, matching by program and line.
pub fn merge_lines(total: &mut Vec<LineProfile>, more: &[LineProfile]) {
    for m in more {
        match total
            .iter_mut()
            .find(|t| t.program == m.program && t.line == m.line)
        {
            Some(t) => {
                t.instructions += m.instructions;
                t.time += m.time;
            }
            None => total.push(*m),
        }
    }
    total.sort_by_key(|l| (l.program, l.line));
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
        self.put_messages += o.put_messages;
        self.blocks_fetched += o.blocks_fetched;
        self.blocks_evicted += o.blocks_evicted;
        self.refetched += o.refetched;
        self.kept_hits += o.kept_hits;
        self.cache_peak_bytes = self.cache_peak_bytes.max(o.cache_peak_bytes);
        self.barriers += o.barriers;
        merge_sites(&mut self.sites, &o.sites);
        merge_lines(&mut self.lines, &o.lines);
        match (&mut self.gpu, &o.gpu) {
            (Some(t), Some(m)) => t.add(m),
            (None, Some(m)) => self.gpu = Some(m.clone()),
            _ => {}
        }
    }

    /// Every site's figures summed.
    pub fn prefetch_totals(&self) -> SiteStats {
        let mut t = SiteStats::default();
        for s in &self.sites {
            t.add(s);
        }
        t
    }
}

/// Fetched copies kept past a barrier hold at most this share of the worker memory budget.
const KEEP_SHARE: usize = 4;

pub(crate) struct Net<'a> {
    pub link: &'a mut dyn WorkerLink,
    cache: Cache,
    sites: Sites,
    pub section: u32,
    /// Per server: whether this worker sent it anything since its last barrier (only those
    /// servers can hold a request of this worker not yet applied).
    unsynced: Vec<bool>,
    /// Whether the link may hold a request whose reply is wanted soon ([`Net::send_held`]).
    holds_reply: bool,
    /// Prefetch requests the link may hold: they go together, a quarter of their site's
    /// depth at a time, each still well ahead of its iteration. One message per prefetch cost
    /// a get of a small block more than all else (docs/benchmarks.md, "Gets and puts in
    /// fixed layouts").
    held_prefetches: usize,
    /// Per server: the `Sync`s of every worker's sections so far (summed at the barriers),
    /// and how many of them this worker has told the server to wait for (`Expect`).
    expected: Vec<u64>,
    told: Vec<u64>,
    /// Replies to `--dump`'s requests: keys (array, server, keys) and blocks (array, server).
    snapshot_keys: Vec<(u32, usize, Vec<BlockKey>)>,
    snapshots: Vec<(u32, usize, Blocks)>,
    ended: Vec<ServerStats>,
    pub stats: WorkerStats,
    /// Per server: prefetched blocks a `get` used in this section, reported at the barrier.
    claims: Vec<Vec<Claim>>,
    /// This section's `put +=` terms, summed per block until sent.
    sums: Sums,
    /// Per array (a bit each): whether this worker changed it at a server in this section.
    changed: Vec<u64>,
    /// Bytes of fetched copies that may stay past a barrier (0 where the transport shares the
    /// server's blocks).
    keep_cap: usize,
}

/// What a get needs to know besides the key.
pub(crate) struct Wanted<'t> {
    pub array: u32,
    pub key: BlockKey,
    pub bytes: usize,
    pub owner: usize,
    pub line: u32,
    pub text: &'t dyn Fn() -> String,
    /// The `get` site asking (its number from `Net::site`).
    pub site: u32,
}

impl<'a> Net<'a> {
    pub fn new(
        link: &'a mut dyn WorkerLink,
        budget: usize,
        prefetch: PrefetchMode,
        program: u32,
        arrays: usize,
        remote_arrays: bool,
    ) -> Net<'a> {
        let servers = link.servers();
        // A program without distributed or served arrays changes none and sends no `Sync`:
        // its barriers count nothing (and its workers meet in a bare barrier).
        let (changed, synced) = if remote_arrays {
            (arrays.div_ceil(64), servers)
        } else {
            (0, 0)
        };
        let keep_cap = if link.shares_blocks() {
            0
        } else {
            budget / KEEP_SHARE
        };
        Net {
            link,
            cache: Cache::new(budget),
            sites: Sites::new(program, prefetch),
            section: 0,
            unsynced: vec![false; servers],
            holds_reply: false,
            held_prefetches: 0,
            expected: vec![0; synced],
            told: vec![0; synced],
            snapshot_keys: Vec::new(),
            snapshots: Vec::new(),
            ended: Vec::new(),
            stats: WorkerStats::default(),
            claims: vec![Vec::new(); servers],
            sums: Sums::default(),
            changed: vec![0; changed],
            keep_cap,
        }
    }

    pub fn prefetch_mode(&self) -> PrefetchMode {
        self.sites.mode()
    }

    /// The worker's own blocks now hold `local` bytes (between block instructions they only
    /// shrink, as scopes close: nothing to evict).
    pub fn set_local(&mut self, local: usize) {
        self.cache.set_local(local);
    }

    /// The worker's own blocks now hold `local` bytes: fetched blocks not in use are evicted
    /// until everything fits in the budget; an error if it cannot.
    pub fn hold_local(&mut self, local: usize, what: &dyn Fn() -> String) -> Result<()> {
        self.cache.set_local(local);
        if self.make_room(0, false) || self.room_from_sums(0)? {
            return Ok(());
        }
        Err(RuntimeError::program(format!(
            "worker memory budget exceeded {}: the worker's local, temp and static blocks hold {} bytes and fetched blocks in use {} bytes, over the {} byte budget (give more with --worker-memory)",
            what(),
            local,
            self.cache.bytes(),
            self.cache.budget()
        )))
    }

    /// The number of the `get` site at `pc` (created at its first execution).
    pub fn site(&mut self, pc: usize, line: u32) -> u32 {
        self.sites.number(pc, line)
    }

    /// A loop is about to fetch about `count` blocks of `bytes` bytes: the cache makes room
    /// for their entries at once, as many as the budget holds and at most
    /// [`crate::store::MOST_SLOTS_AHEAD`]. Grown a doubling at a time, a cache of 3·10⁵ small
    /// blocks stalled a get for 25 ms (docs/benchmarks.md, "Servers: tables sized for their
    /// arrays").
    pub fn expect_fetches(&mut self, count: u64, bytes: usize) {
        let fit = self.cache.budget() / bytes.max(8);
        let most = fit.min(crate::store::MOST_SLOTS_AHEAD);
        self.cache
            .reserve(usize::try_from(count).map_or(most, |n| n.min(most)));
    }

    /// How far the site looks ahead at this execution.
    pub fn depth(&mut self, site: u32) -> usize {
        self.sites.depth(site, self.stats.wait_blocks)
    }

    /// The figures of every site so far.
    pub fn site_stats(&self) -> Vec<SiteStats> {
        self.sites.stats()
    }

    /// Whether `bytes` more fit in the budget beside the fetched blocks, the worker's own
    /// blocks and the sums held, without evicting anything.
    fn fits(&self, bytes: usize) -> bool {
        self.cache.fits(bytes + self.sums.bytes())
    }

    /// Evicts fetched blocks until `bytes` more fit beside the sums held (see
    /// [`Cache::make_room`]).
    fn make_room(&mut self, bytes: usize, for_prefetch: bool) -> bool {
        let bytes = bytes + self.sums.bytes();
        match self.cache.make_room(bytes, for_prefetch, &mut self.sites) {
            Some(evicted) => {
                self.stats.blocks_evicted += evicted;
                true
            }
            None => false,
        }
    }

    pub fn origin(&self, line: u32) -> Origin {
        Origin {
            worker: self.link.rank() as u32,
            section: self.section,
            line,
        }
    }

    /// Sends a request, after the sums it must follow: those of its array, or all of them
    /// for a request about the whole section (a barrier's, the end of the program).
    fn send(&mut self, server: usize, msg: ToServer) -> Result<()> {
        match msg.array() {
            Some(array) if self.sums.holds(array) => {
                let sums = self.sums.take_array(array);
                self.send_sums(sums)?;
            }
            None if !self.sums.is_empty() => self.send_all_sums()?,
            _ => {}
        }
        self.send_now(server, msg)
    }

    fn send_all_sums(&mut self) -> Result<()> {
        let sums = self.sums.take_all();
        self.send_sums(sums)
    }

    fn send_sums(&mut self, sums: Vec<(usize, ToServer)>) -> Result<()> {
        sums.into_iter()
            .try_for_each(|(server, msg)| self.send_now(server, msg))
    }

    /// With no room for `bytes` more, the sums held are sent; whether `bytes` then fit.
    fn room_from_sums(&mut self, bytes: usize) -> Result<bool> {
        if self.sums.is_empty() {
            return Ok(false);
        }
        self.send_all_sums()?;
        Ok(self.make_room(bytes, false))
    }

    fn send_now(&mut self, server: usize, msg: ToServer) -> Result<()> {
        if let Some(u) = self.unsynced.get_mut(server) {
            *u = true;
        }
        if let (Some(&syncs), Some(told)) = (self.expected.get(server), self.told.get_mut(server))
            && *told < syncs
        {
            // The first request after a barrier: it and every later one wait at the server
            // for the earlier sections of every worker.
            *told = syncs;
            let from = msg.origin();
            self.stats.messages_sent += 1;
            self.link.send(server, ToServer::Expect { from, syncs })?;
        }
        if let Some(array) = msg.changes() {
            self.mark_changed(array);
        }
        if matches!(msg, ToServer::Put { .. }) {
            self.stats.put_messages += 1;
        }
        self.holds_reply |= msg.has_reply() && !matches!(msg, ToServer::Get { prefetch: true, .. });
        self.stats.messages_sent += 1;
        self.stats.bytes_sent += msg.payload_bytes() as u64;
        self.link.send(server, msg)
    }

    /// Sends the requests the link holds, where one of them has a reply: the worker turns to
    /// work that may take long, and the reply should be on its way meanwhile.
    pub fn send_held(&mut self) -> Result<()> {
        if std::mem::take(&mut self.holds_reply) {
            self.held_prefetches = 0;
            self.link.send_held()?;
        }
        Ok(())
    }

    /// Files every reply that has already arrived.
    fn drain(&mut self) -> Result<()> {
        while let Some(msg) = self.link.try_recv()? {
            self.file(msg)?;
        }
        Ok(())
    }

    /// Receives one reply and files it.
    fn receive_one(&mut self) -> Result<()> {
        let msg = self.link.recv()?;
        self.file(msg)
    }

    fn file(&mut self, msg: ToWorker) -> Result<()> {
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
                    && let Some(e) = self.cache.entry((array, key))
                {
                    if e.discard > 0 {
                        e.discard -= 1;
                    } else if matches!(e.slot, Slot::Pending) {
                        e.slot = Slot::Ready(block);
                    }
                }
            }
            ToWorker::Missing {
                array,
                key,
                section,
            } => self.missing(array, key, section)?,
            ToWorker::SnapshotKeys {
                server,
                array,
                keys,
            } => self.snapshot_keys.push((array, server as usize, keys)),
            ToWorker::Snapshot {
                server,
                array,
                blocks,
            } => self.snapshots.push((array, server as usize, blocks)),
            ToWorker::Ended { stats, .. } => self.ended.push(stats),
        }
        Ok(())
    }

    /// `get`/`request`: nothing to do when the block was fetched in this section; otherwise
    /// the request goes out and the worker continues.
    pub fn get(&mut self, w: &Wanted<'_>, active: bool) -> Result<bool> {
        self.stats.gets += 1;
        let clock = self.cache.tick();
        if let Some(e) = self.cache.entry((w.array, w.key)) {
            e.last_use = clock;
            e.active |= active;
            e.unread = true;
            if !matches!(e.slot, Slot::Evicted) {
                if e.speculative {
                    e.speculative = false;
                    // The prefetch is credited to the site that requested it, which may be
                    // another get of the same block: each site's requested = used + wasted.
                    let requester = std::mem::replace(&mut e.site, w.site);
                    if let Some(s) = self.sites.get(requester) {
                        s.used();
                    }
                    self.claims[w.owner].push(Claim {
                        array: w.array,
                        key: w.key,
                        line: w.line,
                    });
                } else if e.kept {
                    // The server learns of the read as of a prefetched block's.
                    e.kept = false;
                    e.site = w.site;
                    self.stats.kept_hits += 1;
                    self.claims[w.owner].push(Claim {
                        array: w.array,
                        key: w.key,
                        line: w.line,
                    });
                }
                self.stats.get_hits += 1;
                return Ok(false);
            }
            e.site = w.site;
            e.prefetched = false;
            self.room_for_get(w)?;
            if let Some(e) = self.cache.entry((w.array, w.key)) {
                e.slot = Slot::Pending;
            }
            self.cache.charge(w.bytes);
            self.stats.refetched += 1;
        } else {
            self.room_for_get(w)?;
            let mut e = Entry::new(w.bytes, w.site, clock);
            e.active = active;
            e.unread = true;
            self.cache.insert((w.array, w.key), e);
        }
        self.request(w, false)?;
        Ok(true)
    }

    fn request(&mut self, w: &Wanted<'_>, prefetch: bool) -> Result<()> {
        self.stats.blocks_fetched += 1;
        self.stats.cache_peak_bytes = self.stats.cache_peak_bytes.max(self.cache.bytes() as u64);
        let from = self.origin(w.line);
        self.send(
            w.owner,
            ToServer::Get {
                from,
                array: w.array,
                key: w.key,
                prefetch,
            },
        )
    }

    /// A `get` the program will make in a coming iteration: requested now unless the block
    /// is here or on its way, or there is no room for it without evicting blocks in use or
    /// other prefetched blocks.
    pub fn prefetch(&mut self, w: &Wanted<'_>) -> Result<Prefetched> {
        let evicted = match self.cache.peek((w.array, w.key)) {
            Some(e) if !matches!(e.slot, Slot::Evicted) => return Ok(Prefetched::Present),
            Some(_) => true,
            None => false,
        };
        if !self.make_room(w.bytes, true) {
            if let Some(s) = self.sites.get(w.site) {
                s.no_room();
            }
            return Ok(Prefetched::NoRoom);
        }
        let clock = self.cache.tick();
        if evicted {
            if let Some(e) = self.cache.entry((w.array, w.key)) {
                e.slot = Slot::Pending;
                e.site = w.site;
                e.speculative = true;
                e.prefetched = true;
                e.last_use = clock;
            }
            self.cache.charge(w.bytes);
        } else {
            let mut e = Entry::new(w.bytes, w.site, clock);
            e.speculative = true;
            e.prefetched = true;
            self.cache.insert((w.array, w.key), e);
        }
        let depth = self.sites.get(w.site).map_or(0, |s| {
            s.requested();
            s.ahead()
        });
        self.request(w, true)?;
        self.held_prefetches += 1;
        if self.held_prefetches * 4 >= depth {
            self.holds_reply = true;
        }
        Ok(Prefetched::Requested)
    }

    /// A prefetched block the server does not hold: forgotten, unless a `get` has claimed it
    /// meanwhile; then a plain get, so that the server reports the missing block.
    fn missing(&mut self, array: u32, key: BlockKey, section: u32) -> Result<()> {
        if section != self.section {
            return Ok(());
        }
        let Some(e) = self.cache.entry((array, key)) else {
            return Ok(());
        };
        if e.discard > 0 {
            e.discard -= 1;
            return Ok(());
        }
        if !matches!(e.slot, Slot::Pending) {
            return Ok(());
        }
        if e.speculative {
            self.cache.remove((array, key));
            return Ok(());
        }
        // Claimed: ask again for real; the server's answer names the block and the line.
        for (owner, claims) in self.claims.iter_mut().enumerate() {
            if let Some(i) = claims.iter().position(|c| c.array == array && c.key == key) {
                let line = claims.remove(i).line;
                let from = self.origin(line);
                return self.send(
                    owner,
                    ToServer::Get {
                        from,
                        array,
                        key,
                        prefetch: false,
                    },
                );
            }
        }
        Err(RuntimeError::new("internal: a claimed prefetch was lost"))
    }

    /// Room for the block of a `get`, or the error naming it.
    fn room_for_get(&mut self, w: &Wanted<'_>) -> Result<()> {
        if self.make_room(w.bytes, false) || self.room_from_sums(w.bytes)? {
            return Ok(());
        }
        Err(RuntimeError::program(format!(
            "worker memory budget exceeded: block {} needs {} bytes, {} of the {} byte budget are held by fetched blocks in use and {} by the worker's local, temp and static blocks (give more with --worker-memory)",
            (w.text)(),
            w.bytes,
            self.cache.bytes(),
            self.cache.budget(),
            self.cache.local_bytes()
        )))
    }

    /// The data of a block fetched in this section, waiting for it if needed; `None` when it
    /// was not fetched.
    pub fn read(&mut self, w: &Wanted<'_>) -> Result<Option<Arc<Block>>> {
        let clock = self.cache.tick();
        // The first look decides whether the block was fetched; later ones follow its reply.
        let mut first = true;
        // The clock starts where the block is not here yet: most reads find it.
        let mut started = None;
        let mut waited = false;
        loop {
            let Some(e) = self.cache.entry((w.array, w.key)) else {
                return match first {
                    true => Ok(None),
                    false => Err(RuntimeError::new("internal: fetched block lost")),
                };
            };
            if std::mem::take(&mut first) {
                // A prefetched block no get has asked for is not fetched as far as the
                // program knows.
                if e.speculative || e.kept {
                    return Ok(None);
                }
                e.last_use = clock;
                if matches!(e.slot, Slot::Evicted) {
                    self.get(w, false)?;
                    continue;
                }
            }
            match e {
                Entry {
                    slot: Slot::Ready(b),
                    unread,
                    site,
                    prefetched,
                    ..
                } => {
                    let b = Arc::clone(b);
                    let wait = started.filter(|_| waited).map(|s: Instant| {
                        crate::trace::span(
                            "wait",
                            || format!("wait for {}", (w.text)()),
                            s,
                            false,
                            &[],
                        );
                        s.elapsed()
                    });
                    if std::mem::take(unread)
                        && let Some(s) = self.sites.get(*site)
                    {
                        s.read(wait, *prefetched);
                    }
                    if let Some(d) = wait {
                        self.stats.wait_blocks += d;
                    }
                    return Ok(Some(b));
                }
                Entry {
                    slot: Slot::Pending,
                    ..
                } => {
                    // Replies already here are not waited for.
                    if started.is_none() {
                        started = Some(Instant::now());
                        self.drain()?;
                        continue;
                    }
                    waited = true;
                    self.receive_one()?;
                }
                Entry {
                    slot: Slot::Evicted,
                    ..
                } => return Err(RuntimeError::new("internal: fetched block lost")),
            }
        }
    }

    /// A distributed or served block written outside put/prepare: as in ACES4, the worker's
    /// own copy changes (replacing any fetched copy) and later reads and gets in this section
    /// see it; it is never sent to a server and is dropped at the next barrier.
    pub fn write_own(&mut self, w: &Wanted<'_>, block: Block) -> Result<()> {
        self.cache.invalidate((w.array, w.key), &mut self.sites);
        self.room_for_get(w)?;
        let clock = self.cache.tick();
        let e = self
            .cache
            .entry_or((w.array, w.key), || Entry::new(w.bytes, w.site, 0));
        e.slot = Slot::Ready(Arc::new(block));
        e.last_use = clock;
        e.bytes = w.bytes;
        e.speculative = false;
        e.prefetched = false;
        e.own = true;
        self.cache.charge(w.bytes);
        self.stats.cache_peak_bytes = self.stats.cache_peak_bytes.max(self.cache.bytes() as u64);
        Ok(())
    }

    /// A block this worker put: its fetched copy (if any) is stale and is fetched again when
    /// read. A `put +=` of a block is summed with this section's other terms to the block
    /// (where a request costs a message and the worker memory budget has room), and sent later.
    pub fn put(&mut self, server: usize, msg: ToServer, array: u32, key: BlockKey) -> Result<()> {
        self.stats.puts += 1;
        self.cache.invalidate((array, key), &mut self.sites);
        match msg {
            ToServer::Put {
                op: PutOp::Accumulate,
                payload: Payload::Block(_),
                ..
            } if self.link.sums_puts() => self.sum(server, msg),
            msg => self.send(server, msg),
        }
    }

    /// A `put +=` of a block to a block whose sum this worker holds is added to that sum
    /// straight from the caller's block, without a copy; whether it was (else the caller
    /// makes the request and sends it with [`Net::put`]).
    pub fn put_to_sum(&mut self, array: u32, key: BlockKey, shape: &[usize], data: &[f64]) -> bool {
        let added = self.link.sums_puts()
            && self.fits(self.sums.term_growth(array, &key, data.len()))
            && self.sums.add_to_sum(array, &key, shape, data);
        if added {
            self.mark_changed(array);
            self.stats.puts += 1;
            self.cache.invalidate((array, key), &mut self.sites);
        }
        added
    }

    fn mark_changed(&mut self, array: u32) {
        if let Some(w) = self.changed.get_mut(array as usize / 64) {
            *w |= 1 << (array % 64);
        }
    }

    fn sum(&mut self, server: usize, msg: ToServer) -> Result<()> {
        if !self.fits(self.sums.growth(&msg)) {
            self.send_all_sums()?;
        }
        // With no room even with no sums held, the term goes as it is.
        let unsummed = if self.fits(self.sums.growth(&msg)) {
            self.sums.add(server, msg)
        } else {
            Some(msg)
        };
        match unsummed {
            Some(msg) => self.send_now(server, msg),
            None => Ok(()),
        }
    }

    /// Blocks fetched in a scope that closes become evictable.
    pub fn release(&mut self, array: u32, key: BlockKey) {
        self.cache.release((array, key));
    }

    /// Drops the fetched copies of one array (`delete`).
    pub fn forget(&mut self, array: u32) {
        self.cache.forget(array, &mut self.sites);
    }

    /// Sends `msg(server)` to every server.
    pub fn tell_all_servers(&mut self, msg: impl Fn(Origin) -> ToServer, line: u32) -> Result<()> {
        let from = self.origin(line);
        for s in 0..self.link.servers() {
            self.send(s, msg(from))?;
        }
        Ok(())
    }

    /// `sip_barrier` (SIAL-SPEC §7.6): tell every server this worker sent anything since its
    /// last barrier that its section ends here (`Sync`, no reply); meet the other workers,
    /// learning which arrays any of them changed and how many `Sync`s each server must apply
    /// before it handles a request of the next section (`Expect`, sent ahead of this worker's
    /// next request to it); drop the fetched copies of the changed arrays (and, past the
    /// budget kept, of others); start the next section. A reply still on its way belongs to
    /// the section before and is dropped when it comes.
    pub fn barrier(&mut self, line: u32) -> Result<()> {
        let started = Instant::now();
        self.send_all_sums()?;
        let from = self.origin(line);
        for server in 0..self.claims.len() {
            let blocks = std::mem::take(&mut self.claims[server]);
            if !blocks.is_empty() {
                self.send(server, ToServer::Claims { from, blocks })?;
            }
        }
        // A server this worker sent nothing since its last barrier has nothing of this
        // worker's to apply; the other workers sync with the servers they wrote to.
        let mut syncs = vec![0; self.expected.len()];
        for (server, sent) in syncs.iter_mut().enumerate() {
            if self.unsynced[server] {
                self.send(server, ToServer::Sync { from })?;
                self.unsynced[server] = false;
                *sent = 1;
            }
        }
        self.link.barrier_meet(&mut self.changed, &mut syncs)?;
        for (expected, n) in self.expected.iter_mut().zip(syncs) {
            *expected += n;
        }
        let changed = &self.changed;
        let unchanged = |array: u32| {
            changed
                .get(array as usize / 64)
                .is_some_and(|w| w & (1 << (array % 64)) == 0)
        };
        self.cache
            .end_section(unchanged, self.keep_cap, &mut self.sites);
        self.changed.fill(0);
        self.section += 1;
        self.stats.barriers += 1;
        self.stats.barrier += started.elapsed();
        crate::trace::span("barrier", || "barrier".into(), started, false, &[]);
        crate::trace::counter(
            "worker memory",
            &[("own MiB", self.cache.local_bytes() as f64 / 1048576.0)],
        );
        Ok(())
    }

    /// The keys of every block of `array` the servers hold (after a barrier), sorted, each
    /// with the server that holds it.
    pub fn snapshot_keys(&mut self, array: u32) -> Result<Vec<(BlockKey, usize)>> {
        self.tell_all_servers(|from| ToServer::SnapshotKeys { from, array }, 0)?;
        let mut keys = Vec::new();
        let mut got = 0;
        while got < self.link.servers() {
            if let Some(i) = self.snapshot_keys.iter().position(|r| r.0 == array) {
                let (_, server, k) = self.snapshot_keys.swap_remove(i);
                keys.extend(k.into_iter().map(|k| (k, server)));
                got += 1;
            } else {
                self.receive_one()?;
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// The blocks `keys` (from [`Net::snapshot_keys`]) of `array`, in that order.
    pub fn snapshot_blocks(&mut self, array: u32, keys: &[(BlockKey, usize)]) -> Result<Blocks> {
        let mut servers: Vec<usize> = keys.iter().map(|k| k.1).collect();
        servers.sort_unstable();
        servers.dedup();
        for &server in &servers {
            let from = self.origin(0);
            let keys = keys.iter().filter(|k| k.1 == server).map(|k| k.0).collect();
            self.send(server, ToServer::Snapshot { from, array, keys })?;
        }
        let mut blocks = Vec::with_capacity(keys.len());
        let mut got = 0;
        while got < servers.len() {
            if let Some(i) = self.snapshots.iter().position(|r| r.0 == array) {
                blocks.extend(self.snapshots.swap_remove(i).2);
                got += 1;
            } else {
                self.receive_one()?;
            }
        }
        let order: std::collections::HashMap<BlockKey, usize> =
            keys.iter().enumerate().map(|(i, k)| (k.0, i)).collect();
        blocks.sort_by_key(|(k, _)| order.get(k).copied().unwrap_or(usize::MAX));
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
