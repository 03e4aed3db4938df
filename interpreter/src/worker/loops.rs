//! Loops (SIAL-SPEC §4.2–§4.4, §6.7): do, do-in over a subindex, pardo. Each loop walks its
//! iterations in odometer order (first index fastest), skipping those whose where clauses are
//! false; every iteration is a scope. In one process a pardo runs all of its iterations.

use super::Worker;
use crate::error::{Result, RuntimeError};
use crate::layout::SUBSEGMENTS;
use sial_compiler::bytecode::{ExprId, IndexKind, IndexSlot, Op};

/// An active loop.
pub(crate) struct Frame {
    /// pc of the loop's start instruction and of its `LoopEnd`.
    start: usize,
    end: usize,
    indices: Vec<IndexSlot>,
    lo: Vec<i32>,
    hi: Vec<i32>,
    current: Vec<i32>,
    wheres: Vec<ExprId>,
}

impl Worker<'_> {
    pub(super) fn loop_start(&mut self, op: &Op, pc: usize) -> Result<usize> {
        let (indices, wheres, end, pardo) = match op {
            Op::DoStart { index, wheres, end } => {
                (vec![*index], wheres.clone(), *end as usize, false)
            }
            Op::DoInStart {
                index, wheres, end, ..
            } => (vec![*index], wheres.clone(), *end as usize, false),
            Op::PardoStart {
                indices,
                wheres,
                end,
                pragma,
            } => {
                if let Some(p) = pragma {
                    self.check_pragma(&self.program.strings[p.index()]);
                }
                (indices.clone(), wheres.clone(), *end as usize, true)
            }
            _ => return Err(RuntimeError::new("internal: not a loop")),
        };
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        for &i in &indices {
            let r = self.layout.range(i);
            if self.index_values[i.index()].is_some() {
                return Err(RuntimeError::program(format!(
                    "SIAL or SIP error, index {} already has value before loop",
                    r.name
                )));
            }
            let (l, h) = match (r.kind, r.parent) {
                (IndexKind::Sub, Some(p)) => {
                    self.index_value(p)?;
                    (1, SUBSEGMENTS)
                }
                _ => (r.lo, r.hi),
            };
            if pardo && h < l {
                return Err(RuntimeError::program(format!(
                    "Pardo loop index {} has empty range ({l}:{h})",
                    r.name
                )));
            }
            lo.push(l);
            hi.push(h);
        }
        let mut frame = Frame {
            start: pc,
            end,
            indices,
            current: lo.clone(),
            lo,
            hi,
            wheres,
        };
        let empty = frame.hi.iter().zip(&frame.lo).any(|(h, l)| h < l);
        if !empty && self.first_valid(&mut frame, true)? {
            self.frames.push(frame);
            self.scopes.push(Vec::new());
            Ok(pc + 1)
        } else {
            self.clear_indices(&frame.indices);
            Ok(end + 1)
        }
    }

    /// The loop managers of SIAL-SPEC §7.10 that a pragma may name. With one worker every
    /// manager runs every iteration in order; fragment managers are not available.
    fn check_pragma(&self, pragma: &str) {
        const KNOWN: [&str; 5] = [
            "default_loop_manager",
            "SequentialPardoLoop",
            "BalancedTaskAllocParallelPardoLoop",
            "StaticTaskAllocParallelPardoLoop",
            "test_pardo_pragma",
        ];
        if !KNOWN.contains(&pragma) {
            self.warn(&format!(
                "Failed to create specified pardo manager \"{pragma}\"; THIS PARDO LOOP IS BEING EXECUTED USING THE DEFAULT LOOP"
            ));
        }
    }

    pub(super) fn loop_end(&mut self, start: usize, pc: usize) -> Result<usize> {
        self.close_scope();
        let Some(mut frame) = self.frames.pop() else {
            return Err(RuntimeError::new("internal: loop end without a loop"));
        };
        if frame.start != start {
            return Err(RuntimeError::new(
                "internal: loop end does not match the innermost loop",
            ));
        }
        if self.first_valid(&mut frame, false)? {
            self.frames.push(frame);
            self.scopes.push(Vec::new());
            Ok(start + 1)
        } else {
            self.clear_indices(&frame.indices);
            Ok(pc + 1)
        }
    }

    pub(super) fn loop_exit(&mut self, start: usize) -> Result<usize> {
        // Loops opened inside the exited one (none, lexically) and the exited loop itself end.
        while let Some(frame) = self.frames.pop() {
            self.close_scope();
            self.clear_indices(&frame.indices);
            if frame.start == start {
                return Ok(frame.end + 1);
            }
        }
        Err(RuntimeError::new("internal: exit outside its loop"))
    }

    fn clear_indices(&mut self, indices: &[IndexSlot]) {
        for i in indices {
            self.index_values[i.index()] = None;
        }
    }

    /// Moves `frame` to its first iteration (when `fresh`) or the next one whose where clauses
    /// hold; sets the index values. False when there is none.
    fn first_valid(&mut self, frame: &mut Frame, fresh: bool) -> Result<bool> {
        let mut advance = !fresh;
        loop {
            if advance && !odometer(&mut frame.current, &frame.lo, &frame.hi) {
                return Ok(false);
            }
            advance = true;
            for (i, v) in frame.indices.iter().zip(&frame.current) {
                self.index_values[i.index()] = Some(*v);
            }
            let mut ok = true;
            for &w in &frame.wheres {
                if !self.eval_bool(w)? {
                    ok = false;
                    break;
                }
            }
            if ok {
                return Ok(true);
            }
        }
    }
}

/// Next combination, first position fastest; false after the last.
fn odometer(current: &mut [i32], lo: &[i32], hi: &[i32]) -> bool {
    for d in 0..current.len() {
        if current[d] < hi[d] {
            current[d] += 1;
            return true;
        }
        current[d] = lo[d];
    }
    false
}
