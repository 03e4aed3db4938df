//! Contraction by index labels: `d[D] = l[L] * r[R]` (SIAL-SPEC §5.5.3), the tensor product
//! `d = l ^ r`, and the full contraction to a scalar.
//!
//! # Method
//! Labels fall in three groups: `FL` (left and dst), `FR` (right and dst) and `C` (left and
//! right, summed). With the labels of each group in one agreed order, a column-major block
//! labelled `[FL, C]` *is* an `m×k` matrix and one labelled `[C, FL]` is its transpose — free for
//! the GEMM. So the contraction is: permute each operand only if its labels are not already
//! `[F, C]` or `[C, F]`, one GEMM, then permute the result into dst only if dst is neither
//! `[FL, FR]` nor `[FR, FL]` (the latter is computed directly as `Dᵀ = Rᵀ·Lᵀ`).
//!
//! The group orders are free choices (C in left's or right's order, FL in left's or dst's, FR in
//! right's or dst's); [`ContractionPlan::new`] tries all of them and keeps the one that copies
//! the fewest elements. Extent-1 dimensions do not affect the memory layout, so they are
//! ignored when deciding whether labels "line up" (a scalar-valued simple index never forces a
//! permute).
//!
//! Where that single GEMM needs copies, the CPU may instead loop GEMMs over some free labels
//! on strided views of the blocks as stored (`crate::batched`), when its cost model says the
//! copies saved outweigh the smaller GEMMs, or run a GEMM of its own that packs its panels
//! straight from the blocks as stored (`crate::packed`), where that was measured to win
//! (`Packed::chosen`), or, for long sums into small results, compute
//! each element as inner products along a summed label of unit stride (`crate::dot`), or,
//! for short sums along dst's first label, as vectors of it times broadcast elements
//! (`crate::broadcast`). Long sums into small results whose operands, too large for L2, share
//! their outermost label go slice by slice along it, each slice planned as above
//! (`crate::sliced`).

use crate::batched::{self, Batched, Blocks, Dim, copy_cost, gemm_cost, sized};
use crate::broadcast::Broadcast;
use crate::dot::Dot;
use crate::elementwise::{fill, scale};
use crate::error::{KernelError, Role};
use crate::gemm::{self, Dims, Parallelism, Stored};
use crate::labels::{Label, Operand, OperandMut, Perm, check_labels, permutation_from_labels};
use crate::packed::Packed;
use crate::permute::{permute, permute_add, permute_operand};
use crate::shape::{Shape, check_len};
use crate::sliced::Sliced;
use std::cell::Cell;

/// Temporaries up to this many elements (4 MiB) are kept per thread between contractions.
const KEEP_SCRATCH: usize = 1 << 19;

thread_local! {
    /// Scratch for the temporaries of dst, left and right. SIAL runs the same contraction on
    /// equally shaped blocks many times; allocating (and zeroing fresh pages of) the
    /// temporaries on every call cost as much as the permutes themselves on small blocks.
    static SCRATCH: Cell<[Vec<f64>; 3]> = const { Cell::new([Vec::new(), Vec::new(), Vec::new()]) };
}

/// Runs `f` with this thread's scratch vectors (empty ones if a caller up the stack holds them).
fn with_scratch<R>(f: impl FnOnce(&mut [Vec<f64>; 3]) -> R) -> R {
    let mut bufs = SCRATCH.take();
    let r = f(&mut bufs);
    for b in &mut bufs {
        if b.capacity() > KEEP_SCRATCH {
            *b = Vec::new();
        }
    }
    SCRATCH.set(bufs);
    r
}

/// `dst = beta * dst + Σ left * right`, elements matched by label.
///
/// `beta == 0` overwrites `dst` without reading it (SIAL `d = l * r`); `beta == 1` accumulates
/// (`d += l * r`). With no contracted label this is the outer product; with `dst` of rank 0 and
/// every label shared it is the full contraction. Fails with a [`KernelError`] if the label
/// pattern is not a SIAL contraction (see [`ContractionPlan::new`]) or a buffer has the wrong
/// length.
pub fn contract(
    dst: OperandMut<'_>,
    left: Operand<'_>,
    right: Operand<'_>,
    beta: f64,
) -> Result<(), KernelError> {
    ContractionPlan::new(
        (dst.labels, &dst.shape),
        (left.labels, &left.shape),
        (right.labels, &right.shape),
    )?
    .execute(dst.data, left.data, right.data, beta)
}

/// The tensor product `d = l ^ r` (`beta` as in [`contract`]): like [`contract`] but the
/// operands must not share a label.
pub fn tensor(
    dst: OperandMut<'_>,
    left: Operand<'_>,
    right: Operand<'_>,
    beta: f64,
) -> Result<(), KernelError> {
    if let Some(&label) = left.labels.iter().find(|l| right.labels.contains(l)) {
        return Err(KernelError::SharedLabelInTensor { label });
    }
    contract(dst, left, right, beta)
}

/// Full contraction to a scalar: `Σ left * right` over all labels (`s = a[i,j] * b[j,i]`).
///
/// Both operands must carry the same set of labels (in any order).
pub fn dot(left: Operand<'_>, right: Operand<'_>) -> Result<f64, KernelError> {
    check_full_contraction(left.labels, right.labels)?;
    if let Some(s) = dot_in_order(&left, &right)? {
        return Ok(s);
    }
    let mut out = [0.0];
    contract(
        OperandMut::new(&mut out, Shape::scalar(), &[]),
        left,
        right,
        0.0,
    )?;
    Ok(out[0])
}

/// [`dot`] of two blocks that hold the same labels in the same order on the same shape, as a
/// plan sums them (element by element in memory order, `dot_slices`) but without one: for
/// blocks of a few elements, finding the plan costs more than the sum. `None` for blocks of
/// other layouts, which need a plan.
pub fn dot_in_order(left: &Operand<'_>, right: &Operand<'_>) -> Result<Option<f64>, KernelError> {
    if left.labels != right.labels || left.shape != right.shape {
        return Ok(None);
    }
    check_labels(Role::Left, &left.shape, left.labels)?;
    check_len(Role::Left, left.shape.len(), left.data.len())?;
    check_len(Role::Right, right.shape.len(), right.data.len())?;
    Ok(Some(dot_slices(left.data, right.data)))
}

/// That operands labelled `left` and `right` contract fully to a scalar: the same set of
/// labels (in any order). [`dot`] checks it, as must a caller that runs a kept plan instead.
pub fn check_full_contraction(left: &[Label], right: &[Label]) -> Result<(), KernelError> {
    let same_set = left.len() == right.len() && left.iter().all(|l| right.contains(l));
    if same_set {
        Ok(())
    } else {
        Err(KernelError::NotAFullContraction)
    }
}

/// Which operands a [`ContractionPlan`] copies into another order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Permutes {
    /// The left operand is copied into `[FL, C]` (or `[C, FL]`) order before the GEMM.
    pub left: bool,
    /// The right operand is copied into `[C, FR]` order before the GEMM.
    pub right: bool,
    /// The GEMM writes a temporary that is then permuted (or permute-added) into dst.
    pub dst: bool,
}

/// How an operand reaches the GEMM.
#[derive(Clone, Debug)]
enum Prep {
    /// Used in place; `transposed` if stored `[C, F]` (left) or `[F, C]` (right).
    InPlace { transposed: bool },
    /// Copied into `[FL, C]` (left) or `[C, FR]` (right) first, or into `[C, FL]` or
    /// `[FR, C]` if `transposed`.
    Permute {
        from: Shape,
        to: Shape,
        perm: Perm,
        transposed: bool,
    },
}

/// A GEMM in place whose result has fewer rows than this (faer's tallest kernel), all of them
/// dst's first label, is replaced by broadcast products where those apply.
const NARROW_ROWS: usize = 48;

/// Batched GEMMs from this many calls are replaced by broadcast products where those apply
/// (docs/benchmarks.md, "Contractions as broadcast products").
const MANY_CALLS: usize = 20;

/// A GEMM in place that sums at most this many products into each element is replaced by
/// broadcast products where those apply.
const SHORT_SUM: usize = 32;

/// Multiply-adds from which a single GEMM into dst in place keeps its plan against broadcast
/// products that only keep dst in L2: water/cc-pVTZ's 135³ does (1.36× on a Zen 5), and
/// water/cc-pVDZ's 95³ (even on the Zen 5, 0.97–1.05×; 1.15× in the caches on an Intel Xeon);
/// the test job's 45³ ran slower (0.76–0.83×).
const LARGE_SINGLE_GEMM: usize = 1 << 19;

/// How the GEMM result reaches dst.
#[derive(Clone, Debug)]
enum DstPrep {
    /// GEMM writes dst directly; `swapped` if dst is `[FR, FL]` (computed as `Rᵀ·Lᵀ`).
    InPlace { swapped: bool },
    /// GEMM writes a `[FL, FR]` temporary that is then permuted into dst.
    Permute { tmp: Shape, to: Shape, perm: Perm },
}

/// A validated contraction for given labels and shapes, reusable across calls (SIAL executes
/// the same instruction many times on equally shaped blocks).
#[derive(Clone, Debug)]
pub struct ContractionPlan {
    dims: Dims,
    lens: [usize; 3],
    left: Prep,
    right: Prep,
    dst: DstPrep,
    par: Parallelism,
    /// How the CPU runs it when sequential (a threaded GEMM always takes the single form).
    cpu: CpuForm,
}

/// The CPU's ways to run a contraction (see the module documentation).
#[derive(Clone, Debug)]
enum CpuForm {
    /// The plan's steps: permutes as needed, one faer GEMM. Where that GEMM is split into
    /// chunks of rows ([`gemm::splits`]) and would read its right operand (left's, where dst
    /// is swapped) across its rows, `columns` first copies that operand into column order:
    /// benzene's `aibj = aicl * bjcl` (`1620`) went from 76% to 94% of the GEMM rate
    /// (docs/benchmarks.md, "GEMMs in chunks of rows").
    Single { columns: Option<Prep> },
    /// GEMMs looped over batch labels on strided views.
    Batched(Box<Batched>),
    /// One GEMM that packs from and writes to the blocks as stored.
    Packed(Packed),
    /// Inner products along a summed label of unit stride, one block read in place.
    Dot(Box<Dot>),
    /// Vectors along dst's first label times broadcast elements, every block in place.
    Broadcast(Box<Broadcast>),
    /// The sum in slices along a label both operands hold outermost, each slice by its own
    /// plan, so that its copies stay in L2 (`crate::sliced`).
    Sliced(Box<Sliced>),
}

/// One choice of group orders: contracted labels `c`, free-left `fl`, free-right `fr`, and
/// whether the GEMM result is `[FR, FL]` (`swapped`) rather than `[FL, FR]`.
#[derive(Clone, Copy)]
struct Groups<'a> {
    c: &'a [Dim],
    fl: &'a [Dim],
    fr: &'a [Dim],
    swapped: bool,
}

/// The (unit-extent-free) label lists of the three blocks and their element counts.
struct Operands<'a> {
    dst: &'a [Dim],
    left: &'a [Dim],
    right: &'a [Dim],
    /// Element counts of dst, left, right.
    lens: [usize; 3],
}

impl Operands<'_> {
    /// Elements copied by permutes if the GEMM uses the group orders `g`.
    fn cost(&self, g: &Groups<'_>) -> usize {
        let mut cost = 0;
        if !is_concat(self.left, g.fl, g.c) && !is_concat(self.left, g.c, g.fl) {
            cost += self.lens[1];
        }
        if !is_concat(self.right, g.c, g.fr) && !is_concat(self.right, g.fr, g.c) {
            cost += self.lens[2];
        }
        let (a, b) = if g.swapped {
            (g.fr, g.fl)
        } else {
            (g.fl, g.fr)
        };
        if !is_concat(self.dst, a, b) {
            // A temporary written, then read again by the permute.
            cost += 2 * self.lens[0];
        }
        cost
    }
}

impl ContractionPlan {
    /// Validates a contraction pattern and chooses the operand orders.
    ///
    /// Each argument is `(labels, shape)` for dst, left and right. Every label must occur in
    /// exactly two of the three (never twice in one), and a label's extent must be the same
    /// wherever it occurs.
    pub fn new(
        dst: (&[Label], &Shape),
        left: (&[Label], &Shape),
        right: (&[Label], &Shape),
    ) -> Result<Self, KernelError> {
        let mut whole = Self::unsliced(dst, left, right)?;
        let slice = |ls: &Shape, rs: &Shape| Self::unsliced(dst, (left.0, ls), (right.0, rs));
        if let Some(s) = Sliced::of(dst.1, left, right, &whole, slice)? {
            whole.cpu = CpuForm::Sliced(Box::new(s));
        }
        Ok(whole)
    }

    /// The plan of [`Self::new`] but for the slices of [`CpuForm::Sliced`].
    fn unsliced(
        dst: (&[Label], &Shape),
        left: (&[Label], &Shape),
        right: (&[Label], &Shape),
    ) -> Result<Self, KernelError> {
        let (dl, ds) = dst;
        let (ll, ls) = left;
        let (rl, rs) = right;
        check_labels(Role::Dst, ds, dl)?;
        check_labels(Role::Left, ls, ll)?;
        check_labels(Role::Right, rs, rl)?;
        let dd = dims_of(dl, ds);
        let ld = dims_of(ll, ls);
        let rd = dims_of(rl, rs);

        // Pattern and extents.
        for &(label, e) in &dd {
            match (find(&ld, label), find(&rd, label)) {
                (Some(_), Some(_)) => return Err(KernelError::LabelInAllThree { label }),
                (None, None) => {
                    return Err(KernelError::UnpairedLabel {
                        role: Role::Dst,
                        label,
                    });
                }
                (Some(le), None) => check_extent(label, (Role::Dst, e), (Role::Left, le))?,
                (None, Some(re)) => check_extent(label, (Role::Dst, e), (Role::Right, re))?,
            }
        }
        for &(label, e) in &ld {
            if find(&dd, label).is_none() {
                match find(&rd, label) {
                    Some(re) => check_extent(label, (Role::Left, e), (Role::Right, re))?,
                    None => {
                        return Err(KernelError::UnpairedLabel {
                            role: Role::Left,
                            label,
                        });
                    }
                }
            }
        }
        for &(label, _) in &rd {
            if find(&dd, label).is_none() && find(&ld, label).is_none() {
                return Err(KernelError::UnpairedLabel {
                    role: Role::Right,
                    label,
                });
            }
        }

        // Layout only depends on dimensions with more than one element.
        let red = |v: &[Dim]| -> Vec<Dim> { v.iter().copied().filter(|d| d.1 != 1).collect() };
        let [dd, ld, rd] = merge_adjacent([red(&dd), red(&ld), red(&rd)]);
        let only = |v: &[Dim], other: &[Dim]| -> Vec<Dim> {
            v.iter()
                .copied()
                .filter(|d| find(other, d.0).is_some())
                .collect()
        };
        let c_opts = [only(&ld, &rd), only(&rd, &ld)];
        let fl_opts = [only(&ld, &dd), only(&dd, &ld)];
        let fr_opts = [only(&rd, &dd), only(&dd, &rd)];

        // Try every choice of group orders; keep the one that copies the fewest elements.
        let ops = Operands {
            dst: &dd,
            left: &ld,
            right: &rd,
            lens: [ds.len(), ls.len(), rs.len()],
        };
        let first = Groups {
            c: &c_opts[0],
            fl: &fl_opts[0],
            fr: &fr_opts[0],
            swapped: false,
        };
        let mut best = (ops.cost(&first), first);
        for c in &c_opts {
            for fl in &fl_opts {
                for fr in &fr_opts {
                    for swapped in [false, true] {
                        let g = Groups { c, fl, fr, swapped };
                        let cost = ops.cost(&g);
                        if cost < best.0 {
                            best = (cost, g);
                        }
                    }
                }
            }
        }
        let Groups { c, fl, fr, swapped } = best.1;

        let prod = |v: &[Dim]| v.iter().map(|d| d.1).product::<usize>();
        let dims = Dims {
            m: prod(fl),
            n: prod(fr),
            k: prod(c),
        };
        let dst = if is_concat(&dd, fl, fr) && !swapped {
            DstPrep::InPlace { swapped: false }
        } else if is_concat(&dd, fr, fl) && swapped {
            DstPrep::InPlace { swapped: true }
        } else {
            let tmp = concat(fl, fr);
            DstPrep::Permute {
                tmp: shape_of(&tmp)?,
                to: shape_of(&dd)?,
                perm: permutation_from_labels(&labels_of(&dd), &labels_of(&tmp))?,
            }
        };
        // Each operand copied in the order the GEMM reads down its columns.
        let left_columns = || permute_prep(&ld, &concat(c, fl), true);
        let right_columns = || permute_prep(&rd, &concat(c, fr), false);
        let swapped_in_place = matches!(dst, DstPrep::InPlace { swapped: true });
        let left = if is_concat(&ld, fl, c) {
            Prep::InPlace { transposed: false }
        } else if is_concat(&ld, c, fl) {
            Prep::InPlace { transposed: true }
        } else if swapped_in_place {
            // `Dᵀ = Rᵀ·Lᵀ` takes left as its right operand: copied `[C, FL]` it is read down its
            // columns (a `[FL, C]` copy would be copied again: `CpuForm::Single`).
            left_columns()?
        } else {
            permute_prep(&ld, &concat(fl, c), false)?
        };
        let right = if is_concat(&rd, c, fr) {
            Prep::InPlace { transposed: false }
        } else if is_concat(&rd, fr, c) {
            Prep::InPlace { transposed: true }
        } else {
            right_columns()?
        };
        let columns = match (&left, &right) {
            (Prep::InPlace { transposed: false }, _)
                if swapped_in_place && gemm::splits(dims.n, dims.k) && !is_concat(&ld, c, fl) =>
            {
                Some(left_columns()?)
            }
            (_, Prep::InPlace { transposed: true })
                if !swapped_in_place && gemm::splits(dims.m, dims.k) =>
            {
                Some(right_columns()?)
            }
            _ => None,
        };
        let single = CpuForm::Single { columns };
        // A plan that copies can be beaten by the other forms (which copy less); one that does
        // not, only where its GEMM is narrow.
        let blocks = Blocks {
            dst: &dd,
            left: &ld,
            right: &rd,
        };
        let cpu = if best.0 > 0 {
            let operand_copied = [(&left, ops.lens[1]), (&right, ops.lens[2])]
                .iter()
                .filter(|(p, _)| matches!(p, Prep::Permute { .. }))
                .map(|x| x.1)
                .max()
                .unwrap_or(0);
            let batched = batched::plan(&blocks, copy_cost(best.0) + gemm_cost(dims, 1))?;
            let batched_copies = batched.as_ref().map(|b| b.1.copies());
            let packed = batched_copies
                .is_none_or(|c| c[1] || c[2])
                .then(|| Packed::chosen(&blocks, (fl, fr, c), (operand_copied, best.0)))
                .flatten();
            // A small result summed over a long unit-stride label: neither a GEMM on copies
            // nor batched GEMMs come close (docs/benchmarks.md, "Contractions as inner
            // products").
            // Short sums along dst's first label: vectors times broadcast elements, with no
            // copy and no GEMM call ("Contractions as broadcast products").
            let dot = || Dot::new(&blocks, fl, fr, c).map(|d| CpuForm::Dot(Box::new(d)));
            // It replaces the plans it was measured to beat: many small batched GEMMs, a
            // single GEMM whose result must be permuted into dst, and, with its row block
            // copied first, a few batched GEMMs (`abck = mbc * mak`: "Contractions as
            // broadcast products: its row block copied"); and any other where dst stays in L2
            // (`abck = abek * ec` at water's extents, 5 GEMMs: 1.07–1.13×; "... labels
            // merged").
            let replaces = match &batched {
                Some((_, b)) => b.calls() >= MANY_CALLS,
                None => matches!(dst, DstPrep::Permute { .. }),
            };
            // Not where a single GEMM of copied operands writes dst in place and is large
            // (`aibj = cjbn * aicn` at water/cc-pVTZ's extents, 135 × 135 × 135 after one copy:
            // 1.36× as fast as broadcast products; docs/benchmarks.md, "Contractions: broadcast
            // products not for a large GEMM in place").
            let small_or_batched =
                batched.is_some() || dims.m * dims.n * dims.k < LARGE_SINGLE_GEMM;
            let broadcast = || {
                Broadcast::new(&blocks, fl, fr, c)
                    .filter(|b| {
                        replaces || b.copies_rows() || (small_or_batched && b.dst_stays_in_l2())
                    })
                    .map(|b| CpuForm::Broadcast(Box::new(b)))
            };
            match (packed, batched) {
                (Some(p), _) => CpuForm::Packed(p),
                (None, b) => dot().or_else(broadcast).unwrap_or_else(|| match b {
                    Some(b) => CpuForm::Batched(Box::new(b.1)),
                    None => single,
                }),
            }
        } else {
            // A GEMM on the blocks in place whose result has fewer rows than faer's kernels are
            // tall (48), as `abck = ebck * ea` (`a` of 19 or 27 rows), or sums at most 32
            // products into each element of a dst that stays in L2, as `abck = abe * eck`
            // (`ab` of 361 rows by 95 columns, 19 summed): broadcast products ran 1.12–1.45× as
            // fast ("Contractions as broadcast products: narrow results in place", "... labels
            // merged"). Longer sums into more rows are faer's (`abck = abe * eck` at 1600 ×
            // 400, 40 summed: 0.86×), and so are larger results not in the caches.
            let rows = if swapped { dims.n } else { dims.m };
            Broadcast::new(&blocks, fl, fr, c)
                .filter(|b| b.rows() == rows)
                .filter(|b| rows < NARROW_ROWS || (dims.k <= SHORT_SUM && b.dst_stays_in_l2()))
                .map_or(single, |b| CpuForm::Broadcast(Box::new(b)))
        };
        Ok(ContractionPlan {
            dims,
            lens: ops.lens,
            left,
            right,
            dst,
            par: Parallelism::default(),
            cpu,
        })
    }

    /// Whether the GEMM writes dst directly as `Dᵀ = Rᵀ·Lᵀ` (see [`Self::dst_prep`]).
    fn swapped_in_place(&self) -> bool {
        matches!(self.dst, DstPrep::InPlace { swapped: true })
    }

    /// Lets the GEMM use several threads (see [`Parallelism`]).
    pub fn with_parallelism(mut self, par: Parallelism) -> Self {
        self.par = par;
        self
    }

    /// Which operands [`Self::execute`] copies into another order on the CPU: those of
    /// [`Self::permutes`], or fewer where it batches ([`Self::cpu_gemm_calls`]).
    pub fn cpu_permutes(&self) -> Permutes {
        match (&self.cpu, self.par) {
            (CpuForm::Batched(b), Parallelism::Sequential) => {
                let [dst, left, right] = b.copies();
                Permutes { left, right, dst }
            }
            (CpuForm::Packed(_), Parallelism::Sequential) => Permutes::default(),
            (CpuForm::Broadcast(b), Parallelism::Sequential) => Permutes {
                left: b.copies_rows() && b.rows_are_left(),
                right: b.copies_rows() && !b.rows_are_left(),
                dst: false,
            },
            (CpuForm::Dot(d), Parallelism::Sequential) => Permutes {
                left: d.copies_far() && d.far_is_left(),
                right: d.copies_far() && !d.far_is_left(),
                dst: false,
            },
            (CpuForm::Sliced(s), Parallelism::Sequential) => s.slice().cpu_permutes(),
            (CpuForm::Single { columns: Some(_) }, Parallelism::Sequential) => {
                let swapped = self.swapped_in_place();
                let p = self.permutes();
                Permutes {
                    left: p.left || swapped,
                    right: p.right || !swapped,
                    dst: p.dst,
                }
            }
            _ => self.permutes(),
        }
    }

    /// Which operands this plan's steps (the single GEMM form) copy into another order (the
    /// rest are used in place).
    pub fn permutes(&self) -> Permutes {
        Permutes {
            left: matches!(self.left, Prep::Permute { .. }),
            right: matches!(self.right, Prep::Permute { .. }),
            dst: matches!(self.dst, DstPrep::Permute { .. }),
        }
    }

    /// The GEMM's `[m, n, k]`: `[FL, FR]` result (`m×n`) from `[FL, C]` (`m×k`) and `[C, FR]`
    /// (`k×n`). With a swapped dst ([`Self::dst_prep`]) the GEMM computes the `n×m` transpose.
    ///
    /// This and the other step accessors expose the plan's choices so that another executor
    /// (a GPU) can run exactly the steps of [`Self::execute`].
    pub fn gemm_dims(&self) -> [usize; 3] {
        [self.dims.m, self.dims.n, self.dims.k]
    }

    /// Element counts of dst, left and right.
    pub fn lens(&self) -> [usize; 3] {
        self.lens
    }

    /// How the left operand reaches the GEMM: `(transposed, permute)`. With `permute ==
    /// Some((from, to, perm))` it is first permuted from shape `from` into a temporary of shape
    /// `to`; otherwise it is used in place. Either is stored `[C, FL]` if `transposed`, else
    /// `[FL, C]` (a temporary is `[C, FL]` where dst is computed swapped, [`Self::dst_prep`]).
    pub fn left_prep(&self) -> (bool, Option<(Shape, Shape, Perm)>) {
        prep_view(&self.left)
    }

    /// How the right operand reaches the GEMM, as [`Self::left_prep`]: stored `[FR, C]` if
    /// `transposed`, else `[C, FR]` (a temporary always is).
    pub fn right_prep(&self) -> (bool, Option<(Shape, Shape, Perm)>) {
        prep_view(&self.right)
    }

    /// How the GEMM result reaches dst: `(swapped, permute)`. With `permute == Some((tmp, to,
    /// perm))` the GEMM writes a `[FL, FR]` temporary of shape `tmp` (beta 0) that is then
    /// permuted (beta 0) or permute-added (after scaling dst by beta) into dst of shape `to`.
    /// Otherwise the GEMM writes dst directly, as `Dᵀ = Rᵀ·Lᵀ` (an `n×m` GEMM with the operands
    /// exchanged and their transposition flags flipped) if `swapped`.
    pub fn dst_prep(&self) -> (bool, Option<(Shape, Shape, Perm)>) {
        match &self.dst {
            DstPrep::InPlace { swapped } => (*swapped, None),
            DstPrep::Permute { tmp, to, perm } => (false, Some((*tmp, *to, *perm))),
        }
    }

    /// Whether [`Self::execute`] runs sial's own GEMM, which packs its panels straight from
    /// the blocks as stored and so copies nothing (sequential plans on CPUs with AVX-512).
    pub fn cpu_packed(&self) -> bool {
        match (&self.cpu, self.par) {
            (CpuForm::Packed(_), Parallelism::Sequential) => true,
            (CpuForm::Sliced(s), Parallelism::Sequential) => s.slice().cpu_packed(),
            _ => false,
        }
    }

    /// Whether [`Self::execute`] runs the contraction as vectors along dst's first label
    /// times broadcast elements ([`crate::broadcast`]): sequential plans on CPUs with AVX-512.
    pub fn cpu_broadcast(&self) -> bool {
        match (&self.cpu, self.par) {
            (CpuForm::Broadcast(_), Parallelism::Sequential) => true,
            (CpuForm::Sliced(s), Parallelism::Sequential) => s.slice().cpu_broadcast(),
            _ => false,
        }
    }

    /// Whether [`Self::execute`] runs the contraction as inner products along a summed label
    /// ([`crate::dot`]): sequential plans of small results on CPUs with AVX-512.
    pub fn cpu_inner_products(&self) -> bool {
        match (&self.cpu, self.par) {
            (CpuForm::Dot(_), Parallelism::Sequential) => true,
            (CpuForm::Sliced(s), Parallelism::Sequential) => s.slice().cpu_inner_products(),
            _ => false,
        }
    }

    /// How many GEMMs [`Self::execute`] runs on the CPU: 1, or more where looping over some
    /// free labels (batching) avoids copying blocks, or none for inner products; the steps
    /// above stay the single GEMM.
    pub fn cpu_gemm_calls(&self) -> usize {
        match (&self.cpu, self.par) {
            (CpuForm::Batched(b), Parallelism::Sequential) => b.calls(),
            (CpuForm::Dot(_) | CpuForm::Broadcast(_), Parallelism::Sequential) => 0,
            (CpuForm::Sliced(s), Parallelism::Sequential) => {
                s.slices() * s.slice().cpu_gemm_calls()
            }
            _ => 1,
        }
    }

    /// In how many slices [`Self::execute`] sums on the CPU (1: the whole sum at once), each
    /// slice a contraction of its own whose form the other accessors describe
    /// ([`crate::sliced`]).
    pub fn cpu_slices(&self) -> usize {
        match (&self.cpu, self.par) {
            (CpuForm::Sliced(s), Parallelism::Sequential) => s.slices(),
            _ => 1,
        }
    }

    /// Whether [`Self::execute`] with beta 1 adds each final sum to its dst element once, as
    /// `x + s` with the `s` it stores with beta 0, where it computes it, walking dst in memory
    /// order: then `x += l * r` gives the bits of `t = l * r` followed by `x += t`, and reads
    /// and writes `x` once, even where `x` is not in the caches. True of the inner-product
    /// form (its dst fits L2) and of the broadcast form where it walks dst in order
    /// (`abck = aeck * eb`, not `abck = abek * ec`: on benzene's blocks the fused form of the
    /// second took 2.2 s against 1.25 s for the product and the add). faer's GEMM adds its
    /// products into dst's values as it goes (other bits); a GEMM into a temporary permuted
    /// into dst adds once, but its permuted add is slower than a permuted copy and an add.
    pub fn adds_each_sum_in_place(&self) -> bool {
        match (&self.cpu, self.par) {
            (CpuForm::Dot(_), Parallelism::Sequential) => true,
            (CpuForm::Broadcast(b), Parallelism::Sequential) => b.walks_dst_in_order(),
            _ => false,
        }
    }

    /// Floating-point operations of the GEMM (`2·m·n·k`), for rates and cost models.
    pub fn flops(&self) -> f64 {
        2.0 * self.dims.m as f64 * self.dims.n as f64 * self.dims.k as f64
    }

    /// `dst = beta * dst + Σ left * right` on buffers of the planned shapes.
    pub fn execute(
        &self,
        dst: &mut [f64],
        left: &[f64],
        right: &[f64],
        beta: f64,
    ) -> Result<(), KernelError> {
        check_len(Role::Dst, self.lens[0], dst.len())?;
        check_len(Role::Left, self.lens[1], left.len())?;
        check_len(Role::Right, self.lens[2], right.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        if self.dims.k == 0 {
            // An empty sum: only the beta part remains.
            scale_or_zero(dst, beta);
            return Ok(());
        }
        if let (CpuForm::Sliced(s), Parallelism::Sequential) = (&self.cpu, self.par) {
            // Outside the scratch: each slice's plan takes it.
            return s.execute(dst, (left, right), beta);
        }
        with_scratch(|scratch| match (&self.cpu, self.par) {
            (CpuForm::Batched(b), Parallelism::Sequential) => {
                b.execute(dst, (left, right), beta, scratch)
            }
            (CpuForm::Packed(p), Parallelism::Sequential) => {
                p.execute(dst, (left, right), beta, scratch, true);
                Ok(())
            }
            (CpuForm::Dot(d), Parallelism::Sequential) => {
                d.execute(dst, (left, right), beta, scratch)
            }
            (CpuForm::Broadcast(b), Parallelism::Sequential) => {
                b.execute(dst, (left, right), beta, scratch)
            }
            (CpuForm::Single { columns }, Parallelism::Sequential) => {
                self.execute_single(dst, (left, right), beta, scratch, columns.as_ref())
            }
            _ => self.execute_single(dst, (left, right), beta, scratch, None),
        })
    }

    /// The plan's steps as its accessors describe them: permutes as needed, one GEMM; with
    /// `columns`, the GEMM's right operand copied into column order (see [`CpuForm::Single`]).
    fn execute_single(
        &self,
        dst: &mut [f64],
        (left, right): (&[f64], &[f64]),
        beta: f64,
        scratch: &mut [Vec<f64>; 3],
        columns: Option<&Prep>,
    ) -> Result<(), KernelError> {
        let [s0, s1, s2] = scratch;
        let (lp, rp) = match columns {
            Some(p) if self.swapped_in_place() => (p, &self.right),
            Some(p) => (&self.left, p),
            None => (&self.left, &self.right),
        };
        let a = prepare(lp, left, s1)?;
        let b = prepare(rp, right, s2)?;

        match &self.dst {
            DstPrep::InPlace { swapped } => {
                if self.dims.m == 1 && self.dims.n == 1 && !a.transposed && !b.transposed {
                    // A dot product: both operands are contiguous in the same order.
                    let s = dot_slices(a.data, b.data);
                    dst[0] = if beta == 0.0 { s } else { beta * dst[0] + s };
                    return Ok(());
                }
                let accumulate = beta != 0.0;
                if accumulate && beta != 1.0 {
                    scale(dst, beta);
                }
                if *swapped {
                    let dims = Dims {
                        m: self.dims.n,
                        n: self.dims.m,
                        k: self.dims.k,
                    };
                    let bt = Stored {
                        data: b.data,
                        transposed: !b.transposed,
                    };
                    let at = Stored {
                        data: a.data,
                        transposed: !a.transposed,
                    };
                    gemm::gemm(dst, dims, bt, at, accumulate, self.par);
                } else {
                    gemm::gemm(dst, self.dims, a, b, accumulate, self.par);
                }
            }
            DstPrep::Permute { tmp, to, perm } => {
                let t = sized(s0, tmp.len());
                gemm::gemm(t, self.dims, a, b, false, self.par);
                permute_into(dst, to, beta, t, tmp, perm)?;
            }
        }
        Ok(())
    }
}

/// `dst = beta * dst + t` with `t` (shape `from`) permuted into dst's order (shape `to`).
pub(crate) fn permute_into(
    dst: &mut [f64],
    to: &Shape,
    beta: f64,
    t: &[f64],
    from: &Shape,
    perm: &[usize],
) -> Result<(), KernelError> {
    if beta == 0.0 {
        return permute(dst, to, t, from, perm);
    }
    if beta != 1.0 {
        scale(dst, beta);
    }
    permute_add(dst, to, 1.0, t, from, perm)
}

/// Brings an operand into matrix form, copying into `buf` only if the plan says so.
fn prepare<'a>(
    prep: &Prep,
    data: &'a [f64],
    buf: &'a mut Vec<f64>,
) -> Result<Stored<'a>, KernelError> {
    match prep {
        Prep::InPlace { transposed } => Ok(Stored {
            data,
            transposed: *transposed,
        }),
        Prep::Permute {
            from,
            to,
            perm,
            transposed,
        } => {
            let buf = sized(buf, to.len());
            permute_operand(buf, to, data, from, perm)?;
            Ok(Stored {
                data: buf,
                transposed: *transposed,
            })
        }
    }
}

/// The public view of a [`Prep`] (see [`ContractionPlan::left_prep`]).
fn prep_view(prep: &Prep) -> (bool, Option<(Shape, Shape, Perm)>) {
    match prep {
        Prep::InPlace { transposed } => (*transposed, None),
        Prep::Permute {
            from,
            to,
            perm,
            transposed,
        } => (*transposed, Some((*from, *to, *perm))),
    }
}

fn scale_or_zero(dst: &mut [f64], beta: f64) {
    if beta == 0.0 {
        fill(dst, 0.0);
    } else {
        scale(dst, beta);
    }
}

/// Dot product with independent partial sums so the loop vectorises.
fn dot_slices(a: &[f64], b: &[f64]) -> f64 {
    const LANES: usize = 8;
    let mut acc = [0.0f64; LANES];
    let ac = a.chunks_exact(LANES);
    let bc = b.chunks_exact(LANES);
    let tail: f64 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// Two labels that follow each other, in the same order, in both blocks they lie in, made one
/// (the first's label, the product of their extents), until no such pair is left: the same
/// elements at the same offsets, as fewer and longer dimensions. The forms that run along a
/// block's first label then run along both (`abck = abek * ec`: rows `ab`, 81 long at the test
/// job's extents, not `a`, 9).
fn merge_adjacent(mut blocks: [Vec<Dim>; 3]) -> [Vec<Dim>; 3] {
    let follows = |blocks: &[Vec<Dim>; 3], x: Label, y: Label| {
        blocks
            .iter()
            .all(|t| match t.iter().position(|d| d.0 == x) {
                Some(i) => t.get(i + 1).is_some_and(|d| d.0 == y),
                None => t.iter().all(|d| d.0 != y),
            })
    };
    loop {
        let pair = blocks
            .iter()
            .flat_map(|t| t.windows(2))
            .map(|w| (w[0].0, w[1].0))
            .find(|&(x, y)| follows(&blocks, x, y));
        let Some((x, _)) = pair else {
            return blocks;
        };
        for t in &mut blocks {
            if let Some(i) = t.iter().position(|d| d.0 == x) {
                let (_, y) = t.remove(i + 1);
                t[i].1 *= y;
            }
        }
    }
}

fn dims_of(labels: &[Label], shape: &Shape) -> Vec<Dim> {
    labels
        .iter()
        .copied()
        .zip(shape.extents().iter().copied())
        .collect()
}

fn find(v: &[Dim], label: Label) -> Option<usize> {
    v.iter().find(|d| d.0 == label).map(|d| d.1)
}

fn check_extent(label: Label, a: (Role, usize), b: (Role, usize)) -> Result<(), KernelError> {
    if a.1 == b.1 {
        Ok(())
    } else {
        Err(KernelError::ExtentMismatch {
            label,
            first_role: a.0,
            first: a.1,
            second_role: b.0,
            second: b.1,
        })
    }
}

fn is_concat(whole: &[Dim], a: &[Dim], b: &[Dim]) -> bool {
    whole.len() == a.len() + b.len() && whole[..a.len()] == *a && whole[a.len()..] == *b
}

fn concat(a: &[Dim], b: &[Dim]) -> Vec<Dim> {
    a.iter().chain(b).copied().collect()
}

fn labels_of(v: &[Dim]) -> Vec<Label> {
    v.iter().map(|d| d.0).collect()
}

fn shape_of(v: &[Dim]) -> Result<Shape, KernelError> {
    Shape::new(&v.iter().map(|d| d.1).collect::<Vec<_>>())
}

fn permute_prep(from: &[Dim], to: &[Dim], transposed: bool) -> Result<Prep, KernelError> {
    Ok(Prep::Permute {
        from: shape_of(from)?,
        to: shape_of(to)?,
        perm: permutation_from_labels(&labels_of(to), &labels_of(from))?,
        transposed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{naive_contract, random_vec};
    use proptest::prelude::*;

    /// Blocks laid out alike sum without a plan, to the bits of the plan's sum; other layouts
    /// are left to a plan, and bad operands are refused.
    #[test]
    fn blocks_laid_out_alike_dot_without_a_plan() -> Result<(), KernelError> {
        for ext in [
            &[1usize][..],
            &[7],
            &[3, 5],
            &[9, 5, 9, 5],
            &[2, 1, 3, 1, 17],
        ] {
            let shape = Shape::new(ext)?;
            let labels: Vec<Label> = (0..ext.len() as Label).collect();
            let (l, r) = (random_vec(shape.len(), 1), random_vec(shape.len(), 2));
            let (lo, ro) = (
                Operand::new(&l, shape, &labels),
                Operand::new(&r, shape, &labels),
            );
            let fast = dot_in_order(&lo, &ro)?;
            let plan = ContractionPlan::new(
                (&[], &Shape::scalar()),
                (&labels, &shape),
                (&labels, &shape),
            )?;
            let mut planned = [0.0];
            plan.execute(&mut planned, &l, &r, 0.0)?;
            assert_eq!(
                fast.map(f64::to_bits),
                Some(planned[0].to_bits()),
                "{ext:?}"
            );
            assert_eq!(dot(lo, ro)?.to_bits(), planned[0].to_bits());
        }
        let shape = Shape::new(&[3, 4])?;
        let data = random_vec(12, 3);
        let op = |labels| Operand::new(&data, shape, labels);
        assert_eq!(
            dot_in_order(&op(&[1, 2]), &op(&[2, 1]))?,
            None,
            "other order"
        );
        let other = Operand::new(&data, Shape::new(&[4, 3])?, &[1, 2]);
        assert_eq!(dot_in_order(&op(&[1, 2]), &other)?, None, "other shape");
        assert!(
            dot_in_order(&op(&[1, 1]), &op(&[1, 1])).is_err(),
            "a label twice"
        );
        let short = Operand::new(&data[..11], shape, &[1, 2]);
        assert!(
            dot_in_order(&op(&[1, 2]), &short).is_err(),
            "too few elements"
        );
        Ok(())
    }

    /// Runs `contract` for beta 0, 1 and 0.5 and compares with the naive reference.
    fn check(
        (dl, de): (&[Label], &[usize]),
        (ll, le): (&[Label], &[usize]),
        (rl, re): (&[Label], &[usize]),
        seed: u64,
    ) -> Result<(), KernelError> {
        let (ds, ls, rs) = (Shape::new(de)?, Shape::new(le)?, Shape::new(re)?);
        let l = random_vec(ls.len(), seed);
        let r = random_vec(rs.len(), seed + 1);
        let expect = naive_contract((dl, &ds), (&l, ll, &ls), (&r, rl, &rs));
        for beta in [0.0, 1.0, 0.5] {
            let d0 = if beta == 0.0 {
                vec![f64::NAN; ds.len()]
            } else {
                random_vec(ds.len(), seed + 2)
            };
            let mut d = d0.clone();
            contract(
                OperandMut::new(&mut d, ds, dl),
                Operand::new(&l, ls, ll),
                Operand::new(&r, rs, rl),
                beta,
            )?;
            for i in 0..d.len() {
                let want = if beta == 0.0 {
                    expect[i]
                } else {
                    beta * d0[i] + expect[i]
                };
                assert!(
                    (d[i] - want).abs() <= 1e-12 * (1.0 + want.abs()),
                    "d{dl:?}{de:?} = l{ll:?}{le:?} * r{rl:?}{re:?}, beta {beta}: \
                     element {i} is {} expected {want}",
                    d[i]
                );
            }
        }
        Ok(())
    }

    fn plan(
        dl: &[Label],
        de: &[usize],
        ll: &[Label],
        le: &[usize],
        rl: &[Label],
        re: &[usize],
    ) -> Result<ContractionPlan, KernelError> {
        ContractionPlan::new(
            (dl, &Shape::new(de)?),
            (ll, &Shape::new(le)?),
            (rl, &Shape::new(re)?),
        )
    }

    const I: Label = 1;
    const J: Label = 2;
    const K: Label = 3;
    const L: Label = 4;
    const A: Label = 5;
    const B: Label = 6;
    const C: Label = 7;
    const D: Label = 8;

    #[test]
    fn matrix_products_in_every_layout() -> Result<(), KernelError> {
        let (ni, nj, nk) = (5, 4, 3);
        let mut seed = 0;
        for dl in [[I, J], [J, I]] {
            for ll in [[I, K], [K, I]] {
                for rl in [[K, J], [J, K]] {
                    let ext = |x: &[Label]| -> Vec<usize> {
                        x.iter()
                            .map(|&l| match l {
                                I => ni,
                                J => nj,
                                _ => nk,
                            })
                            .collect()
                    };
                    seed += 3;
                    check((&dl, &ext(&dl)), (&ll, &ext(&ll)), (&rl, &ext(&rl)), seed)?;
                    // A matrix product never needs a permute, whatever the layouts.
                    let p = plan(&dl, &ext(&dl), &ll, &ext(&ll), &rl, &ext(&rl))?;
                    assert_eq!(p.permutes(), Permutes::default(), "{dl:?} {ll:?} {rl:?}");
                }
            }
        }
        Ok(())
    }

    /// `aibj = cjbn * aicn` (`rccsd_rhf:1701`): dst is `[FR, FL]`, computed as `Dᵀ = Rᵀ·Lᵀ`,
    /// and left must be copied; it is copied `[C, FL]`, the order in which that product reads
    /// it, and the plan's steps give the naive sums, written and added to.
    #[test]
    fn a_left_copy_for_a_swapped_product_is_summed_labels_first() -> Result<(), KernelError> {
        let (dl, ll, rl) = ([A, I, B, J], [K, J, B, L], [A, I, K, L]);
        let p = plan(&dl, &ext4(&dl), &ll, &ext4(&ll), &rl, &ext4(&rl))?;
        let (transposed, copy) = p.left_prep();
        let (swapped, dst_copy) = p.dst_prep();
        assert!(transposed && copy.is_some() && swapped && dst_copy.is_none());
        assert_eq!(p.right_prep(), (true, None));
        let (ds, ls, rs) = (
            Shape::new(&ext4(&dl))?,
            Shape::new(&ext4(&ll))?,
            Shape::new(&ext4(&rl))?,
        );
        let l = random_vec(ls.len(), 7);
        let r = random_vec(rs.len(), 8);
        let expect = naive_contract((&dl, &ds), (&l, &ll, &ls), (&r, &rl, &rs));
        let d0 = random_vec(ds.len(), 9);
        for beta in [0.0, 1.0] {
            let mut d = d0.clone();
            p.execute_single(&mut d, (&l, &r), beta, &mut Default::default(), None)?;
            for i in 0..d.len() {
                let want = beta * d0[i] + expect[i];
                assert!(
                    (d[i] - want).abs() <= 1e-12 * (1.0 + want.abs()),
                    "beta {beta}, {i}"
                );
            }
        }
        Ok(())
    }

    /// A GEMM split into chunks of rows whose right operand is stored row-major (`ab = ac *
    /// bc`; swapped, `ba = ac * cb` reads left as its right operand): the CPU copies that
    /// operand into columns first, the plan's steps do not, and both give the same bits.
    #[test]
    fn a_split_gemm_reads_its_right_operand_copied_into_columns() -> Result<(), KernelError> {
        type Side = ([Label; 2], [usize; 2]);
        let cases: [(Side, Side, Side); 2] = [
            (
                ([A, B], [600, 40]),
                ([A, C], [600, 600]),
                ([B, C], [40, 600]),
            ),
            (
                ([B, A], [600, 40]),
                ([A, C], [40, 600]),
                ([C, B], [600, 600]),
            ),
        ];
        for ((dl, de), (ll, le), (rl, re)) in cases {
            let p = plan(&dl, &de, &ll, &le, &rl, &re)?;
            let swapped = p.dst_prep().0;
            assert_eq!(swapped, dl[0] == B);
            assert_eq!(p.permutes(), Permutes::default());
            let cpu = p.cpu_permutes();
            assert!(cpu.left == swapped && cpu.right != swapped && !cpu.dst);
            let l = random_vec(p.lens()[1], 11);
            let r = random_vec(p.lens()[2], 12);
            let d0 = random_vec(p.lens()[0], 13);
            for beta in [0.0, 1.0] {
                let (mut copied, mut steps) = (d0.clone(), d0.clone());
                p.execute(&mut copied, &l, &r, beta)?;
                p.execute_single(&mut steps, (&l, &r), beta, &mut Default::default(), None)?;
                assert_eq!(copied, steps, "d{dl:?}, beta {beta}");
            }
            check((&dl, &de), (&ll, &le), (&rl, &re), 14)?;
        }
        Ok(())
    }

    /// Extents per label for the 4-index tests (all different, to catch mix-ups).
    fn ext4(labels: &[Label]) -> Vec<usize> {
        labels
            .iter()
            .map(|&l| match l {
                A => 3,
                B => 4,
                I => 2,
                J => 5,
                K => 6,
                _ => 7,
            })
            .collect()
    }

    fn plan4(dl: &[Label], ll: &[Label], rl: &[Label]) -> Result<Permutes, KernelError> {
        Ok(plan(dl, &ext4(dl), ll, &ext4(ll), rl, &ext4(rl))?.permutes())
    }

    fn check4(dl: &[Label], ll: &[Label], rl: &[Label], seed: u64) -> Result<(), KernelError> {
        check((dl, &ext4(dl)), (ll, &ext4(ll)), (rl, &ext4(rl)), seed)
    }

    #[test]
    fn four_index_contractions() -> Result<(), KernelError> {
        // d[a,b,i,j] = l[a,b,k,l] * r[k,l,i,j]: no permutes.
        let (d, l, r) = ([A, B, I, J], [A, B, K, L], [K, L, I, J]);
        assert_eq!(plan4(&d, &l, &r)?, Permutes::default());
        check4(&d, &l, &r, 1)?;
        // Operands stored the other way round are used transposed: still no permutes.
        assert_eq!(
            plan4(&[I, J, A, B], &[K, L, A, B], &[I, J, K, L])?,
            Permutes::default()
        );
        check4(&[I, J, A, B], &[K, L, A, B], &[I, J, K, L], 2)?;
        // Left in a scrambled order: only left is permuted.
        let l2 = [K, A, L, B];
        assert_eq!(
            plan4(&d, &l2, &r)?,
            Permutes {
                left: true,
                right: false,
                dst: false
            }
        );
        check4(&d, &l2, &r, 3)?;
        // Contracted labels in opposite orders: exactly one operand moves.
        let r2 = [L, K, I, J];
        let pm = plan4(&d, &l, &r2)?;
        assert!(pm.left ^ pm.right && !pm.dst);
        check4(&d, &l, &r2, 4)?;
        // dst interleaved: only the result is permuted.
        let d2 = [A, I, B, J];
        assert_eq!(
            plan4(&d2, &l, &r)?,
            Permutes {
                left: false,
                right: false,
                dst: true
            }
        );
        check4(&d2, &l, &r, 5)?;
        // Everything scrambled.
        check4(&[J, A, I, B], &[L, B, K, A], &[I, K, J, L], 6)?;
        Ok(())
    }

    #[test]
    fn unit_extents_never_force_a_permute() -> Result<(), KernelError> {
        // d[i,s,j] = l[s2,i,k] * r[k,j,s,s2] with simple indices s, s2 of extent 1.
        let (s, s2) = (10, 11);
        let p = plan(
            &[I, s, J],
            &[4, 1, 5],
            &[s2, I, K],
            &[1, 4, 3],
            &[K, J, s, s2],
            &[3, 5, 1, 1],
        )?;
        assert_eq!(p.permutes(), Permutes::default());
        check(
            (&[I, s, J], &[4, 1, 5]),
            (&[s2, I, K], &[1, 4, 3]),
            (&[K, J, s, s2], &[3, 5, 1, 1]),
            4,
        )
    }

    #[test]
    fn outer_products_and_tensor() -> Result<(), KernelError> {
        check((&[I, J], &[3, 4]), (&[I], &[3]), (&[J], &[4]), 5)?;
        check((&[J, I], &[4, 3]), (&[I], &[3]), (&[J], &[4]), 6)?;
        check(
            (&[I, K, J, L], &[2, 3, 4, 2]),
            (&[I, J], &[2, 4]),
            (&[K, L], &[3, 2]),
            7,
        )?;
        let (ls, rs, ds) = (Shape::new(&[2])?, Shape::new(&[3])?, Shape::new(&[2, 3])?);
        let (l, r) = (vec![1.0, 2.0], vec![1.0, 10.0, 100.0]);
        let mut d = vec![0.0; 6];
        tensor(
            OperandMut::new(&mut d, ds, &[I, J]),
            Operand::new(&l, ls, &[I]),
            Operand::new(&r, rs, &[J]),
            0.0,
        )?;
        assert_eq!(d, vec![1.0, 2.0, 10.0, 20.0, 100.0, 200.0]);
        let e = tensor(
            OperandMut::new(&mut d, ds, &[I, J]),
            Operand::new(&l, ls, &[I]),
            Operand::new(&r, rs, &[I]),
            0.0,
        );
        assert_eq!(e, Err(KernelError::SharedLabelInTensor { label: I }));
        Ok(())
    }

    #[test]
    fn full_contractions() -> Result<(), KernelError> {
        check((&[], &[]), (&[I, J], &[3, 4]), (&[J, I], &[4, 3]), 8)?;
        check((&[], &[]), (&[I, J], &[3, 4]), (&[I, J], &[3, 4]), 9)?;
        check((&[], &[]), (&[], &[]), (&[], &[]), 10)?;
        let s = Shape::new(&[2, 2])?;
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 10.0, 100.0, 1000.0];
        // a[i,j] * b[j,i]: a(0,1)=3 pairs with b(1,0)=10, a(1,0)=2 with b(0,1)=100.
        let v = dot(Operand::new(&a, s, &[I, J]), Operand::new(&b, s, &[J, I]))?;
        assert_eq!(v, 1.0 + 2.0 * 100.0 + 3.0 * 10.0 + 4000.0);
        assert_eq!(
            dot(Operand::new(&a, s, &[I, J]), Operand::new(&b, s, &[I, K])),
            Err(KernelError::NotAFullContraction)
        );
        Ok(())
    }

    #[test]
    fn zero_extents() -> Result<(), KernelError> {
        // Empty sum: d = beta * d.
        let p = plan(&[I, J], &[2, 2], &[I, K], &[2, 0], &[K, J], &[0, 2])?;
        let mut d = vec![1.0; 4];
        p.execute(&mut d, &[], &[], 0.5)?;
        assert_eq!(d, vec![0.5; 4]);
        p.execute(&mut d, &[], &[], 0.0)?;
        assert_eq!(d, vec![0.0; 4]);
        // Empty dst: nothing to do.
        let p = plan(&[I, J], &[0, 2], &[I, K], &[0, 3], &[K, J], &[3, 2])?;
        p.execute(&mut [], &[], &[0.0; 6], 1.0)?;
        Ok(())
    }

    #[test]
    fn the_ao_ladder_is_packed_from_the_blocks_as_stored() -> Result<(), KernelError> {
        // rccsd_rhf:1396, `Y[M,i,N,j] = aoint[L,M,S,N] * T[L,i,S,j]`, with an AO segment of 23
        // (left of 23⁴ elements, beyond L2) and 4 occupied: every block would be permuted for
        // the single GEMM; the packed GEMM reads and writes all three in place.
        let (ao, occ) = ([23; 4], [23, 4, 23, 4]);
        let (d, l, r) = ([A, I, B, J], [C, A, D, B], [C, I, D, J]);
        let p = plan(&d, &occ, &l, &ao, &r, &occ)?;
        assert_eq!(p.cpu_packed(), crate::packed::available());
        if p.cpu_packed() {
            assert_eq!(p.cpu_permutes(), Permutes::default());
        }
        assert!(p.permutes().left && p.permutes().right && p.permutes().dst);
        check((&d, &occ), (&l, &ao), (&r, &occ), 11)
    }

    #[test]
    fn narrow_results_in_place_take_broadcast_products() -> Result<(), KernelError> {
        let bc = crate::broadcast::available();
        // rccsdpt_aaa:804, `abck = ebck * ea` at water's extents: a GEMM in place whose result
        // has 19 rows goes to broadcast products, `ea` copied with `a` leading.
        let v = |n: usize| vec![19; n];
        let (d, l, r) = ([A, B, C, K], [D, B, C, K], [D, A]);
        let ext = [19, 19, 19, 5];
        let p = plan(&d, &ext, &l, &ext, &r, &v(2))?;
        assert!(p.permutes() == Permutes::default());
        assert_eq!(p.cpu_broadcast(), bc);
        check((&d, &ext), (&l, &ext), (&r, &v(2)), 12)?;
        // rccsdpt_aaa:1116, `abck = abe * eck`: 361 rows (`a, b` merged) summing 19 products
        // each into a dst of 274 KB take them too; 729 rows summing 27 into 787 KB (cc-pVTZ),
        // and 1600 rows summing 40, keep faer's GEMM in place.
        let (l, r) = ([A, B, D], [D, C, K]);
        let p = plan(&d, &ext, &l, &v(3), &r, &ext[1..])?;
        assert!(p.permutes() == Permutes::default());
        assert_eq!(p.cpu_broadcast(), bc);
        check((&d, &ext), (&l, &v(3)), (&r, &ext[1..]), 13)?;
        for (big, long) in [
            ([27, 27, 27, 5], vec![27; 3]),
            ([40, 40, 40, 10], vec![40; 3]),
        ] {
            let p = plan(&d, &big, &l, &long, &r, &big[1..])?;
            assert!(!p.cpu_broadcast() && p.permutes() == Permutes::default());
        }
        // rccsd_rhf:1603, `aibj = aicl * clbj` at the test job's extents: 45 rows, `a, i`
        // merged.
        let (d, l, r) = ([A, I, B, J], [A, I, C, L], [C, L, B, J]);
        let ext = [9, 5, 9, 5];
        let p = plan(&d, &ext, &l, &ext, &r, &ext)?;
        assert!(p.permutes() == Permutes::default());
        assert_eq!(p.cpu_broadcast(), bc);
        check((&d, &ext), (&l, &ext), (&r, &ext), 14)
    }

    /// rccsd_rhf:1701, `aibj = cjbn * aicn`: one copy of left and a GEMM into dst in place.
    /// Broadcast products (dst's rows lead right) replace it at the test job's 45 × 45 × 45, not
    /// at water/cc-pVTZ's 135 × 135 × 135.
    #[test]
    fn a_large_gemm_in_place_keeps_its_plan() -> Result<(), KernelError> {
        const N: Label = 9;
        let (d, l, r) = ([A, I, B, J], [C, J, B, N], [A, I, C, N]);
        for (ext, broadcast) in [
            ([9, 5, 9, 5], true),
            ([19, 5, 19, 5], false),
            ([27, 5, 27, 5], false),
        ] {
            let p = plan(&d, &ext, &l, &ext, &r, &ext)?;
            let bc = broadcast && crate::broadcast::available();
            assert_eq!(p.cpu_broadcast(), bc, "{ext:?}");
            let copies_left = Permutes {
                left: true,
                ..Permutes::default()
            };
            let copies = if bc { Permutes::default() } else { copies_left };
            assert_eq!(p.cpu_permutes(), copies, "{ext:?}");
            check((&d, &ext), (&l, &ext), (&r, &ext), 15)?;
        }
        Ok(())
    }

    #[test]
    fn labels_that_follow_each_other_in_both_their_blocks_merge() {
        // `abck = abek * ec`: `a, b` follow each other in dst and left; `c`, `k` and `e` stand
        // alone. `ai = cadl * dicl`: nothing merges.
        let dims = |labels: &[Label], ext: usize| -> Vec<Dim> {
            labels.iter().map(|&l| (l, ext)).collect()
        };
        let [d, l, r] = merge_adjacent([
            dims(&[A, B, C, K], 9),
            dims(&[A, B, D, K], 9),
            dims(&[D, C], 9),
        ]);
        assert_eq!(d, vec![(A, 81), (C, 9), (K, 9)]);
        assert_eq!(l, vec![(A, 81), (D, 9), (K, 9)]);
        assert_eq!(r, vec![(D, 9), (C, 9)]);
        let blocks = [
            dims(&[A, I], 9),
            dims(&[C, A, D, L], 9),
            dims(&[D, I, C, L], 9),
        ];
        assert_eq!(merge_adjacent(blocks.clone()), blocks);
        // Three in a row, summed whole (`x = ijk * ijk`): one label of 125.
        let [d, l, r] = merge_adjacent([vec![], dims(&[I, J, K], 5), dims(&[I, J, K], 5)]);
        assert!(d.is_empty());
        assert_eq!((l, r), (vec![(I, 125)], vec![(I, 125)]));
    }

    #[test]
    fn threaded_gemm_gives_the_same_result() -> Result<(), KernelError> {
        let e = [40, 40];
        let p = plan(&[I, J], &e, &[I, K], &e, &[K, J], &e)?;
        let pt = p.clone().with_parallelism(Parallelism::Threads(
            std::num::NonZeroUsize::MIN.saturating_add(1),
        ));
        let l = random_vec(1600, 1);
        let r = random_vec(1600, 2);
        let (mut d1, mut d2) = (vec![0.0; 1600], vec![0.0; 1600]);
        p.execute(&mut d1, &l, &r, 0.0)?;
        pt.execute(&mut d2, &l, &r, 0.0)?;
        for (x, y) in d1.iter().zip(&d2) {
            assert!((x - y).abs() < 1e-12);
        }
        assert_eq!(p.flops(), 2.0 * 40.0 * 40.0 * 40.0);
        Ok(())
    }

    #[test]
    fn invalid_patterns_are_errors() {
        let e2 = [2, 2];
        // Label only in dst.
        assert_eq!(
            plan(&[I, L], &e2, &[I, K], &e2, &[K, J], &e2).err(),
            Some(KernelError::UnpairedLabel {
                role: Role::Dst,
                label: L
            })
        );
        // Free label missing from dst.
        assert_eq!(
            plan(&[I], &[2], &[I, K], &e2, &[K, J], &e2).err(),
            Some(KernelError::UnpairedLabel {
                role: Role::Right,
                label: J
            })
        );
        assert_eq!(
            plan(&[J], &[2], &[I, K], &e2, &[K, J], &e2).err(),
            Some(KernelError::UnpairedLabel {
                role: Role::Left,
                label: I
            })
        );
        // Hadamard-style: in dst and both operands.
        assert_eq!(
            plan(&[I, J], &e2, &[I, J], &e2, &[I, J], &e2).err(),
            Some(KernelError::LabelInAllThree { label: I })
        );
        // Trace: a label twice in one operand.
        assert_eq!(
            plan(&[], &[], &[I, I], &e2, &[], &[]).err(),
            Some(KernelError::RepeatedLabel {
                role: Role::Left,
                label: I
            })
        );
        // Extents disagree.
        assert_eq!(
            plan(&[I, J], &e2, &[I, K], &[2, 3], &[K, J], &[4, 2]).err(),
            Some(KernelError::ExtentMismatch {
                label: K,
                first_role: Role::Left,
                first: 3,
                second_role: Role::Right,
                second: 4
            })
        );
        assert_eq!(
            plan(&[I, J], &[3, 2], &[I, K], &e2, &[K, J], &e2).err(),
            Some(KernelError::ExtentMismatch {
                label: I,
                first_role: Role::Dst,
                first: 3,
                second_role: Role::Left,
                second: 2
            })
        );
        // Labels and rank disagree.
        assert_eq!(
            plan(&[I, J], &e2, &[I], &e2, &[K, J], &e2).err(),
            Some(KernelError::LabelRankMismatch {
                role: Role::Left,
                labels: 1,
                rank: 2
            })
        );
    }

    #[test]
    fn wrong_buffer_lengths_are_errors() -> Result<(), KernelError> {
        let e2 = [2, 2];
        let p = plan(&[I, J], &e2, &[I, K], &e2, &[K, J], &e2)?;
        let mut d = [0.0; 4];
        assert!(matches!(
            p.execute(&mut d, &[0.0; 3], &[0.0; 4], 0.0),
            Err(KernelError::LengthMismatch {
                role: Role::Left,
                ..
            })
        ));
        assert!(matches!(
            p.execute(&mut d, &[0.0; 4], &[0.0; 5], 0.0),
            Err(KernelError::LengthMismatch {
                role: Role::Right,
                ..
            })
        ));
        assert!(matches!(
            p.execute(&mut d[..2], &[0.0; 4], &[0.0; 4], 0.0),
            Err(KernelError::LengthMismatch {
                role: Role::Dst,
                ..
            })
        ));
        Ok(())
    }

    /// A random contraction: each label is free-left, free-right or contracted, with an extent
    /// in 1..5, and each of dst, left, right lists its labels in a random order.
    #[derive(Debug, Clone)]
    struct Pattern {
        dst: Vec<Label>,
        left: Vec<Label>,
        right: Vec<Label>,
        extents: Vec<usize>,
    }

    fn pattern() -> impl Strategy<Value = Pattern> {
        crate::testutil::contraction_pattern(5).prop_map(|(dst, left, right, extents)| Pattern {
            dst,
            left,
            right,
            extents,
        })
    }

    /// [`check`] of a random pattern.
    fn check_pattern(p: &Pattern, seed: u64) -> Result<(), KernelError> {
        let ext =
            |l: &[Label]| -> Vec<usize> { l.iter().map(|&x| p.extents[x as usize]).collect() };
        check(
            (&p.dst, &ext(&p.dst)),
            (&p.left, &ext(&p.left)),
            (&p.right, &ext(&p.right)),
            seed,
        )
    }

    /// Patterns of longer extents (3, 8, 9 and 12), where the inner-product and the broadcast
    /// forms apply, at most 300,000 label combinations (the naive loop's work).
    fn long_pattern() -> impl Strategy<Value = Pattern> {
        pattern()
            .prop_map(|p| Pattern {
                extents: p.extents.iter().map(|&e| [3, 8, 9, 12][e % 4]).collect(),
                ..p
            })
            .prop_filter("naive loop too long", |p| {
                p.extents.iter().product::<usize>() <= 300_000
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn contract_matches_naive_at_longer_extents(p in long_pattern(), seed in 0u64..1000) {
            let r = check_pattern(&p, seed);
            prop_assert!(r.is_ok(), "{:?}", r);
        }
    }

    proptest! {
        #[test]
        fn contract_matches_naive(p in pattern(), seed in 0u64..1000) {
            let r = check_pattern(&p, seed);
            prop_assert!(r.is_ok(), "{:?}", r);
        }

        #[test]
        fn broken_patterns_are_errors_not_panics(p in pattern(), drop in 0usize..3, extra in 0u32..3) {
            // Remove one label from one list, or add a stray one: always invalid.
            let mut lists = [p.dst.clone(), p.left.clone(), p.right.clone()];
            let which = drop % 3;
            if lists[which].is_empty() || extra == 0 {
                if lists[which].len() < 6 {
                    lists[which].push(100);
                } else {
                    lists[which].pop();
                }
            } else {
                lists[which].pop();
            }
            let ext = |l: &[Label]| -> Vec<usize> {
                l.iter().map(|&x| p.extents.get(x as usize).copied().unwrap_or(2)).collect()
            };
            let shapes: Vec<Shape> = lists.iter().map(|l| Shape::new(&ext(l))).collect::<Result<_, _>>()?;
            let r = ContractionPlan::new(
                (&lists[0], &shapes[0]),
                (&lists[1], &shapes[1]),
                (&lists[2], &shapes[2]),
            );
            prop_assert!(r.is_err());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn plans_that_add_each_sum_once_give_the_bits_of_a_sum_added_after(
            p in long_pattern(),
            seed in 0u64..1000,
        ) {
            let ext =
                |l: &[Label]| -> Vec<usize> { l.iter().map(|&x| p.extents[x as usize]).collect() };
            let shapes = [&p.dst, &p.left, &p.right].map(|l| Shape::new(&ext(l)));
            let [Ok(ds), Ok(ls), Ok(rs)] = shapes else {
                return Err(TestCaseError::fail("shapes"));
            };
            let plan = ContractionPlan::new((&p.dst, &ds), (&p.left, &ls), (&p.right, &rs))?;
            if plan.adds_each_sum_in_place() {
                let (l, r) = (random_vec(ls.len(), seed), random_vec(rs.len(), seed + 1));
                let x = random_vec(ds.len(), seed + 2);
                let mut t = vec![f64::NAN; ds.len()];
                plan.execute(&mut t, &l, &r, 0.0)?;
                let mut fused = x.clone();
                plan.execute(&mut fused, &l, &r, 1.0)?;
                for i in 0..x.len() {
                    prop_assert_eq!(fused[i].to_bits(), (x[i] + t[i]).to_bits(), "element {}", i);
                }
            }
        }
    }
}
