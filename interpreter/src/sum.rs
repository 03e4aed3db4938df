//! Sums of blocks in double-double arithmetic, for `put +=` and `prepare +=`: the result does
//! not depend on the order the terms are added in, nor on how they are grouped. A server sums
//! what the workers send; a worker sums its own terms to a block before sending them (see
//! `worker::sums`), and the server adds that partial sum's high and low parts as two terms.

/// `(hi, lo) += x` in double-double arithmetic: `hi` stays the correctly rounded sum of
/// everything added, whatever the order of the additions (up to a rounding tie).
/// Branch-free (an overflow is selected afterwards), so that loops over blocks vectorise.
#[inline(always)]
fn compensated_add(hi: &mut f64, lo: &mut f64, x: f64) {
    let s = *hi + x;
    let b = s - *hi;
    let e = (*hi - (s - b)) + (x - b);
    let t = *lo + e;
    let h = s + t;
    let finite = s.is_finite();
    *lo = if finite { t - (h - s) } else { 0.0 };
    *hi = if finite { h } else { s };
}

/// `(hi, lo) += x` element by element. Compiled for each vector width the CPU may have, with
/// the same arithmetic (no fused multiply-add) and so the same bits in every version.
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
pub(crate) fn compensated_add_block(hi: &mut [f64], lo: &mut [f64], x: &[f64]) {
    for ((h, l), &x) in hi.iter_mut().zip(lo.iter_mut()).zip(x) {
        compensated_add(h, l, x);
    }
}

/// `(hi, lo) += v` for every element, as [`compensated_add_block`].
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
pub(crate) fn compensated_add_scalar(hi: &mut [f64], lo: &mut [f64], v: f64) {
    for (h, l) in hi.iter_mut().zip(lo.iter_mut()) {
        compensated_add(h, l, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The double-double sum of `terms`, one term at a time, onto `start`.
    fn sum(start: f64, terms: &[f64]) -> f64 {
        let (mut hi, mut lo) = ([start], [0.0]);
        for &t in terms {
            compensated_add_block(&mut hi, &mut lo, &[t]);
        }
        hi[0]
    }

    #[test]
    fn cancelling_terms_leave_what_plain_sums_lose() {
        // Plain f64 sums give 0 or 2 here, depending on the order.
        let terms = [1e16, 1.0, -1e16, 1.0];
        assert_eq!(sum(0.0, &terms), 2.0);
        assert_eq!(sum(0.0, &[1.0, 1e16, 1.0, -1e16]), 2.0);
    }

    proptest! {
        /// A worker's partial sums, added as their high and low parts, give the server the
        /// bits that the terms added one by one give.
        #[test]
        fn grouped_sums_equal_the_sum_of_the_terms(
            start in -1e3f64..1e3,
            terms in proptest::collection::vec(-1e6f64..1e6, 1..40),
            cut in 0usize..40,
            reversed in any::<bool>(),
        ) {
            let direct = sum(start, &terms);
            let cut = cut.min(terms.len());
            let (first, second) = terms.split_at(cut);
            let (mut hi, mut lo) = ([start], [0.0]);
            for group in [first, second] {
                let mut group = group.to_vec();
                if reversed {
                    group.reverse();
                }
                let Some((&head, rest)) = group.split_first() else { continue };
                let (mut gh, mut gl) = ([head], [0.0]);
                for &t in rest {
                    compensated_add_block(&mut gh, &mut gl, &[t]);
                }
                compensated_add_block(&mut hi, &mut lo, &gh);
                compensated_add_block(&mut hi, &mut lo, &gl);
            }
            prop_assert_eq!(hi[0].to_bits(), direct.to_bits());
        }
    }

    #[test]
    fn a_scalar_adds_to_every_element() {
        let (mut hi, mut lo) = (vec![1.0, 2.0], vec![0.0, 0.0]);
        compensated_add_scalar(&mut hi, &mut lo, 0.5);
        assert_eq!(hi, vec![1.5, 2.5]);
    }
}
