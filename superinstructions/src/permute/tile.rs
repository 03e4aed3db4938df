//! The transpose of one tile, the innermost step of every permutation that moves the fastest
//! dimension.
//!
//! On x86-64 with AVX the tile is cut into 4×4 blocks, each read as four 32-byte source rows,
//! transposed in registers and written as four 32-byte destination rows: one vector load and
//! one vector store per four elements instead of a scalar load and store per element, which
//! is what kept the scalar transpose at a fraction of a copy's rate. Batches of tiles whose
//! sides are multiples of 8 take 8×8 blocks, in AVX-512 registers where the CPU has them and
//! in pairs of AVX registers where it does not ([`eights`], [`transpose_batch`]). Other
//! targets and CPUs
//! without AVX take the scalar loop ([`by_rows`]). Both give bit-identical results: the
//! accumulate form multiplies and then adds (no fused multiply-add), like the scalar
//! `*d += alpha * s`. (Tiles whose short destination rows crowd into a few cache sets took
//! the scalar loop too while blocks were placed 16 bytes past a cache line; on lines, the
//! vector kernel is 1.2–2.3x faster there: docs/benchmarks.md.)

use super::{Loop, Store};

#[cfg(target_arch = "x86_64")]
mod eights;

/// An `na × nb` tile: element `(i, k)` (`i < na` along the destination's fastest dimension,
/// `k < nb` along the source's) is read at `s0 + i * src_row + k` and written at
/// `d0 + k * dst_row + i`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tile {
    pub d0: usize,
    pub s0: usize,
    pub na: usize,
    pub nb: usize,
    pub src_row: usize,
    pub dst_row: usize,
}

impl Tile {
    /// Tile `r` of a batch along `batch`: moved by `r * batch.ds` in the destination and
    /// `r * batch.ss` in the source.
    fn along(self, batch: Loop, r: usize) -> Tile {
        Tile {
            d0: self.d0 + r * batch.ds,
            s0: self.s0 + r * batch.ss,
            ..self
        }
    }

    /// Whether every tile of a batch along `batch` lies inside the buffers: the offsets grow
    /// with the tile's place in the batch, so the first and the last inside means all are.
    #[cfg(target_arch = "x86_64")]
    fn batch_inside(&self, batch: Loop, dst_len: usize, src_len: usize) -> bool {
        let Some(last) = batch.n.checked_sub(1) else {
            return false;
        };
        let end = |start: usize, step: usize| step.checked_mul(last)?.checked_add(start);
        match (end(self.d0, batch.ds), end(self.s0, batch.ss)) {
            (Some(d0), Some(s0)) => {
                let last = Tile { d0, s0, ..*self };
                self.inside(dst_len, src_len) && last.inside(dst_len, src_len)
            }
            _ => false,
        }
    }

    /// Whether every element the tile reads and writes lies inside the buffers; the vector
    /// path relies on it instead of per-element bounds checks.
    fn inside(&self, dst_len: usize, src_len: usize) -> bool {
        if self.na == 0 || self.nb == 0 {
            return true;
        }
        let last = |start: usize, row: usize, rows: usize, run: usize| {
            row.checked_mul(rows - 1)
                .and_then(|o| o.checked_add(start))
                .and_then(|o| o.checked_add(run))
        };
        matches!(last(self.s0, self.src_row, self.na, self.nb), Some(end) if end <= src_len)
            && matches!(last(self.d0, self.dst_row, self.nb, self.na), Some(end) if end <= dst_len)
    }
}

/// Transposes `tile` from `src` into `dst` through `st`: four destination rows at a time by
/// the vector kernel where the CPU has one, else by [`by_rows`].
pub(super) fn transpose<S: Store>(dst: &mut [f64], src: &[f64], tile: Tile, st: S) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") && tile.inside(dst.len(), src.len()) {
        let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
        // SAFETY: AVX is present, and `inside` checked that every offset the tile touches is
        // in bounds of its buffer; `dst` and `src` are distinct borrows, so they do not overlap.
        unsafe {
            match st.alpha() {
                None => avx::transpose::<false>(d, s, tile, 0.0),
                Some(alpha) => avx::transpose::<true>(d, s, tile, alpha),
            }
        }
        return;
    }
    self::by_rows(dst, src, tile, st);
}

/// Whether a batch of `na × nb` tiles goes through 8 × 8 blocks on this CPU ([`eights`]): each
/// source and destination line of such a block is read or written once, whole, so the lines
/// of the batch's tiles, which often share L1 sets, cannot evict each other half used. Which
/// planes take it is `permute::in_eights`'s choice.
pub(super) fn eight_wide(na: usize, nb: usize) -> bool {
    na.is_multiple_of(8) && nb.is_multiple_of(8) && eight_lanes().is_some()
}

/// Whether a batch of `na × nb` tiles whose source rows lie `src_row` apart goes in 8 × 8
/// blocks ([`eight_wide`]) rather than by 4 × 4 blocks and the cut of `permute::cut`;
/// `streamed`: the length of the destination where its lines bypass the caches. In AVX-512
/// registers, always. In AVX registers, as measured on a Zen 3 core (docs/benchmarks.md,
/// "Permutations in 8 × 8 blocks of AVX registers"):
/// - where the destination streams (a whole line leaves as two stores, one after the
///   other): 48⁴ 1.1–1.9× as fast, 32⁴ up to 1.6×; except square tiles side by side in a
///   destination that, with its source, fits in L3 ([`FROM_MEMORY`]): 32⁴ `[2,1,0,3]` and
///   `[3,1,0,2]` lost 1.5× with the blocks in L3;
/// - where the batch's tiles follow each other in the destination and the walk across them
///   pays: the 16⁴ and 24⁴ reversals 1.7–1.9×;
/// - not for slender planes, unless their batch's tiles follow each other in the destination:
///   32⁴ `[1,2,0,3]` lost 1.45×, while 32⁴ and 48⁴ `[2,3,1,0]` gained 1.4–1.5×;
/// - not across tiles whose source is one run: 24⁴ `[1,3,0,2]` lost 1.3×;
/// - nor for other planes, whose cut moves them as fast or faster: 24⁴ `[3,0,2,1]` and
///   `[2,3,0,1]` lost 1.2–1.9× in one batch.
pub(super) fn eights_pay(
    (na, nb, src_row): (usize, usize, usize),
    batch: Loop,
    streamed: Option<usize>,
) -> bool {
    if !eight_wide(na, nb) {
        return false;
    }
    match eight_lanes() {
        Some(EightLanes::Avx512) => true,
        Some(EightLanes::Avx) => {
            let along = batch.n > 1 && batch.ds == na;
            let pays = match streamed {
                Some(len) => !(along && nb <= STRIP && len <= FROM_MEMORY),
                None => along && src_row != nb,
            };
            pays && (along || !slender(na, nb))
        }
        None => false,
    }
}

/// Destinations of more elements than this (16 MiB) come, with their sources, from memory
/// rather than from a 32 MiB L3.
const FROM_MEMORY: usize = 2 << 20;

/// The registers an 8 × 8 block moves through on this CPU: AVX-512 where it has them, else
/// AVX, else none (the 4 × 4 and scalar paths).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) enum EightLanes {
    Avx512,
    Avx,
}

impl EightLanes {
    /// How a batch of tiles is walked in these registers ([`eights::walk`]).
    #[cfg(target_arch = "x86_64")]
    fn walk(self, t: &Tile, batch: Loop, in_l2: bool, streamed: bool) -> eights::Walk {
        match self {
            EightLanes::Avx512 => eights::walk::<eights::Avx512>(t, batch, in_l2, streamed),
            EightLanes::Avx => eights::walk::<eights::Avx>(t, batch, in_l2, streamed),
        }
    }
}

pub(super) fn eight_lanes() -> Option<EightLanes> {
    #[cfg(target_arch = "x86_64")]
    {
        static LANES: std::sync::OnceLock<Option<EightLanes>> = std::sync::OnceLock::new();
        *LANES.get_or_init(|| {
            if std::arch::is_x86_feature_detected!("avx512f") {
                Some(EightLanes::Avx512)
            } else if std::arch::is_x86_feature_detected!("avx") {
                Some(EightLanes::Avx)
            } else {
                None
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Whether an `na × nb` plane is slender: many source rows ([`MANY`] or more), each at most
/// [`SHORT`] elements long, and so a few long destination rows, as the `[1,2,3,0]` of a 32⁴
/// block (32,768 source rows of 32 elements) or its `[1,2,0,3]` (32 planes of 1,024 rows of
/// 32). The 8 × 8 kernel walks such a plane in strips of source rows ([`STRIP`]): a column of
/// blocks down the whole plane read one line of each of thousands of source rows before the
/// next line of any, and the mirror cut of tiles (`permute::cut`) moved them 4 × 4 at a time;
/// in strips, 32⁴ and 48⁴ `[1,2,3,0]` and `[1,2,0,3]` ran 1.4–2.1× as fast, 16⁴ and 24⁴
/// `[1,2,3,0]` 1.3–1.7× (docs/benchmarks.md, "Permutations: slender planes and batches beyond
/// L2 in strips"). The mirror, many short destination rows (`[3,0,1,2]`, `[2,0,1,3]`), keeps
/// the narrow cut: in strips it gained on 16⁴ and 24⁴ but lost up to 1.35× on 32⁴ and 48⁴.
pub(super) fn slender(na: usize, nb: usize) -> bool {
    nb <= SHORT && na >= MANY
}

/// A slender plane's source rows are at most this long (512 bytes)...
const SHORT: usize = 64;
/// ...and it has at least this many of them.
const MANY: usize = 1024;
/// Source rows per strip: a strip (at most 64 rows of 64 elements, 32 KiB) stays in L1 while
/// its 8 × 8 blocks move, and each destination row is written 512 bytes on end. Strips of 8
/// (one block) left 16⁴ `[1,2,3,0]` at 0.5 of memcpy; strips of 32–256 took it to 0.6–0.8
/// (64 best with the blocks in memory).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const STRIP: usize = 64;

/// Whether a column of 8 × 8 blocks down `t` reads from more pages than the TLB holds: at
/// least [`MANY_PAGES`] source rows, each a page or more from the next. The 8 × 8 kernel then
/// walks the tile in squares, as it does tiles whose rows share an L1 set. The 2304² plane
/// of 48⁴ `[2,3,0,1]` (rows 18 KiB apart) ran 1.8× as fast so, hot and from memory
/// (docs/benchmarks.md, "Permutations: planes of thousands of far rows in squares").
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn many_pages(t: &Tile) -> bool {
    t.src_row >= PAGE && t.na >= MANY_PAGES
}

/// Elements in a 4 KiB page.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const PAGE: usize = 512;
/// Source rows a page apart from which a column of blocks misses the second-level TLB
/// (1,536–2,048 entries on current x86-64 cores). At 576 rows (24⁴ `[2,3,0,1]`) squares
/// gained from memory (0.80–0.85 → 0.96–1.11 of memcpy) but lost in the caches (0.79–0.84 →
/// 0.76–0.79), so they start above it.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const MANY_PAGES: usize = 1024;

/// [`transpose`] of `batch.n` tiles, tile `r` moved by `r * batch.ds` in the destination and
/// `r * batch.ss` in the source, in one call: for permutations whose planes are single small
/// tiles (an 8⁶ block has 4,096 planes of 8 × 8), where a call and its checks per tile cost
/// as much as the tile.
///
/// `ahead`: where the batch the caller moves next lies in the source ([`Ahead`]).
pub(super) fn transpose_batch<S: Store>(
    dst: &mut [f64],
    src: &[f64],
    tile: Tile,
    (batch, ahead): (Loop, Ahead),
    st: S,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") && tile.batch_inside(batch, dst.len(), src.len())
    {
        let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
        let lanes =
            eight_lanes().filter(|_| eights_pay((tile.na, tile.nb, tile.src_row), batch, None));
        // SAFETY: AVX (and AVX-512F where `lanes` says so) is present, every tile of the
        // batch lies inside the buffers (above), and `dst` and `src` are distinct borrows.
        unsafe {
            let (add, a) = (st.alpha().is_some(), st.alpha().unwrap_or(0.0));
            let walked = lanes.map(|l| (l, l.walk(&tile, batch, in_l2(dst), false)));
            let batch = (batch, ahead);
            match (walked, add) {
                (Some((EightLanes::Avx512, walk)), false) => {
                    eights::transpose_batch_avx512::<false, false>(d, s, tile, batch, walk, a)
                }
                (Some((EightLanes::Avx512, walk)), true) => {
                    eights::transpose_batch_avx512::<true, false>(d, s, tile, batch, walk, a)
                }
                (Some((EightLanes::Avx, walk)), false) => {
                    eights::transpose_batch_avx::<false, false>(d, s, tile, batch, walk, a)
                }
                (Some((EightLanes::Avx, walk)), true) => {
                    eights::transpose_batch_avx::<true, false>(d, s, tile, batch, walk, a)
                }
                (None, add) => {
                    // Blocks in L2 need no fetching ahead; small tiles would pay for it.
                    let batch = (batch.0, if in_l2(dst) { Ahead(0) } else { batch.1 });
                    match add {
                        false => avx::transpose_batch::<false>(d, s, tile, batch, a),
                        true => avx::transpose_batch::<true>(d, s, tile, batch, a),
                    }
                }
            }
        }
        return;
    }
    // Only the 8 × 8 kernels fetch ahead.
    let _ = ahead;
    for r in 0..batch.n {
        transpose(dst, src, tile.along(batch, r), st);
    }
}

/// Whether a destination (and so its source, as large) fits in L2 ([`crate::L2_BYTES`]): the
/// 8 × 8 kernel's order for a batch depends on it, and the 4 × 4 kernel fetches ahead only
/// beyond it.
#[cfg(target_arch = "x86_64")]
fn in_l2(dst: &[f64]) -> bool {
    std::mem::size_of_val(dst) <= crate::L2_BYTES
}

/// How far in the source the tiles a permutation moves next lie (0: none, or not known), so
/// that the 8 × 8 kernel fetches their lines into L2 while it moves these. A plane moved in
/// 8 × 8 blocks is read along all its rows at once (24 for a 24⁴ block), more streams than
/// the hardware prefetchers follow; fetched a walk step ahead, those lines are in L2 when the
/// kernel gets to them. On blocks in memory, 16⁴ and 24⁴ permutations ran up to 1.6× as fast
/// (1.13× and 1.12× over all 24); on blocks in the caches nothing moved beyond the noise
/// (docs/benchmarks.md, "Permutations: source lines fetched a step ahead"). The 4 × 4 kernel
/// (sides not a multiple of 8) fetches each tile's rows ahead where the block is beyond L2:
/// 31⁴ from memory and the 12⁶ block's `[2,1,0,5,4,3]` ran up to 1.4× as fast
/// (docs/benchmarks.md, "Permutations: 4 × 4 tiles fetch ahead beyond L2").
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) struct Ahead(pub usize);

#[cfg(target_arch = "x86_64")]
impl Ahead {
    /// Fetches into L2, this far ahead, the first line of `rows` source rows from `s`, `ss`
    /// apart, and where `last` is not 0 the line of each row's element `last` too.
    #[inline(always)]
    fn fetch_rows(self, s: *const f64, (rows, ss): (usize, usize), last: usize) {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        if self.0 == 0 {
            return;
        }
        for i in 0..rows {
            let row = s.wrapping_add(i * ss + self.0);
            // SAFETY: hints, which neither read nor fault: the wrapping address may lie past
            // the source (the last batch's next).
            unsafe { _mm_prefetch::<_MM_HINT_T1>(row.cast()) };
            if last != 0 {
                // SAFETY: as above.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(last).cast()) };
            }
        }
    }
}

/// Rows a multiple of this many elements (4 KiB) apart start in the same L1 set (64 sets of
/// 64-byte lines on every x86-64 core since Sandy Bridge and on Zen).
const SET_PERIOD: usize = 512;

/// Whether rows `row` elements apart all fall into one L1 set (and so whether a step of `row`
/// elements stays in its set): the 8 rows an 8 × 8 block reads or writes then share one set,
/// and the misses one set can have in flight (its ways) bound the kernel unless consecutive
/// blocks use other sets ([`transpose_runs`], and the 8 × 8 kernel's order for tiles whose
/// source rows share a set).
pub(super) fn one_set(row: usize) -> bool {
    row.is_multiple_of(SET_PERIOD)
}

/// The 8 × 8 blocks `tile` moved `p < along_dst.n` steps along `along_dst` and `q <
/// along_src.n` along `along_src`, where `along_dst` continues the blocks' destination rows
/// (`along_dst.ds == 8`) and `along_src` their source rows (`along_src.ss == 8`): the blocks
/// are transposed into `buf` (row `8q + k` holds destination row `k` of the blocks `(·, q)`,
/// `8 · along_dst.n` elements long), then each row of `buf` goes to the destination as one
/// run, so that both arrays are read and written in runs of whole lines (`permute::RunTiles`).
/// `buf` holds at least `64 · along_dst.n · along_src.n` elements. An accumulate multiplies
/// and then adds, as the other kernels do: the same bits.
pub(super) fn transpose_runs<S: Store>(
    dst: &mut [f64],
    src: &[f64],
    tile: Tile,
    (along_dst, along_src): (Loop, Loop),
    buf: &mut [f64],
    st: S,
) {
    #[cfg(target_arch = "x86_64")]
    if let (Some(pl), Some(ql)) = (along_dst.n.checked_sub(1), along_src.n.checked_sub(1)) {
        let corner = tile.along(along_dst, pl).along(along_src, ql);
        // Offsets grow with `p` and `q`: the first and the last block inside means all are.
        let inside = tile.inside(dst.len(), src.len()) && corner.inside(dst.len(), src.len());
        if (tile.na, tile.nb, along_dst.ds, along_src.ss) == (8, 8, 8, 8)
            && inside
            && buf.len() >= 64 * along_dst.n * along_src.n
            && let Some(lanes) = eight_lanes()
        {
            let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
            let runs = (along_dst, along_src);
            // SAFETY: the CPU has `lanes`, every block lies inside the
            // buffers and `buf` holds the staged rows (above); `dst`, `src` and `buf` are
            // distinct borrows.
            unsafe {
                let a = st.alpha().unwrap_or(0.0);
                match (lanes, st.alpha().is_some()) {
                    (EightLanes::Avx512, false) => {
                        eights::transpose_runs_avx512::<false>(d, s, tile, runs, buf, a)
                    }
                    (EightLanes::Avx512, true) => {
                        eights::transpose_runs_avx512::<true>(d, s, tile, runs, buf, a)
                    }
                    (EightLanes::Avx, false) => {
                        eights::transpose_runs_avx::<false>(d, s, tile, runs, buf, a)
                    }
                    (EightLanes::Avx, true) => {
                        eights::transpose_runs_avx::<true>(d, s, tile, runs, buf, a)
                    }
                }
            }
            return;
        }
    }
    let _ = buf;
    for p in 0..along_dst.n {
        for q in 0..along_src.n {
            transpose(dst, src, tile.along(along_dst, p).along(along_src, q), st);
        }
    }
}

/// [`transpose_batch`] of a plain copy in 8 × 8 blocks whose destination lines bypass the
/// caches (non-temporal stores of whole lines); the caller calls [`fence`] before the
/// destination is read. Every destination line of the batch must start on a cache line: the
/// destination does, and its rows, tiles and batch step are whole lines apart. Falls back to
/// [`transpose_batch`] where the CPU or the placement does not allow it.
pub(super) fn transpose_batch_streamed(
    dst: &mut [f64],
    src: &[f64],
    tile: Tile,
    (batch, ahead): (Loop, Ahead),
) {
    #[cfg(target_arch = "x86_64")]
    {
        let lines = |n: usize| n.is_multiple_of(8);
        let aligned = dst.as_ptr().align_offset(64) == 0
            && lines(tile.d0)
            && lines(tile.dst_row)
            && (batch.n == 1 || lines(batch.ds));
        if aligned
            && eights_pay((tile.na, tile.nb, tile.src_row), batch, Some(dst.len()))
            && tile.batch_inside(batch, dst.len(), src.len())
            && let Some(lanes) = eight_lanes()
        {
            let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
            let walk = lanes.walk(&tile, batch, in_l2(dst), true);
            // SAFETY: the CPU has `lanes`, every tile of the batch lies inside the buffers,
            // every destination line starts on a cache line (above), and `dst` and `src` are
            // distinct borrows.
            unsafe {
                match lanes {
                    EightLanes::Avx512 => eights::transpose_batch_avx512::<false, true>(
                        d,
                        s,
                        tile,
                        (batch, ahead),
                        walk,
                        0.0,
                    ),
                    EightLanes::Avx => eights::transpose_batch_avx::<false, true>(
                        d,
                        s,
                        tile,
                        (batch, ahead),
                        walk,
                        0.0,
                    ),
                }
            };
            return;
        }
    }
    transpose_batch(dst, src, tile, (batch, ahead), super::Assign);
}

/// The scalar transpose: each destination row written whole before the next.
pub(super) fn by_rows<S: Store>(dst: &mut [f64], src: &[f64], t: Tile, st: S) {
    let inside = t.inside(dst.len(), src.len());
    for k in 0..t.nb {
        let out = &mut dst[t.d0 + k * t.dst_row..][..t.na];
        let s = &src[t.s0 + k..];
        for (i, d) in out.iter_mut().enumerate() {
            let v = if inside {
                // SAFETY: `inside` checked `s0 + (na - 1) * src_row + nb <= src.len()`, so
                // `k + i * src_row` (k < nb, i < na) is in bounds of `s`. Unchecked because
                // the checked strided read (a bounds check, or a division per row to split
                // the row into chunks) ran at half the speed.
                unsafe { *s.get_unchecked(i * t.src_row) }
            } else {
                s[i * t.src_row]
            };
            st.store(d, v);
        }
    }
}

/// Whether [`transpose_streamed`] can write with non-temporal stores on this CPU.
pub(super) fn can_stream() -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        return true;
    }
    false
}

/// A plain-copy transpose of `tile` whose destination rows bypass the caches: the tile is
/// transposed into `out` (in L1, its rows `na` long and contiguous), then each row is written
/// to `dst` with non-temporal stores. A destination far larger than the caches otherwise has
/// every one of its lines read in before it is overwritten, and its scattered rows evict each
/// other while the tile is written. The caller calls [`fence`] before the destination is
/// handed on. `out` must hold `na * nb` elements; without AVX the rows are plain copies.
pub(super) fn transpose_streamed(dst: &mut [f64], src: &[f64], tile: Tile, out: &mut [f64]) {
    let out = &mut out[..tile.na * tile.nb];
    let packed = Tile {
        d0: 0,
        dst_row: tile.na,
        ..tile
    };
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") && packed.inside(out.len(), src.len()) {
        // SAFETY: AVX is present and the packed tile lies inside `out` and `src`.
        unsafe { avx::transpose_streamed(dst, src, tile, out) };
        return;
    }
    transpose(out, src, packed, super::Assign);
    for (k, row) in out.chunks_exact(tile.na).enumerate() {
        dst[tile.d0 + k * tile.dst_row..][..tile.na].copy_from_slice(row);
    }
}

/// Copies the `na` source rows of a tile, `nb` elements from `s0` every `src_row`, into `buf`
/// one after the other: inline vector moves, where a call to `memcpy` per row cost as much as
/// the row's copy.
pub(super) fn stage(buf: &mut [f64], src: &[f64], s0: usize, src_row: usize, na: usize, nb: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present.
        unsafe { avx::stage(buf, src, s0, src_row, na, nb) };
        return;
    }
    for (i, row) in buf[..na * nb].chunks_exact_mut(nb).enumerate() {
        row.copy_from_slice(&src[s0 + i * src_row..][..nb]);
    }
}

/// `next.n` runs of `n` elements, run `j` from `src` at `soff + j * next.ss` to `dst` at
/// `doff + j * next.ds`: inline vector moves where the CPU has AVX.
pub(super) fn copy_runs(
    dst: &mut [f64],
    src: &[f64],
    n: usize,
    (doff, soff): (usize, usize),
    next: Loop,
) {
    #[cfg(target_arch = "x86_64")]
    // Runs of a multiple of 4 stay in 4-element moves, which cover them whole: in 8-element
    // moves 16⁴ `[0,2,3,1]` and 32⁴ `[0,2,3,1]` ran 1.15–1.2× as long, and the 12⁶ block's
    // runs of 12 (an 8-element move and an overlapping one) 1.2× from memory. Runs of 8 take
    // one move each: the 8⁶ block's `[0,2,1,4,3,5]` ran 1.2× as fast in L3 (docs/benchmarks.md,
    // "Permutations: runs of 8 in one move on AMD").
    if wide_runs()
        && (!n.is_multiple_of(4) || n == 8)
        && runs_inside((dst.len(), src.len()), n, (doff, soff), next)
    {
        // SAFETY: AVX-512F is present (`wide_runs`), and every run lies inside its buffer.
        unsafe { avx512::copy_runs(dst.as_mut_ptr(), src.as_ptr(), n, (doff, soff), next) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present.
        unsafe { avx::copy_runs(dst, src, n, (doff, soff), next) };
        return;
    }
    for j in 0..next.n {
        dst[doff + j * next.ds..][..n].copy_from_slice(&src[soff + j * next.ss..][..n]);
    }
}

/// The runs of `n` elements at every offset of `walk` (innermost first, at most three
/// loops: a 4-index block's runs), copied by one call of [`avx512::copy_run_nest`] where runs
/// go in 8-element moves ([`wide_runs`], `n` not a multiple of 4) and every run lies inside
/// its buffer; whether it did (else nothing was written). Walked a call of [`copy_runs`] per
/// step of the two outer loops, water's `[19,5,19,5]` runs cost nearly as much in the calls
/// and their checks as in the moves. Runs of a multiple of 4 keep those calls: in one nest,
/// 16⁴ and 24⁴ `[0,2,3,1]` (destination runs in one L1 set) ran 1.2–1.6× as long, their
/// stores no longer spaced out (docs/benchmarks.md, "Permutations: a 4-index block's runs in
/// one call on AMD").
pub(super) fn copy_run_nest(dst: &mut [f64], src: &[f64], n: usize, walk: &[Loop]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if let [w0, rest @ ..] = walk
        && rest.len() <= 2
        && wide_runs()
        && !n.is_multiple_of(4)
    {
        let w1 = rest.first().copied().unwrap_or(Loop::ONCE);
        let w2 = rest.get(1).copied().unwrap_or(Loop::ONCE);
        let inside = |len: usize, step: fn(&Loop) -> usize| {
            super::reach([w0, &w1, &w2], step)
                .and_then(|r| r.checked_add(n.checked_sub(1)?))
                .is_some_and(|end| end <= len)
        };
        if n > 0 && inside(dst.len(), |l| l.ds) && inside(src.len(), |l| l.ss) {
            // SAFETY: AVX-512F is present (`wide_runs`), and the last element of the furthest
            // run lies inside each buffer.
            unsafe {
                avx512::copy_run_nest(dst.as_mut_ptr(), src.as_ptr(), n, [*w0, w1, w2]);
            }
            return true;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (dst, src, n, walk);
    false
}

/// Whether runs are copied by [`avx512::copy_runs`], and walked in [`fetch_for_writing`]
/// chunks only from beyond L2 (`permute::chunks_pay`): where the CPU has AVX-512 and is not an
/// Intel one (measured on AMD's Zen 5: docs/benchmarks.md, "Permutations: runs in 8-element
/// moves on AMD").
pub(super) fn wide_runs() -> bool {
    eight_lanes() == Some(EightLanes::Avx512) && !super::intel()
}

/// Whether the `next.n` runs of `n` elements from `(doff, soff)` lie inside buffers of
/// `(dst_len, src_len)` elements: the last run of each does.
#[cfg(target_arch = "x86_64")]
fn runs_inside(
    (dst_len, src_len): (usize, usize),
    n: usize,
    (doff, soff): (usize, usize),
    next: Loop,
) -> bool {
    let Some(last) = next.n.checked_sub(1) else {
        return true;
    };
    let end =
        |start: usize, step: usize| step.checked_mul(last)?.checked_add(start)?.checked_add(n);
    matches!(end(doff, next.ds), Some(e) if e <= dst_len)
        && matches!(end(soff, next.ss), Some(e) if e <= src_len)
}

/// Asks for the lines of `dst[range]` with intent to write (`prefetchw`), so that a chunk of
/// the destination written a few runs at a time from scattered places finds its lines in L1.
pub(super) fn fetch_for_writing(dst: &[f64], range: std::ops::Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};
        let Some(lines) = dst.get(range) else {
            return;
        };
        for line in lines.chunks(super::LINE) {
            // SAFETY: a prefetch only hints the caches; the address lies inside `dst`.
            unsafe { _mm_prefetch::<_MM_HINT_ET0>(line.as_ptr().cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (dst, range);
}

/// Orders the non-temporal stores of [`transpose_streamed`] before every later store, so that
/// a thread the destination is handed to sees them.
pub(super) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and exists on every x86-64 CPU (SSE).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::Loop;
    use std::arch::x86_64::{
        __m256d, __m512d, _mm256_loadu_pd, _mm256_storeu_pd, _mm512_loadu_pd, _mm512_storeu_pd,
    };

    /// [`super::copy_run_nest`]: the runs at every offset of three loops (innermost first),
    /// each as [`copy_runs`] moves it.
    ///
    /// # Safety
    /// AVX-512F must be available and every run in bounds of `dst` and `src`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn copy_run_nest(
        dst: *mut f64,
        src: *const f64,
        n: usize,
        [w0, w1, w2]: [Loop; 3],
    ) {
        for k in 0..w2.n {
            for j in 0..w1.n {
                let (doff, soff) = (j * w1.ds + k * w2.ds, j * w1.ss + k * w2.ss);
                // SAFETY: the caller's contract, for the runs along `w0` from here.
                unsafe { copy_runs(dst, src, n, (doff, soff), w0) };
            }
        }
    }

    /// [`super::copy_runs`] in 8-element moves, a run's last elements by one more move that
    /// overlaps the one before (a copy writes the overlapped elements again with the same
    /// values): runs of 19 take 3 moves instead of 4 of AVX and 3 single elements. No lane
    /// masks: on Zen 5, masked moves of lines that were not in the caches ran 2–3.5× as long
    /// (docs/benchmarks.md).
    ///
    /// # Safety
    /// AVX-512F must be available and every run in bounds of `dst` and `src`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn copy_runs(
        dst: *mut f64,
        src: *const f64,
        n: usize,
        (doff, soff): (usize, usize),
        next: Loop,
    ) {
        for j in 0..next.n {
            // SAFETY: run `j` lies in bounds of both buffers by the caller's contract, and
            // every move below stays inside it.
            unsafe {
                let (d, s) = (dst.add(doff + j * next.ds), src.add(soff + j * next.ss));
                if n >= 8 {
                    let mut i = 0;
                    while i + 8 < n {
                        _mm512_storeu_pd(d.add(i), _mm512_loadu_pd(s.add(i)));
                        i += 8;
                    }
                    let last: __m512d = _mm512_loadu_pd(s.add(n - 8));
                    _mm512_storeu_pd(d.add(n - 8), last);
                } else if n >= 4 {
                    let (head, tail): (__m256d, __m256d) =
                        (_mm256_loadu_pd(s), _mm256_loadu_pd(s.add(n - 4)));
                    _mm256_storeu_pd(d, head);
                    _mm256_storeu_pd(d.add(n - 4), tail);
                } else {
                    for i in 0..n {
                        *d.add(i) = *s.add(i);
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::{Loop, Tile};
    use std::arch::x86_64::{
        __m256d, _mm256_add_pd, _mm256_blendv_pd, _mm256_loadu_pd, _mm256_mul_pd,
        _mm256_permute2f128_pd, _mm256_set1_pd, _mm256_storeu_pd, _mm256_stream_pd,
        _mm256_unpackhi_pd, _mm256_unpacklo_pd,
    };

    /// # Safety
    /// AVX must be available and every element of `tile` in bounds of `dst` and `src`
    /// ([`Tile::inside`]).
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose<const ADD: bool>(
        dst: *mut f64,
        src: *const f64,
        t: Tile,
        alpha: f64,
    ) {
        if t.na < 4 || t.nb < 4 {
            // SAFETY: the caller's contract, passed on.
            return unsafe { by_elements::<ADD>(dst, src, t, alpha) };
        }
        let a = _mm256_set1_pd(alpha);
        // Edges of fewer than four rows or columns go through one more 4×4 block that overlaps
        // the last full one (tiles of real blocks have extents such as 21, 23 or 27, and their
        // edges element by element cost as much as the rest of the tile): a copy writes the
        // overlapped elements again with the same values; an accumulate leaves them as they
        // are (`done` lanes, `skip` rows).
        let last_i = t.na - 4;
        let covered = t.na & !3;
        // Four destination rows at a time: they are written whole, left to right, so only
        // four of their lines are open at once whatever their stride.
        let mut k = 0;
        while k < t.nb {
            let (k0, skip) = if k + 4 <= t.nb {
                (k, 0)
            } else {
                (t.nb - 4, k - (t.nb - 4))
            };
            // SAFETY (all offsets below): within the tile, which the caller checked: rows
            // `k0..k0 + 4 <= nb`, columns `i..i + 4 <= na`.
            unsafe {
                let d = dst.add(t.d0 + k0 * t.dst_row);
                let s = src.add(t.s0 + k0);
                let mut i = 0;
                while i + 4 <= t.na {
                    block::<ADD>(
                        d.add(i),
                        t.dst_row,
                        s.add(i * t.src_row),
                        t.src_row,
                        a,
                        skip,
                        0,
                    );
                    i += 4;
                }
                if covered < t.na {
                    let done = covered - last_i;
                    let (dd, ss) = (d.add(last_i), s.add(last_i * t.src_row));
                    block::<ADD>(dd, t.dst_row, ss, t.src_row, a, skip, done);
                }
            }
            k += 4;
        }
    }

    /// [`super::transpose_batch`] with AVX.
    ///
    /// # Safety
    /// AVX must be available and every tile of the batch in bounds of `dst` and `src`.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose_batch<const ADD: bool>(
        dst: *mut f64,
        src: *const f64,
        t: Tile,
        (batch, ahead): (Loop, super::Ahead),
        alpha: f64,
    ) {
        for r in 0..batch.n {
            let tile = t.along(batch, r);
            let first = src.wrapping_add(tile.s0);
            ahead.fetch_rows(first, (tile.na, tile.src_row), tile.nb - 1);
            // SAFETY: the caller's contract, for each tile.
            unsafe { transpose::<ADD>(dst, src, tile, alpha) };
        }
    }

    /// The tile element by element, for tiles of fewer than four rows or columns.
    ///
    /// # Safety
    /// As [`transpose`].
    unsafe fn by_elements<const ADD: bool>(dst: *mut f64, src: *const f64, t: Tile, alpha: f64) {
        for k in 0..t.nb {
            for i in 0..t.na {
                // SAFETY: within the tile, which the caller checked.
                unsafe {
                    put::<ADD>(
                        dst.add(t.d0 + k * t.dst_row + i),
                        *src.add(t.s0 + i * t.src_row + k),
                        alpha,
                    );
                }
            }
        }
    }

    /// `d = s` by 32-byte moves, for rows of tens of elements.
    #[target_feature(enable = "avx")]
    #[inline]
    fn copy_row(d: &mut [f64], s: &[f64]) {
        let n = d.len().min(s.len());
        let body = n & !3;
        let (dp, sp) = (d.as_mut_ptr(), s.as_ptr());
        for i in (0..body).step_by(4) {
            // SAFETY: `i + 4 <= body <= n`, in bounds of both rows.
            unsafe { _mm256_storeu_pd(dp.add(i), _mm256_loadu_pd(sp.add(i))) };
            // Keeps the compiler from turning the loop back into a call to `memcpy`.
            // SAFETY: an empty instruction sequence.
            unsafe { std::arch::asm!("", options(nostack, preserves_flags)) };
        }
        for (d, s) in d[body..n].iter_mut().zip(&s[body..n]) {
            *d = *s;
            // SAFETY: as above, for the last few elements.
            unsafe { std::arch::asm!("", options(nostack, preserves_flags)) };
        }
    }

    /// [`super::stage`] with AVX.
    ///
    /// # Safety
    /// AVX must be available.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn stage(
        buf: &mut [f64],
        src: &[f64],
        s0: usize,
        src_row: usize,
        na: usize,
        nb: usize,
    ) {
        for (i, row) in buf[..na * nb].chunks_exact_mut(nb).enumerate() {
            copy_row(row, &src[s0 + i * src_row..][..nb]);
        }
    }

    /// [`super::copy_runs`] with AVX.
    ///
    /// # Safety
    /// AVX must be available.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn copy_runs(
        dst: &mut [f64],
        src: &[f64],
        n: usize,
        (doff, soff): (usize, usize),
        next: Loop,
    ) {
        for j in 0..next.n {
            copy_row(
                &mut dst[doff + j * next.ds..][..n],
                &src[soff + j * next.ss..][..n],
            );
        }
    }

    /// [`super::transpose_streamed`] with AVX.
    ///
    /// # Safety
    /// AVX must be available, and the tile packed into `out` (`d0` 0, rows `na` apart) must lie
    /// inside `out` and `src`.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose_streamed(
        dst: &mut [f64],
        src: &[f64],
        t: Tile,
        out: &mut [f64],
    ) {
        let packed = Tile {
            d0: 0,
            dst_row: t.na,
            ..t
        };
        // SAFETY: the caller checked the packed tile against `out` and `src`, which are
        // distinct borrows.
        unsafe { transpose::<false>(out.as_mut_ptr(), src.as_ptr(), packed, 0.0) };
        for (k, row) in out[..t.na * t.nb].chunks_exact(t.na).enumerate() {
            let d = &mut dst[t.d0 + k * t.dst_row..][..t.na];
            let head = d.as_ptr().align_offset(32).min(t.na);
            let body = (t.na - head) & !3;
            // The ends (none where rows are whole lines) by plain stores; the guards keep
            // empty ends from costing a call to `memcpy` per row.
            if head > 0 {
                d[..head].copy_from_slice(&row[..head]);
            }
            let (dp, sp) = (d.as_mut_ptr(), row.as_ptr());
            for i in (head..head + body).step_by(4) {
                // SAFETY: `i + 4 <= head + body <= na`, in bounds of both rows; `dp + i` is
                // 32-byte aligned (`head` aligns it, and `i - head` is a multiple of 4).
                unsafe { _mm256_stream_pd(dp.add(i), _mm256_loadu_pd(sp.add(i))) };
            }
            if head + body < t.na {
                d[head + body..].copy_from_slice(&row[head + body..]);
            }
        }
    }

    /// One 4×4 block: source rows `s`, `s + ss`, … become destination rows `d`, `d + ds`, ….
    /// At an edge of the tile, where the block overlaps blocks done before, an accumulate
    /// leaves alone the first `skip` destination rows and the first `done` elements of the
    /// others; a copy writes them again, with the same values (a branch on them in the copy
    /// made every block slower).
    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn block<const ADD: bool>(
        d: *mut f64,
        ds: usize,
        s: *const f64,
        ss: usize,
        a: __m256d,
        skip: usize,
        done: usize,
    ) {
        // SAFETY: the caller passes a block inside the tile.
        unsafe {
            let r0 = _mm256_loadu_pd(s);
            let r1 = _mm256_loadu_pd(s.add(ss));
            let r2 = _mm256_loadu_pd(s.add(2 * ss));
            let r3 = _mm256_loadu_pd(s.add(3 * ss));
            // r_i = [x_i0 x_i1 x_i2 x_i3]; t0 = [x00 x10 x02 x12], t1 = [x01 x11 x03 x13], ...
            let t0 = _mm256_unpacklo_pd(r0, r1);
            let t1 = _mm256_unpackhi_pd(r0, r1);
            let t2 = _mm256_unpacklo_pd(r2, r3);
            let t3 = _mm256_unpackhi_pd(r2, r3);
            // Column c = [x0c x1c x2c x3c].
            let c = [
                _mm256_permute2f128_pd::<0x20>(t0, t2),
                _mm256_permute2f128_pd::<0x20>(t1, t3),
                _mm256_permute2f128_pd::<0x31>(t0, t2),
                _mm256_permute2f128_pd::<0x31>(t1, t3),
            ];
            if ADD && (skip > 0 || done > 0) {
                let keep = FRESH_LANES[done.min(3)];
                for (row, &v) in c.iter().enumerate().skip(skip) {
                    let p = d.add(row * ds);
                    let old = _mm256_loadu_pd(p);
                    let new = _mm256_add_pd(old, _mm256_mul_pd(a, v));
                    _mm256_storeu_pd(p, _mm256_blendv_pd(old, new, keep));
                }
                return;
            }
            put4::<ADD>(d, c[0], a);
            put4::<ADD>(d.add(ds), c[1], a);
            put4::<ADD>(d.add(2 * ds), c[2], a);
            put4::<ADD>(d.add(3 * ds), c[3], a);
        }
    }

    /// Lanes from `done` on set (sign bit), for [`block`]'s blend.
    const FRESH_LANES: [__m256d; 4] = {
        const ON: f64 = f64::from_bits(u64::MAX);
        // SAFETY: `__m256d` is four `f64`s.
        unsafe {
            std::mem::transmute::<[[f64; 4]; 4], [__m256d; 4]>([
                [ON, ON, ON, ON],
                [0.0, ON, ON, ON],
                [0.0, 0.0, ON, ON],
                [0.0, 0.0, 0.0, ON],
            ])
        }
    };

    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn put4<const ADD: bool>(d: *mut f64, v: __m256d, a: __m256d) {
        // SAFETY: the caller passes four in-bounds elements.
        unsafe {
            if ADD {
                _mm256_storeu_pd(d, _mm256_add_pd(_mm256_loadu_pd(d), _mm256_mul_pd(a, v)));
            } else {
                _mm256_storeu_pd(d, v);
            }
        }
    }

    #[inline(always)]
    unsafe fn put<const ADD: bool>(d: *mut f64, v: f64, alpha: f64) {
        // SAFETY: the caller passes an in-bounds element.
        unsafe {
            if ADD {
                *d += alpha * v;
            } else {
                *d = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AddScaled, Assign};
    use super::*;
    use crate::testutil::random_vec;

    /// Runs of every length up to 40, copied by whichever kernel this CPU takes (8-element
    /// moves with an overlapping last one on AMD's AVX-512 CPUs), equal the runs copied one
    /// element at a time, and nothing between the runs is written.
    #[test]
    fn runs_of_every_length_are_copied_whole() {
        for n in 1..=40 {
            let next = Loop {
                n: 5,
                ds: n + 3,
                ss: n + 7,
            };
            let src = random_vec(9 + 5 * (n + 7), n as u64);
            let start = random_vec(2 + 5 * (n + 3), 100 + n as u64);
            let mut want = start.clone();
            for j in 0..next.n {
                for i in 0..n {
                    want[2 + j * next.ds + i] = src[9 + j * next.ss + i];
                }
            }
            let mut got = start.clone();
            copy_runs(&mut got, &src, n, (2, 9), next);
            assert_eq!(got, want, "runs of {n}");
        }
    }

    /// A 4-index block's runs in one nest (on AMD's AVX-512 CPUs; elsewhere the nest is
    /// refused and nothing written): every run of every length of one to three loops equals
    /// the element copy, nothing else is written, and a nest reaching one element past
    /// either buffer is refused untouched.
    #[test]
    fn run_nests_copy_every_run_or_refuse_untouched() {
        for n in [1, 3, 5, 7, 9, 19, 27, 33] {
            let loops = [
                Loop {
                    n: 5,
                    ds: n + 1,
                    ss: 4 * n + 9,
                },
                Loop {
                    n: 3,
                    ds: 5 * (n + 1) + 2,
                    ss: n + 2,
                },
                Loop {
                    n: 2,
                    ds: 17 * (n + 1) + 5,
                    ss: 12 * n + 30,
                },
            ];
            for depth in 1..=3 {
                let walk = &loops[..depth];
                let end = |step: fn(&Loop) -> usize| {
                    walk.iter().map(|l| (l.n - 1) * step(l)).sum::<usize>() + n
                };
                let (dst_len, src_len) = (end(|l| l.ds), end(|l| l.ss));
                let src = random_vec(src_len, n as u64);
                let start = random_vec(dst_len, 50 + n as u64);
                let mut want = start.clone();
                super::super::for_each_offset(walk, |doff, soff| {
                    want[doff..doff + n].copy_from_slice(&src[soff..soff + n]);
                });
                let mut got = start.clone();
                if copy_run_nest(&mut got, &src, n, walk) {
                    assert_eq!(got, want, "runs of {n}, {depth} loops");
                } else {
                    assert_eq!(got, start, "refused, untouched");
                }
                let mut short = start[..dst_len - 1].to_vec();
                assert!(!copy_run_nest(&mut short, &src, n, walk));
                assert_eq!(short, start[..dst_len - 1]);
                let mut got = start.clone();
                assert!(!copy_run_nest(&mut got, &src[..src_len - 1], n, walk));
                assert_eq!(got, start);
            }
        }
    }

    /// The vector path (where the CPU has it) and the scalar path give the same bits, for
    /// tiles with and without remainders, copy and accumulate.
    #[test]
    fn vector_and_scalar_paths_agree() {
        let edges = [
            (5, 7),
            (7, 5),
            (4, 6),
            (6, 4),
            (9, 4),
            (21, 23),
            (27, 18),
            (31, 31),
        ];
        for (na, nb) in [(1, 1), (4, 4), (3, 9), (8, 5), (13, 17), (32, 32), (8, 250)]
            .into_iter()
            .chain(edges)
        {
            let tile = Tile {
                d0: 3,
                s0: 5,
                na,
                nb,
                src_row: nb + 2,
                dst_row: na + 1,
            };
            let src = random_vec(5 + na * (nb + 2), (na * 100 + nb) as u64);
            let start = random_vec(3 + nb * (na + 1), 7);
            let (mut fast, mut slow) = (start.clone(), start.clone());
            transpose(&mut fast, &src, tile, Assign);
            by_rows(&mut slow, &src, tile, Assign);
            assert_eq!(fast, slow, "copy {na}x{nb}");
            for i in 0..na {
                for k in 0..nb {
                    assert_eq!(fast[3 + k * (na + 1) + i], src[5 + i * (nb + 2) + k]);
                }
            }
            let (mut fast, mut slow) = (start.clone(), start);
            transpose(&mut fast, &src, tile, AddScaled(-0.7));
            by_rows(&mut slow, &src, tile, AddScaled(-0.7));
            assert_eq!(fast, slow, "accumulate {na}x{nb}");
        }
    }

    /// Tiles side by side in the destination (`batch.ds == na`), taken across the tiles while
    /// the destination fits in L2 and in strips beyond it (here 1.2 MB, strips of 64 rows and
    /// one of 8), give what the tiles one by one give.
    #[test]
    fn a_batch_across_or_in_strips_is_its_tiles_one_by_one() {
        let (na, nb) = (72, 16);
        for count in [2, 128] {
            let tile = Tile {
                d0: 0,
                s0: 0,
                na,
                nb,
                src_row: nb,
                dst_row: na * count,
            };
            let batch = Loop {
                n: count,
                ds: na,
                ss: na * nb,
            };
            let src = random_vec(count * na * nb, count as u64);
            let start = random_vec(count * na * nb, 5);
            for add in [false, true] {
                let (mut batched, mut single) = (start.clone(), start.clone());
                for r in 0..count {
                    let t = tile.along(batch, r);
                    if add {
                        by_rows(&mut single, &src, t, AddScaled(0.3));
                    } else {
                        by_rows(&mut single, &src, t, Assign);
                    }
                }
                if add {
                    transpose_batch(&mut batched, &src, tile, (batch, Ahead(0)), AddScaled(0.3));
                } else {
                    transpose_batch(&mut batched, &src, tile, (batch, Ahead(0)), Assign);
                }
                assert_eq!(batched, single, "{count} tiles, add {add}");
            }
        }
    }

    /// A batch of tiles gives what the tiles one by one give, for copies and accumulates.
    #[test]
    fn a_batch_is_its_tiles_one_by_one() {
        for (na, nb, count) in [
            (8, 8, 8),
            (16, 8, 3),
            (16, 24, 2),
            (5, 7, 3),
            (4, 4, 1),
            (2, 9, 4),
            (21, 23, 2),
        ] {
            let tile = Tile {
                d0: 1,
                s0: 2,
                na,
                nb,
                src_row: nb + 1,
                dst_row: na,
            };
            // Tiles follow each other in both buffers, as the planes of a block do.
            let batch = Loop {
                n: count,
                ds: na * nb,
                ss: na * (nb + 1),
            };
            let src = random_vec(2 + count * na * (nb + 1), (na * 10 + nb) as u64);
            let start = random_vec(1 + count * na * nb, 3);
            for add in [false, true] {
                let (mut batched, mut single) = (start.clone(), start.clone());
                let one = |dst: &mut [f64], r: usize| {
                    let t = Tile {
                        d0: tile.d0 + r * batch.ds,
                        s0: tile.s0 + r * batch.ss,
                        ..tile
                    };
                    if add {
                        by_rows(dst, &src, t, AddScaled(0.3));
                    } else {
                        by_rows(dst, &src, t, Assign);
                    }
                };
                if add {
                    transpose_batch(&mut batched, &src, tile, (batch, Ahead(7)), AddScaled(0.3));
                } else {
                    transpose_batch(&mut batched, &src, tile, (batch, Ahead(7)), Assign);
                }
                for r in 0..count {
                    one(&mut single, r);
                }
                assert_eq!(batched, single, "{na}x{nb} x {count}, add {add}");
            }
        }
    }

    /// Tiles whose source rows share one L1 set (taken by the 8 × 8 kernel in squares, two
    /// or four columns of blocks at a time, with partial squares and groups), and blocks
    /// staged into runs along two loops, give what the scalar loop gives, for copies and
    /// accumulates.
    #[test]
    fn crowded_and_staged_orders_move_every_block_once() {
        assert!(one_set(512) && one_set(1024) && !one_set(520));
        // 5 × 6 blocks (one partial square, a group of 2 after one of 4), 40 × 34 (whole and
        // partial squares each way), 4 × 4; destination rows in one set or not; 129 × 5
        // blocks whose 1,032 source rows are a page apart but in many sets (`many_pages`);
        // and 17 × 125 blocks, a tile of 1.1 MB (two columns at a time off Intel's CPUs).
        let cases = [
            (40, 48, 1024, 512),
            (320, 272, 1024, 512),
            (32, 32, 1024, 35),
            (1032, 40, 520, 1040),
            (136, 1000, 1024, 520),
        ];
        for (na, nb, src_row, dst_row) in cases {
            let tile = Tile {
                d0: 8,
                s0: 16,
                na,
                nb,
                src_row,
                dst_row,
            };
            assert!(one_set(src_row) || many_pages(&tile));
            let src = random_vec(16 + na * src_row, na as u64);
            let start = random_vec(8 + nb * dst_row, nb as u64);
            for add in [false, true] {
                let (mut fast, mut slow) = (start.clone(), start.clone());
                if add {
                    transpose(&mut fast, &src, tile, AddScaled(-1.5));
                    by_rows(&mut slow, &src, tile, AddScaled(-1.5));
                } else {
                    transpose(&mut fast, &src, tile, Assign);
                    by_rows(&mut slow, &src, tile, Assign);
                }
                assert_eq!(fast, slow, "{na}x{nb}, add {add}");
            }
        }
        // 3 × 5 blocks of 8 × 8 staged into runs: 3 steps continuing the destination rows,
        // 5 continuing the source rows.
        let tile = Tile {
            d0: 0,
            s0: 0,
            na: 8,
            nb: 8,
            src_row: 512,
            dst_row: 512,
        };
        let along_dst = Loop {
            n: 3,
            ds: 8,
            ss: 4096,
        };
        let along_src = Loop {
            n: 5,
            ds: 4096 * 3,
            ss: 8,
        };
        let src = random_vec(4096 * 3 + 8 * 5, 11);
        let start = random_vec(4096 * 3 * 5, 12);
        let mut buf = vec![f64::NAN; 64 * 3 * 5];
        for add in [false, true] {
            let (mut runs, mut single) = (start.clone(), start.clone());
            for q in 0..along_src.n {
                for p in 0..along_dst.n {
                    let t = tile.along(along_dst, p).along(along_src, q);
                    if add {
                        by_rows(&mut single, &src, t, AddScaled(0.5));
                    } else {
                        by_rows(&mut single, &src, t, Assign);
                    }
                }
            }
            let steps = (along_dst, along_src);
            if add {
                transpose_runs(&mut runs, &src, tile, steps, &mut buf, AddScaled(0.5));
            } else {
                transpose_runs(&mut runs, &src, tile, steps, &mut buf, Assign);
            }
            assert_eq!(runs, single, "add {add}");
        }
    }

    #[test]
    fn a_tile_outside_its_buffers_is_detected() {
        let t = Tile {
            d0: 0,
            s0: 0,
            na: 4,
            nb: 4,
            src_row: 4,
            dst_row: 4,
        };
        assert!(t.inside(16, 16));
        assert!(!t.inside(15, 16));
        assert!(!t.inside(16, 15));
        let huge = Tile {
            src_row: usize::MAX,
            ..t
        };
        assert!(!huge.inside(16, 16));
    }
}
