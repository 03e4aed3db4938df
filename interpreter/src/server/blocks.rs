//! The blocks a server holds (SIAL-SPEC §7.8; docs/ARCHITECTURE.md "Server memory and disk spill"):
//! in memory up to the server's budget; past it the least recently used blocks are written to
//! one file per array in the server's scratch folder and read back when next needed. Only a
//! block whose disk copy is missing or stale is written; a clean block is simply dropped.
//!
//! Every byte of block data the server holds counts, and so does the buffer of an incoming
//! put while it is applied. Files are written with positioned writes (`pwrite`) rather than
//! through a memory map: a full disk is then an error the server can report, where a store
//! into a map would kill the process with SIGBUS.

use super::race::Mode;
use crate::error::{Result, RuntimeError};
use crate::store::{Block, BlockKey, BlockKeyMap, Extents, MOST_SLOTS_AHEAD};
use crate::sum::{
    compensated_add_block, compensated_add_scalar, compensated_start_block,
    compensated_start_scalar,
};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

/// Where and how much a server may spill.
#[derive(Debug, Clone)]
pub struct Spill {
    /// Bytes of block data in memory (`usize::MAX`: no limit).
    pub budget: usize,
    /// This server's scratch folder (created at the first spill).
    pub dir: PathBuf,
    /// Testing aid: the folder's file system holds only this many bytes.
    pub disk_limit: Option<u64>,
}

impl Default for Spill {
    fn default() -> Spill {
        Spill {
            budget: usize::MAX,
            dir: std::env::temp_dir(),
            disk_limit: None,
        }
    }
}

/// Disk figures of one server.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DiskStats {
    pub peak_memory: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub blocks_spilled: u64,
    pub blocks_reloaded: u64,
}

/// One block at the server.
pub struct Slot {
    /// Consistency state (§7.7) and the section it belongs to.
    pub mode: Mode,
    pub section: u32,
    data: Option<Arc<Block>>,
    /// The shape of a block whose values are only on disk (`data` is `None`); boxed, because
    /// most blocks never spill and a slot is one of up to 10⁵ in a hash table.
    spilled: Option<Box<Extents>>,
    /// Offset of the block's place in its array file, once it has one.
    place: Option<u64>,
    /// The disk copy (if any) is older than the memory copy.
    dirty: bool,
    last_use: u64,
}

impl Slot {
    fn bytes(&self) -> usize {
        match (&self.data, &self.spilled) {
            (Some(b), _) => b.data.len() * 8,
            (None, Some(shape)) => shape.iter().product::<usize>() * 8,
            (None, None) => 0,
        }
    }
}

#[derive(Default)]
struct ArrayBlocks {
    blocks: BlockKeyMap<BlockKey, Slot>,
    file: Option<(File, PathBuf)>,
    file_len: u64,
}

/// `a[1,2]`: a block in messages, with one segment per dimension of its array.
fn label(names: &[String], ranks: &[usize], array: u32, key: &BlockKey) -> String {
    let rank = ranks.get(array as usize).copied().unwrap_or(6);
    let segs: Vec<String> = key
        .rank_segments(rank)
        .iter()
        .map(|v| v.to_string())
        .collect();
    format!("{}[{}]", names[array as usize], segs.join(","))
}

pub struct BlockStore {
    server: usize,
    names: Arc<[String]>,
    /// The number of dimensions of each array.
    ranks: Arc<[usize]>,
    spill: Spill,
    memory: usize,
    arrays: Vec<ArrayBlocks>,
    /// In-memory blocks by last use (least recent first).
    lru: BTreeMap<u64, (u32, BlockKey)>,
    clock: u64,
    disk_used: u64,
    /// The low parts of the blocks accumulated in the current sections (see [`Self::accumulate`]),
    /// with the section of each; counted in `memory`.
    residuals: BlockKeyMap<(u32, BlockKey), (u32, Vec<f64>)>,
    /// Blocks of each array this server will likely hold (its table is made that large).
    expected: Vec<usize>,
    pub stats: DiskStats,
}

/// Lets a block's memory copy go where a newer one replaces it: out of the order of use and
/// of the memory counted; its buffer serves the next block unless a reply still holds it.
fn let_go(
    lru: &mut BTreeMap<u64, (u32, BlockKey)>,
    memory: &mut usize,
    old: Arc<Block>,
    last_use: u64,
) {
    lru.remove(&last_use);
    *memory -= old.data.len() * 8;
    if let Ok(old) = Arc::try_unwrap(old) {
        crate::spare::give(old.data);
    }
}

/// What `put +=` adds to a block.
pub enum Addend<'a> {
    Block(&'a [f64]),
    Scalar(f64),
}

impl BlockStore {
    /// A store for arrays of the given names and numbers of dimensions.
    pub fn new(server: usize, arrays: Vec<(String, usize)>, spill: Spill) -> BlockStore {
        let (names, ranks): (Vec<String>, Vec<usize>) = arrays.into_iter().unzip();
        BlockStore {
            server,
            arrays: names.iter().map(|_| ArrayBlocks::default()).collect(),
            names: names.into(),
            ranks: ranks.into(),
            spill,
            memory: 0,
            lru: BTreeMap::new(),
            clock: 0,
            disk_used: 0,
            residuals: BlockKeyMap::default(),
            expected: Vec::new(),
            stats: DiskStats::default(),
        }
    }

    /// Arrays of `blocks[a]` blocks in all, spread over `servers` servers.
    pub fn expect(&mut self, blocks: &[u64], servers: usize) {
        let servers = servers.max(1) as u64;
        self.expected = blocks
            .iter()
            .map(|&n| {
                usize::try_from(n.div_ceil(servers))
                    .map_or(MOST_SLOTS_AHEAD, |n| n.min(MOST_SLOTS_AHEAD))
            })
            .collect();
    }

    pub fn contains(&self, array: u32, key: &BlockKey) -> bool {
        self.arrays[array as usize].blocks.contains_key(key)
    }

    pub fn slot_mut(&mut self, array: u32, key: &BlockKey) -> Option<&mut Slot> {
        self.arrays[array as usize].blocks.get_mut(key)
    }

    /// Blocks held, in memory or on disk.
    pub fn len(&self) -> usize {
        self.arrays.iter().map(|a| a.blocks.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn memory(&self) -> usize {
        self.memory
    }

    fn text(&self, array: u32, key: &BlockKey) -> String {
        label(&self.names, &self.ranks, array, key)
    }

    fn touch(&mut self, array: u32, key: BlockKey) {
        if !self.spills() {
            return;
        }
        self.clock += 1;
        let clock = self.clock;
        if let Some(s) = self.arrays[array as usize].blocks.get_mut(&key) {
            if s.data.is_some() {
                self.lru.remove(&s.last_use);
                self.lru.insert(clock, (array, key));
            }
            s.last_use = clock;
        }
    }

    /// Whether the server has a memory budget, so may spill. Without one nothing is ever
    /// evicted and the order of use is not kept: `lru` stays empty (a B-tree update per
    /// request was a leading cost of small puts and gets).
    fn spills(&self) -> bool {
        self.spill.budget != usize::MAX
    }

    fn account(&mut self, delta_in: usize, delta_out: usize) {
        self.memory = self.memory + delta_in - delta_out;
        self.stats.peak_memory = self.stats.peak_memory.max(self.memory as u64);
    }

    /// Frees memory until `need` more bytes fit in the budget; `keep` is not evicted. Returns
    /// the buffer of an evicted block of exactly `need` bytes, if one was freed, for reuse.
    fn make_room(
        &mut self,
        need: usize,
        keep: Option<(u32, BlockKey)>,
        what: &dyn Fn() -> String,
    ) -> Result<Option<Vec<f64>>> {
        let mut reusable = None;
        if need > self.spill.budget {
            return Err(RuntimeError::input(format!(
                "server {}: block {} needs {need} bytes but the server memory budget is {} bytes (give more with --server-memory)",
                self.server,
                what(),
                self.spill.budget
            )));
        }
        while self.memory + need > self.spill.budget {
            // The low parts of running sums go before any block does.
            if !self.residuals.is_empty() {
                let freed: usize = self
                    .residuals
                    .drain()
                    .map(|(_, (_, lo))| lo.len() * 8)
                    .sum();
                self.account(0, freed);
                continue;
            }
            let victim = self.lru.values().copied().find(|v| Some(*v) != keep);
            let Some((array, key)) = victim else {
                return Err(RuntimeError::input(format!(
                    "server {}: no room for block {} ({need} bytes) within the server memory budget of {} bytes (give more with --server-memory)",
                    self.server,
                    what(),
                    self.spill.budget
                )));
            };
            let freed = self.evict(array, key)?;
            if reusable.is_none() && freed.as_ref().is_some_and(|b| b.len() * 8 == need) {
                reusable = freed;
            }
        }
        Ok(reusable)
    }

    /// Writes a block to its array file if the disk copy is missing or stale, then drops it
    /// from memory. The memory copy is dropped only after the write succeeded. Returns its
    /// buffer when nobody else shares it.
    fn evict(&mut self, array: u32, key: BlockKey) -> Result<Option<Vec<f64>>> {
        let a = &mut self.arrays[array as usize];
        let Some(slot) = a.blocks.get_mut(&key) else {
            return Err(RuntimeError::new(
                "internal: evicting a block that is not held",
            ));
        };
        let Some(data) = slot.data.clone() else {
            return Ok(None);
        };
        let bytes = slot.bytes();
        let started = std::time::Instant::now();
        if slot.dirty || slot.place.is_none() {
            if a.file.is_none() {
                std::fs::create_dir_all(&self.spill.dir).map_err(|e| {
                    RuntimeError::input(format!(
                        "server {}: cannot create scratch folder {}: {e}",
                        self.server,
                        self.spill.dir.display()
                    ))
                })?;
                let path = self
                    .spill
                    .dir
                    .join(format!("{}.arr", self.names[array as usize]));
                let file = File::options()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&path)
                    .map_err(|e| {
                        RuntimeError::input(format!(
                            "server {}: cannot create spill file {} for array {}: {e}",
                            self.server,
                            path.display(),
                            self.names[array as usize]
                        ))
                    })?;
                a.file = Some((file, path));
            }
            let place = match slot.place {
                Some(p) => p,
                None => {
                    let p = a.file_len;
                    if let Some(limit) = self.spill.disk_limit
                        && self.disk_used + bytes as u64 > limit
                    {
                        let path = a
                            .file
                            .as_ref()
                            .map(|f| f.1.display().to_string())
                            .unwrap_or_default();
                        return Err(RuntimeError::input(format!(
                            "server {}: cannot spill block {} of array {} to {path}: No space left on device (os error 28)",
                            self.server,
                            label(&self.names, &self.ranks, array, &key),
                            self.names[array as usize]
                        )));
                    }
                    p
                }
            };
            let (file, path) = a
                .file
                .as_ref()
                .ok_or_else(|| RuntimeError::new("internal: spill file"))?;
            // Scratch files are read back by the same process: native byte order, no copy.
            file.write_all_at(bytemuck::cast_slice(&data.data), place)
                .map_err(|e| {
                    RuntimeError::input(format!(
                        "server {}: cannot spill block {} of array {} to {}: {e}",
                        self.server,
                        label(&self.names, &self.ranks, array, &key),
                        self.names[array as usize],
                        path.display()
                    ))
                })?;
            if slot.place.is_none() {
                a.file_len += bytes as u64;
                self.disk_used += bytes as u64;
                slot.place = Some(place);
            }
            slot.dirty = false;
            self.stats.bytes_written += bytes as u64;
            self.stats.blocks_spilled += 1;
            crate::trace::span(
                "disk",
                || "spill".into(),
                started,
                true,
                &[("bytes", bytes.into())],
            );
        }
        slot.spilled = Some(Box::new(data.shape));
        slot.data = None;
        self.lru.remove(&slot.last_use);
        self.account(0, bytes);
        Ok(Arc::try_unwrap(data).ok().map(|b| b.data))
    }

    /// Reads a spilled block back into memory.
    fn reload(&mut self, array: u32, key: BlockKey) -> Result<()> {
        let bytes = match self.arrays[array as usize].blocks.get(&key) {
            Some(s) if s.data.is_none() => s.bytes(),
            _ => return Ok(()),
        };
        // Named only if the block cannot be brought back.
        let (names, ranks) = (Arc::clone(&self.names), Arc::clone(&self.ranks));
        let text = move || label(&names, &ranks, array, &key);
        let buffer = self.make_room(bytes, Some((array, key)), &text)?;
        let started = std::time::Instant::now();
        let block = self.read_disk(array, key, buffer)?;
        crate::trace::span(
            "disk",
            || "reload".into(),
            started,
            true,
            &[("bytes", bytes.into())],
        );
        if let Some(s) = self.arrays[array as usize].blocks.get_mut(&key) {
            s.data = Some(Arc::new(block));
            s.spilled = None;
            self.clock += 1;
            s.last_use = self.clock;
            self.lru.insert(self.clock, (array, key));
        }
        self.account(bytes, 0);
        self.stats.blocks_reloaded += 1;
        Ok(())
    }

    /// Reads a block from its file, into `buffer` when one of the right size is given.
    fn read_disk(&mut self, array: u32, key: BlockKey, buffer: Option<Vec<f64>>) -> Result<Block> {
        let a = &self.arrays[array as usize];
        let slot = a
            .blocks
            .get(&key)
            .ok_or_else(|| RuntimeError::new("internal: reading a block not held"))?;
        let (Some(place), Some((file, path))) = (slot.place, a.file.as_ref()) else {
            return Err(RuntimeError::new(
                "internal: a block neither in memory nor on disk",
            ));
        };
        let bytes = slot.bytes();
        let mut data = match buffer {
            Some(b) => b,
            None => crate::spare::overwritable(bytes / 8).ok_or_else(|| {
                RuntimeError::new(format!(
                    "server {}: out of memory reading back a block of {bytes} bytes",
                    self.server
                ))
            })?,
        };
        file.read_exact_at(bytemuck::cast_slice_mut(&mut data), place).map_err(|e| {
            RuntimeError::input(format!(
                "server {}: cannot read block {} of array {} back from {} ({bytes} bytes at offset {place}; the file is shorter than expected?): {e}",
                self.server,
                self.text(array, &key),
                self.names[array as usize],
                path.display()
            ))
        })?;
        self.stats.bytes_read += bytes as u64;
        let shape = slot.spilled.as_deref().copied().ok_or_else(|| {
            RuntimeError::new("internal: reading back a block that was not spilled")
        })?;
        Ok(Block { shape, data })
    }

    /// The block, from memory or read back from disk.
    pub fn read(&mut self, array: u32, key: &BlockKey) -> Result<Arc<Block>> {
        self.reload(array, *key)?;
        self.touch(array, *key);
        self.arrays[array as usize]
            .blocks
            .get(key)
            .and_then(|s| s.data.clone())
            .ok_or_else(|| RuntimeError::new("internal: block not in memory after reload"))
    }

    /// A copy of the block for a snapshot or a save, without keeping a spilled block in memory.
    pub fn peek(&mut self, array: u32, key: &BlockKey) -> Result<Arc<Block>> {
        match self.arrays[array as usize]
            .blocks
            .get(key)
            .and_then(|s| s.data.clone())
        {
            Some(b) => Ok(b),
            None => Ok(Arc::new(self.read_disk(array, *key, None)?)),
        }
    }

    pub fn keys(&self, array: u32) -> Vec<BlockKey> {
        self.arrays[array as usize].blocks.keys().copied().collect()
    }

    /// Room for an incoming put buffer of `bytes` (counted while the put is applied).
    pub fn receive(&mut self, bytes: usize, what: &dyn Fn() -> String) -> Result<()> {
        drop(self.make_room(bytes, None, what)?);
        self.account(bytes, 0);
        Ok(())
    }

    /// The incoming buffer is gone (applied, or become the block).
    pub fn received(&mut self, bytes: usize) {
        self.account(0, bytes);
    }

    /// Replaces (or creates) a block with `block`; the data is newer than any disk copy.
    /// `check` sees the block's slot (a new one has the given section and no access yet)
    /// before the value changes, and may refuse the change.
    pub fn replace(
        &mut self,
        array: u32,
        key: BlockKey,
        block: Block,
        section: u32,
        check: &mut dyn FnMut(&mut Slot) -> Result<()>,
    ) -> Result<()> {
        self.forget_residual(array, &key);
        let bytes = block.data.len() * 8;
        let mut checked = false;
        if self.memory + bytes > self.spill.budget {
            // The old memory copy goes first: it may be what makes the room.
            if let Some(s) = self.arrays[array as usize].blocks.get_mut(&key) {
                check(s)?;
                checked = true;
                if let Some(old) = s.data.take() {
                    let_go(&mut self.lru, &mut self.memory, old, s.last_use);
                }
            }
            let (names, ranks) = (Arc::clone(&self.names), Arc::clone(&self.ranks));
            let text = move || label(&names, &ranks, array, &key);
            drop(self.make_room(bytes, None, &text)?);
        }
        self.clock += 1;
        let clock = self.clock;
        let spills = self.spills();
        // One lookup: a put of a new block costs the server a hash probe per lookup.
        let BlockStore {
            arrays,
            expected,
            lru,
            memory,
            stats,
            ..
        } = self;
        let blocks = &mut arrays[array as usize].blocks;
        if blocks.capacity() == 0 {
            // Room for the blocks this server will likely hold: growing a table of 10⁶
            // blocks a doubling at a time was a third of a server's time in a loop of puts
            // (docs/benchmarks.md, "Servers: tables sized for their arrays"). Only a hint:
            // where the allocator refuses, the table grows as it goes.
            let _ = blocks.try_reserve(expected.get(array as usize).copied().unwrap_or(0));
        }
        let slot = blocks.entry(key).or_insert_with(|| Slot {
            mode: Mode::None,
            section,
            data: None,
            spilled: None,
            place: None,
            dirty: true,
            last_use: clock,
        });
        if !checked {
            check(slot)?;
        }
        if let Some(old) = slot.data.replace(Arc::new(block)) {
            let_go(lru, memory, old, slot.last_use);
        }
        slot.spilled = None;
        slot.dirty = true;
        slot.last_use = clock;
        if spills {
            lru.insert(clock, (array, key));
        }
        *memory += bytes;
        stats.peak_memory = stats.peak_memory.max(*memory as u64);
        Ok(())
    }

    /// Updates a block in place (created zero-filled when absent).
    pub fn update(
        &mut self,
        array: u32,
        key: BlockKey,
        shape: &[usize],
        section: u32,
        f: impl FnOnce(&mut Block) -> Result<()>,
    ) -> Result<()> {
        if !self.contains(array, &key) {
            self.replace(array, key, Block::zeros(shape)?, section, &mut |_| Ok(()))?;
        } else {
            self.reload(array, key)?;
        }
        self.touch(array, key);
        let slot = self.arrays[array as usize]
            .blocks
            .get_mut(&key)
            .ok_or_else(|| RuntimeError::new("internal: updating a block not held"))?;
        let data = slot
            .data
            .as_mut()
            .ok_or_else(|| RuntimeError::new("internal: updating a block not in memory"))?;
        slot.dirty = true;
        f(Arc::make_mut(data))
    }

    /// `put +=` / `prepare +=`: adds to a block (created zero-filled when absent). The sum is
    /// kept in double-double precision for the rest of the section, so a block accumulated by
    /// several workers gets the same value whatever order their contributions arrive in: runs
    /// repeat exactly, and iterative solvers that are sensitive to the last bits (ACES4's EOM
    /// Davidson) take the same path every time. The low parts cost one block of memory per
    /// block accumulated in the section; when the budget has no room for them the sum is
    /// plain (still correct, only order-dependent in the last bits).
    pub fn accumulate(
        &mut self,
        array: u32,
        key: BlockKey,
        shape: &[usize],
        section: u32,
        add: Addend<'_>,
    ) -> Result<()> {
        let n: usize = shape.iter().product();
        let mut lo = match self.residuals.remove(&(array, key)) {
            Some((s, lo)) if s == section && lo.len() == n => Some(lo),
            Some((_, lo)) => {
                self.account(0, lo.len() * 8);
                crate::spare::give(lo);
                None
            }
            None => None,
        };
        // A new low part is written by the first addition, not read (no zero-filling).
        let fresh = lo.is_none() && self.memory + n * 8 <= self.spill.budget;
        if fresh {
            // Where the allocator refuses, the sum is plain, as where the budget has no room.
            lo = crate::spare::overwritable(n);
            if lo.is_some() {
                self.account(n * 8, 0);
            }
        }
        let r = self.update(array, key, shape, section, |b| {
            let (hi, x) = (&mut b.data, add);
            match (&mut lo, x) {
                (Some(lo), Addend::Block(x)) => {
                    if x.len() != hi.len() {
                        return Err(RuntimeError::new("internal: accumulate of another size"));
                    }
                    if fresh {
                        compensated_start_block(hi, lo, x);
                    } else {
                        compensated_add_block(hi, lo, x);
                    }
                }
                (Some(lo), Addend::Scalar(v)) if fresh => compensated_start_scalar(hi, lo, v),
                (Some(lo), Addend::Scalar(v)) => compensated_add_scalar(hi, lo, v),
                (None, Addend::Block(x)) => sial_superinstructions::axpy(hi, 1.0, x)?,
                (None, Addend::Scalar(v)) => sial_superinstructions::add_scalar(hi, v),
            }
            Ok(())
        });
        match lo {
            // A failed first addition has not written the low part: it is not kept.
            Some(lo) if r.is_err() && fresh => {
                self.account(0, lo.len() * 8);
                crate::spare::give(lo);
            }
            Some(lo) => {
                self.residuals.insert((array, key), (section, lo));
            }
            None => {}
        }
        r
    }

    /// Forgets the low parts of sums of sections before `section` (every worker has left them).
    pub fn end_sections_before(&mut self, section: u32) {
        let mut freed = 0;
        for (_, (_, lo)) in self.residuals.extract_if(|_, (s, _)| *s < section) {
            freed += lo.len() * 8;
            crate::spare::give(lo);
        }
        self.account(0, freed);
    }

    /// A block replaced or scaled: its running sum, if any, ends.
    pub fn forget_residual(&mut self, array: u32, key: &BlockKey) {
        // Most sections accumulate nothing: no key to hash then.
        if self.residuals.is_empty() {
            return;
        }
        if let Some((_, lo)) = self.residuals.remove(&(array, *key)) {
            self.account(0, lo.len() * 8);
            crate::spare::give(lo);
        }
    }

    /// Drops every block of an array and its file.
    pub fn remove_array(&mut self, array: u32) {
        let mut freed = 0;
        self.residuals.retain(|(a, _), (_, lo)| {
            let keep = *a != array;
            if !keep {
                freed += lo.len() * 8;
            }
            keep
        });
        self.account(0, freed);
        let a = std::mem::take(&mut self.arrays[array as usize]);
        for (_, s) in a.blocks {
            if let Some(d) = s.data {
                self.lru.remove(&s.last_use);
                self.account(0, d.data.len() * 8);
            }
        }
        if let Some((_, path)) = a.file {
            let _ = std::fs::remove_file(path);
            self.disk_used = self.disk_used.saturating_sub(a.file_len);
        }
    }

    /// The end of the program: every file is removed.
    pub fn clear(&mut self) {
        for a in 0..self.arrays.len() {
            self.remove_array(a as u32);
        }
        let _ = std::fs::remove_dir(&self.spill.dir);
    }
}

impl Drop for BlockStore {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use crate::cluster::message::{Origin, Payload, ToServer, ToWorker};
    use crate::server::blocks::Spill;
    use crate::server::{Saved, Server};
    use crate::store::BlockKey;
    use proptest::prelude::*;
    use sial_bytecode::PutOp;
    use std::collections::HashMap;

    #[derive(Debug, Clone)]
    enum Step {
        Put(u32, i32, PutOp, Option<Vec<f64>>, f64),
        Get(u32, i32),
        Delete(u32),
        Barrier,
    }

    fn step() -> impl Strategy<Value = Step> {
        let op = prop_oneof![
            Just(PutOp::Replace),
            Just(PutOp::Accumulate),
            Just(PutOp::Scale)
        ];
        let data = proptest::option::of(proptest::collection::vec(-4.0f64..4.0, 4));
        prop_oneof![
            4 => (0u32..2, 1i32..=6, op, data, -2.0f64..2.0).prop_map(|(a, b, o, d, v)| Step::Put(a, b, o, d, v)),
            4 => (0u32..2, 1i32..=6).prop_map(|(a, b)| Step::Get(a, b)),
            1 => (0u32..2).prop_map(Step::Delete),
            1 => Just(Step::Barrier),
        ]
    }

    fn key(b: i32) -> BlockKey {
        BlockKey {
            segments: [b, 1, 1, 1, 1, 1],
            parents: [0; 6],
        }
    }

    proptest! {
        /// The sum `put +=` builds at a server is the same whatever order its terms arrive in.
        #[test]
        fn accumulated_sums_do_not_depend_on_the_order(terms in proptest::collection::vec(-1e3f64..1e3, 2..40), seed in 0u64..1000) {
            let source = "sial p\nindex i = 1:6\ndistributed a[i]\nendsial p\n";
            let program = crate::testutil::program(source);
            let mut shuffled = terms.clone();
            // A deterministic shuffle from the seed.
            let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            for i in (1..shuffled.len()).rev() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (x >> 33) as usize % (i + 1));
            }
            let mut sums = Vec::new();
            for order in [&terms, &shuffled] {
                let mut server = Server::new(&program, 0, Spill::default());
                let mut saved = Saved::new();
                for (k, t) in order.iter().enumerate() {
                    let from = Origin { worker: (k % 3) as u32, section: 0, line: 1 };
                    let put = ToServer::Put { from, array: 0, key: key(1), shape: [4].into(), op: PutOp::Accumulate, payload: Payload::Block(vec![*t, -*t, t * 1e-9, 1.0]) };
                    server.handle(put, &mut saved, &mut |_, _| Ok(())).expect("put");
                }
                let mut got = None;
                let get = ToServer::Get { from: Origin { worker: 0, section: 1, line: 2 }, array: 0, key: key(1), prefetch: false };
                server.handle(get, &mut saved, &mut |_, m| {
                    if let ToWorker::Block { block, .. } = m {
                        got = Some(block.data.clone());
                    }
                    Ok(())
                }).expect("get");
                sums.push(got);
            }
            prop_assert_eq!(&sums[0], &sums[1]);
        }

        /// Whatever a server with room for three blocks spills and reloads, every get returns
        /// what a plain in-memory model holds.
        #[test]
        fn a_spilling_server_returns_what_memory_would(steps in proptest::collection::vec(step(), 1..80)) {
            let dir = std::env::temp_dir().join(format!("sial-prop-{}-{:?}", std::process::id(), std::thread::current().id()));
            let source = "sial p\nindex i = 1:6\ndistributed a[i]\ndistributed b[i]\nendsial p\n";
            let program = crate::testutil::program(source);
            let spill = Spill { budget: 3 * 32, dir: dir.clone(), disk_limit: None };
            let mut server = Server::new(&program, 0, spill);
            let mut model: HashMap<(u32, i32), Vec<f64>> = HashMap::new();
            let mut saved = Saved::new();
            let mut section = 0;
            for s in steps {
                let from = Origin { worker: 0, section, line: 1 };
                match s {
                    Step::Put(a, b, op, data, v) => {
                        let payload = match (&op, data) {
                            (PutOp::Scale, _) | (_, None) => Payload::Scalar(v),
                            (_, Some(d)) => Payload::Block(d),
                        };
                        let exists = model.contains_key(&(a, b));
                        let r = server.handle(ToServer::Put { from, array: a, key: key(b), shape: [4].into(), op, payload: payload.clone() }, &mut saved, &mut |_, _| Ok(()));
                        if op == PutOp::Scale && !exists {
                            prop_assert!(r.is_err());
                            continue;
                        }
                        prop_assert!(r.is_ok(), "{:?}", r);
                        let m = model.entry((a, b)).or_insert_with(|| vec![0.0; 4]);
                        match (op, payload) {
                            (PutOp::Replace, Payload::Block(d)) => *m = d,
                            (PutOp::Replace, Payload::Scalar(v)) => *m = vec![v; 4],
                            (PutOp::Accumulate, Payload::Block(d)) => m.iter_mut().zip(d).for_each(|(x, y)| *x += y),
                            (PutOp::Accumulate, Payload::Scalar(v)) => m.iter_mut().for_each(|x| *x += v),
                            (PutOp::Scale, _) => m.iter_mut().for_each(|x| *x *= v),
                        }
                    }
                    Step::Get(a, b) => {
                        let mut got = None;
                        let r = server.handle(ToServer::Get { from, array: a, key: key(b), prefetch: false }, &mut saved, &mut |_, m| {
                            if let ToWorker::Block { block, .. } = m {
                                got = Some(block.data.clone());
                            }
                            Ok(())
                        });
                        match model.get(&(a, b)) {
                            Some(want) => {
                                prop_assert!(r.is_ok(), "{:?}", r);
                                // Sums are kept in double-double precision at the server
                                // (`accumulate`): they may differ from the model's plain
                                // sums in the last bit.
                                let got = got.unwrap_or_default();
                                prop_assert_eq!(got.len(), want.len());
                                for (g, w) in got.iter().zip(want) {
                                    prop_assert!((g - w).abs() <= 1e-13 * w.abs().max(1.0), "{:?} vs {:?}", got, want);
                                }
                            }
                            None => prop_assert!(r.is_err()),
                        }
                    }
                    Step::Delete(a) => {
                        server.handle(ToServer::Delete { from, array: a }, &mut saved, &mut |_, _| Ok(())).expect("delete");
                        model.retain(|(x, _), _| *x != a);
                    }
                    Step::Barrier => section += 1,
                }
                prop_assert!(server.stats().disk.peak_memory <= 3 * 32);
            }
            drop(server);
            prop_assert!(!dir.exists() || std::fs::read_dir(&dir).map(|d| d.count() == 0).unwrap_or(true));
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
