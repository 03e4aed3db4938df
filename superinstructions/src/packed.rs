//! The CPU's third way to run a contraction: a GEMM of our own whose packing reads each block
//! in place, through offset tables, so that no operand and no result is ever permuted.
//!
//! A GEMM library copies its operands into small panels before its micro-kernel runs (the
//! "packing"); faer does so from strided matrices only, so a block whose free and summed labels
//! interleave (`aoint[λ,μ,σ,ν]` with `μ,ν` free: `rccsd_rhf:1396`) must first be permuted into
//! a matrix, a pass over the whole block that costs up to a third of the GEMM. Here element
//! `(i, p)` of an operand is at `rows[i] + cols[p]` for any label order (each group's offsets
//! are the sums of its labels' strides, as in TBLIS's block-scatter matrices), so the panels are
//! gathered straight from the block as stored, and the result tile is written straight into
//! dst the same way.
//!
//! The micro-kernel is `MR × NR` = 24 × 8 of AVX-512 FMAs; packing uses vector copies where a
//! panel's offsets run with unit stride and 8 × 8 register transposes where the summed
//! offsets do; while a block of panels computes, the kernel prefetches the source lines the
//! next block will pack (on blocks beyond L3 this hides most of the packing). Without AVX-512 the same steps run in scalar code with `mul_add`, giving the same
//! bits (tested); the plan only chooses this path where AVX-512 is present
//! ([`available`]).

use crate::batched::{Dim, copy_cost, gemm_cost};
use crate::gemm::Dims;
use std::ops::Range;
use std::sync::OnceLock;

/// Rows of a micro-tile (three AVX-512 vectors).
const MR: usize = 24;
/// Columns of a micro-tile.
const NR: usize = 8;
/// Summed elements per packed panel.
const KC: usize = 512;
/// Sums of at most this many elements take one panel. Split into two of equal depth, sums
/// just past [`KC`] ran 1.1–1.2× as long: benzene's AO ladder `MiNj = LMSN * LiSj`, `k = 23²`
/// (docs/benchmarks.md, "Packed GEMM: one panel up to 576 summed elements").
const ONE_PANEL: usize = 576;

/// The depth of the panels for sums of `k` elements: all of them up to [`ONE_PANEL`], else
/// equal panels of at most [`KC`] (`k = 900` as 2 × 450, not 512 + 388).
fn panel_depth(k: usize) -> usize {
    if k <= ONE_PANEL {
        k
    } else {
        k.div_ceil(k.div_ceil(KC))
    }
}

/// Rows packed at once (`MC × KC` doubles stay in L2).
const MC: usize = 96;

/// Whether plans may choose this form: the vector kernel can run here, and the environment
/// variable `SIAL_NO_PACKED_GEMM` is unset (it turns the form off, for side-by-side
/// measurements and as an escape hatch).
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    enabled(&AVAILABLE, "SIAL_NO_PACKED_GEMM")
}

/// Whether a form of our own with an AVX-512 kernel may be chosen (this GEMM, `crate::dot`,
/// `crate::broadcast`): the CPU has AVX-512 and the environment variable `off` is unset;
/// decided once per form, in `cell`.
pub(crate) fn enabled(cell: &OnceLock<bool>, off: &str) -> bool {
    *cell.get_or_init(|| vector_kernel() && std::env::var_os(off).is_none())
}

/// Whether AVX-512 kernels can run on this CPU: AVX-512F and VL (for masked half-width
/// vectors), which every AVX-512 CPU but the Xeon Phi has.
pub(crate) fn vector_kernel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The share of the GEMM's model time the single form's copies must reach for this form to
/// replace it: this kernel runs at about 90% of faer's in chunks where both stream.
const COPIED_SHARE: f64 = 0.03;

/// Whether this form is worth its packing for a GEMM of `dims` whose single form copies
/// `copied` elements (a temporary of dst counted twice), the largest operand `largest`:
/// measured to win (docs/benchmarks.md, "Contractions packed from the blocks as stored",
/// "... all three copies") where that operand does not stay in L2 beside the others, the
/// copies are a few percent of the GEMM, and the tiles are full and deep; elsewhere faer's
/// kernel on the copied or batched operands is as fast or faster (one copy of benzene's
/// `aibj = cjbn * aicn`: 92% of the GEMM against 85% packed; `minj = amcn * aicj` at 100 rows:
/// 78% against 73% on a Zen 4). On Intel's CPUs (two 512-bit FMA units, L2 2 MiB) one tile of
/// rows suffices: that `minj = amcn * aicj` ran 72–75% packed against 61–64% as a GEMM on three
/// copies ("Packed GEMM: results of 96 rows on Intel").
fn worth_it(dims: Dims, (largest, copied): (usize, usize)) -> bool {
    let rows = if crate::permute::intel() { MC } else { 2 * MC };
    available()
        && largest >= 1 << 17
        && dims.m >= rows
        && dims.n >= 2 * NR
        && dims.k >= KC / 2
        && copy_cost(copied) >= COPIED_SHARE * gemm_cost(dims, 1)
}

/// Where each row and each column of a matrix lies in its block: element `(i, j)` at
/// `rows[i] + cols[j]`.
#[derive(Clone, Debug)]
struct Offsets {
    rows: Vec<usize>,
    cols: Vec<usize>,
}

impl Offsets {
    fn of(block: &[Dim], rows: &[Dim], cols: &[Dim]) -> Self {
        Offsets {
            rows: group_offsets(block, rows),
            cols: group_offsets(block, cols),
        }
    }

    fn transposed(&self) -> Matrix<'_> {
        Matrix {
            rows: &self.cols,
            cols: &self.rows,
        }
    }

    fn matrix(&self) -> Matrix<'_> {
        Matrix {
            rows: &self.rows,
            cols: &self.cols,
        }
    }
}

/// Borrowed offsets, possibly transposed.
#[derive(Clone, Copy)]
struct Matrix<'a> {
    rows: &'a [usize],
    cols: &'a [usize],
}

/// The largest offset of `a[i] + b[j]`: the last element two offset tables reach (0 for
/// empty tables).
pub(crate) fn reach(a: &[usize], b: &[usize]) -> usize {
    a.iter().max().copied().unwrap_or(0) + b.iter().max().copied().unwrap_or(0)
}

/// The offset in `block` (column-major) of every index of `group` (first label fastest).
pub(crate) fn group_offsets(block: &[Dim], group: &[Dim]) -> Vec<usize> {
    let strides: Vec<usize> = group
        .iter()
        .map(|d| {
            let p = block.iter().position(|x| x.0 == d.0).unwrap_or(0);
            block[..p].iter().map(|x| x.1).product()
        })
        .collect();
    let mut out = vec![0usize];
    for (d, s) in group.iter().zip(strides) {
        let prev = std::mem::take(&mut out);
        out.reserve(prev.len() * d.1);
        for i in 0..d.1 {
            out.extend(prev.iter().map(|o| o + i * s));
        }
    }
    out
}

/// A contraction as one packed GEMM: `dst (m×n) = left (m×k) · right (k×n)` with the three
/// blocks read and written in place.
#[derive(Clone, Debug)]
pub(crate) struct Packed {
    dims: Dims,
    dst: Offsets,
    left: Offsets,
    right: Offsets,
    /// Computes dst's transpose, `Dᵀ = Rᵀ·Lᵀ`: `left` and `right` are the offsets of the
    /// contraction's right and left blocks.
    swapped: bool,
}

/// `group` ordered to start with `block`'s unit-stride label if it has it (so that the
/// group's offsets run contiguously there), else as `other` stores it, else as given.
fn ordered(group: &[Dim], block: &[Dim], other: &[Dim]) -> Vec<Dim> {
    let by = |t: &[Dim]| -> Vec<Dim> {
        t.iter()
            .copied()
            .filter(|d| group.iter().any(|g| g.0 == d.0))
            .collect()
    };
    let starts = |t: &[Dim]| t.first().is_some_and(|f| group.iter().any(|g| g.0 == f.0));
    if starts(block) {
        by(block)
    } else if starts(other) {
        by(other)
    } else {
        group.to_vec()
    }
}

impl Packed {
    /// The plan for blocks whose labels (unit extents removed) are `dst`, `left` and `right`,
    /// with groups `m` (free in left), `n` (free in right) and `k` (summed).
    pub(crate) fn new(b: &crate::batched::Blocks<'_>, m: &[Dim], n: &[Dim], k: &[Dim]) -> Self {
        // Rows of left and dst, columns of right and dst: the orders that give unit runs
        // where the packing and the tile's write-back can use them.
        let m = ordered(m, b.left, b.dst);
        let k = ordered(k, b.left, b.right);
        let n = ordered(n, b.right, b.dst);
        let prod = |v: &[Dim]| v.iter().map(|d| d.1).product::<usize>();
        Packed {
            dims: Dims {
                m: prod(&m),
                n: prod(&n),
                k: prod(&k),
            },
            dst: Offsets::of(b.dst, &m, &n),
            left: Offsets::of(b.left, &m, &k),
            right: Offsets::of(b.right, &k, &n),
            swapped: false,
        }
    }

    /// [`Self::new`] computing dst's transpose, `Dᵀ = Rᵀ·Lᵀ`: its rows are right's free
    /// labels `n`. [`Self::execute`] still takes the contraction's left and right blocks.
    fn transposed(b: &crate::batched::Blocks<'_>, m: &[Dim], n: &[Dim], k: &[Dim]) -> Self {
        let exchanged = crate::batched::Blocks {
            dst: b.dst,
            left: b.right,
            right: b.left,
        };
        Packed {
            swapped: true,
            ..Packed::new(&exchanged, n, m, k)
        }
    }

    /// The form for a contraction whose single GEMM copies `copied` = (its largest operand,
    /// all its elements), where it is worth it ([`worth_it`]) and streams
    /// ([`Self::streams`]): as given, else computing dst's transpose (`mibc = aibn * amcn`,
    /// where right's `m` leads dst and left's `i` does not).
    pub(crate) fn chosen(
        b: &crate::batched::Blocks<'_>,
        (m, n, k): (&[Dim], &[Dim], &[Dim]),
        copied: (usize, usize),
    ) -> Option<Self> {
        std::iter::once(Packed::new(b, m, n, k))
            .chain(std::iter::once_with(|| Packed::transposed(b, m, n, k)))
            .find(|p| worth_it(p.dims, copied) && p.streams())
    }

    /// Whether the packing of left and the write-back run at vector speed: left's rows run
    /// contiguously for a whole panel, or its summed labels for 8 or more, and dst's rows for
    /// 8 or more. The measured wins all have this (docs/benchmarks.md); gathered panels and
    /// scattered write-backs are slower than faer on permuted copies.
    pub(crate) fn streams(&self) -> bool {
        let left = lead_run(&self.left.rows) >= MR.min(self.dims.m)
            || lead_run(&self.left.cols) >= 8.min(self.dims.k);
        left && lead_run(&self.dst.rows) >= 8.min(self.dims.m)
    }

    /// `dst = beta * dst + left · right`. Lengths were checked by the caller; `k > 0`.
    pub(crate) fn execute(
        &self,
        dst: &mut [f64],
        (left, right): (&[f64], &[f64]),
        beta: f64,
        scratch: &mut [Vec<f64>; 3],
        vector: bool,
    ) {
        if beta != 0.0 && beta != 1.0 {
            crate::elementwise::scale(dst, beta);
        }
        let (left, right) = if self.swapped {
            (right, left)
        } else {
            (left, right)
        };
        let Dims { m, n, k } = self.dims;
        let kc_max = panel_depth(k);
        let [_, apack, bpack] = scratch;
        let mut bufs = Panels {
            a: crate::batched::sized(apack, MC.min(m).div_ceil(MR) * MR * kc_max),
            b: crate::batched::sized(bpack, n.div_ceil(NR) * NR * kc_max),
            depth: kc_max,
            lines: Vec::new(),
            vector,
        };
        for p0 in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - p0);
            let b = self.right.transposed();
            for j0 in (0..n).step_by(NR) {
                let nr = NR.min(n - j0);
                pack::<NR>(
                    &mut bufs.b[j0 * kc_max..],
                    right,
                    b,
                    (j0, nr),
                    (p0, kc),
                    vector,
                );
            }
            for i0 in (0..m).step_by(MC) {
                let a = self.left.matrix();
                for ir in (0..MC.min(m - i0)).step_by(MR) {
                    let mr = MR.min(m - i0 - ir);
                    let panel = &mut bufs.a[ir * kc_max..];
                    pack::<MR>(panel, left, a, (i0 + ir, mr), (p0, kc), vector);
                }
                // While this block computes, the next one's source is fetched into L2.
                let (np0, ni0) = if i0 + MC < m {
                    (p0, i0 + MC)
                } else {
                    (p0 + kc, 0)
                };
                let next = (np0 < k).then(|| (ni0..(ni0 + MC).min(m), np0..(np0 + kc_max).min(k)));
                bufs.lines_of(a, next);
                let accumulate = beta != 0.0 || p0 > 0;
                self.block(dst, left, &bufs, (i0, kc), accumulate);
            }
        }
    }

    /// The micro-tiles of rows `i0..i0 + MC` against all columns, from packed panels of depth
    /// `kc`, written into dst.
    fn block(
        &self,
        dst: &mut [f64],
        left: &[f64],
        bufs: &Panels<'_>,
        (i0, kc): (usize, usize),
        accumulate: bool,
    ) {
        let Dims { m, n, .. } = self.dims;
        let mc = MC.min(m - i0);
        let c = self.dst.matrix();
        let calls = n.div_ceil(NR) * mc.div_ceil(MR);
        let share = |q: usize| q * bufs.lines.len() / calls;
        let mut tile = [0.0f64; MR * NR];
        let mut q = 0;
        for j0 in (0..n).step_by(NR) {
            let nr = NR.min(n - j0);
            for ir in (0..mc).step_by(MR) {
                let mr = MR.min(mc - ir);
                let fetch = (left, &bufs.lines[share(q)..share(q + 1)]);
                q += 1;
                let (a, b) = (&bufs.a[ir * bufs.depth..], &bufs.b[j0 * bufs.depth..]);
                kernel(kc, a, b, nr, &mut tile, bufs.vector, fetch);
                let rows = &c.rows[i0 + ir..i0 + ir + mr];
                write_tile(dst, rows, &c.cols[j0..j0 + nr], &tile, accumulate);
            }
        }
    }
}

/// The packed panels of one block of left and of all of right, and the source offsets to
/// fetch ahead.
struct Panels<'a> {
    a: &'a mut [f64],
    b: &'a mut [f64],
    /// Summed elements of a full panel ([`panel_depth`]): the panels' stride in `a` and `b`.
    depth: usize,
    /// Offsets in left of the lines the next block will pack (one per 8 elements).
    lines: Vec<usize>,
    vector: bool,
}

impl Panels<'_> {
    /// Lists the lines of `a`'s rows and columns in `next`, if any.
    fn lines_of(&mut self, a: Matrix<'_>, next: Option<(Range<usize>, Range<usize>)>) {
        self.lines.clear();
        if let Some((rows, cols)) = next {
            for &r in &a.rows[rows] {
                self.lines
                    .extend(a.cols[cols.clone()].iter().step_by(8).map(|c| r + c));
            }
        }
    }
}

/// How many offsets at the start run with unit stride.
fn lead_run(o: &[usize]) -> usize {
    1 + o.windows(2).take_while(|w| w[1] == w[0] + 1).count()
}

/// Whether offsets run with unit stride.
fn unit_run(o: &[usize]) -> bool {
    lead_run(o) >= o.len()
}

/// Packs rows `r0..r0+mr` (zero-padded to `R`) and columns `p0..p0+kc` of `x` into `out` as
/// `out[p * R + r]`.
fn pack<const R: usize>(
    out: &mut [f64],
    data: &[f64],
    x: Matrix<'_>,
    (r0, mr): (usize, usize),
    (p0, kc): (usize, usize),
    vector: bool,
) {
    let rows = &x.rows[r0..r0 + mr];
    let cols = &x.cols[p0..p0 + kc];
    if unit_run(rows) {
        for (p, &c) in cols.iter().enumerate() {
            let s = rows[0] + c;
            let o = &mut out[p * R..p * R + R];
            o[..mr].copy_from_slice(&data[s..s + mr]);
            o[mr..].fill(0.0);
        }
        return;
    }
    let mut p = 0;
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (vector, &mut p);
    #[cfg(target_arch = "x86_64")]
    if vector && mr == R && R.is_multiple_of(8) {
        while p + 8 <= kc {
            if !unit_run(&cols[p..p + 8]) {
                gather_column(&mut out[p * R..p * R + R], data, rows, cols[p]);
                p += 1;
                continue;
            }
            for g in (0..R).step_by(8) {
                let rows8 = &rows[g..g + 8];
                let last = rows8.iter().max().map_or(0, |r| r + cols[p] + 8);
                assert!(last <= data.len(), "packed GEMM offsets out of bounds");
                // SAFETY: `available()` was true when the plan chose the vector path, every
                // read lies below `last <= data.len()`, and the 8 writes at stride R stay
                // inside `out[p * R ..(p + 8) * R]`, which the caller sized.
                unsafe { x86::transpose8(data, rows8, cols[p], &mut out[p * R + g..], R) };
            }
            p += 8;
        }
    }
    for (q, &c) in cols.iter().enumerate().skip(p) {
        gather_column(&mut out[q * R..q * R + R], data, rows, c);
    }
}

/// One packed column: `out[r] = data[rows[r] + c]`, zero-padded.
fn gather_column(out: &mut [f64], data: &[f64], rows: &[usize], c: usize) {
    for (o, &r) in out.iter_mut().zip(rows) {
        *o = data[r + c];
    }
    out[rows.len()..].fill(0.0);
}

/// `tile[j * MR + r] = Σ_p a[p * MR + r] · b[p * NR + j]` for `j < nr`; the vector kernel
/// also prefetches into L2 one line of `base` per step, at the offsets `ahead`.
fn kernel(
    kc: usize,
    a: &[f64],
    b: &[f64],
    nr: usize,
    tile: &mut [f64; MR * NR],
    vector: bool,
    (base, ahead): (&[f64], &[usize]),
) {
    assert!(a.len() >= kc * MR && b.len() >= kc * NR && nr <= NR);
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: AVX-512 is present (`available()`), and the kernel reads `kc * MR` elements
        // of `a`, `kc * NR` of `b` (asserted above) and writes `nr * MR` of `tile`; it only
        // prefetches offsets of `ahead` that lie inside `base`.
        unsafe {
            let (a, b, t) = (a.as_ptr(), b.as_ptr(), tile.as_mut_ptr());
            let (pfb, pfl) = (base, ahead);
            match nr {
                8 => x86::kernel::<8>(kc, a, b, t, pfb, pfl),
                7 => x86::kernel::<7>(kc, a, b, t, pfb, pfl),
                6 => x86::kernel::<6>(kc, a, b, t, pfb, pfl),
                5 => x86::kernel::<5>(kc, a, b, t, pfb, pfl),
                4 => x86::kernel::<4>(kc, a, b, t, pfb, pfl),
                3 => x86::kernel::<3>(kc, a, b, t, pfb, pfl),
                2 => x86::kernel::<2>(kc, a, b, t, pfb, pfl),
                _ => x86::kernel::<1>(kc, a, b, t, pfb, pfl),
            }
        }
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (vector, base, ahead);
    // The same sums in the same order, each step one fused multiply-add.
    tile[..nr * MR].fill(0.0);
    for p in 0..kc {
        let (ap, bp) = (&a[p * MR..p * MR + MR], &b[p * NR..p * NR + nr]);
        for (j, &bj) in bp.iter().enumerate() {
            for (t, &ar) in tile[j * MR..j * MR + MR].iter_mut().zip(ap) {
                *t = ar.mul_add(bj, *t);
            }
        }
    }
}

/// Writes (or adds) the tile's `rows.len() × cols.len()` corner into dst, a contiguous run of
/// rows at a time.
fn write_tile(
    dst: &mut [f64],
    rows: &[usize],
    cols: &[usize],
    tile: &[f64; MR * NR],
    accumulate: bool,
) {
    let mut r0 = 0;
    while r0 < rows.len() {
        let len = lead_run(&rows[r0..]);
        for (j, &c) in cols.iter().enumerate() {
            let t = &tile[j * MR + r0..j * MR + r0 + len];
            let at = rows[r0] + c;
            let d = &mut dst[at..at + len];
            if accumulate {
                d.iter_mut().zip(t).for_each(|(d, t)| *d += t);
            } else {
                d.copy_from_slice(t);
            }
        }
        r0 += len;
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    /// The `MR × N` micro-tile: `N` broadcasts of `b` against three vectors of `a` per step.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn kernel<const N: usize>(
        kc: usize,
        a: *const f64,
        b: *const f64,
        tile: *mut f64,
        base: &[f64],
        pf: &[usize],
    ) {
        // SAFETY (whole body): the caller guarantees the extents documented in `super::kernel`.
        unsafe {
            let mut c = [[_mm512_setzero_pd(); 3]; N];
            let np = pf.len().min(kc);
            for p in 0..kc {
                if p < np {
                    let o = *pf.get_unchecked(p);
                    if o < base.len() {
                        _mm_prefetch::<_MM_HINT_T1>(base.as_ptr().add(o).cast());
                    }
                }
                let ap = a.add(p * MR);
                let a0 = _mm512_loadu_pd(ap);
                let a1 = _mm512_loadu_pd(ap.add(8));
                let a2 = _mm512_loadu_pd(ap.add(16));
                let bp = b.add(p * NR);
                for (j, cj) in c.iter_mut().enumerate() {
                    let bj = _mm512_set1_pd(*bp.add(j));
                    cj[0] = _mm512_fmadd_pd(a0, bj, cj[0]);
                    cj[1] = _mm512_fmadd_pd(a1, bj, cj[1]);
                    cj[2] = _mm512_fmadd_pd(a2, bj, cj[2]);
                }
            }
            for (j, cj) in c.iter().enumerate() {
                _mm512_storeu_pd(tile.add(j * MR), cj[0]);
                _mm512_storeu_pd(tile.add(j * MR + 8), cj[1]);
                _mm512_storeu_pd(tile.add(j * MR + 16), cj[2]);
            }
        }
    }

    /// Eight vectors of eight elements (rows), transposed in registers: element `r` of
    /// result `q` is element `q` of row `r`. Pairs of rows are interleaved, then 128-bit
    /// lanes gathered twice. Also the permute kernel's 8 × 8 block.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn transpose_registers(r: [__m512d; 8]) -> [__m512d; 8] {
        // Lane L of t[2p] holds (row 2p, row 2p + 1) at column 2L, of t[2p + 1] at 2L + 1.
        let t: [__m512d; 8] = std::array::from_fn(|i| {
            let (x, y) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
            if i % 2 == 0 {
                _mm512_unpacklo_pd(x, y)
            } else {
                _mm512_unpackhi_pd(x, y)
            }
        });
        // u: lanes 0, 2 or 1, 3 of two row pairs.
        let lo = |x, y| _mm512_shuffle_f64x2::<0b10_00_10_00>(x, y);
        let hi = |x, y| _mm512_shuffle_f64x2::<0b11_01_11_01>(x, y);
        let u = [
            lo(t[0], t[2]),
            hi(t[0], t[2]),
            lo(t[1], t[3]),
            hi(t[1], t[3]),
            lo(t[4], t[6]),
            hi(t[4], t[6]),
            lo(t[5], t[7]),
            hi(t[5], t[7]),
        ];
        [
            lo(u[0], u[4]),
            lo(u[2], u[6]),
            lo(u[1], u[5]),
            lo(u[3], u[7]),
            hi(u[0], u[4]),
            hi(u[2], u[6]),
            hi(u[1], u[5]),
            hi(u[3], u[7]),
        ]
    }

    /// Eight rows of eight contiguous elements, transposed: `out[q * ld + r] =
    /// data[rows[r] + c + q]` for `q, r < 8`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn transpose8(
        data: &[f64],
        rows: &[usize],
        c: usize,
        out: &mut [f64],
        ld: usize,
    ) {
        // SAFETY (whole body): the caller checked every read against `data.len()`; `out`
        // holds `7 * ld + 8` elements.
        unsafe {
            let d = data.as_ptr();
            let r: [__m512d; 8] = std::array::from_fn(|i| _mm512_loadu_pd(d.add(rows[i] + c)));
            let o = transpose_registers(r);
            let out = out.as_mut_ptr();
            for (q, v) in o.into_iter().enumerate() {
                _mm512_storeu_pd(out.add(q * ld), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batched::Blocks;
    use crate::labels::Label;
    use crate::shape::Shape;
    use crate::testutil::{naive_contract, random_vec};
    use proptest::prelude::*;

    /// Runs `d = l * r` packed, on the scalar path and (where present) the vector path, for
    /// beta 0, 1 and 0.5, against the naive loop; the two paths must agree bit for bit.
    fn check(d: &[Label], l: &[Label], r: &[Label], ext: &[usize], seed: u64) {
        check_form(d, l, r, ext, seed, false);
    }

    /// [`check`] for the form as given or computing dst's transpose (`swapped`).
    fn check_form(d: &[Label], l: &[Label], r: &[Label], ext: &[usize], seed: u64, swapped: bool) {
        let dims = |v: &[Label]| -> Vec<Dim> {
            v.iter()
                .map(|&x| (x, ext[x as usize]))
                .filter(|x| x.1 != 1)
                .collect()
        };
        let shape =
            |v: &[Label]| Shape::new(&v.iter().map(|&x| ext[x as usize]).collect::<Vec<_>>());
        let (ds, ls, rs) = (shape(d).unwrap(), shape(l).unwrap(), shape(r).unwrap());
        let (lv, rv) = (random_vec(ls.len(), seed), random_vec(rs.len(), seed + 1));
        let want = naive_contract((d, &ds), (&lv, l, &ls), (&rv, r, &rs));
        let (dd, ld, rd) = (dims(d), dims(l), dims(r));
        let only = |v: &[Dim], o: &[Dim]| -> Vec<Dim> {
            v.iter()
                .copied()
                .filter(|x| o.iter().any(|y| y.0 == x.0))
                .collect()
        };
        let (m, n, k) = (only(&ld, &dd), only(&rd, &dd), only(&ld, &rd));
        if ext.contains(&0) {
            return;
        }
        let blocks = Blocks {
            dst: &dd,
            left: &ld,
            right: &rd,
        };
        let p = if swapped {
            Packed::transposed(&blocks, &m, &n, &k)
        } else {
            Packed::new(&blocks, &m, &n, &k)
        };
        for beta in [0.0, 1.0, 0.5] {
            let d0 = random_vec(ds.len(), seed + 2);
            let run = |vector: bool| {
                let mut out = if beta == 0.0 {
                    vec![f64::NAN; ds.len()]
                } else {
                    d0.clone()
                };
                let mut scratch = Default::default();
                p.execute(&mut out, (&lv, &rv), beta, &mut scratch, vector);
                out
            };
            let scalar = run(false);
            for i in 0..scalar.len() {
                let w = beta * if beta == 0.0 { 0.0 } else { d0[i] } + want[i];
                assert!(
                    (scalar[i] - w).abs() <= 1e-12 * (1.0 + w.abs()),
                    "d{d:?} = l{l:?} * r{r:?}, beta {beta}: element {i} is {} expected {w}",
                    scalar[i]
                );
            }
            if available() {
                let vector = run(true);
                assert!(
                    vector
                        .iter()
                        .zip(&scalar)
                        .all(|(v, s)| v.to_bits() == s.to_bits()),
                    "d{d:?} = l{l:?} * r{r:?}, beta {beta}: vector and scalar paths differ"
                );
            }
        }
    }

    #[test]
    fn every_fast_path_and_every_tail() {
        // rccsd_rhf:1396 (`MiNj = LMSN * LiSj`): rows run with stride, the summed labels
        // contiguously (transposing packs), and k = 34² > KC (two panels, accumulated).
        let ext = [34, 27, 34, 5, 5, 3];
        check(&[1, 3, 2, 4], &[0, 1, 5, 2], &[0, 3, 5, 4], &ext, 1);
        // Rows contiguous in left and dst (copying packs, vector write-back); m = 27·34 not a
        // multiple of MR, n = 5 below NR.
        check(&[1, 2, 3], &[1, 2, 0], &[0, 3], &ext, 2);
        // Dst transposed against the GEMM (scattered write-back), right transposed.
        check(&[3, 1, 2], &[0, 1, 2], &[3, 0], &ext, 3);
        // Summed offsets contiguous only in runs of 5 (no 8-wide run): gathered columns.
        check(&[1, 0], &[3, 1, 4], &[4, 3, 0], &ext, 4);
        // A matrix-vector product, an outer product, a single row.
        check(&[1], &[1, 0], &[0], &ext, 5);
        check(&[1, 0], &[1], &[0], &ext, 6);
        check(&[0], &[1], &[1, 0], &ext, 7);
        // Dst's transpose (`mibc = aibn * amcn` as `Dᵀ = Rᵀ·Lᵀ`): rows `m c` from right.
        check_form(
            &[4, 3, 1, 5],
            &[0, 3, 1, 2],
            &[0, 4, 5, 2],
            &[34, 27, 5, 27, 34, 5],
            8,
            true,
        );
    }

    /// Sums up to 576 elements in one panel (benzene's AO ladder, `k = 23²`, and `24²`), longer
    /// ones in equal panels of at most 512; one panel and two give the naive sums.
    #[test]
    fn sums_up_to_576_take_one_panel() {
        let depths: Vec<usize> = [100, 512, 529, 576, 577, 900, 1156]
            .iter()
            .map(|&k| panel_depth(k))
            .collect();
        assert_eq!(depths, [100, 512, 529, 576, 289, 450, 386]);
        // `ij = ik * kj` with k = 24 · 24 (one panel) and 25 · 24 (two of 300).
        for (k0, seed) in [(24, 11), (25, 12)] {
            let ext = [30, k0, 24, 9];
            check(&[0, 3], &[0, 1, 2], &[1, 2, 3], &ext, seed);
        }
    }

    /// `mibc = aibn * amcn` (`rccsd_rhf:1894`) at benzene/6-31G's extents, where the single
    /// form copies all three blocks: dst is led by right's free `m`, so the form chosen
    /// computes dst's transpose (on CPUs with AVX-512; none elsewhere).
    #[test]
    fn a_result_led_by_right_free_labels_is_packed_transposed() {
        let (a, i, b, n, m, c) = ((0, 24), (1, 21), (2, 24), (3, 21), (4, 21), (5, 24));
        let blocks = Blocks {
            dst: &[m, i, b, c],
            left: &[a, i, b, n],
            right: &[a, m, c, n],
        };
        let len = 24 * 21 * 24 * 21;
        let p = Packed::chosen(&blocks, (&[i, b], &[m, c], &[a, n]), (len, 4 * len));
        assert_eq!(p.as_ref().map(|p| p.swapped), available().then_some(true));
    }

    /// `minj = amcn * aicj` at `large`'s extents (100 rows, three copies for a GEMM) is packed
    /// on Intel's CPUs only.
    #[test]
    fn results_of_one_tile_of_rows_are_packed_on_intel() {
        let (m, i, n, j, a, c) = ((0, 10), (1, 10), (2, 10), (3, 10), (4, 40), (5, 40));
        let blocks = Blocks {
            dst: &[m, i, n, j],
            left: &[a, m, c, n],
            right: &[a, i, c, j],
        };
        let len = 40 * 10 * 40 * 10;
        let copied = 2 * len + 2 * 10_000;
        let p = Packed::chosen(&blocks, (&[m, n], &[i, j], &[a, c]), (len, copied));
        assert_eq!(p.is_some(), available() && crate::permute::intel());
    }

    #[test]
    fn only_streaming_layouts_are_offered() {
        let packed = |d: &[Dim], l: &[Dim], r: &[Dim]| {
            let only = |v: &[Dim], o: &[Dim]| -> Vec<Dim> {
                v.iter()
                    .copied()
                    .filter(|x| o.iter().any(|y| y.0 == x.0))
                    .collect()
            };
            let b = Blocks {
                dst: d,
                left: l,
                right: r,
            };
            Packed::new(&b, &only(l, d), &only(r, d), &only(l, r))
        };
        let (l, m, s, n, i, j) = ((0, 24), (1, 24), (2, 24), (3, 24), (4, 5), (5, 5));
        // The AO ladder: left's summed labels and dst's rows run contiguously.
        assert!(packed(&[m, i, n, j], &[l, m, s, n], &[l, i, s, j]).streams());
        // Dst led by a column label: every tile would be scattered.
        assert!(!packed(&[i, m, n, j], &[l, m, s, n], &[l, i, s, j]).streams());
        // Left led by a summed label of extent 5: neither its rows nor its summed labels run.
        let (l5, s5) = ((0, 5), (2, 5));
        assert!(!packed(&[m, i, n, j], &[l5, m, s5, n], &[l5, i, s5, j]).streams());
    }

    #[test]
    fn group_offsets_follow_the_block_strides() {
        // Block [a:2, b:3, c:4]; group [c, a]: offset = 6·c + a, first label fastest.
        let block = [(0, 2), (1, 3), (2, 4)];
        let o = group_offsets(&block, &[(2, 4), (0, 2)]);
        assert_eq!(o, vec![0, 6, 12, 18, 1, 7, 13, 19]);
        assert_eq!(group_offsets(&block, &[]), vec![0]);
    }

    proptest! {
        #[test]
        fn random_patterns_match_naive(
            (d, l, r, ext) in crate::testutil::contraction_pattern(6),
            seed in 0u64..1000,
        ) {
            check(&d, &l, &r, &ext, seed);
        }
    }
}
