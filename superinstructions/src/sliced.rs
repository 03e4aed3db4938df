//! Contractions summed slice by slice along a label both operands hold outermost.
//!
//! `ai = cadm * dicm` (`rccsd_rhf:787`) sums 12,096 products into each of 504 elements at
//! benzene/6-31G's extents: both operands (2.3 and 2.0 MB) must be copied into GEMM order, and
//! copied whole they leave L2 and are read back from L3 by the GEMM. The summed `m` is the
//! outermost label of both, so the operands' slices along it (`cad` and `dic` for one `m`) are
//! contiguous blocks of the same contraction, and the sum is the sum over the slices: each
//! slice's copies stay in L2 beside the small result (docs/benchmarks.md, "Contractions
//! summed slice by slice").

use crate::contract::ContractionPlan;
use crate::error::KernelError;
use crate::labels::Label;
use crate::shape::Shape;

/// Operands (left and right together) of more bytes than this leave L2 when copied whole.
const OPERANDS_BEYOND: usize = crate::L2_BYTES;
/// A slice's operands take at most this many bytes (a quarter of L2), and at least one step
/// of the outer label: at benzene's extents one step (207 KB) and three ran alike, seven
/// (1.4 MB) 1.2× slower; at `large`'s (640 KB a step), one step ran best.
const SLICE_BYTES: usize = crate::L2_BYTES / 4;
/// Results of at most this many bytes stay in L1 while every slice adds to them.
const RESULT_BYTES: usize = 32 * 1024;

/// The plan of one slice, and how the blocks divide into slices.
#[derive(Clone, Debug)]
pub(crate) struct Sliced {
    slice: ContractionPlan,
    slices: usize,
    /// Elements of one slice of left and of right.
    lens: [usize; 2],
}

impl Sliced {
    /// Slices for a contraction whose whole plan `whole` copies an operand, where the
    /// operands share their outermost label (after unit extents), they leave L2 and dst stays
    /// in L1; `None` elsewhere. `slice_plan` plans one slice's contraction (without slicing).
    pub(crate) fn of(
        dst: &Shape,
        left: (&[Label], &Shape),
        right: (&[Label], &Shape),
        whole: &ContractionPlan,
        slice_plan: impl FnOnce(&Shape, &Shape) -> Result<ContractionPlan, KernelError>,
    ) -> Result<Option<Sliced>, KernelError> {
        let copies = whole.cpu_permutes();
        let operands = 8 * (left.1.len() + right.1.len());
        if !(copies.left || copies.right)
            || operands <= OPERANDS_BEYOND
            || 8 * dst.len() > RESULT_BYTES
        {
            return Ok(None);
        }
        let (Some(l), Some(r)) = (outermost(left.1), outermost(right.1)) else {
            return Ok(None);
        };
        if left.0.get(l) != right.0.get(r) {
            return Ok(None);
        }
        let steps = left.1.extents()[l];
        let per_step = operands / steps;
        let width = (1..=steps)
            .rev()
            .find(|w| steps.is_multiple_of(*w) && (*w == 1 || w * per_step <= SLICE_BYTES))
            .unwrap_or(1);
        if width == steps {
            return Ok(None);
        }
        let narrowed = |s: &Shape, at: usize| {
            let mut ext = s.extents().to_vec();
            ext[at] = width;
            Shape::new(&ext)
        };
        let (ls, rs) = (narrowed(left.1, l)?, narrowed(right.1, r)?);
        Ok(Some(Sliced {
            lens: [ls.len(), rs.len()],
            slice: slice_plan(&ls, &rs)?,
            slices: steps / width,
        }))
    }

    /// The plan each slice runs.
    pub(crate) fn slice(&self) -> &ContractionPlan {
        &self.slice
    }

    pub(crate) fn slices(&self) -> usize {
        self.slices
    }

    /// `dst = beta * dst + Σ left * right`, one slice after the other; the first applies
    /// `beta`, the others add.
    pub(crate) fn execute(
        &self,
        dst: &mut [f64],
        (left, right): (&[f64], &[f64]),
        beta: f64,
    ) -> Result<(), KernelError> {
        let [nl, nr] = self.lens;
        for (j, (l, r)) in left.chunks(nl).zip(right.chunks(nr)).enumerate() {
            let beta = if j == 0 { beta } else { 1.0 };
            self.slice.execute(dst, l, r, beta)?;
        }
        Ok(())
    }
}

/// The outermost dimension of more than one element.
fn outermost(s: &Shape) -> Option<usize> {
    s.extents().iter().rposition(|&e| e > 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batched::Dim;
    use crate::testutil::Letters;

    /// `pattern`'s blocks with virtual labels (`a`–`h`) of `virt` and occupied ones of `occ`.
    fn letters(pattern: &str, virt: usize, occ: usize) -> Letters {
        Letters::new(pattern, &|c| {
            if ('i'..='n').contains(&c) { occ } else { virt }
        })
    }

    fn plan(x: &Letters) -> Result<ContractionPlan, KernelError> {
        let labels = |v: &[Dim]| v.iter().map(|d| d.0).collect::<Vec<_>>();
        let shape = |v: &[Dim]| Shape::new(&v.iter().map(|d| d.1).collect::<Vec<_>>());
        ContractionPlan::new(
            (&labels(&x.dst), &shape(&x.dst)?),
            (&labels(&x.left), &shape(&x.left)?),
            (&labels(&x.right), &shape(&x.right)?),
        )
    }

    /// Benzene's and `large`'s `ai = cadm * dicm` go in slices of one `m`; water's (operands
    /// in L2), a result beyond L1, or operands whose outermost labels differ do not.
    #[test]
    fn long_sums_into_small_results_go_in_slices() -> Result<(), KernelError> {
        let slices = |pattern: &str, virt: usize, occ: usize| -> Result<usize, KernelError> {
            Ok(plan(&letters(pattern, virt, occ))?.cpu_slices())
        };
        assert_eq!(slices("ai=cadm*dicm", 24, 21)?, 21, "benzene");
        assert_eq!(slices("ai=cadm*dicm", 40, 10)?, 10, "large");
        assert_eq!(slices("ai=cadm*dicm", 19, 5)?, 1, "water: operands in L2");
        assert_eq!(slices("aibj=cjbn*aicn", 24, 21)?, 1, "a result of 2 MB");
        assert_eq!(
            slices("ai=cadm*dimc", 24, 21)?,
            1,
            "outermost labels differ"
        );
        // Two steps of `m` (2 × 120 KB) fit a slice.
        assert_eq!(
            plan(&Letters::new("ai=cadm*dicm", &|c| match c {
                'i' => 2,
                'm' => 10,
                _ => 24,
            }))?
            .cpu_slices(),
            5,
            "slices of two steps"
        );
        Ok(())
    }

    /// Every slice's sum lands in dst, with beta applied once: against the naive loop.
    #[test]
    fn slices_sum_to_the_whole() -> Result<(), KernelError> {
        let x = Letters::new("ai=cadm*dicm", &|c| match c {
            'i' => 2,
            'm' => 10,
            _ => 24,
        });
        let p = plan(&x)?;
        assert!(p.cpu_slices() > 1);
        let (l, r) = x.operands();
        for beta in [0.0, 1.0, 0.5] {
            let mut got = x.start();
            let want = x.expected((&l, &r), &got, beta);
            p.execute(&mut got, &l, &r, beta)?;
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                    "beta {beta}: {g} {w}"
                );
            }
        }
        Ok(())
    }
}
