//! Temp blocks that only the next instruction reads. ACES4's CCSD(T) programs write
//! `tpppp[a,a1,a2,k1] = VSaaai[a,a3,a2,k1] * tpp[a3,a1]`, then `taaaiii[a,a1,a2,k1,ii,jj] =
//! tpppp[a,a1,a2,k1]` and `xaaaiii[a,a1,a2,k1,ii,jj] += taaaiii[a,a1,a2,k1,ii,jj]` some forty
//! times, on blocks of two million elements. Where nothing else reads the temps before their
//! scope closes and their blocks are new, the worker skips them:
//! - a copy `t = s` then `x += t` runs as `x += s`: no copy, no temp block (docs/benchmarks.md,
//!   "Temp copies read once, added straight from their source");
//! - a contraction `t = l * r` then `x += t` (or `x += u` after `u = t`) runs as `x += l * r`:
//!   the contraction adds its sums to `x`'s elements as it stores them, where it would have
//!   stored them into `t`, and `x` is not read and written a second time (docs/benchmarks.md,
//!   "Contractions added straight into their sum");
//! - a copy `d = t` (same element order) or a `put x = t` / `put x += t` whose source `t` is
//!   a temp block of the loop body that nothing reads afterwards takes `t`'s data instead of
//!   copying it (docs/benchmarks.md, "Temp blocks read last handed on, not copied").

use sial_bytecode::{ArrayKind, BlockRef, Op, Operand, Program, PutOp, PutValue, Sign};

/// The accumulate a copy feeds, when the copy at `pc` may be skipped (see [`Through::new`]).
pub(super) struct Step<'p> {
    pub(super) temp: &'p BlockRef,
    pub(super) src: &'p BlockRef,
    pub(super) dst: &'p BlockRef,
    pub(super) sign: Sign,
    pub(super) layout: &'p sial_bytecode::Layout,
}

/// A contraction `result = left * right` whose result only `dst += result` reads, directly or
/// through the copy `copy = result` (see [`Through::new`]).
pub(super) struct Product<'p> {
    pub(super) result: &'p BlockRef,
    pub(super) left: &'p BlockRef,
    pub(super) right: &'p BlockRef,
    pub(super) copy: Option<&'p BlockRef>,
    pub(super) dst: &'p BlockRef,
    /// The instructions it stands for (2, or 3 with the copy).
    pub(super) len: usize,
}

/// What the worker may fold at an instruction.
pub(super) enum Fold<'p> {
    Copy(Step<'p>),
    Product(Product<'p>),
    /// The instruction may take the data of its temp source where the block dies with the
    /// innermost scope.
    Move(Move<'p>),
}

/// A copy or a `put` whose source is a temp block nothing reads afterwards (see
/// [`Through::new`]).
pub(super) enum Move<'p> {
    /// `dst = src`, in the same element order.
    Copy {
        dst: &'p BlockRef,
        src: &'p BlockRef,
    },
    /// `put dst = src` or `put dst += src` (`value` is the block `src`).
    Put {
        dst: &'p BlockRef,
        op: PutOp,
        value: &'p PutValue,
        src: &'p BlockRef,
    },
}

impl Move<'_> {
    pub(super) fn src(&self) -> &BlockRef {
        match self {
            Move::Copy { src, .. } | Move::Put { src, .. } => src,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mark {
    None,
    Copy,
    Product,
    Move,
}

/// Per instruction, whether it starts such a fold.
pub(super) struct Through {
    marks: Vec<Mark>,
}

impl Through {
    /// Marks each `t = s` (a block of a temp array `t`, in the same element order as `s`) whose
    /// next instruction is `x += t` or `x -= t` (the same block, in the same order), and each
    /// `t = l * r` (a temp `t`) whose next instruction is `x += t`, or is such a copy `u = t`
    /// itself marked, where `x` is neither operand, and where no instruction after them touches
    /// an element of the temps' arrays, calls a procedure, executes a special or returns before
    /// the innermost loop around them ends (their scope, where a new temp block dies), reading
    /// the rest of the body straight through as a superset of its paths (its jumps all go
    /// forward, out of the loop or to its end). Whether the temp blocks are new is known only
    /// when the instructions run ([`super::Worker`] checks).
    pub(super) fn new(program: &Program) -> Through {
        let mut marks: Vec<Mark> = (0..program.code.len())
            .map(|pc| {
                let copy = Self::pair(program, pc)
                    .is_some_and(|s| Self::unread_after(program, pc + 2, s.temp.array.index()));
                if copy { Mark::Copy } else { Mark::None }
            })
            .collect();
        for pc in 0..marks.len() {
            let unread =
                |p: &Product<'_>| Self::unread_after(program, pc + p.len, p.result.array.index());
            if Self::product(program, pc, &marks).is_some_and(|p| unread(&p)) {
                marks[pc] = Mark::Product;
            }
        }
        for (pc, mark) in marks.iter_mut().enumerate() {
            let last = Self::moved(program, pc)
                .is_some_and(|m| Self::unread_after(program, pc + 1, m.src().array.index()));
            if *mark == Mark::None && last {
                *mark = Mark::Move;
            }
        }
        Through { marks }
    }

    /// A copy `d = t` in the same element order (blocks of other arrays) or a `put` of a temp
    /// block `t`, the rest of the body aside (see [`Fold::Move`]).
    fn moved(program: &Program, pc: usize) -> Option<Move<'_>> {
        let m = match &program.code.get(pc)?.op {
            Op::BlockCopy {
                dst: Operand::Block(dst),
                src: Operand::Block(src),
                layout,
            } if layout.is_identity() && dst.array != src.array => Move::Copy { dst, src },
            Op::Put {
                dst,
                op,
                value: value @ PutValue::Block(src),
            } => Move::Put {
                dst,
                op: *op,
                value,
                src,
            },
            _ => return None,
        };
        Self::is_temp(program, m.src()).then_some(m)
    }

    /// The copy at `pc` and the accumulate after it, if they have the form of [`Through::new`].
    fn pair(program: &Program, pc: usize) -> Option<Step<'_>> {
        let (
            Op::BlockCopy {
                dst: Operand::Block(temp),
                src: Operand::Block(src),
                layout: copied,
            },
            Op::BlockAccumulate {
                dst,
                src: added,
                sign,
                layout,
            },
        ) = (&program.code.get(pc)?.op, &program.code.get(pc + 1)?.op)
        else {
            return None;
        };
        (Self::is_temp(program, temp)
            && added == temp
            && copied.is_identity()
            && layout.is_identity()
            && src.array != temp.array
            && dst.array != temp.array)
            .then_some(Step {
                temp,
                src,
                dst,
                sign: *sign,
                layout,
            })
    }

    /// The contraction at `pc` and what adds its result, if they have the form of
    /// [`Through::new`] (`marks`: the copies already marked), the rest of the body aside.
    fn product<'p>(program: &'p Program, pc: usize, marks: &[Mark]) -> Option<Product<'p>> {
        let Op::BlockContract {
            dst: result,
            left,
            right,
            accumulate: false,
            ..
        } = &program.code.get(pc)?.op
        else {
            return None;
        };
        if !Self::is_temp(program, result) {
            return None;
        }
        let (copy, dst, len) = match &program.code.get(pc + 1)?.op {
            Op::BlockAccumulate {
                dst,
                src,
                sign: Sign::Plus,
                layout,
            } if src == result && layout.is_identity() => (None, dst, 2),
            _ => {
                let step = Self::pair(program, pc + 1)?;
                let marked = marks.get(pc + 1) == Some(&Mark::Copy);
                if !marked || step.src != result || step.sign != Sign::Plus {
                    return None;
                }
                (Some(step.temp), step.dst, 3)
            }
        };
        let apart = ![result.array, left.array, right.array].contains(&dst.array);
        apart.then_some(Product {
            result,
            left,
            right,
            copy,
            dst,
            len,
        })
    }

    fn is_temp(program: &Program, r: &BlockRef) -> bool {
        program
            .arrays
            .get(r.array.index())
            .is_some_and(|a| a.kind == ArrayKind::Temp)
    }

    /// Whether the instructions from `from` to the end of the innermost loop around them leave
    /// array `array` alone (see [`Through::new`]).
    fn unread_after(program: &Program, from: usize, array: usize) -> bool {
        let mut depth = 0usize;
        for (pc, op) in program.code.iter().map(|i| &i.op).enumerate().skip(from) {
            match op {
                Op::DoStart { .. } | Op::DoInStart { .. } | Op::PardoStart { .. } => depth += 1,
                Op::LoopEnd { .. } if depth == 0 => return true,
                Op::LoopEnd { .. } => depth -= 1,
                Op::Call { .. } | Op::Return | Op::End | Op::Stop | Op::Execute { .. } => {
                    return false;
                }
                Op::Jump { target } | Op::JumpUnless { target, .. } if (*target as usize) < pc => {
                    return false;
                }
                _ => {}
            }
            let effects = program.effects(op);
            let touches = effects
                .uses
                .iter()
                .any(|(t, _)| t.array().is_some_and(|a| a.index() == array))
                || effects
                    .exprs
                    .iter()
                    .any(|&e| program.expr_blocks(e).any(|b| b.array.index() == array));
            if touches {
                return false;
            }
        }
        false
    }

    /// The fold that starts at `pc`, where it may be run (if its temp blocks are new): the
    /// marks say so, so only the instructions' form is read again.
    pub(super) fn step<'p>(&self, program: &'p Program, pc: usize) -> Option<Fold<'p>> {
        match self.marks.get(pc)? {
            Mark::None => None,
            Mark::Copy => Self::pair(program, pc).map(Fold::Copy),
            Mark::Product => Self::product(program, pc, &self.marks).map(Fold::Product),
            Mark::Move => Self::moved(program, pc).map(Fold::Move),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::program;

    /// The copies `Through` marks in `body` (inside a pardo over `i`).
    fn marked(body: &str) -> usize {
        marks(body).0
    }

    /// The copies and the contractions `Through` marks in `body` (inside a pardo over `i`).
    fn marks(body: &str) -> (usize, usize) {
        let (copies, products, _) = folds(body);
        (copies, products)
    }

    /// The instructions `Through` marks as taking their temp source's data in `body`.
    fn moves(body: &str) -> usize {
        folds(body).2
    }

    /// The copies, the contractions and the moves `Through` marks in `body` (inside a pardo
    /// over `i`).
    fn folds(body: &str) -> (usize, usize, usize) {
        let source = format!(
            "sial through\naoindex i = 1:2\naoindex j = 1:2\naoindex k = 1:2\ntemp t[i,j]\n\
             temp u[i,j]\nlocal x[i,j]\nlocal y[i,j]\nlocal a[i,j]\ndistributed d[i,j]\n\
             scalar s\nproc p\nu[i,j] = 1.0\nendproc p\nallocate x[*,*]\nallocate y[*,*]\n\
             allocate a[*,*]\npardo i, j\n  y[i,j] = 2.0\n  x[i,j] = 0.0\n{body}\n\
             endpardo i, j\nendsial through\n"
        );
        let p = program(&source);
        let through = Through::new(&p);
        let mut counts = (0, 0, 0);
        for fold in (0..p.code.len()).filter_map(|pc| through.step(&p, pc)) {
            match fold {
                Fold::Copy(_) => counts.0 += 1,
                Fold::Product(_) => counts.1 += 1,
                Fold::Move(_) => counts.2 += 1,
            }
        }
        counts
    }

    #[test]
    fn copies_and_puts_that_read_a_temp_last_are_marked() {
        assert_eq!(moves("  t[i,j] = 3.0\n  x[i,j] = t[i,j]"), 1);
        assert_eq!(moves("  t[i,j] = 3.0\n  put d[i,j] = t[i,j]"), 1);
        assert_eq!(
            moves("  t[i,j] = 3.0\n  put d[i,j] += t[i,j]\n  s = 1.0"),
            1
        );
        // The copy that an accumulate reads next is the other fold's.
        assert_eq!(folds("  t[i,j] = y[i,j]\n  x[i,j] += t[i,j]"), (1, 0, 0));
    }

    #[test]
    fn copies_and_puts_of_temps_read_again_or_not_temps_are_not() {
        // Read again, written again, or reachable by a procedure.
        assert_eq!(
            moves("  t[i,j] = 3.0\n  x[i,j] = t[i,j]\n  s = t[i,j] * t[i,j]"),
            0
        );
        assert_eq!(
            moves("  t[i,j] = 3.0\n  put d[i,j] = t[i,j]\n  t[i,j] = 1.0"),
            0
        );
        assert_eq!(moves("  t[i,j] = 3.0\n  x[i,j] = t[i,j]\n  call p"), 0);
        // A permuted copy, a copy within one array, a source that is not a temp.
        assert_eq!(moves("  t[i,j] = 3.0\n  x[i,j] = t[j,i]"), 0);
        assert_eq!(moves("  t[i,j] = 3.0\n  t[j,i] = t[i,j]"), 0);
        assert_eq!(moves("  x[i,j] = y[i,j]\n  put d[i,j] = y[i,j]"), 0);
    }

    #[test]
    fn a_copy_only_the_next_accumulate_reads_is_marked() {
        assert_eq!(marked("  t[i,j] = y[i,j]\n  x[i,j] += t[i,j]"), 1);
        assert_eq!(
            marked("  t[i,j] = y[i,j]\n  x[i,j] -= t[i,j]\n  s = 1.0"),
            1
        );
        // Other temps and branches after it do not matter.
        assert_eq!(
            marked(
                "  t[i,j] = y[i,j]\n  x[i,j] += t[i,j]\n  if s > 0.0\n    u[i,j] = y[i,j]\n  endif"
            ),
            1
        );
    }

    #[test]
    fn copies_read_again_or_beyond_sight_are_not() {
        // Read again in the body.
        assert_eq!(
            marked("  t[i,j] = y[i,j]\n  x[i,j] += t[i,j]\n  s = t[i,j] * t[i,j]"),
            0
        );
        // Written again (the block may be one an outer scope made).
        assert_eq!(
            marked("  t[i,j] = y[i,j]\n  x[i,j] += t[i,j]\n  t[i,j] = 3.0"),
            0
        );
        // A procedure or a special could reach it.
        assert_eq!(marked("  t[i,j] = y[i,j]\n  x[i,j] += t[i,j]\n  call p"), 0);
        // Not the next instruction, or another block, or not added.
        assert_eq!(
            marked("  t[i,j] = y[i,j]\n  s = 1.0\n  x[i,j] += t[i,j]"),
            0
        );
        assert_eq!(marked("  t[i,j] = y[i,j]\n  x[i,j] += u[i,j]"), 0);
        assert_eq!(marked("  t[i,j] = y[i,j]\n  x[i,j] = t[i,j]"), 0);
        // A permuted copy.
        assert_eq!(marked("  t[i,j] = y[j,i]\n  x[i,j] += t[i,j]"), 0);
        // Not a temp.
        assert_eq!(marked("  y[i,j] = x[i,j]\n  x[i,j] += y[i,j]"), 0);
    }

    #[test]
    fn a_contraction_only_the_next_accumulate_reads_is_marked() {
        let body = |b: &str| format!("  do k\n{b}\n  enddo k");
        assert_eq!(
            marks(&body("  t[i,j] = a[i,k] * y[k,j]\n  x[i,j] += t[i,j]")),
            (0, 1)
        );
        // Through a copy, itself marked.
        assert_eq!(
            marks(&body(
                "  t[i,j] = a[i,k] * y[k,j]\n  u[i,j] = t[i,j]\n  x[i,j] += u[i,j]"
            )),
            (1, 1)
        );
    }

    #[test]
    fn contractions_read_again_subtracted_or_read_by_their_sum_are_not() {
        let body = |b: &str| format!("  do k\n{b}\n  enddo k");
        // Read again.
        assert_eq!(
            marks(&body(
                "  t[i,j] = a[i,k] * y[k,j]\n  x[i,j] += t[i,j]\n  s = t[i,j] * t[i,j]"
            )),
            (0, 0)
        );
        // Subtracted: the contraction only adds.
        assert_eq!(
            marks(&body("  t[i,j] = a[i,k] * y[k,j]\n  x[i,j] -= t[i,j]")),
            (0, 0)
        );
        // The sum is an operand of the contraction.
        assert_eq!(
            marks(&body("  t[i,j] = x[i,k] * y[k,j]\n  x[i,j] += t[i,j]")),
            (0, 0)
        );
        // Through a copy read again.
        assert_eq!(
            marks(&body(
                "  t[i,j] = a[i,k] * y[k,j]\n  u[i,j] = t[i,j]\n  x[i,j] += u[i,j]\n  s = u[i,j] * u[i,j]"
            )),
            (0, 0)
        );
        // Into a block that is not a temp's.
        assert_eq!(
            marks(&body("  y[i,j] = a[i,k] * x[k,j]\n  a[i,j] += y[i,j]")),
            (0, 0)
        );
    }
}
