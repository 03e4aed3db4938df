//! Helpers of the CIS and EOM-CC programs: the antisymmetrisers of the same-spin doubles
//! (`anti_symm_o`, `anti_symm_v`) and the CIS/Davidson start vectors (`cis_unit_guess`).

use sial_superinstructions::special::{Arg, Context};

use super::{Orbitals, array_of_rank, locate, nth, update_each};
use crate::args;

/// A rank-4 block `X[a,i,b,j]` (dims V,O,V,O) with the orbitals of each dimension.
struct Doubles<'a> {
    x: &'a mut Arg,
    orbitals: Vec<Orbitals>,
}

impl<'a> Doubles<'a> {
    /// Argument 1 as a rank-4 block whose dimensions `pair.0` and `pair.1` cover the same
    /// orbitals (the pair that is antisymmetrised; ACES4 indexes out of range otherwise).
    fn new(
        ctx: &dyn Context,
        args: &'a mut [Arg],
        pair: (usize, usize),
    ) -> Result<Doubles<'a>, String> {
        let [x] = args::exactly::<1>(args, "a rank-4 block")?;
        array_of_rank(x, 0, 4)?;
        let orbitals = locate(ctx, x, 0)?;
        let (p, q) = (orbitals[pair.0], orbitals[pair.1]);
        if p != q {
            return Err(format!(
                "dimensions {} and {} of {} ({}) must cover the same orbitals, they cover {} and {}",
                pair.0 + 1,
                pair.1 + 1,
                nth(0),
                x.describe(),
                p.range_text(),
                q.range_text()
            ));
        }
        Ok(Doubles { x, orbitals })
    }

    /// Column-major position of local (a, i, b, j).
    fn at(&self, a: usize, i: usize, b: usize, j: usize) -> usize {
        let s = &self.x.shape;
        a + s[0] * (i + s[1] * (b + s[2] * j))
    }

    /// `X[to] = −X[from]` for every local (a, i, b, j) with `take(a, i, b, j)`, where `to` is
    /// `swap(a, i, b, j)`; the read and written halves never overlap.
    fn mirror(
        &mut self,
        take: impl Fn(usize, usize, usize, usize) -> bool,
        swap: impl Fn(usize, usize, usize, usize) -> (usize, usize, usize, usize),
    ) {
        let [na, ni, nb, nj] = [0, 1, 2, 3].map(|d| self.x.shape[d]);
        for j in 0..nj {
            for b in 0..nb {
                for i in 0..ni {
                    for a in 0..na {
                        if take(a, i, b, j) {
                            let (a2, i2, b2, j2) = swap(a, i, b, j);
                            let (from, to) = (self.at(a, i, b, j), self.at(a2, i2, b2, j2));
                            self.x.data[to] = -self.x.data[from];
                        }
                    }
                }
            }
        }
    }

    /// Sets to +0.0 every element whose occupied orbitals (dims 2, 4) or virtual orbitals
    /// (dims 1, 3) are the same orbital (global numbers: the pairs may lie in different
    /// segments, where they never coincide).
    fn zero_diagonals(&mut self) {
        let g = self.orbitals.clone();
        let shape = self.x.shape.clone();
        update_each(&shape, &mut self.x.data, |p, v| {
            if g[1].first + p[1] == g[3].first + p[3] || g[0].first + p[0] == g[2].first + p[2] {
                0.0
            } else {
                v
            }
        });
    }

    /// ACES4's special case of `anti_symm_v`: the a = b elements (dims 1 and 3 cover the same
    /// orbitals) become −0.0, nothing else changes.
    fn negative_zero_virtual_diagonal(&mut self) {
        let shape = self.x.shape.clone();
        update_each(&shape, &mut self.x.data, |p, v| {
            if p[0] == p[2] { -0.0 } else { v }
        });
    }
}

/// `anti_symm_o R` (`u`), `R[a,i,b,j]` with dims 2 and 4 over the same occupied orbitals:
/// `R[a,j,b,i] ← −R[a,i,b,j]` for i < j, then every element with i = j or a = b set to 0.
pub(super) fn anti_symm_o(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let mut r = Doubles::new(ctx, args, (1, 3))?;
    r.mirror(|_, i, _, j| i < j, |a, i, b, j| (a, j, b, i));
    r.zero_diagonals();
    Ok(())
}

/// `anti_symm_v R` (`u`), `R[a,i,b,j]` with dims 1 and 3 over the same virtual orbitals:
/// `R[b,i,a,j] ← −R[a,i,b,j]` for a < b, then every element with i = j or a = b set to 0.
///
/// ACES4 quirk, kept so results stay identical: when dimension 2 holds orbital 1 alone, the
/// a = b elements become −0.0 and the i = j elements are not zeroed. No ACES4 test job meets
/// it (orbital 1 is alone in a segment only in frozen-core jobs, which run no EOM).
pub(super) fn anti_symm_v(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let mut r = Doubles::new(ctx, args, (0, 2))?;
    r.mirror(|a, _, b, _| a < b, |a, i, b, j| (b, i, a, j));
    if r.orbitals[1] == (Orbitals { first: 0, count: 1 }) {
        r.negative_zero_virtual_diagonal();
    } else {
        r.zero_diagonals();
    }
    Ok(())
}

/// Diagonal elements above this are never chosen as start vectors (ACES4's initial "best").
const NOT_CHOSEN: f64 = 1e8;
/// What a chosen diagonal element is replaced by, so that it is not chosen again.
const TAKEN: f64 = 1e9;

/// `cis_unit_guess C1_a SHDiag` (`ur`): `C1_a[k,a,i]` (n × V × O) ← n unit vectors, the k-th on
/// the k-th smallest element of the CIS diagonal `SHDiag[a,i]` (V × O).
///
/// Ties go to the element scanned last (columns i outer, rows a inner, test `≤`), exactly as
/// in ACES4, because degenerate excitations have bitwise-equal diagonal elements and the tie
/// decides which start vector is which. Elements above 1e8 (and NaN) are never chosen; when
/// none is left the previous choice repeats, as in ACES4.
pub(super) fn cis_unit_guess(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [c, h] = args::exactly::<2>(
        args,
        "the start vectors C1_a[k,a,i] and the CIS diagonal SHDiag[a,i]",
    )?;
    array_of_rank(c, 0, 3)?;
    array_of_rank(h, 1, 2)?;
    let (n, v, o) = (c.shape[0], c.shape[1], c.shape[2]);
    if h.shape != [v, o] {
        return Err(format!(
            "{} ({}) must be {v} x {o} like dimensions 2 and 3 of {} ({}), it is {} x {}",
            nth(1),
            h.describe(),
            nth(0),
            c.describe(),
            h.shape[0],
            h.shape[1]
        ));
    }
    let mut work = h.data.clone();
    let mut chosen = None;
    c.data.fill(0.0);
    for k in 0..n {
        chosen = smallest(&work).or(chosen);
        let Some(p) = chosen else {
            return Err(format!(
                "no element of {} ({}) is at most {NOT_CHOSEN:e}, so there is no start vector to choose",
                nth(1),
                h.describe()
            ));
        };
        c.data[k + n * p] = 1.0;
        work[p] = TAKEN;
    }
    Ok(())
}

/// Column-major position of the smallest element not above [`NOT_CHOSEN`], the last one among
/// equals.
fn smallest(values: &[f64]) -> Option<usize> {
    let mut best = NOT_CHOSEN;
    let mut at = None;
    for (p, &x) in values.iter().enumerate() {
        if x <= best {
            best = x;
            at = Some(p);
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    /// moa [2,2] for the array `r`: segment 1 = orbitals 1-2, segment 2 = orbitals 3-4.
    fn two_segments() -> Fake {
        let mut ctx = Fake::new();
        for d in 0..4 {
            ctx.offsets.insert(("r".into(), d, 1), 0);
            ctx.offsets.insert(("r".into(), d, 2), 2);
        }
        ctx
    }

    fn numbered(segments: Vec<i32>, shape: Vec<usize>) -> Vec<Arg> {
        let n = shape.iter().product();
        vec![Arg::block(
            "r",
            segments,
            shape,
            (1..=n).map(|v| v as f64).collect(),
        )]
    }

    #[test]
    fn anti_symm_notes_example() {
        // cc_utils.md §6.2: moa [2,2], block [2,1,2,1], values 1..16.
        let mut ctx = two_segments();
        let mut args = numbered(vec![2, 1, 2, 1], vec![2, 2, 2, 2]);
        anti_symm_o(&mut ctx, &mut args).expect("rank 4");
        let o = [
            0., 0., 0., -10., 0., 0., -13., 0., 0., 10., 0., 0., 13., 0., 0., 0.,
        ];
        assert_eq!(args[0].data, o);
        let mut args = numbered(vec![2, 1, 2, 1], vec![2, 2, 2, 2]);
        anti_symm_v(&mut ctx, &mut args).expect("rank 4");
        let v = [
            0., 0., 0., -7., 0., 0., 7., 0., 0., -13., 0., 0., 13., 0., 0., 0.,
        ];
        assert_eq!(args[0].data, v);
    }

    /// Values printed by tests/data/cc/anti_symm.py (cases "o" and "v"): R[a=2, i=1, b=1, j=1]
    /// over moa [2,2] with shape 2×2×2×2 for anti_symm_o (a, b in different segments, so no
    /// a = b zeroing); R[a=2, i=1, b=2, j=2] for anti_symm_v (i, j in different segments).
    #[test]
    fn anti_symm_compares_global_orbitals_across_segments() {
        let mut ctx = two_segments();
        let mut args = numbered(vec![2, 1, 1, 1], vec![2, 2, 2, 2]);
        anti_symm_o(&mut ctx, &mut args).expect("rank 4");
        let o = [
            0., 0., -9., -10., 0., 0., -13., -14., 9., 10., 0., 0., 13., 14., 0., 0.,
        ];
        assert_eq!(args[0].data, o);
        let mut args = numbered(vec![2, 1, 2, 2], vec![2, 2, 2, 2]);
        anti_symm_v(&mut ctx, &mut args).expect("rank 4");
        let v = [
            0., -5., 0., -7., 5., 0., 7., 0., 0., -13., 0., -15., 13., 0., 15., 0.,
        ];
        assert_eq!(args[0].data, v);
    }

    #[test]
    fn anti_symm_v_keeps_the_orbital_one_quirk() {
        // Dimension 2 is orbital 1 alone (moa [1,...]): a = b elements become -0.0 and the
        // i = j element (i = j = orbital 1) survives.
        let mut ctx = Fake::new();
        for d in 0..4 {
            ctx.offsets.insert(("r".into(), d, 1), 0);
            ctx.offsets.insert(("r".into(), d, 2), 1);
        }
        let mut args = numbered(vec![2, 1, 2, 1], vec![2, 1, 2, 1]);
        anti_symm_v(&mut ctx, &mut args).expect("rank 4");
        let bits: Vec<u64> = args[0].data.iter().map(|x| x.to_bits()).collect();
        let expected: Vec<u64> = [-0.0, -3.0, 3.0, -0.0]
            .iter()
            .map(|x: &f64| x.to_bits())
            .collect();
        assert_eq!(bits, expected);
        // anti_symm_o has no such case: i = j = orbital 1 is zeroed.
        let mut args = numbered(vec![2, 1, 2, 1], vec![2, 1, 2, 1]);
        anti_symm_o(&mut ctx, &mut args).expect("rank 4");
        assert_eq!(args[0].data, vec![0.0; 4]);
    }

    #[test]
    fn anti_symm_errors() {
        let mut ctx = two_segments();
        let mut args = numbered(vec![2, 1, 2], vec![2, 2, 2]);
        assert_eq!(
            anti_symm_o(&mut ctx, &mut args),
            Err("argument 1 must be an array of rank 4, got r[2,1,2] (rank 3)".into())
        );
        let mut args = numbered(vec![2, 1, 2, 2], vec![2, 2, 2, 2]);
        assert_eq!(
            anti_symm_o(&mut ctx, &mut args),
            Err("dimensions 2 and 4 of argument 1 (r[2,1,2,2]) must cover the same orbitals, they cover 1 to 2 and 3 to 4".into())
        );
        let mut args = numbered(vec![2, 1, 1, 1], vec![2, 2, 2, 2]);
        assert_eq!(
            anti_symm_v(&mut ctx, &mut args),
            Err("dimensions 1 and 3 of argument 1 (r[2,1,1,1]) must cover the same orbitals, they cover 3 to 4 and 1 to 2".into())
        );
        let mut args = vec![];
        assert_eq!(
            anti_symm_v(&mut ctx, &mut args),
            Err("expects 1 argument (a rank-4 block), got 0".into())
        );
    }

    /// C1_a (n × V × O, filled with noise) and SHDiag (V × O, column-major).
    fn guess_args(n: usize, v: usize, o: usize, h: &[f64]) -> Vec<Arg> {
        vec![
            Arg::whole_array("c1_a", vec![n, v, o], vec![7.0; n * v * o]),
            Arg::whole_array("shdiag", vec![v, o], h.to_vec()),
        ]
    }

    /// The (a, i) (1-based) of the unit vector in each row k of C1_a, checking it is a unit
    /// vector.
    fn units(c: &Arg) -> Vec<(usize, usize)> {
        let (n, v, o) = (c.shape[0], c.shape[1], c.shape[2]);
        (0..n)
            .map(|k| {
                let row: Vec<f64> = (0..v * o).map(|p| c.data[k + n * p]).collect();
                assert_eq!(row.iter().sum::<f64>(), 1.0);
                let p = row.iter().position(|&x| x == 1.0).expect("a unit vector");
                (p % v + 1, p / v + 1)
            })
            .collect()
    }

    #[test]
    fn cis_unit_guess_notes_vectors() {
        // cc_utils.md §14.5: H rows a, columns i = [[1,1],[0.5,0.5],[0.5,2]].
        let mut ctx = Fake::new();
        let mut args = guess_args(4, 3, 2, &[1.0, 0.5, 0.5, 1.0, 0.5, 2.0]);
        cis_unit_guess(&mut ctx, &mut args).expect("guess");
        assert_eq!(units(&args[0]), vec![(2, 2), (3, 1), (2, 1), (1, 2)]);
        assert_eq!(
            args[1].data,
            vec![1.0, 0.5, 0.5, 1.0, 0.5, 2.0],
            "H is kept"
        );
        // H = [[2],[1]], n = 4 > V·O: the last choice repeats.
        let mut args = guess_args(4, 2, 1, &[2.0, 1.0]);
        cis_unit_guess(&mut ctx, &mut args).expect("guess");
        assert_eq!(units(&args[0]), vec![(2, 1), (1, 1), (1, 1), (1, 1)]);
    }

    #[test]
    fn cis_unit_guess_skips_huge_and_nan_elements() {
        let mut ctx = Fake::new();
        let mut args = guess_args(3, 2, 2, &[f64::NAN, 2e8, 1e8, 3.0]);
        cis_unit_guess(&mut ctx, &mut args).expect("guess");
        assert_eq!(units(&args[0]), vec![(2, 2), (1, 2), (1, 2)]);
        let mut args = guess_args(2, 1, 2, &[f64::NAN, 2e8]);
        assert_eq!(
            cis_unit_guess(&mut ctx, &mut args),
            Err("no element of argument 2 (shdiag) is at most 1e8, so there is no start vector to choose".into())
        );
    }

    #[test]
    fn cis_unit_guess_errors() {
        let mut ctx = Fake::new();
        let mut args = guess_args(2, 3, 2, &[0.0; 6]);
        args[1] = Arg::whole_array("shdiag", vec![2, 3], vec![0.0; 6]);
        assert_eq!(
            cis_unit_guess(&mut ctx, &mut args),
            Err("argument 2 (shdiag) must be 3 x 2 like dimensions 2 and 3 of argument 1 (c1_a), it is 2 x 3".into())
        );
        args[1] = Arg::whole_array("shdiag", vec![6], vec![0.0; 6]);
        assert_eq!(
            cis_unit_guess(&mut ctx, &mut args),
            Err("argument 2 must be an array of rank 2, got shdiag (rank 1)".into())
        );
        args[0] = Arg::whole_array("c1_a", vec![3, 2], vec![0.0; 6]);
        assert_eq!(
            cis_unit_guess(&mut ctx, &mut args),
            Err("argument 1 must be an array of rank 3, got c1_a (rank 2)".into())
        );
        assert_eq!(
            cis_unit_guess(&mut ctx, &mut args[..1]),
            Err("expects 2 arguments (the start vectors C1_a[k,a,i] and the CIS diagonal SHDiag[a,i]), got 1".into())
        );
    }
}
