//! Integral blocks shared by the processes of a node: an insert-only table in a file that every
//! process maps (under mpirun, one file per node, made by the runtime).
//!
//! Without it each MPI rank keeps its own cache, and a block one rank computed is computed again
//! by every other rank that needs it; with it, the ranks of a node compute each block once and
//! keep one copy of it.
//!
//! Layout of the file (all fields little-endian words, zero in a new file, which is an empty
//! table):
//!
//! | at | what |
//! |---|---|
//! | 0 | the insert lock (0 free, 1 held) |
//! | 8 | bytes of the arena handed out |
//! | [`HEADER`] | `slots` slots of [`SLOT`] bytes: state, key (5 words), offset, length |
//! | after the slots | the arena: each block's elements, 64-byte aligned |
//!
//! A slot goes from empty to filling (under the lock: its key, offset and length are written
//! before the state) and then, outside the lock, to ready once its elements are in the arena (or
//! to failed when the file has no room for them). Readers take no lock: they trust a slot's
//! fields once they see its state, and read a block only when it is ready; a ready block never
//! changes. Slots are found by linear probing from the key's hash, at most [`PROBES`] of them.
//!
//! Nothing here can make a run wrong or stop it: a block that is not found is computed, and a
//! block that cannot be kept (no slot, no room, the lock held too long) is simply not kept.

use memmap2::MmapRaw;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::engine::SpanQuartet;

/// Bytes before the slots.
const HEADER: usize = 64;
/// Bytes of a slot: state, five key words, offset, length.
const SLOT: usize = 64;
/// Slots probed from a key's hash before giving up.
const PROBES: usize = 64;
/// One slot per this many bytes of file. The slots are reserved when the table is mapped, so
/// they are few (a 6 GiB table has 4 MiB of them); a job of smaller blocks fills its slots
/// before its bytes and computes the blocks it cannot keep.
const BYTES_PER_SLOT: usize = 64 << 10;
/// Alignment of blocks in the arena.
const ALIGN: usize = 64;
/// How long an insert waits for the lock before giving up keeping its block.
const LOCK_PATIENCE: Duration = Duration::from_secs(1);

const EMPTY: u64 = 0;
const FILLING: u64 = 1;
const READY: u64 = 2;
const FAILED: u64 = 3;

/// A key: the basis set's fingerprint and the block's four spans, each as first AO << 32 |
/// extent.
pub(crate) type Key = [u64; 5];

/// The key of the block of `spans` for the basis set of fingerprint `basis`; `None` where a
/// span does not fit in 32 bits.
pub(crate) fn key(basis: u64, spans: &SpanQuartet) -> Option<Key> {
    let mut key = [basis, 0, 0, 0, 0];
    for (word, &(first, extent)) in key[1..].iter_mut().zip(spans) {
        let first = u32::try_from(first).ok()?;
        let extent = u32::try_from(extent).ok()?;
        *word = (u64::from(first) << 32) | u64::from(extent);
    }
    Some(key)
}

/// Where a ready block lies in the arena.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ready {
    offset: usize,
    len: usize,
}

/// FNV-1a over `words`: the same in every process (no random seed).
fn fnv(words: impl IntoIterator<Item = u64>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for word in words {
        h = (h ^ word).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A basis set's fingerprint in keys, from its description.
pub(crate) fn fingerprint(description: &str) -> u64 {
    fnv(description.bytes().map(u64::from))
}

/// The shared table, mapped into this process.
#[derive(Debug)]
pub struct NodeBlocks {
    map: MmapRaw,
    file: File,
    slots: usize,
    arena: usize,
}

// SAFETY: every access to the mapped memory goes through atomics or reads blocks that are
// ready and never written again; the file handle is only used for `fallocate`.
unsafe impl Send for NodeBlocks {}
unsafe impl Sync for NodeBlocks {}

impl NodeBlocks {
    /// Maps the table in `file` (opened for reading and writing; its length, set by whoever
    /// made it, is the table's size). A file of zeros is an empty table.
    pub fn map(file: File) -> io::Result<NodeBlocks> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::other("the file is larger than the address space"))?;
        let wanted = len / BYTES_PER_SLOT;
        if wanted == 0 {
            return Err(io::Error::other(format!(
                "{len} bytes is too small for a table of integral blocks"
            )));
        }
        // A power of two, for probing by mask.
        let slots = 1 << wanted.ilog2();
        let arena = HEADER + slots * SLOT;
        if arena >= len {
            return Err(io::Error::other(format!(
                "{len} bytes is too small for a table of integral blocks"
            )));
        }
        // The header and the slots are written in place: their pages are reserved first, as
        // each block's are before it is written.
        reserve(&file, 0, arena)?;
        let map = MmapRaw::map_raw(&file)?;
        Ok(NodeBlocks {
            map,
            file,
            slots,
            arena,
        })
    }

    /// The word at byte `at` of the file.
    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at + 8 <= self.map.len());
        // SAFETY: in bounds and aligned (the mapping is page-aligned); the memory lives as long
        // as `self`, and every process touches these words only atomically.
        unsafe { &*self.map.as_ptr().add(at).cast::<AtomicU64>() }
    }

    fn lock_word(&self) -> &AtomicU64 {
        self.word(0)
    }

    fn handed_out(&self) -> &AtomicU64 {
        self.word(8)
    }

    /// Word `w` of slot `s`: 0 state, 1–5 key, 6 offset in the arena, 7 length in elements.
    fn slot(&self, s: usize, w: usize) -> &AtomicU64 {
        self.word(HEADER + s * SLOT + w * 8)
    }

    fn key_of(&self, s: usize) -> Key {
        [1, 2, 3, 4, 5].map(|w| self.slot(s, w).load(Ordering::Relaxed))
    }

    /// The slots to probe for `key`, in order.
    fn probes(&self, key: &Key) -> impl Iterator<Item = usize> + use<> {
        let h = fnv(key.iter().copied());
        let mask = self.slots - 1;
        let start = (h ^ (h >> 29)) as usize & mask;
        (0..PROBES.min(self.slots)).map(move |i| (start + i) & mask)
    }

    /// The ready block of `key`, if the table holds one.
    pub(crate) fn get(&self, key: &Key) -> Option<Ready> {
        for s in self.probes(key) {
            match self.slot(s, 0).load(Ordering::Acquire) {
                EMPTY => return None,
                state if self.key_of(s) == *key => {
                    return (state == READY).then(|| Ready {
                        offset: self.slot(s, 6).load(Ordering::Relaxed) as usize,
                        len: self.slot(s, 7).load(Ordering::Relaxed) as usize,
                    });
                }
                _ => {}
            }
        }
        None
    }

    /// The elements of a block that [`NodeBlocks::get`] found ready in this table.
    pub(crate) fn read(&self, ready: Ready) -> &[f64] {
        let at = self.arena + ready.offset;
        if at + ready.len * 8 > self.map.len() {
            debug_assert!(false, "{ready:?} outside the table");
            return &[];
        }
        // SAFETY: in bounds; `insert` handed out this range to one slot alone and wrote it
        // before making the slot ready, and it is never written again.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(at).cast::<f64>(), ready.len) }
    }

    /// How many blocks are ready.
    #[cfg(test)]
    pub(crate) fn ready(&self) -> usize {
        (0..self.slots)
            .filter(|&s| self.slot(s, 0).load(Ordering::Acquire) == READY)
            .count()
    }

    /// Keeps `data` as the block of `key` unless the table holds it already or has no room.
    /// Returns whether this call kept it.
    pub(crate) fn insert(&self, key: &Key, data: &[f64]) -> bool {
        let bytes = std::mem::size_of_val(data);
        let Some((s, offset)) = self.claim(key, bytes) else {
            return false;
        };
        let at = self.arena + offset;
        if reserve(&self.file, at, bytes).is_err() {
            self.slot(s, 0).store(FAILED, Ordering::Release);
            return false;
        }
        // SAFETY: the range was handed out to this slot alone and lies inside the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.map.as_mut_ptr().add(at).cast::<f64>(),
                data.len(),
            );
        }
        self.slot(s, 0).store(READY, Ordering::Release);
        true
    }

    /// Under the lock: a slot for `key` set to filling, with `bytes` of the arena handed out to
    /// it. `None` where the key has a slot already, no slot is free among its probes, the arena
    /// has no room, or the lock stays held.
    fn claim(&self, key: &Key, bytes: usize) -> Option<(usize, usize)> {
        let _lock = Lock::take(self.lock_word())?;
        let mut free = None;
        for s in self.probes(key) {
            let state = self.slot(s, 0).load(Ordering::Acquire);
            if state == EMPTY {
                free = Some(s);
                break;
            }
            if self.key_of(s) == *key {
                return None;
            }
        }
        let s = free?;
        let offset = self.handed_out().load(Ordering::Relaxed) as usize;
        let end = offset.checked_add(bytes.div_ceil(ALIGN) * ALIGN)?;
        if self.arena + end > self.map.len() {
            return None;
        }
        self.handed_out().store(end as u64, Ordering::Relaxed);
        for (w, word) in key.iter().enumerate() {
            self.slot(s, 1 + w).store(*word, Ordering::Relaxed);
        }
        self.slot(s, 6).store(offset as u64, Ordering::Relaxed);
        self.slot(s, 7).store((bytes / 8) as u64, Ordering::Relaxed);
        self.slot(s, 0).store(FILLING, Ordering::Release);
        Some((s, offset))
    }
}

/// Backs bytes `at..at + len` of `file` with pages before they are written through the
/// mapping: a file system without room says so here instead of with SIGBUS on the write.
fn reserve(file: &File, at: usize, len: usize) -> io::Result<()> {
    let (Ok(at), Ok(len)) = (libc::off_t::try_from(at), libc::off_t::try_from(len)) else {
        return Err(io::Error::other("offset beyond the file system's range"));
    };
    // SAFETY: a plain system call on a descriptor this process holds open.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), at, len) } {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// The insert lock, held until dropped.
struct Lock<'a>(&'a AtomicU64);

impl<'a> Lock<'a> {
    /// Takes the lock, or `None` after [`LOCK_PATIENCE`] (a process that died holding it must
    /// not stop the others).
    fn take(word: &'a AtomicU64) -> Option<Lock<'a>> {
        let start = Instant::now();
        let mut tries = 0u32;
        loop {
            if word
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Some(Lock(word));
            }
            tries += 1;
            if tries < 64 {
                std::hint::spin_loop();
            } else {
                if start.elapsed() > LOCK_PATIENCE {
                    return None;
                }
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Lock<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// A new file of `len` zero bytes, removed when dropped.
#[cfg(test)]
pub(crate) struct TempFile(std::path::PathBuf);

#[cfg(test)]
impl TempFile {
    pub(crate) fn new(name: &str, len: u64) -> TempFile {
        let path =
            std::env::temp_dir().join(format!("sial-node-test-{name}-{}", std::process::id()));
        let file = File::create(&path).unwrap();
        file.set_len(len).unwrap();
        TempFile(path)
    }

    /// The file opened again, as another process would.
    pub(crate) fn open(&self) -> NodeBlocks {
        let file = File::options()
            .read(true)
            .write(true)
            .open(&self.0)
            .unwrap();
        NodeBlocks::map(file).unwrap()
    }
}

#[cfg(test)]
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn read<'a>(table: &'a NodeBlocks, key: &Key) -> Option<&'a [f64]> {
        table.get(key).map(|ready| table.read(ready))
    }

    fn spans(i: usize) -> SpanQuartet {
        [(i, 2), (0, 3), (7, 1), (i + 1, 4)]
    }

    #[test]
    fn a_block_kept_through_one_mapping_is_read_through_another() {
        let file = TempFile::new("two-maps", 1 << 20);
        let (a, b) = (file.open(), file.open());
        let k = key(7, &spans(1)).unwrap();
        let data: Vec<f64> = (0..24).map(|x| x as f64 * 0.5).collect();
        assert!(b.get(&k).is_none());
        assert!(a.insert(&k, &data));
        assert_eq!(read(&b, &k), Some(&data[..]));
        // Kept once: a second insert of the same key, from either side, keeps nothing.
        assert!(!b.insert(&k, &data));
        assert!(!a.insert(&k, &data));
        // Another basis set's block of the same spans is another key.
        assert!(b.get(&key(8, &spans(1)).unwrap()).is_none());
        assert_eq!(a.handed_out().load(Ordering::Relaxed), 192);
    }

    #[test]
    fn blocks_past_the_arena_are_not_kept() {
        // 256 KiB: 4 slots and the rest arena.
        let file = TempFile::new("full", 256 << 10);
        let table = file.open();
        let big = vec![1.0; 20_000];
        assert!(table.insert(&key(1, &spans(0)).unwrap(), &big));
        assert!(!table.insert(&key(1, &spans(1)).unwrap(), &big));
        assert!(table.get(&key(1, &spans(1)).unwrap()).is_none());
        assert_eq!(read(&table, &key(1, &spans(0)).unwrap()), Some(&big[..]));
    }

    #[test]
    fn a_full_neighbourhood_of_slots_keeps_nothing_more() {
        // 4 slots: a fifth key finds no free slot among its probes.
        let file = TempFile::new("slots", 256 << 10);
        let table = file.open();
        let kept: Vec<bool> = (0..5)
            .map(|i| table.insert(&key(1, &spans(i)).unwrap(), &[i as f64]))
            .collect();
        assert_eq!(kept, [true, true, true, true, false]);
        for i in 0..4 {
            assert_eq!(
                read(&table, &key(1, &spans(i)).unwrap()),
                Some(&[i as f64][..])
            );
        }
        assert!(table.get(&key(1, &spans(4)).unwrap()).is_none());
    }

    #[test]
    fn concurrent_inserts_keep_each_block_once_and_whole() {
        let file = TempFile::new("threads", 32 << 20);
        let tables: Vec<NodeBlocks> = (0..4).map(|_| file.open()).collect();
        std::thread::scope(|scope| {
            for table in &tables {
                scope.spawn(move || {
                    for i in 0..200 {
                        let data: Vec<f64> = (0..100).map(|x| (i * 1000 + x) as f64).collect();
                        let k = key(3, &spans(i)).unwrap();
                        table.insert(&k, &data);
                        if let Some(ready) = table.get(&k) {
                            assert_eq!(table.read(ready), &data[..]);
                        }
                    }
                });
            }
        });
        for i in 0..200 {
            let data: Vec<f64> = (0..100).map(|x| (i * 1000 + x) as f64).collect();
            assert_eq!(
                read(&tables[0], &key(3, &spans(i)).unwrap()),
                Some(&data[..])
            );
        }
        // Each block's 800 bytes (aligned to 832) handed out once.
        assert_eq!(tables[0].handed_out().load(Ordering::Relaxed), 200 * 832);
    }

    #[test]
    fn spans_beyond_32_bits_have_no_key() {
        assert!(key(0, &[(1 << 33, 1), (0, 1), (0, 1), (0, 1)]).is_none());
        assert_eq!(key(5, &spans(2)).unwrap()[1], (2 << 32) | 2);
    }

    #[test]
    fn a_file_too_small_for_a_table_is_an_error() {
        let file = TempFile::new("small", 1000);
        let opened = File::options()
            .read(true)
            .write(true)
            .open(&file.0)
            .unwrap();
        assert!(NodeBlocks::map(opened).is_err());
    }
}
