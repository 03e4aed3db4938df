//! Loops (SIAL-SPEC §4.2–§4.4, §6.7): do, do-in over a subindex, pardo. Each loop walks its
//! iterations in odometer order (first index fastest), skipping those whose where clauses are
//! false; every iteration is a scope. A pardo's manager (§7.10) decides which worker runs
//! each iteration.

use super::Worker;
use super::lookahead::Ahead;
use crate::error::{Result, RuntimeError};
use crate::layout::SUBSEGMENTS;
use sial_bytecode::{ExprId, IndexKind, IndexSlot, Op};

/// An active loop.
pub(crate) struct Frame {
    /// pc of the loop's start instruction and of its `LoopEnd`.
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) indices: Vec<IndexSlot>,
    pub(super) lo: Vec<i32>,
    pub(super) hi: Vec<i32>,
    pub(super) current: Vec<i32>,
    pub(super) wheres: Vec<ExprId>,
    pub(super) manager: Manager,
    pub(super) pardo: bool,
    /// Iterations of this loop met so far, before where clauses (the static manager).
    pub(super) seen: u64,
    /// The coming iterations, for prefetching (see `lookahead`).
    pub(super) ahead: Option<Box<Ahead>>,
    /// The prediction an inner loop (by its start pc) left for its next run.
    pub(super) carried: Option<(usize, Box<Ahead>)>,
}

impl Frame {
    /// Iterations of the loop before where clauses.
    pub(super) fn iterations(&self) -> u64 {
        self.lo
            .iter()
            .zip(&self.hi)
            .map(|(l, h)| (i64::from(*h) - i64::from(*l) + 1).max(0) as u64)
            .product()
    }

    /// How many iterations come before the current one, in odometer order.
    pub(super) fn position(&self) -> u64 {
        let mut at = 0;
        let mut stride = 1;
        for ((c, l), h) in self.current.iter().zip(&self.lo).zip(&self.hi) {
            at += (i64::from(*c) - i64::from(*l)).max(0) as u64 * stride;
            stride *= (i64::from(*h) - i64::from(*l) + 1).max(0) as u64;
        }
        at
    }
}

/// Pardo loop managers (SIAL-SPEC §7.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Manager {
    /// Not a pardo, or `SequentialPardoLoop`: this worker runs every iteration.
    All,
    /// The default: the k-th valid iteration since the barrier goes to worker k mod W.
    Balanced,
    /// `StaticTaskAllocParallelPardoLoop`: the k-th iteration of this loop (before where
    /// clauses) goes to worker k mod W.
    Static,
}

/// What a loop's start instruction says.
pub(super) struct LoopHead<'o> {
    pub(super) indices: &'o [IndexSlot],
    pub(super) wheres: &'o [ExprId],
    pub(super) end: sial_bytecode::Pc,
    /// A pardo, with its pragma; `None` for a `do` loop.
    pub(super) pardo: Option<Option<sial_bytecode::StringSlot>>,
}

impl Worker<'_> {
    pub(super) fn loop_start(&mut self, head: LoopHead, pc: usize) -> Result<usize> {
        let manager = match head.pardo {
            Some(Some(p)) => self.manager(&self.program.strings[p.index()]),
            Some(None) => Manager::Balanced,
            None => Manager::All,
        };
        let pardo = head.pardo.is_some();
        let (indices, wheres, end) = (
            head.indices.to_vec(),
            head.wheres.to_vec(),
            head.end as usize,
        );
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
        let frame = Frame {
            start: pc,
            end,
            indices,
            current: lo.clone(),
            lo,
            hi,
            wheres,
            manager,
            pardo,
            seen: 0,
            ahead: None,
            carried: None,
        };
        let empty = frame.hi.iter().zip(&frame.lo).any(|(h, l)| h < l);
        // The loop's frame is the innermost from here: `first_valid` steps it in place.
        self.frames.push(frame);
        if !empty && self.first_valid(true)? {
            if let Some(frame) = self.frames.last().filter(|f| f.pardo) {
                let (program, line) = (&self.program.name, self.line);
                let label = || format!("pardo at {program}:{line}");
                self.progress.start(pc, label, frame.iterations());
                self.progress.step(pc, || frame.position());
            }
            self.scopes.open();
            self.loop_started();
            Ok(pc + 1)
        } else {
            if let Some(frame) = self.frames.pop() {
                self.clear_indices(&frame.indices);
            }
            Ok(end + 1)
        }
    }

    /// The loop manager a pragma names (SIAL-SPEC §7.10); fragment managers are not
    /// available and fall back to the default with a warning.
    fn manager(&self, pragma: &str) -> Manager {
        match pragma {
            "default_loop_manager" | "BalancedTaskAllocParallelPardoLoop" => Manager::Balanced,
            "SequentialPardoLoop" => Manager::All,
            "StaticTaskAllocParallelPardoLoop" | "test_pardo_pragma" => Manager::Static,
            _ => {
                self.warn(&format!(
                    "Failed to create specified pardo manager \"{pragma}\"; THIS PARDO LOOP IS BEING EXECUTED USING THE DEFAULT LOOP"
                ));
                Manager::Balanced
            }
        }
    }

    pub(super) fn loop_end(&mut self, start: usize, pc: usize) -> Result<usize> {
        // A failure elsewhere stops this worker even in a loop that never communicates.
        self.net.get_mut().check_abort()?;
        self.close_scope();
        match self.frames.last() {
            None => return Err(RuntimeError::new("internal: loop end without a loop")),
            Some(frame) if frame.start != start => {
                return Err(RuntimeError::new(
                    "internal: loop end does not match the innermost loop",
                ));
            }
            Some(_) => {}
        }
        // The frame stays where it is while it steps (moving it out and back cost a copy of
        // it each way, a sixth of an empty pardo iteration).
        if self.first_valid(false)? {
            if let Some(frame) = self.frames.last() {
                self.progress.step(start, || frame.position());
            }
            self.scopes.open();
            self.loop_stepped();
            Ok(start + 1)
        } else {
            let Some(mut frame) = self.frames.pop() else {
                return Err(RuntimeError::new("internal: loop end without a loop"));
            };
            self.progress.end(start);
            self.clear_indices(&frame.indices);
            self.loop_ended(&mut frame);
            self.warn_iteration_limit(&frame);
            Ok(pc + 1)
        }
    }

    /// A `do` loop that has an `exit` and a predefined upper bound, and ran through all its
    /// iterations, is an iteration that did not converge (`do kiter` up to `scf_iter` or
    /// `cc_iter` in ACES4's programs, which leave through `exit` when converged): results may
    /// be far from converged, and nothing else would say so.
    fn warn_iteration_limit(&self, frame: &Frame) {
        if frame.pardo || frame.indices.len() != 1 {
            return;
        }
        let index = &self.program.indices[frame.indices[0].index()];
        let sial_bytecode::Bound::Predefined(limit) = index.hi else {
            return;
        };
        let has_exit = self.program.code[frame.start + 1..frame.end]
            .iter()
            .any(|ins| matches!(ins.op, Op::Exit { start } if start as usize == frame.start));
        if !has_exit {
            return;
        }
        let name = &self.program.ints[limit.index()].name;
        let line = self.program.code[frame.start].loc.line;
        self.warn_at(line, &format!(
            "do {} ran all its iterations up to {name} = {} without leaving through exit: the iteration has not converged",
            index.name, self.ints[limit.index()]
        ));
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

    /// Moves the innermost loop to its first iteration (when `fresh`) or the next one whose
    /// where clauses hold; sets the index values. False when there is none.
    fn first_valid(&mut self, fresh: bool) -> Result<bool> {
        let workers = self.workers as u64;
        let mut advance = !fresh;
        loop {
            let Some(frame) = self.frames.last_mut() else {
                return Err(RuntimeError::new("internal: a loop step without a loop"));
            };
            if advance && !odometer(&mut frame.current, &frame.lo, &frame.hi) {
                return Ok(false);
            }
            advance = true;
            let manager = frame.manager;
            if manager == Manager::Static {
                let k = frame.seen;
                frame.seen += 1;
                if k % workers != self.rank as u64 {
                    continue;
                }
            }
            for (i, v) in frame.indices.iter().zip(&frame.current) {
                self.index_values[i.index()] = Some(*v);
            }
            let mut ok = true;
            for &w in self.frames.last().map_or(&[][..], |f| &f.wheres[..]) {
                if !self.eval_bool(w)? {
                    ok = false;
                    break;
                }
            }
            if ok && manager == Manager::Balanced {
                let k = self.pardo_counter;
                self.pardo_counter += 1;
                ok = k % workers == self.rank as u64;
            }
            if ok {
                return Ok(true);
            }
        }
    }
}

/// Next combination, first position fastest; false after the last.
pub(super) fn odometer(current: &mut [i32], lo: &[i32], hi: &[i32]) -> bool {
    for d in 0..current.len() {
        if current[d] < hi[d] {
            current[d] += 1;
            return true;
        }
        current[d] = lo[d];
    }
    false
}
