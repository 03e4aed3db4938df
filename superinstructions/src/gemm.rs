//! The single GEMM call behind every contraction, isolated so the library can be swapped.
//!
//! We use faer's `matmul` directly on column-major slices: a stored matrix may be used as itself
//! or transposed at no cost (faer takes arbitrary strides and packs internally), which is what
//! lets [`crate::contract`] skip permutations whenever an operand is already `[free, contracted]`
//! or `[contracted, free]`.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use std::num::NonZeroUsize;

/// How many threads a GEMM may use.
///
/// Sequential by default: in SIAL every worker is already one thread (or one MPI process) per
/// core, so a threaded GEMM would oversubscribe. A runtime with fewer workers than cores may
/// choose `Threads`, which runs on the global rayon pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Parallelism {
    /// One thread.
    #[default]
    Sequential,
    /// Split the GEMM over this many rayon tasks.
    Threads(NonZeroUsize),
}

impl Parallelism {
    fn to_faer(self) -> Par {
        match self {
            Parallelism::Sequential => Par::Seq,
            Parallelism::Threads(n) => Par::Rayon(n),
        }
    }
}

/// A column-major matrix in a slice, used as stored or transposed.
#[derive(Clone, Copy)]
pub(crate) struct Stored<'a> {
    pub data: &'a [f64],
    /// If true the slice holds the transpose of the matrix wanted.
    pub transposed: bool,
}

/// GEMM dimensions: `C (m×n) = A (m×k) · B (k×n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dims {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// Where a matrix lies in a slice whose first element is element `(0, 0)`: one of its two
/// dimensions has unit stride and the other stride `ld`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// Rows have unit stride (element `(i, j)` at `i + j·ld`); otherwise element `(i, j)` is at
    /// `i·ld + j`.
    pub rows_unit: bool,
    pub ld: usize,
}

/// `c = a·b` (or `c += a·b` when `accumulate`) on strided views: `c` is `m×n`, `a` `m×k`, `b`
/// `k×n`.
///
/// Preconditions (guaranteed by the batched contraction plan): every view's last element lies
/// inside its slice; faer asserts it.
pub(crate) fn gemm_views(
    c: (&mut [f64], View),
    dims: Dims,
    a: (&[f64], View),
    b: (&[f64], View),
    accumulate: bool,
) {
    let Dims { m, n, k } = dims;
    let a = mat_ref(a, m, k);
    let b = mat_ref(b, k, n);
    let (cd, cv) = c;
    let c = if cv.rows_unit {
        MatMut::from_column_major_slice_with_stride_mut(cd, m, n, cv.ld)
    } else {
        MatMut::from_column_major_slice_with_stride_mut(cd, n, m, cv.ld).transpose_mut()
    };
    let accum = if accumulate {
        Accum::Add
    } else {
        Accum::Replace
    };
    matmul(c, accum, a, b, 1.0, Par::Seq);
}

fn mat_ref((data, v): (&[f64], View), rows: usize, cols: usize) -> MatRef<'_, f64> {
    if v.rows_unit {
        MatRef::from_column_major_slice_with_stride(data, rows, cols, v.ld)
    } else {
        MatRef::from_column_major_slice_with_stride(data, cols, rows, v.ld).transpose()
    }
}

/// `c = a·b` (or `c += a·b` when `accumulate`), `c` column-major `m×n`.
///
/// Preconditions (guaranteed by `ContractionPlan`): `c.len() == m*n`, `a.data.len() == m*k`,
/// `b.data.len() == k*n`; faer asserts them, so a violation is a bug here, not a caller error.
pub(crate) fn gemm(
    c: &mut [f64],
    dims: Dims,
    a: Stored<'_>,
    b: Stored<'_>,
    accumulate: bool,
    par: Parallelism,
) {
    let Dims { m, n, k } = dims;
    let a = if a.transposed {
        MatRef::from_column_major_slice(a.data, k, m).transpose()
    } else {
        MatRef::from_column_major_slice(a.data, m, k)
    };
    let b = if b.transposed {
        MatRef::from_column_major_slice(b.data, n, k).transpose()
    } else {
        MatRef::from_column_major_slice(b.data, k, n)
    };
    let c = MatMut::from_column_major_slice_mut(c, m, n);
    let accum = if accumulate {
        Accum::Add
    } else {
        Accum::Replace
    };
    matmul(c, accum, a, b, 1.0, par.to_faer());
}
