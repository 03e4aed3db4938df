//! Finding blocks: selectors to keys and shapes, reads and writes by array kind (SIAL-SPEC
//! §7.3.2), extraction from and write-back into static arrays and contiguous regions.

use super::Worker;
use super::remote::Wanted;
use crate::error::{Result, RuntimeError};
use crate::layout::Layout;
use crate::store::{Block, BlockKey, Extents, Region, Storage};
use sial_bytecode::{
    ArrayKind, ArraySlot, BlockRef, IndexKind, IndexSlot, Intent, Operand, RegionRef,
};
use std::ops::Deref;
use std::sync::Arc;

/// A block read for an instruction: borrowed from the worker's storage, extracted (a copy), or
/// a fetched copy of a server's block shared with the link.
pub(crate) enum BlockRead<'w> {
    Borrowed(&'w Block),
    Owned(Block),
    Shared(Arc<Block>),
}

impl Deref for BlockRead<'_> {
    type Target = Block;
    fn deref(&self) -> &Block {
        match self {
            BlockRead::Borrowed(b) => b,
            BlockRead::Owned(b) => b,
            BlockRead::Shared(b) => b,
        }
    }
}

impl BlockRead<'_> {
    /// The block to keep: moved where it is owned, else copied.
    pub(crate) fn into_owned(self) -> Result<Block> {
        match self {
            BlockRead::Borrowed(b) => b.copy(),
            BlockRead::Owned(b) => Ok(b),
            BlockRead::Shared(b) => Arc::try_unwrap(b).or_else(|b| b.copy()),
        }
    }
}

/// A selector's index slots as contraction labels, on the stack.
pub(crate) struct Labels {
    slots: [u32; sial_bytecode::MAX_RANK],
    len: usize,
}

impl Labels {
    pub(crate) fn of(b: &BlockRef) -> Labels {
        let mut slots = [0; sial_bytecode::MAX_RANK];
        for (s, i) in slots.iter_mut().zip(&b.indices) {
            *s = i.0;
        }
        Labels {
            slots,
            len: b.indices.len().min(sial_bytecode::MAX_RANK),
        }
    }
}

impl Deref for Labels {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.slots[..self.len]
    }
}

/// Where a sub-block (slice/insert) lies inside its super block.
pub(crate) struct SubBlock {
    pub key: BlockKey,
    pub super_shape: Vec<usize>,
    pub origin: Vec<usize>,
    pub shape: Vec<usize>,
}

impl Worker<'_> {
    pub(crate) fn index_value(&self, slot: IndexSlot) -> Result<i32> {
        self.index_values[slot.index()].ok_or_else(|| {
            RuntimeError::program(format!(
                "index {} has no value here (it is used outside a loop over it)",
                self.layout.range(slot).name
            ))
        })
    }

    pub(crate) fn array_name(&self, a: ArraySlot) -> &str {
        &self.program.arrays[a.index()].name
    }

    /// `a[1,2]` as text, for messages.
    pub(crate) fn block_text(&self, a: ArraySlot, key: &BlockKey) -> String {
        let rank = self.program.arrays[a.index()].dims.len();
        let segs: Vec<String> = key
            .rank_segments(rank)
            .iter()
            .map(|v| v.to_string())
            .collect();
        format!("{}[{}]", self.array_name(a), segs.join(","))
    }

    /// The key and shape of the block a selector designates now; checks every segment against
    /// the array's declared range.
    pub(crate) fn locate(&self, r: &BlockRef) -> Result<(BlockKey, Extents)> {
        let array = &self.program.arrays[r.array.index()];
        let mut key = BlockKey {
            segments: [1; 6],
            parents: [0; 6],
        };
        let mut shape = Extents::zeroed(array.dims.len())?;
        for (d, (&used, &declared)) in r.indices.iter().zip(&array.dims).enumerate() {
            let v = self.index_value(used)?;
            let range = self.layout.range(declared);
            let parent_value = match (range.kind, range.parent) {
                (IndexKind::Sub, Some(p)) => self.index_value(p)?,
                _ => 0,
            };
            let ok = if range.kind == IndexKind::Sub {
                (1..=crate::layout::SUBSEGMENTS).contains(&v)
            } else {
                range.contains(v)
            };
            if !ok {
                return Err(RuntimeError::program(format!(
                    "block {}[..] selected with {} = {v} in dimension {}, outside the declared range {}:{} of {}",
                    array.name,
                    self.layout.range(used).name,
                    d + 1,
                    range.lo,
                    range.hi,
                    range.name
                )));
            }
            key.segments[d] = v;
            key.parents[d] = parent_value;
            shape[d] = self.layout.extent(declared, v, parent_value);
        }
        if !self.fit.get(r.array.index()).copied().unwrap_or(false) {
            self.fits(&shape, &|| self.block_text(r.array, &key))?;
        }
        Ok((key, shape))
    }

    /// A block of `shape` fits the worker memory budget (see [`fits_budget`]).
    pub(crate) fn fits(&self, shape: &[usize], what: &dyn Fn() -> String) -> Result<()> {
        fits_budget(shape, self.env.options.worker_memory, &|| {
            format!("block {}", what())
        })
    }

    /// Offset of each dimension's block inside a static array.
    fn static_origin(&self, a: ArraySlot, key: &BlockKey) -> Vec<usize> {
        let dims = &self.program.arrays[a.index()].dims;
        dims.iter()
            .enumerate()
            .map(|(d, &declared)| {
                self.layout
                    .offset(declared, self.layout.range(declared).lo, key.segments[d])
            })
            .collect()
    }

    /// What the link needs to fetch or read a distributed/served block.
    pub(crate) fn wanted<'t>(
        &self,
        array: ArraySlot,
        key: BlockKey,
        shape: &[usize],
        text: &'t dyn Fn() -> String,
    ) -> Wanted<'t> {
        let dims = &self.program.arrays[array.index()].dims;
        let mut number: u64 = 0;
        for (d, &declared) in dims.iter().enumerate() {
            let range = self.layout.range(declared);
            let n = range.count().max(1) as u64;
            number = number * n + (key.segments[d] - range.lo).max(0) as u64;
        }
        Wanted {
            array: array.0,
            key,
            bytes: shape.iter().product::<usize>() * 8,
            owner: crate::cluster::owner(number, self.servers),
            line: self.line,
            text,
            site: u32::MAX,
        }
    }

    /// A fetched copy of a distributed/served block; it must have been fetched in this section.
    pub(crate) fn read_remote(
        &self,
        array: ArraySlot,
        key: BlockKey,
        shape: &[usize],
    ) -> Result<Arc<Block>> {
        let text = || self.block_text(array, &key);
        let wanted = self.wanted(array, key, shape, &text);
        let got = self.net.borrow_mut().read(&wanted)?;
        got.ok_or_else(|| {
            let kind = self.program.arrays[array.index()].kind;
            RuntimeError::program(format!(
                "Attempting to read non-existent block {}: a {} block must be fetched with {} in the current section (after the last barrier)",
                self.block_text(array, &key),
                kind.name(),
                if kind == ArrayKind::Served {
                    "request"
                } else {
                    "get"
                }
            ))
        })
    }

    /// Reads a block (intent r): borrowed from a block map, a copy extracted from a static
    /// array, or a fetched copy of a server's block.
    pub(crate) fn read_block(&self, r: &BlockRef) -> Result<BlockRead<'_>> {
        let (key, shape) = self.locate(r)?;
        match &self.memory[r.array.index()] {
            Storage::Remote => Ok(BlockRead::Shared(self.read_remote(r.array, key, &shape)?)),
            Storage::Blocks(map) => map
                .get(&key)
                .map(BlockRead::Borrowed)
                .ok_or_else(|| self.missing_block(r.array, &key, Intent::Read)),
            Storage::Whole(whole) => {
                let origin = self.static_origin(r.array, &key);
                Ok(BlockRead::Owned(extract(whole, &origin, &shape)?))
            }
            Storage::Regions(_) | Storage::Unused => Err(RuntimeError::new(format!(
                "internal: {} has no blocks",
                self.array_name(r.array)
            ))),
        }
    }

    /// The error for a block of a block map that is not there when an instruction reads it
    /// (intent r) or updates it (intent u).
    pub(crate) fn missing_block(
        &self,
        array: ArraySlot,
        key: &BlockKey,
        intent: Intent,
    ) -> RuntimeError {
        let verb = if intent == Intent::Read {
            "read"
        } else {
            "update"
        };
        RuntimeError::program(format!(
            "Attempting to {verb} non-existent block {}",
            self.block_text(array, key)
        ))
    }

    /// Takes a block out for an update (intent u): it must exist. Give it back with
    /// [`Self::put_back`]. A block of a static array is extracted (a copy).
    pub(crate) fn take_block(&mut self, r: &BlockRef) -> Result<Block> {
        if let Storage::Blocks(_) = &self.memory[r.array.index()] {
            let (key, _) = self.locate(r)?;
            if let Storage::Blocks(map) = &mut self.memory[r.array.index()]
                && let Some(block) = map.remove(&key)
            {
                return Ok(block);
            }
            return Err(self.missing_block(r.array, &key, Intent::Update));
        }
        self.update_block(r)
    }

    /// The data of a block held in its array's block map, to overwrite in place; `None` where
    /// the array keeps no block map or the block does not exist yet.
    pub(crate) fn held_data_mut(&mut self, array: ArraySlot, key: &BlockKey) -> Option<&mut [f64]> {
        match &mut self.memory[array.index()] {
            Storage::Blocks(map) => map.data_mut(key),
            _ => None,
        }
    }

    /// The shape of the block `r` names, and whether its array's block map holds it (false
    /// where the block does not exist yet or the array keeps no block map).
    pub(crate) fn locate_held(&self, r: &BlockRef) -> Result<(Extents, bool)> {
        let (key, shape) = self.locate(r)?;
        let held =
            matches!(&self.memory[r.array.index()], Storage::Blocks(map) if map.contains_key(&key));
        Ok((shape, held))
    }

    /// Returns a block taken with [`Self::take_block`]; it keeps the scope it had.
    pub(crate) fn put_back(&mut self, r: &BlockRef, block: Block) -> Result<()> {
        if let Storage::Blocks(_) = &self.memory[r.array.index()] {
            let (key, _) = self.locate(r)?;
            if let Storage::Blocks(map) = &mut self.memory[r.array.index()] {
                map.insert(key, block);
            }
            return Ok(());
        }
        self.write_block(r, block)
    }

    /// Distributed and served blocks change only through put/prepare.
    pub(crate) fn remote_write_error(&self, r: &BlockRef) -> RuntimeError {
        RuntimeError::program(format!(
            "attempting to update distributed or served block {} (write it with put or prepare)",
            self.locate(r)
                .map(|(k, _)| self.block_text(r.array, &k))
                .unwrap_or_else(|_| self.array_name(r.array).to_string())
        ))
    }

    /// A copy of a block that is about to be updated (intent u): it must exist.
    pub(crate) fn update_block(&self, r: &BlockRef) -> Result<Block> {
        if let Storage::Remote = &self.memory[r.array.index()] {
            return Err(self.remote_write_error(r));
        }
        if let Storage::Blocks(map) = &self.memory[r.array.index()] {
            let (key, _) = self.locate(r)?;
            return map
                .get(&key)
                .ok_or_else(|| self.missing_block(r.array, &key, Intent::Update))?
                .copy();
        }
        self.read_block(r)?.into_owned()
    }

    /// Stores a block (intent w): creates it if absent (temp blocks join the innermost scope),
    /// writes it back into a static array.
    pub(crate) fn write_block(&mut self, r: &BlockRef, block: Block) -> Result<()> {
        let (key, shape) = self.locate(r)?;
        self.write_located(r, key, &shape, block)
    }

    /// [`Self::write_block`] where the caller has located `r` already (its key and shape):
    /// located three times, a one-element block's fill spent a quarter of its time there.
    pub(crate) fn write_located(
        &mut self,
        r: &BlockRef,
        key: BlockKey,
        shape: &Extents,
        block: Block,
    ) -> Result<()> {
        if *shape != block.shape {
            return Err(RuntimeError::new(format!(
                "internal: block {} has shape {:?}, result has {:?}",
                self.block_text(r.array, &key),
                shape,
                block.shape
            )));
        }
        if let Storage::Remote = &self.memory[r.array.index()] {
            let text = || self.block_text(r.array, &key);
            let wanted = self.wanted(r.array, key, shape, &text);
            return self.net.borrow_mut().write_own(&wanted, block);
        }
        let kind = self.program.arrays[r.array.index()].kind;
        let origin = match &self.memory[r.array.index()] {
            Storage::Whole(_) => Some(self.static_origin(r.array, &key)),
            _ => None,
        };
        match &mut self.memory[r.array.index()] {
            Storage::Blocks(map) => match map.insert(key, block) {
                Some(old) => {
                    crate::spare::give(old.data);
                    Ok(())
                }
                None => {
                    if kind == ArrayKind::Temp {
                        self.scopes.hold(r.array, key);
                    }
                    Ok(())
                }
            },
            Storage::Whole(whole) => {
                paste(whole, origin.as_deref().unwrap_or(&[]), &block);
                Ok(())
            }
            Storage::Remote | Storage::Regions(_) | Storage::Unused => Err(RuntimeError::new(
                format!("internal: {} has no blocks", self.array_name(r.array)),
            )),
        }
    }

    /// The shape a destination block has (for intent w).
    pub(crate) fn shape_of(&self, r: &BlockRef) -> Result<Extents> {
        Ok(self.locate(r)?.1)
    }

    /// Evaluates a region's bounds and checks them against the declared ranges.
    pub(crate) fn region_bounds(&self, r: &RegionRef) -> Result<(Vec<i32>, Vec<i32>, Vec<usize>)> {
        let dims = &self.program.arrays[r.array.index()].dims;
        let mut lower = Vec::new();
        let mut upper = Vec::new();
        let mut shape = Vec::new();
        for (d, (&(l, u), &declared)) in r.ranges.iter().zip(dims).enumerate() {
            let (l, u) = (self.eval_int(l)?, self.eval_int(u)?);
            let range = self.layout.range(declared);
            if !range.contains(l) {
                return Err(RuntimeError::program(format!(
                    "lower bound of range undefined for index {}: segment {l} is outside {}:{} (dimension {})",
                    range.name,
                    range.lo,
                    range.hi,
                    d + 1
                )));
            }
            if !range.contains(u) {
                return Err(RuntimeError::program(format!(
                    "upper bound of range undefined for index {}: segment {u} is outside {}:{} (dimension {})",
                    range.name,
                    range.lo,
                    range.hi,
                    d + 1
                )));
            }
            if l > u {
                return Err(RuntimeError::program(format!(
                    "block is not well formed, invalid ranges: {l}:{u} in dimension {}",
                    d + 1
                )));
            }
            shape.push((l..=u).map(|v| self.layout.extent(declared, v, 0)).sum());
            lower.push(l);
            upper.push(u);
        }
        self.fits(&shape, &|| {
            format!("region of {}", self.array_name(r.array))
        })?;
        Ok((lower, upper, shape))
    }

    pub(crate) fn region_text(&self, a: ArraySlot, lower: &[i32], upper: &[i32]) -> String {
        let parts: Vec<String> = lower
            .iter()
            .zip(upper)
            .map(|(l, u)| {
                if l == u {
                    l.to_string()
                } else {
                    format!("{l}:{u}")
                }
            })
            .collect();
        format!("{}[{}]", self.array_name(a), parts.join(","))
    }

    /// The enclosing region and the origin of the reference inside it.
    fn find_region(
        &self,
        r: &RegionRef,
        lower: &[i32],
        upper: &[i32],
    ) -> Result<(usize, Vec<usize>)> {
        let Storage::Regions(regions) = &self.memory[r.array.index()] else {
            return Err(RuntimeError::new(format!(
                "internal: {} is not contiguous local",
                self.array_name(r.array)
            )));
        };
        let dims = &self.program.arrays[r.array.index()].dims;
        let found = regions.iter().position(|g| g.encloses(lower, upper)).ok_or_else(|| {
            RuntimeError::program(format!(
                "Contiguous local block {} must be explicitly allocated (no allocated region encloses it)",
                self.region_text(r.array, lower, upper)
            ))
        })?;
        let g = &regions[found];
        let origin = dims
            .iter()
            .enumerate()
            .map(|(d, &declared)| self.layout.offset(declared, g.lower[d], lower[d]))
            .collect();
        Ok((found, origin))
    }

    pub(crate) fn read_region(&self, r: &RegionRef) -> Result<Block> {
        let (lower, upper, shape) = self.region_bounds(r)?;
        let (i, origin) = self.find_region(r, &lower, &upper)?;
        let Storage::Regions(regions) = &self.memory[r.array.index()] else {
            unreachable_storage()?
        };
        extract(&regions[i].block, &origin, &shape)
    }

    pub(crate) fn write_region(&mut self, r: &RegionRef, block: &Block) -> Result<()> {
        let (lower, upper, shape) = self.region_bounds(r)?;
        if block.shape != shape {
            return Err(RuntimeError::program(format!(
                "region {} has shape {:?} but the block assigned to it has shape {:?}",
                self.region_text(r.array, &lower, &upper),
                shape,
                block.shape
            )));
        }
        let (i, origin) = self.find_region(r, &lower, &upper)?;
        if let Storage::Regions(regions) = &mut self.memory[r.array.index()] {
            paste(&mut regions[i].block, &origin, block);
        }
        Ok(())
    }

    pub(crate) fn allocate_region(&mut self, r: &RegionRef) -> Result<()> {
        let (lower, upper, shape) = self.region_bounds(r)?;
        let text = self.region_text(r.array, &lower, &upper);
        let Storage::Regions(regions) = &mut self.memory[r.array.index()] else {
            unreachable_storage()?
        };
        if regions.iter().any(|g| g.overlaps(&lower, &upper)) {
            return Err(RuntimeError::program(format!(
                "attempting to insert overlapping local contiguous into block map: {text}"
            )));
        }
        let block = Block::zeros(shape)?;
        let bytes = block.data.len() * 8;
        regions.push(Region {
            lower,
            upper,
            block,
        });
        self.memory.region(bytes, true);
        Ok(())
    }

    pub(crate) fn deallocate_region(&mut self, r: &RegionRef) -> Result<()> {
        let (lower, upper, _) = self.region_bounds(r)?;
        let text = self.region_text(r.array, &lower, &upper);
        let Storage::Regions(regions) = &mut self.memory[r.array.index()] else {
            unreachable_storage()?
        };
        match regions
            .iter()
            .position(|g| g.lower == lower && g.upper == upper)
        {
            Some(i) => {
                let gone = regions.remove(i);
                self.memory.region(gone.block.data.len() * 8, false);
                Ok(())
            }
            None => Err(RuntimeError::program(format!(
                "deallocate contiguous {text}: no region was allocated with exactly these bounds"
            ))),
        }
    }

    pub(crate) fn read_operand(&self, o: &Operand) -> Result<BlockRead<'_>> {
        match o {
            Operand::Block(r) => self.read_block(r),
            Operand::Region(r) => Ok(BlockRead::Owned(self.read_region(r)?)),
        }
    }

    pub(crate) fn update_operand(&self, o: &Operand) -> Result<Block> {
        match o {
            Operand::Block(r) => self.update_block(r),
            Operand::Region(r) => self.read_region(r),
        }
    }

    pub(crate) fn operand_shape(&self, o: &Operand) -> Result<Extents> {
        match o {
            Operand::Block(r) => self.shape_of(r),
            Operand::Region(r) => Extents::of(&self.region_bounds(r)?.2),
        }
    }

    pub(crate) fn write_operand(&mut self, o: &Operand, block: Block) -> Result<()> {
        match o {
            Operand::Block(r) => self.write_block(r, block),
            Operand::Region(r) => self.write_region(r, &block),
        }
    }

    /// For a reference that selects some dimensions with a subindex of the declared index
    /// (`a[ii, j]` with `a` declared over `i`): the super block and where the sub-block lies.
    pub(crate) fn sub_block(&self, r: &BlockRef) -> Result<SubBlock> {
        let array = &self.program.arrays[r.array.index()];
        let mut key = BlockKey {
            segments: [1; 6],
            parents: [0; 6],
        };
        let mut super_shape = Vec::new();
        let mut origin = Vec::new();
        let mut shape = Vec::new();
        for (d, (&used, &declared)) in r.indices.iter().zip(&array.dims).enumerate() {
            let u = self.layout.range(used);
            let (segment, sub) = match (u.kind, u.parent) {
                (IndexKind::Sub, Some(p)) if self.layout.range(declared).kind != IndexKind::Sub => {
                    (self.index_value(p)?, Some(self.index_value(used)?))
                }
                _ => (self.index_value(used)?, None),
            };
            let range = self.layout.range(declared);
            if !range.contains(segment) {
                return Err(RuntimeError::program(format!(
                    "block of {} selected with segment {segment} in dimension {}, outside {}:{}",
                    array.name,
                    d + 1,
                    range.lo,
                    range.hi
                )));
            }
            key.segments[d] = segment;
            let whole = self.layout.extent(declared, segment, 0);
            super_shape.push(whole);
            match sub {
                Some(k) => {
                    origin.push(Layout::sub_offset(whole, k));
                    shape.push(crate::layout::sub_extent(whole, k));
                }
                None => {
                    origin.push(0);
                    shape.push(whole);
                }
            }
        }
        self.fits(&super_shape, &|| self.block_text(r.array, &key))?;
        Ok(SubBlock {
            key,
            super_shape,
            origin,
            shape,
        })
    }
}

fn unreachable_storage<T>() -> Result<T> {
    Err(RuntimeError::new("internal: wrong storage kind"))
}

/// Copies the sub-array of `src` at `origin` with `shape` into a new block.
pub(crate) fn extract(src: &Block, origin: &[usize], shape: &[usize]) -> Result<Block> {
    let mut out = Block::zeros(shape)?;
    for_each_line(&src.shape, origin, shape, |src_at, dst_at, n| {
        out.data[dst_at..dst_at + n].copy_from_slice(&src.data[src_at..src_at + n]);
    });
    Ok(out)
}

/// Writes `block` into `dst` at `origin`.
pub(crate) fn paste(dst: &mut Block, origin: &[usize], block: &Block) {
    let shape = dst.shape;
    for_each_line(&shape, origin, &block.shape, |dst_at, src_at, n| {
        dst.data[dst_at..dst_at + n].copy_from_slice(&block.data[src_at..src_at + n]);
    });
}

/// Visits the contiguous first-dimension lines of a `sub` box at `origin` inside a column-major
/// array of shape `outer`: `f(offset in outer, offset in sub, length)`.
fn for_each_line(
    outer: &[usize],
    origin: &[usize],
    sub: &[usize],
    mut f: impl FnMut(usize, usize, usize),
) {
    let rank = sub.len();
    if sub.contains(&0) {
        return;
    }
    if rank == 0 {
        f(0, 0, 1);
        return;
    }
    let mut strides = vec![1usize; rank];
    for d in 1..rank {
        strides[d] = strides[d - 1] * outer[d - 1];
    }
    let lines: usize = sub[1..].iter().product();
    let mut idx = vec![0usize; rank];
    for line in 0..lines {
        let at: usize = (0..rank).map(|d| (origin[d] + idx[d]) * strides[d]).sum();
        f(at, line * sub[0], sub[0]);
        for d in 1..rank {
            idx[d] += 1;
            if idx[d] < sub[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// A block of `shape` (named by `what`: "block a[1,2]", "static array s") fits `budget`
/// bytes: checked before anything is allocated, so that a block too big is an error naming
/// it, never an abort by the allocator or an overflow.
pub(crate) fn fits_budget(shape: &[usize], budget: usize, what: &dyn Fn() -> String) -> Result<()> {
    match crate::store::block_bytes(shape) {
        Some(bytes) if bytes <= budget => Ok(()),
        bytes => Err(RuntimeError::program(format!(
            "{} of shape {shape:?} needs {} bytes, more than the worker memory budget of {budget} bytes (give more with --worker-memory, or use smaller segments)",
            what(),
            bytes.map_or("more than 2^64".to_string(), |b| b.to_string())
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extract_and_paste_round_trip() {
        // 4x3 column-major 0..12; the 2x2 box at (1,1) holds 5, 6, 9, 10.
        let whole = Block {
            shape: [4, 3].into(),
            data: (0..12).map(f64::from).collect(),
        };
        let b = extract(&whole, &[1, 1], &[2, 2]).expect("extract");
        assert_eq!(b.data, vec![5.0, 6.0, 9.0, 10.0]);
        let mut target = Block::zeros(vec![4, 3]).expect("zeros");
        paste(&mut target, &[1, 1], &b);
        assert_eq!(target.data[5], 5.0);
        assert_eq!(target.data[10], 10.0);
        assert_eq!(target.data.iter().filter(|&&x| x != 0.0).count(), 4);
    }
}
