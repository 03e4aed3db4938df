//! Index ranges and segment extents of a loaded program: the bytecode's index table bound to the
//! setup's segment tables and predefined ints (SIAL-SPEC §3.1).

use crate::error::{Result, RuntimeError};
use crate::setup::Setup;
use sial_bytecode::{Bound, IndexKind, IndexSlot, Program};

/// Subsegments per segment of a subindex's parent (SIAL-SPEC §3.1.4).
pub const SUBSEGMENTS: i32 = 4;

/// One index with its range resolved.
#[derive(Clone, Debug)]
pub struct IndexRange {
    pub name: String,
    pub kind: IndexKind,
    /// First and last segment (inclusive); `hi < lo` is an empty range.
    pub lo: i32,
    pub hi: i32,
    pub parent: Option<IndexSlot>,
}

impl IndexRange {
    pub fn count(&self) -> i64 {
        (self.hi as i64 - self.lo as i64 + 1).max(0)
    }

    pub fn contains(&self, v: i32) -> bool {
        v >= self.lo && v <= self.hi
    }
}

/// The program's ints as it starts: predefined ones from the setup, the others at their
/// declared values.
pub fn start_ints(program: &Program, setup: &Setup) -> Result<Vec<i32>> {
    program
        .ints
        .iter()
        .map(|x| match x.predefined {
            true => setup.ints.get(&x.name).copied().ok_or_else(|| {
                RuntimeError::input(format!("Could not find predefined integer : {0} (give it in the setup file or with --set {0}=VALUE)", x.name))
            }),
            false => Ok(x.init),
        })
        .collect()
}

/// Blocks of each array: the product of its indices' segment counts (of a subindex, the
/// subsegments of one parent segment), or 0 for every array where the setup leaves a bound
/// undefined.
pub fn block_counts(program: &Program, setup: &Setup) -> Vec<u64> {
    let Ok(ints) = start_ints(program, setup) else {
        return vec![0; program.arrays.len()];
    };
    let count = |slot: IndexSlot| {
        let x = &program.indices[slot.index()];
        let bound = |b: Bound| match b {
            Bound::Literal(v) => i64::from(v),
            Bound::Predefined(s) => ints.get(s.index()).map_or(0, |&v| i64::from(v)),
        };
        (bound(x.hi) - bound(x.lo) + 1).max(0) as u64
    };
    program
        .arrays
        .iter()
        .map(|a| a.dims.iter().fold(1u64, |n, &d| n.saturating_mul(count(d))))
        .collect()
}

/// Index ranges and the segment tables they use.
#[derive(Clone, Debug)]
pub struct Layout {
    pub indices: Vec<IndexRange>,
    /// Extents per segment (1-based segment `v` at `[v - 1]`), per index slot's kind; empty for
    /// simple indices and subindices.
    tables: Vec<Vec<usize>>,
    /// Per slot, where each segment starts: `[0, e1, e1 + e2, ...]` (one more than `tables`),
    /// so that an offset is one subtraction, not a sum over the segments before it.
    starts: Vec<Vec<usize>>,
}

impl Layout {
    /// Resolves every index of `program` against `setup` and checks that each segment of each
    /// declared range has an extent.
    pub fn new(program: &Program, ints: &[i32], setup: &Setup) -> Result<Layout> {
        let bound = |b: Bound| match b {
            Bound::Literal(v) => v,
            Bound::Predefined(s) => ints[s.index()],
        };
        let mut indices = Vec::new();
        let mut tables = Vec::new();
        for x in &program.indices {
            let (lo, hi) = (bound(x.lo), bound(x.hi));
            if (hi as i64) < lo as i64 - 1 {
                return Err(RuntimeError::input(format!(
                    "-ve value for num_segments: index {} = {lo}:{hi} has a negative number of segments",
                    x.name
                )));
            }
            let range = IndexRange {
                name: x.name.clone(),
                kind: x.kind,
                lo,
                hi,
                parent: x.parent,
            };
            let table = match x.kind {
                IndexKind::Simple | IndexKind::Sub => Vec::new(),
                kind => {
                    if lo < 1 {
                        return Err(RuntimeError::input(format!(
                            "index {} = {lo}:{hi}: an {} range must start at segment 1 or later",
                            x.name,
                            kind.name()
                        )));
                    }
                    let Some(table) = setup.segments.get(kind.name()) else {
                        return Err(RuntimeError::input(format!(
                            "Could not find segment descriptor for {}: the setup data has no segment table for index {} (give one with --segments {}=e1,e2,... or in the setup file)",
                            kind.name(),
                            x.name,
                            kind.name()
                        )));
                    };
                    if hi as i64 > table.len() as i64 {
                        return Err(RuntimeError::input(format!(
                            "SIAL program/ setup data incompatibility.  Not enough segments for index type {}: index {} = {lo}:{hi} needs {hi} segments, the setup has {}",
                            kind.name(),
                            x.name,
                            table.len()
                        )));
                    }
                    table.clone()
                }
            };
            indices.push(range);
            tables.push(table);
        }
        let starts = tables
            .iter()
            .map(|t| {
                std::iter::once(0)
                    .chain(t.iter().scan(0, |sum, e| {
                        *sum += e;
                        Some(*sum)
                    }))
                    .collect()
            })
            .collect();
        Ok(Layout {
            indices,
            tables,
            starts,
        })
    }

    pub fn range(&self, slot: IndexSlot) -> &IndexRange {
        &self.indices[slot.index()]
    }

    /// Extent of segment `v` of index `slot`. For a subindex, `parent_value` is the current
    /// segment of its parent.
    pub fn extent(&self, slot: IndexSlot, v: i32, parent_value: i32) -> usize {
        let x = &self.indices[slot.index()];
        match (x.kind, x.parent) {
            (IndexKind::Simple, _) => 1,
            (IndexKind::Sub, Some(p)) => {
                let whole = self.extent(p, parent_value, 0);
                sub_extent(whole, v)
            }
            _ => usize::try_from(v - 1)
                .ok()
                .and_then(|i| self.tables[slot.index()].get(i))
                .copied()
                .unwrap_or(0),
        }
    }

    /// The largest extent a segment of index `slot` has (for a subindex, a bound: its parent's
    /// largest), 0 for an index without segments.
    pub fn largest_extent(&self, slot: IndexSlot) -> usize {
        let x = &self.indices[slot.index()];
        match (x.kind, x.parent) {
            (IndexKind::Simple, _) => 1,
            (IndexKind::Sub, Some(p)) => self.largest_extent(p),
            _ => self.tables[slot.index()].iter().max().copied().unwrap_or(0),
        }
    }

    /// Sum of the extents of segments `from..v` (the offset of segment `v` in an array that starts
    /// at segment `from`).
    pub fn offset(&self, slot: IndexSlot, from: i32, v: i32) -> usize {
        if v <= from {
            return 0;
        }
        match self.indices[slot.index()].kind {
            IndexKind::Simple => (v - from) as usize,
            IndexKind::Sub => (from..v).map(|s| self.extent(slot, s, 0)).sum(),
            _ => {
                // Segments outside the table have extent 0, as in `extent`.
                let starts = &self.starts[slot.index()];
                let start = |s: i32| {
                    let i = usize::try_from(s - 1).unwrap_or(0);
                    starts[i.min(starts.len() - 1)]
                };
                start(v) - start(from)
            }
        }
    }

    /// Offset of subsegment `k` inside its parent segment of extent `whole`.
    pub fn sub_offset(whole: usize, k: i32) -> usize {
        (1..k).map(|s| sub_extent(whole, s)).sum()
    }

    /// Full extent of an index's declared range.
    pub fn full_extent(&self, slot: IndexSlot) -> usize {
        let x = &self.indices[slot.index()];
        (x.lo..=x.hi).map(|v| self.extent(slot, v, 0)).sum()
    }
}

/// Extent of subsegment `k` (1-based) of a segment of extent `whole`.
pub fn sub_extent(whole: usize, k: i32) -> usize {
    let s = SUBSEGMENTS as usize;
    let k = k.max(1) as usize;
    whole / s + usize::from(k <= whole % s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subsegments_split_as_the_spec_says() {
        // E = 10, S = 4: 3 3 2 2
        let e: Vec<usize> = (1..=4).map(|k| sub_extent(10, k)).collect();
        assert_eq!(e, vec![3, 3, 2, 2]);
        assert_eq!(Layout::sub_offset(10, 3), 6);
        let e: Vec<usize> = (1..=4).map(|k| sub_extent(2, k)).collect();
        assert_eq!(e, vec![1, 1, 0, 0]);
    }

    /// A segmented index (extents 3, 5, 2, 7), a simple one of 6 values and a subindex of the
    /// first: the program and its layout.
    fn three_indices() -> (Program, Layout) {
        let source = "sial p\naoindex mu = 1:4\nindex k = -2:3\nsubindex m of mu\nendsial p\n";
        let program = crate::testutil::program(source);
        let mut setup = Setup::default();
        setup.segments.insert("aoindex".into(), vec![3, 5, 2, 7]);
        let layout = Layout::new(&program, &[], &setup).expect("layout");
        (program, layout)
    }

    #[test]
    fn an_offset_is_the_sum_of_the_extents_before_it() {
        let (program, layout) = three_indices();
        for slot in 0..program.indices.len() {
            let slot = IndexSlot(slot as u32);
            for from in -4..7 {
                for v in -4..7 {
                    let summed: usize = (from..v).map(|s| layout.extent(slot, s, 0)).sum();
                    assert_eq!(layout.offset(slot, from, v), summed, "{slot:?} {from}..{v}");
                }
            }
        }
    }

    /// The largest extent bounds every segment's: the table's largest for a segmented
    /// index, 1 for a simple one, the parent's largest for a subindex.
    #[test]
    fn the_largest_extent_bounds_every_segment() {
        let (_, layout) = three_indices();
        let largest: Vec<usize> = (0..3)
            .map(|s| layout.largest_extent(IndexSlot(s)))
            .collect();
        assert_eq!(largest, [7, 1, 7]);
        for v in 1..=4 {
            for k in 1..=SUBSEGMENTS {
                assert!(layout.extent(IndexSlot(2), k, v) <= largest[2]);
            }
        }
    }

    #[test]
    fn block_counts_multiply_the_segments_of_each_dimension() {
        let source = "sial p\npredefined int n\naoindex mu = 1:4\nindex k = -2:n\ndistributed d[mu,k]\nserved v[mu,mu,mu]\ntemp t[k]\nendsial p\n";
        let program = crate::testutil::program(source);
        let mut setup = Setup::default();
        assert_eq!(block_counts(&program, &setup), vec![0, 0, 0], "n undefined");
        setup.ints.insert("n".into(), 3);
        // k = -2..3: 6 segments.
        assert_eq!(block_counts(&program, &setup), vec![24, 64, 6]);
    }
}
