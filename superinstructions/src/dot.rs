//! The CPU's fourth way to run a contraction: inner products along a summed label that runs
//! with unit stride, for results of a few hundred elements summed over thousands.
//!
//! `ai = cadm * dicm` (`rccsd_rhf:787`) sums 1805 products into each of 95 elements (water,
//! cc-pVDZ). As one GEMM both blocks must first be permuted into matrices, which costs more
//! than the GEMM itself (27–41% of the GEMM rate at every scale, docs/benchmarks.md). Here the
//! block in which a summed label (the *lane*) has unit stride is read in place: every element
//! of dst is a sum of inner products of lane runs, `dst[f, g] = Σ_κ Σ_c near[c, f, κ] ·
//! far[c, g, κ]`, with the other block copied so that the lane comes first in it too (a copy of
//! the smaller block, or none where the lane has unit stride in both). The AVX-512 kernel keeps
//! 5 × 5 (or 4 × 5) elements of dst as 25 (20) vector sums along the lane, for all of `κ`, and
//! adds up each vector's lanes at the end; where a tile's rows (or columns) lie evenly apart,
//! it moves one pointer for them per pair of runs instead of computing one each (on cores
//! that issue two FMAs a cycle that bookkeeping, not the FMAs, bounded short lanes). Sums run
//! in another order than a GEMM's: results agree with it to rounding (tested against a naive
//! loop to 1e-12 relative).

use crate::batched::{Blocks, Copy, Dim};
use crate::error::KernelError;
use crate::packed::{enabled, group_offsets, reach};
use std::sync::OnceLock;

/// Rows of dst (free labels of the in-place block) per kernel call: [`ROWS`], or [`FEWER_ROWS`]
/// where that computes fewer rows again (see [`tile_rows`]).
const ROWS: usize = 5;
const FEWER_ROWS: usize = 4;
/// Most columns of dst (free labels of the other block) per kernel call.
#[cfg(target_arch = "x86_64")]
const COLS: usize = 5;
/// Elements per vector.
const LANES: usize = 8;

/// Whether plans may choose this form: the AVX-512 kernel can run here, and the environment
/// variable `SIAL_NO_DOT_KERNEL` is unset (for side-by-side measurements).
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    enabled(&AVAILABLE, "SIAL_NO_DOT_KERNEL")
}

/// A contraction as inner products along the lane (see the module documentation).
#[derive(Clone, Debug)]
pub(crate) struct Dot {
    /// Whether the in-place ("near") block is the left operand.
    near_is_left: bool,
    /// Extent of the lane.
    lane: usize,
    /// Rows of dst per kernel call ([`tile_rows`]).
    rows: usize,
    /// Pairs of runs per pass over dst ([`runs_per_pass`]).
    pass: usize,
    /// Offsets in the near block of each index of its free labels, and of the summed labels
    /// but the lane.
    near_free: Vec<usize>,
    near_rest: Vec<usize>,
    /// The far block's copy, if its lane is not first already.
    far_copy: Option<Copy>,
    far_free: Vec<usize>,
    far_rest: Vec<usize>,
    /// Offsets in dst of the near and of the far free labels.
    dst_near: Vec<usize>,
    dst_far: Vec<usize>,
    /// Element counts of the near block, the far block (as the kernel reads it) and dst.
    lens: [usize; 3],
}

/// Rows per kernel call for `m` rows of dst: [`ROWS`] (five rows by five columns make 25 sums
/// for 10 loads, four by five 20 for 9), unless the last call, overlapping the one before,
/// would compute more rows again than with [`FEWER_ROWS`] (12 rows: three calls of four, or
/// three of five). Every sum takes the same products in the same order either way: the choice
/// changes no bits.
fn tile_rows(m: usize) -> usize {
    let computed = |r: usize| m.div_ceil(r) * r;
    if m >= ROWS && computed(ROWS) <= computed(FEWER_ROWS) {
        ROWS
    } else {
        FEWER_ROWS
    }
}

/// Pairs of runs per pass over every tile of dst: all of them where one pair's runs for every
/// row and column (`lines` of `lane` elements) take at most [`PASS_BYTES`] for all pairs;
/// else as many as fit there, if that is at least [`MIN_PASS`]. Within a pass the far block's
/// runs for every column stay in L2 while each tile of rows reads them, instead of coming from
/// L3 or memory once per tile of rows; each tile's sums are kept from one pass to the next,
/// which shorter passes pay more for than L2 saves (`rccsd_rhf:1507` at the bench's `large`
/// scale, 8 pairs of runs per pass: 0.93×).
fn runs_per_pass(lane: usize, lines: usize, runs: usize) -> usize {
    let per_run = (lane * lines * std::mem::size_of::<f64>()).max(1);
    let fit = PASS_BYTES / per_run;
    if fit >= MIN_PASS { fit.min(runs) } else { runs }
}

/// Whether a result whose smaller side (rows or columns) is `narrow` takes this form. The
/// kernel's tiles load 9 or 10 vectors for 20 or 25 FMAs (4 or 5 rows by 5 columns) and keep
/// to 35–70 GF/s on a Zen 5 core whatever the shape, while a GEMM of copies gains with both
/// sides of its result: measured side by side (docs/benchmarks.md, "Contractions as inner
/// products: narrow results only"), the GEMM won from 11 columns where this form copies its far
/// block (`ai = cadm * dicm` at benzene's 24 × 21: 1.19×) and from 36 where it reads both
/// blocks in place (`minj = amcn * aicj`, 100 × 100: 1.16×); this form won at 10 and 25 (up to
/// 1.7×).
fn narrow_enough(narrow: usize, copies_far: bool) -> bool {
    narrow <= if copies_far { 10 } else { 31 }
}

/// Bytes of runs per pass: half of L2.
const PASS_BYTES: usize = crate::L2_BYTES / 2;
/// Fewest pairs of runs per pass.
const MIN_PASS: usize = 32;

impl Dot {
    /// The plan for blocks `b` (unit extents removed) with free groups `fl` (in left), `fr`
    /// (in right) and summed group `c`, where it was measured to win (docs/benchmarks.md,
    /// "Contractions as inner products", "... narrow results only"): AVX-512 present; long
    /// sums for the size of the result (`k ≥ 64` and `32 k ≥ m n`, for `m n ≤ 16384`), where a
    /// GEMM's copies of the blocks cost more than its arithmetic; a narrow result (see
    /// [`narrow_enough`]); at least [`FEWER_ROWS`] rows; and a summed label of unit stride, at
    /// least one vector long, in one block.
    pub(crate) fn new(b: &Blocks<'_>, fl: &[Dim], fr: &[Dim], c: &[Dim]) -> Option<Dot> {
        const MAX_DST: usize = 1 << 14;
        const MIN_SUM: usize = 64;
        const SUM_PER_DST: usize = 32;
        const MIN_LANE: usize = LANES;
        let prod = |v: &[Dim]| v.iter().map(|d| d.1).product::<usize>();
        let (dst, k) = (prod(fl) * prod(fr), prod(c));
        if !available() || dst > MAX_DST || k < MIN_SUM || SUM_PER_DST * k < dst {
            return None;
        }
        let narrow = prod(fl).min(prod(fr));
        let lane_of = |block: &[Dim]| {
            block
                .first()
                .copied()
                .filter(|d| c.iter().any(|x| x.0 == d.0) && d.1 >= MIN_LANE)
        };
        // The larger block stays in place where both could.
        let mut choices = [
            (true, b.left, b.right, fl, fr),
            (false, b.right, b.left, fr, fl),
        ];
        if b.right.iter().map(|d| d.1).product::<usize>()
            > b.left.iter().map(|d| d.1).product::<usize>()
        {
            choices.swap(0, 1);
        }
        let (near_is_left, near, far, f_near, f_far, lane) =
            choices
                .into_iter()
                .find_map(|(is_left, near, far, f_near, f_far)| {
                    let lane = lane_of(near)?;
                    (prod(f_near) >= FEWER_ROWS)
                        .then_some((is_left, near, far, f_near, f_far, lane))
                })?;
        let rest: Vec<Dim> = near
            .iter()
            .copied()
            .filter(|d| d.0 != lane.0 && c.iter().any(|x| x.0 == d.0))
            .collect();
        let far_layout: Vec<Dim> = std::iter::once(lane)
            .chain(far.iter().copied().filter(|d| d.0 != lane.0))
            .collect();
        let far_copy = if far_layout == far {
            None
        } else {
            Some(Copy::new(far, &far_layout).ok()?)
        };
        if !narrow_enough(narrow, far_copy.is_some()) {
            return None;
        }
        let plan = Dot {
            near_is_left,
            lane: lane.1,
            rows: tile_rows(prod(f_near)),
            pass: runs_per_pass(lane.1, prod(f_near) + prod(f_far), prod(&rest)),
            near_free: group_offsets(near, f_near),
            near_rest: group_offsets(near, &rest),
            far_copy,
            far_free: group_offsets(&far_layout, f_far),
            far_rest: group_offsets(&far_layout, &rest),
            dst_near: group_offsets(b.dst, f_near),
            dst_far: group_offsets(b.dst, f_far),
            lens: [prod(near), prod(far), prod(b.dst)],
        };
        plan.fits().then_some(plan)
    }

    /// That every lane run and every dst element the offsets name lies inside blocks of the
    /// plan's lengths (checked once; [`Self::check`] then only compares lengths).
    fn fits(&self) -> bool {
        let [near, far, dst] = self.lens;
        reach(&self.near_free, &self.near_rest) + self.lane <= near
            && reach(&self.far_free, &self.far_rest) + self.lane <= far
            && reach(&self.dst_near, &self.dst_far) < dst
    }

    /// Whether the far block is copied first.
    pub(crate) fn copies_far(&self) -> bool {
        self.far_copy.is_some()
    }

    /// Whether the copied block is the left one (meaningful where [`Self::copies_far`]).
    pub(crate) fn far_is_left(&self) -> bool {
        !self.near_is_left
    }

    /// `dst = beta * dst + Σ left * right`. Lengths were checked by the caller; `k > 0`.
    pub(crate) fn execute(
        &self,
        dst: &mut [f64],
        (left, right): (&[f64], &[f64]),
        beta: f64,
        scratch: &mut [Vec<f64>; 3],
    ) -> Result<(), KernelError> {
        let (near, far) = if self.near_is_left {
            (left, right)
        } else {
            (right, left)
        };
        let [sums, _, copy] = scratch;
        let far = match &self.far_copy {
            Some(c) => c.operand(far, copy)?,
            None => far,
        };
        self.check(near, far, dst)?;
        #[cfg(target_arch = "x86_64")]
        if crate::packed::vector_kernel() {
            // SAFETY: AVX-512 is present; `check` verified the buffers' lengths, inside which
            // every offset the kernel reads and writes lies (`fits`, when the plan was made).
            unsafe { avx512::run(self, (near, far), dst, beta, sums) };
            return Ok(());
        }
        self.scalar(near, far, dst, beta);
        Ok(())
    }

    /// That the buffers have the plan's lengths, inside which its offsets lie ([`Self::fits`]).
    fn check(&self, near: &[f64], far: &[f64], dst: &[f64]) -> Result<(), KernelError> {
        if [near.len(), far.len(), dst.len()] == self.lens {
            Ok(())
        } else {
            Err(KernelError::PlanMismatch {
                form: "inner-product",
            })
        }
    }

    /// The same sums without vectors (CPUs the plan is not chosen on, and tests).
    fn scalar(&self, near: &[f64], far: &[f64], dst: &mut [f64], beta: f64) {
        for (&nf, &dn) in self.near_free.iter().zip(&self.dst_near) {
            for (&ff, &df) in self.far_free.iter().zip(&self.dst_far) {
                let mut s = 0.0;
                for (&nr, &fr) in self.near_rest.iter().zip(&self.far_rest) {
                    let (a, b) = (&near[nf + nr..][..self.lane], &far[ff + fr..][..self.lane]);
                    s += a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
                }
                let d = &mut dst[dn + df];
                *d = if beta == 0.0 { s } else { beta * *d + s };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{COLS, Dot, FEWER_ROWS, LANES, ROWS};
    use std::arch::x86_64::{
        __m512d, _mm512_fmadd_pd, _mm512_loadu_pd, _mm512_maskz_loadu_pd, _mm512_reduce_add_pd,
        _mm512_setzero_pd, _mm512_storeu_pd,
    };

    /// Every element of dst, `plan.rows` × up to [`COLS`] per call of [`tile`]; the last rows
    /// overlap the ones before where the rows are not a multiple of `plan.rows` (the
    /// overlapped elements are computed again and not written twice). The pairs of runs are
    /// taken `plan.pass` at a time, each such pass over every tile; a tile's vector sums wait
    /// in `sums` for the next pass, so every lane of a sum takes the same products in the same
    /// order as in one pass.
    ///
    /// # Safety
    /// AVX-512F must be available and `plan.check` must have passed for the buffers (see `fits`).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run(
        plan: &Dot,
        blocks: (&[f64], &[f64]),
        dst: &mut [f64],
        beta: f64,
        sums: &mut Vec<f64>,
    ) {
        let runs = plan.near_rest.len();
        let kept = if plan.pass < runs {
            // Calls of `R <= ROWS` rows cover fewer than `m + ROWS` rows.
            let rows = plan.near_free.len() + ROWS;
            crate::batched::sized(sums, rows * plan.far_free.len() * LANES)
        } else {
            &mut []
        };
        let mut k0 = 0;
        while k0 < runs {
            let k1 = k0.saturating_add(plan.pass).min(runs);
            let pass = Pass {
                runs: k0..k1,
                last: k1 == runs,
            };
            // SAFETY: the caller's contract, passed on; `new` made plans of at least
            // `FEWER_ROWS` rows, and of `ROWS` only where there are as many; `kept` holds a
            // vector per element of every tile where there is more than one pass.
            unsafe {
                if plan.rows == ROWS {
                    rows::<ROWS>(plan, blocks, dst, beta, (&pass, kept));
                } else {
                    rows::<FEWER_ROWS>(plan, blocks, dst, beta, (&pass, kept));
                }
            }
            k0 = k1;
        }
    }

    /// The pairs of runs of one pass, and whether it is the last.
    struct Pass {
        runs: std::ops::Range<usize>,
        last: bool,
    }

    /// One pass of [`run`] with `R` rows per call.
    ///
    /// # Safety
    /// As [`run`], and dst has at least `R` rows.
    #[target_feature(enable = "avx512f")]
    unsafe fn rows<const R: usize>(
        plan: &Dot,
        blocks: (&[f64], &[f64]),
        dst: &mut [f64],
        beta: f64,
        pass: (&Pass, &mut [f64]),
    ) {
        let (m, n) = (plan.near_free.len(), plan.far_free.len());
        let mut i0 = 0;
        while i0 < m {
            let start = i0.min(m - R);
            let mut j0 = 0;
            while j0 < n {
                let cols = COLS.min(n - j0);
                let at = Tile {
                    rows: start,
                    fresh: i0 - start,
                    cols: j0,
                    kept: (i0 * n + j0 * R) * LANES,
                };
                let pass = (pass.0, &mut *pass.1);
                // SAFETY: the caller's contract, passed on.
                unsafe {
                    match cols {
                        1 => tile::<R, 1>(plan, blocks, dst, beta, at, pass),
                        2 => tile::<R, 2>(plan, blocks, dst, beta, at, pass),
                        3 => tile::<R, 3>(plan, blocks, dst, beta, at, pass),
                        4 => tile::<R, 4>(plan, blocks, dst, beta, at, pass),
                        _ => tile::<R, COLS>(plan, blocks, dst, beta, at, pass),
                    }
                }
                j0 += cols;
            }
            i0 += R;
        }
    }

    /// Where a tile starts: its first row and column, the rows before `fresh` belonging to an
    /// earlier tile; and where its sums wait between passes (`R × C` vectors, row by row).
    #[derive(Clone, Copy)]
    struct Tile {
        rows: usize,
        fresh: usize,
        cols: usize,
        kept: usize,
    }

    /// Where a tile's rows (or columns) start in their block, past each run's offset.
    pub(super) trait Places: Copy {
        /// Added to every run's offset once.
        fn base(self) -> usize;
        /// Row (column) `i` past the base.
        fn at(self, i: usize) -> usize;
    }

    /// Any offsets, from a table.
    #[derive(Clone, Copy)]
    pub(super) struct Table<const N: usize>(pub [usize; N]);

    impl<const N: usize> Places for Table<N> {
        #[inline(always)]
        fn base(self) -> usize {
            0
        }
        #[inline(always)]
        fn at(self, i: usize) -> usize {
            self.0[i]
        }
    }

    /// Offsets evenly apart: one pointer a run for all of them, the others a step away (ten
    /// pointers rebuilt per pair of runs, from bases spilled to the stack, bounded short lanes
    /// on cores that issue two FMAs a cycle).
    #[derive(Clone, Copy)]
    pub(super) struct Even {
        first: usize,
        step: usize,
    }

    impl Places for Even {
        #[inline(always)]
        fn base(self) -> usize {
            self.first
        }
        #[inline(always)]
        fn at(self, i: usize) -> usize {
            i * self.step
        }
    }

    /// The offsets as [`Even`] where they rise evenly (or are one offset).
    pub(super) fn evenly(offsets: &[usize]) -> Option<Even> {
        let first = *offsets.first()?;
        let step = match offsets.get(1) {
            Some(o) => o.checked_sub(first)?,
            None => 0,
        };
        let mut next = first;
        for &o in offsets {
            if o != next {
                return None;
            }
            next = next.checked_add(step)?;
        }
        Some(Even { first, step })
    }

    /// `acc[r][c]` plus the products of the lane runs of rows `a` and columns `b` for every
    /// pair `(near, far)` of `runs`, as vectors along the lane. It takes and returns the sums
    /// by value and keeps them in a local: kept in an array that [`tile`] also used, or beside
    /// reads through raw pointers from elsewhere, they were stored after every FMA (2×
    /// slower).
    ///
    /// # Safety
    /// AVX-512F must be available and every run inside its block.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn sweep<const R: usize, const C: usize>(
        acc: [[__m512d; C]; R],
        (near, far): (&[f64], &[f64]),
        (a, b): (impl Places, impl Places),
        runs: (&[usize], &[usize]),
        lane: usize,
    ) -> [[__m512d; C]; R] {
        let full = lane / LANES * LANES;
        let tail = (1u8 << (lane - full)).wrapping_sub(1);
        // Reads through the blocks' own (shared, so not aliasing) references, and sums in a
        // local: with raw pointers from elsewhere the sums might have aliased them, and were
        // stored after every FMA.
        let mut sums = acc;
        let (np, fp) = (near.as_ptr(), far.as_ptr());
        for (&nr, &fr) in runs.0.iter().zip(runs.1) {
            // SAFETY: the caller's contract: row `r` of the run starts at `a.base() + nr +
            // a.at(r)`, column `c` at `b.base() + fr + b.at(c)`; the whole vectors end at
            // `full <= lane` and the masked tail reads only the run's last `lane - full`
            // elements.
            unsafe {
                let mut p = np.add(a.base() + nr);
                let mut q = fp.add(b.base() + fr);
                let end = p.add(full);
                while p < end {
                    let av: [__m512d; R] = std::array::from_fn(|r| _mm512_loadu_pd(p.add(a.at(r))));
                    for c in 0..C {
                        let bv = _mm512_loadu_pd(q.add(b.at(c)));
                        for (row, &x) in sums.iter_mut().zip(&av) {
                            row[c] = _mm512_fmadd_pd(x, bv, row[c]);
                        }
                    }
                    p = p.add(LANES);
                    q = q.add(LANES);
                }
                if tail != 0 {
                    let av: [__m512d; R] =
                        std::array::from_fn(|r| _mm512_maskz_loadu_pd(tail, p.add(a.at(r))));
                    for c in 0..C {
                        let bv = _mm512_maskz_loadu_pd(tail, q.add(b.at(c)));
                        for (row, &x) in sums.iter_mut().zip(&av) {
                            row[c] = _mm512_fmadd_pd(x, bv, row[c]);
                        }
                        // Keeps the next column's load after these FMAs: loaded all at once,
                        // the columns took more registers than there are, and were spilled.
                        std::arch::asm!("", options(nostack, preserves_flags));
                    }
                }
            }
        }
        sums
    }

    /// Rows `rows..rows + R` by columns `cols..cols + C` of dst, for the runs of one pass.
    ///
    /// # Safety
    /// As [`run`].
    #[target_feature(enable = "avx512f")]
    unsafe fn tile<const R: usize, const C: usize>(
        plan: &Dot,
        blocks: (&[f64], &[f64]),
        dst: &mut [f64],
        beta: f64,
        at: Tile,
        (pass, kept): (&Pass, &mut [f64]),
    ) {
        let a: [usize; R] = std::array::from_fn(|r| plan.near_free[at.rows + r]);
        let b: [usize; C] = std::array::from_fn(|c| plan.far_free[at.cols + c]);
        let runs = (
            &plan.near_rest[pass.runs.clone()],
            &plan.far_rest[pass.runs.clone()],
        );
        // One pass keeps nothing (`kept` is empty then).
        let kept = match kept.get_mut(at.kept..) {
            Some(k) => k,
            None => &mut [],
        };
        let at_kept = |r: usize, c: usize| (r * C + c) * LANES;
        let acc = if pass.runs.start == 0 {
            [[_mm512_setzero_pd(); C]; R]
        } else {
            // SAFETY: `run` sized `kept` for every tile's sums.
            std::array::from_fn(|r| {
                std::array::from_fn(|c| unsafe {
                    _mm512_loadu_pd(kept[at_kept(r, c)..][..LANES].as_ptr())
                })
            })
        };
        // SAFETY: `check` and `fits` bound every run `offset..offset + lane` of the plan's offsets.
        let acc = unsafe {
            match (evenly(&a), evenly(&b)) {
                (Some(a), Some(b)) => sweep(acc, blocks, (a, b), runs, plan.lane),
                (Some(a), None) => sweep(acc, blocks, (a, Table(b)), runs, plan.lane),
                (None, Some(b)) => sweep(acc, blocks, (Table(a), b), runs, plan.lane),
                (None, None) => sweep(acc, blocks, (Table(a), Table(b)), runs, plan.lane),
            }
        };
        if !pass.last {
            for (r, row) in acc.iter().enumerate() {
                for (c, v) in row.iter().enumerate() {
                    // SAFETY: as above.
                    unsafe { _mm512_storeu_pd(kept[at_kept(r, c)..][..LANES].as_mut_ptr(), *v) };
                }
            }
            return;
        }
        for (r, row) in acc.iter().enumerate().skip(at.fresh) {
            for (c, v) in row.iter().enumerate() {
                let s = _mm512_reduce_add_pd(*v);
                let d = &mut dst[plan.dst_near[at.rows + r] + plan.dst_far[at.cols + c]];
                *d = if beta == 0.0 { s } else { beta * *d + s };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Letters;

    /// `dst = l * r` by the inner-product form, vector and scalar, against a naive loop, for
    /// beta 0 and 0.5.
    fn check(pattern: &str, ext: &dyn Fn(char) -> usize) {
        let case = Letters::new(pattern, ext);
        let [fl, fr, c] = case.groups();
        let Some(plan) = Dot::new(&case.blocks(), &fl, &fr, &c) else {
            assert!(!available(), "{pattern}: no inner-product plan");
            return;
        };
        let (lv, rv) = case.operands();
        for beta in [0.0, 0.5] {
            let start = case.start();
            let expect = case.expected((&lv, &rv), &start, beta);
            let mut got = start.clone();
            let mut scratch = [Vec::new(), Vec::new(), Vec::new()];
            plan.execute(&mut got, (&lv, &rv), beta, &mut scratch)
                .unwrap();
            let (near, far): (&[f64], &[f64]) = if plan.near_is_left {
                (&lv, &rv)
            } else {
                (&rv, &lv)
            };
            let mut buf = Vec::new();
            let far = match &plan.far_copy {
                Some(c) => c.operand(far, &mut buf).unwrap(),
                None => far,
            };
            let mut slow = start.clone();
            plan.scalar(near, far, &mut slow, beta);
            for (i, ((g, s), e)) in got.iter().zip(&slow).zip(&expect).enumerate() {
                let tol = 1e-12 * e.abs().max(1.0);
                assert!(
                    (g - e).abs() <= tol,
                    "{pattern} beta {beta} [{i}]: {g} vs {e}"
                );
                assert!(
                    (s - e).abs() <= tol,
                    "{pattern} scalar beta {beta} [{i}]: {s} vs {e}"
                );
            }
        }
    }

    #[test]
    fn inner_products_match_naive() {
        let water = |c: char| if "ijklmn".contains(c) { 5 } else { 19 };
        check("ai=cadm*dicm", &water);
        let large = |c: char| if "ijklmn".contains(c) { 10 } else { 40 };
        check("ai=cadm*dicm", &large);
        // The lane first in both blocks: nothing copied.
        check("ai=cadm*cidm", &water);
        // More rows than a multiple of four, columns past one tile, the right block in place.
        let odd = |c: char| match c {
            'a' => 7,
            'i' => 11,
            'c' => 23,
            _ => 3,
        };
        check("ia=cidm*cadm", &odd);
        check("ai=cadm*dicm", &odd);
    }

    #[test]
    fn five_rows_per_call_unless_four_compute_fewer_again() {
        let rows: Vec<usize> = [4, 5, 8, 9, 10, 12, 19, 21, 24, 27, 40]
            .iter()
            .map(|&m| tile_rows(m))
            .collect();
        assert_eq!(rows, [4, 5, 4, 5, 5, 4, 5, 4, 4, 4, 5]);
    }

    /// Four or five rows per call, in one pass or several: the same products in the same
    /// order for every sum.
    #[test]
    fn the_rows_per_call_change_no_bits() {
        let odd = |c: char| match c {
            'a' => 19,
            'i' => 7,
            'c' => 21,
            _ => 3,
        };
        let case = Letters::new("ai=cadm*dicm", &odd);
        let [fl, fr, c] = case.groups();
        let Some(mut plan) = Dot::new(&case.blocks(), &fl, &fr, &c) else {
            assert!(!available(), "no inner-product plan");
            return;
        };
        let (lv, rv) = case.operands();
        let mut scratch = [Vec::new(), Vec::new(), Vec::new()];
        let mut results = Vec::new();
        for rows in [FEWER_ROWS, ROWS] {
            plan.rows = rows;
            for pass in [1, 4, usize::MAX] {
                plan.pass = pass;
                let mut got = case.start();
                plan.execute(&mut got, (&lv, &rv), 0.5, &mut scratch)
                    .unwrap();
                results.push(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            }
        }
        assert!(results.iter().all(|r| *r == results[0]));
    }

    /// Rows and columns evenly apart take one pointer a run each instead of one per row and
    /// column: the same products in the same order, the same bits.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn evenly_spaced_runs_change_no_bits() {
        use std::arch::x86_64::{__m512d, _mm512_setzero_pd, _mm512_storeu_pd};
        if !crate::packed::vector_kernel() {
            return;
        }
        use avx512::{Places, Table, evenly};
        let even = |o: &[usize]| evenly(o).map(|e| (e.base(), e.at(1)));
        assert_eq!(even(&[7, 26, 45]), Some((7, 19)));
        assert_eq!(even(&[7]), Some((7, 0)));
        assert_eq!(even(&[7, 26, 46]), None);
        assert_eq!(even(&[26, 7]), None);
        let (near, far) = (
            crate::testutil::random_vec(4000, 3),
            crate::testutil::random_vec(4000, 4),
        );
        let (a, b) = ([3usize, 22, 41, 60, 79], [5usize, 40, 75, 110, 145]);
        let runs: (Vec<usize>, Vec<usize>) = (
            (0..9).map(|k| 200 * k).collect(),
            (0..9).map(|k| 300 * k + 1).collect(),
        );
        let bits = |acc: [[__m512d; 5]; 5]| -> Vec<u64> {
            let mut out = Vec::new();
            for row in acc {
                for v in row {
                    let mut x = [0.0; LANES];
                    // SAFETY: eight elements.
                    unsafe { _mm512_storeu_pd(x.as_mut_ptr(), v) };
                    out.extend(x.map(f64::to_bits));
                }
            }
            out
        };
        let (ea, eb) = (evenly(&a).unwrap(), evenly(&b).unwrap());
        for lane in [8, 19, 27] {
            // SAFETY: AVX-512 is present; every run of `lane` lies inside the 4000 elements.
            let [tables, evens, mixed] = unsafe {
                let zero = [[_mm512_setzero_pd(); 5]; 5];
                let blocks = (&near[..], &far[..]);
                let runs = (&runs.0[..], &runs.1[..]);
                [
                    avx512::sweep::<5, 5>(zero, blocks, (Table(a), Table(b)), runs, lane),
                    avx512::sweep::<5, 5>(zero, blocks, (ea, eb), runs, lane),
                    avx512::sweep::<5, 5>(zero, blocks, (Table(a), eb), runs, lane),
                ]
            };
            assert_eq!(bits(tables), bits(evens), "lane {lane}");
            assert_eq!(bits(tables), bits(mixed), "lane {lane}");
        }
    }

    #[test]
    fn passes_keep_the_runs_of_every_row_and_column_within_half_of_l2() {
        // Water's `ai = cadm * dicm`: 95 pairs of runs of 19, 24 rows and columns: one pass.
        assert_eq!(runs_per_pass(19, 24, 95), 95);
        // Benzene's (occupied 21, virtual 24): 504 pairs of runs of 24 for 45 rows and
        // columns, 60 (8,640 bytes each) per pass.
        assert_eq!(runs_per_pass(24, 45, 504), 60);
        // The bench's `large` `minj = amcn * aicj`: 8 pairs of runs of 40 would fit; one pass.
        assert_eq!(runs_per_pass(40, 200, 40), 40);
    }

    #[test]
    fn short_lanes_and_large_results_take_other_forms() {
        let plan = |pattern: &str, ext: &dyn Fn(char) -> usize| {
            let case = Letters::new(pattern, ext);
            let [fl, fr, c] = case.groups();
            Dot::new(&case.blocks(), &fl, &fr, &c)
        };
        if available() {
            assert!(plan("ai=cadm*dicm", &|_| 9).is_some());
        }
        // Lanes shorter than a vector.
        assert!(plan("ai=cadm*dicm", &|_| 7).is_none());
        // Short sums: 45 × 45 results of sums over 45 (`rccsd_rhf:1894` at the test job's
        // extents) run faster as a GEMM.
        let test_job = |c: char| if "imn".contains(c) { 5 } else { 9 };
        assert!(plan("mibc=aibn*amcn", &test_job).is_none());
        // Results past 16384 elements.
        assert!(plan("ab=cadm*dbcm", &|_| 200).is_none());
    }

    /// Results wide both ways take a GEMM: from 11 columns where the far block is copied, from
    /// 32 where both are read in place.
    #[test]
    fn only_narrow_results_take_inner_products() {
        let plan = |pattern: &str, occ: usize, virt: usize| {
            let ext = |c: char| if "ijklmn".contains(c) { occ } else { virt };
            let case = Letters::new(pattern, &ext);
            let [fl, fr, c] = case.groups();
            Dot::new(&case.blocks(), &fl, &fr, &c).is_some()
        };
        assert!(
            !plan("ai=cadm*dicm", 21, 24),
            "benzene's 24 × 21, far block copied"
        );
        assert!(!plan("ai=cadm*dicm", 11, 24));
        assert!(!plan("minj=amcn*aicj", 10, 40), "100 × 100, both in place");
        assert!(!plan("minj=amcn*aicj", 6, 19), "36 × 36");
        if available() {
            assert!(plan("ai=cadm*dicm", 10, 40), "40 × 10, far block copied");
            assert!(plan("ai=cadm*dicm", 5, 27));
            assert!(plan("minj=amcn*aicj", 5, 19), "25 × 25, both in place");
        }
        assert!(narrow_enough(10, true) && !narrow_enough(11, true));
        assert!(narrow_enough(31, false) && !narrow_enough(32, false));
    }
}
