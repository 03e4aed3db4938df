//! Block instructions on a device (docs/ARCHITECTURE.md "Devices"). The programmer
//! marks nothing: for each block instruction the device can run (fill, scale, copy/permute,
//! add, sum, contraction, scaled copy), the placement model weighs its compute time on each
//! side plus the transfers its operands would need, looking a few instructions ahead, and the
//! cheaper side runs it. Blocks keep a host and a device copy with versions
//! (`device::DeviceCopies`): a device instruction uploads only operands it reads whose device
//! copy is stale; a result stays on the device until something on the host needs it.
//!
//! Host consistency: before an instruction runs on the host, the blocks it uses whose newest
//! data is on the device are downloaded into the worker's storage. For the instructions the
//! device can run, that is exactly their operands; for any other instruction that touches
//! blocks, every block whose newest data is on the device is downloaded first, and if the
//! instruction may write blocks (specials, slices, inserts, allocation), every device copy of
//! a local block is dropped afterwards so that none can be stale. Fetched copies of
//! distributed/served blocks are uploaded read-only and dropped when the fetched copy changes.

mod form;

use super::Worker;
use super::memory::Memory;
use crate::device::placement::{Instr, Use};
use crate::device::{
    self, Calibration, DevBuf, Device, DeviceCopies, DeviceMode, GpuStats, Intent, OpKind,
    Placement, Target,
};
use crate::error::{Result, RuntimeError};
use crate::options::{Backend, GpuOptions};
use crate::store::{Block, BlockKey, Storage};
use form::{Kernel, Place, instr};
use sial_bytecode::{
    ArrayKind, BlockRef, ExprId, Op, Operand, PrintItem, Program, PutValue, ScalarUpdate, Sign,
};
use sial_superinstructions as k;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Instructions after the current one the placement model looks at.
const LOOKAHEAD: usize = 3;

/// A block on a device: array and key.
type Key = (u32, BlockKey);

/// What a worker found: a device of its own, or none (and why).
pub fn open(options: &GpuOptions, rank: usize) -> Result<Option<Box<dyn Device>>> {
    if options.mode == DeviceMode::Cpu {
        return Ok(None);
    }
    let found: Option<Box<dyn Device>> = match options.backend {
        Backend::Host => {
            let config = device::HostDeviceConfig {
                streams: options.streams,
                ..device::HostDeviceConfig::default()
            };
            Some(Box::new(
                device::HostDevice::new(&config).map_err(gpu_error)?,
            ))
        }
        Backend::Cuda => {
            let count = device::cuda::device_count();
            if count == 0 {
                None
            } else {
                device::CudaDevice::open_with(rank % count, options.streams)
                    .map_err(gpu_error)?
                    .map(|d| Box::new(d) as Box<dyn Device>)
            }
        }
    };
    if found.is_none() && options.mode == DeviceMode::Gpu {
        return Err(RuntimeError::input(format!(
            "--device gpu: no GPU found ({}); run with --device cpu or auto",
            why_no_gpu()
        )));
    }
    Ok(found)
}

/// The devices a job with these options can use, in words (for the summary).
pub fn describe(options: &GpuOptions) -> String {
    match (options.mode, options.backend) {
        (DeviceMode::Cpu, _) => "CPU only (--device cpu)".into(),
        (_, Backend::Host) => {
            "CPU and the host-memory device (--gpu-backend host, a testing aid)".into()
        }
        (_, Backend::Cuda) => match device::cuda::device_count() {
            0 => format!("CPU only: {}", why_no_gpu()),
            n => format!("CPU and {n} CUDA GPU{}", if n == 1 { "" } else { "s" }),
        },
    }
}

/// Why no CUDA GPU is used, in words: the libraries that could not be loaded, else no device.
fn why_no_gpu() -> String {
    let missing = device::cuda::missing_libraries();
    match missing.first() {
        None => "the CUDA libraries are present but no GPU is visible".into(),
        Some(&first) if first == device::cuda::DRIVER => "no CUDA driver found".into(),
        Some(_) => format!(
            "could not load {}; CUDA 13 names them .so.13: link them as lib*.so in a directory \
             on LD_LIBRARY_PATH",
            missing.join(", ")
        ),
    }
}

fn gpu_error(e: device::DeviceError) -> RuntimeError {
    RuntimeError::new(format!("GPU: {e}"))
}

/// One worker's device state.
pub(crate) struct Gpu {
    copies: DeviceCopies<Key>,
    placement: Placement,
    /// Blocks whose newest data is on the device.
    dirty: HashSet<Key>,
    /// Blocks with a device copy (an evicted one may linger here; dropping it again is
    /// harmless).
    resident: HashSet<Key>,
    /// Fetched blocks uploaded, with the fetched copy they came from.
    fetched: HashMap<Key, Arc<Block>>,
    /// Per instruction: the expressions it evaluates that read blocks (an element or a dot
    /// product); a loop's end evaluates the where clauses of its start.
    block_exprs: Vec<Vec<ExprId>>,
    /// Open `gpu_on` regions: a hint that the device should run what it can.
    regions: usize,
}

impl Gpu {
    pub fn new(dev: Box<dyn Device>, options: &GpuOptions, program: &Program) -> Gpu {
        let calibration = match options.backend {
            Backend::Host => Calibration::host_device(),
            Backend::Cuda => Calibration::h100_vs_one_core(),
        };
        Gpu {
            copies: DeviceCopies::new(dev, options.memory, options.pinned),
            placement: Placement::new(options.mode, calibration),
            dirty: HashSet::new(),
            resident: HashSet::new(),
            fetched: HashMap::new(),
            regions: 0,
            block_exprs: block_exprs(program),
        }
    }

    pub fn stats(&self) -> GpuStats {
        self.copies.stats()
    }
}

impl Worker<'_> {
    /// Before instruction `pc`: an expression that reads blocks (an element, a dot product)
    /// needs their newest data on the host.
    #[inline(never)]
    pub(super) fn before_step(&mut self, pc: usize) -> Result<()> {
        let Some(g) = self.gpu.as_ref() else {
            return Ok(());
        };
        let exprs = g.block_exprs.get(pc).map_or(&[][..], Vec::as_slice);
        if g.dirty.is_empty() || exprs.is_empty() {
            return Ok(());
        }
        let refs: Vec<BlockRef> = exprs
            .iter()
            .flat_map(|&e| self.program.expr_blocks(e).cloned())
            .collect();
        self.flush_refs(&refs)
    }

    /// Downloads the blocks `refs` designate now, where their newest data is on the device.
    fn flush_refs(&mut self, refs: &[BlockRef]) -> Result<()> {
        for r in refs {
            if !self.local_blocks(r.array) {
                continue;
            }
            // A selector that does not resolve is the instruction's error to report.
            let Ok((key, _)) = self.locate(r) else {
                continue;
            };
            let key = (r.array.0, key);
            let Some(g) = self.gpu.as_mut() else {
                return Ok(());
            };
            if g.dirty.remove(&key) {
                download(g, &mut self.memory, key)?;
            }
        }
        Ok(())
    }

    /// Runs a block instruction: on the device when the placement says so, else on the host
    /// after bringing the host copies it needs up to date.
    #[inline(never)]
    pub(super) fn placed_op(&mut self, op: &Op, pc: usize) -> Result<()> {
        if self.gpu.is_none() {
            return self.block_op(op);
        }
        if let Some((places, kernel, device)) = self.device_form(op)? {
            if device && self.choose(&places, &kernel, pc) == Target::Device {
                return self.run_on_device(&places, kernel);
            }
            self.host_needs(&places)?;
            if let Some(g) = self.gpu.as_mut() {
                g.copies.note_host_instruction();
            }
            return self.block_op(op);
        }
        // Reads of one block: only that block comes back.
        if let Op::Put {
            value: PutValue::Block(b),
            ..
        }
        | Op::Print {
            item: PrintItem::Block(Operand::Block(b)),
            ..
        } = op
        {
            self.flush_refs(std::slice::from_ref(b))?;
            if let Some(g) = self.gpu.as_mut() {
                g.copies.note_host_instruction();
            }
            return self.block_op(op);
        }
        // A special on blocks: those blocks come back, and their device copies go (the special
        // may write them).
        if let Op::Execute { args, .. } = op
            && let Some(blocks) = self.block_args(args)
        {
            self.flush_refs(&blocks)?;
            let keys: Vec<Key> = blocks
                .iter()
                .filter_map(|b| self.locate(b).ok().map(|(k, _)| (b.array.0, k)))
                .collect();
            if let Some(g) = self.gpu.as_mut() {
                g.copies.note_host_instruction();
            }
            let r = self.block_op(op);
            for key in keys {
                self.forget_on_device(key)?;
            }
            return r;
        }
        self.flush_all()?;
        if let Some(g) = self.gpu.as_mut() {
            g.copies.note_host_instruction();
        }
        let r = self.block_op(op);
        if self.writes_own_blocks(op) {
            self.drop_local_copies()?;
        }
        r
    }

    /// Whether the instruction may write blocks of the worker's own storage. A special may
    /// write any of them, whatever it is given and its declared intents say (ACES4's programs
    /// declare some wrong, and a special reaches arrays through its context too).
    fn writes_own_blocks(&self, op: &Op) -> bool {
        if let Op::Execute { .. } = op {
            return true;
        }
        let effects = self.program.effects(op);
        effects.uses.iter().any(|(target, access)| {
            access.writes()
                && target
                    .array()
                    .is_some_and(|a| !self.program.arrays[a.index()].kind.is_remote())
        })
    }

    /// The block arguments of a special, when nothing else it gets can reach local blocks
    /// (regions, whole arrays other than static ones).
    fn block_args(&self, args: &[sial_bytecode::ExecArg]) -> Option<Vec<BlockRef>> {
        use sial_bytecode::ExecArg;
        let mut blocks = Vec::new();
        for a in args {
            match a {
                ExecArg::Block(b) => blocks.push(b.clone()),
                ExecArg::Scalar(_) | ExecArg::Literal(_) => {}
                ExecArg::Array(s) if matches!(self.memory[s.index()], Storage::Whole(_)) => {}
                ExecArg::Array(_) | ExecArg::Region(_) => return None,
            }
        }
        Some(blocks)
    }

    /// Local and temp arrays: blocks in the worker's storage.
    fn local_blocks(&self, a: sial_bytecode::ArraySlot) -> bool {
        matches!(self.memory[a.index()], Storage::Blocks(_))
            && matches!(
                self.program.arrays[a.index()].kind,
                ArrayKind::Local | ArrayKind::Temp
            )
    }

    /// The placement model's view of an instruction, and its choice.
    fn choose(&mut self, places: &[Place], kernel: &Kernel, pc: usize) -> Target {
        let current = instr(places, kernel);
        let mut ahead = Vec::new();
        let auto = self
            .gpu
            .as_ref()
            .is_some_and(|g| g.placement.mode == DeviceMode::Auto);
        let look = if auto { LOOKAHEAD } else { 0 };
        for ins in self.program.code.iter().skip(pc + 1).take(look) {
            match self.device_form(&ins.op) {
                Ok(Some((p, k, true))) => ahead.push(instr(&p, &k)),
                _ => break,
            }
        }
        let Some(g) = self.gpu.as_ref() else {
            return Target::Host;
        };
        // Blocks that cannot be on the device together run on the host: the device is a
        // place to run faster, never a reason to fail.
        let bytes: usize = places
            .iter()
            .map(|p| p.shape.iter().product::<usize>() * 8)
            .sum();
        if bytes > g.copies.budget() {
            return Target::Host;
        }
        // Inside gpu_on ... gpu_off the device runs what it can, unless --device cpu.
        if g.regions > 0 && g.placement.mode == DeviceMode::Auto {
            return Target::Device;
        }
        g.placement
            .choose(&current, &ahead, |key| g.copies.newest_on(key))
    }

    /// `gpu_on` (`on`) and `gpu_off`: instructions of a region prefer the device.
    pub(super) fn gpu_region(&mut self, on: bool) {
        if let Some(g) = self.gpu.as_mut() {
            g.regions = if on {
                g.regions + 1
            } else {
                g.regions.saturating_sub(1)
            };
        }
    }

    /// `gpu_allocate/put/get/free` (SIAL-SPEC §4.19) as hints: `gpu_put` uploads a local block
    /// now, `gpu_get` brings its newest data to the host, `gpu_free` does that and drops the
    /// device copy. They never change results; without a device they do nothing.
    pub(super) fn gpu_hint(
        &mut self,
        gop: sial_bytecode::GpuOp,
        arg: &sial_bytecode::ExecArg,
    ) -> Result<()> {
        use sial_bytecode::{ExecArg, GpuOp};
        let (Some(_), ExecArg::Block(b)) = (self.gpu.as_ref(), arg) else {
            return Ok(());
        };
        if !self.local_blocks(b.array) {
            return Ok(());
        }
        let (key, shape) = self.locate(b)?;
        let key = (b.array.0, key);
        match gop {
            GpuOp::Allocate => Ok(()),
            GpuOp::Get => self.flush_refs(std::slice::from_ref(b)),
            GpuOp::Free => {
                self.flush_refs(std::slice::from_ref(b))?;
                self.forget_on_device(key)
            }
            GpuOp::Put => {
                let Storage::Blocks(map) = &self.memory[key.0 as usize] else {
                    return Ok(());
                };
                let Some(host) = map.get(&key.1) else {
                    return Ok(());
                };
                let Some(g) = self.gpu.as_mut() else {
                    return Ok(());
                };
                let mut written_back = Vec::new();
                g.copies.begin_instruction().map_err(gpu_error)?;
                let len = shape.iter().product();
                g.copies
                    .for_device(key, len, Intent::Read, &host.data, &mut written_back)
                    .map_err(gpu_error)?;
                g.resident.insert(key);
                store_written_back(g, &mut self.memory, written_back);
                Ok(())
            }
        }
    }

    /// Downloads the blocks of `places` whose newest data is on the device; a host write makes
    /// the host copy the newest.
    fn host_needs(&mut self, places: &[Place]) -> Result<()> {
        let Some(g) = self.gpu.as_mut() else {
            return Ok(());
        };
        for p in places.iter().filter(|p| !p.fetched) {
            let (a, key) = p.key;
            let Storage::Blocks(map) = &mut self.memory[a as usize] else {
                continue;
            };
            match map.data_mut(&key) {
                Some(data) => {
                    g.copies
                        .for_host(p.key, p.intent, data)
                        .map_err(gpu_error)?;
                }
                None => {
                    g.copies
                        .for_host(p.key, Intent::Write, &mut [])
                        .map_err(gpu_error)?;
                }
            }
            g.dirty.remove(&p.key);
        }
        Ok(())
    }

    /// Downloads every block whose newest data is on the device.
    pub(super) fn flush_all(&mut self) -> Result<()> {
        let Some(g) = self.gpu.as_mut() else {
            return Ok(());
        };
        for key in std::mem::take(&mut g.dirty) {
            download(g, &mut self.memory, key)?;
        }
        Ok(())
    }

    /// Drops every device copy of a local block (after a host instruction that may have
    /// written any of them).
    fn drop_local_copies(&mut self) -> Result<()> {
        let Some(g) = self.gpu.as_mut() else {
            return Ok(());
        };
        let fetched = &g.fetched;
        let local: Vec<Key> = g
            .resident
            .iter()
            .filter(|k| !fetched.contains_key(k))
            .copied()
            .collect();
        for key in local {
            g.copies.forget(key).map_err(gpu_error)?;
            g.resident.remove(&key);
        }
        Ok(())
    }

    /// A block leaves the worker's storage (its scope closed): its device copy goes too.
    pub(super) fn forget_on_device(&mut self, key: Key) -> Result<()> {
        if let Some(g) = self.gpu.as_mut()
            && g.resident.remove(&key)
        {
            g.dirty.remove(&key);
            g.copies.forget(key).map_err(gpu_error)?;
        }
        Ok(())
    }

    /// Fetched blocks change at barriers: their device copies are dropped.
    pub(super) fn forget_fetched_on_device(&mut self) -> Result<()> {
        let Some(g) = self.gpu.as_mut() else {
            return Ok(());
        };
        for (key, _) in g.fetched.drain() {
            g.resident.remove(&key);
            g.copies.forget(key).map_err(gpu_error)?;
        }
        Ok(())
    }

    fn run_on_device(&mut self, places: &[Place], kernel: Kernel) -> Result<()> {
        // The result block must exist on the host (scope, existence) even if its data is not
        // current there; a new one is made like any written block.
        let dst = &places[0];
        let exists = matches!(&self.memory[dst.key.0 as usize], Storage::Blocks(m) if m.contains_key(&dst.key.1));
        if !exists {
            self.insert_block(dst.key, Block::zeros(dst.shape)?);
        }
        // Fetched operands' data (waits for them).
        let mut fetched_data = Vec::new();
        for p in places.iter().filter(|p| p.fetched) {
            let slot = sial_bytecode::ArraySlot(p.key.0);
            fetched_data.push(self.read_remote(slot, p.key.1, &p.shape)?);
        }
        let Some(g) = self.gpu.as_mut() else {
            return Err(RuntimeError::new("internal: no device"));
        };
        g.copies.begin_instruction().map_err(gpu_error)?;
        let mut written_back = Vec::new();
        let mut bufs: Vec<DevBuf> = Vec::with_capacity(places.len());
        let mut fetched_iter = fetched_data.into_iter();
        for p in places {
            let len: usize = p.shape.iter().product();
            let buf = if p.fetched {
                let data = fetched_iter
                    .next()
                    .ok_or_else(|| RuntimeError::new("internal: fetched operand missing"))?;
                if let Some(old) = g.fetched.get(&p.key)
                    && !Arc::ptr_eq(old, &data)
                {
                    g.copies.forget(p.key).map_err(gpu_error)?;
                }
                let buf = g
                    .copies
                    .for_device(p.key, len, p.intent, &data.data, &mut written_back)
                    .map_err(gpu_error)?;
                g.fetched.insert(p.key, data);
                buf
            } else {
                let host: &[f64] = match &self.memory[p.key.0 as usize] {
                    Storage::Blocks(map) => map.get(&p.key.1).map_or(&[], |b| &b.data),
                    _ => &[],
                };
                g.copies
                    .for_device(p.key, len, p.intent, host, &mut written_back)
                    .map_err(gpu_error)?
            };
            // Blocks evicted to make room are stored now: a later operand of this instruction
            // may be one of them, and is uploaded from its host copy.
            store_written_back(g, &mut self.memory, std::mem::take(&mut written_back));
            g.resident.insert(p.key);
            bufs.push(buf);
        }
        let dev = g.copies.device();
        let shape = |i: usize| k::Shape::new(&places[i].shape);
        let r = match kernel {
            Kernel::Scalar(ScalarUpdate::Fill, v) => dev.fill(&bufs[0], v),
            Kernel::Scalar(ScalarUpdate::Add, v) => dev.add_scalar(&bufs[0], v),
            Kernel::Scalar(ScalarUpdate::Scale, v) => dev.scale(&bufs[0], v),
            Kernel::Copy(None) => dev.copy(&bufs[0], &bufs[1]),
            Kernel::Copy(Some(perm)) => {
                dev.permute(&bufs[0], &shape(0)?, &bufs[1], &shape(1)?, &perm)
            }
            Kernel::Accumulate(alpha, None) => dev.axpy(&bufs[0], alpha, &bufs[1]),
            Kernel::Accumulate(alpha, Some(perm)) => {
                dev.permute_add(&bufs[0], &shape(0)?, alpha, &bufs[1], &shape(1)?, &perm)
            }
            Kernel::Sum(Sign::Plus) => dev.add(&bufs[0], &bufs[1], &bufs[2]),
            Kernel::Sum(Sign::Minus) => dev.sub(&bufs[0], &bufs[1], &bufs[2]),
            Kernel::Contract(plan, beta) => dev.contract(&plan, &bufs[0], &bufs[1], &bufs[2], beta),
            Kernel::ScaleCopy(f, true) => dev.axpy(&bufs[0], f, &bufs[1]),
            Kernel::ScaleCopy(f, false) => dev
                .copy(&bufs[0], &bufs[1])
                .and_then(|()| dev.scale(&bufs[0], f)),
        };
        r.map_err(gpu_error)?;
        g.dirty.insert(places[0].key);
        Ok(())
    }

    /// Stores a new local/temp block (temp blocks join the innermost scope).
    fn insert_block(&mut self, key: Key, block: Block) {
        let kind = self.program.arrays[key.0 as usize].kind;
        if let Storage::Blocks(map) = &mut self.memory[key.0 as usize]
            && map.insert(key.1, block).is_none()
            && kind == ArrayKind::Temp
        {
            self.scopes.hold(sial_bytecode::ArraySlot(key.0), key.1);
        }
    }
}

/// Per instruction of `program`, the expressions it evaluates that read blocks (computed
/// once, from the instructions' effects; a loop's end takes its start's where clauses).
fn block_exprs(program: &Program) -> Vec<Vec<ExprId>> {
    let mut per_pc: Vec<Vec<ExprId>> = program
        .code
        .iter()
        .map(|ins| {
            let mut exprs = program.effects(&ins.op).exprs;
            exprs.retain(|&e| program.expr_blocks(e).next().is_some());
            exprs
        })
        .collect();
    for (pc, ins) in program.code.iter().enumerate() {
        if let Op::LoopEnd { start } = ins.op {
            per_pc[pc] = per_pc.get(start as usize).cloned().unwrap_or_default();
        }
    }
    per_pc
}

/// Brings the newest data of `key` from the device into its host block.
fn download(g: &mut Gpu, storage: &mut Memory, key: Key) -> Result<()> {
    if let Storage::Blocks(map) = &mut storage[key.0 as usize]
        && let Some(d) = map.data_mut(&key.1)
    {
        g.copies.for_host(key, Intent::Read, d).map_err(gpu_error)?;
    }
    Ok(())
}

/// Device copies evicted dirty: their data is the host copy now.
fn store_written_back(g: &mut Gpu, storage: &mut Memory, written_back: Vec<(Key, Vec<f64>)>) {
    for (key, data) in written_back {
        g.dirty.remove(&key);
        if let Storage::Blocks(map) = &mut storage[key.0 as usize]
            && let Some(d) = map.data_mut(&key.1)
            && d.len() == data.len()
        {
            d.copy_from_slice(&data);
        }
    }
}
