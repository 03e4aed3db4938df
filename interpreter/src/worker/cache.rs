//! The worker's copies of distributed and served blocks fetched in this section (SIAL-SPEC
//! §7.3.4), under the worker memory budget shared with the worker's own blocks. Copies of
//! blocks that no worker changed in a section may stay for the next one (a `get` there claims
//! them instead of fetching again). Prefetched blocks (docs/ARCHITECTURE.md "Prefetch") live
//! here too: speculative until a `get` claims them, first to be evicted, and counted as waste
//! at their site when dropped unclaimed.

use super::prefetch::Sites;
use crate::store::{Block, BlockKey, BlockKeyMap};
use std::sync::Arc;

/// A fetched block of this section (or kept from an earlier one).
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
    /// Fetched in an earlier section and unchanged since: a `get` claims it (the program
    /// sees it only then), first to be evicted.
    pub(super) kept: bool,
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
            kept: false,
        }
    }

    /// Drops the data (a put, an eviction); a pending reply will be discarded. A get fetches
    /// the block again, in this section.
    fn invalidate(&mut self) {
        if matches!(self.slot, Slot::Pending) {
            self.discard += 1;
        }
        self.slot = Slot::Evicted;
        self.kept = false;
    }

    fn present(&self) -> bool {
        !matches!(self.slot, Slot::Evicted)
    }
}

type Key = (u32, BlockKey);

pub(super) struct Cache {
    entries: BlockKeyMap<Key, Entry>,
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
            entries: BlockKeyMap::default(),
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

    /// Room for `n` more entries without growing the table (a hint: where the allocator
    /// refuses, the table grows as it goes).
    pub(super) fn reserve(&mut self, n: usize) {
        let _ = self.entries.try_reserve(n);
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

    /// The end of a section (a barrier): the copies that have arrived of blocks whose arrays
    /// `unchanged` names stay for the next section, the most recently used first, up to `cap`
    /// bytes; every other copy is dropped.
    pub(super) fn end_section(
        &mut self,
        unchanged: impl Fn(u32) -> bool,
        cap: usize,
        sites: &mut Sites,
    ) {
        let mut bytes = 0;
        self.entries.retain(|key, e| {
            sites.waste(e);
            let keep = !e.own && matches!(e.slot, Slot::Ready(_)) && unchanged(key.0);
            if keep {
                bytes += e.bytes;
            }
            keep
        });
        if bytes > cap {
            // Only the most recently used fit.
            let mut uses: Vec<(u64, Key, usize)> = self
                .entries
                .iter()
                .map(|(k, e)| (e.last_use, *k, e.bytes))
                .collect();
            uses.sort_unstable_by_key(|u| std::cmp::Reverse(u.0));
            bytes = 0;
            for (_, key, size) in uses {
                if bytes + size <= cap {
                    bytes += size;
                } else {
                    self.entries.remove(&key);
                }
            }
        }
        for e in self.entries.values_mut() {
            e.kept = true;
            e.active = false;
            e.prefetched = false;
            e.unread = false;
            e.discard = 0;
        }
        self.bytes = bytes;
    }

    /// Evicts blocks until `bytes` more fit in the budget: copies kept from earlier sections
    /// and not yet claimed first, then prefetched blocks not yet claimed (the farthest ahead
    /// first), then the least recently used. A prefetch
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
            // A copy kept from an earlier section goes first, and whole: it is no block of
            // this section.
            let kept = self
                .entries
                .iter()
                .filter(|(_, e)| e.kept)
                .min_by_key(|(_, e)| e.last_use)
                .map(|(k, _)| *k);
            if let Some(e) = kept.and_then(|k| self.entries.remove(&k)) {
                self.bytes -= e.bytes;
                evicted += 1;
                continue;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::PrefetchMode;

    fn key(array: u32, segment: i32) -> Key {
        let mut segments = [1; 6];
        segments[0] = segment;
        (
            array,
            BlockKey {
                segments,
                parents: [0; 6],
            },
        )
    }

    /// A cache of `budget` bytes holding blocks of one element (8 bytes), used at `clock`.
    fn ready(cache: &mut Cache, k: Key, clock: u64) -> &mut Entry {
        let mut e = Entry::new(8, 0, clock);
        e.slot = Slot::Ready(Arc::new(Block::zeros(vec![1]).expect("block")));
        cache.insert(k, e);
        cache.entry(k).expect("inserted")
    }

    #[test]
    fn a_section_ends_keeping_copies_of_unchanged_arrays_newest_first() {
        let mut sites = Sites::new(0, PrefetchMode::Off);
        let mut cache = Cache::new(1 << 20);
        for (segment, clock) in [(1, 5), (2, 9), (3, 7)] {
            ready(&mut cache, key(0, segment), clock);
        }
        ready(&mut cache, key(1, 1), 10);
        ready(&mut cache, key(0, 4), 11).own = true;
        cache.insert(key(0, 5), Entry::new(8, 0, 12));
        // Array 1 changed; 16 bytes may stay: the two most recently used of array 0.
        cache.end_section(|array| array == 0, 16, &mut sites);
        assert_eq!(cache.bytes(), 16);
        for (k, stays) in [
            (key(0, 2), true),
            (key(0, 3), true),
            (key(0, 1), false),
            (key(1, 1), false),
            (key(0, 4), false),
            (key(0, 5), false),
        ] {
            assert_eq!(cache.peek(k).is_some(), stays, "{k:?}");
            if let Some(e) = cache.peek(k) {
                assert!(e.kept && !e.active && !e.speculative);
            }
        }
    }

    #[test]
    fn kept_copies_are_evicted_first_and_whole() {
        let mut sites = Sites::new(0, PrefetchMode::Off);
        let mut cache = Cache::new(24);
        ready(&mut cache, key(0, 1), 1);
        ready(&mut cache, key(0, 2), 2);
        cache.end_section(|_| true, 24, &mut sites);
        // A block of this section, used before the kept ones: still the kept go first.
        ready(&mut cache, key(1, 1), 0);
        assert_eq!(cache.make_room(8, false, &mut sites), Some(1));
        assert!(cache.peek(key(0, 1)).is_none(), "the older kept copy goes");
        assert!(cache.peek(key(0, 2)).is_some() && cache.peek(key(1, 1)).is_some());
        assert_eq!(cache.bytes(), 16);
        // A kept copy made stale (this worker's put) is an entry of this section to fetch.
        cache.invalidate(key(0, 2), &mut sites);
        let e = cache.peek(key(0, 2)).expect("entry");
        assert!(!e.kept && !e.present());
        assert_eq!(cache.bytes(), 8);
    }
}
