//! Where the dimensions of an AO block lie among the basis functions, and which shells cover
//! them.
//!
//! ACES4's integral specials compute whole shell batches and copy them into the block without
//! clipping, so a segment boundary inside a shell makes them write outside the block. Here
//! every dimension must start and end on a shell boundary, or the special fails with a message
//! that names the block (every ACES4 job has shell-aligned AO segments).

use std::ops::Range;

use sial_superinstructions::special::{Arg, ArgKind, Context};

use super::basis::BasisSet;
use crate::args;

/// One dimension of an AO block: its first AO (0-based), its extent, and the shells that
/// exactly cover it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub offset: usize,
    pub extent: usize,
    pub shells: Range<usize>,
}

/// Checks that argument `k` is a block or a whole array of rank `rank`.
pub(crate) fn check_rank(arg: &Arg, k: usize, rank: usize) -> Result<(), String> {
    if !matches!(arg.kind, ArgKind::Block | ArgKind::WholeArray) || arg.shape.len() != rank {
        return Err(format!(
            "argument {} must be a block of rank {rank} over AO indices, got {} (rank {})",
            k + 1,
            arg.describe(),
            arg.shape.len()
        ));
    }
    if arg.data.len() != arg.shape.iter().product::<usize>() {
        return Err(format!(
            "argument {} ({}) holds {} elements, not the {} of its shape {:?}",
            k + 1,
            arg.describe(),
            arg.data.len(),
            arg.shape.iter().product::<usize>(),
            arg.shape
        ));
    }
    Ok(())
}

/// The first AO (0-based) of every dimension of argument `k`: from the runtime's segment
/// tables for a block; for a whole array, that of its declared first segment (ACES4 passes
/// segment number 1 for whole arrays, which is the same for the arrays its programs pass).
fn ao_offsets(ctx: &dyn Context, arg: &Arg, k: usize) -> Result<Vec<usize>, String> {
    if arg.kind == ArgKind::Block {
        return args::all_offsets(ctx, arg, k);
    }
    (0..arg.shape.len())
        .map(|d| {
            let first = ctx.declared_lower(&arg.name, d).unwrap_or(1);
            ctx.global_offset(&arg.name, d, first).ok_or_else(|| {
                format!(
                    "argument {}: cannot locate dimension {} of {} among the basis functions \
                     (it must be an AO index)",
                    k + 1,
                    d + 1,
                    arg.describe()
                )
            })
        })
        .collect()
}

/// The spans of all dimensions of argument `k`, a block of rank `rank` over AO indices.
pub(crate) fn spans(
    ctx: &dyn Context,
    basis: &BasisSet,
    arg: &Arg,
    k: usize,
    rank: usize,
) -> Result<Vec<Span>, String> {
    check_rank(arg, k, rank)?;
    let offsets = ao_offsets(ctx, arg, k)?;
    offsets
        .iter()
        .zip(&arg.shape)
        .enumerate()
        .map(|(d, (&offset, &extent))| {
            span(basis, offset, extent).map_err(|e| {
                format!(
                    "argument {} ({}), dimension {}: {e}",
                    k + 1,
                    arg.describe(),
                    d + 1
                )
            })
        })
        .collect()
}

/// The shells covering AOs `offset .. offset + extent`, which must start and end on shell
/// boundaries.
pub(crate) fn span(basis: &BasisSet, offset: usize, extent: usize) -> Result<Span, String> {
    let end = offset + extent;
    if end > basis.nao {
        return Err(format!(
            "AOs {}..{end} reach beyond the {} basis functions of the job",
            offset + 1,
            basis.nao
        ));
    }
    let boundary = |ao: usize| -> Result<usize, String> {
        let s = basis.shells.partition_point(|s| s.end() <= ao);
        match basis.shells.get(s) {
            Some(shell) if shell.first != ao => Err(format!(
                "AOs {}..{end} do not {} on a shell boundary (shell {} covers AOs {}..{}); \
                 segments must start and end on shell boundaries",
                offset + 1,
                if ao == offset { "start" } else { "end" },
                s + 1,
                shell.first + 1,
                shell.end()
            )),
            _ => Ok(s),
        }
    };
    let first = boundary(offset)?;
    let last = boundary(end)?;
    Ok(Span {
        offset,
        extent,
        shells: first..last,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{Case, ao_block, place};
    use super::*;

    #[test]
    fn spans_follow_the_shells() {
        let case = Case::load("water_321g");
        let basis = BasisSet::from_setup(&case.context()).expect("basis");
        // Shells end at 3, 9, 11, 13.
        assert_eq!(span(&basis, 0, 13).map(|s| s.shells), Ok(0..4));
        assert_eq!(span(&basis, 3, 6).map(|s| s.shells), Ok(1..2));
        assert_eq!(span(&basis, 9, 4).map(|s| s.shells), Ok(2..4));
        assert_eq!(span(&basis, 13, 0).map(|s| s.shells), Ok(4..4));
        let e = span(&basis, 2, 4).expect_err("starts inside the first shell");
        assert!(e.contains("AOs 3..6 do not start on a shell boundary (shell 1 covers AOs 1..3)"));
        let e = span(&basis, 3, 4).expect_err("ends inside the p shell");
        assert!(
            e.contains("do not end on a shell boundary (shell 2 covers AOs 4..9)"),
            "{e}"
        );
        let e = span(&basis, 9, 5).expect_err("too far");
        assert!(
            e.contains("AOs 10..14 reach beyond the 13 basis functions"),
            "{e}"
        );
    }

    #[test]
    fn blocks_and_whole_arrays() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        let basis = BasisSet::from_setup(&ctx).expect("basis");
        place(&mut ctx, "aoint", 4, &[3, 6, 4]);
        let b = ao_block("aoint", &[1, 2, 3, 2], &[3, 6, 4]);
        let s = spans(&ctx, &basis, &b, 0, 4).expect("spans");
        let shells: Vec<_> = s.iter().map(|s| s.shells.clone()).collect();
        assert_eq!(shells, [0..1, 1..2, 2..4, 1..2]);
        // A misaligned layout is reported with the block's name.
        place(&mut ctx, "bad", 2, &[4, 9]);
        let b = ao_block("bad", &[1, 2], &[4, 9]);
        let e = spans(&ctx, &basis, &b, 0, 2).expect_err("misaligned");
        assert!(
            e.starts_with("argument 1 (bad[1,2]), dimension 1: AOs 1..4 do not end"),
            "{e}"
        );
        // Wrong rank, kind, and unknown placement.
        let e = spans(&ctx, &basis, &b, 0, 4).expect_err("rank");
        assert!(e.contains("must be a block of rank 4 over AO indices, got bad[1,2] (rank 2)"));
        let e = spans(&ctx, &basis, &Arg::scalar("x", 1.0), 2, 2).expect_err("scalar");
        assert!(e.starts_with("argument 3 must be a block of rank 2"), "{e}");
        let lost = ao_block("lost", &[1, 1], &[13]);
        let e = spans(&ctx, &basis, &lost, 0, 2).expect_err("no segment table");
        assert!(e.contains("cannot locate dimension 1 of lost[1,1]"), "{e}");
        let mut short = ao_block("aoint", &[1, 1, 1, 1], &[3, 6, 4]);
        short.data.to_mut().pop();
        let e = spans(&ctx, &basis, &short, 0, 4).expect_err("short data");
        assert!(e.contains("holds 80 elements, not the 81"), "{e}");
        // A whole static array starts at its declared first segment.
        place(&mut ctx, "oed_ovl", 2, &[3, 6, 4]);
        let w = Arg::whole_array("oed_ovl", vec![13, 13], vec![0.0; 169]);
        let s = spans(&ctx, &basis, &w, 1, 2).expect("whole array");
        assert_eq!(s[0].shells, 0..4);
        let w = Arg::whole_array("nowhere", vec![13, 13], vec![0.0; 169]);
        let e = spans(&ctx, &basis, &w, 1, 2).expect_err("unplaced whole array");
        assert!(
            e.contains("argument 2: cannot locate dimension 1 of nowhere"),
            "{e}"
        );
    }
}
