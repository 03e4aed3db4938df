//! The CPU's fifth way to run a contraction: vectors along dst's first label times single
//! elements of the other block, for the short sums and narrow results of CCSD(T)'s terms.
//!
//! `abck = amc * mbk` (`rccsdpt_aaa:1418`) sums 5 products into each of 34,295 elements. As a
//! GEMM it needs copies, and as GEMMs batched over free labels it is 95 calls of 19 × 95 × 5,
//! each as long as faer's fixed cost (45–48% of the GEMM rate at water's extents,
//! docs/benchmarks.md). Here dst's first label `a`, which also leads one block (the *row
//! block*, `amc`), is the vector: for every index of the row block's other free labels (the
//! *batch*, `c`) and every 5 columns of dst from the other block (`b, k`), the kernel keeps up
//! to 4 × 5 vectors of dst in registers and adds, for every summed index, a vector of the row
//! block times 5 broadcast elements of the other. Up to 4 rows past the last whole vector (the
//! 3 past 16 of water's 19 virtual orbitals) take a half-width vector, whose FMAs cost half
//! as much on cores that split 512-bit ones (Zen 4). Rows of two vectors or fewer (the test
//! job's 9 virtual orbitals) take two batch indices per call, so that each broadcast element
//! feeds the FMAs of both, and the short ends of the two batch indices' rows share one vector
//! (on cores with two 512-bit FMA units a half-width FMA costs a whole one); so do rows of two
//! or three vectors and a half (water's 19, cc-pVTZ's 27) where the sums are long enough to
//! pay for it. Nothing is copied; every block is read and
//! written where it lies, through offset tables. Where dst's first label does not lead the
//! block it lies in, as in `abck = mbc * mak` (`rccsdpt_aaa:1493`), that block, if small
//! (water's `mak` holds 475 elements), is first copied with the label leading, and is the row
//! block. Sums run in the summed labels' order, one FMA per product: results agree with a
//! GEMM's to rounding (tested to 1e-12 relative).

use crate::batched::{Blocks, Copy, Dim};
use crate::error::KernelError;
use crate::packed::{enabled, group_offsets, reach};
use std::sync::OnceLock;

/// Vectors of a label's elements per kernel call, at most.
const VECTORS: usize = 4;
/// Columns of dst per kernel call, at most.
#[cfg(target_arch = "x86_64")]
const COLS: usize = 5;
/// Elements per vector.
const LANES: usize = 8;

/// Whether plans may choose this form: the AVX-512 kernel can run here, and the environment
/// variable `SIAL_NO_BROADCAST_KERNEL` is unset (for side-by-side measurements).
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    enabled(&AVAILABLE, "SIAL_NO_BROADCAST_KERNEL")
}

/// A contraction as broadcast products along dst's first label (see the module
/// documentation).
#[derive(Clone, Debug)]
pub(crate) struct Broadcast {
    /// Whether the row block is the left operand.
    rows_are_left: bool,
    /// The row block's copy with dst's first label leading, where it does not lead already.
    row_copy: Option<Copy>,
    /// Extent of dst's first label.
    rows: usize,
    /// Offsets of the summed indices in the row block and in the other block.
    row_sum: Vec<usize>,
    other_sum: Vec<usize>,
    /// Offsets of the batch indices in the row block and in dst.
    row_batch: Vec<usize>,
    dst_batch: Vec<usize>,
    /// Offsets of the columns in the other block and in dst.
    other_cols: Vec<usize>,
    dst_cols: Vec<usize>,
    /// Element counts of the row block, the other block and dst.
    lens: [usize; 3],
}

impl Broadcast {
    /// The plan for blocks `b` (unit extents removed) with free groups `fl` (in left), `fr`
    /// (in right) and summed group `c`, where it was measured to win (docs/benchmarks.md,
    /// "Contractions as broadcast products"): AVX-512 present; dst's first label leads one
    /// block, or lies in a block small enough to copy with it leading ("... its row block
    /// copied"), and is at least one vector long; and the other block is small enough to stay
    /// in L2 while every batch index and row tile reads it again, or read only once.
    pub(crate) fn new(b: &Blocks<'_>, fl: &[Dim], fr: &[Dim], c: &[Dim]) -> Option<Broadcast> {
        // Elements in a quarter of L2 (docs/benchmarks.md, "... a larger other block").
        const MAX_OTHER: usize = crate::L2_BYTES / 4 / std::mem::size_of::<f64>();
        // A row block copied first stays within L1 (32 KiB).
        const MAX_ROW_COPY: usize = 1 << 12;
        let first = *b.dst.first()?;
        if !available() || first.1 < LANES {
            return None;
        }
        let len = |v: &[Dim]| v.iter().map(|d| d.1).product::<usize>();
        let (rows_are_left, stored, other, row_free, other_free) = if b.left.contains(&first) {
            (true, b.left, b.right, fl, fr)
        } else {
            (false, b.right, b.left, fr, fl)
        };
        let row_layout: Vec<Dim> = std::iter::once(first)
            .chain(stored.iter().copied().filter(|d| *d != first))
            .collect();
        let row_copy = if row_layout == stored {
            None
        } else if len(stored) <= MAX_ROW_COPY {
            Some(Copy::new(stored, &row_layout).ok()?)
        } else {
            return None;
        };
        let row_block = &row_layout[..];
        let batch: Vec<Dim> = row_free
            .iter()
            .copied()
            .filter(|d| d.0 != first.0)
            .collect();
        // The other block is read again for every batch index and row tile: past L2 only
        // where it is read once.
        let once = batch.is_empty() && first.1 <= VECTORS * LANES;
        if len(other) > MAX_OTHER && !once {
            return None;
        }
        // Summed labels in the row block's order, so that its reads run forward.
        let sum: Vec<Dim> = row_block
            .iter()
            .copied()
            .filter(|d| c.iter().any(|x| x.0 == d.0))
            .collect();
        // Columns in dst's order, so that its writes run forward.
        let cols: Vec<Dim> = b
            .dst
            .iter()
            .copied()
            .filter(|d| other_free.iter().any(|x| x.0 == d.0))
            .collect();
        let plan = Broadcast {
            rows_are_left,
            row_copy,
            rows: first.1,
            row_sum: group_offsets(row_block, &sum),
            other_sum: group_offsets(other, &sum),
            row_batch: group_offsets(row_block, &batch),
            dst_batch: group_offsets(b.dst, &batch),
            other_cols: group_offsets(other, &cols),
            dst_cols: group_offsets(b.dst, &cols),
            lens: [len(row_block), len(other), len(b.dst)],
        };
        plan.fits().then_some(plan)
    }

    /// Whether the row block is copied first (dst's first label does not lead it).
    pub(crate) fn copies_rows(&self) -> bool {
        self.row_copy.is_some()
    }

    /// Whether dst stays in L2 while the kernel writes it: its rows make one tile (each
    /// batch index's columns are written whole, one after the other), or it takes at most half
    /// of L2. Rows of several tiles write every column in pieces, one tile of rows
    /// after the other; a larger dst not in the caches then costs more than faer's GEMM on it
    /// (`abck = abe * eck` at water/cc-pVTZ's extents, 729 rows of `ab`, a 787 KB dst not in
    /// the caches: 1.3× the GEMM's time; docs/benchmarks.md, "... labels merged").
    pub(crate) fn dst_stays_in_l2(&self) -> bool {
        self.rows <= VECTORS * LANES
            || self.lens[2] * std::mem::size_of::<f64>() <= crate::L2_BYTES / 2
    }

    /// The extent of dst's first label, the rows of the vectors.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Whether the row block is the left operand.
    pub(crate) fn rows_are_left(&self) -> bool {
        self.rows_are_left
    }

    /// Whether the kernel walks dst in memory order: batch by batch, columns in order within
    /// each, a batch's columns before the next batch's. A dst that is not in the caches then
    /// streams in as the prefetchers expect; otherwise consecutive columns may lie pages
    /// apart (`abck = abek * ec`, `rccsdpt_aaa:883`: columns `c` 4 KiB apart at benzene's
    /// extents).
    pub(crate) fn walks_dst_in_order(&self) -> bool {
        let increasing = |v: &[usize]| v.windows(2).all(|w| w[0] < w[1]);
        let span = self.dst_cols.last().map_or(0, |&c| c + self.rows);
        increasing(&self.dst_cols)
            && increasing(&self.dst_batch)
            && self.dst_batch.windows(2).all(|w| w[1] - w[0] >= span)
    }

    /// That every row run and every element the offsets name lies inside blocks of the plan's
    /// lengths (checked once; [`Self::check`] then only compares lengths).
    fn fits(&self) -> bool {
        let [rows, other, dst] = self.lens;
        reach(&self.row_sum, &self.row_batch) + self.rows <= rows
            && reach(&self.other_sum, &self.other_cols) < other
            && reach(&self.dst_cols, &self.dst_batch) + self.rows <= dst
    }

    /// `dst = beta * dst + Σ left * right`. Lengths were checked by the caller; `k > 0`. The
    /// vector and the scalar paths give the same bits (fused multiply-adds in the same
    /// order).
    pub(crate) fn execute(
        &self,
        dst: &mut [f64],
        (left, right): (&[f64], &[f64]),
        beta: f64,
        scratch: &mut [Vec<f64>; 3],
    ) -> Result<(), KernelError> {
        let (rows, other) = if self.rows_are_left {
            (left, right)
        } else {
            (right, left)
        };
        let rows = match &self.row_copy {
            Some(c) => c.operand(rows, &mut scratch[1])?,
            None => rows,
        };
        self.check(rows, other, dst)?;
        #[cfg(target_arch = "x86_64")]
        if crate::packed::vector_kernel() {
            // SAFETY: AVX-512 is present; `check` verified the buffers' lengths, inside which
            // every offset the kernel reads and writes lies (`fits`, when the plan was made).
            unsafe { avx512::run(self, (rows, other), dst, beta) };
            return Ok(());
        }
        self.scalar(rows, other, dst, beta);
        Ok(())
    }

    /// That the buffers have the plan's lengths, inside which its offsets lie ([`Self::fits`]).
    fn check(&self, rows: &[f64], other: &[f64], dst: &[f64]) -> Result<(), KernelError> {
        if [rows.len(), other.len(), dst.len()] == self.lens {
            Ok(())
        } else {
            Err(KernelError::PlanMismatch {
                form: "broadcast-product",
            })
        }
    }

    /// The same sums without vectors (CPUs the plan is not chosen on, and tests).
    fn scalar(&self, rows: &[f64], other: &[f64], dst: &mut [f64], beta: f64) {
        for (&rb, &db) in self.row_batch.iter().zip(&self.dst_batch) {
            for (&oc, &dc) in self.other_cols.iter().zip(&self.dst_cols) {
                for i in 0..self.rows {
                    let mut s = 0.0;
                    for (&rs, &os) in self.row_sum.iter().zip(&self.other_sum) {
                        s = rows[rb + rs + i].mul_add(other[oc + os], s);
                    }
                    let d = &mut dst[db + dc + i];
                    *d = if beta == 0.0 { s } else { beta.mul_add(*d, s) };
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Broadcast, COLS, LANES, VECTORS};
    use std::arch::x86_64::{
        __m256d, __m512d, _mm256_fmadd_pd, _mm256_mask_storeu_pd, _mm256_maskz_loadu_pd,
        _mm256_set1_pd, _mm256_setzero_pd, _mm512_castpd256_pd512, _mm512_castpd512_pd256,
        _mm512_extractf64x4_pd, _mm512_fmadd_pd, _mm512_insertf64x4, _mm512_loadu_pd,
        _mm512_mask_storeu_pd, _mm512_maskz_loadu_pd, _mm512_set1_pd, _mm512_setzero_pd,
        _mm512_storeu_pd,
    };

    /// Rows past the last whole vector, up to this many, go in a half-width vector: on cores
    /// that run 512-bit FMAs as two 256-bit halves (Zen 4) it costs half a full one, and the
    /// 3 rows past 16 of a 19-long label no longer take a whole vector of 8 lanes.
    const HALF: usize = 4;

    /// Rows up to this many (two vectors, or one and a half) take the vectors of two batch
    /// indices per tile, so that each broadcast element feeds twice as many FMAs.
    const PAIRED_ROWS: usize = 2 * LANES;

    /// Rows of two or three vectors and up to a half (17 to 20, 25 to 28: water's 19 and
    /// cc-pVTZ's 27 virtual orbitals) take two batch indices per tile, their ends joined
    /// ([`joined`]), where they sum over at least this many indices: 19 rows summed over 5 ran
    /// 1.4× slower so, over 8 1.1× slower, over 10–12 as fast or faster, over 19 1.1–1.35×
    /// faster (docs/benchmarks.md, "A second CPU: the issue's targets on a 2-core Intel Xeon
    /// with two FMA units").
    const JOINED_SUM: usize = 12;
    /// The most rows whose ends are joined.
    const JOINED_ROWS: usize = 3 * LANES + HALF;
    /// Columns per call for two batch indices of three vectors and a joined end: 21 sums, 7
    /// row vectors and a broadcast fill the 32 registers.
    const JOINED_COLS: usize = 3;
    /// Bytes of the two batch indices' rows over every summed index, at most, for three
    /// vectors and a joined end: the narrower calls read them once per three columns instead
    /// of five, from L1 only where they stay there (half of a 32 KiB L1). cc-pVTZ's `abck =
    /// aec * ebk` (27 rows summed over 27: 11.7 KB) ran 1.2–1.3× faster joined, `aibj = amcj
    /// * mibc` (summed over 135: 58 KB) 0.95×.
    const JOINED_SLAB: usize = 16 << 10;

    /// Every element of dst: for each batch index, the rows by up to [`VECTORS`] vectors (the
    /// last one masked where the rows are not a multiple of 8, and half-width where at most
    /// [`HALF`] rows are left for it) and, in one call for those rows, the columns by
    /// [`COLS`], then in another the columns left over. A call per [`COLS`] columns cost as
    /// much as the arithmetic where the sums are short (docs/benchmarks.md, "Contractions as
    /// broadcast products: a half-width last vector").
    ///
    /// # Safety
    /// AVX-512F and AVX-512VL must be available and `plan.check` must have passed for the
    /// buffers (see `fits`).
    #[target_feature(enable = "avx512f,avx512vl,fma")]
    pub(super) unsafe fn run(
        plan: &Broadcast,
        blocks: (&[f64], &[f64]),
        dst: &mut [f64],
        beta: f64,
    ) {
        let n = plan.dst_cols.len();
        let batches = plan.row_batch.len();
        // Rows of two vectors or fewer take two batch indices per tile where there are two;
        // so do rows of two or three vectors and a half summed over at least `JOINED_SUM`
        // indices, their ends joined.
        let ends = plan.rows % LANES;
        let sum = plan.row_sum.len();
        let three = plan.rows > PAIRED_ROWS + HALF;
        let joined = (PAIRED_ROWS..=JOINED_ROWS).contains(&plan.rows)
            && (1..=HALF).contains(&ends)
            && sum >= JOINED_SUM
            && (!three || 2 * plan.rows * sum * std::mem::size_of::<f64>() <= JOINED_SLAB);
        let paired = plan.rows <= PAIRED_ROWS || joined;
        // The columns in groups of `COLS` (three where two batch indices of three vectors and
        // a half leave registers for no more), in one call, then the rest.
        let width = if joined && three { JOINED_COLS } else { COLS };
        let whole = n / width * width;
        let groups = [0..whole, whole..n];
        let mut batch = 0;
        while batch < batches {
            let b = if paired && batch + 1 < batches { 2 } else { 1 };
            let mut i0 = 0;
            while i0 < plan.rows {
                let rows = (VECTORS * LANES).min(plan.rows - i0);
                let tail = rows % LANES;
                let half = tail > 0 && tail <= HALF;
                let full = rows.div_ceil(LANES) - usize::from(half);
                for cols in groups.iter().filter(|g| !g.is_empty()) {
                    let c = if cols.end <= whole { width } else { cols.len() };
                    let at = At {
                        batch,
                        rows: i0,
                        cols: cols.clone(),
                        tail,
                    };
                    macro_rules! tiles {
                        ($($v:literal $h:literal $b:literal),*) => {
                            match (full, usize::from(half), b, c) {
                                $(
                                    ($v, $h, $b, 1) => tile::<$v, $h, 1, $b>(plan, blocks, dst, beta, at),
                                    ($v, $h, $b, 2) => tile::<$v, $h, 2, $b>(plan, blocks, dst, beta, at),
                                    ($v, $h, $b, 3) => tile::<$v, $h, 3, $b>(plan, blocks, dst, beta, at),
                                    ($v, $h, $b, 4) => tile::<$v, $h, 4, $b>(plan, blocks, dst, beta, at),
                                    ($v, $h, $b, _) => tile::<$v, $h, COLS, $b>(plan, blocks, dst, beta, at),
                                )*
                                _ => unreachable!("a tile has 1 to 4 vectors, and two batch indices only where it has 2 or fewer"),
                            }
                        };
                    }
                    // SAFETY: the caller's contract, passed on; two batch indices only where
                    // `batch + 1` is one.
                    unsafe {
                        tiles!(
                            1 0 1, 2 0 1, 3 0 1, 4 0 1, 0 1 1, 1 1 1, 2 1 1, 3 1 1,
                            1 0 2, 2 0 2, 1 1 2, 2 1 2, 3 1 2
                        )
                    }
                }
                i0 += rows;
            }
            batch += b;
        }
    }

    /// Where a tile lies: its first batch index, first row and columns (a multiple of the
    /// tile's width), and how many rows its last vector holds short of a whole one (0 if
    /// none).
    #[derive(Clone)]
    struct At {
        batch: usize,
        rows: usize,
        cols: std::ops::Range<usize>,
        tail: usize,
    }

    /// `V` full-width and `H` (0 or 1) half-width vectors of rows by the tile's columns, `C`
    /// at a time, of dst, for `B` batch indices from `at.batch` on.
    ///
    /// # Safety
    /// As [`run`], and the batch indices exist.
    #[target_feature(enable = "avx512f,avx512vl,fma")]
    unsafe fn tile<const V: usize, const H: usize, const C: usize, const B: usize>(
        plan: &Broadcast,
        blocks: (&[f64], &[f64]),
        dst: &mut [f64],
        beta: f64,
        at: At,
    ) {
        let tail = if at.tail == 0 {
            u8::MAX
        } else {
            (1u8 << at.tail) - 1
        };
        // The masked vector is the half one where there is one, else the last full one.
        let masks: [u8; V] =
            std::array::from_fn(|v| if H == 0 && v + 1 == V { tail } else { u8::MAX });
        let row: [usize; B] = std::array::from_fn(|b| plan.row_batch[at.batch + b] + at.rows);
        let base: [usize; B] = std::array::from_fn(|b| plan.dst_batch[at.batch + b] + at.rows);
        let cols = (&plan.other_cols[at.cols.clone()], &plan.dst_cols[at.cols]);
        let sums = (&plan.row_sum[..], &plan.other_sum[..]);
        // SAFETY: `check` and `fits` bound every row run and every element of the offsets.
        unsafe {
            products::<V, H, C, B>(blocks, dst, (row, base, cols), sums, (masks, tail, beta));
        }
    }

    /// Offsets of a tile's columns in the other block and in dst.
    type Columns<'a> = (&'a [usize], &'a [usize]);

    /// The tile's columns (`other_cols` in the other block, `dst_cols` in dst past each
    /// `base`), `C` at a time ([`group`]).
    ///
    /// # Safety
    /// AVX-512F and AVX-512VL must be available and every read and write inside its block.
    #[target_feature(enable = "avx512f,avx512vl,fma")]
    #[inline(never)]
    unsafe fn products<const V: usize, const H: usize, const C: usize, const B: usize>(
        (rows, other): (&[f64], &[f64]),
        dst: &mut [f64],
        (row, base, (other_cols, dst_cols)): ([usize; B], [usize; B], Columns<'_>),
        (row_sum, other_sum): (&[usize], &[usize]),
        (masks, tail, beta): ([u8; V], u8, f64),
    ) {
        for (oc, dc) in other_cols.chunks_exact(C).zip(dst_cols.chunks_exact(C)) {
            let cols: [usize; C] = std::array::from_fn(|c| oc[c]);
            let out: [[usize; C]; B] =
                std::array::from_fn(|b| std::array::from_fn(|c| base[b] + dc[c]));
            // SAFETY: the caller's contract.
            unsafe {
                if B == 2 && H == 1 {
                    let pair = |x: [usize; B]| [x[0], x[B - 1]];
                    let out = [out[0], out[B - 1]];
                    joined::<V, C>(
                        (rows, other),
                        dst,
                        (pair(row), cols, out),
                        (row_sum, other_sum),
                        (tail, beta),
                    );
                } else {
                    group::<V, H, C, B>(
                        (rows, other),
                        dst,
                        (row, cols, out),
                        (row_sum, other_sum),
                        (masks, tail, beta),
                    );
                }
            }
        }
    }

    /// [`group`] for two batch indices whose rows end `t <= HALF` past their last whole vector
    /// (`tail`, the mask of `t` lanes): the two ends share one vector, the first batch index's
    /// in its low half, the second's in its high half, instead of a half-width vector each. On
    /// cores with two 512-bit FMA units a half-width FMA costs a whole one; 19 rows of two
    /// batch indices then take 5 FMAs per broadcast element instead of 6. The ends are read
    /// and written as half-width vectors, as before: whole-width masked stores across cache
    /// lines held short sums back 1.4×. Each lane takes the same products in the same order:
    /// the same bits.
    ///
    /// # Safety
    /// As [`products`].
    #[target_feature(enable = "avx512f,avx512vl,fma")]
    #[inline]
    unsafe fn joined<const V: usize, const C: usize>(
        (rows, other): (&[f64], &[f64]),
        dst: &mut [f64],
        (row, cols, out): ([usize; 2], [usize; C], [[usize; C]; 2]),
        (row_sum, other_sum): (&[usize], &[usize]),
        (tail, beta): (u8, f64),
    ) {
        let mut sums = [[[_mm512_setzero_pd(); C]; V]; 2];
        let mut ends = [_mm512_setzero_pd(); C];
        let (rp, op) = (rows.as_ptr(), other.as_ptr());
        for (&rs, &os) in row_sum.iter().zip(other_sum) {
            // SAFETY: the caller's contract.
            unsafe {
                let av: [[__m512d; V]; 2] = std::array::from_fn(|b| {
                    let p = rp.add(row[b] + rs);
                    std::array::from_fn(|v| _mm512_loadu_pd(p.add(v * LANES)))
                });
                let [low, high] =
                    row.map(|r| _mm256_maskz_loadu_pd(tail, rp.add(r + rs + V * LANES)));
                let end = _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(low), high);
                for c in 0..C {
                    let bv = _mm512_set1_pd(*op.add(os + cols[c]));
                    for (sum, a) in sums.iter_mut().zip(&av) {
                        for (s, &a) in sum.iter_mut().zip(a) {
                            s[c] = _mm512_fmadd_pd(a, bv, s[c]);
                        }
                    }
                    ends[c] = _mm512_fmadd_pd(end, bv, ends[c]);
                }
            }
        }
        let dp = dst.as_mut_ptr();
        for c in 0..C {
            for (b, sum) in sums.iter().enumerate() {
                for (v, s) in sum.iter().enumerate() {
                    // SAFETY: the caller's contract.
                    unsafe {
                        let p = dp.add(out[b][c] + v * LANES);
                        let s = if beta == 0.0 {
                            s[c]
                        } else {
                            _mm512_fmadd_pd(_mm512_set1_pd(beta), _mm512_loadu_pd(p), s[c])
                        };
                        _mm512_storeu_pd(p, s);
                    }
                }
            }
            let halves = [
                _mm512_castpd512_pd256(ends[c]),
                _mm512_extractf64x4_pd::<1>(ends[c]),
            ];
            for (o, h) in out.iter().zip(halves) {
                // SAFETY: the caller's contract: the `t` rows past the whole vectors.
                unsafe {
                    let p = dp.add(o[c] + V * LANES);
                    let s = if beta == 0.0 {
                        h
                    } else {
                        let old = _mm256_maskz_loadu_pd(tail, p);
                        _mm256_fmadd_pd(_mm256_set1_pd(beta), old, h)
                    };
                    _mm256_mask_storeu_pd(p, tail, s);
                }
            }
        }
    }

    /// The vector at `p`, the lanes of `mask`: unmasked where it is whole, as whole vectors are
    /// written ([`group`]).
    ///
    /// # Safety
    /// AVX-512F must be available and the lanes of `mask` readable.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn load(mask: u8, p: *const f64) -> __m512d {
        // SAFETY: the caller's contract.
        unsafe {
            if mask == u8::MAX {
                _mm512_loadu_pd(p)
            } else {
                _mm512_maskz_loadu_pd(mask, p)
            }
        }
    }

    /// `C` columns of [`products`] for `B` batch indices: their sums over every summed index,
    /// kept in registers, then written to dst at `out` (the masks keep the last vector inside
    /// the rows). Each broadcast element of the other block feeds the vectors of every batch
    /// index. One function that owns its sums from start to end, reading through shared
    /// references and writing through the exclusive one: sums that outlive the loop in an
    /// array, or reads through raw pointers from elsewhere, were kept in memory and stored
    /// after every FMA (see `dot`). Whole vectors are written unmasked: on Zen 5 a masked store
    /// with every lane on, to lines not in the caches, held benzene's `abck = aeck * eb` (a
    /// 2.3 MB dst) back 2.5× (docs/benchmarks.md, "... whole vectors written unmasked").
    ///
    /// # Safety
    /// As [`products`].
    #[target_feature(enable = "avx512f,avx512vl,fma")]
    #[inline]
    unsafe fn group<const V: usize, const H: usize, const C: usize, const B: usize>(
        (rows, other): (&[f64], &[f64]),
        dst: &mut [f64],
        (row, cols, out): ([usize; B], [usize; C], [[usize; C]; B]),
        (row_sum, other_sum): (&[usize], &[usize]),
        (masks, tail, beta): ([u8; V], u8, f64),
    ) {
        let mut sums = [[[_mm512_setzero_pd(); C]; V]; B];
        let mut halves = [[[_mm256_setzero_pd(); C]; H]; B];
        let (rp, op) = (rows.as_ptr(), other.as_ptr());
        for (&rs, &os) in row_sum.iter().zip(other_sum) {
            // SAFETY: the caller's contract.
            unsafe {
                let av: [[__m512d; V]; B] = std::array::from_fn(|b| {
                    let p = rp.add(row[b] + rs);
                    std::array::from_fn(|v| load(masks[v], p.add(v * LANES)))
                });
                let ah: [[__m256d; H]; B] = std::array::from_fn(|b| {
                    let p = rp.add(row[b] + rs);
                    std::array::from_fn(|_| _mm256_maskz_loadu_pd(tail, p.add(V * LANES)))
                });
                for c in 0..C {
                    let bv = _mm512_set1_pd(*op.add(os + cols[c]));
                    for b in 0..B {
                        for v in 0..V {
                            sums[b][v][c] = _mm512_fmadd_pd(av[b][v], bv, sums[b][v][c]);
                        }
                        for h in 0..H {
                            let bh = _mm512_castpd512_pd256(bv);
                            halves[b][h][c] = _mm256_fmadd_pd(ah[b][h], bh, halves[b][h][c]);
                        }
                    }
                }
            }
        }
        let dp = dst.as_mut_ptr();
        for b in 0..B {
            for c in 0..C {
                for v in 0..V {
                    // SAFETY: the caller's contract.
                    unsafe {
                        let p = dp.add(out[b][c] + v * LANES);
                        let s = if beta == 0.0 {
                            sums[b][v][c]
                        } else {
                            _mm512_fmadd_pd(_mm512_set1_pd(beta), load(masks[v], p), sums[b][v][c])
                        };
                        if masks[v] == u8::MAX {
                            _mm512_storeu_pd(p, s);
                        } else {
                            _mm512_mask_storeu_pd(p, masks[v], s);
                        }
                    }
                }
                for half in &halves[b] {
                    // SAFETY: the caller's contract.
                    unsafe {
                        let p = dp.add(out[b][c] + V * LANES);
                        let s = if beta == 0.0 {
                            half[c]
                        } else {
                            let old = _mm256_maskz_loadu_pd(tail, p);
                            _mm256_fmadd_pd(_mm256_set1_pd(beta), old, half[c])
                        };
                        _mm256_mask_storeu_pd(p, tail, s);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Letters;

    /// `dst = l * r` in this form, vector and scalar, against a naive loop (to 1e-12
    /// relative) and against each other (bit for bit), for beta 0 and 0.5.
    fn check(pattern: &str, ext: &dyn Fn(char) -> usize) {
        let case = Letters::new(pattern, ext);
        let [fl, fr, c] = case.groups();
        let Some(plan) = Broadcast::new(&case.blocks(), &fl, &fr, &c) else {
            assert!(!available(), "{pattern}: no broadcast plan");
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
            let (rows, other): (&[f64], &[f64]) = if plan.rows_are_left {
                (&lv, &rv)
            } else {
                (&rv, &lv)
            };
            let mut buf = Vec::new();
            let rows = match &plan.row_copy {
                Some(c) => c.operand(rows, &mut buf).unwrap(),
                None => rows,
            };
            let mut slow = start.clone();
            plan.scalar(rows, other, &mut slow, beta);
            assert_eq!(got, slow, "{pattern} beta {beta}: vector and scalar differ");
            for (i, (g, e)) in got.iter().zip(&expect).enumerate() {
                let tol = 1e-12 * e.abs().max(1.0);
                assert!(
                    (g - e).abs() <= tol,
                    "{pattern} beta {beta} [{i}]: {g} vs {e}"
                );
            }
        }
    }

    #[test]
    fn broadcast_products_match_naive() {
        let water = |c: char| if "ijklmn".contains(c) { 5 } else { 19 };
        for pattern in [
            "abck=amc*mbk",
            "aibj=acbj*ci",
            "abck=amck*mb",
            "abck=aeck*eb",
            "aibj=ambn*minj",
            "abck=mbk*amc",
            // The row block copied first, with `a` leading.
            "abck=mbc*mak",
            "abck=ebc*eak",
            "abck=eak*ebc",
            // No batch: the other block (34,295 elements) is read once.
            "abck=ebck*ea",
        ] {
            check(pattern, &water);
        }
        let test_job = |c: char| if "ijklmn".contains(c) { 5 } else { 9 };
        check("abck=mbc*mak", &test_job);
        // Rows of 8; 13 and 23 (a masked full-width last vector: 5 and 7 rows past the last
        // whole one); 16 (two whole vectors); 33 and 36 (a second tile of 1 and of 4 rows, a
        // half-width vector alone); 40 (five whole vectors in two tiles). Water's 19 above end
        // in a half one. Up to 16 rows the 3 batch indices go as a pair and one alone, as the
        // test job's 9 rows with 9 batch indices above.
        for a in [8, 13, 16, 23, 33, 36, 40] {
            check("abck=amc*mbk", &|c: char| if c == 'a' { a } else { 3 });
        }
        // Rows of two and a half vectors summed long enough: the ends of two batch indices in
        // one vector (3 batch indices: a pair and one alone).
        for a in [17, 19, 20, 25, 27, 28] {
            let ext = |c: char| match c {
                'a' => a,
                'm' => 12, // at least `avx512::JOINED_SUM`
                _ => 3,
            };
            check("abck=amc*mbk", &ext);
            check("abck=mbc*mak", &ext);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Random layouts: dst leads with the row label (8 to 33 long), which stands at a
        /// random place in the row block (copied first unless it leads); the batch, column and
        /// summed labels follow in random orders.
        #[test]
        fn random_layouts_match_naive(
            rows in proptest::sample::select(vec![8usize, 9, 13, 17, 19, 33]),
            ext in proptest::collection::vec(1usize..5, 5),
            order in proptest::collection::vec(0u32..1000, 5),
            at in 0usize..4,
        ) {
            // Labels: 'a' rows; 'b', 'c' batch; 'd' column; 'e' column; 'f' summed (k ≥ 1).
            let names = ['b', 'c', 'd', 'e', 'f'];
            let extent = |c: char| match c {
                'a' => rows,
                _ => names.iter().position(|&n| n == c).map_or(1, |i| ext[i]),
            };
            let shuffled = |labels: &str| -> String {
                let mut v: Vec<char> = labels.chars().collect();
                v.sort_by_key(|c| order[names.iter().position(|n| n == c).unwrap_or(0)]);
                v.into_iter().collect()
            };
            let mut row_block = shuffled("bcf");
            row_block.insert(at.min(row_block.len()), 'a');
            let pattern = format!("a{}={row_block}*{}", shuffled("bcde"), shuffled("def"));
            check(&pattern, &extent);
        }
    }

    #[test]
    fn other_layouts_take_other_forms() {
        let plan = |pattern: &str, n: usize| {
            let case = Letters::new(pattern, &|_| n);
            let [fl, fr, c] = case.groups();
            Broadcast::new(&case.blocks(), &fl, &fr, &c)
        };
        if !available() {
            return;
        }
        // dst's first label leads neither block: the block it lies in is copied where small.
        assert!(plan("abck=mbc*mak", 9).is_some_and(|p| p.copies_rows()));
        assert!(plan("abck=amc*mbk", 9).is_some_and(|p| !p.copies_rows()));
        assert!(plan("abck=ebcd*eakd", 9).is_none());
        // Rows shorter than a vector.
        assert!(plan("abck=amc*mbk", 5).is_none());
        // The other block too large to stay in L2.
        assert!(plan("abck=amcd*mbkd", 19).is_none());
    }
}
