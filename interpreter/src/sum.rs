//! Sums of blocks in double-double arithmetic, for `put +=` and `prepare +=`: the result does
//! not depend on the order the terms are added in, nor on how they are grouped. A server sums
//! what the workers send; a worker sums its own terms to a block before sending them (see
//! `worker::sums`), and the server adds that partial sum's high and low parts as two terms.

/// `(hi, lo) += x` in double-double arithmetic: `hi` stays the correctly rounded sum of
/// everything added, whatever the order of the additions (up to a rounding tie).
/// Branch-free (an overflow is selected afterwards), so that loops over blocks vectorise.
#[inline(always)]
fn compensated_add(hi: &mut f64, lo: &mut f64, x: f64) {
    (*hi, *lo) = compensated_sum(*hi, *lo, x);
}

/// `(hi, lo) + x`, as the new `(hi, lo)`.
#[inline(always)]
fn compensated_sum(hi: f64, lo: f64, x: f64) -> (f64, f64) {
    let s = hi + x;
    let b = s - hi;
    let e = (hi - (s - b)) + (x - b);
    let t = lo + e;
    let h = s + t;
    let finite = s.is_finite();
    (
        if finite { h } else { s },
        if finite { t - (h - s) } else { 0.0 },
    )
}

/// `(hi, lo) += x` element by element. Compiled for each vector width the CPU may have, with
/// the same arithmetic (no fused multiply-add) and so the same bits in every version.
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
pub(crate) fn compensated_add_block(hi: &mut [f64], lo: &mut [f64], x: &[f64]) {
    for ((h, l), &x) in hi.iter_mut().zip(lo.iter_mut()).zip(x) {
        compensated_add(h, l, x);
    }
}

/// `(hi, 0) += x` element by element, into a fresh low part: `lo`'s old values are not read,
/// and the bits are those of [`compensated_add_block`] with `lo` all zeros.
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
pub(crate) fn compensated_start_block(hi: &mut [f64], lo: &mut [f64], x: &[f64]) {
    for ((h, l), &x) in hi.iter_mut().zip(lo.iter_mut()).zip(x) {
        (*h, *l) = compensated_sum(*h, 0.0, x);
    }
}

/// `(hi, 0) += v` for every element, as [`compensated_start_block`].
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
pub(crate) fn compensated_start_scalar(hi: &mut [f64], lo: &mut [f64], v: f64) {
    for (h, l) in hi.iter_mut().zip(lo.iter_mut()) {
        (*h, *l) = compensated_sum(*h, 0.0, v);
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

    proptest! {
        /// Starting a low part gives the bits of adding onto a low part of zeros, whatever the
        /// buffer held before (signed zeros and infinities included).
        #[test]
        fn a_started_low_part_is_one_of_zeros(
            pairs in proptest::collection::vec(
                (prop_oneof![any::<f64>(), Just(-0.0), Just(0.0), Just(f64::INFINITY)],
                 prop_oneof![any::<f64>(), Just(-0.0), Just(1e-300)]),
                1..20,
            ),
            old in any::<f64>(),
        ) {
            let (hi, x): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
            let (mut h0, mut l0) = (hi.clone(), vec![0.0; hi.len()]);
            compensated_add_block(&mut h0, &mut l0, &x);
            let (mut h1, mut l1) = (hi.clone(), vec![old; hi.len()]);
            compensated_start_block(&mut h1, &mut l1, &x);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&h0), bits(&h1));
            prop_assert_eq!(bits(&l0), bits(&l1));
            let (mut h0, mut l0) = (hi.clone(), vec![0.0; hi.len()]);
            compensated_add_scalar(&mut h0, &mut l0, x[0]);
            let (mut h1, mut l1) = (hi, vec![old; h0.len()]);
            compensated_start_scalar(&mut h1, &mut l1, x[0]);
            prop_assert_eq!(bits(&h0), bits(&h1));
            prop_assert_eq!(bits(&l0), bits(&l1));
        }
    }

    #[test]
    fn a_scalar_adds_to_every_element() {
        let (mut hi, mut lo) = (vec![1.0, 2.0], vec![0.0, 0.0]);
        compensated_add_scalar(&mut hi, &mut lo, 0.5);
        assert_eq!(hi, vec![1.5, 2.5]);
    }
}
