//! Dense linear algebra on static arrays and blocks, with ACES4's conventions, for the SCF, CIS
//! and EOM programs:
//!
//! | special | what |
//! |---|---|
//! | `eigen_calc A V` | symmetric eigenproblem: `A` becomes diag(eigenvalues, ascending), `V` the eigenvectors |
//! | `eigen_calc_sqr_inv S X n` | canonical orthogonalisation: `S` becomes diag(1/√s), `X` the eigenvectors, `n` the number of dropped linear dependencies |
//! | `gen_eigen_calc A L R e` | non-symmetric eigenproblem of the EOM Davidson: left and right eigenvectors, real parts of the eigenvalues |
//! | `compute_diis B` | Pulay's DIIS coefficients onto the diagonal of `B` |
//! | `return_diagonal T s`, `return_diagonal_elements T` | keep the diagonal of a block |
//! | `invert_diagonal T D`, `invert_diagonal_asym T D` | divide by a block of denominators |
//!
//! ACES4 calls LAPACK (`dsyev`, `dgeev`, `dgesv`); we use `faer`. Results agree to rounding, except
//! inside exactly degenerate eigenspaces, where any orthonormal basis is as good as LAPACK's (the
//! energies do not depend on it). Everything ACES4 does around LAPACK — the sign rule for
//! eigenvectors, its own (unstable) quicksort, the linear-dependence threshold, the DIIS border —
//! is reproduced exactly, because it decides the column order and the dropped directions.
//!
//! The building blocks ([`symmetric_eigen`], [`inverse_sqrt_eigen`], [`solve_diis`],
//! [`aces_quicksort`]) are public: ACES4's atomic SCF guess uses the same procedures.

use faer::diag::Diag;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self, ComputeEigenvectors};
use faer::{Mat, Par, Side};
use sial_superinstructions::special::{Arg, ArgKind, Context, SpecialFn};

use crate::args;

/// The specials of this module: SIAL name, ACES4 signature, function.
pub const SPECIALS: &[(&str, &str, SpecialFn)] = &[
    ("eigen_calc", "uu", eigen_calc),
    ("eigen_calc_sqr_inv", "uuu", eigen_calc_sqr_inv),
    ("gen_eigen_calc", "uuuu", gen_eigen_calc),
    ("compute_diis", "u", compute_diis),
    ("return_diagonal", "uu", return_diagonal),
    ("invert_diagonal", "ur", invert_diagonal),
    ("invert_diagonal_asym", "ur", invert_diagonal_asym),
    ("return_diagonal_elements", "u", return_diagonal_elements),
];

/// ACES4's eigenvector sign rule: the first component larger than this in magnitude is made
/// positive.
const PHASE_TOLERANCE: f64 = 1e-5;

/// The sort key ACES4 gives to dropped (zero) entries so that they sort last.
const DROPPED_KEY: f64 = 999.0;

/// Linear-dependence threshold on overlap eigenvalues when the setup has no `lindep_tol`.
const DEFAULT_LINDEP_THRESHOLD: f64 = 1e-9;

/// Real parts below this magnitude count as zero eigenvalues in `gen_eigen_calc` (the padded,
/// unused corner of the Davidson subspace matrix).
const ZERO_EIGENVALUE: f64 = 1e-12;

/// Imaginary parts above this make `gen_eigen_calc` warn (and go on with the real part).
const COMPLEX_WARNING: f64 = 1.0;

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------

/// ACES4's quicksort: sorts `keys` ascending and applies the same moves to `tags`.
///
/// It is not stable and must be reproduced move for move: with equal keys (degenerate
/// eigenvalues, several dropped directions, the two halves of a complex pair) the resulting
/// column order is whatever this algorithm makes of it. An input that is already non-decreasing
/// is left as it is. The recursion is replaced by an explicit stack (the sub-ranges are disjoint,
/// so the order in which they are sorted does not matter), because an already-sorted input would
/// otherwise recurse once per element.
pub fn aces_quicksort(keys: &mut [f64], tags: &mut [usize]) {
    let n = keys.len().min(tags.len());
    if n < 2 {
        return;
    }
    let mut ranges = vec![(0, n - 1)];
    while let Some((lo, hi)) = ranges.pop() {
        let pos = partition(keys, tags, lo, hi);
        if lo < pos {
            ranges.push((lo, pos - 1));
        }
        if hi > pos {
            ranges.push((pos + 1, hi));
        }
    }
}

/// One partition step of [`aces_quicksort`] on `lo..=hi` (pivot = first element, holes filled
/// alternately from the right and the left); returns the pivot's final position.
fn partition(keys: &mut [f64], tags: &mut [usize], lo: usize, hi: usize) -> usize {
    let (pivot, pivot_tag) = (keys[lo], tags[lo]);
    let (mut l, mut r) = (lo, hi);
    while l < r {
        while keys[r] >= pivot && l < r {
            r -= 1;
        }
        if l != r {
            keys[l] = keys[r];
            tags[l] = tags[r];
            l += 1;
        }
        while keys[l] <= pivot && l < r {
            l += 1;
        }
        if l != r {
            keys[r] = keys[l];
            tags[r] = tags[l];
            r -= 1;
        }
    }
    keys[l] = pivot;
    tags[l] = pivot_tag;
    l
}

/// Reorders the columns of the column-major matrix `m` (with `rows` rows): new column `j` is old
/// column `tags[j]` — how ACES4 applies the result of [`aces_quicksort`].
fn permute_columns(m: &mut [f64], rows: usize, tags: &[usize]) {
    let old = m.to_vec();
    for (j, &t) in tags.iter().enumerate() {
        let (Some(to), Some(from)) = (
            m.get_mut(rows * j..rows * (j + 1)),
            old.get(rows * t..rows * (t + 1)),
        ) else {
            continue;
        };
        to.copy_from_slice(from);
    }
}

/// ACES4's sign convention for eigenvectors of symmetric matrices: in every column, the first
/// component whose magnitude exceeds 1e-5 is made positive (by negating the column). Columns
/// with no such component are left alone. This fixes the sign of MO coefficients, so that
/// persisted orbitals compare with ACES4's.
pub fn apply_phase_rule(vectors: &mut [f64], rows: usize) {
    if rows == 0 {
        return;
    }
    for column in vectors.chunks_mut(rows) {
        let leading = column.iter().find(|v| v.abs() > PHASE_TOLERANCE).copied();
        if leading.is_some_and(|v| v < 0.0) {
            column.iter_mut().for_each(|v| *v = -*v);
        }
    }
}

/// Eigenvalues (ascending) and eigenvectors (columns, column-major, n×n) of a symmetric matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct SymmetricEigen {
    pub values: Vec<f64>,
    pub vectors: Vec<f64>,
}

/// ACES4's symmetric eigensolver (its `dsyev` wrapper): eigenvalues ascending, orthonormal
/// eigenvectors as columns with [`apply_phase_rule`], sorted by ACES4's quicksort (the identity
/// on the already ascending output, kept so that the order is ACES4's by construction).
///
/// Only the lower triangle of the column-major `n`×`n` matrix `a` is read, as with `dsyev('L')`.
/// ACES4 refuses matrices smaller than 2×2 (it aborts), and so do we. The error text describes
/// the matrix, so callers prefix the argument it came from.
pub fn symmetric_eigen(a: &[f64], n: usize) -> Result<SymmetricEigen, String> {
    if n <= 1 {
        return Err(format!(
            "is {n} x {n}: ACES4's symmetric eigensolver needs at least a 2 x 2 matrix (it aborts)"
        ));
    }
    let lower = |i: usize, j: usize| a.get(i.max(j) + n * i.min(j)).copied();
    if a.len() < n * n {
        return Err(format!("has {} elements, fewer than {n} x {n}", a.len()));
    }
    if (0..n).any(|j| (j..n).any(|i| !lower(i, j).is_some_and(f64::is_finite))) {
        return Err("holds NaN or infinity in its lower triangle".into());
    }
    let m = Mat::from_fn(n, n, |i, j| lower(i, j).unwrap_or(0.0));
    let evd = m
        .self_adjoint_eigen(Side::Lower)
        .map_err(|_| "the symmetric eigensolver did not converge (dsyev would fail)".to_string())?;
    let (u, s) = (evd.U(), evd.S().column_vector());
    let mut values: Vec<f64> = (0..n).map(|k| s[k]).collect();
    let mut vectors: Vec<f64> = (0..n * n).map(|p| u[(p % n, p / n)]).collect();
    apply_phase_rule(&mut vectors, n);
    let mut tags: Vec<usize> = (0..n).collect();
    aces_quicksort(&mut values, &mut tags);
    permute_columns(&mut vectors, n, &tags);
    Ok(SymmetricEigen { values, vectors })
}

/// Linear-dependence threshold on overlap eigenvalues: `10^-lindep_tol` from the setup (computed
/// with a real power, as ACES4 does), or 1e-9 without `lindep_tol`.
pub fn lindep_threshold(ctx: &dyn Context) -> f64 {
    ctx.int_constant("lindep_tol")
        .map_or(DEFAULT_LINDEP_THRESHOLD, |tol| 10f64.powf(-f64::from(tol)))
}

/// Canonical orthogonalisation data of an overlap matrix, in ACES4's order.
#[derive(Clone, Debug, PartialEq)]
pub struct InverseSqrt {
    /// 1/√s per column, 0 for a dropped (linearly dependent) direction.
    pub diagonal: Vec<f64>,
    /// Eigenvectors of the overlap as columns (column-major n×n), dropped ones included.
    pub vectors: Vec<f64>,
    /// How many directions were dropped.
    pub dropped: usize,
}

/// ACES4's `eigen_calc_sqr_inv` procedure on the `n`×`n` overlap `s` (lower triangle read):
/// diagonalise, keep 1/√sₖ where `|√sₖ·√sₖ| >= threshold` and drop the rest (a negative or zero
/// eigenvalue is always dropped). With nothing dropped the order stays ascending in s. With
/// something dropped ACES4 re-sorts by the kept 1/√s ascending (dropped ones keyed 999, so they
/// go last) and permutes the eigenvectors alike; a kept 1/√s above 999 would land after the
/// dropped ones, and that quirk is kept too.
pub fn inverse_sqrt_eigen(s: &[f64], n: usize, threshold: f64) -> Result<InverseSqrt, String> {
    let SymmetricEigen {
        values,
        mut vectors,
    } = symmetric_eigen(s, n)?;
    let mut dropped = 0;
    let mut diagonal: Vec<f64> = values
        .iter()
        .map(|&value| {
            let root = value.sqrt();
            if (root * root).abs() >= threshold {
                1.0 / root
            } else {
                dropped += 1;
                0.0
            }
        })
        .collect();
    if dropped > 0 {
        for d in diagonal.iter_mut().filter(|d| d.abs() == 0.0) {
            *d = DROPPED_KEY;
        }
        let mut tags: Vec<usize> = (0..n).collect();
        aces_quicksort(&mut diagonal, &mut tags);
        permute_columns(&mut vectors, n, &tags);
        for d in diagonal.iter_mut().filter(|d| d.abs() == DROPPED_KEY) {
            *d = 0.0;
        }
    }
    Ok(InverseSqrt {
        diagonal,
        vectors,
        dropped,
    })
}

/// Eigen-decomposition of a real non-symmetric matrix in LAPACK `dgeev`'s storage: eigenvalue k
/// is `real[k] + i·imag[k]`; for a complex pair (k, k+1) columns k and k+1 of the vectors hold
/// the real and imaginary parts of the vector of eigenvalue k (the one with positive imaginary
/// part); the vector of k+1 is its conjugate. Each vector has unit 2-norm and its largest
/// component real, as `dgeev` normalises them.
#[derive(Clone, Debug, PartialEq)]
pub struct NonSymmetricEigen {
    pub real: Vec<f64>,
    pub imag: Vec<f64>,
    /// Left eigenvectors: uᴴA = λuᴴ.
    pub left: Vec<f64>,
    /// Right eigenvectors: Av = λv.
    pub right: Vec<f64>,
}

/// `dgeev('V','V')` on the column-major `n`×`n` matrix `a`.
pub fn nonsymmetric_eigen(a: &[f64], n: usize) -> Result<NonSymmetricEigen, String> {
    let entries = a
        .get(..n * n)
        .ok_or_else(|| format!("has {} elements, fewer than {n} x {n}", a.len()))?;
    if entries.iter().any(|v| !v.is_finite()) {
        return Err("holds NaN or infinity".into());
    }
    let m = Mat::from_fn(n, n, |i, j| entries[i + n * j]);
    let mut real = Diag::<f64>::zeros(n);
    let mut imag = Diag::<f64>::zeros(n);
    let mut left = Mat::<f64>::zeros(n, n);
    let mut right = Mat::<f64>::zeros(n, n);
    let par = Par::Seq;
    let mut scratch = MemBuffer::new(evd::evd_scratch::<f64>(
        n,
        ComputeEigenvectors::Yes,
        ComputeEigenvectors::Yes,
        par,
        Default::default(),
    ));
    evd::evd_real(
        m.as_ref(),
        real.as_mut(),
        imag.as_mut(),
        Some(left.as_mut()),
        Some(right.as_mut()),
        par,
        MemStack::new(&mut scratch),
        Default::default(),
    )
    .map_err(|_| "the eigensolver did not converge (dgeev would fail)".to_string())?;
    let real: Vec<f64> = (0..n).map(|k| real.column_vector()[k]).collect();
    let imag: Vec<f64> = (0..n).map(|k| imag.column_vector()[k]).collect();
    let mut left: Vec<f64> = (0..n * n).map(|p| left[(p % n, p / n)]).collect();
    let mut right: Vec<f64> = (0..n * n).map(|p| right[(p % n, p / n)]).collect();
    normalize_like_dgeev(&mut left, &imag, n);
    normalize_like_dgeev(&mut right, &imag, n);
    Ok(NonSymmetricEigen {
        real,
        imag,
        left,
        right,
    })
}

/// Scales eigenvectors as `dgeev` does: unit Euclidean norm; for a complex pair (columns k, k+1
/// = real and imaginary part) the complex vector gets unit norm and is rotated so that its
/// largest component (the first one of largest modulus) is real.
fn normalize_like_dgeev(vectors: &mut [f64], imag: &[f64], n: usize) {
    let norm = |c: &[f64]| c.iter().map(|v| v * v).sum::<f64>().sqrt();
    let mut k = 0;
    while k < n {
        let pair = imag.get(k).is_some_and(|&w| w != 0.0) && k + 1 < n;
        if !pair {
            if let Some(c) = vectors.get_mut(n * k..n * (k + 1)) {
                let scale = 1.0 / norm(c);
                c.iter_mut().for_each(|v| *v *= scale);
            }
            k += 1;
            continue;
        }
        if let Some(c) = vectors.get_mut(n * k..n * (k + 2)) {
            let (re, im) = c.split_at_mut(n);
            let scale = 1.0 / norm(re).hypot(norm(im));
            re.iter_mut().chain(im.iter_mut()).for_each(|v| *v *= scale);
            rotate_largest_to_real(re, im);
        }
        k += 2;
    }
}

/// Multiplies the complex vector `re + i·im` by a unit phase that makes its first component of
/// largest modulus real (LAPACK's `dlartg` + `drot` step in `dgeev`).
fn rotate_largest_to_real(re: &mut [f64], im: &mut [f64]) {
    let mut largest = 0;
    let mut biggest = -1.0;
    for (p, (x, y)) in re.iter().zip(im.iter()).enumerate() {
        let modulus = x * x + y * y;
        if modulus > biggest {
            biggest = modulus;
            largest = p;
        }
    }
    let (Some(&f), Some(&g)) = (re.get(largest), im.get(largest)) else {
        return;
    };
    let (cs, sn) = if f == 0.0 {
        (0.0, if g < 0.0 { -1.0 } else { 1.0 })
    } else {
        let r = f.signum() * f.hypot(g);
        (f / r, g / r)
    };
    for (x, y) in re.iter_mut().zip(im.iter_mut()) {
        let (a, b) = (*x, *y);
        *x = cs * a + sn * b;
        *y = cs * b - sn * a;
    }
    if let Some(y) = im.get_mut(largest) {
        *y = 0.0;
    }
}

/// The solution of the DIIS equations could not be found: LAPACK `dgesv`'s `info`, the 1-based
/// position of the first exactly zero pivot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SingularDiis {
    pub info: usize,
}

/// Solves Pulay's bordered DIIS system for the `k`×`k` error-overlap matrix `b` (column-major):
/// `[[B, −1], [−1ᵀ, 0]] · x = (0, …, 0, −1)`, by LU with partial pivoting (`dgesv`). Returns
/// the k coefficients (they sum to 1) followed by the Lagrange multiplier.
pub fn solve_diis(b: &[f64], k: usize) -> Result<Vec<f64>, SingularDiis> {
    let size = k + 1;
    let border = |i: usize, j: usize| match (i < k, j < k) {
        (true, true) => b.get(i + k * j).copied().unwrap_or(0.0),
        (false, false) => 0.0,
        _ => -1.0,
    };
    let system = Mat::from_fn(size, size, border);
    let lu = system.partial_piv_lu();
    let u = lu.U();
    if let Some(zero) = (0..size).find(|&p| u[(p, p)] == 0.0) {
        return Err(SingularDiis { info: zero + 1 });
    }
    let rhs = Mat::from_fn(size, 1, |i, _| if i == k { -1.0 } else { 0.0 });
    let x = faer::linalg::solvers::Solve::solve(&lu, &rhs);
    Ok((0..size).map(|i| x[(i, 0)]).collect())
}

// ---------------------------------------------------------------------------------------------
// Argument checks shared by the specials
// ---------------------------------------------------------------------------------------------

/// `argument k (name)` for messages.
pub(crate) fn name(arg: &Arg, k: usize) -> String {
    format!("argument {} ({})", k + 1, arg.describe())
}

/// Checks that the data of argument `k` has as many elements as its shape says (so that
/// indexing by shape cannot go out of bounds).
fn consistent(arg: &Arg, k: usize) -> Result<(), String> {
    let expected: usize = arg.shape.iter().product();
    if arg.data.len() != expected {
        return Err(format!(
            "{} has {} elements but its shape {:?} needs {expected}",
            name(arg, k),
            arg.data.len(),
            arg.shape
        ));
    }
    Ok(())
}

/// Argument `k` as an n×n matrix (a block or a whole array); returns n.
fn square_matrix(arg: &Arg, k: usize) -> Result<usize, String> {
    let n = args::square(arg, k)?;
    consistent(arg, k)?;
    Ok(n)
}

/// Checks that argument `k` can take `n` eigenvectors of length `n` as its first `n` columns
/// (ACES4 writes them with leading dimension `n`, so the rows must be exactly `n`).
fn eigenvector_output(arg: &Arg, k: usize, n: usize) -> Result<(), String> {
    let (rows, cols) = args::matrix(arg, k)?;
    consistent(arg, k)?;
    if rows != n || cols < n {
        return Err(format!(
            "{} is {rows} x {cols} but must have {n} rows and at least {n} columns for the eigenvectors of the {n} x {n} argument 1",
            name(arg, k)
        ));
    }
    Ok(())
}

/// Checks that argument `k` is an array (block or whole array) of rank `rank` whose data has as
/// many elements as its shape says.
pub(crate) fn array_of_rank(arg: &Arg, k: usize, rank: usize) -> Result<(), String> {
    if !matches!(arg.kind, ArgKind::Block | ArgKind::WholeArray) || arg.shape.len() != rank {
        return Err(format!(
            "{} must be an array of rank {rank}, got rank {}",
            name(arg, k),
            arg.shape.len()
        ));
    }
    consistent(arg, k)
}

/// For the dimensions `dims` of argument `k`, the 0-based number of the first element among all
/// orbitals (or basis functions) of that dimension's index, as ACES4 computes it from the
/// segment numbers it passes: a whole array comes with segment numbers 1, hence offset 0; for a
/// block the runtime's segment tables answer. Other dimensions get 0.
pub(crate) fn first_positions(
    ctx: &dyn Context,
    arg: &Arg,
    k: usize,
    dims: &[usize],
) -> Result<Vec<usize>, String> {
    let rank = arg.shape.len();
    if arg.kind == ArgKind::WholeArray {
        return Ok(vec![0; rank]);
    }
    let known = args::offsets(ctx, arg);
    (0..rank)
        .map(|d| match (dims.contains(&d), known.get(d).copied().flatten()) {
            (false, _) => Ok(0),
            (true, Some(offset)) => Ok(offset),
            (true, None) => Err(format!(
                "{}: cannot locate dimension {} among the orbitals (it must be an index with a segment table)",
                name(arg, k),
                d + 1
            )),
        })
        .collect()
}

/// The multi-index (0-based, first fastest) of column-major position `p` in an array of `shape`.
fn multi_index(mut p: usize, shape: &[usize], index: &mut [usize]) {
    for (slot, &extent) in index.iter_mut().zip(shape) {
        *slot = p % extent.max(1);
        p /= extent.max(1);
    }
}

/// A column-major n×n matrix with `values` on the diagonal and exact zeros elsewhere.
fn fill_diagonal(matrix: &mut [f64], n: usize, values: &[f64]) {
    matrix.iter_mut().for_each(|v| *v = 0.0);
    for (k, &value) in values.iter().enumerate().take(n) {
        if let Some(slot) = matrix.get_mut(k + n * k) {
            *slot = value;
        }
    }
}

/// gfortran's list-directed output of a REAL(8) item (`print *`): a separating blank and a
/// 25-character field with 17 significant digits, fixed notation for 0.1 <= |x| < 1e17 (then
/// padded with 5 blanks where the exponent would go), else `d.dddE±eee`. ACES4's warnings print
/// doubles this way.
pub(crate) fn list_directed_real(x: f64) -> String {
    if !x.is_finite() {
        return format!(" {x:>25}");
    }
    let scientific = format!("{x:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if x == 0.0 || (-1..=16).contains(&exponent) {
        let decimals = usize::try_from(16 - exponent).unwrap_or(0);
        let mut fixed = format!("{x:.decimals$}");
        if decimals == 0 {
            fixed.push('.');
        }
        format!(" {fixed:>20}     ")
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(" {:>25}", format!("{mantissa}E{sign}{:03}", exponent.abs()))
    }
}

/// gfortran's list-directed output of a default INTEGER item: right-justified in 12 characters.
pub(crate) fn list_directed_int(k: usize) -> String {
    format!("{k:>12}")
}

// ---------------------------------------------------------------------------------------------
// The specials
// ---------------------------------------------------------------------------------------------

/// `eigen_calc A V` (uu): diagonalises the symmetric matrix `A` (its lower triangle): `A`
/// becomes diag(eigenvalues ascending) with exact zeros elsewhere (the programs read orbital
/// energies from its diagonal), the first n columns of `V` the eigenvectors (column k ↔ k-th
/// smallest eigenvalue) with ACES4's sign rule. 1×1 matrices are refused, as in ACES4.
pub fn eigen_calc(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [a, v] = args::exactly::<2>(args, "a symmetric matrix and its eigenvectors")?;
    let n = square_matrix(a, 0)?;
    eigenvector_output(v, 1, n)?;
    let eigen = symmetric_eigen(&a.data, n).map_err(|e| format!("{} {e}", name(a, 0)))?;
    fill_diagonal(&mut a.data, n, &eigen.values);
    v.data[..n * n].copy_from_slice(&eigen.vectors);
    Ok(())
}

/// `eigen_calc_sqr_inv S X n` (uuu): canonical orthogonalisation of the overlap `S`. `S` becomes
/// diag(1/√s) (0 for directions with `s < 10^-lindep_tol`), `X` the overlap's eigenvectors in
/// the same order (see [`inverse_sqrt_eigen`] for ACES4's re-sort when something is dropped),
/// and the scalar `n` the number of dropped linear dependencies. The program then forms
/// `Q = X·S`.
pub fn eigen_calc_sqr_inv(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [s, x, count] = args::exactly::<3>(
        args,
        "the overlap matrix, its eigenvectors and the number of linear dependencies",
    )?;
    let n = square_matrix(s, 0)?;
    eigenvector_output(x, 1, n)?;
    args::scalar(count, 2)?;
    let threshold = lindep_threshold(ctx);
    let result =
        inverse_sqrt_eigen(&s.data, n, threshold).map_err(|e| format!("{} {e}", name(s, 0)))?;
    fill_diagonal(&mut s.data, n, &result.diagonal);
    x.data[..n * n].copy_from_slice(&result.vectors);
    args::set_scalar(count, 2, result.dropped as f64)
}

/// `gen_eigen_calc A L R e` (uuuu): eigenvalues and left/right eigenvectors of the non-symmetric
/// Davidson matrix `A` (`dgeev`). `e` gets the real parts sorted ascending by ACES4's quicksort,
/// with (near-)zero ones (the unused padded corner) keyed 999 so that they come last as 0.0; the
/// columns of `L` and `R` follow the same permutation. A complex pair with imaginary part above
/// 1 prints ACES4's warning and goes on with the real part. `A` is left as it was (ACES4 leaves
/// LAPACK's Schur form there; no program reads it).
pub fn gen_eigen_calc(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [a, left, right, values] = args::exactly::<4>(
        args,
        "a matrix, its left and right eigenvectors and its eigenvalues",
    )?;
    let n = square_matrix(a, 0)?;
    eigenvector_output(left, 1, n)?;
    eigenvector_output(right, 2, n)?;
    array_of_rank(values, 3, 1)?;
    if values.data.len() < n {
        return Err(format!(
            "{} has {} elements, fewer than the {n} eigenvalues of argument 1",
            name(values, 3),
            values.data.len()
        ));
    }
    let mut eigen = nonsymmetric_eigen(&a.data, n).map_err(|e| format!("{} {e}", name(a, 0)))?;
    warn_about_complex_eigenvalues(ctx, &eigen.imag);
    let mut keys: Vec<f64> = eigen
        .real
        .iter()
        .map(|&w| {
            if w.abs() < ZERO_EIGENVALUE {
                DROPPED_KEY
            } else {
                w
            }
        })
        .collect();
    let mut tags: Vec<usize> = (0..n).collect();
    aces_quicksort(&mut keys, &mut tags);
    permute_columns(&mut eigen.left, n, &tags);
    permute_columns(&mut eigen.right, n, &tags);
    for key in keys.iter_mut().filter(|k| k.abs() == DROPPED_KEY) {
        *key = 0.0;
    }
    left.data[..n * n].copy_from_slice(&eigen.left);
    right.data[..n * n].copy_from_slice(&eigen.right);
    values.data[..n].copy_from_slice(&keys);
    Ok(())
}

/// ACES4's warning for eigenvalues with an imaginary part above 1 (1-based position in the
/// solver's order, imaginary part), one line each.
fn warn_about_complex_eigenvalues(ctx: &mut dyn Context, imag: &[f64]) {
    for (k, &w) in imag.iter().enumerate() {
        if w > COMPLEX_WARNING {
            ctx.print(&format!(
                " WARNING complex component from DGEEV{}{}\n",
                list_directed_int(k + 1),
                list_directed_real(w)
            ));
        }
    }
}

/// `compute_diis B` (u): Pulay DIIS. From the upper triangle of the m×m static array `B` (the
/// error-vector overlaps of the filled history slots), solves the bordered DIIS system and
/// writes the coefficients onto the diagonal of `B` (0 beyond the history), leaving the
/// off-diagonal elements as they were. The history length is m minus the number of rows of the
/// symmetrised matrix without any non-zero element (ACES4 assumes the filled slots are the
/// first ones, as every program fills them). A singular system (no history, or linearly
/// dependent error vectors) is an error, as `dgesv`'s nonzero `info` aborts ACES4.
pub fn compute_diis(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [bb] = args::exactly::<1>(args, "the DIIS matrix")?;
    let m = square_matrix(bb, 0)?;
    let upper = |i: usize, j: usize| bb.data[i.min(j) + m * i.max(j)];
    let empty_rows = (0..m)
        .filter(|&i| {
            (0..m).all(|j| upper(i, j).abs().partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
        })
        .count();
    let k = m - empty_rows;
    let b: Vec<f64> = (0..k * k).map(|p| upper(p % k, p / k)).collect();
    let x = solve_diis(&b, k).map_err(|SingularDiis { info }| {
        format!(
            "the DIIS equations of {} are singular (dgesv info = {info}) for a history of {k}: no history, or linearly dependent error vectors",
            name(bb, 0)
        )
    })?;
    let coefficients = x.get(..k).unwrap_or(&[]);
    for (i, diagonal) in bb.data.iter_mut().step_by(m + 1).enumerate() {
        *diagonal = coefficients.get(i).copied().unwrap_or(0.0);
    }
    Ok(())
}

/// `return_diagonal T s` (uu): zeroes the off-diagonal elements of block `T` by global orbital
/// numbers — for rank 2 those with p ≠ q, for rank 4 those with p ≠ q *and* r ≠ s (elements with
/// one diagonal pair are kept) — and sets the scalar `s` to the sum of the elements on the full
/// diagonal (p = q, and r = s for rank 4). Other ranks are an error (ACES4 returns an
/// uninitialised sum).
pub fn return_diagonal(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [t, sum] = args::exactly::<2>(args, "a block and a scalar for its diagonal sum")?;
    let rank = t.shape.len();
    if rank != 2 && rank != 4 {
        return Err(format!(
            "{} must have rank 2 or 4, got rank {rank}",
            name(t, 0)
        ));
    }
    array_of_rank(t, 0, rank)?;
    args::scalar(sum, 1)?;
    let all_dims: Vec<usize> = (0..rank).collect();
    let first = first_positions(ctx, t, 0, &all_dims)?;
    let mut index = vec![0; rank];
    let mut diagonal_sum = 0.0;
    for (p, value) in t.data.iter_mut().enumerate() {
        multi_index(p, &t.shape, &mut index);
        let on = |a: usize, b: usize| first[a] + index[a] == first[b] + index[b];
        let (first_pair, second_pair) = (on(0, 1), rank == 2 || on(2, 3));
        if !first_pair && (rank == 2 || !second_pair) {
            *value = 0.0;
        }
        if first_pair && second_pair {
            diagonal_sum += *value;
        }
    }
    args::set_scalar(sum, 1, diagonal_sum)
}

/// Checks the two blocks of `invert_diagonal`/`invert_diagonal_asym`: equal ranks (ACES4's
/// first check), a rank in `ranks`, and (our addition, ACES4 assumes it) equal shapes.
fn numerator_and_denominator(t: &Arg, d: &Arg, ranks: &[usize]) -> Result<(), String> {
    if t.shape.len() != d.shape.len() {
        return Err(format!(
            "{} and {} must have the same rank, got {} and {}",
            name(t, 0),
            name(d, 1),
            t.shape.len(),
            d.shape.len()
        ));
    }
    if !ranks.contains(&t.shape.len()) {
        let allowed: Vec<String> = ranks.iter().map(usize::to_string).collect();
        return Err(format!(
            "{} must have rank {}, got rank {}",
            name(t, 0),
            allowed.join(" or "),
            t.shape.len()
        ));
    }
    array_of_rank(t, 0, t.shape.len())?;
    array_of_rank(d, 1, d.shape.len())?;
    if t.shape != d.shape {
        return Err(format!(
            "{} and {} must have the same shape, got {:?} and {:?}",
            name(t, 0),
            name(d, 1),
            t.shape,
            d.shape
        ));
    }
    Ok(())
}

/// `invert_diagonal T D` (ur): `T := T / D` element by element where `D` is not exactly zero
/// (elements over a zero divisor stay as they are). Rank 3 or 5 blocks, as ACES4 accepts.
pub fn invert_diagonal(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [t, d] = args::exactly::<2>(args, "a block and the block of divisors")?;
    numerator_and_denominator(t, d, &[3, 5])?;
    for (value, &divisor) in t.data.iter_mut().zip(&d.data) {
        if divisor != 0.0 {
            *value /= divisor;
        }
    }
    Ok(())
}

/// `invert_diagonal_asym T D` (ur), rank 5 `T[k,a,i,a1,i1]`: where a ≠ a1 and i ≠ i1 (global
/// orbital numbers), `T := T / D` if `D` is not exactly zero; elements with a = a1 or i = i1 are
/// set to 0. The first (state) index is not inspected.
pub fn invert_diagonal_asym(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [t, d] = args::exactly::<2>(args, "a block and the block of divisors")?;
    numerator_and_denominator(t, d, &[5])?;
    let first = first_positions(ctx, t, 0, &[1, 2, 3, 4])?;
    let mut index = [0; 5];
    for (p, (value, &divisor)) in t.data.iter_mut().zip(&d.data).enumerate() {
        multi_index(p, &t.shape, &mut index);
        let global = |dim: usize| first[dim] + index[dim];
        if global(1) != global(3) && global(2) != global(4) {
            if divisor != 0.0 {
                *value /= divisor;
            }
        } else {
            *value = 0.0;
        }
    }
    Ok(())
}

/// `return_diagonal_elements T` (u): keeps the elements on the diagonal by *local* position in
/// the block (p = q for rank 2; p = q and r = s for rank 4) and zeroes the rest. The pairs of
/// extents must be equal. The programs call it only where both indices of a pair are in the same
/// segment, so local equals global.
pub fn return_diagonal_elements(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [t] = args::exactly::<1>(args, "a block")?;
    let rank = t.shape.len();
    if rank != 2 && rank != 4 {
        return Err(format!(
            "{} must have rank 2 or 4, got rank {rank}",
            name(t, 0)
        ));
    }
    array_of_rank(t, 0, rank)?;
    let square_pairs = t.shape[0] == t.shape[1] && (rank == 2 || t.shape[2] == t.shape[3]);
    if !square_pairs {
        return Err(format!(
            "{}: the extents of each index pair must be equal, got {:?}",
            name(t, 0),
            t.shape
        ));
    }
    let mut index = vec![0; rank];
    for (p, value) in t.data.iter_mut().enumerate() {
        multi_index(p, &t.shape, &mut index);
        let diagonal = index[0] == index[1] && (rank == 2 || index[2] == index[3]);
        if !diagonal {
            *value = 0.0;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    const H: f64 = std::f64::consts::FRAC_1_SQRT_2;

    fn run(f: SpecialFn, ctx: &mut Fake, args: &mut [Arg]) -> Result<(), String> {
        f(ctx, args)
    }

    fn whole(name: &str, shape: &[usize], data: &[f64]) -> Arg {
        Arg::whole_array(name, shape.to_vec(), data.to_vec())
    }

    fn assert_close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= tol,
                "element {k}: {g} vs {w}\n got {got:?}\nwant {want:?}"
            );
        }
    }

    /// Columns of `got` equal those of `want` up to the sign of each column.
    fn assert_columns_up_to_sign(got: &[f64], want: &[f64], rows: usize, tol: f64) {
        assert_eq!(got.len(), want.len());
        for (j, (g, w)) in got.chunks(rows).zip(want.chunks(rows)).enumerate() {
            let sign = if g.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() < 0.0 {
                -1.0
            } else {
                1.0
            };
            for (a, b) in g.iter().zip(w) {
                assert!((sign * a - b).abs() <= tol, "column {j}: {g:?} vs {w:?}");
            }
        }
    }

    fn diagonal(values: &[f64]) -> Vec<f64> {
        let n = values.len();
        let mut m = vec![0.0; n * n];
        for (k, v) in values.iter().enumerate() {
            m[k + n * k] = *v;
        }
        m
    }

    // --- quicksort -----------------------------------------------------------------------

    #[test]
    fn quicksort_moves_like_aces4() {
        // Expected tags from tests/data/linalg_scf/qsort4.py (a transcription of the notes).
        let cases: [(&[f64], &[usize]); 6] = [
            (&[3.0, 1.0, 1.0, 2.0], &[2, 1, 3, 0]),
            (&[999.0, 999.0, 5.0, 4.0, 3.0], &[4, 3, 2, 1, 0]),
            (&[1.0, 2.0, 2.0, 3.0], &[0, 1, 2, 3]),
            (&[2.0, 2.0, 2.0], &[0, 1, 2]),
            (
                &[0.5, 999.0, -1.0, 999.0, 0.25, 7.0, -1.0],
                &[6, 2, 4, 0, 5, 3, 1],
            ),
            (&[999.0, 999.0, std::f64::consts::SQRT_2, H], &[3, 2, 1, 0]),
        ];
        for (keys, want) in cases {
            let mut sorted = keys.to_vec();
            let mut tags: Vec<usize> = (0..keys.len()).collect();
            aces_quicksort(&mut sorted, &mut tags);
            assert_eq!(tags, want, "keys {keys:?}");
            let permuted: Vec<f64> = want.iter().map(|&t| keys[t]).collect();
            assert_eq!(sorted, permuted);
            assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    #[test]
    fn quicksort_handles_long_sorted_input_and_trivial_sizes() {
        let mut keys: Vec<f64> = (0..20_000).map(f64::from).collect();
        let mut tags: Vec<usize> = (0..keys.len()).collect();
        aces_quicksort(&mut keys, &mut tags);
        assert!(tags.iter().enumerate().all(|(k, &t)| k == t));
        let (mut one, mut tag) = (vec![1.0], vec![0]);
        aces_quicksort(&mut one, &mut tag);
        aces_quicksort(&mut [], &mut []);
        assert_eq!(tag, vec![0]);
    }

    #[test]
    fn columns_are_permuted_by_tags() {
        let mut m = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        permute_columns(&mut m, 2, &[2, 0, 1]);
        assert_eq!(m, vec![5.0, 6.0, 1.0, 2.0, 3.0, 4.0]);
    }

    // --- phase rule ----------------------------------------------------------------------

    #[test]
    fn phase_rule_looks_at_the_first_component_above_1e_5() {
        let mut v = vec![
            -1e-6, -0.5, 0.3, /* */ -9e-6, 0.5, -0.2, /* */ 1e-6, -2e-6, 0.0,
        ];
        apply_phase_rule(&mut v, 3);
        assert_eq!(v, vec![1e-6, 0.5, -0.3, -9e-6, 0.5, -0.2, 1e-6, -2e-6, 0.0]);
        let mut w = vec![-2e-5, 0.9];
        apply_phase_rule(&mut w, 2);
        assert_eq!(w, vec![2e-5, -0.9]);
    }

    // --- eigen_calc ----------------------------------------------------------------------

    #[test]
    fn eigen_calc_2x2_by_hand() {
        // [[2,1],[1,2]]: eigenvalues 1 and 3 with vectors (1,-1)/√2 and (1,1)/√2, the first
        // component made positive.
        let mut ctx = Fake::new();
        let mut args = [
            whole("fspq_a", &[2, 2], &[2.0, 1.0, 1.0, 2.0]),
            whole("ca", &[2, 2], &[7.0; 4]),
        ];
        run(eigen_calc, &mut ctx, &mut args).expect("eigen_calc");
        assert_close(&args[0].data, &[1.0, 0.0, 0.0, 3.0], 1e-14);
        assert_eq!(args[0].data[1], 0.0);
        assert_eq!(args[0].data[2], 0.0);
        assert_close(&args[1].data, &[H, -H, H, H], 1e-14);
        assert!(ctx.printed.is_empty());
    }

    #[test]
    fn eigen_calc_phase_rule_skips_zero_leading_components() {
        // [[5,0,0],[0,2,1],[0,1,2]]: eigenvalues 1, 3, 5 with vectors (0,1,-1)/√2, (0,1,1)/√2,
        // (1,0,0); the first row is zero in the first two, so row 2 decides their sign.
        let mut ctx = Fake::new();
        let a = [5.0, 0.0, 0.0, 0.0, 2.0, 1.0, 0.0, 1.0, 2.0];
        let mut args = [whole("f", &[3, 3], &a), whole("c", &[3, 3], &[0.0; 9])];
        run(eigen_calc, &mut ctx, &mut args).expect("eigen_calc");
        assert_close(&args[0].data, &diagonal(&[1.0, 3.0, 5.0]), 1e-14);
        assert_close(
            &args[1].data,
            &[0.0, H, -H, 0.0, H, H, 1.0, 0.0, 0.0],
            1e-14,
        );
    }

    #[test]
    fn eigen_calc_reads_the_lower_triangle_against_numpy() {
        // tests/data/linalg_scf/symmetric_eigen.py ("fock"); 100+ in the strict upper triangle
        // must be ignored.
        let a = [
            4.0, 1.0, -2.0, 0.25, 101.0, 3.0, 0.5, -1.0, 102.0, 103.0, 1.0, 0.75, 104.0, 105.0,
            106.0, -2.0,
        ];
        let values = [
            -2.5506318109498,
            0.18670051389197126,
            3.125616531964777,
            5.238314765093053,
        ];
        let vectors = [
            0.16491534810456535,
            -0.22169112248654876,
            0.3158431950813154,
            -0.9076888510337832,
            0.4325166345470403,
            -0.1553478714601062,
            0.7961795870354045,
            0.3935663411180488,
            0.19637167145375398,
            -0.9058491571821715,
            -0.35018916736374184,
            0.135066717380324,
            0.8643902217460061,
            0.3258180312318774,
            -0.3790892881235861,
            -0.05443773235564718,
        ];
        let mut ctx = Fake::new();
        let mut args = [whole("f", &[4, 4], &a), whole("c", &[4, 4], &[0.0; 16])];
        run(eigen_calc, &mut ctx, &mut args).expect("eigen_calc");
        assert_close(&args[0].data, &diagonal(&values), 1e-13);
        assert_close(&args[1].data, &vectors, 1e-13);
    }

    #[test]
    fn eigen_calc_fills_only_the_first_n_columns_of_a_wider_output() {
        let mut ctx = Fake::new();
        let mut args = [
            Arg::block("f", vec![1, 1], vec![2, 2], vec![2.0, 1.0, 1.0, 2.0]),
            whole("c", &[2, 3], &[9.0; 6]),
        ];
        run(eigen_calc, &mut ctx, &mut args).expect("eigen_calc");
        assert_close(&args[1].data, &[H, -H, H, H, 9.0, 9.0], 1e-14);
    }

    #[test]
    fn eigen_calc_errors() {
        let mut ctx = Fake::new();
        let one = |name: &str| whole(name, &[1, 1], &[4.0]);
        let err = |args: &mut [Arg]| eigen_calc(&mut Fake::new(), args).expect_err("must fail");
        // 1x1: ACES4's eigensolver aborts.
        let e = err(&mut [one("f"), one("c")]);
        assert!(e.contains("argument 1 (f) is 1 x 1"), "{e}");
        // wrong count
        let e = err(&mut [one("f")]);
        assert!(e.contains("expects 2 arguments"), "{e}");
        // rank
        let e = err(&mut [
            whole("f", &[2, 2, 1], &[0.0; 4]),
            whole("c", &[2, 2], &[0.0; 4]),
        ]);
        assert!(e.contains("argument 1") && e.contains("rank 2"), "{e}");
        let e = err(&mut [whole("f", &[2, 2], &[0.0; 4]), whole("c", &[4], &[0.0; 4])]);
        assert!(e.contains("argument 2") && e.contains("rank 2"), "{e}");
        // not square
        let e = err(&mut [
            whole("f", &[2, 3], &[0.0; 6]),
            whole("c", &[2, 3], &[0.0; 6]),
        ]);
        assert!(e.contains("argument 1") && e.contains("square"), "{e}");
        // output too small / wrong leading dimension
        let e = err(&mut [
            whole("f", &[2, 2], &[0.0; 4]),
            whole("c", &[3, 2], &[0.0; 6]),
        ]);
        assert!(e.contains("argument 2 (c) is 3 x 2"), "{e}");
        let e = err(&mut [
            whole("f", &[2, 2], &[0.0; 4]),
            whole("c", &[2, 1], &[0.0; 2]),
        ]);
        assert!(e.contains("argument 2 (c) is 2 x 1"), "{e}");
        // data shorter than the shape
        let e = err(&mut [
            whole("f", &[2, 2], &[0.0; 3]),
            whole("c", &[2, 2], &[0.0; 4]),
        ]);
        assert!(e.contains("3 elements"), "{e}");
        // NaN in the lower triangle (in the upper one it is ignored)
        let e = err(&mut [
            whole("f", &[2, 2], &[1.0, f64::NAN, 0.0, 1.0]),
            whole("c", &[2, 2], &[0.0; 4]),
        ]);
        assert!(e.contains("NaN"), "{e}");
        let mut ok = [
            whole("f", &[2, 2], &[1.0, 0.0, f64::NAN, 1.0]),
            whole("c", &[2, 2], &[0.0; 4]),
        ];
        assert!(eigen_calc(&mut ctx, &mut ok).is_ok());
        // a scalar is not a matrix
        let e = err(&mut [Arg::scalar("x", 1.0), whole("c", &[2, 2], &[0.0; 4])]);
        assert!(
            e.contains("argument 1 must be an array of rank 2, got x"),
            "{e}"
        );
    }

    // --- eigen_calc_sqr_inv --------------------------------------------------------------

    /// The symmetric orthogonal matrix ½·[[1,1,1,1],[1,−1,1,−1],[1,1,−1,−1],[1,−1,−1,1]]
    /// (column-major; its first row is positive, so the phase rule keeps its columns).
    const HADAMARD: [f64; 16] = [
        0.5, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, -0.5, 0.5, 0.5, -0.5, -0.5, 0.5, -0.5, -0.5, 0.5,
    ];

    /// S = Hᵀ diag(s) H: eigenvalues `s`, eigenvectors the columns of [`HADAMARD`].
    fn overlap_with_eigenvalues(s: &[f64; 4]) -> Vec<f64> {
        let h = |i: usize, j: usize| HADAMARD[i + 4 * j];
        (0..16)
            .map(|p| {
                let (i, j) = (p % 4, p / 4);
                (0..4).map(|k| h(i, k) * s[k] * h(j, k)).sum()
            })
            .collect()
    }

    /// Runs eigen_calc_sqr_inv on S with the given eigenvalues; returns (diagonal, vectors,
    /// dropped count).
    fn sqr_inv(s: &[f64; 4], lindep_tol: Option<i32>) -> (Vec<f64>, Vec<f64>, f64) {
        let mut ctx = Fake::new();
        if let Some(tol) = lindep_tol {
            ctx.ints.insert("lindep_tol".into(), tol);
        }
        let mut args = [
            whole("oed_ovl", &[4, 4], &overlap_with_eigenvalues(s)),
            whole("x1", &[4, 4], &[0.0; 16]),
            Arg::scalar("num_lindep", 5.0),
        ];
        run(eigen_calc_sqr_inv, &mut ctx, &mut args).expect("eigen_calc_sqr_inv");
        assert!(ctx.printed.is_empty());
        let [s, x, n] = args;
        for i in 0..4 {
            for j in 0..4 {
                if i != j {
                    assert_eq!(s.data[i + 4 * j], 0.0, "off-diagonal ({i},{j})");
                }
            }
        }
        let d = (0..4).map(|k| s.data[k + 4 * k]).collect();
        (d, x.data.into_vec(), n.data[0])
    }

    fn hadamard_columns(order: &[usize]) -> Vec<f64> {
        order
            .iter()
            .flat_map(|&c| HADAMARD[4 * c..4 * c + 4].to_vec())
            .collect()
    }

    #[test]
    fn sqr_inv_without_dropping_keeps_ascending_overlap_order() {
        // Default threshold 1e-9 keeps everything: diag(1/√s) in ascending s.
        let (d, x, n) = sqr_inv(&[0.25, 0.5, 1.0, 4.0], None);
        assert_close(&d, &[2.0, 2f64.sqrt(), 1.0, 0.5], 1e-13);
        assert_close(&x, &hadamard_columns(&[0, 1, 2, 3]), 1e-13);
        assert_eq!(n, 0.0);
    }

    #[test]
    fn sqr_inv_drops_below_the_threshold_and_resorts() {
        // lindep_tol = 2: s = 0.005 is dropped; the kept ones are re-sorted by 1/√s ascending
        // (i.e. s descending) and the dropped direction goes last with diagonal 0; its
        // eigenvector is kept.
        let (d, x, n) = sqr_inv(&[0.005, 0.5, 1.0, 4.0], Some(2));
        assert_close(&d, &[0.5, 1.0, 2f64.sqrt(), 0.0], 1e-13);
        assert_close(&x, &hadamard_columns(&[3, 2, 1, 0]), 1e-13);
        assert_eq!(n, 1.0);
    }

    #[test]
    fn sqr_inv_several_dropped_come_out_in_quicksort_order() {
        // Two dropped (keys 999, 999, √2, 1/√2): ACES4's quicksort gives tags [3,2,1,0]
        // (qsort4.py), so the dropped columns come out reversed.
        let (d, x, n) = sqr_inv(&[0.001, 0.002, 0.5, 2.0], Some(2));
        assert_close(&d, &[H, 2f64.sqrt(), 0.0, 0.0], 1e-13);
        assert_close(&x, &hadamard_columns(&[3, 2, 1, 0]), 1e-13);
        assert_eq!(n, 2.0);
    }

    #[test]
    fn sqr_inv_negative_and_zero_eigenvalues_are_dropped() {
        let (d, x, n) = sqr_inv(&[-0.25, 0.0, 0.5, 2.0], Some(12));
        assert_close(&d, &[H, 2f64.sqrt(), 0.0, 0.0], 1e-12);
        assert_eq!(n, 2.0);
        // The dropped pair's order depends on which of -0.25/0.0 sorts first (-0.25): keys
        // 999, 999 keep the quicksort's reversal.
        assert_close(&x[..8], &hadamard_columns(&[3, 2]), 1e-13);
    }

    #[test]
    fn sqr_inv_keeps_aces4_quirk_for_kept_values_above_999() {
        // lindep_tol = 8: s = 1e-9 is dropped, s = 1e-7 kept with 1/√s ≈ 3162 > 999, which
        // sorts after the dropped marker: diag(1/√2, √2, 0, 3162.3).
        let (d, x, n) = sqr_inv(&[1e-9, 1e-7, 0.5, 2.0], Some(8));
        assert_eq!(n, 1.0);
        assert_close(&d[..3], &[H, 2f64.sqrt(), 0.0], 1e-12);
        assert!((d[3] - 1e-7f64.sqrt().recip()).abs() < 1e-5, "{}", d[3]);
        assert_close(&x, &hadamard_columns(&[3, 2, 0, 1]), 1e-7);
    }

    #[test]
    fn sqr_inv_threshold_is_inclusive_and_a_real_power() {
        assert_eq!(lindep_threshold(&Fake::new()), 1e-9);
        let mut ctx = Fake::new();
        ctx.ints.insert("lindep_tol".into(), 2);
        assert_eq!(lindep_threshold(&ctx), 0.01);
        // s = 4 with threshold 4 (lindep_tol absent is 1e-9; use the building block directly):
        // √4·√4 = 4 >= 4 is kept.
        let s = overlap_with_eigenvalues(&[4.0, 4.5, 5.0, 6.0]);
        let kept = inverse_sqrt_eigen(&s, 4, 4.0).expect("eigen");
        assert_eq!(kept.dropped, 0);
        let dropped = inverse_sqrt_eigen(&s, 4, 4.000001).expect("eigen");
        assert_eq!(dropped.dropped, 1);
    }

    #[test]
    fn sqr_inv_against_numpy() {
        // tests/data/linalg_scf/symmetric_eigen.py ("overlap").
        let s = [
            1.0, 0.995, 0.2, 0.1, 0.995, 1.0, 0.21, 0.1, 0.2, 0.21, 1.0, 0.3, 0.1, 0.1, 0.3, 1.0,
        ];
        let run_with = |tol: i32| {
            let mut ctx = Fake::new();
            ctx.ints.insert("lindep_tol".into(), tol);
            let mut args = [
                whole("s", &[4, 4], &s),
                whole("x", &[4, 4], &[0.0; 16]),
                Arg::scalar("n", 0.0),
            ];
            eigen_calc_sqr_inv(&mut ctx, &mut args).expect("eigen_calc_sqr_inv");
            let d: Vec<f64> = (0..4).map(|k| args[0].data[k + 4 * k]).collect();
            (d, args[1].data.clone(), args[2].data[0])
        };
        let (d, x, n) = run_with(2);
        assert_eq!(n, 1.0);
        assert_close(
            &d,
            &[
                0.6873396783043634,
                0.9175088745128744,
                1.2034497383740073,
                0.0,
            ],
            1e-12,
        );
        let want = [
            0.6601265413302603,
            0.661527204534013,
            0.29577658755078057,
            0.19781536176338202,
            0.24588142272001365,
            0.24072862454540733,
            -0.6095238906453782,
            -0.7141937286326304,
            0.06947402752317564,
            0.05874443213544919,
            -0.7354803340342718,
            0.6714098073767082,
            0.706362962571113,
            -0.7077998153990815,
            0.008094148390793829,
            -0.0022959073619454222,
        ];
        assert_close(&x, &want, 1e-12);
        let (d, x, n) = run_with(9);
        assert_eq!(n, 0.0);
        assert_close(
            &d,
            &[
                14.223781654732438,
                1.2034497383740073,
                0.9175088745128744,
                0.6873396783043634,
            ],
            1e-10,
        );
        let want = [
            0.706362962571113,
            -0.7077998153990815,
            0.008094148390793829,
            -0.0022959073619454222,
            0.06947402752317564,
            0.05874443213544919,
            -0.7354803340342718,
            0.6714098073767082,
            0.24588142272001365,
            0.24072862454540733,
            -0.6095238906453782,
            -0.7141937286326304,
            0.6601265413302603,
            0.661527204534013,
            0.29577658755078057,
            0.19781536176338202,
        ];
        assert_close(&x, &want, 1e-12);
    }

    #[test]
    fn sqr_inv_errors() {
        let err =
            |args: &mut [Arg]| eigen_calc_sqr_inv(&mut Fake::new(), args).expect_err("must fail");
        let e = err(&mut [
            whole("s", &[1, 1], &[1.0]),
            whole("x", &[1, 1], &[0.0]),
            Arg::scalar("n", 0.0),
        ]);
        assert!(e.contains("argument 1 (s) is 1 x 1"), "{e}");
        let e = err(&mut [
            whole("s", &[2, 2], &[1.0; 4]),
            whole("x", &[2, 2], &[0.0; 4]),
        ]);
        assert!(e.contains("expects 3 arguments"), "{e}");
        let e = err(&mut [
            whole("s", &[2, 2], &[1.0; 4]),
            whole("x", &[2, 2], &[0.0; 4]),
            whole("n", &[2], &[0.0; 2]),
        ]);
        assert!(e.contains("argument 3 must be a scalar, got n"), "{e}");
        let e = err(&mut [
            whole("s", &[4], &[1.0; 4]),
            whole("x", &[2, 2], &[0.0; 4]),
            Arg::scalar("n", 0.0),
        ]);
        assert!(e.contains("argument 1") && e.contains("rank 2"), "{e}");
        let e = err(&mut [
            whole("s", &[2, 2], &[1.0; 4]),
            whole("x", &[2, 2, 1], &[0.0; 4]),
            Arg::scalar("n", 0.0),
        ]);
        assert!(e.contains("argument 2") && e.contains("rank 2"), "{e}");
    }

    // --- gen_eigen_calc ------------------------------------------------------------------

    #[test]
    fn gen_eigen_calc_against_numpy_with_padded_zero_block() {
        // tests/data/linalg_scf/gen_eigen.py: a 3x3 Davidson-like matrix padded with a zero row
        // and column; the zero eigenvalue goes last as 0.0.
        let a = [
            4.0, 0.5, 0.2, 0.0, 1.0, 3.0, 0.1, 0.0, 2.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ];
        let values = [
            0.8601152028133742,
            2.628872693592416,
            4.511012103594216,
            0.0,
        ];
        let right = [
            -0.4462711310089527,
            -0.29116948041340407,
            0.8462047100458486,
            0.0,
            -0.5703131238453077,
            0.8211932549924725,
            -0.019610678842779703,
            0.0,
            -0.9342460681252757,
            -0.35098175544284094,
            -0.06321464655223845,
            0.0,
            0.0,
            0.0,
            0.0,
            1.0,
        ];
        let left = [
            -0.06065575643492039,
            -0.018292272292191058,
            0.9979911181897841,
            0.0,
            -0.3564020808749865,
            0.9251899643817997,
            0.130388214786397,
            0.0,
            -0.6891880544053062,
            -0.49135367744838626,
            -0.5325329936473193,
            0.0,
            0.0,
            0.0,
            0.0,
            1.0,
        ];
        let mut ctx = Fake::new();
        let mut args = [
            whole("gsmat", &[4, 4], &a),
            whole("salphal", &[4, 4], &[5.0; 16]),
            whole("salphar", &[4, 4], &[5.0; 16]),
            whole("sek", &[4], &[5.0; 4]),
        ];
        run(gen_eigen_calc, &mut ctx, &mut args).expect("gen_eigen_calc");
        assert_close(&args[3].data, &values, 1e-13);
        assert_columns_up_to_sign(&args[1].data, &left, 4, 1e-12);
        assert_columns_up_to_sign(&args[2].data, &right, 4, 1e-12);
        assert!(ctx.printed.is_empty());
    }

    #[test]
    fn gen_eigen_calc_complex_pair_warns_and_keeps_the_real_part() {
        // [[1,-2],[1,1]]: eigenvalues 1 ± i√2 (real parts tie, so the quicksort keeps the pair's
        // order, the +i√2 one first as in dgeev). By hand: the right vector of 1+i√2 is
        // (√(2/3), −i/√3); the left vector u (uᴴA = λuᴴ) is (1, −i√2)/√3, which dgeev rotates to
        // make its largest component real: (i/√3, √(2/3)). Each is stored as (real, imaginary)
        // columns, up to an overall sign.
        let mut ctx = Fake::new();
        let mut args = [
            whole("g", &[2, 2], &[1.0, 1.0, -2.0, 1.0]),
            whole("l", &[2, 2], &[0.0; 4]),
            whole("r", &[2, 2], &[0.0; 4]),
            whole("e", &[2], &[0.0; 2]),
        ];
        run(gen_eigen_calc, &mut ctx, &mut args).expect("gen_eigen_calc");
        assert_close(&args[3].data, &[1.0, 1.0], 1e-14);
        let (big, small) = ((2.0f64 / 3.0).sqrt(), (1.0f64 / 3.0).sqrt());
        assert_columns_up_to_sign(&args[2].data, &[big, 0.0, 0.0, -small], 4, 1e-14);
        assert_columns_up_to_sign(&args[1].data, &[0.0, big, small, 0.0], 4, 1e-14);
        // The warning, in gfortran's list-directed layout (tests/data/linalg_scf/list_directed.f90).
        let prefix = " WARNING complex component from DGEEV           1";
        let rest = ctx.printed.strip_prefix(prefix).expect("warning line");
        let value: f64 = rest.trim().parse().expect("a number");
        assert!((value - 2f64.sqrt()).abs() < 1e-14, "{value}");
        assert_eq!(rest, format!("{}\n", list_directed_real(value)));
    }

    #[test]
    fn gen_eigen_calc_zero_eigenvalues_sort_last_and_small_imaginary_parts_are_quiet() {
        // [[0,-0.5],[0.5,0]] ⊕ [3]: eigenvalues ±0.5i (real part 0 → key 999 → 0.0, imaginary
        // part below 1: no warning) and 3, which comes first.
        let a = [0.0, 0.5, 0.0, -0.5, 0.0, 0.0, 0.0, 0.0, 3.0];
        let mut ctx = Fake::new();
        let mut args = [
            whole("g", &[3, 3], &a),
            whole("l", &[3, 3], &[0.0; 9]),
            whole("r", &[3, 3], &[0.0; 9]),
            whole("e", &[3], &[0.0; 3]),
        ];
        run(gen_eigen_calc, &mut ctx, &mut args).expect("gen_eigen_calc");
        assert_close(&args[3].data, &[3.0, 0.0, 0.0], 1e-14);
        assert_columns_up_to_sign(&args[2].data[..3], &[0.0, 0.0, 1.0], 3, 1e-14);
        assert_columns_up_to_sign(&args[1].data[..3], &[0.0, 0.0, 1.0], 3, 1e-14);
        assert!(ctx.printed.is_empty());
    }

    #[test]
    fn gen_eigen_calc_accepts_1x1() {
        let mut ctx = Fake::new();
        let mut args = [
            whole("g", &[1, 1], &[-2.5]),
            whole("l", &[1, 1], &[0.0]),
            whole("r", &[1, 1], &[0.0]),
            whole("e", &[3], &[7.0; 3]),
        ];
        run(gen_eigen_calc, &mut ctx, &mut args).expect("gen_eigen_calc");
        assert_eq!(args[3].data, vec![-2.5, 7.0, 7.0]);
        assert_eq!(args[1].data[0].abs(), 1.0);
        assert_eq!(args[2].data[0].abs(), 1.0);
    }

    #[test]
    fn gen_eigen_calc_errors() {
        let err = |args: &mut [Arg]| gen_eigen_calc(&mut Fake::new(), args).expect_err("must fail");
        let m = |name: &str, r: usize, c: usize| whole(name, &[r, c], &vec![0.0; r * c]);
        let e = err(&mut [m("g", 2, 2), m("l", 2, 2), m("r", 2, 2)]);
        assert!(e.contains("expects 4 arguments"), "{e}");
        let e = err(&mut [
            m("g", 2, 3),
            m("l", 2, 2),
            m("r", 2, 2),
            whole("e", &[2], &[0.0; 2]),
        ]);
        assert!(e.contains("argument 1") && e.contains("square"), "{e}");
        let e = err(&mut [
            m("g", 2, 2),
            m("l", 3, 3),
            m("r", 2, 2),
            whole("e", &[2], &[0.0; 2]),
        ]);
        assert!(e.contains("argument 2 (l) is 3 x 3"), "{e}");
        let e = err(&mut [
            m("g", 2, 2),
            m("l", 2, 2),
            m("r", 2, 1),
            whole("e", &[2], &[0.0; 2]),
        ]);
        assert!(e.contains("argument 3 (r) is 2 x 1"), "{e}");
        let e = err(&mut [
            m("g", 2, 2),
            m("l", 2, 2),
            m("r", 2, 2),
            whole("e", &[1], &[0.0]),
        ]);
        assert!(e.contains("argument 4 (e) has 1 elements"), "{e}");
        let e = err(&mut [m("g", 2, 2), m("l", 2, 2), m("r", 2, 2), m("e", 2, 1)]);
        assert!(e.contains("argument 4") && e.contains("rank 1"), "{e}");
        let mut bad = [
            m("g", 2, 2),
            m("l", 2, 2),
            m("r", 2, 2),
            whole("e", &[2], &[0.0; 2]),
        ];
        bad[0].data[3] = f64::INFINITY;
        let e = err(&mut bad);
        assert!(e.contains("argument 1 (g) holds NaN or infinity"), "{e}");
    }

    // --- compute_diis --------------------------------------------------------------------

    #[test]
    fn compute_diis_against_numpy() {
        // tests/data/linalg_scf/diis.py: B of three error vectors, in the upper triangle of a
        // 5x5 array (slots 4 and 5 empty) with garbage below the diagonal.
        let b = [
            0.107,
            0.0341,
            -0.014899999999999998,
            0.0341,
            0.012900000000000002,
            -0.0048,
            -0.014899999999999998,
            -0.0048,
            0.003,
        ];
        let want = [0.039597236166066, 0.21768145042225298, 0.742721313411681];
        let mut bb = vec![0.0; 25];
        for i in 0..5 {
            for j in 0..5 {
                if i > j {
                    bb[i + 5 * j] = 50.0 + (i + 5 * j) as f64;
                } else if j < 3 {
                    bb[i + 5 * j] = b[i + 3 * j];
                }
            }
        }
        let before = bb.clone();
        let mut ctx = Fake::new();
        let mut args = [whole("bb", &[5, 5], &bb)];
        run(compute_diis, &mut ctx, &mut args).expect("compute_diis");
        let got = &args[0].data;
        let diag: Vec<f64> = (0..5).map(|k| got[k + 5 * k]).collect();
        assert_close(&diag[..3], &want, 1e-12);
        assert_eq!(&diag[3..], &[0.0, 0.0]);
        assert!((diag.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        for p in (0..25).filter(|p| p % 5 != p / 5) {
            assert_eq!(got[p], before[p], "off-diagonal element {p} changed");
        }
        assert!(ctx.printed.is_empty());
    }

    #[test]
    fn compute_diis_single_vector_gives_coefficient_one() {
        // One error vector: B = [b]; the bordered system gives c = 1, multiplier = b.
        let mut ctx = Fake::new();
        let mut args = [whole(
            "bb",
            &[3, 3],
            &[0.04, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        )];
        run(compute_diis, &mut ctx, &mut args).expect("compute_diis");
        assert_eq!(
            args[0].data,
            vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(solve_diis(&[0.04], 1), Ok(vec![1.0, 0.04]));
    }

    #[test]
    fn compute_diis_singular_systems_fail_like_dgesv() {
        let err = |data: &[f64], n: usize| {
            compute_diis(&mut Fake::new(), &mut [whole("bb", &[n, n], data)])
                .expect_err("must fail")
        };
        // No history at all: the 1x1 system [0] has a zero pivot (info = 1).
        let e = err(&[0.0; 4], 2);
        assert!(
            e.contains("argument 1 (bb)") && e.contains("info = 1"),
            "{e}"
        );
        // Two identical error vectors: B = [[1,1],[1,1]], zero pivot in column 2.
        let e = err(&[1.0, 1.0, 1.0, 1.0], 2);
        assert!(e.contains("info = 2"), "{e}");
        assert_eq!(
            solve_diis(&[1.0, 1.0, 1.0, 1.0], 2),
            Err(SingularDiis { info: 2 })
        );
    }

    #[test]
    fn compute_diis_shape_errors() {
        let err = |args: &mut [Arg]| compute_diis(&mut Fake::new(), args).expect_err("must fail");
        let e = err(&mut [whole("bb", &[2, 3], &[1.0; 6])]);
        assert!(e.contains("square"), "{e}");
        let e = err(&mut [whole("bb", &[4], &[1.0; 4])]);
        assert!(e.contains("rank 2"), "{e}");
        let e = err(&mut []);
        assert!(e.contains("expects 1 argument"), "{e}");
    }

    // --- diagonal helpers ----------------------------------------------------------------

    #[test]
    fn return_diagonal_uses_global_orbital_numbers() {
        // Block t[2,1] of shape 2x3 whose rows are orbitals 3,4 and columns orbitals 1,2,3
        // (0-based offsets 2 and 0): only (orbital 3, orbital 3) = local (0,2) is diagonal.
        let mut ctx = Fake::new();
        ctx.offsets.insert(("t".into(), 0, 2), 2);
        ctx.offsets.insert(("t".into(), 1, 1), 0);
        let data: Vec<f64> = (1..=6).map(f64::from).collect();
        let mut args = [
            Arg::block("t", vec![2, 1], vec![2, 3], data),
            Arg::scalar("s", 9.0),
        ];
        run(return_diagonal, &mut ctx, &mut args).expect("return_diagonal");
        assert_eq!(args[0].data, vec![0.0, 0.0, 0.0, 0.0, 5.0, 0.0]);
        assert_eq!(args[1].data, vec![5.0]);
    }

    #[test]
    fn return_diagonal_rank_4_keeps_one_diagonal_pair() {
        // Whole 2x2x2x2 array (offsets 0): zero where p≠q and r≠s; sum where p=q and r=s.
        let mut ctx = Fake::new();
        let data: Vec<f64> = (1..=16).map(f64::from).collect();
        let mut args = [whole("t", &[2, 2, 2, 2], &data), Arg::scalar("s", 0.0)];
        run(return_diagonal, &mut ctx, &mut args).expect("return_diagonal");
        let mut want = data.clone();
        let mut sum = 0.0;
        for (p, w) in want.iter_mut().enumerate() {
            let (a, b, c, d) = (p % 2, p / 2 % 2, p / 4 % 2, p / 8);
            if a != b && c != d {
                *w = 0.0;
            }
            if a == b && c == d {
                sum += *w;
            }
        }
        assert_eq!(args[0].data, want);
        assert_eq!(sum, 1.0 + 4.0 + 13.0 + 16.0);
        assert_eq!(args[1].data, vec![sum]);
    }

    #[test]
    fn return_diagonal_errors() {
        let err =
            |ctx: &mut Fake, args: &mut [Arg]| return_diagonal(ctx, args).expect_err("must fail");
        let e = err(
            &mut Fake::new(),
            &mut [whole("t", &[2, 2, 2], &[0.0; 8]), Arg::scalar("s", 0.0)],
        );
        assert!(e.contains("rank 2 or 4, got rank 3"), "{e}");
        let e = err(
            &mut Fake::new(),
            &mut [whole("t", &[2, 2], &[0.0; 4]), whole("s", &[2], &[0.0; 2])],
        );
        assert!(e.contains("argument 2 must be a scalar, got s"), "{e}");
        // A block whose segments cannot be placed among the orbitals.
        let e = err(
            &mut Fake::new(),
            &mut [
                Arg::block("t", vec![1, 1], vec![2, 2], vec![0.0; 4]),
                Arg::scalar("s", 0.0),
            ],
        );
        assert!(e.contains("cannot locate dimension 1"), "{e}");
    }

    #[test]
    fn invert_diagonal_divides_where_the_divisor_is_not_zero() {
        let mut ctx = Fake::new();
        let t = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let d = [2.0, 0.0, -3.0, 0.5, 1.0, 0.0, 7.0, -0.0];
        let mut args = [whole("t", &[2, 2, 2], &t), whole("d", &[2, 2, 2], &d)];
        run(invert_diagonal, &mut ctx, &mut args).expect("invert_diagonal");
        assert_eq!(args[0].data, vec![0.5, 2.0, -1.0, 8.0, 5.0, 6.0, 1.0, 8.0]);
        assert_eq!(args[1].data, d.to_vec());
        let mut args = [
            whole("t", &[1, 2, 1, 1, 1], &[3.0, 4.0]),
            whole("d", &[1, 2, 1, 1, 1], &[2.0, 0.0]),
        ];
        run(invert_diagonal, &mut ctx, &mut args).expect("rank 5");
        assert_eq!(args[0].data, vec![1.5, 4.0]);
    }

    #[test]
    fn invert_diagonal_errors() {
        let err =
            |args: &mut [Arg]| invert_diagonal(&mut Fake::new(), args).expect_err("must fail");
        let e = err(&mut [
            whole("t", &[2, 2], &[1.0; 4]),
            whole("d", &[2, 2], &[1.0; 4]),
        ]);
        assert!(e.contains("rank 3 or 5, got rank 2"), "{e}");
        let e = err(&mut [
            whole("t", &[1, 1, 1], &[1.0]),
            whole("d", &[1, 1, 1, 1, 1], &[1.0]),
        ]);
        assert!(e.contains("same rank"), "{e}");
        let e = err(&mut [
            whole("t", &[1, 2, 1], &[1.0; 2]),
            whole("d", &[2, 1, 1], &[1.0; 2]),
        ]);
        assert!(e.contains("same shape"), "{e}");
        let e = err(&mut [whole("t", &[1, 1, 1], &[1.0])]);
        assert!(e.contains("expects 2 arguments"), "{e}");
    }

    #[test]
    fn invert_diagonal_asym_zeroes_repeated_orbitals() {
        // T[k,a,i,a1,i1] with shape 1x2x1x2x2: a ∈ {5,6} (offset 4), i = 1 (offset 0),
        // a1 ∈ {5,6} (offset 4), i1 ∈ {1,2} (offset 0). Kept (divided) only where a≠a1 and
        // i≠i1: i1 = 2 and a ≠ a1. The state index (dimension 1) is a simple index.
        let mut ctx = Fake::new();
        for (d, seg, off) in [(1, 2, 4), (2, 1, 0), (3, 2, 4), (4, 1, 0)] {
            ctx.offsets.insert(("t".into(), d, seg), off);
        }
        let data: Vec<f64> = (1..=8).map(f64::from).collect();
        let mut args = [
            Arg::block("t", vec![1, 2, 1, 2, 1], vec![1, 2, 1, 2, 2], data.clone()),
            Arg::block("d", vec![1, 2, 1, 2, 1], vec![1, 2, 1, 2, 2], vec![2.0; 8]),
        ];
        run(invert_diagonal_asym, &mut ctx, &mut args).expect("invert_diagonal_asym");
        // positions p = a + 2·a1 + 4·i1 (extents 1,2,1,2,2)
        let want: Vec<f64> = (0..8)
            .map(|p| {
                let (a, a1, i1) = (p % 2, p / 2 % 2, p / 4);
                if a != a1 && i1 == 1 {
                    data[p] / 2.0
                } else {
                    0.0
                }
            })
            .collect();
        assert_eq!(args[0].data, want);
        // A zero divisor leaves a kept element alone.
        args[0].data = data.clone().into();
        args[1].data = vec![0.0; 8].into();
        run(invert_diagonal_asym, &mut ctx, &mut args).expect("zero divisors");
        assert_eq!(args[0].data[5], data[5]);
        assert_eq!(args[0].data[0], 0.0);
    }

    #[test]
    fn invert_diagonal_asym_errors() {
        let err =
            |args: &mut [Arg]| invert_diagonal_asym(&mut Fake::new(), args).expect_err("must fail");
        let e = err(&mut [
            whole("t", &[1, 1, 1], &[1.0]),
            whole("d", &[1, 1, 1], &[1.0]),
        ]);
        assert!(e.contains("rank 5, got rank 3"), "{e}");
        let e = err(&mut [
            whole("t", &[1, 1, 1, 1, 1], &[1.0]),
            whole("d", &[1, 1, 1], &[1.0]),
        ]);
        assert!(e.contains("same rank"), "{e}");
        let e = err(&mut [
            Arg::block("t", vec![1; 5], vec![1; 5], vec![1.0]),
            Arg::block("d", vec![1; 5], vec![1; 5], vec![1.0]),
        ]);
        assert!(e.contains("cannot locate dimension 2"), "{e}");
        // A whole array has offsets 0 and needs no segment table.
        let mut ok = [
            whole("t", &[1, 1, 1, 1, 1], &[3.0]),
            whole("d", &[1, 1, 1, 1, 1], &[1.0]),
        ];
        invert_diagonal_asym(&mut Fake::new(), &mut ok).expect("whole arrays");
        assert_eq!(ok[0].data, vec![0.0]);
    }

    #[test]
    fn return_diagonal_elements_keeps_local_diagonals() {
        let mut ctx = Fake::new();
        let mut args = [Arg::block(
            "t",
            vec![3, 3],
            vec![2, 2],
            vec![1.0, 2.0, 3.0, 4.0],
        )];
        run(return_diagonal_elements, &mut ctx, &mut args).expect("rank 2");
        assert_eq!(args[0].data, vec![1.0, 0.0, 0.0, 4.0]);
        // Rank 4, 2x2x3x3, in a non-first segment: only local positions count.
        let data: Vec<f64> = (1..=36).map(f64::from).collect();
        let mut args = [Arg::block("t", vec![1, 1, 2, 2], vec![2, 2, 3, 3], data)];
        run(return_diagonal_elements, &mut ctx, &mut args).expect("rank 4");
        for (p, v) in args[0].data.iter().enumerate() {
            let (a, b, c, d) = (p % 2, p / 2 % 2, p / 4 % 3, p / 12);
            let want = if a == b && c == d {
                (p + 1) as f64
            } else {
                0.0
            };
            assert_eq!(*v, want, "position {p}");
        }
    }

    #[test]
    fn return_diagonal_elements_errors() {
        let err = |args: &mut [Arg]| {
            return_diagonal_elements(&mut Fake::new(), args).expect_err("must fail")
        };
        let e = err(&mut [whole("t", &[2, 3], &[0.0; 6])]);
        assert!(e.contains("[2, 3]"), "{e}");
        let e = err(&mut [whole("t", &[2, 2, 2, 3], &[0.0; 24])]);
        assert!(e.contains("[2, 2, 2, 3]"), "{e}");
        let e = err(&mut [whole("t", &[2], &[0.0; 2])]);
        assert!(e.contains("rank 2 or 4, got rank 1"), "{e}");
        let e = err(&mut [Arg::scalar("x", 1.0)]);
        assert!(e.contains("rank 2 or 4, got rank 0"), "{e}");
    }

    // --- messages ------------------------------------------------------------------------

    #[test]
    fn list_directed_output_matches_gfortran() {
        // Lines printed by tests/data/linalg_scf/list_directed.f90 (gfortran 12).
        let line = |x: f64| {
            format!(
                " WARNING complex component from DGEEV{}{}",
                list_directed_int(3),
                list_directed_real(x)
            )
        };
        assert_eq!(
            line(1.5),
            " WARNING complex component from DGEEV           3   1.5000000000000000     "
        );
        assert_eq!(
            line(0.1),
            " WARNING complex component from DGEEV           3  0.10000000000000001     "
        );
        assert_eq!(
            line(123456.789),
            " WARNING complex component from DGEEV           3   123456.78900000000     "
        );
        assert_eq!(
            line(1e16),
            " WARNING complex component from DGEEV           3   10000000000000000.     "
        );
        assert_eq!(
            line(1e17),
            " WARNING complex component from DGEEV           3   1.0000000000000000E+017"
        );
        assert_eq!(
            line(2e-3),
            " WARNING complex component from DGEEV           3   2.0000000000000000E-003"
        );
        assert_eq!(
            line(-7.25),
            " WARNING complex component from DGEEV           3  -7.2500000000000000     "
        );
        assert_eq!(
            line(0.0),
            " WARNING complex component from DGEEV           3   0.0000000000000000     "
        );
    }

    #[test]
    fn specials_table_lists_every_special_once() {
        let names: Vec<&str> = SPECIALS.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(
            names,
            [
                "eigen_calc",
                "eigen_calc_sqr_inv",
                "gen_eigen_calc",
                "compute_diis",
                "return_diagonal",
                "invert_diagonal",
                "invert_diagonal_asym",
                "return_diagonal_elements"
            ]
        );
        assert!(
            SPECIALS
                .iter()
                .all(|(_, sig, _)| sig.chars().all(|c| "rwu".contains(c)))
        );
    }
}
