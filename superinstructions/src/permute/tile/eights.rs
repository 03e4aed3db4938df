//! Tiles moved in 8 × 8 blocks: each source and destination line of a block (8 elements, 64
//! bytes) is read or written once, whole, so that the lines of a batch's tiles, which often
//! share L1 sets, cannot evict each other half used. The walks (strips, squares, blocks taken
//! across a batch, lines fetched ahead) are shared; how one block moves in registers, and
//! which walk a batch beyond L2 takes, are [`Lanes`]'s: a row per AVX-512 register
//! ([`Avx512`]), or on CPUs without AVX-512 a row in two AVX registers, as four 4 × 4
//! transposes ([`Avx`]).

use super::{Ahead, Loop, Tile};
use crate::packed::x86::transpose_registers;
use std::arch::x86_64::{
    __m256d, __m512d, _mm256_add_pd, _mm256_loadu_pd, _mm256_mul_pd, _mm256_permute2f128_pd,
    _mm256_set1_pd, _mm256_storeu_pd, _mm256_stream_pd, _mm256_unpackhi_pd, _mm256_unpacklo_pd,
    _mm512_add_pd, _mm512_loadu_pd, _mm512_mul_pd, _mm512_set1_pd, _mm512_storeu_pd,
    _mm512_stream_pd,
};

/// How one 8 × 8 block moves through registers. An accumulate multiplies by `alpha`, then
/// adds, as the scalar path does: every form gives the same bits. `NT` writes with
/// non-temporal stores (destination lines on cache lines).
pub(super) trait Lanes {
    /// Source rows `s + i·ss` (8 elements each) become destination rows `d + j·ds`; the same
    /// source rows `ahead` further are fetched into L2.
    ///
    /// # Safety
    /// The CPU has the instructions of the form, and the 8 source and 8 destination rows are
    /// in bounds.
    unsafe fn block<const ADD: bool, const NT: bool>(
        d: *mut f64,
        ds: usize,
        src: (*const f64, usize, Ahead),
        alpha: f64,
    );

    /// Writes the 8 elements at `s` to `d`.
    ///
    /// # Safety
    /// As [`Lanes::block`], for the 8 elements at `d` and at `s`.
    unsafe fn line<const ADD: bool>(d: *mut f64, s: *const f64, alpha: f64);

    /// How a batch of tiles that follow each other in the destination (`batch.ds == t.na`)
    /// is walked where the block does not fit in L2; `streamed`: the destination lines
    /// bypass the caches.
    fn beyond_l2(t: &Tile, batch: Loop, streamed: bool) -> Walk;

    /// Columns of blocks [`crowded`] takes side by side in tile `t`.
    fn side_by_side(_: &Tile) -> usize {
        SIDE_BY_SIDE
    }
}

/// The order in which [`transpose_batch`] moves the blocks of a batch of tiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Walk {
    /// Each block position in every tile before the next position.
    Across,
    /// As [`Walk::Across`], in groups of [`GROUP`] tiles, one group after the other.
    Groups,
    /// In [`strips`] of source rows, tile after tile in each strip.
    Strips,
    /// Each tile whole in turn, as [`transpose`] walks it.
    Tiles,
}

/// A row per AVX-512 register.
pub(super) struct Avx512;

/// Lines this many elements (64 KiB) apart share a set of AMD's L2 (1 MiB, 16 ways, Zen 4 and
/// 5), where the walk of a batch beyond L2 is chosen ([`Avx512::beyond_l2`]).
const L2_SET_PERIOD: usize = 8 * 1024;

/// Tiles a [`Walk::Groups`] takes across at a time: of 8 to 64, 8 ran 32⁴ `[3,1,2,0]`,
/// `[2,1,3,0]` and `[3,1,0,2]` fastest in the caches (0.68–0.85 of memcpy against 0.47–0.57
/// for 16 and more) and as fast as the others from memory but for `[3,1,2,0]` (0.84 against
/// 0.98–1.08).
const GROUP: usize = 8;

/// A row in two AVX registers.
pub(super) struct Avx;

impl Lanes for Avx512 {
    /// Strips on Intel's CPUs (see [`transpose_batch`]). Elsewhere, tiles no longer than a
    /// strip (whose strips walk them tile after tile) go across the tiles: on a Zen 5, tile
    /// after tile each block loads where the blocks before it stored, modulo 4 KiB (source
    /// and destination at one offset in their pages), and strips ran the 24⁴ reversals and
    /// their kin at 0.33–0.69 of memcpy hot, across them at 0.80–0.93 (`[3,1,2,0]` of 24⁴,
    /// 32⁴ and 48⁴ from memory 0.54–0.58 → 0.78–1.04). Where the tiles' rows share an L2 set
    /// (32⁴: 256 KiB apart), the lines the L2 fetched along them were evicted before the
    /// passes across came back to them: they go across [`GROUP`] tiles at a time (32⁴
    /// `[3,1,2,0]` hot 0.46 across the whole batch, 0.85 in groups). A batch whose tiles'
    /// sources start in one L2 set (32⁴ `[1,3,0,2]`, `[1,3,2,0]`) keeps the strips
    /// (0.71 against 0.47 across, hot). Figures in docs/benchmarks.md, "Permutations: batches
    /// beyond L2 across their tiles on AMD".
    fn beyond_l2(t: &Tile, batch: Loop, _: bool) -> Walk {
        let one_l2_set = |row: usize| row.is_multiple_of(L2_SET_PERIOD);
        if super::super::intel() || t.na > super::STRIP || one_l2_set(batch.ss) {
            Walk::Strips
        } else if one_l2_set(t.src_row) || one_l2_set(t.dst_row) {
            Walk::Groups
        } else {
            Walk::Across
        }
    }

    /// Off Intel's CPUs, two for tiles beyond L2 that stay in L3 beside their destination (1
    /// to 8 MiB): on a Zen 5 four columns of blocks ran a 512² transpose (the 8⁶
    /// `[3,4,5,0,1,2]`) at 0.21 of memcpy and two at 0.41, 512 × 768 at 0.42 against 0.65;
    /// smaller and larger tiles keep four (docs/benchmarks.md, "Permutations: squares two
    /// columns of blocks wide on AMD").
    fn side_by_side(t: &Tile) -> usize {
        let bytes = 8 * t.na * t.nb;
        if !super::super::intel() && (1 << 20..=8 << 20).contains(&bytes) {
            2
        } else {
            SIDE_BY_SIDE
        }
    }

    #[inline(always)]
    unsafe fn block<const ADD: bool, const NT: bool>(
        d: *mut f64,
        ds: usize,
        (s, ss, ahead): (*const f64, usize, Ahead),
        alpha: f64,
    ) {
        ahead.fetch_rows(s, (8, ss), 0);
        // SAFETY: the caller's contract: AVX-512F is present, the rows are in bounds.
        unsafe {
            let r: [__m512d; 8] = std::array::from_fn(|i| _mm512_loadu_pd(s.add(i * ss)));
            let columns = transpose_registers(r);
            let a = _mm512_set1_pd(alpha);
            for (j, c) in columns.into_iter().enumerate() {
                put8::<ADD, NT>(d.add(j * ds), c, a);
            }
        }
    }

    #[inline(always)]
    unsafe fn line<const ADD: bool>(d: *mut f64, s: *const f64, alpha: f64) {
        // SAFETY: the caller's contract.
        unsafe { put8::<ADD, false>(d, _mm512_loadu_pd(s), _mm512_set1_pd(alpha)) };
    }
}

/// Writes one destination line of 8 elements from an AVX-512 register.
///
/// # Safety
/// AVX-512F must be available and the 8 elements at `p` in bounds.
#[inline(always)]
unsafe fn put8<const ADD: bool, const NT: bool>(p: *mut f64, c: __m512d, a: __m512d) {
    // SAFETY: the caller's contract.
    unsafe {
        if ADD {
            _mm512_storeu_pd(p, _mm512_add_pd(_mm512_loadu_pd(p), _mm512_mul_pd(a, c)));
        } else if NT {
            _mm512_stream_pd(p, c);
        } else {
            _mm512_storeu_pd(p, c);
        }
    }
}

impl Lanes for Avx {
    /// Measured on a Zen 3 core (AVX2, 512 KiB of L2; docs/benchmarks.md, "Permutations in
    /// 8 × 8 blocks of AVX registers"), where strips lost to the walk across 1.3–2.4× on
    /// square tiles (24⁴ `[3,1,2,0]` 1.8×, streamed 32⁴ `[3,1,0,2]` 2.4×): across, except
    /// for tiles longer than a strip whose destination streams (each tile whole: 32⁴ and 48⁴
    /// `[3,2,0,1]`, 1.3–1.7× against strips), and for streamed tiles whose batch lies apart
    /// in the source (strips: 48⁴ `[3,2,1,0]`, 1.5× against across).
    fn beyond_l2(t: &Tile, batch: Loop, streamed: bool) -> Walk {
        match (streamed, t.nb > super::STRIP) {
            (false, _) => Walk::Across,
            (true, true) => Walk::Tiles,
            (true, false) if batch.ss == t.na => Walk::Across,
            (true, false) => Walk::Strips,
        }
    }

    /// Half a block at a time: the left (then right) halves of the 8 source rows become the
    /// first (then last) 4 destination rows, each written whole, its halves one after the
    /// other, from two 4 × 4 transposes.
    #[inline(always)]
    unsafe fn block<const ADD: bool, const NT: bool>(
        d: *mut f64,
        ds: usize,
        (s, ss, ahead): (*const f64, usize, Ahead),
        alpha: f64,
    ) {
        ahead.fetch_rows(s, (8, ss), 0);
        // SAFETY: the caller's contract: AVX is present, the rows are in bounds.
        unsafe {
            let a = _mm256_set1_pd(alpha);
            for h in [0, 4] {
                let r: [__m256d; 8] = std::array::from_fn(|i| _mm256_loadu_pd(s.add(i * ss + h)));
                let top = four(r[0], r[1], r[2], r[3]);
                let bottom = four(r[4], r[5], r[6], r[7]);
                for j in 0..4 {
                    let p = d.add((h + j) * ds);
                    put4::<ADD, NT>(p, top[j], a);
                    put4::<ADD, NT>(p.add(4), bottom[j], a);
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn line<const ADD: bool>(d: *mut f64, s: *const f64, alpha: f64) {
        // SAFETY: the caller's contract.
        unsafe {
            let a = _mm256_set1_pd(alpha);
            put4::<ADD, false>(d, _mm256_loadu_pd(s), a);
            put4::<ADD, false>(d.add(4), _mm256_loadu_pd(s.add(4)), a);
        }
    }
}

/// The columns of the 4 × 4 block whose rows are `r0..r3`.
///
/// # Safety
/// AVX must be available.
#[inline(always)]
unsafe fn four(r0: __m256d, r1: __m256d, r2: __m256d, r3: __m256d) -> [__m256d; 4] {
    // SAFETY: the caller's contract.
    unsafe {
        // r_i = [x_i0 x_i1 x_i2 x_i3]; t0 = [x00 x10 x02 x12], t1 = [x01 x11 x03 x13], ...
        let t0 = _mm256_unpacklo_pd(r0, r1);
        let t1 = _mm256_unpackhi_pd(r0, r1);
        let t2 = _mm256_unpacklo_pd(r2, r3);
        let t3 = _mm256_unpackhi_pd(r2, r3);
        [
            _mm256_permute2f128_pd::<0x20>(t0, t2),
            _mm256_permute2f128_pd::<0x20>(t1, t3),
            _mm256_permute2f128_pd::<0x31>(t0, t2),
            _mm256_permute2f128_pd::<0x31>(t1, t3),
        ]
    }
}

/// Writes 4 destination elements from an AVX register.
///
/// # Safety
/// AVX must be available and the 4 elements at `p` in bounds (32-byte aligned where `NT`).
#[inline(always)]
unsafe fn put4<const ADD: bool, const NT: bool>(p: *mut f64, c: __m256d, a: __m256d) {
    // SAFETY: the caller's contract.
    unsafe {
        if ADD {
            _mm256_storeu_pd(p, _mm256_add_pd(_mm256_loadu_pd(p), _mm256_mul_pd(a, c)));
        } else if NT {
            _mm256_stream_pd(p, c);
        } else {
            _mm256_storeu_pd(p, c);
        }
    }
}

/// The entry points for one kind of registers: [`transpose_batch`] and [`transpose_runs`]
/// compiled with its target feature, so that the walks and the block kernel inline into one
/// function with its instructions.
macro_rules! entry_points {
    ($lanes:ty, $feature:literal, $batch:ident, $runs:ident) => {
        /// [`super::transpose_batch`] in 8 × 8 blocks moved by these registers.
        ///
        /// # Safety
        /// The CPU has the target feature; otherwise as [`transpose_batch`].
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn $batch<const ADD: bool, const NT: bool>(
            dst: *mut f64,
            src: *const f64,
            t: Tile,
            batch: (Loop, Ahead),
            walk: Walk,
            alpha: f64,
        ) {
            // SAFETY: the caller's contract, passed on.
            unsafe { transpose_batch::<$lanes, ADD, NT>(dst, src, t, batch, walk, alpha) }
        }

        /// [`super::transpose_runs`] in 8 × 8 blocks moved by these registers.
        ///
        /// # Safety
        /// The CPU has the target feature; otherwise as [`transpose_runs`].
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn $runs<const ADD: bool>(
            dst: *mut f64,
            src: *const f64,
            t: Tile,
            runs: (Loop, Loop),
            buf: &mut [f64],
            alpha: f64,
        ) {
            // SAFETY: the caller's contract, passed on.
            unsafe { transpose_runs::<$lanes, ADD>(dst, src, t, runs, buf, alpha) }
        }
    };
}

entry_points!(
    Avx512,
    "avx512f",
    transpose_batch_avx512,
    transpose_runs_avx512
);
entry_points!(Avx, "avx", transpose_batch_avx, transpose_runs_avx);

/// [`transpose`] of each tile of a batch in turn.
///
/// # Safety
/// As [`transpose`], for every tile of the batch.
#[inline(always)]
unsafe fn tiles<L: Lanes, const ADD: bool, const NT: bool>(
    dst: *mut f64,
    src: *const f64,
    (t, batch): (Tile, Loop),
    alpha: f64,
    ahead: Ahead,
) {
    for r in 0..batch.n {
        // SAFETY: the caller's contract, for each tile.
        unsafe { transpose::<L, ADD, NT>(dst, src, t.along(batch, r), alpha, ahead) };
    }
}

/// The tile in 8 × 8 blocks; `na` and `nb` are multiples of 8.
///
/// # Safety
/// The CPU has `L`'s instructions, and every element of `t` in bounds of `dst` and `src`.
#[inline(always)]
unsafe fn transpose<L: Lanes, const ADD: bool, const NT: bool>(
    dst: *mut f64,
    src: *const f64,
    t: Tile,
    alpha: f64,
    ahead: Ahead,
) {
    if super::slender(t.na, t.nb) {
        // SAFETY: the caller's contract, passed on.
        return unsafe { strips::<L, ADD, NT>(dst, src, (t, Loop::ONCE), alpha, ahead) };
    }
    let squares = super::one_set(t.src_row) || super::many_pages(&t);
    if squares && t.na >= 8 * SIDE_BY_SIDE && t.nb >= 8 * SIDE_BY_SIDE {
        // SAFETY: the caller's contract, passed on.
        return unsafe { crowded::<L, ADD, NT>(dst, src, t, alpha, ahead) };
    }
    for k in (0..t.nb).step_by(8) {
        for i in (0..t.na).step_by(8) {
            // SAFETY: rows `k..k + 8 <= nb` and columns `i..i + 8 <= na` of the tile,
            // which the caller checked.
            unsafe {
                let d = dst.add(t.d0 + k * t.dst_row + i);
                let s = src.add(t.s0 + i * t.src_row + k);
                L::block::<ADD, NT>(d, t.dst_row, (s, t.src_row, ahead), alpha);
            }
        }
    }
}

/// The `batch.n` tiles of a batch (one for a slender tile, [`super::slender`]) in strips
/// of [`super::STRIP`] source rows: in each strip, tile after tile, a row of blocks (8
/// destination rows) across the strip at a time, so that the strip's source rows are read
/// once, each in a run, and each destination row is written a run of the strip's length.
///
/// # Safety
/// As [`transpose`], for every tile of the batch.
#[inline(always)]
unsafe fn strips<L: Lanes, const ADD: bool, const NT: bool>(
    dst: *mut f64,
    src: *const f64,
    (t, batch): (Tile, Loop),
    alpha: f64,
    ahead: Ahead,
) {
    for i0 in (0..t.na).step_by(super::STRIP) {
        let i_end = t.na.min(i0 + super::STRIP);
        for r in 0..batch.n {
            let t = t.along(batch, r);
            for k in (0..t.nb).step_by(8) {
                for i in (i0..i_end).step_by(8) {
                    // SAFETY: rows `k..k + 8 <= nb` and columns `i..i + 8 <= na` of tile
                    // `r`, which the caller checked.
                    unsafe {
                        let d = dst.add(t.d0 + k * t.dst_row + i);
                        let s = src.add(t.s0 + i * t.src_row + k);
                        L::block::<ADD, NT>(d, t.dst_row, (s, t.src_row, ahead), alpha);
                    }
                }
            }
        }
    }
}

/// Blocks per side of the squares [`crowded`] walks (128 elements): the pages a square
/// touches stay few enough for the TLB (a 2048² transpose walked a column of blocks at a
/// time, 2048 rows of 4 pages each, ran at a third of memcpy).
const SQUARE: usize = 16;
/// Columns of blocks [`crowded`] takes side by side (unless [`Lanes::side_by_side`] says
/// otherwise).
const SIDE_BY_SIDE: usize = 4;

/// [`transpose`] of a tile whose source rows share one L1 set (row strides of 4 KiB
/// multiples: 512², 2048², the 8⁶ `[3,4,5,0,1,2]`, `[3,0,2,1]` of 32⁴ and 48⁴), in squares
/// of [`SQUARE`] blocks, and in each square [`Lanes::side_by_side`] columns of blocks at a
/// time, row by row: the blocks taken one after the other then read four consecutive lines of
/// each source row, in four sets, where a single column of blocks read one set, whose few
/// ways bounded the misses in flight. 48⁴ `[3,0,2,1]` ran 2.3× and 2048² 3.1× as fast so,
/// and a 512² transpose at 0.50 of memcpy instead of 0.42, against 0.92 for 520²
/// (docs/benchmarks.md, "Permutations: rows that share an L1 set"). Blocks taken
/// diagonally did better where the blocks were in L3 and worse where they were in memory.
/// Each square's blocks fetch the source lines of the square below into L2 ([`Ahead`]);
/// the last square of a column passes on the caller's `ahead` (docs/benchmarks.md,
/// "Permutations: the next square fetched ahead"). Tiles of thousands of source rows a
/// page apart in any sets take the squares too ([`super::many_pages`]): a column of
/// blocks down them touches more pages than the TLB holds.
///
/// # Safety
/// As [`transpose`].
#[inline(always)]
unsafe fn crowded<L: Lanes, const ADD: bool, const NT: bool>(
    dst: *mut f64,
    src: *const f64,
    t: Tile,
    alpha: f64,
    ahead: Ahead,
) {
    let (na, nb) = (t.na / 8, t.nb / 8);
    let side_by_side = L::side_by_side(&t);
    for k0 in (0..nb).step_by(SQUARE) {
        let k_end = nb.min(k0 + SQUARE);
        for i0 in (0..na).step_by(SQUARE) {
            let i_end = na.min(i0 + SQUARE);
            // The next square down the column is the next to be read: its source lines
            // are fetched while this one moves (2048² 1.4–1.5× as fast so).
            let ahead = if i_end < na {
                Ahead(8 * SQUARE * t.src_row)
            } else {
                ahead
            };
            for k1 in (k0..k_end).step_by(side_by_side) {
                let k_last = k_end.min(k1 + side_by_side);
                for ib in i0..i_end {
                    for kb in k1..k_last {
                        let (i, k) = (ib * 8, kb * 8);
                        // SAFETY: rows `k..k + 8 <= nb` and columns `i..i + 8 <= na` of
                        // the tile, which the caller checked.
                        unsafe {
                            let d = dst.add(t.d0 + k * t.dst_row + i);
                            let s = src.add(t.s0 + i * t.src_row + k);
                            L::block::<ADD, NT>(d, t.dst_row, (s, t.src_row, ahead), alpha);
                        }
                    }
                }
            }
        }
    }
}

/// [`super::transpose_runs`] with 8 × 8 blocks.
///
/// # Safety
/// The CPU has `L`'s instructions, every block in bounds of `dst` and `src`, and `buf` at
/// least `64 · along_dst.n · along_src.n` elements long.
#[inline(always)]
unsafe fn transpose_runs<L: Lanes, const ADD: bool>(
    dst: *mut f64,
    src: *const f64,
    t: Tile,
    (along_dst, along_src): (Loop, Loop),
    buf: &mut [f64],
    alpha: f64,
) {
    let run = 8 * along_dst.n;
    let staged = buf.as_mut_ptr();
    // Source rows are read on, a line per step of `along_src`, before the next step of
    // `along_dst`.
    for p in 0..along_dst.n {
        for q in 0..along_src.n {
            let s = t.along(along_dst, p).along(along_src, q).s0;
            // SAFETY: block `(p, q)` is in bounds of `src` (the caller's contract), and
            // rows `8q..8q + 8`, columns `8p..8p + 8` of the staged rows in `buf`.
            unsafe {
                let b = staged.add(8 * q * run + 8 * p);
                L::block::<false, false>(b, run, (src.add(s), t.src_row, Ahead(0)), 0.0);
            }
        }
    }
    for q in 0..along_src.n {
        for k in 0..8 {
            // SAFETY: the run is the destination rows `k` of the blocks `(·, q)`, in bounds
            // (the caller's contract), and row `8q + k` of the staged rows.
            unsafe {
                let d = dst.add(t.d0 + q * along_src.ds + k * t.dst_row);
                let s = staged.add((8 * q + k) * run);
                for j in (0..run).step_by(8) {
                    L::line::<ADD>(d.add(j), s.add(j), alpha);
                }
            }
        }
    }
}

/// How [`transpose_batch`] walks a batch of tiles in `L`'s registers; `in_l2`: the
/// destination fits in L2; `streamed`: its lines bypass the caches. Tiles one block wide
/// (8⁶) are walked in the same order either way, and faster by the loop across.
pub(super) fn walk<L: Lanes>(t: &Tile, batch: Loop, in_l2: bool, streamed: bool) -> Walk {
    if batch.ds != t.na || (in_l2 && t.na != 8 && crowded_across(t, batch)) {
        Walk::Tiles
    } else if in_l2 || t.na == 8 {
        Walk::Across
    } else {
        L::beyond_l2(t, batch, streamed)
    }
}

/// Whether the blocks at one position of every tile of the batch, taken one after the other
/// across it, would write the destination in two L1 sets: the tile's destination rows share a
/// set ([`super::one_set`]) and the batch steps a multiple of 2 KiB along them (16⁴
/// `[2,3,1,0]`: planes of 256 × 16, rows 32 KiB apart, tiles 2 KiB apart). On AMD's Zen 5 the
/// walk across then ran at 0.13 of memcpy and tile after tile at 0.39 (docs/benchmarks.md,
/// "Permutations: a batch across two L1 sets, tile after tile"); measured there only, so
/// Intel CPUs keep the walk across.
fn crowded_across(t: &Tile, batch: Loop) -> bool {
    super::one_set(t.dst_row)
        && batch.ds.is_multiple_of(super::SET_PERIOD / 2)
        && !super::super::intel()
}

/// [`super::transpose_batch`] with 8 × 8 blocks.
///
/// Where the batch's tiles follow each other in the destination (`batch.ds == t.na`: the
/// 16⁴ and 24⁴ reversals, `[2,1,0,3]`, `[2,1,3,0]`, `[1,3,2,0]`), each block position is
/// taken in every tile before the next position, not each tile whole in turn. Whole tiles
/// in turn load each block where the block before it stored, modulo 4 KiB, when source
/// and destination sit at the same offset in their pages (as the allocator puts large
/// blocks): 16⁴ `[2,1,0,3]` ran 2.3× slower so than with the destination 512 bytes
/// further, and as fast across the tiles (docs/benchmarks.md, "Permutations: 8 × 8 blocks
/// for every plane"). Elsewhere (`[1,0,2,3]`, `[2,0,3,1]`) going across lost 1.1–1.5×.
/// That holds where the block fits in L2 (`in_l2`, 16⁴); on an Intel Xeon a larger block's
/// batch went faster in [`strips`] of source rows, tile after tile in each strip: the 32⁴ and
/// 48⁴ reversals 1.4–1.6×, `[3,2,0,1]` of 48⁴ 2.4×, and `[3,1,2,0]` of 24⁴ 1.5× (1.7× from
/// memory), where across the tiles each pass over a block position read a line of every
/// tile's rows from L3 or memory for one 8-element column of each (docs/benchmarks.md,
/// "Permutations: slender planes and batches beyond L2 in strips"); on AMD's Zen 5 it goes
/// across, or across a few tiles at a time ([`Walk::Groups`]). Which walk a batch beyond
/// L2 takes is [`Lanes::beyond_l2`]'s; the caller chooses the walk ([`walk`]).
///
/// # Safety
/// The CPU has `L`'s instructions, and every tile of the batch in bounds of `dst` and `src`.
#[inline(always)]
unsafe fn transpose_batch<L: Lanes, const ADD: bool, const NT: bool>(
    dst: *mut f64,
    src: *const f64,
    t: Tile,
    (batch, ahead): (Loop, Ahead),
    walk: Walk,
    alpha: f64,
) {
    match walk {
        // SAFETY (both): the caller's contract, passed on.
        Walk::Tiles => return unsafe { tiles::<L, ADD, NT>(dst, src, (t, batch), alpha, ahead) },
        Walk::Strips => {
            return unsafe { strips::<L, ADD, NT>(dst, src, (t, batch), alpha, ahead) };
        }
        Walk::Across | Walk::Groups => {}
    }
    let group = match walk {
        Walk::Groups => GROUP,
        _ => batch.n,
    };
    for r0 in (0..batch.n).step_by(group.max(1)) {
        for k in (0..t.nb).step_by(8) {
            for i in (0..t.na).step_by(8) {
                for r in r0..batch.n.min(r0 + group) {
                    let t = t.along(batch, r);
                    // SAFETY: rows `k..k + 8 <= nb` and columns `i..i + 8 <= na` of tile `r`,
                    // which the caller checked.
                    unsafe {
                        let d = dst.add(t.d0 + k * t.dst_row + i);
                        let s = src.add(t.s0 + i * t.src_row + k);
                        L::block::<ADD, NT>(d, t.dst_row, (s, t.src_row, ahead), alpha);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{AddScaled, Assign};
    use super::super::{by_rows, fence};
    use super::*;
    use crate::testutil::random_vec;

    /// A copy of `values` starting on a cache line, as the streamed stores need, and where
    /// it starts in the returned buffer.
    fn on_a_line(values: &[f64]) -> (Vec<f64>, usize) {
        let mut buf = vec![0.0; values.len() + 8];
        let skip = buf.as_ptr().align_offset(64).min(8);
        buf[skip..skip + values.len()].copy_from_slice(values);
        (buf, skip)
    }

    /// A batch in L2 whose tiles' blocks would write the destination in two L1 sets goes tile
    /// after tile off Intel CPUs (16⁴ `[2,3,1,0]`); the other batches whose tiles follow
    /// each other in the destination go across (16⁴ `[3,1,2,0]`).
    #[test]
    fn batches_across_two_sets_go_tile_after_tile() {
        let tile = |na, src_row| Tile {
            d0: 0,
            s0: 0,
            na,
            nb: 16,
            src_row,
            dst_row: 4096,
        };
        let crowded = (
            tile(256, 256),
            Loop {
                n: 16,
                ds: 256,
                ss: 16,
            },
        );
        let spread = (
            tile(16, 4096),
            Loop {
                n: 256,
                ds: 16,
                ss: 16,
            },
        );
        let want = if super::super::super::intel() {
            Walk::Across
        } else {
            Walk::Tiles
        };
        assert_eq!(walk::<Avx512>(&crowded.0, crowded.1, true, false), want);
        assert_eq!(
            walk::<Avx512>(&spread.0, spread.1, true, false),
            Walk::Across
        );
        // Beyond L2 the registers' walk decides ([`Avx512::beyond_l2`]).
        assert_eq!(
            walk::<Avx512>(&crowded.0, crowded.1, false, false),
            Avx512::beyond_l2(&crowded.0, crowded.1, false)
        );
    }

    /// Beyond L2, a batch of tiles side by side in the destination goes in strips on Intel's
    /// CPUs; elsewhere across the tiles (24⁴ `[3,1,2,0]`), in groups where the tiles' rows
    /// share an L2 set (32⁴ `[3,1,2,0]`), and in strips where the tiles' sources do (32⁴
    /// `[1,3,0,2]`) or the tiles are longer than a strip.
    #[test]
    fn batches_beyond_l2_go_across_off_intel_unless_they_share_l2_sets() {
        let batch = |(na, nb, src_row, dst_row): (usize, usize, usize, usize), n, ss| {
            let t = Tile {
                d0: 0,
                s0: 0,
                na,
                nb,
                src_row,
                dst_row,
            };
            walk::<Avx512>(&t, Loop { n, ds: na, ss }, false, false)
        };
        let off_intel = |walk| {
            if super::super::super::intel() {
                Walk::Strips
            } else {
                walk
            }
        };
        let reversal = batch((24, 24, 13824, 13824), 576, 24);
        let rows_in_one_l2_set = batch((32, 32, 32768, 32768), 1024, 32);
        let tiles_in_one_l2_set = batch((32, 32, 32, 32768), 32, 32768);
        let longer_than_a_strip = batch((1024, 32, 1024, 32768), 32, 32);
        assert_eq!(reversal, off_intel(Walk::Across));
        assert_eq!(rows_in_one_l2_set, off_intel(Walk::Groups));
        assert_eq!(tiles_in_one_l2_set, Walk::Strips);
        assert_eq!(longer_than_a_strip, Walk::Strips);
    }

    /// Every walk of a batch, in every kind of registers this CPU has, copying, accumulating
    /// and streaming, gives the bits of the scalar loop tile by tile: square tiles side by
    /// side in the destination, tiles longer than a strip, slender tiles, tiles whose source
    /// rows share an L1 set (squares), and tiles apart in both arrays.
    #[test]
    fn every_walk_in_every_lanes_is_the_scalar_loop() {
        // (na, nb, src_row, dst_row, batch)
        let cases = [
            // 13 tiles side by side in both: groups of 8 and 5.
            (
                16,
                16,
                16 * 13,
                16 * 13,
                Loop {
                    n: 13,
                    ds: 16,
                    ss: 16,
                },
            ),
            (
                24,
                24,
                576,
                24 * 6,
                Loop {
                    n: 6,
                    ds: 24,
                    ss: 24,
                },
            ),
            (
                72,
                16,
                16,
                72 * 3,
                Loop {
                    n: 3,
                    ds: 72,
                    ss: 72 * 16,
                },
            ),
            (
                1024,
                16,
                16,
                1024,
                Loop {
                    n: 2,
                    ds: 1024 * 16,
                    ss: 1024 * 16,
                },
            ),
            (
                64,
                32,
                512,
                64,
                Loop {
                    n: 2,
                    ds: 64 * 32,
                    ss: 64 * 512,
                },
            ),
            (
                16,
                8,
                8,
                16,
                Loop {
                    n: 4,
                    ds: 128,
                    ss: 136,
                },
            ),
        ];
        let mut lanes = Vec::new();
        if std::arch::is_x86_feature_detected!("avx512f") {
            lanes.push(true);
        }
        if std::arch::is_x86_feature_detected!("avx") {
            lanes.push(false);
        }
        for (c, &(na, nb, src_row, dst_row, batch)) in cases.iter().enumerate() {
            let t = Tile {
                d0: 0,
                s0: 3,
                na,
                nb,
                src_row,
                dst_row,
            };
            let last = |start: usize, step: usize, row: usize, rows: usize, run: usize| {
                start + (batch.n - 1) * step + (rows - 1) * row + run
            };
            let src = random_vec(last(t.s0, batch.ss, src_row, na, nb), c as u64);
            let dst_len = last(0, batch.ds, dst_row, nb, na);
            let start = random_vec(dst_len, 100 + c as u64);
            let expected = |add: bool| {
                let mut out = start.clone();
                for r in 0..batch.n {
                    let tile = t.along(batch, r);
                    if add {
                        by_rows(&mut out, &src, tile, AddScaled(0.3));
                    } else {
                        by_rows(&mut out, &src, tile, Assign);
                    }
                }
                out
            };
            let (copied, added) = (expected(false), expected(true));
            for &wide in &lanes {
                for walk in [Walk::Across, Walk::Groups, Walk::Strips, Walk::Tiles] {
                    for (add, streamed) in [(false, false), (true, false), (false, true)] {
                        let (mut buf, skip) = on_a_line(&start);
                        let out = &mut buf[skip..skip + dst_len];
                        let (d, s) = (out.as_mut_ptr(), src.as_ptr());
                        let b = (batch, Ahead(src_row));
                        // SAFETY: the CPU has the registers (`lanes`), every tile lies inside
                        // `out` and `src` (their lengths above), and `out` starts on a cache
                        // line with every destination row and tile a whole number of lines
                        // from it (all extents and steps are multiples of 8).
                        unsafe {
                            match (wide, add, streamed) {
                                (true, false, false) => {
                                    transpose_batch_avx512::<false, false>(d, s, t, b, walk, 0.0)
                                }
                                (true, true, _) => {
                                    transpose_batch_avx512::<true, false>(d, s, t, b, walk, 0.3)
                                }
                                (true, false, true) => {
                                    transpose_batch_avx512::<false, true>(d, s, t, b, walk, 0.0)
                                }
                                (false, false, false) => {
                                    transpose_batch_avx::<false, false>(d, s, t, b, walk, 0.0)
                                }
                                (false, true, _) => {
                                    transpose_batch_avx::<true, false>(d, s, t, b, walk, 0.3)
                                }
                                (false, false, true) => {
                                    transpose_batch_avx::<false, true>(d, s, t, b, walk, 0.0)
                                }
                            }
                        }
                        fence();
                        let want = if add { &added } else { &copied };
                        assert!(
                            out == want.as_slice(),
                            "case {c}, AVX-512 {wide}, {walk:?}, add {add}, streamed {streamed}"
                        );
                    }
                }
            }
        }
    }
}
