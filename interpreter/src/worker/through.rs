//! Copies into temp blocks that only the next instruction reads: `t = s` then `x += t`, as
//! ACES4's CCSD(T) programs write `taaaiii[a,a1,a2,k1,ii,jj] = tpppp[a,a1,a2,k1]` then
//! `xaaaiii[a,a1,a2,k1,ii,jj] += taaaiii[a,a1,a2,k1,ii,jj]` some forty times, a quarter of the
//! job's time in copying and adding blocks of two million elements (docs/benchmarks.md,
//! "Temp copies read once, added straight from their source"). Where nothing else reads `t`
//! before its scope closes and its block is new, the worker adds `s` to `x` and skips both the
//! copy and the temp block.

use sial_bytecode::{ArrayKind, BlockRef, Op, Operand, Program, Sign};

/// The accumulate a copy feeds, when the copy at `pc` may be skipped (see [`Through::new`]).
pub(super) struct Step<'p> {
    pub(super) temp: &'p BlockRef,
    pub(super) src: &'p BlockRef,
    pub(super) dst: &'p BlockRef,
    pub(super) sign: Sign,
    pub(super) layout: &'p sial_bytecode::Layout,
}

/// Per instruction, whether it is such a copy.
pub(super) struct Through {
    copies: Vec<bool>,
}

impl Through {
    /// Marks each `t = s` (a block of a temp array `t`, in the same element order as `s`) whose
    /// next instruction is `x += t` or `x -= t` (the same block, in the same order), where no
    /// instruction after that touches an element of `t`'s array, calls a procedure, executes
    /// a special or returns before the innermost loop around them ends (its scope, where a new
    /// temp block dies), reading the rest of the body straight through as a superset of its
    /// paths (its jumps all go forward, out of the loop or to its end). Whether `t`'s block is
    /// new is known only when the copy runs ([`super::Worker`] checks).
    pub(super) fn new(program: &Program) -> Through {
        let copies = (0..program.code.len())
            .map(|pc| {
                Self::pair(program, pc)
                    .is_some_and(|s| Self::unread_after(program, pc + 2, s.temp.array.index()))
            })
            .collect();
        Through { copies }
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
        let kind = program.arrays.get(temp.array.index())?.kind;
        (kind == ArrayKind::Temp
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

    /// The copy at `pc` and the accumulate it feeds, where the copy may be skipped (if its
    /// temp block is new).
    pub(super) fn step<'p>(&self, program: &'p Program, pc: usize) -> Option<Step<'p>> {
        if self.copies.get(pc).copied().unwrap_or(false) {
            Self::pair(program, pc)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::program;

    /// The instructions `Through` marks in `body` (inside a pardo over `i`).
    fn marked(body: &str) -> usize {
        let source = format!(
            "sial through\naoindex i = 1:2\naoindex j = 1:2\ntemp t[i,j]\ntemp u[i,j]\nlocal x[i,j]\n\
             local y[i,j]\nscalar s\nproc p\n  u[i,j] = 1.0\nendproc p\nallocate x[*,*]\n\
             allocate y[*,*]\npardo i, j\n  y[i,j] = 2.0\n  x[i,j] = 0.0\n{body}\nendpardo i, j\n\
             endsial through\n"
        );
        let p = program(&source);
        let through = Through::new(&p);
        (0..p.code.len())
            .filter(|&pc| through.step(&p, pc).is_some())
            .count()
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
}
