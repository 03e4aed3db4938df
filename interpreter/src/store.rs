//! Block storage of one worker: the blocks of local, temp and (in one process) distributed and
//! served arrays, the whole static arrays, and the regions of contiguous local arrays.

use std::collections::HashMap;

/// A dense block: shape and column-major data.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

/// The storage of one array.
#[derive(Debug)]
pub enum Storage {
    /// Local, temp, distributed and served arrays: a map of blocks.
    Blocks(HashMap<BlockKey, Block>),
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
pub fn block_text(
    program: &sial_compiler::bytecode::Program,
    array: usize,
    key: &BlockKey,
) -> String {
    let a = &program.arrays[array];
    let segs: Vec<String> = key
        .rank_segments(a.dims.len())
        .iter()
        .map(|v| v.to_string())
        .collect();
    format!("{}[{}]", a.name, segs.join(","))
}
