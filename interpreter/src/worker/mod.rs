//! A worker: interprets one program's bytecode in one process (SIAL-SPEC §6.4–§6.7, §7.16).
//! Storage, the special registry, output and persistence come from the job; the worker owns
//! the program state (ints, scalars, index values, blocks, loops, scopes).

mod access;
mod eval;
mod execute;
mod loops;
mod ops;

use crate::error::{Result, RuntimeError};
use crate::layout::Layout;
use crate::persist::Persisted;
use crate::setup::Setup;
use crate::specials::Registry;
use crate::store::{Block, BlockKey, Storage};
use loops::Frame;
use sial_compiler::bytecode::{ArrayKind, ArraySlot, Op, Persistent, Program};
use std::collections::{HashMap, HashSet};
use std::io::Write;

/// What a worker is given to run a program.
pub struct Env<'a> {
    pub setup: &'a Setup,
    pub registry: &'a Registry,
    pub out: &'a mut dyn Write,
    pub persisted: &'a mut Persisted,
    /// Directory for files written by specials.
    pub work_dir: std::path::PathBuf,
}

pub struct Worker<'a> {
    pub(crate) program: &'a Program,
    pub(crate) layout: Layout,
    pub(crate) ints: Vec<i32>,
    pub(crate) scalars: Vec<f64>,
    pub(crate) index_values: Vec<Option<i32>>,
    pub(crate) storage: Vec<Storage>,
    /// Distributed/served blocks fetched since the last barrier.
    pub(crate) fetched: Vec<HashSet<BlockKey>>,
    /// Temp blocks created in each open scope (innermost last); the first is the program scope.
    pub(crate) scopes: Vec<Vec<(ArraySlot, BlockKey)>>,
    pub(crate) frames: Vec<Frame>,
    calls: Vec<usize>,
    pub(crate) marks: Vec<(Persistent, String)>,
    pub(crate) env: Env<'a>,
    pub(crate) all_rank_print: bool,
    pub(crate) line: u32,
}

/// Deepest chain of procedure calls (recursion is legal but must end).
const MAX_CALL_DEPTH: usize = 10_000;

impl<'a> Worker<'a> {
    /// Binds a program to the setup data: predefined values, segment tables, predefined arrays.
    pub fn new(program: &'a Program, env: Env<'a>) -> Result<Worker<'a>> {
        let setup = env.setup;
        let mut ints = Vec::with_capacity(program.ints.len());
        for x in &program.ints {
            ints.push(if x.predefined {
                *setup.ints.get(&x.name).ok_or_else(|| {
                    RuntimeError::input(format!("Could not find predefined integer : {0} (give it in the setup file or with --set {0}=VALUE)", x.name))
                })?
            } else {
                x.init
            });
        }
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
        let mut storage = Vec::with_capacity(program.arrays.len());
        for a in &program.arrays {
            if !a.used {
                storage.push(Storage::Unused);
                continue;
            }
            for &d in &a.dims {
                let r = layout.range(d);
                if r.kind != sial_compiler::bytecode::IndexKind::Sub && r.count() == 0 {
                    return Err(RuntimeError::input(format!(
                        "array {} has a dimension over index {} with no segments ({}:{})",
                        a.name, r.name, r.lo, r.hi
                    )));
                }
            }
            storage.push(match a.kind {
                ArrayKind::Static => {
                    let shape: Vec<usize> = a.dims.iter().map(|&d| layout.full_extent(d)).collect();
                    let block = if a.predefined {
                        predefined_array(setup, &a.name, &shape, &mut std::io::stderr())?
                    } else {
                        Block::zeros(shape)
                    };
                    Storage::Whole(block)
                }
                ArrayKind::ContiguousLocal => Storage::Regions(Vec::new()),
                _ => Storage::Blocks(HashMap::new()),
            });
        }
        Ok(Worker {
            program,
            layout,
            ints,
            scalars,
            index_values: vec![None; program.indices.len()],
            fetched: vec![HashSet::new(); program.arrays.len()],
            storage,
            scopes: vec![Vec::new()],
            frames: Vec::new(),
            calls: Vec::new(),
            marks: Vec::new(),
            env,
            all_rank_print: false,
            line: 0,
        })
    }

    /// Runs the program to its end; then saves what was marked persistent.
    pub fn run(&mut self) -> Result<()> {
        let mut pc = 0usize;
        while let Some(ins) = self.program.code.get(pc) {
            self.line = ins.loc.line;
            pc = match self.step(&ins.op, pc) {
                Ok(Some(next)) => next,
                Ok(None) => break,
                Err(e) => return Err(e.at(&self.program.name, ins.loc.line)),
            };
        }
        self.barrier();
        self.save_persistent()
            .map_err(|e| e.at(&self.program.name, 0))
    }

    /// Executes one instruction; returns the next pc, or `None` at the end of the program.
    fn step(&mut self, op: &Op, pc: usize) -> Result<Option<usize>> {
        let next = pc + 1;
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
                if self.calls.len() >= MAX_CALL_DEPTH {
                    return Err(RuntimeError::program(format!(
                        "procedure calls nested more than {MAX_CALL_DEPTH} deep (unbounded recursion?)"
                    )));
                }
                self.calls.push(next);
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
                return self
                    .calls
                    .pop()
                    .map(Some)
                    .ok_or_else(|| RuntimeError::new("internal: return without a call"));
            }
            Op::End => return Ok(None),
            Op::Stop => return Err(RuntimeError::new("sial stop command caused program abort")),
            Op::DoStart { .. } | Op::DoInStart { .. } | Op::PardoStart { .. } => {
                return self.loop_start(op, pc).map(Some);
            }
            Op::LoopEnd { start } => return self.loop_end(*start as usize, pc).map(Some),
            Op::Exit { start } => return self.loop_exit(*start as usize).map(Some),
            Op::SectionStart | Op::GpuOn | Op::GpuOff | Op::Gpu { .. } | Op::Create { .. } => {}
            Op::SectionEnd | Op::Barrier { .. } => self.barrier(),
            Op::AssignInt { target, op, value } => {
                let v = self.eval_int(*value)?;
                let x = &mut self.ints[target.index()];
                *x = match op {
                    sial_compiler::bytecode::ScalarAssign::Set => v,
                    sial_compiler::bytecode::ScalarAssign::Add => x.wrapping_add(v),
                    sial_compiler::bytecode::ScalarAssign::Sub => x.wrapping_sub(v),
                    sial_compiler::bytecode::ScalarAssign::Mul => x.wrapping_mul(v),
                };
            }
            Op::AssignScalar { target, op, value } => {
                let v = self.eval_scalar(*value)?;
                let x = &mut self.scalars[target.index()];
                *x = match op {
                    sial_compiler::bytecode::ScalarAssign::Set => v,
                    sial_compiler::bytecode::ScalarAssign::Add => *x + v,
                    sial_compiler::bytecode::ScalarAssign::Sub => *x - v,
                    sial_compiler::bytecode::ScalarAssign::Mul => *x * v,
                };
            }
            // One worker: the sum over all workers is this worker's value.
            Op::Collective { target, value } => {
                let v = self.eval_scalar(*value)?;
                self.scalars[target.index()] += v;
            }
            Op::AssertSame { .. } => {}
            Op::BroadcastFrom { root, array } => {
                let r = self.eval_int(*root)?;
                if r != 0 {
                    return Err(RuntimeError::program(format!(
                        "broadcast_from {r} {}: worker {r} does not exist (1 worker)",
                        self.array_name(*array)
                    )));
                }
            }
            _ => self.block_op(op)?,
        }
        Ok(Some(next))
    }

    /// Barrier in one process: fetched copies of distributed/served blocks are dropped.
    fn barrier(&mut self) {
        for f in &mut self.fetched {
            f.clear();
        }
    }

    /// Closes the innermost scope: its temp blocks are deleted.
    pub(crate) fn close_scope(&mut self) {
        if let Some(scope) = self.scopes.pop() {
            for (a, key) in scope {
                if let Storage::Blocks(map) = &mut self.storage[a.index()] {
                    map.remove(&key);
                }
            }
        }
    }

    /// The final state: ints, scalars, storage (for dumps and tests).
    pub fn state(&self) -> FinalState<'_> {
        FinalState {
            program: self.program,
            layout: &self.layout,
            ints: &self.ints,
            scalars: &self.scalars,
            storage: &self.storage,
        }
    }
}

/// Read-only view of a finished program's state.
pub struct FinalState<'w> {
    pub program: &'w Program,
    pub layout: &'w Layout,
    pub ints: &'w [i32],
    pub scalars: &'w [f64],
    pub storage: &'w [Storage],
}

fn predefined_array(
    setup: &Setup,
    name: &str,
    shape: &[usize],
    warnings: &mut dyn Write,
) -> Result<Block> {
    match setup.arrays.get(name) {
        Some(a) if a.shape == shape => Ok(Block {
            shape: shape.to_vec(),
            data: a.data.clone(),
        }),
        Some(a) => Err(RuntimeError::input(format!(
            "array {name} shape inconsistent in Sial program and inserted array: the program needs {shape:?}, the setup data has {:?}",
            a.shape
        ))),
        None => {
            let _ = writeln!(
                warnings,
                "WARNING:  No data for predefined static array {name}; it is zero-filled"
            );
            Ok(Block::zeros(shape.to_vec()))
        }
    }
}
