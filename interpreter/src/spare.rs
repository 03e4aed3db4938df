//! Spare block buffers: the data of blocks that are gone (a temp block at the end of its loop
//! body, a block replaced by a new value, a put's term once summed or sent, a fetched copy
//! dropped at a barrier), kept by the process for its next block of the same length. A block
//! whose every element is about to be written (a copy, a contraction `d = l * r`, block data
//! arriving in a message) takes one as it is: no zeroing pass and no page faults on fresh
//! memory, which the allocator's zeroed memory costs for every block (docs/benchmarks.md,
//! "Spare block buffers").
//!
//! One pool per process, not per thread: with ranks as threads, the buffers of put terms are
//! let go by the server thread and wanted by the worker threads.

use std::sync::Mutex;

/// Bytes of spare buffers a process keeps at most: a few blocks of the largest sizes jobs use.
/// They are outside the worker and server memory budgets, so a process whose ranks have
/// budgets keeps at most a sixteenth of the smallest ([`limit`]).
const KEEP_BYTES: usize = 128 << 20;
/// Buffers kept at most (searched by length, newest first).
const KEEP_BUFFERS: usize = 48;
/// Shorter buffers go back to the allocator: it serves them from its caches, and zeroing them
/// costs next to nothing.
const SHORTEST: usize = 512;

struct Spares {
    /// Oldest first.
    buffers: Vec<Vec<f64>>,
    /// Their capacities in bytes.
    bytes: usize,
    /// Bytes kept at most.
    limit: usize,
}

impl Spares {
    const fn new() -> Spares {
        Spares {
            buffers: Vec::new(),
            bytes: 0,
            limit: KEEP_BYTES,
        }
    }

    fn give(&mut self, data: Vec<f64>) {
        let bytes = data.capacity() * 8;
        if data.len() < SHORTEST || bytes > self.limit {
            return;
        }
        self.make_room(bytes);
        self.bytes += bytes;
        self.buffers.push(data);
    }

    /// Frees the oldest buffers until `bytes` more fit.
    fn make_room(&mut self, bytes: usize) {
        while !self.buffers.is_empty()
            && (self.buffers.len() >= KEEP_BUFFERS || self.bytes + bytes > self.limit)
        {
            let oldest = self.buffers.remove(0);
            self.bytes -= oldest.capacity() * 8;
        }
    }

    fn take(&mut self, n: usize) -> Option<Vec<f64>> {
        let i = self.buffers.iter().rposition(|b| b.len() == n)?;
        let data = self.buffers.remove(i);
        self.bytes -= data.capacity() * 8;
        Some(data)
    }
}

static SPARES: Mutex<Spares> = Mutex::new(Spares::new());

/// Runs `f` on the pool; a panic elsewhere while holding it leaves a pool that is still sound
/// (every step keeps `bytes` equal to what `buffers` hold or frees the buffer being moved).
fn with<T>(f: impl FnOnce(&mut Spares) -> T) -> T {
    let mut s = SPARES.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut s)
}

/// A rank of this process works under a memory budget of `budget` bytes: the process keeps
/// spare buffers of at most a sixteenth of it (of the smallest budget given).
pub(crate) fn limit(budget: usize) {
    with(|s| {
        s.limit = s.limit.min(budget / 16);
        s.make_room(0);
    });
}

/// Keeps `data` for a later block of its length (or frees it).
pub(crate) fn give(data: Vec<f64>) {
    if data.len() >= SHORTEST {
        with(|s| s.give(data));
    }
}

/// `n` values to be overwritten, every one, before they are read: a spare buffer's old values,
/// or zeros. `None` where the allocator refuses.
pub(crate) fn overwritable(n: usize) -> Option<Vec<f64>> {
    let mut data = spare(n).or_else(|| crate::store::zeroed(n))?;
    if cfg!(debug_assertions) {
        // Debug builds (the tests) poison the values: a caller that reads one before writing
        // it gets NaN, and the results it feeds show it.
        data.fill(f64::NAN);
    }
    Some(data)
}

/// A copy of `src`: in a spare buffer, or in memory from the allocator (not zeroed first).
/// `None` where the allocator refuses.
pub(crate) fn copy(src: &[f64]) -> Option<Vec<f64>> {
    if let Some(mut data) = spare(src.len()) {
        data.copy_from_slice(src);
        return Some(data);
    }
    let mut data = Vec::new();
    data.try_reserve_exact(src.len()).ok()?;
    data.extend_from_slice(src);
    Some(data)
}

/// `n` zeros: a spare buffer zero-filled (memory in use, so no page faults), or the allocator's
/// zeroed memory.
pub(crate) fn zeros(n: usize) -> Option<Vec<f64>> {
    match spare(n) {
        Some(mut data) => {
            data.fill(0.0);
            Some(data)
        }
        None => crate::store::zeroed(n),
    }
}

fn spare(n: usize) -> Option<Vec<f64>> {
    if n < SHORTEST {
        return None;
    }
    with(|s| s.take(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_serves_the_next_block_of_its_length() {
        let mut s = Spares::new();
        let a = vec![3.5; 1237];
        let at = a.as_ptr();
        s.give(a);
        assert_eq!(s.take(1238), None, "another length is not served from it");
        let b = s.take(1237).expect("kept");
        assert_eq!(b.as_ptr(), at, "the same buffer");
        assert!(b.iter().all(|&x| x == 3.5), "as it was");
        assert_eq!(s.bytes, 0);
    }

    #[test]
    fn overwritable_values_are_poisoned_in_debug_builds_and_zeros_are_zeros() {
        let a = overwritable(2000).expect("memory");
        assert_eq!(a.len(), 2000);
        if cfg!(debug_assertions) {
            assert!(a.iter().all(|x| x.is_nan()));
        }
        give(a);
        assert_eq!(zeros(2000).expect("memory"), vec![0.0; 2000]);
        let src: Vec<f64> = (0..2000).map(f64::from).collect();
        assert_eq!(copy(&src), Some(src.clone()), "from the allocator");
        give(vec![7.0; 2000]);
        assert_eq!(copy(&src), Some(src), "into a spare buffer");
        assert_eq!(overwritable(3).expect("memory").len(), 3);
    }

    #[test]
    fn spares_are_bounded_by_count_and_bytes_and_short_buffers_are_not_kept() {
        let mut s = Spares::new();
        s.give(vec![1.0; SHORTEST - 1]);
        assert!(s.buffers.is_empty());
        for _ in 0..KEEP_BUFFERS + 5 {
            s.give(vec![1.0; SHORTEST]);
        }
        assert_eq!(s.buffers.len(), KEEP_BUFFERS);
        let big = KEEP_BYTES / 8 / 2;
        s.give(vec![2.0; big]);
        s.give(vec![3.0; big]);
        assert!(s.bytes <= KEEP_BYTES, "{} bytes kept", s.bytes);
        assert_eq!(s.buffers.len(), 2, "the oldest went first to make room");
        assert_eq!(s.take(big).map(|b| b[0]), Some(3.0), "the newest first");
        assert_eq!(s.take(big).map(|b| b[0]), Some(2.0));
        assert_eq!(s.take(big), None);
        assert_eq!(s.bytes, 0);
        s.give(vec![0.0; KEEP_BYTES / 8 + 1]);
        assert!(s.buffers.is_empty(), "larger than all the room: freed");
    }

    #[test]
    fn a_small_budget_keeps_a_sixteenth_of_it() {
        let mut s = Spares::new();
        s.give(vec![1.0; 4000]);
        s.limit = s.limit.min(16 * 8 * 1000 / 16);
        s.make_room(0);
        assert!(s.buffers.is_empty(), "over the new limit: freed");
        s.give(vec![1.0; 1000]);
        s.give(vec![1.0; 600]);
        assert_eq!(s.take(1000), None, "the older buffer went to make room");
        assert_eq!(s.take(600).map(|b| b.len()), Some(600));
        s.give(vec![1.0; 1001]);
        assert_eq!(s.take(1001), None, "over the limit alone");
    }
}
