//! The worker's copies of distributed and served blocks fetched in this section (SIAL-SPEC
//! §7.3.4), under the worker memory budget shared with the worker's own blocks. Prefetched
//! blocks (docs/ARCHITECTURE.md "Prefetch") live here too: speculative until a `get` claims
//! them, first to be evicted, and counted as waste at their site when dropped unclaimed.

use super::prefetch::Sites;
use crate::store::{Block, BlockKey, KeyMap};
use std::sync::Arc;

/// A fetched block of this section.
pub(super) enum Slot {
    /// Requested; the reply has not arrived.
    Pending,
    Ready(Arc<Block>),
    /// Dropped to make room; a read fetches it again.
    Evicted,
}

impl Drop for Slot {
    /// A fetched copy no one else holds leaves its buffer for the next block (`crate::spare`).
    fn drop(&mut self) {
        if let Slot::Ready(b) = self
            && let Some(b) = Arc::get_mut(b)
        {
            crate::spare::give(std::mem::take(&mut b.data));
        }
    }
}

/// What the cache knows of one block.
pub(super) struct Entry {
    pub(super) slot: Slot,
    /// Fetched in a scope that is still open: not evictable.
    pub(super) active: bool,
    pub(super) last_use: u64,
    pub(super) bytes: usize,
    /// The site that fetched it (prefetch figures).
    pub(super) site: u32,
    /// Prefetched and not yet claimed by a `get`.
    pub(super) speculative: bool,
    /// Asked for by a prefetch (claimed or not).
    pub(super) prefetched: bool,
    /// A `get` named it and no read has looked at it since (hit-ratio figures).
    pub(super) unread: bool,
    /// Replies still on their way for requests made before the copy became stale (a put or an
    /// eviction while pending): dropped when they come, in order, from the one owner.
    pub(super) discard: u32,
    /// Written by this worker outside put (ACES4's worker-own copy, SIAL-SPEC §4.7): there is
    /// no other copy of these values, so it is never evicted; it dies at the barrier.
    pub(super) own: bool,
}

impl Entry {
    pub(super) fn new(bytes: usize, site: u32, clock: u64) -> Entry {
        Entry {
            slot: Slot::Pending,
            active: false,
            last_use: clock,
            bytes,
            site,
            speculative: false,
            prefetched: false,
            unread: false,
            discard: 0,
            own: false,
        }
    }

    /// Drops the data (a put, an eviction); a pending reply will be discarded.
    fn invalidate(&mut self) {
        if matches!(self.slot, Slot::Pending) {
            self.discard += 1;
        }
        self.slot = Slot::Evicted;
    }

    fn present(&self) -> bool {
        !matches!(self.slot, Slot::Evicted)
    }
}

type Key = (u32, BlockKey);

pub(super) struct Cache {
    entries: KeyMap<Key, Entry>,
    /// Bytes of the blocks present (pending or ready).
    bytes: usize,
    budget: usize,
    /// Bytes of the worker's own blocks (local, temp, static, regions): the budget's rest is
    /// for fetched blocks (and the worker's sums of `put +=` terms, which `Net` counts in the
    /// bytes it asks room for).
    local_bytes: usize,
    /// Counts uses, for least-recently-used eviction.
    clock: u64,
}

impl Cache {
    pub(super) fn new(budget: usize) -> Cache {
        Cache {
            entries: KeyMap::default(),
            bytes: 0,
            budget,
            local_bytes: 0,
            clock: 0,
        }
    }

    /// The next use's time stamp.
    pub(super) fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    pub(super) fn entry(&mut self, key: Key) -> Option<&mut Entry> {
        self.entries.get_mut(&key)
    }

    pub(super) fn peek(&self, key: Key) -> Option<&Entry> {
        self.entries.get(&key)
    }

    /// `entry`'s block is on its way or here: its bytes count.
    pub(super) fn insert(&mut self, key: Key, entry: Entry) {
        self.bytes += entry.bytes;
        self.entries.insert(key, entry);
    }

    /// The entry of `key`, or a new one made by `new` (not counted until [`Cache::charge`]).
    pub(super) fn entry_or(&mut self, key: Key, new: impl FnOnce() -> Entry) -> &mut Entry {
        self.entries.entry(key).or_insert_with(new)
    }

    /// An evicted entry's block is fetched again: its bytes count again.
    pub(super) fn charge(&mut self, bytes: usize) {
        self.bytes += bytes;
    }

    /// Forgets a pending block the server does not hold.
    pub(super) fn remove(&mut self, key: Key) {
        if let Some(e) = self.entries.remove(&key)
            && e.present()
        {
            self.bytes -= e.bytes;
        }
    }

    /// Bytes of the blocks present.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn budget(&self) -> usize {
        self.budget
    }

    pub(super) fn local_bytes(&self) -> usize {
        self.local_bytes
    }

    /// The worker's own blocks now hold `local` bytes.
    pub(super) fn set_local(&mut self, local: usize) {
        self.local_bytes = local;
    }

    /// Whether `bytes` more fit in the budget without evicting anything.
    pub(super) fn fits(&self, bytes: usize) -> bool {
        self.bytes + self.local_bytes + bytes <= self.budget
    }

    /// The copy of `key` is stale (a put, or the worker's own write): dropped, and a reply
    /// still on its way will be too.
    pub(super) fn invalidate(&mut self, key: Key, sites: &mut Sites) {
        if let Some(e) = self.entries.get_mut(&key) {
            if e.present() {
                self.bytes -= e.bytes;
            }
            sites.waste(e);
            e.invalidate();
        }
    }

    /// Blocks fetched in a scope that closes become evictable.
    pub(super) fn release(&mut self, key: Key) {
        if let Some(e) = self.entries.get_mut(&key) {
            e.active = false;
        }
    }

    /// Drops the copies of one array (`delete`).
    pub(super) fn forget(&mut self, array: u32, sites: &mut Sites) {
        let mut freed = 0;
        self.entries.retain(|(a, _), e| {
            let keep = *a != array;
            if !keep {
                if e.present() {
                    freed += e.bytes;
                }
                sites.waste(e);
            }
            keep
        });
        self.bytes -= freed;
    }

    /// Drops every copy (a barrier).
    pub(super) fn clear(&mut self, sites: &mut Sites) {
        for e in self.entries.values_mut() {
            sites.waste(e);
        }
        self.entries.clear();
        self.bytes = 0;
    }

    /// Evicts blocks until `bytes` more fit in the budget: prefetched blocks not yet claimed
    /// first (the farthest ahead first), then the least recently used. A prefetch
    /// (`for_prefetch`) evicts neither blocks in use nor other prefetched blocks. Returns the
    /// number of blocks evicted, or `None` when nothing more can go.
    pub(super) fn make_room(
        &mut self,
        bytes: usize,
        for_prefetch: bool,
        sites: &mut Sites,
    ) -> Option<u64> {
        let mut evicted = 0;
        while !self.fits(bytes) {
            let speculative = if for_prefetch {
                None
            } else {
                self.entries
                    .iter()
                    .filter(|(_, e)| e.speculative && e.present())
                    .max_by_key(|(_, e)| e.last_use)
                    .map(|(k, _)| *k)
            };
            let victim = speculative.or_else(|| {
                self.entries
                    .iter()
                    .filter(|(_, e)| {
                        !e.active && !e.speculative && !e.own && matches!(e.slot, Slot::Ready(_))
                    })
                    .min_by_key(|(_, e)| e.last_use)
                    .map(|(k, _)| *k)
            })?;
            if let Some(e) = self.entries.get_mut(&victim) {
                sites.waste(e);
                e.invalidate();
                self.bytes -= e.bytes;
                evicted += 1;
            }
        }
        Some(evicted)
    }
}
