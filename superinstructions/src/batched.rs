//! The CPU's second way to run a contraction: a loop of GEMMs on strided matrix views.
//!
//! [`crate::ContractionPlan`]'s single GEMM needs every block as `[group, group]`, so a block
//! whose free labels are split by the contracted ones (`d[a,b,c,k] = l[a,e,c,k] * r[e,b]`,
//! typical of CCSD(T)) is copied, and so is a dst in such an order. Many of those copies vanish
//! if some free labels are *batch* labels, looped over outside the GEMM: for each `(c, k)`,
//! `d[:, :, c, k] = l[:, :, c, k] · r` is a GEMM on views of the blocks as they are stored. faer
//! takes any column stride, so a view only needs one of its two dimensions contiguous.
//!
//! Batching trades copies for more, smaller GEMMs. [`plan`] tries every set of batch labels,
//! copies whatever still does not fit (as the single-GEMM plan does), and keeps the cheapest
//! by a small cost model measured on the 2-core development machine (docs/benchmarks.md,
//! "Contractions with permuted operands"). The result is only used on the CPU; the plan's
//! public steps (and so the GPU) stay the single GEMM.

use crate::error::KernelError;
use crate::gemm::{Dims, View, gemm_views};
use crate::labels::{Label, Perm, permutation_from_labels};
use crate::permute::permute_operand;
use crate::shape::Shape;

/// A label with its extent.
pub(crate) type Dim = (Label, usize);

/// Model cost of copying one element (a permute in cache, read and write), nanoseconds.
const COPY_NS: f64 = 0.2;
/// Model cost of one GEMM call besides its flops, nanoseconds.
const CALL_NS: f64 = 50.0;
/// Model GEMM rate on large matrices, flops per nanosecond.
const PEAK_FLOPS_PER_NS: f64 = 60.0;

/// Model time of `count` GEMMs of `dims`: a fixed cost per call, and a rate that drops for
/// small dimensions, most for few rows (faer's micro-kernel is tall: 16 or more rows).
pub(crate) fn gemm_cost(dims: Dims, count: usize) -> f64 {
    let fill = |x: usize, half: f64| x as f64 / (x as f64 + half);
    let efficiency = fill(dims.m, 8.0) * fill(dims.n, 2.0) * fill(dims.k, 2.0);
    let flops = 2.0 * dims.m as f64 * dims.n as f64 * dims.k as f64;
    count as f64 * (CALL_NS + flops / (PEAK_FLOPS_PER_NS * efficiency.max(1e-3)))
}

/// Model time of copying `elements` elements.
pub(crate) fn copy_cost(elements: usize) -> f64 {
    COPY_NS * elements as f64
}

/// A permute from one layout to another: source shape, destination shape, permutation.
#[derive(Clone, Debug)]
pub(crate) struct Copy {
    from: Shape,
    to: Shape,
    perm: Perm,
}

impl Copy {
    /// The permute of a block laid out as `from` into the layout `to` (the same labels).
    pub(crate) fn new(from: &[Dim], to: &[Dim]) -> Result<Copy, KernelError> {
        let labels = |v: &[Dim]| v.iter().map(|d| d.0).collect::<Vec<_>>();
        let shape = |v: &[Dim]| Shape::new(&v.iter().map(|d| d.1).collect::<Vec<_>>());
        Ok(Copy {
            from: shape(from)?,
            to: shape(to)?,
            perm: permutation_from_labels(&labels(to), &labels(from))?,
        })
    }

    /// `data` permuted into `buf`, for an operand read right away (never streamed).
    pub(crate) fn operand<'a>(
        &self,
        data: &[f64],
        buf: &'a mut Vec<f64>,
    ) -> Result<&'a [f64], KernelError> {
        let out = sized(buf, self.to.len());
        permute_operand(out, &self.to, data, &self.from, &self.perm)?;
        Ok(out)
    }
}

/// A contraction as GEMMs on strided views, looped over batch labels.
#[derive(Clone, Debug)]
pub(crate) struct Batched {
    /// Each GEMM's `m, n, k`.
    dims: Dims,
    /// Views of dst (`m×n`), left (`m×k`) and right (`k×n`) in the layouts the GEMMs read.
    views: [View; 3],
    /// Left and right are first copied into another layout when `Some`. For dst, the GEMMs
    /// write a temporary of shape `from` that is then permuted into dst.
    copies: [Option<Copy>; 3],
    /// Extent of each batch label and its stride in dst, left and right (0 where absent).
    batch: Vec<(usize, [usize; 3])>,
    /// Element counts of the three layouts (the temporaries' sizes).
    lens: [usize; 3],
}

/// The three blocks, each as its labels in storage order without unit extents.
pub(crate) struct Blocks<'a> {
    pub dst: &'a [Dim],
    pub left: &'a [Dim],
    pub right: &'a [Dim],
}

/// The cheapest batched form and its model cost, if any set of batch labels is cheaper than
/// `single_cost` (the model cost of the single-GEMM plan).
pub(crate) fn plan(
    b: &Blocks<'_>,
    single_cost: f64,
) -> Result<Option<(f64, Batched)>, KernelError> {
    if [b.dst, b.left, b.right]
        .iter()
        .any(|t| t.iter().any(|d| d.1 == 0))
    {
        return Ok(None);
    }
    let mut best: Option<(f64, Batched)> = None;
    // dst has at most MAX_RANK labels, so the masks fit in a u32.
    for mask in 1..(1u32 << b.dst.len()) {
        if let Some((cost, batched)) = candidate(b, mask)? {
            let bound = best.as_ref().map_or(single_cost, |x| x.0);
            if cost < bound {
                best = Some((cost, batched));
            }
        }
    }
    Ok(best)
}

/// Which tensor and which of its two groups a group of labels is.
#[derive(Clone, Copy)]
enum Group {
    /// Free in left: rows of dst and of left.
    M,
    /// Free in right: columns of dst and of right.
    N,
    /// Contracted: columns of left, rows of right.
    K,
}

/// The batched form with the dst labels selected by `mask` (bit i: `b.dst[i]`) as batch
/// labels, and its model cost; `None` if the mask is pointless (no GEMM left to batch).
pub(crate) fn candidate(b: &Blocks<'_>, mask: u32) -> Result<Option<(f64, Batched)>, KernelError> {
    let batch: Vec<Dim> = (0..b.dst.len())
        .filter(|i| mask & (1 << i) != 0)
        .map(|i| b.dst[i])
        .collect();
    let in_batch = |d: &Dim| batch.iter().any(|x| x.0 == d.0);
    let shared = |t: &[Dim], o: &[Dim]| -> Vec<Dim> {
        t.iter()
            .copied()
            .filter(|d| !in_batch(d) && o.iter().any(|x| x.0 == d.0))
            .collect()
    };
    // Each group in the order one of its blocks stores it (changed below where needed).
    let mut m = shared(b.left, b.dst);
    let mut n = shared(b.right, b.dst);
    let mut k = shared(b.left, b.right);
    if m.is_empty() && n.is_empty() {
        return Ok(None);
    }
    // Which blocks can be used in place, and in what group order they store the groups.
    let fits = [
        fit(b.dst, &m, &n),
        fit(b.left, &m, &k),
        fit(b.right, &k, &n),
    ];
    let lens = [b.dst, b.left, b.right].map(|t| t.iter().map(|d| d.1).product::<usize>());
    let mut copy = [0, 1, 2].map(|t| fits[t].is_none());
    // Where both blocks of a group are in place they must agree on its order; else copy the
    // cheaper one (dst costs twice: written, then read back by the permute).
    for (g, x, y) in [(Group::M, 0, 1), (Group::N, 0, 2), (Group::K, 1, 2)] {
        if let (false, false, Some(fx), Some(fy)) = (copy[x], copy[y], &fits[x], &fits[y])
            && order_of(fx, g, x) != order_of(fy, g, y)
        {
            let weight = |t: usize| lens[t] * if t == 0 { 2 } else { 1 };
            copy[if weight(x) <= weight(y) { x } else { y }] = true;
        }
    }
    for (g, x, y) in [(Group::M, 0, 1), (Group::N, 0, 2), (Group::K, 1, 2)] {
        let source = [x, y].into_iter().find(|&t| !copy[t]);
        if let Some(fx) = source.and_then(|t| fits[t].as_ref().map(|f| order_of(f, g, t))) {
            match g {
                Group::M => m = fx.to_vec(),
                Group::N => n = fx.to_vec(),
                Group::K => k = fx.to_vec(),
            }
        }
    }
    let layouts = [
        layout(b.dst, copy[0], &m, &n, &batch),
        layout(b.left, copy[1], &m, &k, &batch),
        layout(b.right, copy[2], &k, &n, &batch),
    ];
    let prod = |v: &[Dim]| v.iter().map(|d| d.1).product::<usize>();
    let dims = Dims {
        m: prod(&m),
        n: prod(&n),
        k: prod(&k),
    };
    let count = prod(&batch);
    let views = [
        view(&layouts[0], &m, &n),
        view(&layouts[1], &m, &k),
        view(&layouts[2], &k, &n),
    ];
    let batch_strides = batch
        .iter()
        .map(|d| {
            (
                d.1,
                [0, 1, 2].map(|t| stride_of(&layouts[t], d.0).unwrap_or(0)),
            )
        })
        .collect();
    let copies = [
        copy_of(copy[0], &layouts[0], b.dst)?,
        copy_of(copy[1], b.left, &layouts[1])?,
        copy_of(copy[2], b.right, &layouts[2])?,
    ];
    let copied = (0..3)
        .filter(|&t| copy[t])
        .map(|t| lens[t] * if t == 0 { 2 } else { 1 })
        .sum();
    let cost = copy_cost(copied) + gemm_cost(dims, count);
    Ok(Some((
        cost,
        Batched {
            dims,
            views,
            copies,
            batch: batch_strides,
            lens,
        },
    )))
}

/// How a block stores its two groups, when it can be used in place: each group's labels in
/// storage order.
struct Fit {
    first: Vec<Dim>,
    second: Vec<Dim>,
}

/// The group orders a block `t` stores its groups `g1` (matrix rows) and `g2` (columns) in,
/// if each group is one contiguous run of `t` and one of them starts the block (so that the
/// view has a unit-stride dimension) or is empty.
fn fit(t: &[Dim], g1: &[Dim], g2: &[Dim]) -> Option<Fit> {
    let run = |g: &[Dim]| -> Option<(usize, Vec<Dim>)> {
        if g.is_empty() {
            return Some((usize::MAX, Vec::new()));
        }
        let pos: Vec<usize> = g
            .iter()
            .filter_map(|d| t.iter().position(|x| x.0 == d.0))
            .collect();
        let start = pos.iter().copied().min()?;
        let end = start + g.len();
        (pos.len() == g.len() && pos.iter().all(|&p| p < end))
            .then(|| (start, t[start..end].to_vec()))
    };
    let (s1, first) = run(g1)?;
    let (s2, second) = run(g2)?;
    let unit = first.is_empty() || second.is_empty() || s1 == 0 || s2 == 0;
    unit.then_some(Fit { first, second })
}

/// The order in which fitting block `t` (0 dst, 1 left, 2 right) stores group `g`.
fn order_of(f: &Fit, g: Group, t: usize) -> &[Dim] {
    // dst is [M, N], left [M, K], right [K, N]: the group is the block's first one unless it
    // is N (in dst or right) or K in left.
    match (g, t) {
        (Group::M, _) | (Group::K, 2) => &f.first,
        _ => &f.second,
    }
}

/// The block's layout the GEMMs read: as stored, or (copied) its groups then its batch labels.
fn layout(t: &[Dim], copied: bool, g1: &[Dim], g2: &[Dim], batch: &[Dim]) -> Vec<Dim> {
    if !copied {
        return t.to_vec();
    }
    let own = |d: &&Dim| t.iter().any(|x| x.0 == d.0);
    g1.iter()
        .chain(g2)
        .chain(batch.iter().filter(own))
        .copied()
        .collect()
}

/// Stride of label `l` in column-major layout `t`.
fn stride_of(t: &[Dim], l: Label) -> Option<usize> {
    let p = t.iter().position(|d| d.0 == l)?;
    Some(t[..p].iter().map(|d| d.1).product())
}

/// The view of groups `g1` (rows) and `g2` (columns) in `t`, where [`fit`] holds.
fn view(t: &[Dim], g1: &[Dim], g2: &[Dim]) -> View {
    let s = |g: &[Dim]| g.first().and_then(|d| stride_of(t, d.0));
    match (s(g1), s(g2)) {
        (Some(1), Some(ld)) | (None, Some(ld)) => View {
            rows_unit: true,
            ld,
        },
        (Some(ld), _) => View {
            rows_unit: false,
            ld,
        },
        // One row and one column: any stride will do.
        (None, None) => View {
            rows_unit: true,
            ld: 1,
        },
    }
}

/// The permute from layout `from` to layout `to`, when `copied`.
fn copy_of(copied: bool, from: &[Dim], to: &[Dim]) -> Result<Option<Copy>, KernelError> {
    copied.then(|| Copy::new(from, to)).transpose()
}

impl Batched {
    /// `dst = beta * dst + Σ left * right`; buffer lengths were checked by the caller, and the
    /// three scratch vectors hold the temporaries.
    pub(crate) fn execute(
        &self,
        dst: &mut [f64],
        (left, right): (&[f64], &[f64]),
        beta: f64,
        scratch: &mut [Vec<f64>; 3],
    ) -> Result<(), KernelError> {
        let [s0, s1, s2] = scratch;
        let a = self.operand(1, left, s1)?;
        let b = self.operand(2, right, s2)?;
        match &self.copies[0] {
            None => {
                if beta != 0.0 && beta != 1.0 {
                    crate::elementwise::scale(dst, beta);
                }
                self.gemms(dst, a, b, beta != 0.0);
            }
            Some(c) => {
                let t = sized(s0, self.lens[0]);
                self.gemms(t, a, b, false);
                crate::contract::permute_into(dst, &c.to, beta, t, &c.from, &c.perm)?;
            }
        }
        Ok(())
    }

    /// Number of GEMMs (the product of the batch extents).
    pub(crate) fn calls(&self) -> usize {
        self.batch.iter().map(|b| b.0).product()
    }

    /// Which blocks are copied: dst, left, right.
    pub(crate) fn copies(&self) -> [bool; 3] {
        self.copies.each_ref().map(Option::is_some)
    }

    /// Operand `t` (1 left, 2 right) in the layout its view describes.
    fn operand<'a>(
        &self,
        t: usize,
        data: &'a [f64],
        buf: &'a mut Vec<f64>,
    ) -> Result<&'a [f64], KernelError> {
        match &self.copies[t] {
            None => Ok(data),
            Some(c) => c.operand(data, buf),
        }
    }

    /// One GEMM per batch index, at the batch offsets of the three layouts.
    fn gemms(&self, d: &mut [f64], a: &[f64], b: &[f64], accumulate: bool) {
        let mut idx = vec![0usize; self.batch.len()];
        loop {
            let off = |t: usize| -> usize {
                self.batch
                    .iter()
                    .zip(&idx)
                    .map(|((_, s), i)| s[t] * i)
                    .sum()
            };
            let (od, ol, or) = (off(0), off(1), off(2));
            gemm_views(
                (&mut d[od..], self.views[0]),
                self.dims,
                (&a[ol..], self.views[1]),
                (&b[or..], self.views[2]),
                accumulate,
            );
            if !next(&mut idx, &self.batch) {
                return;
            }
        }
    }
}

/// Advances the batch multi-index (first label fastest); false after the last one.
fn next(idx: &mut [usize], batch: &[(usize, [usize; 3])]) -> bool {
    for (i, (e, _)) in idx.iter_mut().zip(batch) {
        *i += 1;
        if *i < *e {
            return true;
        }
        *i = 0;
    }
    false
}

/// The first `n` elements of `buf`, growing it if needed (contents are overwritten by the
/// caller, so they are not cleared).
pub(crate) fn sized(buf: &mut Vec<f64>, n: usize) -> &mut [f64] {
    if buf.len() < n {
        buf.resize(n, 0.0);
    }
    &mut buf[..n]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{naive_contract, random_vec};
    use proptest::prelude::*;

    /// Runs every batched candidate of `d = l * r` (all sets of batch labels) for beta 0, 1
    /// and 0.5 against the naive loop; extents are `ext[label]`.
    fn check_all(d: &[Label], l: &[Label], r: &[Label], ext: &[usize], seed: u64) {
        let dims = |v: &[Label]| -> Vec<Dim> { v.iter().map(|&x| (x, ext[x as usize])).collect() };
        let shape =
            |v: &[Label]| Shape::new(&v.iter().map(|&x| ext[x as usize]).collect::<Vec<_>>());
        let (ds, ls, rs) = (shape(d).unwrap(), shape(l).unwrap(), shape(r).unwrap());
        let (lv, rv) = (random_vec(ls.len(), seed), random_vec(rs.len(), seed + 1));
        let want = naive_contract((d, &ds), (&lv, l, &ls), (&rv, r, &rs));
        let red = |v: Vec<Dim>| -> Vec<Dim> { v.into_iter().filter(|x| x.1 != 1).collect() };
        let (dd, ld, rd) = (red(dims(d)), red(dims(l)), red(dims(r)));
        let blocks = Blocks {
            dst: &dd,
            left: &ld,
            right: &rd,
        };
        for mask in 1..(1u32 << dd.len()) {
            let Some((_, b)) = candidate(&blocks, mask).unwrap() else {
                continue;
            };
            for beta in [0.0, 1.0, 0.5] {
                let d0 = random_vec(ds.len(), seed + 2);
                let mut out = if beta == 0.0 {
                    vec![f64::NAN; ds.len()]
                } else {
                    d0.clone()
                };
                let mut scratch = Default::default();
                b.execute(&mut out, (&lv, &rv), beta, &mut scratch).unwrap();
                for i in 0..out.len() {
                    let w = if beta == 0.0 {
                        want[i]
                    } else {
                        beta * d0[i] + want[i]
                    };
                    assert!(
                        (out[i] - w).abs() <= 1e-12 * (1.0 + w.abs()),
                        "d{d:?} = l{l:?} * r{r:?}, mask {mask:b}, beta {beta}, {b:?}: \
                         element {i} is {} expected {w}",
                        out[i]
                    );
                }
            }
        }
    }

    #[test]
    fn ccsd_t_patterns_in_every_batching() {
        // Labels 0 a, 1 b, 2 c, 3 k, 4 e; extents all different to catch mix-ups.
        let ext = [3, 4, 5, 2, 6];
        let cases: [(&[Label], &[Label], &[Label]); 6] = [
            (&[0, 1, 2, 3], &[0, 4, 2, 3], &[4, 1]),
            (&[0, 1, 2, 3], &[0, 1, 4, 3], &[4, 2]),
            (&[0, 1, 2, 3], &[0, 4, 2], &[4, 1, 3]),
            (&[0, 1, 2, 3], &[4, 1, 2], &[4, 0, 3]),
            (&[0, 1, 2, 3], &[4, 1, 2, 3], &[4, 0]),
            (&[3, 1, 0, 2], &[2, 4, 0], &[1, 4, 3]),
        ];
        for (seed, (d, l, r)) in cases.into_iter().enumerate() {
            check_all(d, l, r, &ext, seed as u64 * 3);
        }
    }

    #[test]
    fn unit_extents_and_empty_groups() {
        // Label 5 has extent 1; outer products (no contracted label) and a dst of one label.
        let ext = [3, 4, 5, 2, 6, 1];
        check_all(&[0, 5, 1, 2], &[0, 2], &[5, 1], &ext, 1);
        check_all(&[0, 1, 2], &[0, 4, 2], &[4, 1], &ext, 2);
        check_all(&[2], &[0, 4, 2], &[4, 0], &ext, 3);
    }

    #[test]
    fn the_plan_batches_where_that_avoids_copies() -> Result<(), KernelError> {
        // d[a,b,c,k] = l[a,b,e,k] * r[e,c] (rccsdpt_aaa:883 at water's extents): one GEMM per
        // k, on the blocks as stored, where a single GEMM would copy left and dst. (The whole
        // contraction plan takes broadcast products there; this is the batched form alone.)
        let dims = |labels: &[Label], ext: &[usize]| -> Vec<Dim> {
            labels.iter().copied().zip(ext.iter().copied()).collect()
        };
        let ext = [19, 19, 19, 5];
        let (dst, left, right) = (
            dims(&[0, 1, 2, 3], &ext),
            dims(&[0, 1, 4, 3], &ext),
            dims(&[4, 2], &ext),
        );
        let blocks = Blocks {
            dst: &dst,
            left: &left,
            right: &right,
        };
        let (_, batched) =
            plan(&blocks, f64::INFINITY)?.ok_or(KernelError::PlanMismatch { form: "batched" })?;
        assert_eq!(batched.calls(), 5);
        assert_eq!(batched.copies(), [false; 3]);
        Ok(())
    }

    /// A random contraction with extents 1..4 (see `testutil::contraction_pattern`).
    fn pattern() -> impl Strategy<Value = crate::testutil::ContractionPattern> {
        crate::testutil::contraction_pattern(4)
    }

    proptest! {
        #[test]
        fn every_batching_matches_naive((d, l, r, ext) in pattern(), seed in 0u64..1000) {
            check_all(&d, &l, &r, &ext, seed);
        }
    }
}
