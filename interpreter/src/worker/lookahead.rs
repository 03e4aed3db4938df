//! Lazy index probing (docs/ARCHITECTURE.md "Prefetch"): the iterations that
//! the loops around a `get` will run next, computed without changing the program's state, and
//! the `get`s of coming iterations issued ahead of time.
//!
//! The loops considered (the *span*) are the innermost loop and those around it, out to and
//! including the innermost pardo; a loop whose body has a barrier ends the span, since blocks
//! fetched before a barrier are dropped there. An [`Ahead`] belongs to the innermost loop: a
//! list of the span's coming iterations, grown only when a site looks past its end, and per
//! site a cursor (how many of them the site has already requested). Each real step of the
//! loop consumes the head if it is the predicted one, and starts the list afresh otherwise
//! (the prediction is never trusted for the program's own iterations). When the innermost
//! loop ends, its list waits in the loop around it for the next run of the same loop.

use super::Worker;
use super::loops::{Frame, Manager};
use super::remote::Prefetched;
use crate::error::Result;
use sial_bytecode::{BlockRef, IndexSlot, Op};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// One iteration of a span: every span index's value (outermost loop first), and the
/// pardo manager's counters after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Iteration {
    values: SmallVec<[i32; 8]>,
    /// Iterations of the outermost loop met (static manager).
    seen: u64,
    /// The balanced manager's counter of valid iterations.
    counter: u64,
}

/// The coming iterations of a span, with the sites' cursors into them.
#[derive(Debug)]
pub(crate) struct Ahead {
    /// Loops in the span (the innermost `levels` frames).
    levels: usize,
    upcoming: VecDeque<Iteration>,
    /// Per site (pc of its `get`): iterations of `upcoming` already requested.
    cursors: SmallVec<[(usize, usize); 4]>,
    /// No iteration follows the last one in `upcoming` (or it could not be computed).
    exhausted: bool,
    /// Too short to be worth prefetching (`auto`), or no span at all.
    idle: bool,
}

impl Ahead {
    fn idle() -> Box<Ahead> {
        Box::new(Ahead {
            levels: 0,
            upcoming: VecDeque::new(),
            cursors: SmallVec::new(),
            exhausted: true,
            idle: true,
        })
    }

    fn cursor(&self, pc: usize) -> usize {
        self.cursors
            .iter()
            .find(|(p, _)| *p == pc)
            .map_or(0, |(_, c)| *c)
    }

    fn set_cursor(&mut self, pc: usize, c: usize) {
        match self.cursors.iter_mut().find(|(p, _)| *p == pc) {
            Some(e) => e.1 = c,
            None => self.cursors.push((pc, c)),
        }
    }

    /// Whether site `pc`, `depth` iterations ahead, has fallen far enough behind to request
    /// more now (a quarter of its depth, at least one, at a time), and there are more to
    /// request. Made one at a time, every request cost a get of a small block the probe's
    /// set-up (indices saved and restored, the frame's prediction taken out and put back).
    fn wants(&self, pc: usize, depth: usize) -> bool {
        let cursor = self.cursor(pc);
        !self.idle
            && cursor + depth.div_ceil(4) <= depth
            && (cursor < self.upcoming.len() || !self.exhausted)
    }

    /// The loop moved to `now`: drop the head if it was predicted, else start afresh.
    fn consume(&mut self, now: &Iteration) {
        if self.idle {
            return;
        }
        if self.upcoming.front() == Some(now) {
            self.upcoming.pop_front();
            for (_, c) in &mut self.cursors {
                *c = c.saturating_sub(1);
            }
        } else {
            self.upcoming.clear();
            self.cursors.clear();
            self.exhausted = false;
        }
    }
}

/// Restores index values changed while probing, however the probe ends.
struct Saved(SmallVec<[(IndexSlot, Option<i32>); 8]>);

impl Worker<'_> {
    /// After a `get` at `pc` of a block of `bytes` bytes: requests the same site's blocks for
    /// the coming iterations, as deep as the site's depth, once a quarter of it is used up.
    pub(super) fn prefetch_ahead(
        &mut self,
        pc: usize,
        block: &BlockRef,
        site: u32,
        bytes: usize,
    ) -> Result<()> {
        let depth = self.net.get_mut().depth(site);
        if depth == 0 || self.frames.is_empty() {
            return Ok(());
        }
        let n = self.frames.len() - 1;
        if let Some(a) = &self.frames[n].ahead
            && !a.wants(pc, depth)
        {
            return Ok(());
        }
        let mut ahead = match self.frames[n].ahead.take() {
            Some(a) => a,
            None => self.new_ahead(bytes),
        };
        if ahead.idle {
            self.frames[n].ahead = Some(ahead);
            return Ok(());
        }
        let first = self.frames.len() - ahead.levels;
        let saved = self.save_indices(first);
        let result = self.request_ahead(&mut ahead, first, pc, block, site, depth);
        self.restore_indices(saved);
        self.frames[n].ahead = Some(ahead);
        result
    }

    fn request_ahead(
        &mut self,
        ahead: &mut Ahead,
        first: usize,
        pc: usize,
        block: &BlockRef,
        site: u32,
        depth: usize,
    ) -> Result<()> {
        let mut cursor = ahead.cursor(pc);
        while cursor < depth {
            if cursor >= ahead.upcoming.len() {
                if ahead.exhausted {
                    break;
                }
                let mut it = match ahead.upcoming.back() {
                    Some(it) => it.clone(),
                    None => self.current_iteration(first),
                };
                // A where clause that fails to evaluate ends the prediction, not the program.
                if self
                    .advance(first, &mut it, ahead.levels - 1)
                    .unwrap_or(false)
                {
                    ahead.upcoming.push_back(it);
                } else {
                    ahead.exhausted = true;
                    break;
                }
            }
            self.set_indices(first, &ahead.upcoming[cursor]);
            // A block outside its array's range is the program's error to report, if it
            // really gets there.
            if let Ok((key, shape)) = self.locate(block) {
                let text = String::new;
                let mut wanted = self.wanted(block.array, key, &shape, &text);
                wanted.site = site;
                if self.net.borrow_mut().prefetch(&wanted)? == Prefetched::NoRoom {
                    break;
                }
            }
            cursor += 1;
        }
        ahead.set_cursor(pc, cursor);
        Ok(())
    }

    /// The span of the innermost loop, and whether it is worth prefetching over; the cache
    /// makes room for a block of `bytes` bytes per iteration.
    fn new_ahead(&mut self, bytes: usize) -> Box<Ahead> {
        let mut levels = 0;
        let mut iterations: u64 = 1;
        for f in self.frames.iter().rev() {
            if self.has_barrier(f) {
                break;
            }
            levels += 1;
            for (l, h) in f.lo.iter().zip(&f.hi) {
                iterations = iterations.saturating_mul((h - l + 1).max(0) as u64);
            }
            if f.pardo {
                if f.manager != Manager::All {
                    iterations /= self.workers as u64;
                }
                break;
            }
        }
        let short = self.net.get_mut().prefetch_mode() == crate::options::PrefetchMode::Auto
            && iterations < 3;
        if levels == 0 || short {
            return Ahead::idle();
        }
        self.net.get_mut().expect_fetches(iterations, bytes);
        Box::new(Ahead {
            levels,
            upcoming: VecDeque::new(),
            cursors: SmallVec::new(),
            exhausted: false,
            idle: false,
        })
    }

    /// Whether a loop's body contains a barrier (remembered per loop).
    fn has_barrier(&self, f: &Frame) -> bool {
        *self
            .barrier_loops
            .borrow_mut()
            .entry(f.start)
            .or_insert_with(|| {
                self.program
                    .code
                    .get(f.start + 1..f.end)
                    .unwrap_or_default()
                    .iter()
                    .any(|i| matches!(i.op, Op::Barrier { .. } | Op::SectionEnd))
            })
    }

    /// The iteration the span's loops are at now.
    fn current_iteration(&self, first: usize) -> Iteration {
        let frames = &self.frames[first..];
        Iteration {
            values: frames
                .iter()
                .flat_map(|f| f.current.iter().copied())
                .collect(),
            seen: frames.first().map_or(0, |f| f.seen),
            counter: self.pardo_counter,
        }
    }

    /// Moves `it` to the next iteration of the span at `level` (inner levels restart); false
    /// when the outermost loop of the span has no more. Mirrors `first_valid`.
    fn advance(&mut self, first: usize, it: &mut Iteration, level: usize) -> Result<bool> {
        let f = first + level;
        let offset: usize = self.frames[first..f].iter().map(|f| f.indices.len()).sum();
        let len = self.frames[f].indices.len();
        loop {
            let frame = &self.frames[f];
            let values = &mut it.values[offset..offset + len];
            if !super::loops::odometer(values, &frame.lo, &frame.hi) {
                if level == 0 || !self.advance(first, it, level - 1)? {
                    return Ok(false);
                }
                let frame = &self.frames[f];
                it.values[offset..offset + len].copy_from_slice(&frame.lo);
            }
            if self.valid(first, it, level)? {
                return Ok(true);
            }
        }
    }

    /// Whether this worker runs iteration `it` of the loop at `level` (where clauses and the
    /// pardo manager); counts like the manager does.
    fn valid(&mut self, first: usize, it: &mut Iteration, level: usize) -> Result<bool> {
        let workers = self.workers as u64;
        let rank = self.rank as u64;
        let f = first + level;
        if self.frames[f].manager == Manager::Static {
            let k = it.seen;
            it.seen += 1;
            if k % workers != rank {
                return Ok(false);
            }
        }
        self.set_indices_to(first, it, level + 1);
        for &w in &self.frames[f].wheres {
            if !self.eval_bool(w)? {
                return Ok(false);
            }
        }
        if self.frames[f].manager == Manager::Balanced {
            let k = it.counter;
            it.counter += 1;
            return Ok(k % workers == rank);
        }
        Ok(true)
    }

    fn set_indices(&mut self, first: usize, it: &Iteration) {
        let levels = self.frames.len() - first;
        self.set_indices_to(first, it, levels);
    }

    /// Gives the indices of the span's first `levels` loops their values in `it`.
    fn set_indices_to(&mut self, first: usize, it: &Iteration, levels: usize) {
        let mut values = it.values.iter();
        for f in &self.frames[first..first + levels] {
            for (i, v) in f.indices.iter().zip(&mut values) {
                self.index_values[i.index()] = Some(*v);
            }
        }
    }

    fn save_indices(&self, first: usize) -> Saved {
        Saved(
            self.frames[first..]
                .iter()
                .flat_map(|f| f.indices.iter())
                .map(|i| (*i, self.index_values[i.index()]))
                .collect(),
        )
    }

    fn restore_indices(&mut self, saved: Saved) {
        for (i, v) in saved.0 {
            self.index_values[i.index()] = v;
        }
    }

    /// The innermost loop stepped (or started): its prediction, if any, follows.
    pub(super) fn loop_stepped(&mut self) {
        let n = self.frames.len();
        let Some(mut ahead) = self.frames.last_mut().and_then(|f| f.ahead.take()) else {
            return;
        };
        if !ahead.idle {
            let now = self.current_iteration(n - ahead.levels);
            ahead.consume(&now);
        }
        if let Some(f) = self.frames.last_mut() {
            f.ahead = Some(ahead);
        }
    }

    /// The innermost loop ended: a prediction reaching into the loop around it waits there
    /// for the loop's next run.
    pub(super) fn loop_ended(&mut self, frame: &mut Frame) {
        if let Some(ahead) = frame.ahead.take()
            && ahead.levels > 1
            && !ahead.upcoming.is_empty()
            && let Some(parent) = self.frames.last_mut()
        {
            parent.carried = Some((frame.start, ahead));
        }
    }

    /// A loop starts: it takes the prediction its previous run left in the loop around it.
    pub(super) fn loop_started(&mut self) {
        let n = self.frames.len();
        if n < 2 {
            return;
        }
        let start = self.frames[n - 1].start;
        match self.frames[n - 2].carried.take() {
            Some((s, ahead)) if s == start => {
                self.frames[n - 1].ahead = Some(ahead);
                self.loop_stepped();
            }
            other => self.frames[n - 2].carried = other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ahead(cursor: usize, upcoming: usize, exhausted: bool) -> Ahead {
        let it = Iteration {
            values: SmallVec::new(),
            seen: 0,
            counter: 0,
        };
        Ahead {
            levels: 1,
            upcoming: std::iter::repeat_n(it, upcoming).collect(),
            cursors: [(7, cursor)].into_iter().collect(),
            exhausted,
            idle: false,
        }
    }

    #[test]
    fn a_site_requests_a_quarter_of_its_depth_at_a_time() {
        // 64 ahead: nothing until 16 of them are used up.
        assert!(!ahead(63, 63, false).wants(7, 64));
        assert!(!ahead(49, 49, false).wants(7, 64));
        assert!(ahead(48, 48, false).wants(7, 64));
        // One ahead: every time the one is used.
        assert!(!ahead(1, 1, false).wants(7, 1));
        assert!(ahead(0, 0, false).wants(7, 1));
        // Another site has requested nothing yet.
        assert!(ahead(63, 63, false).wants(8, 64));
        // No iteration after the last one predicted: nothing to request.
        assert!(!ahead(10, 10, true).wants(7, 64));
        assert!(ahead(10, 20, true).wants(7, 64));
        assert!(!Ahead::idle().wants(7, 64));
    }
}
