//! The single GEMM call behind every contraction, isolated so the library can be swapped.
//!
//! We use faer's `matmul` directly on column-major slices: a stored matrix may be used as itself
//! or transposed at no cost (faer takes arbitrary strides and packs internally), which is what
//! lets [`crate::contract`] skip permutations whenever an operand is already `[free, contracted]`
//! or `[contracted, free]`. Where the left operand is large, a sequential GEMM is split into
//! chunks of the result's rows ([`CHUNK_BYTES`]); a contraction whose GEMM [`splits`] copies
//! a right operand stored row-major into columns first (docs/benchmarks.md, "GEMMs in chunks
//! of rows").

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
    in_row_chunks(c, accum, a, b, Par::Seq);
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
    let c = MatMut::from_column_major_slice_mut(c, m, n);
    let accum = if accumulate {
        Accum::Add
    } else {
        Accum::Replace
    };
    let b = if b.transposed {
        MatRef::from_column_major_slice(b.data, n, k).transpose()
    } else {
        MatRef::from_column_major_slice(b.data, k, n)
    };
    in_row_chunks(c, accum, a, b, par.to_faer());
}

/// `c = a·b` on one thread for column-major `a` (`m×k`), `b` (`k×n`) and `c` (`m×n`), as
/// every contraction's GEMM runs: the reference of the contraction benchmark.
///
/// # Panics
/// If a slice's length is not its matrix's size.
pub fn column_major_gemm(c: &mut [f64], a: &[f64], b: &[f64], [m, n, k]: [usize; 3]) {
    in_row_chunks(
        MatMut::from_column_major_slice_mut(c, m, n),
        Accum::Replace,
        MatRef::from_column_major_slice(a, m, k),
        MatRef::from_column_major_slice(b, k, n),
        Par::Seq,
    );
}

/// The most bytes of a GEMM's left operand (its rows by the up to [`DEPTH`] summed indices
/// faer's kernels take at a time) one sequential call is given.
///
/// Below a threshold of rows set by the L2 size, faer's x86 kernels do not block the rows of
/// a column-major result: for every few columns they read the whole left operand again. Where
/// that operand is near the L2's size it comes from L3 every time, and 504³ ran at 27–44
/// GF/s against 49–76 GF/s in chunks of rows (docs/benchmarks.md, "GEMMs in chunks of rows").
const CHUNK_BYTES: usize = crate::L2_BYTES / 2;

/// Summed indices faer's kernels take per pass.
const DEPTH: usize = 512;

/// Bytes of an `m×k` left operand faer's kernels take at a time.
fn left_bytes(m: usize, k: usize) -> usize {
    m * k.min(DEPTH) * std::mem::size_of::<f64>()
}

/// Whether a sequential GEMM with an `m×k` left operand is split into chunks of its rows.
/// Each chunk reads the whole right operand: stored row-major, across its rows, a cache line
/// per summed index for every few columns.
pub(crate) fn splits(m: usize, k: usize) -> bool {
    left_bytes(m, k) > CHUNK_BYTES
}

/// Whether [`in_row_chunks`] splits a GEMM with an `m×k` left operand.
fn in_chunks(m: usize, k: usize, par: Par) -> bool {
    matches!(par, Par::Seq) && splits(m, k)
}

/// `c = a·b` or `c += a·b` by faer; a sequential call on a column-major `c` (a row-major one
/// is its transpose) is split over chunks of `c`'s rows where the left operand exceeds
/// [`CHUNK_BYTES`].
fn in_row_chunks(
    mut c: MatMut<'_, f64>,
    accum: Accum,
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    par: Par,
) {
    if c.row_stride() != 1 && c.col_stride() == 1 {
        // faer computes a row-major result as its transpose, `Cᵀ = Bᵀ·Aᵀ`.
        return in_row_chunks(c.transpose_mut(), accum, b.transpose(), a.transpose(), par);
    }
    let (m, k) = (a.nrows(), a.ncols());
    if !in_chunks(m, k, par) {
        matmul(c, accum, a, b, 1.0, par);
        return;
    }
    // Chunks of equal size, on whole cache lines of a column.
    let chunks = left_bytes(m, k).div_ceil(CHUNK_BYTES);
    let rows = m.div_ceil(chunks).next_multiple_of(8);
    let mut r = 0;
    while r < m {
        let h = rows.min(m - r);
        matmul(
            c.as_mut().subrows_mut(r, h),
            accum,
            a.subrows(r, h),
            b,
            1.0,
            Par::Seq,
        );
        r += h;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::random_vec;

    /// A left operand over [`CHUNK_BYTES`] (3 chunks, the last one short), a result column-major
    /// or row-major, written or added to: every element as faer computes it in one call.
    #[test]
    fn chunks_of_rows_give_the_one_call_result() {
        let (m, n, k) = (301, 37, 600);
        assert!(m * DEPTH * 8 > 2 * CHUNK_BYTES);
        let a = random_vec(m * k, 1);
        let b = random_vec(k * n, 2);
        let c0 = random_vec(m * n, 3);
        fn view(c: &mut [f64], (m, n): (usize, usize), row_major: bool) -> MatMut<'_, f64> {
            if row_major {
                MatMut::from_column_major_slice_mut(c, n, m).transpose_mut()
            } else {
                MatMut::from_column_major_slice_mut(c, m, n)
            }
        }
        for row_major in [false, true] {
            for accum in [Accum::Replace, Accum::Add] {
                let am = MatRef::from_column_major_slice(&a, m, k);
                let bm = MatRef::from_column_major_slice(&b, k, n);
                let (mut whole, mut chunked) = (c0.clone(), c0.clone());
                matmul(
                    view(&mut whole, (m, n), row_major),
                    accum,
                    am,
                    bm,
                    1.0,
                    Par::Seq,
                );
                in_row_chunks(
                    view(&mut chunked, (m, n), row_major),
                    accum,
                    am,
                    bm,
                    Par::Seq,
                );
                assert_eq!(whole, chunked, "row-major {row_major}, {accum:?}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Shapes on both sides of the split, results of either order, written or added to,
        /// right operands stored or transposed: every element as faer's one call gives it.
        #[test]
        fn any_gemm_gives_the_one_call_result(
            m in 1usize..300,
            n in 1usize..24,
            k in 1usize..700,
            row_major in proptest::bool::ANY,
            add in proptest::bool::ANY,
            b_transposed in proptest::bool::ANY,
            seed in 0u64..1000,
        ) {
            let a = random_vec(m * k, seed);
            let b = random_vec(k * n, seed + 1);
            let c0 = random_vec(m * n, seed + 2);
            let accum = if add { Accum::Add } else { Accum::Replace };
            let bm = if b_transposed {
                MatRef::from_column_major_slice(&b, n, k).transpose()
            } else {
                MatRef::from_column_major_slice(&b, k, n)
            };
            let am = MatRef::from_column_major_slice(&a, m, k);
            let (mut whole, mut split) = (c0.clone(), c0.clone());
            if row_major {
                matmul(MatMut::from_column_major_slice_mut(&mut whole, n, m).transpose_mut(), accum, am, bm, 1.0, Par::Seq);
                in_row_chunks(MatMut::from_column_major_slice_mut(&mut split, n, m).transpose_mut(), accum, am, bm, Par::Seq);
            } else {
                matmul(MatMut::from_column_major_slice_mut(&mut whole, m, n), accum, am, bm, 1.0, Par::Seq);
                let stored = |data, transposed| Stored { data, transposed };
                gemm(&mut split, Dims { m, n, k }, stored(&a, false), stored(&b, b_transposed), add, Parallelism::Sequential);
            }
            proptest::prop_assert_eq!(whole, split);
        }
    }

    /// A GEMM split in chunks reading its right operand transposed: the result is faer's one
    /// call on the operand as stored.
    #[test]
    fn a_transposed_right_operand_gives_the_one_call_result() {
        let (m, n, k) = (301, 37, 600);
        assert!(in_chunks(m, k, Par::Seq));
        let a = random_vec(m * k, 4);
        let b = random_vec(k * n, 5);
        let mut whole = vec![0.0; m * n];
        matmul(
            MatMut::from_column_major_slice_mut(&mut whole, m, n),
            Accum::Replace,
            MatRef::from_column_major_slice(&a, m, k),
            MatRef::from_column_major_slice(&b, n, k).transpose(),
            1.0,
            Par::Seq,
        );
        let mut c = vec![1.0; m * n];
        let stored = |data, transposed| Stored { data, transposed };
        let dims = Dims { m, n, k };
        gemm(
            &mut c,
            dims,
            stored(&a, false),
            stored(&b, true),
            false,
            Parallelism::Sequential,
        );
        assert_eq!(whole, c);
    }
}
