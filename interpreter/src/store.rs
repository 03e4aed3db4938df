//! Block storage of one worker: the blocks of local, temp and (in one process) distributed and
//! served arrays, the whole static arrays, and the regions of contiguous local arrays.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

/// A dense block: shape and column-major data.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Block {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

/// The bytes of a block of `shape`, or `None` when the count does not fit in a `usize`.
pub fn block_bytes(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(8usize, |n, &e| n.checked_mul(e))
}

impl Block {
    pub fn zeros(shape: Vec<usize>) -> Block {
        let n = shape.iter().product();
        Block {
            shape,
            data: vec![0.0; n],
        }
    }
}

/// Identity of a block within its array: the segment of each dimension, and for dimensions
/// declared with a subindex also the parent's segment (subsegment extents depend on it).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct BlockKey {
    pub segments: [i32; 6],
    pub parents: [i32; 6],
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
    blocks: HashMap<BlockKey, Block>,
    held: Held,
}

fn bytes(b: &Block) -> usize {
    b.data.len() * std::mem::size_of::<f64>()
}

impl BlockMap {
    pub fn new(held: Held) -> BlockMap {
        BlockMap {
            blocks: HashMap::new(),
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
