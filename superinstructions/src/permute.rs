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
//! 2. if the first dimension is still stride-1 in both, copies contiguous runs;
//! 3. otherwise tiles the two dimensions that are fastest in the source and in the destination,
//!    so each tile of source and destination stays in L1 while it is transposed, and loops over
//!    the remaining dimensions outside the tiles;
//! 4. when the row strides of a tile are such that its rows share a few L1 sets (strides near
//!    multiples of 4 KiB, i.e. power-of-two extents such as 32⁴ or 1024²), each tile is staged
//!    through a small contiguous buffer so that both the source reads and the destination writes
//!    are whole contiguous rows (see [`transpose_tiles_staged`]).

use crate::error::{KernelError, Role};
use crate::labels::{Operand, OperandMut, permutation_from_labels};
use crate::shape::{MAX_RANK, Shape, check_len, check_permutation};

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
    run(dst, src, &loops, Assign);
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
    run(dst, src, &loops, AddScaled(alpha));
    Ok(())
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
    fn store(self, d: &mut f64, s: f64);
}

#[derive(Clone, Copy)]
struct Assign;

impl Store for Assign {
    #[inline(always)]
    fn store(self, d: &mut f64, s: f64) {
        *d = s;
    }
}

#[derive(Clone, Copy)]
struct AddScaled(f64);

impl Store for AddScaled {
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

/// Executes a validated loop nest.
fn run<S: Store>(dst: &mut [f64], src: &[f64], loops: &Loops, st: S) {
    if loops.size == 0 {
        return;
    }
    let l = loops.as_slice();
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
        for_each_offset(&l[1..], |doff, soff| {
            for (d, &s) in dst[doff..doff + n].iter_mut().zip(&src[soff..soff + n]) {
                st.store(d, s);
            }
        });
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
    let mut outer = [Loop::default(); MAX_RANK];
    let mut n_outer = 0;
    for (i, lp) in l.iter().enumerate() {
        if i != 0 && i != q {
            outer[n_outer] = *lp;
            n_outer += 1;
        }
    }
    let (ta, tb) = (tile_len(a.n), tile_len(b.n));
    // Only the source side matters: the direct path writes each destination row as one
    // contiguous run, finishing its lines at once, but reads the tile's source rows element by
    // element, so one line of each of the `ta` source rows must stay in L1 for the whole tile.
    if set_conflicts(a.ss, ta) {
        let mut buf = vec![0.0; ta * tb];
        for_each_offset(&outer[..n_outer], |doff, soff| {
            let plane = Plane { a, b, doff, soff };
            transpose_tiles_staged(dst, src, plane, &mut buf, st);
        });
    } else {
        for_each_offset(&outer[..n_outer], |doff, soff| {
            transpose_tiles(dst, src, Plane { a, b, doff, soff }, st);
        });
    }
}

/// Tile edge in elements: a 32×32 tile of f64 is 8 KiB per array, so the source tile, the
/// destination tile and the staging buffer fit in L1 together.
const TILE: usize = 32;

/// Extents up to this are not split: a 48×48 tile (18 KiB) still fits in L1, and small blocks
/// (segments are typically 10–60) then need no tile bookkeeping at all.
const WHOLE: usize = 48;

/// Splits `n` into tiles of at most `TILE`, balanced so no tile is a tiny remainder.
fn tile_len(n: usize) -> usize {
    if n <= WHOLE {
        return n.max(1);
    }
    let tiles = n.div_ceil(TILE);
    n.div_ceil(tiles)
}

/// Whether `rows` rows `stride` elements apart crowd into few L1 sets: the L1 (48 KiB,
/// 12-way, 64-byte lines) has 64 sets, so addresses 4 KiB apart share a set. Counts how many
/// rows start in each set; more than 8 of the 12 ways (the direct transpose keeps a line of
/// every source row of the tile live, and the ways are shared with the destination rows) means
/// it would thrash. Measured: 16 rows 2 KiB apart (8 per set) are still faster direct.
fn set_conflicts(stride: usize, rows: usize) -> bool {
    const SETS: usize = 64;
    let mut count = [0u8; SETS];
    for r in 0..rows.min(WHOLE) {
        let set = (r * stride * 8 / 64) % SETS;
        count[set] += 1;
        if count[set] > 8 {
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

/// 2-D transpose of a [`Plane`]; each tile is transposed directly from source to
/// destination. Used when the row strides spread the tile's rows over the L1 sets.
fn transpose_tiles<S: Store>(dst: &mut [f64], src: &[f64], plane: Plane, st: S) {
    let Plane { a, b, doff, soff } = plane;
    let ta = tile_len(a.n);
    let tb = tile_len(b.n);
    for jb in (0..b.n).step_by(tb) {
        let eb = (jb + tb).min(b.n);
        for ja in (0..a.n).step_by(ta) {
            let ea = (ja + ta).min(a.n);
            for ib in jb..eb {
                let d0 = doff + ib * b.ds;
                let s0 = soff + ib + ja * a.ss;
                strided_store(&mut dst[d0 + ja..d0 + ea], &src[s0..], a.ss, st);
            }
        }
    }
}

/// [`transpose_tiles`] through a staging buffer, for row strides that map the tile's rows into
/// few cache sets (power-of-two extents). `buf` is scratch space of at least
/// `tile_len(a.n) * tile_len(b.n)` elements.
///
/// Each tile goes through `buf`: first the tile's source rows are copied into it (contiguous
/// reads, every source cache line used whole at once), then the destination rows are written
/// from it (contiguous writes, every destination line produced whole at once); only the
/// strided gather happens inside `buf`, which is contiguous and so free of cache-set
/// conflicts. Transposing straight from source to destination instead keeps one partial line
/// of each of the up to 2×48 rows live for the whole tile, and when the row strides are
/// multiples of 4 KiB (power-of-two extents: 32⁴ rows are 256 KiB apart) all those lines fall
/// into the same L1 (and L2) set, are evicted and re-fetched for every element: 32⁴ ran 2.5x
/// slower than 31⁴ (docs/benchmarks.md, "Permute kernel, second version"). Staging costs an
/// extra in-L1 copy, so it is only used when [`set_conflicts`] says the direct path thrashes.
fn transpose_tiles_staged<S: Store>(
    dst: &mut [f64],
    src: &[f64],
    plane: Plane,
    buf: &mut [f64],
    st: S,
) {
    let Plane { a, b, doff, soff } = plane;
    let ta = tile_len(a.n);
    let tb = tile_len(b.n);
    for jb in (0..b.n).step_by(tb) {
        let nb = tb.min(b.n - jb);
        for ja in (0..a.n).step_by(ta) {
            let na = ta.min(a.n - ja);
            let tile = &mut buf[..na * nb];
            // Gather: tile[i * nb + k] = src(a = ja + i, b = jb + k).
            let s0 = soff + jb + ja * a.ss;
            for (i, row) in tile.chunks_exact_mut(nb).enumerate() {
                row.copy_from_slice(&src[s0 + i * a.ss..][..nb]);
            }
            // Scatter: destination row k (b = jb + k) is column k of the tile.
            let d0 = doff + ja + jb * b.ds;
            for k in 0..nb {
                let out = &mut dst[d0 + k * b.ds..][..na];
                strided_store(out, &tile[k..], nb, st);
            }
        }
    }
}

/// `out[i] = s[i * stride]` (through `st`), for `s.len() > (out.len() - 1) * stride`.
#[inline(always)]
fn strided_store<S: Store>(out: &mut [f64], s: &[f64], stride: usize, st: S) {
    // Taking the first element of each `chunks_exact(stride)` compiles to a loop without
    // per-element bounds checks (about half the instructions of `step_by`); the last element is
    // done separately because its chunk may run past the data.
    let Some((last, head)) = out.split_last_mut() else {
        return;
    };
    let s_last = head.len() * stride;
    for (d, chunk) in head.iter_mut().zip(s[..s_last].chunks_exact(stride)) {
        st.store(d, chunk[0]);
    }
    st.store(last, s[s_last]);
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
    use crate::testutil::{all_permutations, naive_permute, random_vec};
    use proptest::prelude::*;

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

    #[test]
    fn large_transposes() -> Result<(), KernelError> {
        check_one(&[130, 97], &[1, 0], 7)?;
        check_one(&[20, 21, 22, 23], &[3, 2, 1, 0], 8)?;
        check_one(&[20, 21, 22, 23], &[1, 0, 3, 2], 9)?;
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
    fn staging_is_chosen_for_power_of_two_strides() -> Result<(), KernelError> {
        // 32^4 [3,2,1,0]: rows 256 KiB apart all share one set; 31^4: spread out.
        assert!(set_conflicts(32 * 32 * 32, 32));
        assert!(!set_conflicts(16, 32));
        assert!(!set_conflicts(256, 16));
        assert!(set_conflicts(1024, 32));
        assert!(!set_conflicts(31 * 31 * 31, 31));
        assert!(!set_conflicts(32, 32));
        // Both paths, with ragged tiles (extents above WHOLE are split into tiles).
        check_one(&[32, 32, 8, 16], &[3, 2, 1, 0], 11)?;
        check_one(&[64, 3, 64], &[2, 1, 0], 12)?;
        check_one(&[100, 512], &[1, 0], 13)?;
        check_one(&[512, 100], &[1, 0], 14)?;
        check_one(&[8, 1, 16, 2, 32], &[4, 2, 0, 3, 1], 15)?;
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
