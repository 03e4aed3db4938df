//! Host buffers for the host side of transfers, and the cache that reuses them.
//!
//! A GPU copies asynchronously (and at full bandwidth) only from page-locked host memory, and
//! page-locking is expensive (10–100× an ordinary allocation: the kernel pins every page). So
//! buffers are not freed after a transfer but go to a free list keyed by size; a request takes
//! the smallest cached buffer at least as large; a map from buffer to its real size makes the
//! release exact; when the budget (`--pinned-memory`) is exhausted, cached buffers are released
//! smallest-first to make room.
//!
//! Allocation goes through the small [`PinnedAlloc`] trait: the host device uses ordinary
//! allocations, the CUDA device `cuMemHostAlloc` (page-locked, not write-combined: the runtime
//! reads downloaded blocks back on the CPU, and write-combined memory is uncached for reads).

use super::cuda::CudaPinned;
use super::{DeviceError, F64_BYTES, Result};
use std::collections::{BTreeMap, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Allocates host buffers suited to one device's transfers.
pub trait PinnedAlloc: Send {
    /// A new buffer of exactly `len` elements (contents unspecified but initialised).
    fn alloc(&mut self, len: usize) -> Result<PinnedBuf>;
}

/// Ordinary host memory (for [`super::HostDevice`]): `Vec<f64>`, aligned for `f64`, shared
/// with the copy threads through a mutex.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostAlloc;

impl PinnedAlloc for HostAlloc {
    fn alloc(&mut self, len: usize) -> Result<PinnedBuf> {
        Ok(PinnedBuf::new(PinnedMem::Host(Arc::new(Mutex::new(vec![
            0.0;
            len
        ])))))
    }
}

/// Where a pinned buffer's memory lives.
pub(crate) enum PinnedMem {
    /// Ordinary memory shared with the host device's copy threads.
    Host(Arc<Mutex<Vec<f64>>>),
    /// Page-locked memory of a CUDA context.
    Cuda(CudaPinned),
}

/// A host buffer used for transfers (page-locked where the device needs it).
///
/// Its [`Self::capacity`] may exceed what a transfer uses (the cache hands out the smallest
/// buffer at least as large as asked); transfers use a prefix.
pub struct PinnedBuf {
    mem: PinnedMem,
    id: u64,
}

/// Source of unique buffer ids (the cache's size map is keyed by them).
static NEXT_PINNED_ID: AtomicU64 = AtomicU64::new(1);

impl PinnedBuf {
    pub(crate) fn new(mem: PinnedMem) -> Self {
        PinnedBuf {
            mem,
            id: NEXT_PINNED_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A process-unique id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The real number of elements.
    pub fn capacity(&self) -> usize {
        match &self.mem {
            PinnedMem::Host(m) => match m.lock() {
                Ok(v) => v.len(),
                Err(poisoned) => poisoned.into_inner().len(),
            },
            PinnedMem::Cuda(c) => c.len(),
        }
    }

    /// The contents, after any copy in flight on this buffer has completed (CUDA). For the
    /// host device, waiting for the copy's event is the caller's job (the lock only keeps the
    /// access safe).
    pub fn read(&self) -> Result<PinnedRef<'_>> {
        match &self.mem {
            PinnedMem::Host(m) => Ok(PinnedRef::Host(lock(m)?)),
            PinnedMem::Cuda(c) => Ok(PinnedRef::Slice(c.as_slice()?)),
        }
    }

    /// The contents for writing (see [`Self::read`]).
    pub fn write(&mut self) -> Result<PinnedMut<'_>> {
        match &mut self.mem {
            PinnedMem::Host(m) => Ok(PinnedMut::Host(lock(m)?)),
            PinnedMem::Cuda(c) => Ok(PinnedMut::Slice(c.as_mut_slice()?)),
        }
    }

    pub(crate) fn mem(&self) -> &PinnedMem {
        &self.mem
    }

    pub(crate) fn mem_mut(&mut self) -> &mut PinnedMem {
        &mut self.mem
    }
}

/// Locks a host buffer; a poisoned lock (a copy thread panicked) is an error.
pub(crate) fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock().map_err(|_| DeviceError::CopyStream {
        stream: usize::MAX,
        reason: "a copy thread panicked while holding a buffer".into(),
    })
}

/// Read access to a [`PinnedBuf`].
pub enum PinnedRef<'a> {
    Host(MutexGuard<'a, Vec<f64>>),
    Slice(&'a [f64]),
}

impl Deref for PinnedRef<'_> {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        match self {
            PinnedRef::Host(g) => g,
            PinnedRef::Slice(s) => s,
        }
    }
}

/// Write access to a [`PinnedBuf`].
pub enum PinnedMut<'a> {
    Host(MutexGuard<'a, Vec<f64>>),
    Slice(&'a mut [f64]),
}

impl Deref for PinnedMut<'_> {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        match self {
            PinnedMut::Host(g) => g,
            PinnedMut::Slice(s) => s,
        }
    }
}

impl DerefMut for PinnedMut<'_> {
    fn deref_mut(&mut self) -> &mut [f64] {
        match self {
            PinnedMut::Host(g) => g,
            PinnedMut::Slice(s) => s,
        }
    }
}

/// Figures of a [`PinnedCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PinnedStats {
    /// Requests served from the free list.
    pub hits: u64,
    /// Requests that allocated.
    pub misses: u64,
    /// Seconds spent allocating (pinning).
    pub alloc_seconds: f64,
    /// Bytes of buffers alive now (handed out and cached).
    pub bytes_pinned: usize,
    /// Largest `bytes_pinned` seen.
    pub peak_bytes: usize,
    /// Cached buffers released to make room under the budget.
    pub released: u64,
}

impl PinnedStats {
    /// hits / (hits + misses), 0 when nothing was requested.
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.hits as f64 / total as f64
        }
    }
}

/// Reuses pinned buffers across transfers under a byte budget.
///
/// Every buffer from [`Self::acquire`] should come back through [`Self::release`]; one that is
/// dropped instead stays counted in `bytes_pinned`.
pub struct PinnedCache {
    alloc: Box<dyn PinnedAlloc>,
    budget: usize,
    /// Cached buffers by real size (elements), smallest first.
    free: BTreeMap<usize, Vec<PinnedBuf>>,
    /// Real size (elements) of every buffer alive, handed out or cached.
    sizes: HashMap<u64, usize>,
    stats: PinnedStats,
}

impl PinnedCache {
    /// A cache allocating through `alloc`, holding at most `budget` bytes.
    pub fn new(alloc: Box<dyn PinnedAlloc>, budget: usize) -> Self {
        PinnedCache {
            alloc,
            budget,
            free: BTreeMap::new(),
            sizes: HashMap::new(),
            stats: PinnedStats::default(),
        }
    }

    /// A buffer of at least `len` elements: the smallest cached one, or a new one (releasing
    /// cached buffers smallest-first while the budget has no room). Fails if the budget cannot
    /// hold it even with nothing cached.
    pub fn acquire(&mut self, len: usize) -> Result<PinnedBuf> {
        let fit = self.free.range(len..).next().map(|(&size, _)| size);
        if let Some(size) = fit
            && let Some(buf) = self.take_cached(size)
        {
            self.stats.hits += 1;
            return Ok(buf);
        }
        self.stats.misses += 1;
        let bytes = len * F64_BYTES;
        while self.stats.bytes_pinned + bytes > self.budget {
            let Some(&smallest) = self.free.keys().next() else {
                return Err(DeviceError::PinnedBudget {
                    requested: bytes,
                    in_use: self.stats.bytes_pinned,
                    budget: self.budget,
                });
            };
            if let Some(buf) = self.take_cached(smallest) {
                self.forget(&buf);
                self.stats.released += 1;
                drop(buf);
            }
        }
        let start = Instant::now();
        let buf = self.alloc.alloc(len)?;
        self.stats.alloc_seconds += start.elapsed().as_secs_f64();
        self.sizes.insert(buf.id(), len);
        self.stats.bytes_pinned += bytes;
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.stats.bytes_pinned);
        Ok(buf)
    }

    /// Returns a buffer to the free list under its real size. A buffer this cache did not
    /// hand out is freed.
    pub fn release(&mut self, buf: PinnedBuf) {
        if let Some(&size) = self.sizes.get(&buf.id()) {
            self.free.entry(size).or_default().push(buf);
        }
    }

    /// Frees every cached buffer.
    pub fn clear(&mut self) {
        let free = std::mem::take(&mut self.free);
        for buf in free.into_values().flatten() {
            self.forget(&buf);
        }
    }

    /// Bytes of cached (not handed out) buffers.
    pub fn cached_bytes(&self) -> usize {
        self.free
            .iter()
            .map(|(size, v)| size * v.len() * F64_BYTES)
            .sum()
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Figures so far.
    pub fn stats(&self) -> PinnedStats {
        self.stats
    }

    fn take_cached(&mut self, size: usize) -> Option<PinnedBuf> {
        let list = self.free.get_mut(&size)?;
        let buf = list.pop();
        if list.is_empty() {
            self.free.remove(&size);
        }
        buf
    }

    /// Drops a buffer from the accounting (it is about to be freed).
    fn forget(&mut self, buf: &PinnedBuf) {
        if let Some(size) = self.sizes.remove(&buf.id()) {
            self.stats.bytes_pinned -= size * F64_BYTES;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts allocations, so a test can tell a hit from a miss by the allocator too.
    struct Counting(Arc<AtomicU64>);

    impl PinnedAlloc for Counting {
        fn alloc(&mut self, len: usize) -> Result<PinnedBuf> {
            self.0.fetch_add(1, Ordering::Relaxed);
            HostAlloc.alloc(len)
        }
    }

    fn cache(budget_elems: usize) -> (PinnedCache, Arc<AtomicU64>) {
        let n = Arc::new(AtomicU64::new(0));
        (
            PinnedCache::new(Box::new(Counting(n.clone())), budget_elems * F64_BYTES),
            n,
        )
    }

    #[test]
    fn smallest_fit_and_exact_release() -> Result<()> {
        let (mut c, allocs) = cache(10_000);
        let a = c.acquire(100)?;
        let b = c.acquire(300)?;
        let d = c.acquire(200)?;
        assert_eq!(allocs.load(Ordering::Relaxed), 3);
        c.release(a);
        c.release(b);
        c.release(d);
        // 150 takes the 200 buffer (smallest at least as large), not the 300 one.
        let x = c.acquire(150)?;
        assert_eq!(x.capacity(), 200);
        // Released under its real size 200, not the 150 asked: a request for 190 finds it.
        c.release(x);
        let y = c.acquire(190)?;
        assert_eq!(y.capacity(), 200);
        // Nothing cached is large enough: a new allocation.
        let z = c.acquire(400)?;
        assert_eq!(z.capacity(), 400);
        assert_eq!(allocs.load(Ordering::Relaxed), 4);
        let s = c.stats();
        assert_eq!((s.hits, s.misses), (2, 4));
        assert!((s.hit_ratio() - 2.0 / 6.0).abs() < 1e-12);
        assert_eq!(s.bytes_pinned, (100 + 300 + 200 + 400) * F64_BYTES);
        assert_eq!(s.peak_bytes, s.bytes_pinned);
        c.release(y);
        c.release(z);
        assert_eq!(c.cached_bytes(), s.bytes_pinned);
        Ok(())
    }

    #[test]
    fn budget_releases_smallest_first() -> Result<()> {
        let (mut c, _) = cache(1000);
        let a = c.acquire(100)?;
        let b = c.acquire(200)?;
        let d = c.acquire(300)?;
        c.release(a);
        c.release(b);
        c.release(d);
        // 600 pinned, 550 more needed: room for 400 only, so the 100 and then the 200 buffer
        // (smallest first) go; 300 stays.
        let e = c.acquire(550)?;
        assert_eq!(c.stats().released, 2);
        assert_eq!(c.stats().bytes_pinned, 850 * F64_BYTES);
        assert_eq!(c.cached_bytes(), 300 * F64_BYTES);
        // The 300 is still cached: a hit.
        let f = c.acquire(250)?;
        assert_eq!(f.capacity(), 300);
        // Nothing cached, 850 of 1000 in use: 300 more cannot fit.
        assert!(matches!(
            c.acquire(300),
            Err(DeviceError::PinnedBudget { .. })
        ));
        c.release(e);
        c.release(f);
        c.clear();
        assert_eq!(c.stats().bytes_pinned, 0);
        Ok(())
    }

    #[test]
    fn hit_ratio_of_repeated_transfers() -> Result<()> {
        let (mut c, allocs) = cache(1 << 20);
        for _ in 0..10 {
            let b = c.acquire(1000)?;
            c.release(b);
        }
        assert_eq!(allocs.load(Ordering::Relaxed), 1);
        assert!((c.stats().hit_ratio() - 0.9).abs() < 1e-12);
        Ok(())
    }
}
