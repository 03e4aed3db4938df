//! A worker: interprets one program's bytecode in one process (SIAL-SPEC §6.4–§6.7, §7.16).
//! Storage, the special registry, output and persistence come from the job; the worker owns
//! the program state (ints, scalars, index values, blocks, loops, scopes).

mod access;
mod cache;
mod eval;
mod execute;
pub mod gpu;
mod lookahead;
mod loops;
mod memory;
mod ops;
mod plans;
pub mod prefetch;
mod progress;
pub(crate) mod remote;
mod scopes;
mod sums;
mod through;

use crate::cluster::WorkerLink;
use crate::cluster::message::{ServerStats, ToServer};
use crate::error::{Result, RuntimeError};
use crate::layout::Layout;
use crate::persist::Persisted;
use crate::setup::Setup;
use crate::specials::Registry;
use crate::store::{Block, BlockKey, Storage};
use loops::Frame;
use memory::Memory;
use progress::Progress;
use remote::Net;
use scopes::Scopes;
use sial_bytecode::{ArraySlot, Op, Persistent, Program};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

pub use remote::{LineProfile, WorkerStats};

/// What a worker is given to run a program.
pub struct Env<'a> {
    pub setup: &'a Setup,
    pub registry: &'a Registry,
    /// The run's options: memory budget, snapshots for `--dump`, prefetching, `--profile`,
    /// devices, and the folder for files written by specials.
    pub options: &'a crate::options::Options,
    pub out: &'a mut dyn Write,
    pub persisted: &'a mut Persisted,
    /// This program's index in the job (names prefetch sites and profile lines).
    pub program_index: u32,
}

pub struct Worker<'a> {
    program: &'a Program,
    layout: Layout,
    ints: Vec<i32>,
    scalars: Vec<f64>,
    index_values: Vec<Option<i32>>,
    /// The worker's own block data, and the bytes it holds.
    memory: Memory,
    /// The link to the servers and the other workers, with the fetched blocks of this section.
    net: RefCell<Net<'a>>,
    /// Valid pardo iterations met since the last barrier (the shared counter of §7.10).
    pardo_counter: u64,
    /// This worker's rank, the number of workers and of servers.
    rank: usize,
    workers: usize,
    servers: usize,
    /// The servers' figures of the finished program (worker 0).
    server_stats: Vec<ServerStats>,
    /// The open scopes and the procedure calls in progress.
    scopes: Scopes,
    frames: Vec<Frame>,
    marks: Vec<(Persistent, String)>,
    env: Env<'a>,
    all_rank_print: bool,
    /// What specials keep between calls (their [`sial_superinstructions::special::State`]).
    special_state: sial_superinstructions::special::State,
    line: u32,
    /// Per loop (start pc): whether its body has a barrier (prefetch spans stop there).
    barrier_loops: RefCell<HashMap<usize, bool>>,
    /// `--profile`: instructions and time per source line.
    lines: Vec<(u64, Duration)>,
    /// Progress lines of long pardo loops (worker 0).
    progress: Progress,
    /// The device this worker places block instructions on, if any.
    gpu: Option<Box<gpu::Gpu>>,
    /// Contraction plans by labels and shapes.
    plans: RefCell<plans::Plans>,
    /// Per array, whether its largest block fits the worker memory budget: blocks of the
    /// others are checked as they are located.
    fit: Vec<bool>,
    /// Copies and contractions into temp blocks that only the next instruction reads.
    through: through::Through,
}

/// The clock of `--profile`: an instruction's time runs from the end of the one before, so
/// the clock is read once per instruction (twice cost a small `get` a tenth of its time) and
/// every moment of the run is counted on some line.
struct Laps {
    last: Instant,
}

impl Laps {
    fn new() -> Laps {
        Laps {
            last: Instant::now(),
        }
    }

    /// When the last lap ended.
    fn last(&self) -> Instant {
        self.last
    }

    /// The time since the last lap ended, which ends this one.
    fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let lap = now - self.last;
        self.last = now;
        lap
    }
}

impl<'a> Worker<'a> {
    /// Binds a program to the setup data: predefined values, segment tables, predefined arrays.
    pub fn new(
        program: &'a Program,
        env: Env<'a>,
        link: &'a mut dyn WorkerLink,
    ) -> Result<Worker<'a>> {
        let setup = env.setup;
        let ints = crate::layout::start_ints(program, setup)?;
        let mut scalars = Vec::with_capacity(program.scalars.len());
        for x in &program.scalars {
            scalars.push(if x.predefined {
                *setup.scalars.get(&x.name).ok_or_else(|| {
                    RuntimeError::input(format!("Could not find predefined scalar : {0} (give it in the setup file or with --set {0}=VALUE)", x.name))
                })?
            } else {
                x.init
            });
        }
        let layout = Layout::new(program, &ints, setup)?;
        let memory = Memory::new(program, &layout, setup, env.options, link.rank())?;
        let (rank, workers, servers) = (link.rank(), link.workers(), link.servers());
        let gpu = gpu::open(&env.options.gpu, rank)?
            .map(|d| Box::new(gpu::Gpu::new(d, &env.options.gpu, program)));
        let net = RefCell::new(Net::new(
            link,
            env.options.worker_memory,
            env.options.prefetch,
            env.program_index,
            program.arrays.len(),
            program.arrays.iter().any(|a| a.kind.is_remote()),
        ));
        let progress = Progress::new(env.options.progress.filter(|_| rank == 0));
        let fit = program
            .arrays
            .iter()
            .map(|a| {
                let largest: Vec<usize> =
                    a.dims.iter().map(|&d| layout.largest_extent(d)).collect();
                access::fits_budget(&largest, env.options.worker_memory, &String::new).is_ok()
            })
            .collect();
        Ok(Worker {
            program,
            net,
            pardo_counter: 0,
            rank,
            workers,
            servers,
            server_stats: Vec::new(),
            layout,
            ints,
            scalars,
            index_values: vec![None; program.indices.len()],
            memory,
            scopes: Scopes::new(),
            frames: Vec::new(),
            marks: Vec::new(),
            env,
            all_rank_print: false,
            special_state: Default::default(),
            line: 0,
            barrier_loops: RefCell::new(HashMap::new()),
            plans: RefCell::default(),
            fit,
            lines: Vec::new(),
            progress,
            gpu,
            through: through::Through::new(program),
        })
    }

    /// Runs the program to its end; then saves what was marked persistent.
    /// Runs the program to its end; worker 0 gives `done` the final state (after the last
    /// barrier, while the servers still hold the program's arrays).
    pub fn run(&mut self, done: &mut Done<'_>) -> Result<()> {
        let mut pc = 0usize;
        let profile = self.env.options.profile;
        // Traced: the instructions that can take long (not jumps, loop ends, int and scalar
        // arithmetic), so the clock is read only around those.
        let timed: Vec<bool> = if crate::trace::on() {
            self.program
                .code
                .iter()
                .map(|i| Self::may_take_long(&i.op))
                .collect()
        } else {
            Vec::new()
        };
        let mut laps = Laps::new();
        while let Some(ins) = self.program.code.get(pc) {
            self.line = ins.loc.line;
            let traced = timed.get(pc).copied().unwrap_or(false);
            let started = if profile {
                Some(laps.last())
            } else {
                traced.then(Instant::now)
            };
            let next = self.step(&ins.op, pc);
            if profile {
                let line = ins.loc.line as usize;
                if self.lines.len() <= line {
                    self.lines.resize(line + 1, (0, Duration::ZERO));
                }
                self.lines[line].0 += 1;
                self.lines[line].1 += laps.lap();
            }
            if traced && let Some(t) = started {
                self.trace_instruction(&ins.op, t);
            }
            pc = match next {
                Ok(Some(next)) => next,
                Ok(None) => break,
                Err(e) => return Err(e.at(&self.program.name, ins.loc.line)),
            };
        }
        self.finish(done).map_err(|e| e.at(&self.program.name, 0))
    }

    /// The end of a program (SIAL-SPEC §7.9): the implicit barrier, the final state (worker
    /// 0, for dumps and results), persistent objects saved, the servers told to finish.
    fn finish(&mut self, done: &mut Done<'_>) -> Result<()> {
        // Local blocks outlive the program only in a dump.
        if self.env.options.snapshot {
            self.flush_all()?;
        }
        self.barrier()?;
        if self.rank == 0 {
            done(&FinalState {
                program: self.program,
                layout: &self.layout,
                ints: &self.ints,
                scalars: &self.scalars,
                storage: self.memory.arrays(),
                remote: &self.net,
            })?;
        }
        self.save_persistent()?;
        let net = self.net.get_mut();
        if self.rank == 0 {
            self.server_stats = net.end_program()?;
        }
        // No worker starts the next program before every server has finished this one.
        net.link.barrier()?;
        Ok(())
    }

    /// Whether an instruction does block work, communicates or waits (worth timing): not
    /// jumps, loop ends, hints or int arithmetic.
    fn may_take_long(op: &Op) -> bool {
        use sial_bytecode::Class;
        match op.class() {
            Class::Control | Class::Hint => false,
            Class::Variables => !matches!(op, Op::AssignInt { .. }),
            Class::Synchronise
            | Class::Collective
            | Class::Blocks
            | Class::Remote
            | Class::Persistence
            | Class::Output => true,
        }
    }

    /// Whether requests held to go together (a loop of gets) must go before the instruction:
    /// every instruction that may take long ([`Self::may_take_long`]) but other requests.
    fn sends_held_first(op: &Op) -> bool {
        Self::may_take_long(op) && !matches!(op.class(), sial_bytecode::Class::Remote)
    }

    /// An instruction on the timeline, if it ran long enough.
    fn trace_instruction(&self, op: &Op, started: Instant) {
        let name = || match op {
            Op::Execute { special, .. } => self
                .program
                .specials
                .get(special.index())
                .map_or_else(|| "execute".to_string(), |s| s.name.clone()),
            _ => op.name().to_string(),
        };
        let at = format!("{}:{}", self.program.name, self.line);
        crate::trace::span("instruction", name, started, false, &[("at", at.into())]);
    }

    /// This worker's rank among the workers.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The servers' figures of the finished program (worker 0; empty on the others).
    pub fn take_server_stats(&mut self) -> Vec<ServerStats> {
        std::mem::take(&mut self.server_stats)
    }

    /// This worker's figures.
    pub fn stats(&self) -> WorkerStats {
        let net = self.net.borrow();
        let mut s = net.stats.clone();
        s.sites = net.site_stats();
        s.gpu = self.gpu.as_ref().map(|g| g.stats());
        let program = self.env.program_index;
        s.lines = self
            .lines
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| *n > 0)
            .map(|(line, &(instructions, time))| LineProfile {
                program,
                line: line as u32,
                instructions,
                time,
            })
            .collect();
        s
    }

    /// Executes one instruction; returns the next pc, or `None` at the end of the program.
    ///
    /// The long instructions' bodies are `#[inline(never)]` (`placed_op`, `get`, `barrier`,
    /// the folds, ...) so that this function stays small enough to be inlined into
    /// [`Self::run`]'s loop: with them inlined it was a call with a 1.4 KB frame for every
    /// int and scalar instruction, 1.35× their time (docs/benchmarks.md, "Interpreter: int and
    /// scalar instructions without a call each").
    fn step(&mut self, op: &Op, pc: usize) -> Result<Option<usize>> {
        let next = pc + 1;
        if Self::sends_held_first(op) {
            self.net.get_mut().send_held()?;
        }
        if self.gpu.is_some() {
            self.before_step(pc)?;
        } else if let Some(fold) = self.through.step(self.program, pc) {
            let folded = match fold {
                through::Fold::Copy(step) => self.add_through(pc, step)?.then_some(pc + 2),
                through::Fold::Product(p) => self.contract_through(&p)?.then_some(pc + p.len),
                through::Fold::Move(m) => self.move_through(&m)?.then_some(pc + 1),
            };
            if folded.is_some() {
                return Ok(folded);
            }
        }
        match op {
            Op::Jump { target } => return Ok(Some(*target as usize)),
            Op::JumpUnless { cond, target } => {
                return Ok(Some(if self.eval_bool(*cond)? {
                    next
                } else {
                    *target as usize
                }));
            }
            Op::Call { proc } => {
                self.scopes.call(next)?;
                let entry = self
                    .program
                    .procs
                    .get(proc.index())
                    .map(|p| p.entry as usize);
                return entry
                    .map(Some)
                    .ok_or_else(|| RuntimeError::new("internal: unknown procedure"));
            }
            Op::Return => {
                return self.scopes.ret().map(Some);
            }
            Op::End => return Ok(None),
            Op::Stop => return Err(RuntimeError::new("sial stop command caused program abort")),
            Op::DoStart { index, wheres, end }
            | Op::DoInStart {
                index, wheres, end, ..
            } => {
                let head = loops::LoopHead {
                    indices: std::slice::from_ref(index),
                    wheres,
                    end: *end,
                    pardo: None,
                };
                return self.loop_start(head, pc).map(Some);
            }
            Op::PardoStart {
                indices,
                wheres,
                pragma,
                end,
            } => {
                let head = loops::LoopHead {
                    indices,
                    wheres,
                    end: *end,
                    pardo: Some(*pragma),
                };
                return self.loop_start(head, pc).map(Some);
            }
            Op::LoopEnd { start } => return self.loop_end(*start as usize, pc).map(Some),
            Op::Exit { start } => return self.loop_exit(*start as usize).map(Some),
            Op::SectionStart | Op::Create { .. } => {}
            Op::GpuOn => self.gpu_region(true),
            Op::GpuOff => self.gpu_region(false),
            Op::Gpu { op, arg } => self.gpu_hint(*op, arg)?,
            Op::SectionEnd | Op::Barrier { .. } => self.barrier()?,
            Op::AssignInt { target, op, value } => {
                let v = self.eval_int(*value)?;
                let x = &mut self.ints[target.index()];
                *x = match op {
                    sial_bytecode::ScalarAssign::Set => v,
                    sial_bytecode::ScalarAssign::Add => x.wrapping_add(v),
                    sial_bytecode::ScalarAssign::Sub => x.wrapping_sub(v),
                    sial_bytecode::ScalarAssign::Mul => x.wrapping_mul(v),
                };
            }
            Op::AssignScalar { target, op, value } => {
                let v = self.eval_scalar(*value)?;
                let x = &mut self.scalars[target.index()];
                *x = match op {
                    sial_bytecode::ScalarAssign::Set => v,
                    sial_bytecode::ScalarAssign::Add => *x + v,
                    sial_bytecode::ScalarAssign::Sub => *x - v,
                    sial_bytecode::ScalarAssign::Mul => *x * v,
                };
            }
            Op::Collective { target, value } => {
                let v = self.eval_scalar(*value)?;
                let all = self.net.get_mut().link.all_gather(vec![v])?;
                // Summed in worker-rank order: every worker gets the same bits.
                let sum: f64 = all.iter().map(|c| c.first().copied().unwrap_or(0.0)).sum();
                self.scalars[target.index()] += sum;
            }
            Op::Get { block } => self.get(block, pc)?,
            Op::AssertSame { target } => self.assert_same(*target)?,
            Op::BroadcastFrom { root, array } => self.broadcast_from(*root, *array)?,
            Op::BlockScalar { .. }
            | Op::BlockCopy { .. }
            | Op::BlockAccumulate { .. }
            | Op::BlockSum { .. }
            | Op::BlockContract { .. }
            | Op::BlockScaleCopy { .. }
            | Op::Slice { .. }
            | Op::Insert { .. }
            | Op::Execute { .. }
            | Op::Allocate { .. }
            | Op::Deallocate { .. }
            | Op::AllocateRegion { .. }
            | Op::DeallocateRegion { .. }
            | Op::Delete { .. }
            | Op::Put { .. }
            | Op::Print { .. }
            | Op::SetPersistent { .. }
            | Op::RestorePersistent { .. } => {
                self.placed_op(op, pc)?;
                self.check_memory(op)?;
            }
        }
        Ok(Some(next))
    }

    /// Blocks written by an instruction count against `--worker-memory` with the fetched
    /// ones: fetched blocks not in use make room; an error if that is not enough.
    #[inline(never)]
    fn check_memory(&mut self, op: &Op) -> Result<()> {
        let local = self.memory.own_bytes();
        let program = self.program;
        let written = || {
            program
                .effects(op)
                .uses
                .iter()
                .filter(|(_, access)| access.writes())
                .filter_map(|(target, _)| target.array())
                .find(|a| !program.arrays[a.index()].kind.is_remote())
                .map(|a| format!("writing {}", program.arrays[a.index()].name))
                .unwrap_or_else(|| "here".to_string())
        };
        self.net.get_mut().hold_local(local, &written)
    }

    /// `get`/`request`: the block is requested unless already fetched in this section, and so
    /// are the blocks this `get` will want in the coming iterations (prefetch).
    #[inline(never)]
    fn get(&mut self, block: &sial_bytecode::BlockRef, pc: usize) -> Result<()> {
        let (key, shape) = self.locate(block)?;
        // Scopes closed since the last block instruction freed local blocks.
        let local = self.memory.own_bytes();
        self.net.get_mut().set_local(local);
        let site = self.net.get_mut().site(pc, self.line);
        let text = || self.block_text(block.array, &key);
        let mut wanted = self.wanted(block.array, key, &shape, &text);
        wanted.site = site;
        self.net.borrow_mut().get(&wanted, true)?;
        let bytes = wanted.bytes;
        self.scopes.hold(block.array, key);
        self.prefetch_ahead(pc, block, site, bytes)
    }

    /// `sip_barrier`/`server_barrier` (SIAL-SPEC §7.6); also resets the pardo counter.
    #[inline(never)]
    fn barrier(&mut self) -> Result<()> {
        self.net.get_mut().barrier(self.line)?;
        self.pardo_counter = 0;
        self.forget_fetched_on_device()?;
        Ok(())
    }

    /// `assert_same x`: worker 0's value, checked against this worker's and adopted.
    #[inline(never)]
    fn assert_same(&mut self, target: sial_bytecode::ScalarSlot) -> Result<()> {
        let mine = self.scalars[target.index()];
        let theirs = self.net.get_mut().link.broadcast(0, vec![mine])?;
        let master = theirs.first().copied().unwrap_or(mine);
        let close = if mine == 0.0 || master == 0.0 {
            (mine - master).abs() < 5e-5 * f64::MIN_POSITIVE
        } else {
            (mine - master).abs() / (mine.abs() + master.abs()) < 5e-5
        };
        if !close {
            return Err(RuntimeError::program(format!(
                "assert_same {}: values are too far apart: worker 0 has {master}, worker {} has {mine}",
                self.program.scalars[target.index()].name,
                self.rank
            )));
        }
        self.scalars[target.index()] = master;
        Ok(())
    }

    /// `broadcast_from r s`: worker r's copy of the static array on every worker.
    #[inline(never)]
    fn broadcast_from(&mut self, root: sial_bytecode::ExprId, array: ArraySlot) -> Result<()> {
        let r = self.eval_int(root)?;
        if r < 0 || r as usize >= self.workers {
            return Err(RuntimeError::program(format!(
                "broadcast_from {r} {}: worker {r} does not exist ({} worker{})",
                self.array_name(array),
                self.workers,
                if self.workers == 1 { "" } else { "s" }
            )));
        }
        let Storage::Whole(b) = &mut self.memory[array.index()] else {
            return Err(RuntimeError::new(
                "internal: broadcast_from of a non-static array",
            ));
        };
        let data = std::mem::take(&mut b.data);
        b.data = self.net.get_mut().link.broadcast(r as usize, data)?;
        Ok(())
    }

    /// Closes the innermost scope: its temp blocks are deleted, its fetched blocks may be
    /// evicted.
    pub(crate) fn close_scope(&mut self) {
        let mut held = self.scopes.close();
        for (a, key) in held.drain(..) {
            match &mut self.memory[a.index()] {
                Storage::Blocks(map) => {
                    if let Some(b) = map.remove(&key) {
                        crate::spare::give(b.data);
                    }
                    // A failure here is a device failure; the next device use reports it.
                    let _ = self.forget_on_device((a.0, key));
                }
                Storage::Remote => self.net.get_mut().release(a.0, key),
                _ => {}
            }
        }
        self.scopes.emptied(held);
    }

    /// Tells every server (worker 0 only: each server must get it once).
    pub(crate) fn tell_servers(
        &mut self,
        msg: impl Fn(crate::cluster::message::Origin) -> ToServer,
    ) -> Result<()> {
        if self.rank == 0 {
            self.tell_servers_from_every_worker(msg)?;
        }
        Ok(())
    }

    /// Tells every server, from every worker: for requests that the servers apply once, at the
    /// first copy (`delete`, `restore_persistent`). Sent by worker 0 alone, such a request could
    /// reach a server after the puts that a faster worker made past it.
    pub(crate) fn tell_servers_from_every_worker(
        &mut self,
        msg: impl Fn(crate::cluster::message::Origin) -> ToServer,
    ) -> Result<()> {
        let line = self.line;
        self.net.get_mut().tell_all_servers(msg, line)
    }
}

/// What worker 0 does with each program's final state (writes dumps, collects results).
pub type Done<'d> = dyn FnMut(&FinalState<'_>) -> Result<()> + 'd;

/// Read-only view of a finished program's state. The blocks of distributed and served arrays
/// stay at the servers; [`FinalState::remote_blocks`] reads them a bounded batch at a time.
pub struct FinalState<'w> {
    pub program: &'w Program,
    pub layout: &'w Layout,
    pub ints: &'w [i32],
    pub scalars: &'w [f64],
    /// Every array's storage on worker 0 (`Storage::Remote` for distributed and served ones).
    pub storage: &'w [Storage],
    remote: &'w dyn Remote,
}

/// Bytes of block data fetched at once for [`FinalState::remote_blocks`] (at least one block).
const SNAPSHOT_BATCH_BYTES: usize = 64 << 20;

impl FinalState<'_> {
    /// Every block of a distributed or served array, in block-key order, given to `each` one
    /// at a time; worker 0 holds at most a batch of them (64 MiB, or one larger block).
    pub fn remote_blocks(
        &self,
        array: usize,
        each: &mut dyn FnMut(&BlockKey, &Block) -> Result<()>,
    ) -> Result<()> {
        let keys = self.remote.keys(array as u32)?;
        let mut start = 0;
        while start < keys.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < keys.len() && (end == start || bytes < SNAPSHOT_BATCH_BYTES) {
                bytes += self.block_bytes(array, &keys[end].0);
                end += 1;
            }
            for (key, block) in self.remote.blocks(array as u32, &keys[start..end])? {
                each(&key, &block)?;
            }
            start = end;
        }
        Ok(())
    }

    fn block_bytes(&self, array: usize, key: &BlockKey) -> usize {
        let dims = &self.program.arrays[array].dims;
        dims.iter()
            .zip(key.segments.iter().zip(key.parents))
            .map(|(&d, (&s, p))| self.layout.extent(d, s, p))
            .product::<usize>()
            * 8
    }
}

/// The servers' blocks, as worker 0 reads them for [`FinalState::remote_blocks`].
trait Remote {
    fn keys(&self, array: u32) -> Result<Vec<(BlockKey, usize)>>;
    fn blocks(
        &self,
        array: u32,
        keys: &[(BlockKey, usize)],
    ) -> Result<Vec<(BlockKey, std::sync::Arc<Block>)>>;
}

impl Remote for RefCell<Net<'_>> {
    fn keys(&self, array: u32) -> Result<Vec<(BlockKey, usize)>> {
        self.borrow_mut().snapshot_keys(array)
    }
    fn blocks(
        &self,
        array: u32,
        keys: &[(BlockKey, usize)],
    ) -> Result<Vec<(BlockKey, std::sync::Arc<Block>)>> {
        self.borrow_mut().snapshot_blocks(array, keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The laps of `--profile` leave no time out: they add up to the time since the first
    /// began.
    #[test]
    fn profile_laps_add_up_to_the_whole_run() {
        let mut laps = Laps::new();
        let began = laps.last();
        let mut total = Duration::ZERO;
        for i in 0..1000u64 {
            std::hint::black_box((0..i).sum::<u64>());
            total += laps.lap();
        }
        assert_eq!(total, laps.last() - began);
    }

    /// A loop of gets leaves its requests held; the block work after it sends them first.
    #[test]
    fn requests_are_held_through_a_loop_of_gets_and_sent_before_block_work() {
        let source = "sial p\nindex i = 1:4\ndistributed d[i]\ntemp t[i]\nscalar s\n\
                      pardo i\n   get d[i]\nendpardo i\npardo i\n   get d[i]\n   t[i] = d[i]\n   \
                      s += t[i] * t[i]\nendpardo i\nendsial p\n";
        let program = crate::testutil::program(source);
        let sends: Vec<(&str, bool)> = program
            .code
            .iter()
            .map(|i| (i.op.name(), Worker::sends_held_first(&i.op)))
            .collect();
        // The first instruction that sends what is held comes after both loops of gets:
        // the loops' steps and the gets themselves hold.
        let first_send = sends.iter().position(|&(_, send)| send);
        let last_get = sends.iter().rposition(|&(name, _)| name == "get");
        assert!(
            matches!((first_send, last_get), (Some(f), Some(g)) if f > g),
            "{sends:?}"
        );
        assert_eq!(sends.iter().filter(|(name, _)| *name == "get").count(), 2);
    }
}
