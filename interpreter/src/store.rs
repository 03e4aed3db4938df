//! Block storage of one worker: the blocks of local, temp and (in one process) distributed and
//! served arrays, the whole static arrays, and the regions of contiguous local arrays.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

pub use crate::extents::Extents;

/// A dense block: shape and column-major data.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Block {
    pub shape: Extents,
    pub data: Vec<f64>,
}

/// A fetched block shared with a special for reading (`crate::specials::ArgData`).
impl crate::specials::Elements for Block {
    fn elements(&self) -> &[f64] {
        &self.data
    }
}

/// The bytes of a block of `shape`, or `None` when the count does not fit in a `usize`.
pub fn block_bytes(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(8usize, |n, &e| n.checked_mul(e))
}

impl Block {
    /// A block of zeros; an error, not an abort of the process, when the element count
    /// overflows or the allocator refuses the memory (the size checks against the budgets come
    /// first; this is for a machine with less free memory than the budgets allow).
    pub fn zeros(shape: impl AsRef<[usize]>) -> crate::error::Result<Block> {
        Block::allocate(shape.as_ref(), crate::spare::zeros)
    }

    /// A block whose every element the caller writes before reading any: its values are
    /// unspecified (a spare buffer's old values, or zeros). As [`Block::zeros`] otherwise.
    pub fn overwritable(shape: impl AsRef<[usize]>) -> crate::error::Result<Block> {
        Block::allocate(shape.as_ref(), crate::spare::overwritable)
    }

    /// A copy of the block (in a spare buffer where there is one), as [`Block::zeros`] where
    /// memory is short.
    pub fn copy(&self) -> crate::error::Result<Block> {
        match crate::spare::copy(&self.data) {
            Some(data) => Ok(Block {
                shape: self.shape,
                data,
            }),
            None => Err(out_of_memory(&self.shape)),
        }
    }

    /// Also an error for more than six extents, which validated bytecode never declares.
    fn allocate(
        shape: &[usize],
        data: fn(usize) -> Option<Vec<f64>>,
    ) -> crate::error::Result<Block> {
        let extents = Extents::of(shape)?;
        match block_bytes(shape).and_then(|bytes| data(bytes / 8)) {
            Some(data) => Ok(Block {
                shape: extents,
                data,
            }),
            None => Err(out_of_memory(shape)),
        }
    }
}

fn out_of_memory(shape: &[usize]) -> crate::error::RuntimeError {
    crate::error::RuntimeError::new(format!(
        "out of memory: a block of {shape:?} ({} bytes) cannot be allocated; this machine has less free memory than the memory options allow (lower --worker-memory or --server-memory, or run on more or bigger nodes)",
        block_bytes(shape).map_or_else(|| "too many".to_string(), |b| b.to_string())
    ))
}

/// `n` zeros, or `None` where the allocator refuses: as `vec![0.0; n]` (zeroed memory from the
/// allocator, untouched until used) but without aborting the process on failure.
pub fn zeroed(n: usize) -> Option<Vec<f64>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<f64>(n).ok()?;
    // SAFETY: the layout has a non-zero size. A non-null pointer from `alloc_zeroed` is valid
    // for `n` f64 of value 0.0 (all bits zero), allocated by the global allocator with the
    // layout `Vec<f64>` uses for capacity `n`, so the vector owns it and frees it correctly.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<f64>();
        if p.is_null() {
            return None;
        }
        Some(Vec::from_raw_parts(p, n, n))
    }
}

/// A map keyed by small integers the program chooses, not an adversary, so it needs no
/// DoS-resistant hash; SipHash was a leading cost of every small put and get
/// (docs/benchmarks.md, "MPI message rates: the cost per operation").
pub type KeyMap<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

/// A map keyed by blocks (`BlockKey`, or an array and a `BlockKey`) that keeps blocks next to
/// each other along their first dimension in neighbouring slots (in runs of [`NEIGHBOURS`]):
/// loops step an array's first index fastest, so a map of many blocks is walked through
/// memory in order instead of with a cache miss per block (docs/benchmarks.md, "Maps of
/// blocks in the order loops walk them").
pub type BlockKeyMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<NearHasher>>;

/// Slots a [`BlockKeyMap`] is made ready for ahead of its blocks at most (a server's array
/// table, a worker's cache of fetched blocks): 2²⁰ slots are some 100 MiB of address space,
/// touched only as blocks arrive.
pub const MOST_SLOTS_AHEAD: usize = 1 << 20;

/// The hasher of [`BlockKeyMap`]. A `BlockKey` writes one word: everything but its first
/// segment's place in its run scattered, plus that place. The hasher scatters every word
/// written before the last (an array's number) and adds the last as it is; the low bits of
/// the result are the map's slot, and its top seven bits (the tag the map compares before any
/// key) are mixed from all of it, so that neighbours in a group of slots carry different tags.
#[derive(Default, Clone, Copy)]
pub struct NearHasher(u64);

/// An odd multiplier, 2⁶⁴ divided by the golden ratio: the product's high bits depend on every
/// bit of the factor.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;
/// hashbrown's tag: the hash's top seven bits.
const TAG_BITS: u32 = 7;
const SLOT_MASK: u64 = u64::MAX >> TAG_BITS;

/// `h` and `v` mixed into every bit (the rotation brings the product's well-mixed high bits
/// down); 0 for 0 and 0.
fn scatter(h: u64, v: u64) -> u64 {
    h.wrapping_add(v).wrapping_mul(SPREAD).rotate_left(26)
}

impl std::hash::Hasher for NearHasher {
    fn finish(&self) -> u64 {
        (self.0 & SLOT_MASK) | (self.0.wrapping_mul(SPREAD) & !SLOT_MASK)
    }

    /// Anything else a key writes: scattered, as the other words are.
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    /// What came before is scattered, the new word added as it is: a key that writes one word
    /// keeps it, and an array's number followed by a block's word scatters only the array.
    fn write_u64(&mut self, v: u64) {
        self.0 = scatter(self.0, 0).wrapping_add(v);
    }

    /// An array's number: scattered (each array's blocks lie apart).
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

/// Blocks that differ only in their first segment take neighbouring slots in runs of this
/// many; each run starts at a scattered slot. One run over a whole dimension of 10⁶ segments
/// filled 10⁶ slots in a row, and a key looked up or inserted in that band probed hundreds
/// of groups before it met an empty slot (3 µs for a block lent to a special and put back;
/// docs/benchmarks.md, "Many blocks: lent to a special, summed to a scalar"). Runs of 16 cost
/// the fill of such an array 40%, runs of 256 about 9%. An array with fewer segments along its
/// first dimension hashes as if there were no runs.
const NEIGHBOURS: u32 = 256;

/// Identity of a block within its array: the segment of each dimension, and for dimensions
/// declared with a subindex also the parent's segment (subsegment extents depend on it).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct BlockKey {
    pub segments: [i32; 6],
    pub parents: [i32; 6],
}

/// Odd multipliers, one per word of a key: [`SPREAD`], then the 64-bit primes of xxHash and
/// the multipliers of MurmurHash3's and other 64-bit finalisers (any odd constants with
/// well-mixed bits would do).
const WORD_FACTORS: [u64; 6] = [
    SPREAD,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0xD6E8_FEB8_6659_FD93,
    0xFF51_AFD7_ED55_8CCD,
    0xC4CE_B9FE_1A85_EC53,
];

impl std::hash::Hash for BlockKey {
    /// Everything but the first segment's place in its run of [`NEIGHBOURS`] scattered, then
    /// that place added unscattered: blocks that differ only in it get neighbouring hashes
    /// (see [`NearHasher`]). In other hashers this is one word like any other.
    ///
    /// The eleven other parts go two to a word, each word times a multiplier of its own, the
    /// products summed and the sum scattered: six independent multiplications instead of a
    /// chain of eleven (the chain was 7–8% of a worker's time in loops of one-element puts
    /// and gets).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let [s0, s1, s2, s3, s4, s5] = self.segments.map(|v| u64::from(v as u32));
        let [p0, p1, p2, p3, p4, p5] = self.parents.map(|v| u64::from(v as u32));
        let pair = |low: u64, high: u64| low | (high << 32);
        let words = [
            pair(s0 / u64::from(NEIGHBOURS), s1),
            pair(s2, s3),
            pair(s4, s5),
            pair(p0, p1),
            pair(p2, p3),
            pair(p4, p5),
        ];
        let sum = words
            .iter()
            .zip(WORD_FACTORS)
            .fold(0u64, |h, (&w, f)| h.wrapping_add(w.wrapping_mul(f)));
        state.write_u64(scatter(sum, 0).wrapping_add(s0 % u64::from(NEIGHBOURS)));
    }
}

impl BlockKey {
    pub fn rank_segments(&self, rank: usize) -> &[i32] {
        &self.segments[..rank]
    }
}

/// A region of a contiguous local array: segments `lower..=upper` per dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    pub lower: Vec<i32>,
    pub upper: Vec<i32>,
    pub block: Block,
}

impl Region {
    pub fn encloses(&self, lower: &[i32], upper: &[i32]) -> bool {
        self.lower.iter().zip(lower).all(|(a, b)| a <= b)
            && self.upper.iter().zip(upper).all(|(a, b)| a >= b)
    }

    pub fn overlaps(&self, lower: &[i32], upper: &[i32]) -> bool {
        self.lower.iter().zip(upper).all(|(a, u)| a <= u)
            && self.upper.iter().zip(lower).all(|(b, l)| b >= l)
    }
}

/// Bytes of block data in a worker's block maps, shared by all of them (`--worker-memory`).
pub type Held = Rc<Cell<usize>>;

/// The blocks of one array in a worker's storage. Every insert and removal updates the
/// worker's count of bytes held; a block's data can change but not its size.
#[derive(Debug, Default)]
pub struct BlockMap {
    blocks: BlockKeyMap<BlockKey, Block>,
    held: Held,
}

fn bytes(b: &Block) -> usize {
    b.data.len() * std::mem::size_of::<f64>()
}

impl BlockMap {
    pub fn new(held: Held) -> BlockMap {
        BlockMap {
            blocks: BlockKeyMap::default(),
            held,
        }
    }

    pub fn get(&self, key: &BlockKey) -> Option<&Block> {
        self.blocks.get(key)
    }

    /// A block's data, to change in place.
    pub fn data_mut(&mut self, key: &BlockKey) -> Option<&mut [f64]> {
        self.blocks.get_mut(key).map(|b| b.data.as_mut_slice())
    }

    pub fn contains_key(&self, key: &BlockKey) -> bool {
        self.blocks.contains_key(key)
    }

    pub fn insert(&mut self, key: BlockKey, block: Block) -> Option<Block> {
        self.held.set(self.held.get() + bytes(&block));
        let old = self.blocks.insert(key, block);
        if let Some(o) = &old {
            self.held.set(self.held.get().saturating_sub(bytes(o)));
        }
        old
    }

    /// Room for `more` blocks, where the allocator grants it (else the map grows as needed).
    pub fn reserve(&mut self, more: usize) {
        let _ = self.blocks.try_reserve(more);
    }

    pub fn remove(&mut self, key: &BlockKey) -> Option<Block> {
        let old = self.blocks.remove(key);
        if let Some(o) = &old {
            self.held.set(self.held.get().saturating_sub(bytes(o)));
        }
        old
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&BlockKey, &Block)> {
        self.blocks.iter()
    }

    pub fn keys(&self) -> impl Iterator<Item = &BlockKey> {
        self.blocks.keys()
    }
}

impl Drop for BlockMap {
    fn drop(&mut self) {
        let mine: usize = self.blocks.values().map(bytes).sum();
        self.held.set(self.held.get().saturating_sub(mine));
    }
}

/// The storage of one array.
#[derive(Debug)]
pub enum Storage {
    /// Local, temp, distributed and served arrays: a map of blocks.
    Blocks(BlockMap),
    /// Static arrays: the whole array, full extents, column-major.
    Whole(Block),
    /// Contiguous local arrays: allocated regions.
    Regions(Vec<Region>),
    /// Distributed and served arrays: their blocks live at the servers; fetched copies are
    /// held by the worker's link.
    Remote,
    /// An array no statement uses.
    Unused,
}

/// `a[1,2]` as text, for messages.
pub fn block_text(program: &sial_bytecode::Program, array: usize, key: &BlockKey) -> String {
    let a = &program.arrays[array];
    let segs: Vec<String> = key
        .rank_segments(a.dims.len())
        .iter()
        .map(|v| v.to_string())
        .collect();
    format!("{}[{}]", a.name, segs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near_hash<K: std::hash::Hash>(key: &K) -> u64 {
        use std::hash::BuildHasher;
        std::hash::BuildHasherDefault::<NearHasher>::default().hash_one(key)
    }

    fn key(segments: [i32; 6], parents: [i32; 6]) -> BlockKey {
        BlockKey { segments, parents }
    }

    #[test]
    fn blocks_along_the_first_dimension_take_neighbouring_slots() {
        for rest in [[0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [3, 7, 2, 9, 1]] {
            let at = |s0: i32| {
                let mut segments = [s0, 0, 0, 0, 0, 0];
                segments[1..].copy_from_slice(&rest);
                near_hash(&key(segments, [0; 6]))
            };
            let mut tags = std::collections::HashSet::new();
            let mut starts = std::collections::HashSet::new();
            let runs = 4;
            for s0 in 0..runs * NEIGHBOURS as i32 {
                // Within a run the map's slot (the low bits) steps by one; each run starts
                // elsewhere. The tag (the top seven bits) moves at every step.
                let step = (at(s0 + 1) & SLOT_MASK).wrapping_sub(at(s0) & SLOT_MASK);
                if (s0 + 1) % NEIGHBOURS as i32 == 0 {
                    assert_ne!(step, 1, "{rest:?} {s0}: a run longer than {NEIGHBOURS}");
                    starts.insert(at(s0 + 1) & 0xffff);
                } else {
                    assert_eq!(step, 1, "{rest:?} {s0}");
                }
                tags.insert(at(s0) >> (64 - TAG_BITS));
            }
            assert_eq!(
                starts.len(),
                runs as usize,
                "each run starts at a slot of its own"
            );
            assert!(tags.len() > 100, "{} tags for the neighbours", tags.len());
        }
        // Within an array, also with the array's number written first.
        let a = near_hash(&(4u32, key([5, 2, 0, 0, 0, 0], [0; 6])));
        let b = near_hash(&(4u32, key([6, 2, 0, 0, 0, 0], [0; 6])));
        assert_eq!((b & SLOT_MASK).wrapping_sub(a & SLOT_MASK), 1);
    }

    #[test]
    fn every_other_part_of_a_key_scatters() {
        // Changing any part but the first segment moves the slot out of the base's group of 16
        // slots (of 65,536), to slots that differ from each other.
        let base = key([1, 1, 1, 1, 1, 1], [0; 6]);
        let slot = |h: u64| h & 0xffff;
        let mut moved = vec![];
        for d in 1..6 {
            let mut k = base;
            k.segments[d] += 1;
            moved.push(slot(near_hash(&k)));
        }
        for d in 0..6 {
            let mut k = base;
            k.parents[d] = 3;
            moved.push(slot(near_hash(&k)));
        }
        // (Array 0 writes a zero before the key: the key's own hash, in another kind of map.)
        for array in 1..5u32 {
            moved.push(slot(near_hash(&(array, base))));
        }
        let home = slot(near_hash(&base));
        for &m in &moved {
            let apart = m.wrapping_sub(home) & 0xffff;
            assert!((16..=0xffff - 16).contains(&apart), "{home} {moved:?}");
        }
        let distinct: std::collections::HashSet<u64> = moved.iter().copied().collect();
        assert_eq!(distinct.len(), moved.len(), "{moved:?}");
    }

    #[test]
    fn a_map_of_blocks_finds_every_block() {
        // Four dimensions of 12 segments, some with parents: every key found, none confused.
        let mut map: BlockKeyMap<BlockKey, usize> = BlockKeyMap::default();
        let mut n = 0;
        for a in 1..=12 {
            for b in 1..=12 {
                for c in 1..=12 {
                    for p in [0, 2] {
                        map.insert(key([a, b, c, 1, 0, 0], [0, 0, p, 0, 0, 0]), n);
                        n += 1;
                    }
                }
            }
        }
        assert_eq!(map.len(), n);
        let mut m = 0;
        for a in 1..=12 {
            for b in 1..=12 {
                for c in 1..=12 {
                    for p in [0, 2] {
                        assert_eq!(
                            map.get(&key([a, b, c, 1, 0, 0], [0, 0, p, 0, 0, 0])),
                            Some(&m)
                        );
                        m += 1;
                    }
                }
            }
        }
        assert_eq!(map.get(&key([13, 1, 1, 1, 0, 0], [0; 6])), None);
    }

    #[test]
    fn zeros_are_zeros_and_refusals_are_errors() {
        assert_eq!(zeroed(0), Some(Vec::new()));
        assert_eq!(zeroed(5), Some(vec![0.0; 5]));
        // More than the address space: refused, not an abort.
        assert_eq!(zeroed(1 << 61), None);
        let b = Block::zeros(vec![2, 3]).expect("a small block");
        assert_eq!((b.shape.to_vec(), b.data), (vec![2, 3], vec![0.0; 6]));
        let e = Block::zeros(vec![1 << 40, 1 << 30]).expect_err("overflowing size");
        assert!(e.to_string().contains("too many bytes"), "{e}");
        let e = Block::zeros(vec![1 << 23, 1 << 23, 1 << 1]).expect_err("too big");
        assert!(e.to_string().contains("out of memory"), "{e}");
    }
}
