//! Permuted copy and permuted accumulate of blocks (`a[i,j] = b[j,i]`, `d[k,i] += a[i,k]`).
//!
//! Convention: `perm[d]` is the source dimension that becomes destination dimension `d`, so
//! `dst_shape.extents()[d] == src_shape.extents()[perm[d]]`.
//!
//! # Why it is cache-blocked
//! A permutation that moves the fastest (stride-1) dimension reads one array with a large stride
//! whatever loop order is chosen; a naive loop then touches a new cache line (and often a new
//! page) per element and runs several times slower than a copy. So the kernel:
//! 1. drops extent-1 dimensions and merges dimensions that are adjacent in *both* layouts — this
//!    turns e.g. `[2,3,0,1]` on a 40⁴ block into a 1600×1600 transpose, and a permutation that
//!    keeps the first dimension into a loop of contiguous `memcpy`-like runs;
//! 2. if the first dimension is still stride-1 in both, copies contiguous runs, in the
//!    source's order ([`in_source_order`]), or in strips where that order would write the
//!    destination's neighbouring runs far apart in time ([`runs_in_strips`]);
//! 3. otherwise tiles the two dimensions that are fastest in the source and in the destination,
//!    so each tile of source and destination stays in L1 while it is transposed, and loops over
//!    the remaining dimensions outside the tiles; the tiles are square, or narrow and long where
//!    the rows of one side are far apart ([`cut`]);
//! 4. when the row strides of a square tile are such that its rows share a few L1 sets (strides
//!    near multiples of 4 KiB, i.e. power-of-two extents such as 32⁴ or 1024²), each tile's
//!    source rows are first copied whole into a small contiguous buffer (see
//!    [`transpose_tiles_staged`]);
//! 5. transposes each tile in 4×4 blocks held in vector registers where the CPU has AVX
//!    ([`tile`]);
//! 6. where a staged tile's destination rows are short too (as in the reversal of a 12⁶
//!    block, or `[3,1,2,0]` of a 16⁴ one), stages the planes along the destination's next loop
//!    into one buffer, as many as it holds, so that destination rows are written long and
//!    whole, and, where the source rows are short as well, the groups along the loop that
//!    continues them, so that they are read long ([`Gather`]);
//! 7. where both plane extents are multiples of 8, moves 8×8 blocks in registers instead
//!    (AVX-512, or two AVX registers per row where the CPU lacks it, for the planes where
//!    those were measured to pay), each line read or written once, whole, with no staging
//!    ([`in_eights`]); planes of thousands of short source rows (`[1,2,3,0]`), and on Intel's
//!    CPUs batches of planes larger than L2, in strips of 64 source rows, each strip's rows
//!    read once, in a run ([`tile`]; elsewhere such batches go across their planes);
//! 8. where the 8 source rows of such a block share one L1 set (rows a multiple of 4 KiB
//!    apart: 512², 2048², `[3,0,2,1]` of 32⁴ and 48⁴), so that one set's few ways bound the
//!    misses in flight, takes consecutive blocks from other sets: in a plane, four columns
//!    of blocks at a time ([`tile`]); for planes of one block whose rows share a set on both
//!    sides (the 8⁶ reversal), 8 × 8 of them staged along the loops that continue their rows on
//!    each side and written as runs of 64 ([`RunTiles`]);
//! 9. while it moves the planes of one step of the loops outside them in 8 × 8 blocks, fetches
//!    the source lines of the next step into L2 ([`tile::Ahead`]): from memory, the plane's
//!    rows are more streams than the hardware prefetchers follow;
//! 10. where the CPU has AVX-512 and a plane's sides are not both multiples of 8 (segments of
//!     5, 19, 21, 27, 31), and its source rows share no L1 sets, fills each destination vector
//!     by one gather from the source instead of 4 × 4 blocks with overlapping edges; where the
//!     destination rows are shorter than a vector, the vectors run across the rows that
//!     follow each other in the destination ([`gathers`]).
//!
//! Small blocks with short destination rows (up to 12,288 elements, rows under 32) skip all
//! of this where the CPU has AVX-512: the destination is written from start to end by
//! gathers through a table of the whole block's source offsets, which each thread keeps for
//! the nests it has seen ([`indexed`]).

use crate::error::{KernelError, Role};
use crate::labels::{Operand, OperandMut, permutation_from_labels};
use crate::shape::{MAX_RANK, Shape, check_len, check_permutation};
use tile::{Ahead, Tile};

mod gathers;
mod indexed;
mod tile;

/// `dst = src` permuted: `dst[i_0,…,i_{n-1}] = src[j]` with `j[perm[d]] = i_d`.
///
/// Fails if `perm` is not a permutation of `0..rank`, if `dst_shape` is not `src_shape`
/// permuted, or if a buffer length differs from its shape's size.
pub fn permute(
    dst: &mut [f64],
    dst_shape: &Shape,
    src: &[f64],
    src_shape: &Shape,
    perm: &[usize],
) -> Result<(), KernelError> {
    let loops = plan(dst.len(), dst_shape, src.len(), src_shape, perm)?;
    run(dst, src, &loops, Assign, true);
    Ok(())
}

/// [`permute`] into a temporary its caller reads right away (a contraction's operand): the
/// destination is written through the caches, never streamed past them (a streamed 5 MiB
/// operand made its GEMM read it back from memory: `ai=cadm*dicm` at segments of 40 ran 1.2x
/// slower).
pub(crate) fn permute_operand(
    dst: &mut [f64],
    dst_shape: &Shape,
    src: &[f64],
    src_shape: &Shape,
    perm: &[usize],
) -> Result<(), KernelError> {
    let loops = plan(dst.len(), dst_shape, src.len(), src_shape, perm)?;
    run(dst, src, &loops, Assign, false);
    Ok(())
}

/// `dst += alpha * (src permuted)`: the accumulate form of [`permute`], used for `a += b` and
/// `a -= b` (alpha = ±1) when the index orders differ, and to add a contraction result that had
/// to be computed in another order.
pub fn permute_add(
    dst: &mut [f64],
    dst_shape: &Shape,
    alpha: f64,
    src: &[f64],
    src_shape: &Shape,
    perm: &[usize],
) -> Result<(), KernelError> {
    let loops = plan(dst.len(), dst_shape, src.len(), src_shape, perm)?;
    run(dst, src, &loops, AddScaled(alpha), false);
    Ok(())
}

/// One loop of a permutation's simplified nest ([`permute_loops`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PermLoop {
    /// Iterations.
    pub n: usize,
    /// The destination's stride.
    pub dst_stride: usize,
    /// The source's stride.
    pub src_stride: usize,
}

/// The loop nest of `dst = perm(src)` that [`permute`] runs, in the destination's order:
/// extents of 1 dropped, and dimensions that continue each other in both layouts merged into
/// one loop. Other permutation kernels (the GPU's) take the same nest. Fails as [`permute`]
/// does on arguments that do not match.
pub fn permute_loops(
    dst_shape: &Shape,
    src_shape: &Shape,
    perm: &[usize],
) -> Result<Vec<PermLoop>, KernelError> {
    let loops = plan(dst_shape.len(), dst_shape, src_shape.len(), src_shape, perm)?;
    Ok(loops
        .as_slice()
        .iter()
        .map(|l| PermLoop {
            n: l.n,
            dst_stride: l.ds,
            src_stride: l.ss,
        })
        .collect())
}

/// [`permute`] with the permutation derived from index labels: `a[i,j,k] = b[k,i,j]`.
pub fn permute_labeled(dst: OperandMut<'_>, src: Operand<'_>) -> Result<(), KernelError> {
    let perm = permutation_from_labels(dst.labels, src.labels)?;
    permute(dst.data, &dst.shape, src.data, &src.shape, &perm)
}

/// [`permute_add`] with the permutation derived from index labels: `d[k,i] += alpha * a[i,k]`.
pub fn permute_add_labeled(
    dst: OperandMut<'_>,
    alpha: f64,
    src: Operand<'_>,
) -> Result<(), KernelError> {
    let perm = permutation_from_labels(dst.labels, src.labels)?;
    permute_add(dst.data, &dst.shape, alpha, src.data, &src.shape, &perm)
}

/// How one element is written; monomorphised so the inner loops stay tight.
trait Store: Copy {
    /// The factor of an accumulate; `None` for a plain copy (the vector tile kernel needs to
    /// know which, see [`tile`]).
    fn alpha(self) -> Option<f64>;
    fn store(self, d: &mut f64, s: f64);
}

#[derive(Clone, Copy)]
struct Assign;

impl Store for Assign {
    fn alpha(self) -> Option<f64> {
        None
    }
    #[inline(always)]
    fn store(self, d: &mut f64, s: f64) {
        *d = s;
    }
}

#[derive(Clone, Copy)]
struct AddScaled(f64);

impl Store for AddScaled {
    fn alpha(self) -> Option<f64> {
        Some(self.0)
    }
    #[inline(always)]
    fn store(self, d: &mut f64, s: f64) {
        *d += self.0 * s;
    }
}

/// One loop of the copy nest: `n` iterations advancing the destination by `ds` and the source
/// by `ss` elements.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Loop {
    n: usize,
    ds: usize,
    ss: usize,
}

impl Loop {
    /// A loop of one iteration: no loop.
    const ONCE: Loop = Loop { n: 1, ds: 0, ss: 0 };
}

/// The simplified loop nest, destination order (loop 0 has `ds == 1` when present).
#[derive(Debug)]
struct Loops {
    l: [Loop; MAX_RANK],
    len: usize,
    /// Total number of elements; zero means nothing to do.
    size: usize,
}

impl Loops {
    fn as_slice(&self) -> &[Loop] {
        &self.l[..self.len]
    }

    /// `loops` but those at the indices in `skip`, in their order.
    fn except(loops: &[Loop], skip: &[usize]) -> Loops {
        let mut kept = Loops {
            l: [Loop::default(); MAX_RANK],
            len: 0,
            size: 1,
        };
        for (i, &l) in loops.iter().enumerate() {
            if !skip.contains(&i) {
                kept.l[kept.len] = l;
                kept.len += 1;
                kept.size *= l.n;
            }
        }
        kept
    }
}

/// `loops` ordered by their step in the source, smallest first: contiguous runs copied in
/// this order read the source from start to end and scatter the destination's runs, where
/// the destination's order read them scattered. From memory the source then streams in at
/// the prefetchers' pace: 16⁴ `[0,2,3,1]` ran at 0.97 of memcpy instead of 0.46, 48⁴
/// `[0,3,2,1]` at 0.94 instead of 0.65. In the caches a few lost (16⁴ `[0,2,3,1]` 0.84 →
/// 0.56, 32⁴ `[0,3,1,2]` 1.01 → 0.63), but the worst of these 31 cases (16⁴–48⁴, 8⁶, 12⁶,
/// the job's shapes) rose from 0.46 to 0.68 of memcpy in memory and from 0.51 to 0.56 in
/// the caches (docs/benchmarks.md, "Permutations: contiguous runs in the source's order").
fn in_source_order(loops: &[Loop]) -> Loops {
    let mut order = Loops::except(loops, &[]);
    order.l[..order.len].sort_by_key(|lp| lp.ss);
    order
}

/// One past the furthest element `loops` reach on one side (`step` gives that side's
/// stride), so that every offset they reach lies below it; `None` where a loop is empty or
/// the sum overflows.
fn reach<'a>(loops: impl IntoIterator<Item = &'a Loop>, step: fn(&Loop) -> usize) -> Option<usize> {
    loops.into_iter().try_fold(1usize, |at, l| {
        l.n.checked_sub(1)?.checked_mul(step(l))?.checked_add(at)
    })
}

/// Validates the arguments and builds the simplified loop nest.
fn plan(
    dst_len: usize,
    dst_shape: &Shape,
    src_len: usize,
    src_shape: &Shape,
    perm: &[usize],
) -> Result<Loops, KernelError> {
    let rank = src_shape.rank();
    check_permutation(perm, rank)?;
    let src_ext = src_shape.extents();
    let dst_ext = dst_shape.extents();
    if dst_ext.len() != rank || dst_ext.iter().zip(perm).any(|(&d, &p)| d != src_ext[p]) {
        return Err(KernelError::PermutedShapeMismatch {
            dst: dst_ext.to_vec(),
            src: src_ext.to_vec(),
            perm: perm.to_vec(),
        });
    }
    check_len(Role::Dst, dst_shape.len(), dst_len)?;
    check_len(Role::Src, src_shape.len(), src_len)?;

    let ds = dst_shape.strides();
    let ss = src_shape.strides();
    let mut loops = Loops {
        l: [Loop::default(); MAX_RANK],
        len: 0,
        size: dst_shape.len(),
    };
    for d in 0..rank {
        let n = dst_ext[d];
        if n == 1 {
            continue;
        }
        let next = Loop {
            n,
            ds: ds[d],
            ss: ss[perm[d]],
        };
        // Merge with the previous loop when this dimension continues it in both layouts.
        if loops.len > 0 {
            let last = &mut loops.l[loops.len - 1];
            if last.ds * last.n == next.ds && last.ss * last.n == next.ss {
                last.n *= n;
                continue;
            }
        }
        loops.l[loops.len] = next;
        loops.len += 1;
    }
    Ok(loops)
}

/// Executes a validated loop nest; the destination may be streamed past the caches where
/// `may_stream` and [`streams`] say so.
fn run<S: Store>(dst: &mut [f64], src: &[f64], loops: &Loops, st: S, may_stream: bool) {
    if loops.size == 0 {
        return;
    }
    let l = loops.as_slice();
    if indexed::pays(l, loops.size) && indexed::run(dst, src, loops, st) {
        return;
    }
    let Some(first) = l.first() else {
        // Every extent is 1: a single element.
        for (d, &s) in dst.iter_mut().zip(src) {
            st.store(d, s);
        }
        return;
    };
    if first.ss == 1 {
        // The fastest dimension is the same in both: contiguous runs.
        let n = first.n;
        let run = |dst: &mut [f64], doff: usize, soff: usize| {
            for (d, &s) in dst[doff..doff + n].iter_mut().zip(&src[soff..soff + n]) {
                st.store(d, s);
            }
        };
        // The next loop runs inside the walk over the others: runs are often short (a
        // segment, 10–50 elements), and the walk's bookkeeping per run cost as much as them.
        let copies = st.alpha().is_none();
        match l.get(1) {
            // A plain copy moves its runs by inline vector moves: a call to `memcpy` per run
            // of a few tens of elements cost as much as the run. It walks them in the
            // source's order ([`in_source_order`]).
            Some(_) if copies => {
                let order = in_source_order(&l[1..]);
                let walk = order.as_slice();
                match far_runs(walk) {
                    Some((next, far, inner)) => for_each_offset(inner, |doff, soff| {
                        runs_in_strips(dst, src, n, (doff, soff), (next, far));
                    }),
                    None => match chunk_of(n, walk).filter(|_| chunks_pay(dst.len())) {
                        Some(len) => runs_in_chunks(dst, src, n, walk, len),
                        None if tile::copy_run_nest(dst, src, n, walk) => {}
                        None => {
                            let (next, others) = (walk[0], &walk[1..]);
                            for_each_offset(others, |doff, soff| {
                                tile::copy_runs(dst, src, n, (doff, soff), next);
                            })
                        }
                    },
                }
            }
            Some(&next) => for_each_offset(&l[2..], |doff, soff| {
                for j in 0..next.n {
                    run(dst, doff + j * next.ds, soff + j * next.ss);
                }
            }),
            None => run(dst, 0, 0),
        }
        return;
    }
    // Loop 0 is the destination's fastest dimension; find the source's fastest one.
    let Some(q) = l.iter().position(|lp| lp.ss == 1) else {
        // Unreachable for validated column-major shapes (the source's first non-unit dimension
        // has stride 1), but fall back to a correct strided loop rather than panic.
        for_each_offset(l, |doff, soff| st.store(&mut dst[doff], src[soff]));
        return;
    };
    let a = l[0];
    let b = l[q];
    let outer = Loops::except(l, &[0, q]);
    let outer = outer.as_slice();
    // A plain copy may bypass the caches where the destination allows it.
    let may_stream = may_stream && st.alpha().is_none();
    let cut = cut(a, b, (may_stream && streams(dst, a)).then(Streaming::here));
    if !cut.staged && gathers::pays(a, b) && gathers::run(dst, src, (a, b), outer, st) {
        return;
    }
    // Planes of one tile that need neither staging nor streaming, and planes in 8 × 8 blocks:
    // the planes along the first outer loop go to the kernel in one call.
    let one_tile = !cut.staged && !cut.stream && cut.tiles == (a.n, b.n) && !outer.is_empty();
    if one_tile || in_eights(a, b, &cut, (outer, dst.len())) {
        let (batch, rest) = outer
            .split_first()
            .map_or((Loop::ONCE, outer), |(&batch, rest)| (batch, rest));
        // The next walk step's batch lies one step of the innermost loop further.
        let ahead = |rest: &[Loop]| Ahead(rest.first().map_or(0, |l| l.ss));
        if !cut.stream
            && let Some(runs) = RunTiles::of(a, b, outer)
        {
            runs.run(dst, src, st);
            return;
        }
        let ahead = ahead(rest);
        for_each_offset(rest, |doff, soff| {
            let tile = Plane { a, b, doff, soff }.whole();
            if cut.stream {
                tile::transpose_batch_streamed(dst, src, tile, (batch, ahead));
            } else {
                tile::transpose_batch(dst, src, tile, (batch, ahead), st);
            }
        });
        if cut.stream {
            tile::fence();
        }
        return;
    }
    if cut.staged
        && !cut.stream
        && let Some(gather) = Gather::of(a, b, outer)
    {
        gather.run(dst, src, st, may_stream);
        return;
    }
    let stream = cut.stream;
    let tile_len = cut.tiles.0 * cut.tiles.1;
    let mut out = stream.then(|| Scratch::new(tile_len));
    let mut out = out.as_mut().map(Scratch::get);
    if cut.staged {
        let mut buf = Scratch::new(tile_len);
        let buf = buf.get();
        for_each_offset(outer, |doff, soff| {
            let plane = Plane { a, b, doff, soff };
            let out = out.as_deref_mut();
            transpose_tiles_staged(dst, src, plane, &cut, buf, out, st);
        });
    } else {
        for_each_offset(outer, |doff, soff| {
            let plane = Plane { a, b, doff, soff };
            transpose_tiles(dst, src, plane, &cut, out.as_deref_mut(), st);
        });
    }
    if stream {
        tile::fence();
    }
}

/// For runs walked in the source's order `walk` (loops outside the runs, innermost first):
/// the loop next to the runs in the source, the one next to them in the destination and the
/// loops between, where the latter comes last in the source's order and at least
/// [`RUN_GAP`] runs lie between two neighbours in the destination ([`runs_in_strips`]).
fn far_runs(walk: &[Loop]) -> Option<(Loop, Loop, &[Loop])> {
    let (&next, others) = walk.split_first()?;
    let (&far, inner) = others.split_last()?;
    let nearest = inner.iter().map(|l| l.ds).fold(next.ds, usize::min);
    let gap = inner.iter().map(|l| l.n).product::<usize>() * next.n;
    (far.ds < nearest && gap >= RUN_GAP).then_some((next, far, inner))
}

/// Runs walked between two neighbours in the destination from which [`runs_in_strips`]
/// pays: 256–2,304 (`[0,3,2,1]`, `[0,3,1,2]` of 16⁴–48⁴) and 64 (8⁶ `[0,1,2,5,4,3]`) gained;
/// 16–48 (`[0,2,3,1]`, `[0,1,3,2]`, whose loops merge into two) lost up to 1.2× or stayed.
const RUN_GAP: usize = 64;

/// Contiguous runs of `n` elements along `next` (the loop next to them in the source) and
/// `far` (the one next to them in the destination, the outermost in the source), in strips
/// of [`RUN_STRIP`] steps of `next`: in each strip, `far` runs its whole length. Walked in
/// the source's order, the runs that follow each other in the destination were written a
/// whole pass over the block apart (`[0,3,2,1]`: 16⁴ from memory at 0.48 of memcpy); in
/// strips, the source is still read in runs of `RUN_STRIP · n` elements, and each
/// destination row of the strip is written whole, in order (16⁴–48⁴ `[0,3,2,1]` and
/// `[0,3,1,2]` 1.3–1.8× as fast from memory, up to 1.5× in the caches: docs/benchmarks.md,
/// "Permutations: runs whose destination neighbours come last, in strips").
fn runs_in_strips(
    dst: &mut [f64],
    src: &[f64],
    n: usize,
    (doff, soff): (usize, usize),
    (next, far): (Loop, Loop),
) {
    for j in (0..next.n).step_by(RUN_STRIP) {
        let strip = Loop {
            n: RUN_STRIP.min(next.n - j),
            ..next
        };
        for q in 0..far.n {
            let at = (
                doff + j * next.ds + q * far.ds,
                soff + j * next.ss + q * far.ss,
            );
            tile::copy_runs(dst, src, n, at, strip);
        }
    }
}

/// Whether runs in chunks ([`runs_in_chunks`]) pay for a destination of `len` elements: they
/// were measured on an Intel Xeon. On AMD's Zen 5 (where runs go by [`tile::wide_runs`]) they
/// pay only from beyond L2: with a destination in L2 (water's `[0,2,1,3]`, 72 KiB) the
/// prefetches of its lines were a third of the time and it ran 1.7× as fast without them,
/// while the 8⁶ block's `[0,2,1,4,3,5]` (2 MiB) from memory lost 1.7× without them
/// (docs/benchmarks.md, "Permutations: runs in 8-element moves on AMD").
fn chunks_pay(len: usize) -> bool {
    !tile::wide_runs() || len * std::mem::size_of::<f64>() > crate::L2_BYTES
}

/// Destination elements of a chunk ([`chunk_of`]): with its source, it stays in L1.
const CHUNK: usize = 2048;

/// For runs of `n` walked in the source's order `walk`: the length of the destination chunk
/// the runs and the walk's two innermost loops fill, where they fill one whole (each loop's
/// destination step the product of the extents below it), at most [`CHUNK`] elements, and
/// further loops place such chunks ([`runs_in_chunks`]).
fn chunk_of(n: usize, walk: &[Loop]) -> Option<usize> {
    let [w0, w1, _, ..] = walk else {
        return None;
    };
    let mut steps = [(1, n), (w0.ds, w0.n), (w1.ds, w1.n)];
    steps.sort_unstable();
    let whole = steps[1].0 == steps[0].1 && steps[2].0 == steps[0].1 * steps[1].1;
    let len = n * w0.n * w1.n;
    (whole && len <= CHUNK).then_some(len)
}

/// The runs chunk by chunk ([`chunk_of`]), the next chunk's destination lines fetched for
/// writing while the runs of the one before are copied: its runs are short (the 12⁶ block's
/// `[0,2,1,4,3,5]`, runs of 96 bytes) and each chunk of the destination lies far from the one
/// before, so the prefetchers, following the source, leave every destination line to be
/// fetched when a run first writes it (docs/benchmarks.md, "Permutations: short runs by chunks
/// fetched for writing").
fn runs_in_chunks(dst: &mut [f64], src: &[f64], n: usize, walk: &[Loop], len: usize) {
    let (next, within, outer) = (walk[0], walk[1], &walk[2..]);
    let copy = |dst: &mut [f64], (doff, soff): (usize, usize)| {
        for j in 0..within.n {
            let at = (doff + j * within.ds, soff + j * within.ss);
            tile::copy_runs(dst, src, n, at, next);
        }
    };
    let mut before = None;
    for_each_offset(outer, |doff, soff| {
        tile::fetch_for_writing(dst, doff..doff + len);
        if let Some(chunk) = before.replace((doff, soff)) {
            copy(dst, chunk);
        }
    });
    if let Some(chunk) = before {
        copy(dst, chunk);
    }
}

/// Steps of the source's next loop per strip of runs ([`runs_in_strips`]); 16 ran better
/// than 4 or 8 on the cases it serves.
const RUN_STRIP: usize = 16;

/// Staged planes (their source rows share L1 sets) whose destination loop `a` is continued
/// in the destination by the next loop, `next`: blocks whose rows are far apart on both sides
/// (the reversal of a 12⁶ block: rows 2 MB apart; `[3,1,2,0]` of a 16⁴ block: 32 KiB). The
/// planes along `next`, as many as a buffer of [`GATHER`] elements holds (at least two), are
/// staged one after another into it and transposed as one tile, so that each destination
/// row is written `a.n` elements per plane of the group long, whole cache lines at a time, and
/// each source row read as long, instead of `a.n` elements whose partly written lines, all in
/// one L1 set, the next plane must fetch again (docs/benchmarks.md, "Permutations: gathered
/// planes"). The other loops run with those nearest in either array innermost, so that the
/// pages a group of planes touches are touched again while the TLB still holds them. Where
/// the source rows are short and another loop continues them (the 12⁶ reversal again: rows of
/// 96 bytes, continued by the source's second dimension), the groups along that loop are
/// staged together too, so that every source row is read whole lines long ([`WIDE`]); and a
/// large plain copy writes its gathered destination rows past the caches ([`streams`]). The
/// 12⁶ reversal ran 2.1× as fast with both (docs/benchmarks.md, "Permutations: gathered
/// planes read wide").
struct Gather {
    a: Loop,
    next: Loop,
    /// Planes along `next` staged together (all of them where they fit).
    chunk: usize,
    b: Loop,
    /// The loop that continues `b` in the source, and how many of its steps are staged
    /// together: each source row is then read `b.n` elements per step long (see [`WIDE`]).
    wide: Option<(Loop, usize)>,
    /// The loops outside, nearest in either array first.
    rest: [Loop; MAX_RANK],
    n_rest: usize,
}

/// A gathered buffer stays within this many elements (16 KiB), half of L1.
const GATHER: usize = 2048;
/// Where the source rows of a gathered group are short (`b.n` below [`STREAM_ROW`]) and a
/// loop continues `b` in the source, groups along that loop, as many as this many elements
/// (192 KiB, in L2) hold, are staged together: every source row is read whole lines long
/// instead of a part of one or two lines per group.
const WIDE: usize = 24 * 1024;

impl Gather {
    /// The gathered form of plane loops `a`, `b` inside `outer`, where `outer`'s first loop
    /// continues `a` in the destination and [`GATHER`] holds at least two planes.
    fn of(a: Loop, b: Loop, outer: &[Loop]) -> Option<Gather> {
        let (&next, others) = outer.split_first()?;
        let planes = GATHER / (a.n * tile_len(b.n));
        if next.ds != a.n * a.ds || planes < 2 {
            return None;
        }
        let chunk = split(next.n, planes);
        // Steps of a wide loop staged together, where the source rows are short.
        let steps = (b.n < STREAM_ROW).then(|| WIDE / (a.n * chunk * b.n));
        let mut rest = [Loop::default(); MAX_RANK];
        let mut n_rest = 0;
        let mut wide = None;
        for &l in others {
            if let (None, Some(steps)) = (wide, steps)
                && l.ss == b.n * b.ss
                && steps >= 2
            {
                wide = Some((l, split(l.n, steps)));
            } else {
                rest[n_rest] = l;
                n_rest += 1;
            }
        }
        rest[..n_rest].sort_by_key(|l| l.ds.min(l.ss));
        Some(Gather {
            a,
            next,
            chunk,
            b,
            wide,
            rest,
            n_rest,
        })
    }

    /// With `may_stream` (a plain copy that may bypass the caches), destinations that
    /// [`streams`] allows are written by non-temporal stores, their gathered rows being the
    /// rows it judges.
    fn run<S: Store>(&self, dst: &mut [f64], src: &[f64], st: S, may_stream: bool) {
        let Gather { a, next, b, .. } = *self;
        let gathered = Loop {
            n: a.n * self.chunk,
            ..a
        };
        let stream = may_stream && next.n.is_multiple_of(self.chunk) && streams(dst, gathered);
        // With a wide loop `b` is one tile (`b.n` < STREAM_ROW), so its runs along the wide
        // loop are contiguous in the source.
        let tb = tile_len(b.n);
        let (w, wc) = self.wide.unwrap_or((Loop::ONCE, 1));
        let group = a.n * self.chunk * tb;
        let mut buf = Scratch::new(group * wc);
        let buf = buf.get();
        let mut out = stream.then(|| Scratch::new(group));
        let mut out = out.as_mut().map(Scratch::get);
        for_each_offset(&self.rest[..self.n_rest], |doff, soff| {
            for jw in (0..w.n).step_by(wc) {
                let wn = wc.min(w.n - jw);
                let (doff, soff) = (doff + jw * w.ds, soff + jw * w.ss);
                for j1 in (0..next.n).step_by(self.chunk) {
                    let na = a.n * self.chunk.min(next.n - j1);
                    let (doff, soff) = (doff + j1 * next.ds, soff + j1 * next.ss);
                    for jb in (0..b.n).step_by(tb) {
                        let nb = tb.min(b.n - jb);
                        let row = nb * wn;
                        let staged = &mut buf[..na * row];
                        // staged[(i1 * a.n + i) * row + q * nb + k] =
                        //     src(a = i, next = j1 + i1, wide = jw + q, b = jb + k).
                        for (i1, rows) in staged.chunks_exact_mut(a.n * row).enumerate() {
                            tile::stage(rows, src, soff + jb + i1 * next.ss, a.ss, a.n, row);
                        }
                        for q in 0..wn {
                            let tile = Tile {
                                d0: doff + jb * b.ds + q * w.ds,
                                s0: q * nb,
                                na,
                                nb,
                                src_row: row,
                                dst_row: b.ds,
                            };
                            match out.as_deref_mut() {
                                Some(out) => tile::transpose_streamed(dst, staged, tile, out),
                                None => tile::transpose(dst, staged, tile, st),
                            }
                        }
                    }
                }
            }
        });
        if stream {
            tile::fence();
        }
    }
}

/// Planes of one 8 × 8 block whose rows share one L1 set on both sides (the reversal of an
/// 8⁶ block: rows 256 KiB apart in both arrays), where one loop continues the plane's
/// destination rows (`along_dst`, a step of 8 elements there) and another its source rows
/// (`along_src`, 8 elements in the source). Up to 8 steps of each are moved together: their
/// 64 blocks are transposed into one buffer (32 KiB) and its rows written to the destination
/// as runs of up to 64 elements ([`tile::transpose_runs`]), so that both arrays are read and
/// written in runs of whole lines, where a plane alone reads and writes 8 lines 256 KiB apart
/// on each side. Lines written 4 KiB apart run at half of memcpy in the caches, where lines
/// read so cost nothing (docs/benchmarks.md, "Transposes in the caches: the stores bound
/// them"). The 8⁶ reversal runs 1.3× as fast so in the caches as plane by plane (0.50 of
/// memcpy against 0.40), and as fast from memory (docs/benchmarks.md, "Permutations: the 8⁶
/// reversal in runs of 64").
struct RunTiles {
    a: Loop,
    b: Loop,
    along_dst: Loop,
    along_src: Loop,
    /// The loops outside, nearest in either array first.
    rest: [Loop; MAX_RANK],
    n_rest: usize,
}

/// Steps of [`RunTiles`]' two loops moved together: runs of 64 elements (8 lines).
const RUN_STEPS: usize = 8;

impl RunTiles {
    fn of(a: Loop, b: Loop, outer: &[Loop]) -> Option<RunTiles> {
        let one_block = a.n == 8 && b.n == 8 && tile::eight_wide(a.n, b.n);
        let crowded = tile::one_set(a.ss) && tile::one_set(b.ds);
        if !one_block || !crowded {
            return None;
        }
        let i = outer.iter().position(|l| l.ds == a.n * a.ds)?;
        let j = outer.iter().position(|l| l.ss == b.n * b.ss)?;
        if i == j {
            return None;
        }
        let mut rest = [Loop::default(); MAX_RANK];
        let mut n_rest = 0;
        for (k, &l) in outer.iter().enumerate() {
            if k != i && k != j {
                rest[n_rest] = l;
                n_rest += 1;
            }
        }
        rest[..n_rest].sort_by_key(|l| l.ds.min(l.ss));
        Some(RunTiles {
            a,
            b,
            along_dst: outer[i],
            along_src: outer[j],
            rest,
            n_rest,
        })
    }

    fn run<S: Store>(&self, dst: &mut [f64], src: &[f64], st: S) {
        let RunTiles {
            a,
            b,
            along_dst,
            along_src,
            ..
        } = *self;
        let mut buf = Scratch::new(a.n * RUN_STEPS * b.n * RUN_STEPS);
        let buf = buf.get();
        // `l` from step `at` on, at most `RUN_STEPS` steps.
        let steps = |l: Loop, at: usize| Loop {
            n: RUN_STEPS.min(l.n - at),
            ..l
        };
        for_each_offset(&self.rest[..self.n_rest], |doff, soff| {
            for p in (0..along_dst.n).step_by(RUN_STEPS) {
                for q in (0..along_src.n).step_by(RUN_STEPS) {
                    let block = Tile {
                        d0: doff + p * along_dst.ds + q * along_src.ds,
                        s0: soff + p * along_dst.ss + q * along_src.ss,
                        na: a.n,
                        nb: b.n,
                        src_row: a.ss,
                        dst_row: b.ds,
                    };
                    let runs = (steps(along_dst, p), steps(along_src, q));
                    tile::transpose_runs(dst, src, block, runs, buf, st);
                }
            }
        });
    }
}

/// A tile's scratch space, starting on a cache line: rows of a tile that straddle lines cost
/// every other vector load and store twice.
struct Scratch {
    buf: Vec<f64>,
    len: usize,
}

impl Scratch {
    fn new(len: usize) -> Scratch {
        Scratch {
            buf: vec![0.0; len + 8],
            len,
        }
    }

    fn get(&mut self) -> &mut [f64] {
        let skip = self.buf.as_ptr().align_offset(64).min(8);
        &mut self.buf[skip..skip + self.len]
    }
}

/// Whether the destination's rows may bypass the caches ([`tile::transpose_streamed`]) where
/// the permutation is a plain copy: a destination of at least [`Streaming::from`] elements, on a
/// cache line, whose rows (`a`) are whole lines. Such a block would not stay in the caches
/// anyway, and writing it through them first reads every line in, while its rows, thousands
/// of bytes apart on power-of-two extents, evict each other (docs/benchmarks.md,
/// "Permutations that stream their destination").
fn streams(dst: &[f64], a: Loop) -> bool {
    dst.len() >= Streaming::here().from
        && dst.as_ptr().align_offset(64) == 0
        && a.n.is_multiple_of(LINE)
        && tile::can_stream()
}

/// Where a plain copy's destination may bypass the caches on this CPU ([`streams`], [`cut`]).
/// A block past L2 written through the caches goes on to L3, and whether that beats writing
/// it to memory depends on the L3: on Zen 4 the 24⁴ blocks (2.5 MiB) streamed gained from
/// memory but lost up to 2× with the blocks in the caches, which kept them through L3; on an
/// Intel Xeon (L2 2 MiB, a mesh L3) streamed they ran up to 1.7× as fast in the caches and
/// 3.2× from memory, where 4 of them had stayed under half of memcpy (docs/benchmarks.md,
/// "Permutations: destinations from 2 MiB streamed on Intel").
#[derive(Clone, Copy, Debug)]
struct Streaming {
    /// Destinations of at least this many elements stream...
    from: usize,
    /// ...and with them planes in 8 × 8 blocks whose destination rows are shorter than
    /// [`STREAM_ROW`] (each row a whole number of lines).
    short_rows: bool,
}

impl Streaming {
    /// From 4 MiB, rows of at least [`STREAM_ROW`]: measured on Zen 4.
    const LONG_ROWS: Streaming = Streaming {
        from: 1 << 19,
        short_rows: false,
    };
    /// From 2 MiB, rows of whole lines: measured on an Intel Xeon.
    const LINES: Streaming = Streaming {
        from: 1 << 18,
        short_rows: true,
    };

    /// This CPU's policy.
    fn here() -> Streaming {
        static HERE: std::sync::OnceLock<Streaming> = std::sync::OnceLock::new();
        *HERE.get_or_init(|| {
            if intel() {
                Streaming::LINES
            } else {
                Streaming::LONG_ROWS
            }
        })
    }
}

/// Whether this CPU is an Intel one (its CPUID vendor string, read once: in a VM each
/// `cpuid` exits to the hypervisor).
pub(crate) fn intel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static INTEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *INTEL.get_or_init(|| {
            let id = std::arch::x86_64::__cpuid(0);
            [id.ebx, id.edx, id.ecx]
                .iter()
                .flat_map(|r| r.to_le_bytes())
                .eq(*b"GenuineIntel")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Streamed tiles' destination rows are at least this long (256 bytes)...
const STREAM_ROW: usize = 32;
/// ...and a multiple of a cache line of f64.
const LINE: usize = 8;

/// How the planes of a transpose are cut and each tile transposed.
#[derive(Debug, PartialEq, Eq)]
struct Cut {
    /// Tile extents along `a` (the destination's fastest loop) and `b` (the source's).
    tiles: (usize, usize),
    /// Source rows copied whole into a buffer first ([`transpose_tiles_staged`]).
    staged: bool,
    /// Destination rows written by non-temporal stores ([`tile::transpose_streamed`]).
    stream: bool,
}

/// Chooses the [`Cut`] for plane loops `a` and `b`. Rows far apart on one side make each
/// square tile touch as many pages and L1 sets as it has rows, for 256 bytes each; there the
/// tile is narrow across those rows and long along them (`NARROW` × up to `LONG`), unless the
/// rows of the other side crowd into a few L1 sets. Measured on all 24 permutations of
/// 16⁴–48⁴ blocks (docs/benchmarks.md, "Permutations against memcpy").
///
/// Where the destination may stream (`stream`, see [`streams`]), the tiles are square and
/// their destination rows streamed, also where the source rows are far apart, or long as in
/// the mirror cut; tile rows are then whole cache lines.
fn cut(a: Loop, b: Loop, streaming: Option<Streaming>) -> Cut {
    let stream = streaming.is_some();
    let dst_crowded = set_conflicts(b.ds, b.n, CROWDED);
    let src_crowded = set_conflicts(a.ss, a.n, CROWDED);
    let lines = |n: usize| if stream { n.next_multiple_of(LINE) } else { n };
    let square = (lines(tile_len(a.n)), tile_len(b.n));
    let short_rows = streaming.is_some_and(|s| s.short_rows) && tile::eight_wide(a.n, b.n);
    let square_streams = stream && (square.0 >= STREAM_ROW || short_rows);
    // A plane of at most one tile edge each way whose square tile needs neither staging nor
    // streaming goes to the kernel with the planes beside it (`transpose_batch`): on such
    // planes that beat the narrow and the mirror cuts (docs/benchmarks.md, "Permutations:
    // planes of one tile in one call").
    let one_tile = a.n <= TILE && b.n <= TILE && !square_streams;
    let conflicts = set_conflicts(a.ss, square.0, THRASH);
    let batched = one_tile && !conflicts;
    if a.ss >= FAR_ROWS && !dst_crowded && !square_streams && !batched {
        // One destination line (8 elements) of each row per tile, from a few long source rows.
        let tiles = (a.n.min(NARROW), split(b.n, LONG));
        return Cut {
            tiles,
            staged: false,
            stream: false,
        };
    }
    if b.ds >= FAR_ROWS && !src_crowded && !batched {
        // The mirror: a few destination rows, each written in a long run.
        let tiles = (lines(split(a.n, LONG)), b.n.min(NARROW));
        let stream = stream && tiles.0 >= STREAM_ROW;
        return Cut {
            tiles,
            staged: false,
            stream,
        };
    }
    // The tile kernel reads across all the tile's source rows, so one line of each must stay
    // in L1 for the whole tile; staged where those rows share L1 sets.
    Cut {
        tiles: square,
        staged: conflicts,
        stream: square_streams,
    }
}

/// Whether the planes go in 8 × 8 blocks held in registers ([`tile::transpose_batch`], or
/// [`tile::transpose_batch_streamed`] where the destination streams) rather than by the
/// [`Cut`]'s tiles: where both extents are multiples of 8 and the blocks pay on this CPU
/// ([`tile::eights_pay`]: always in AVX-512 registers, for some planes in AVX ones). Each
/// source and destination line is then read or written once, whole, so rows that share L1
/// sets cannot evict each other's lines half used, no staging is needed, and a streamed
/// destination line leaves as whole non-temporal stores, with no buffer. In AVX-512
/// registers, 16⁴ and 24⁴ ran 1.2–1.6× faster so where the tiles were staged, narrow or square, and
/// streamed 32⁴ and 48⁴ 1.1–2× (docs/benchmarks.md, "Permutations: 8 × 8 blocks for every
/// plane", "... streamed"). Except the narrow and mirror cuts whose tiles are longer than a
/// tile (32⁴ `[2,0,1,3]`, 48⁴ `[3,0,2,1]`): their long runs keep few pages in use, and the
/// 8 × 8 blocks, which cross all the plane's rows for each column of blocks, lost 1.05–1.2×
/// there. Slender planes (`[1,2,3,0]` of a 4-index block: thousands of short source rows, a
/// few long destination rows) go in 8 × 8 blocks too, walked in strips ([`tile::slender`]).
fn in_eights(a: Loop, b: Loop, cut: &Cut, (outer, dst_len): (&[Loop], usize)) -> bool {
    let (across, along) = cut.tiles;
    let long_and_thin = across.min(along) <= NARROW && across.max(along) > TILE;
    let batch = outer.first().copied().unwrap_or(Loop::ONCE);
    (!long_and_thin || tile::slender(a.n, b.n))
        && tile::eights_pay((a.n, b.n, a.ss), batch, cut.stream.then_some(dst_len))
}

/// Rows per L1 set past which a narrow or mirror cut's short side evicts its own lines, and
/// past which staging the source rows pays ([`set_conflicts`]).
const CROWDED: u8 = 4;
const THRASH: u8 = 8;

/// Rows at least this many elements (8 KiB) apart count as far apart (see [`cut`]).
const FAR_ROWS: usize = 1024;
/// Narrow tiles are one 64-byte line across the far rows...
const NARROW: usize = 8;
/// ...and up to 2 KiB along them.
const LONG: usize = 256;

/// Tile edge in elements: a 32×32 tile of f64 is 8 KiB per array, so the source tile, the
/// destination tile and the staging buffer fit in L1 together.
const TILE: usize = 32;

/// Extents up to this are not split: a 48×48 tile (18 KiB) still fits in L1, and small blocks
/// (segments are typically 10–60) then need no tile bookkeeping at all.
const WHOLE: usize = 48;

/// Splits `n` into tiles of at most `TILE`, balanced so no tile is a tiny remainder.
fn tile_len(n: usize) -> usize {
    if n <= WHOLE { n.max(1) } else { split(n, TILE) }
}

/// The length of the parts when `n` is split into as few parts of at most `max` as possible,
/// balanced so no part is a tiny remainder.
fn split(n: usize, max: usize) -> usize {
    n.div_ceil(n.div_ceil(max).max(1)).max(1)
}

/// Whether `rows` rows `stride` elements apart crowd into few L1 sets: the L1 (32 KiB, 8-way
/// on Zen 4; 48 KiB, 12-way on newer x86 cores; 64-byte lines) has 64 sets, so addresses
/// 4 KiB apart share a set. Counts how many rows start in each set; more than `limit` in one
/// means lines of the tile evict each other. Staging the source rows pays from more than 8
/// rows per set (16 rows 2 KiB apart, 8 per set, are faster direct); the vector kernel, which
/// keeps four destination rows open beside the source rows, already loses from more than 4
/// ([`cut`]).
fn set_conflicts(stride: usize, rows: usize, limit: u8) -> bool {
    const SETS: usize = 64;
    let mut count = [0u8; SETS];
    for r in 0..rows.min(WHOLE) {
        let set = (r * stride * 8 / 64) % SETS;
        count[set] += 1;
        if count[set] > limit {
            return true;
        }
    }
    false
}

/// The `a × b` sub-array of one 2-D transpose, at `doff` in the destination and `soff` in the
/// source: `a` is stride-1 in the destination, `b` is stride-1 in the source.
#[derive(Clone, Copy)]
struct Plane {
    a: Loop,
    b: Loop,
    doff: usize,
    soff: usize,
}

impl Plane {
    /// The whole plane as one tile.
    fn whole(self) -> Tile {
        Tile {
            d0: self.doff,
            s0: self.soff,
            na: self.a.n,
            nb: self.b.n,
            src_row: self.a.ss,
            dst_row: self.b.ds,
        }
    }
}

/// 2-D transpose of a [`Plane`] in tiles of `ta × tb`, each transposed directly from source to
/// destination, or through `out` to non-temporal stores where it is given.
fn transpose_tiles<S: Store>(
    dst: &mut [f64],
    src: &[f64],
    plane: Plane,
    cut: &Cut,
    mut out: Option<&mut [f64]>,
    st: S,
) {
    let Plane { a, b, doff, soff } = plane;
    let (ta, tb) = cut.tiles;
    for jb in (0..b.n).step_by(tb) {
        let nb = tb.min(b.n - jb);
        for ja in (0..a.n).step_by(ta) {
            let tile = Tile {
                d0: doff + ja + jb * b.ds,
                s0: soff + jb + ja * a.ss,
                na: ta.min(a.n - ja),
                nb,
                src_row: a.ss,
                dst_row: b.ds,
            };
            match out.as_deref_mut() {
                Some(out) => tile::transpose_streamed(dst, src, tile, out),
                None => tile::transpose(dst, src, tile, st),
            }
        }
    }
}

/// [`transpose_tiles`] through a staging buffer, for row strides that map the tile's rows into
/// few cache sets (power-of-two extents). `buf` is scratch space of at least
/// `tile_len(a.n) * tile_len(b.n)` elements.
///
/// Each tile's source rows are first copied into `buf` (contiguous reads, every source cache
/// line used whole at once); the transpose then reads `buf`, which is contiguous and so free of
/// cache-set conflicts. Transposing straight from the source instead keeps one partial line of
/// each of the tile's source rows live for the whole tile, and when the row strides are
/// multiples of 4 KiB (power-of-two extents: 32⁴ rows are 256 KiB apart) all those lines fall
/// into the same L1 (and L2) set, are evicted and re-fetched for every element: 32⁴ ran 2.5x
/// slower than 31⁴ (docs/benchmarks.md, "Permute kernel, second version"). The destination
/// side needs no staging: the tile kernel writes four destination rows at a time, whole.
/// Staging costs an extra in-L1 copy, so it is only used when [`set_conflicts`] says the
/// direct path thrashes.
fn transpose_tiles_staged<S: Store>(
    dst: &mut [f64],
    src: &[f64],
    plane: Plane,
    cut: &Cut,
    buf: &mut [f64],
    mut out: Option<&mut [f64]>,
    st: S,
) {
    let Plane { a, b, doff, soff } = plane;
    let (ta, tb) = cut.tiles;
    for jb in (0..b.n).step_by(tb) {
        let nb = tb.min(b.n - jb);
        for ja in (0..a.n).step_by(ta) {
            let na = ta.min(a.n - ja);
            let staged = &mut buf[..na * nb];
            // staged[i * nb + k] = src(a = ja + i, b = jb + k).
            tile::stage(staged, src, soff + jb + ja * a.ss, a.ss, na, nb);
            let tile = Tile {
                d0: doff + ja + jb * b.ds,
                s0: 0,
                na,
                nb,
                src_row: nb,
                dst_row: b.ds,
            };
            match out.as_deref_mut() {
                Some(out) => tile::transpose_streamed(dst, staged, tile, out),
                None => tile::transpose(dst, staged, tile, st),
            }
        }
    }
}

/// Calls `f(dst_offset, src_offset)` for every point of the loop nest (loop 0 fastest).
fn for_each_offset(loops: &[Loop], mut f: impl FnMut(usize, usize)) {
    let total: usize = loops.iter().map(|l| l.n).product();
    let mut idx = [0usize; MAX_RANK];
    let (mut doff, mut soff) = (0usize, 0usize);
    for _ in 0..total {
        f(doff, soff);
        for (i, l) in idx.iter_mut().zip(loops) {
            *i += 1;
            doff += l.ds;
            soff += l.ss;
            if *i < l.n {
                break;
            }
            *i = 0;
            doff -= l.ds * l.n;
            soff -= l.ss * l.n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permute_cases::all_permutations;
    use crate::testutil::{naive_permute, random_vec};
    use proptest::prelude::*;

    /// The nest other kernels take: extents of 1 dropped, dimensions adjacent in both layouts
    /// merged, strides of both layouts; mismatched arguments refused.
    #[test]
    fn loop_nests_drop_ones_and_merge_what_continues() -> Result<(), KernelError> {
        let lp = |n, dst_stride, src_stride| PermLoop {
            n,
            dst_stride,
            src_stride,
        };
        let nest = |ext: &[usize], perm: &[usize]| -> Result<Vec<PermLoop>, KernelError> {
            let src = Shape::new(ext)?;
            permute_loops(&src.permuted(perm)?, &src, perm)
        };
        // 8^6 [3,4,5,0,1,2]: a 512 x 512 transpose.
        assert_eq!(
            nest(&[8; 6], &[3, 4, 5, 0, 1, 2])?,
            [lp(512, 1, 512), lp(512, 512, 1)]
        );
        // A reversal merges nothing; the extent of 1 goes.
        assert_eq!(
            nest(&[2, 1, 3, 4], &[3, 2, 1, 0])?,
            [lp(4, 1, 6), lp(3, 4, 2), lp(2, 12, 1)]
        );
        // The identity is one loop; a scalar none.
        assert_eq!(nest(&[3, 5], &[0, 1])?, [lp(15, 1, 1)]);
        assert_eq!(nest(&[1, 1], &[1, 0])?, []);
        let src = Shape::new(&[2, 3])?;
        assert!(permute_loops(&src, &src, &[1, 0]).is_err());
        Ok(())
    }

    fn check_one(ext: &[usize], perm: &[usize], seed: u64) -> Result<(), KernelError> {
        let src_shape = Shape::new(ext)?;
        let dst_shape = src_shape.permuted(perm)?;
        let src = random_vec(src_shape.len(), seed);
        let expect = naive_permute(&src, &src_shape, perm);

        let mut dst = random_vec(dst_shape.len(), seed + 1);
        permute(&mut dst, &dst_shape, &src, &src_shape, perm)?;
        assert_eq!(dst, expect, "permute {ext:?} by {perm:?}");

        let before = random_vec(dst_shape.len(), seed + 2);
        let mut acc = before.clone();
        permute_add(&mut acc, &dst_shape, -0.75, &src, &src_shape, perm)?;
        for i in 0..acc.len() {
            assert_eq!(
                acc[i],
                before[i] + -0.75 * expect[i],
                "permute_add {ext:?} by {perm:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn all_permutations_up_to_rank_4() -> Result<(), KernelError> {
        let mut seed = 0;
        for rank in 0..=4 {
            for perm in all_permutations(rank) {
                // A few shapes per permutation: small, with unit extents, and ones big enough
                // to need several tiles.
                let shapes: [Vec<usize>; 4] = [
                    (0..rank).map(|d| 2 + d).collect(),
                    (0..rank).map(|d| if d % 2 == 0 { 1 } else { 3 }).collect(),
                    (0..rank).map(|d| [37, 5, 33, 2][d]).collect(),
                    (0..rank).map(|d| [3, 70, 4, 66][d]).collect(),
                ];
                for ext in &shapes {
                    seed += 10;
                    check_one(ext, &perm, seed)?;
                }
            }
        }
        Ok(())
    }

    #[test]
    fn some_rank_5_and_6() -> Result<(), KernelError> {
        let cases: [(&[usize], &[usize]); 6] = [
            (&[2, 3, 4, 5, 6], &[4, 3, 2, 1, 0]),
            (&[2, 3, 4, 5, 6], &[1, 0, 3, 2, 4]),
            (&[40, 3, 1, 2, 35], &[4, 2, 1, 3, 0]),
            (&[2, 3, 2, 3, 2, 3], &[5, 4, 3, 2, 1, 0]),
            (&[3, 2, 4, 1, 2, 3], &[2, 0, 5, 1, 4, 3]),
            (&[1, 1, 1, 1, 1, 1], &[3, 1, 0, 5, 4, 2]),
        ];
        for (i, (ext, perm)) in cases.iter().enumerate() {
            check_one(ext, perm, 1000 + 10 * i as u64)?;
        }
        Ok(())
    }

    /// Water's, water/cc-pVTZ's and the ACES4 test job's amplitude blocks (by table where the
    /// CPU has AVX-512, but for rows of 32 or more, and on AMD's only up to 4,096 elements),
    /// and a rank-5 one.
    #[test]
    fn every_permutation_of_a_small_segment_block() -> Result<(), KernelError> {
        for (i, perm) in all_permutations(4).iter().enumerate() {
            check_one(&crate::permute_cases::WATER_T2, perm, 300 + i as u64)?;
            check_one(&crate::permute_cases::TZ_T2, perm, 600 + i as u64)?;
            check_one(&crate::permute_cases::TEST_T2, perm, 500 + i as u64)?;
            check_one(
                &[7, 3, 9, 2, 5],
                &[perm[0], perm[1], 4, perm[2], perm[3]],
                400 + i as u64,
            )?;
        }
        Ok(())
    }

    /// Short runs that fill small chunks of the destination go chunk by chunk (checked here,
    /// not assumed), with the naive loop's values; larger chunks do not.
    #[test]
    fn short_runs_go_by_chunks() -> Result<(), KernelError> {
        let walk_of = |ext: &[usize], perm: &[usize]| -> Result<(usize, Loops), KernelError> {
            let src = Shape::new(ext)?;
            let dst = src.permuted(perm)?;
            let loops = plan(dst.len(), &dst, src.len(), &src, perm)?;
            let l = loops.as_slice();
            Ok((l[0].n, in_source_order(&l[1..])))
        };
        for (ext, perm, chunk) in [
            (&[4usize; 6][..], &[0usize, 2, 1, 4, 3, 5][..], Some(64)),
            (&[12; 6], &[0, 2, 1, 4, 3, 5], Some(1728)),
            (&[16; 4], &[0, 2, 1, 3], None),
            (&[4, 3, 5, 6, 2], &[0, 2, 1, 4, 3], Some(60)),
        ] {
            let (n, walk) = walk_of(ext, perm)?;
            let walk = walk.as_slice();
            assert!(far_runs(walk).is_none(), "{ext:?} {perm:?}");
            assert_eq!(chunk_of(n, walk), chunk, "{ext:?} {perm:?}");
        }
        check_one(&[4; 6], &[0, 2, 1, 4, 3, 5], 21)?;
        check_one(&[4, 3, 5, 6, 2], &[0, 2, 1, 4, 3], 22)
    }

    #[test]
    fn large_transposes() -> Result<(), KernelError> {
        check_one(&[130, 97], &[1, 0], 7)?;
        check_one(&[20, 21, 22, 23], &[3, 2, 1, 0], 8)?;
        check_one(&[20, 21, 22, 23], &[1, 0, 3, 2], 9)?;
        Ok(())
    }

    /// Blocks whose short destination rows crowd into one cache set take the gathered form
    /// (checked here, not assumed), and it gives the naive loop's values.
    #[test]
    fn gathered_planes() -> Result<(), KernelError> {
        // The first three stage every plane of their next loop together, the last three
        // groups of them: 8 of 256, 3 of 576, and 3 of 320 (the last group of 2). The first
        // three, whose source rows are short and continued by another loop, also stage the
        // steps of that loop together (wide: all 8, 32 of the 64 of two merged dimensions, all
        // 12); the others' source rows are not continued, or long (40).
        let cases: [(&[usize], &[usize]); 6] = [
            (&[9, 8, 8, 8, 9], &[4, 3, 2, 1, 0]),
            (&[9, 8, 8, 8, 9], &[4, 3, 1, 2, 0]),
            (&[12; 6], &[5, 4, 3, 2, 1, 0]),
            (&[16, 16, 16, 16], &[3, 1, 2, 0]),
            (&[24, 24, 24, 24], &[3, 1, 2, 0]),
            (&[40, 5, 64, 16], &[3, 1, 2, 0]),
        ];
        for (i, (ext, perm)) in cases.iter().enumerate() {
            let (a, b, outer) = plane_in(ext, perm)?;
            let staged = cut(a, b, None).staged;
            let gather = Gather::of(a, b, &outer).filter(|_| staged);
            let groups = gather
                .as_ref()
                .map(|g| (g.chunk, g.next.n, g.wide.map(|(w, n)| (n, w.n))));
            let expect = [
                (8, 8, Some((8, 8))),
                (8, 8, Some((32, 64))),
                (12, 12, Some((12, 12))),
                (8, 256, None),
                (3, 576, None),
                (3, 320, None),
            ];
            assert_eq!(groups, Some(expect[i]), "{ext:?} {perm:?}");
            check_one(ext, perm, 2000 + 10 * i as u64)?;
            // On a cache line, a large copy streams its gathered rows.
            let s = Shape::new(ext)?;
            let d = s.permuted(perm)?;
            let src = random_vec(s.len(), 2005 + 10 * i as u64);
            let mut on_a_line = Scratch::new(d.len());
            let dst = on_a_line.get();
            dst.fill(f64::NAN);
            if let (6, Some(g)) = (ext.len(), &gather) {
                let rows = Loop {
                    n: a.n * g.chunk,
                    ..a
                };
                assert!(streams(dst, rows) || !tile::can_stream());
            }
            permute(dst, &d, &src, &s, perm)?;
            assert!(
                dst == naive_permute(&src, &s, perm).as_slice(),
                "{ext:?} {perm:?}"
            );
        }
        Ok(())
    }

    /// Planes of one 8 × 8 block whose rows share one L1 set on both sides, continued by one
    /// loop in each array, move in runs of up to 64 ([`RunTiles`]): the 8⁶ reversal, and
    /// reversals whose continuing loops end in a part of 8 steps (12, 20) or take several
    /// (16). Copies and accumulates give the naive loop's block, bit for bit.
    #[test]
    fn planes_of_one_block_move_in_runs() -> Result<(), KernelError> {
        let (a, b, outer) = plane_in(&[8; 6], &[5, 4, 3, 2, 1, 0])?;
        let runs = RunTiles::of(a, b, &outer);
        assert_eq!(runs.is_some(), tile::eight_wide(8, 8));
        if let Some(r) = runs {
            assert_eq!((r.along_dst.ds, r.along_dst.ss), (8, 4096));
            assert_eq!((r.along_src.ds, r.along_src.ss), (4096, 8));
            assert_eq!(r.n_rest, 2);
        }
        for (i, ext) in [
            [8usize; 6],
            [8, 12, 8, 8, 12, 8],
            [8, 16, 8, 8, 20, 8],
            [8, 20, 8, 16, 8, 8],
        ]
        .into_iter()
        .enumerate()
        {
            let (a, b, outer) = plane_in(&ext, &[5, 4, 3, 2, 1, 0])?;
            assert_eq!(
                RunTiles::of(a, b, &outer).is_some(),
                tile::eight_wide(8, 8),
                "{ext:?}"
            );
            check_one(&ext, &[5, 4, 3, 2, 1, 0], 3100 + i as u64)?;
        }
        // Rows in many sets (9⁶), and a plane that is not one block (16⁴): other paths.
        let (a, b, outer) = plane_in(&[9; 6], &[5, 4, 3, 2, 1, 0])?;
        assert!(RunTiles::of(a, b, &outer).is_none());
        let (a, b, outer) = plane_in(&[16; 4], &[3, 2, 1, 0])?;
        assert!(RunTiles::of(a, b, &outer).is_none());
        Ok(())
    }

    /// Planes whose source rows share one L1 set, moved in squares of 8 × 8 blocks, give the
    /// naive loop's block; the swap of an 8⁶ block's first two dimensions, whose plane is
    /// continued by the same loop in both arrays, does not move in runs.
    #[test]
    fn crowded_planes() -> Result<(), KernelError> {
        let (a, b, outer) = plane_in(&[8; 6], &[1, 0, 2, 3, 4, 5])?;
        assert!(RunTiles::of(a, b, &outer).is_none());
        for (i, (ext, perm)) in [
            (&[8usize; 6][..], &[3usize, 4, 5, 0, 1, 2][..]),
            (&[512, 1024], &[1, 0]),
            (&[16, 32, 16, 32], &[2, 3, 0, 1]),
            (&[32, 32, 32, 32], &[3, 0, 2, 1]),
        ]
        .into_iter()
        .enumerate()
        {
            check_one(ext, perm, 3010 + 10 * i as u64)?;
        }
        Ok(())
    }

    #[test]
    fn zero_extent_is_a_no_op() -> Result<(), KernelError> {
        let s = Shape::new(&[3, 0])?;
        let d = Shape::new(&[0, 3])?;
        permute(&mut [], &d, &[], &s, &[1, 0])?;
        Ok(())
    }

    #[test]
    fn by_labels() -> Result<(), KernelError> {
        // a[i,j] = b[j,i] with i=1, j=2.
        let bs = Shape::new(&[2, 3])?;
        let b: Vec<f64> = (0..6).map(f64::from).collect();
        let as_ = Shape::new(&[3, 2])?;
        let mut a = vec![0.0; 6];
        permute_labeled(
            OperandMut::new(&mut a, as_, &[2, 1]),
            Operand::new(&b, bs, &[1, 2]),
        )?;
        assert_eq!(a, naive_permute(&b, &bs, &[1, 0]));
        permute_add_labeled(
            OperandMut::new(&mut a, as_, &[2, 1]),
            -1.0,
            Operand::new(&b, bs, &[1, 2]),
        )?;
        assert_eq!(a, vec![0.0; 6]);
        assert!(matches!(
            permute_labeled(
                OperandMut::new(&mut a, as_, &[2, 3]),
                Operand::new(&b, bs, &[1, 2]),
            ),
            Err(KernelError::LabelSetMismatch { .. })
        ));
        Ok(())
    }

    #[test]
    fn invalid_arguments_are_errors() -> Result<(), KernelError> {
        let s = Shape::new(&[2, 3])?;
        let t = Shape::new(&[3, 2])?;
        let src = vec![0.0; 6];
        let mut dst = vec![0.0; 6];
        assert!(matches!(
            permute(&mut dst, &t, &src, &s, &[0, 0]),
            Err(KernelError::InvalidPermutation { .. })
        ));
        assert!(matches!(
            permute(&mut dst, &t, &src, &s, &[0, 1, 2]),
            Err(KernelError::InvalidPermutation { .. })
        ));
        assert!(matches!(
            permute(&mut dst, &t, &src, &s, &[2, 0]),
            Err(KernelError::InvalidPermutation { .. })
        ));
        assert!(matches!(
            permute(&mut dst, &s, &src, &s, &[1, 0]),
            Err(KernelError::PermutedShapeMismatch { .. })
        ));
        assert!(matches!(
            permute(&mut dst[..5], &t, &src, &s, &[1, 0]),
            Err(KernelError::LengthMismatch {
                role: Role::Dst,
                ..
            })
        ));
        assert!(matches!(
            permute_add(&mut dst, &t, 1.0, &src[..4], &s, &[1, 0]),
            Err(KernelError::LengthMismatch {
                role: Role::Src,
                ..
            })
        ));
        Ok(())
    }

    #[test]
    fn loop_merging() -> Result<(), KernelError> {
        // [1,0,3,2] on 40^4 is a 1600x1600 transpose.
        let s = Shape::new(&[40, 40, 40, 40])?;
        let loops = plan(s.len(), &s, s.len(), &s, &[1, 0, 3, 2])?;
        assert_eq!(loops.len, 4);
        let s2 = Shape::new(&[4, 5, 6])?;
        let d2 = s2.permuted(&[0, 2, 1])?;
        let loops = plan(d2.len(), &d2, s2.len(), &s2, &[0, 2, 1])?;
        assert_eq!(loops.l[0], Loop { n: 4, ds: 1, ss: 1 });
        // Identity on any shape collapses to one contiguous loop.
        let loops = plan(s.len(), &s, s.len(), &s, &[0, 1, 2, 3])?;
        assert_eq!(loops.len, 1);
        Ok(())
    }

    #[test]
    fn runs_are_walked_in_the_source_order() -> Result<(), KernelError> {
        // 16^4 [0,3,2,1]: runs of 16; the destination's next loops step the source by 4096,
        // 256 and 16 elements; the source's order is 16, 256, 4096.
        let s = Shape::new(&[16, 16, 16, 16])?;
        let d = s.permuted(&[0, 3, 2, 1])?;
        let loops = plan(d.len(), &d, s.len(), &s, &[0, 3, 2, 1])?;
        let steps = |l: &[Loop]| l.iter().map(|l| l.ss).collect::<Vec<_>>();
        assert_eq!(steps(&loops.as_slice()[1..]), [4096, 256, 16]);
        let order = in_source_order(&loops.as_slice()[1..]);
        assert_eq!(steps(order.as_slice()), [16, 256, 4096]);
        assert_eq!(order.size, 16 * 16 * 16);
        // The copies in that order still match the naive loop.
        check_one(&[16, 16, 16, 16], &[0, 3, 2, 1], 5)?;
        check_one(&[5, 7, 3, 4, 2], &[0, 4, 2, 3, 1], 6)
    }

    #[test]
    fn staging_is_chosen_for_power_of_two_strides() -> Result<(), KernelError> {
        // 32^4 [3,2,1,0]: rows 256 KiB apart all share one set; 31^4: spread out.
        assert!(set_conflicts(32 * 32 * 32, 32, THRASH));
        assert!(!set_conflicts(16, 32, THRASH));
        assert!(!set_conflicts(256, 16, THRASH));
        assert!(set_conflicts(1024, 32, THRASH));
        assert!(!set_conflicts(31 * 31 * 31, 31, THRASH));
        assert!(!set_conflicts(32, 32, THRASH));
        assert!(set_conflicts(256, 16, CROWDED));
        // Both paths, with ragged tiles (extents above WHOLE are split into tiles).
        check_one(&[32, 32, 8, 16], &[3, 2, 1, 0], 11)?;
        check_one(&[64, 3, 64], &[2, 1, 0], 12)?;
        check_one(&[100, 512], &[1, 0], 13)?;
        check_one(&[512, 100], &[1, 0], 14)?;
        check_one(&[8, 1, 16, 2, 32], &[4, 2, 0, 3, 1], 15)?;
        Ok(())
    }

    /// Runs whose neighbours in the destination come last in the source's order, at least
    /// `RUN_GAP` runs apart, go in strips; the values are the same either way.
    #[test]
    fn runs_whose_destination_neighbours_come_last_go_in_strips() -> Result<(), KernelError> {
        let cases: [(&[usize], &[usize], bool); 5] = [
            (&[16, 16, 16, 16], &[0, 3, 2, 1], true),
            (&[16, 16, 16, 16], &[0, 3, 1, 2], true),
            // Merged into 111 runs along the source: strips of 16 and one of 15.
            (&[5, 37, 3, 20], &[0, 3, 1, 2], true),
            // Neighbours in the destination 16 runs apart.
            (&[16, 16, 16, 16], &[0, 2, 3, 1], false),
            (&[16, 16, 16, 16], &[0, 2, 1, 3], false),
        ];
        for (i, (ext, perm, strips)) in cases.into_iter().enumerate() {
            let src = Shape::new(ext)?;
            let dst = src.permuted(perm)?;
            let loops = plan(dst.len(), &dst, src.len(), &src, perm)?;
            let order = in_source_order(&loops.as_slice()[1..]);
            let chosen = far_runs(order.as_slice()).is_some();
            assert_eq!(chosen, strips, "{ext:?} {perm:?}");
            check_one(ext, perm, 4000 + 10 * i as u64)?;
        }
        Ok(())
    }

    /// Planes whose extents are multiples of 8 go in 8 × 8 blocks where the CPU has AVX-512,
    /// whatever their tiles (one tile, staged, narrow, a single plane, streamed), except
    /// narrow cuts longer than a tile that are not slender; in AVX registers, where the
    /// destination streams or the batch goes across ([`tile::eights_pay`]). The values are
    /// the same either way.
    #[test]
    fn eight_wide_planes_go_in_blocks() -> Result<(), KernelError> {
        let lanes = tile::eight_lanes();
        // (extents, permutation, in blocks of AVX-512 registers, of AVX registers)
        let cases: [(&[usize], &[usize], bool, bool); 11] = [
            // A batch of planes beyond L2 (2.6 MiB), in strips; across in AVX registers.
            (&[24, 24, 24, 24], &[3, 2, 1, 0], true, true),
            // Slender planes, in strips: 4,096 source rows of 16; 1,096 of 16 (the last strip
            // short); 256 planes of 1,024 rows of 8. Cut, in AVX registers.
            (&[16, 16, 16, 16], &[1, 2, 3, 0], true, false),
            (&[16, 8, 137], &[1, 2, 0], true, false),
            (&[8, 32, 32, 4, 2], &[1, 2, 0, 3, 4], true, false),
            // Their mirror keeps the narrow cut.
            (&[32, 32, 32, 32], &[3, 0, 1, 2], false, false),
            // One tile, batch along the destination's rows (`batch.ds == na`).
            (&[16, 16, 16, 16], &[2, 1, 0, 3], true, true),
            // The reversal.
            (&[16, 16, 16, 16], &[3, 2, 1, 0], true, true),
            // Staged tiles of a long plane (256 × 16, batch along its rows).
            (&[16, 16, 16, 16], &[2, 3, 1, 0], true, true),
            // A narrow cut one tile long.
            (&[24, 24, 24, 24], &[3, 1, 0, 2], true, true),
            // A single plane (no outer loop).
            (&[16, 16, 16, 16], &[2, 3, 0, 1], true, false),
            // Extents not multiples of 8.
            (&[12, 12, 12, 12], &[3, 2, 1, 0], false, false),
        ];
        let expected = |wide: bool, avx: bool| match lanes {
            Some(tile::EightLanes::Avx512) => wide,
            Some(tile::EightLanes::Avx) => avx,
            None => false,
        };
        for (i, (ext, perm, wide, avx)) in cases.into_iter().enumerate() {
            let (a, b, outer) = plane_in(ext, perm)?;
            let len = ext.iter().product();
            assert_eq!(
                in_eights(a, b, &cut(a, b, None), (&outer, len)),
                expected(wide, avx),
                "{ext:?} {perm:?}"
            );
            check_one(ext, perm, 3000 + 10 * i as u64)?;
        }
        // A streamed destination too, its lines stored whole past the caches; in AVX
        // registers, where source and destination come from memory (48⁴, not 32⁴).
        for (n, avx) in [(32, false), (48, true)] {
            let (a, b, outer) = plane_in(&[n; 4], &[3, 2, 1, 0])?;
            let streamed = cut(a, b, Some(Streaming::LONG_ROWS));
            assert_eq!(
                in_eights(a, b, &streamed, (&outer, n.pow(4))),
                expected(true, avx),
                "{n}^4"
            );
        }
        Ok(())
    }

    /// Destinations large enough to stream, on a cache line as the allocator of the `sial`
    /// binary puts them, in 8 × 8 blocks and in tiles: the values of the naive loop.
    #[test]
    fn streamed_destinations_hold_the_permuted_values() -> Result<(), KernelError> {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[32, 32, 32, 32], &[3, 2, 1, 0]),
            (&[32, 32, 32, 32], &[2, 1, 3, 0]),
            (&[1024, 1024], &[1, 0]),
            (&[31, 33, 32, 32], &[3, 2, 1, 0]),
            // 24-row planes: streamed where the policy streams short rows.
            (&[40, 24, 24, 24], &[3, 2, 1, 0]),
        ];
        for (i, (ext, perm)) in cases.into_iter().enumerate() {
            let s = Shape::new(ext)?;
            let d = s.permuted(perm)?;
            let src = random_vec(s.len(), 4000 + i as u64);
            let expect = naive_permute(&src, &s, perm);
            let mut buf = vec![0.0; d.len() + 8];
            let skip = buf.as_ptr().align_offset(64).min(8);
            let dst = &mut buf[skip..skip + d.len()];
            assert!(streams(dst, plane(ext, perm)?.0) || !tile::can_stream());
            permute(dst, &d, &src, &s, perm)?;
            assert!(dst == expect.as_slice(), "{ext:?} {perm:?}");
        }
        Ok(())
    }

    /// The plane loops `a` and `b` of a permutation.
    fn plane(ext: &[usize], perm: &[usize]) -> Result<(Loop, Loop), KernelError> {
        plane_in(ext, perm).map(|(a, b, _)| (a, b))
    }

    /// [`plane`] and the loops outside it, in destination order (as `run` splits them).
    fn plane_in(ext: &[usize], perm: &[usize]) -> Result<(Loop, Loop, Vec<Loop>), KernelError> {
        let s = Shape::new(ext)?;
        let d = s.permuted(perm)?;
        let loops = plan(d.len(), &d, s.len(), &s, perm)?;
        let l = loops.as_slice();
        let q = l.iter().position(|lp| lp.ss == 1).unwrap_or(0);
        let outer = (1..l.len()).filter(|&i| i != q).map(|i| l[i]).collect();
        Ok((l[0], l[q], outer))
    }

    #[test]
    fn each_tiling_is_chosen_and_correct() -> Result<(), KernelError> {
        // Rows 4 KiB apart: all in one L1 set, staged square tiles.
        let (a, b) = plane(&[512, 40], &[1, 0])?;
        assert_eq!(
            cut(a, b, None),
            Cut {
                tiles: (40, 32),
                staged: true,
                stream: false
            }
        );
        check_one(&[512, 40], &[1, 0], 20)?;
        // Staged with short destination rows.
        let (a, b) = plane(&[512, 20], &[1, 0])?;
        assert_eq!(
            cut(a, b, None),
            Cut {
                tiles: (20, 32),
                staged: true,
                stream: false
            }
        );
        check_one(&[512, 20], &[1, 0], 22)?;
        check_one(&[16, 16, 16, 16], &[3, 1, 2, 0], 23)?;
        // Source rows 8 KiB apart: narrow tiles.
        let (a, b) = plane(&[300, 5, 17], &[2, 0, 1])?;
        assert_eq!(
            cut(a, b, None),
            Cut {
                tiles: (8, 250),
                staged: false,
                stream: false
            }
        );
        // Destination rows far apart, source rows close: the mirror.
        let (a, b) = plane(&[17, 5, 300], &[1, 2, 0])?;
        assert_eq!(
            cut(a, b, None),
            Cut {
                tiles: (250, 8),
                staged: false,
                stream: false
            }
        );
        check_one(&[17, 5, 300], &[1, 2, 0], 21)?;
        // Both close, no conflicts: square tiles.
        let (a, b) = plane(&[100, 70], &[1, 0])?;
        assert_eq!(
            cut(a, b, None),
            Cut {
                tiles: (24, 25),
                staged: false,
                stream: false
            }
        );
        // Short destination rows 32 KiB apart, source rows close, the plane one tile: square,
        // so that the planes go to the kernel together (`transpose_batch`), not the mirror.
        let (a, b) = plane(&[16, 16, 16, 16], &[1, 3, 2, 0])?;
        assert_eq!(
            cut(a, b, None),
            Cut {
                tiles: (16, 16),
                staged: false,
                stream: false
            }
        );
        check_one(&[16, 16, 16, 16], &[1, 3, 2, 0], 24)?;
        // Source rows 32 KiB apart, in one L1 set: the square tile would be staged, so the
        // plane stays narrow.
        let (a, b) = plane(&[16, 16, 16, 16], &[3, 0, 2, 1])?;
        assert_eq!(
            cut(a, b, None),
            Cut {
                tiles: (8, 16),
                staged: false,
                stream: false
            }
        );
        check_one(&[16, 16, 16, 16], &[3, 0, 2, 1], 25)?;
        Ok(())
    }

    #[test]
    fn streamed_cuts_are_square_with_whole_lines() -> Result<(), KernelError> {
        // Far source rows: square staged tiles instead of narrow ones.
        let (a, b) = plane(&[32, 32, 32, 32], &[2, 0, 3, 1])?;
        assert_eq!(cut(a, b, None).tiles, (8, 32));
        let streamed = Cut {
            tiles: (32, 32),
            staged: true,
            stream: true,
        };
        assert_eq!(cut(a, b, Some(Streaming::LONG_ROWS)), streamed);
        let (a, b) = plane(&[32, 32, 32, 32], &[3, 2, 1, 0])?;
        assert_eq!(cut(a, b, Some(Streaming::LONG_ROWS)), streamed);
        // The mirror keeps its long rows, now streamed; rows rounded up to whole lines.
        let (a, b) = plane(&[17, 8, 300], &[1, 2, 0])?;
        assert_eq!(a.n, 2400);
        assert_eq!(cut(a, b, None).tiles, (240, 8));
        assert_eq!(
            cut(a, b, Some(Streaming::LONG_ROWS)),
            Cut {
                tiles: (240, 8),
                staged: false,
                stream: true
            }
        );
        // Tiles under STREAM_ROW do not stream, unless they go in 8 × 8 blocks where the
        // policy streams short rows.
        let (a, b) = plane(&[512, 24], &[1, 0])?;
        assert!(!cut(a, b, Some(Streaming::LONG_ROWS)).stream);
        assert_eq!(
            cut(a, b, Some(Streaming::LINES)).stream,
            tile::eight_wide(a.n, b.n)
        );
        let (a, b) = plane(&[500, 24], &[1, 0])?;
        assert!(!cut(a, b, Some(Streaming::LINES)).stream);
        // Only a large destination on a line (placed as the `sial` binary's allocator places
        // blocks), with rows of whole lines, streams.
        let on_a_line = Scratch::new;
        let (a, _) = plane(&[32, 32, 32, 32], &[3, 2, 1, 0])?;
        assert_eq!(streams(on_a_line(1 << 20).get(), a), tile::can_stream());
        assert!(!streams(&on_a_line((1 << 20) + 1).get()[1..], a));
        assert!(!streams(on_a_line(Streaming::here().from - 8).get(), a));
        let (a, _) = plane(&[31, 31, 31, 31], &[3, 2, 1, 0])?;
        assert!(!streams(on_a_line(31 * 31 * 31 * 31).get(), a));
        Ok(())
    }

    /// Streamed permutations give the naive result, every cut that streams included, and
    /// the accumulate form (never streamed) alongside.
    #[test]
    fn streamed_permutations_match_naive() -> Result<(), KernelError> {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[32, 32, 32, 32], &[3, 2, 1, 0]),
            (&[32, 32, 32, 32], &[2, 0, 3, 1]),
            (&[32, 32, 32, 32], &[1, 3, 0, 2]),
            (&[17, 8, 4000], &[1, 2, 0]),
            (&[8, 300, 240], &[2, 0, 1]),
        ];
        for (i, (ext, perm)) in cases.iter().enumerate() {
            let src_shape = Shape::new(ext)?;
            let dst_shape = src_shape.permuted(perm)?;
            let src = random_vec(src_shape.len(), 50 + i as u64);
            let expect = naive_permute(&src, &src_shape, perm);
            let mut on_a_line = Scratch::new(dst_shape.len());
            let dst = on_a_line.get();
            dst.fill(f64::NAN);
            permute(dst, &dst_shape, &src, &src_shape, perm)?;
            assert!(dst == expect.as_slice(), "{ext:?} by {perm:?}");
            check_one(ext, perm, 60 + i as u64)?;
        }
        Ok(())
    }

    #[test]
    fn far_source_rows_take_narrow_tiles() -> Result<(), KernelError> {
        // Source rows 1500 and 3000 elements apart, ragged in both tile directions.
        check_one(&[300, 5, 17], &[2, 0, 1], 16)?;
        check_one(&[600, 5, 19], &[2, 1, 0], 17)?;
        check_one(&[33, 40, 3, 5], &[2, 1, 3, 0], 18)?;
        Ok(())
    }

    /// Extents for the large property test: 1, small odd sizes, powers of two (which take the
    /// staged path) and sizes just around tile edges.
    fn big_shape_and_perm() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
        let extent =
            prop::sample::select(vec![1usize, 2, 3, 5, 7, 8, 9, 16, 17, 31, 32, 33, 49, 64]);
        (1..=6usize)
            .prop_flat_map(move |rank| {
                (
                    proptest::collection::vec(extent.clone(), rank),
                    Just((0..rank).collect::<Vec<usize>>()).prop_shuffle(),
                )
            })
            .prop_filter("at most 200k elements", |(ext, _)| {
                ext.iter().product::<usize>() <= 200_000
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn permute_and_add_match_naive_on_big_shapes(
            (ext, perm) in big_shape_and_perm(),
            seed in 0u64..1000,
        ) {
            prop_assert!(check_one(&ext, &perm, seed).is_ok());
        }
    }

    fn shape_and_perm() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
        (0..=6usize).prop_flat_map(|rank| {
            (
                proptest::collection::vec(1..5usize, rank),
                Just((0..rank).collect::<Vec<usize>>()).prop_shuffle(),
            )
        })
    }

    proptest! {
        #[test]
        fn permute_matches_naive((ext, perm) in shape_and_perm(), seed in 0u64..1000) {
            prop_assert!(check_one(&ext, &perm, seed).is_ok());
        }
    }
}
