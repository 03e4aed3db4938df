//! Application specials for the quantum-chemistry programs (SIAL-SPEC §8.5 names them; their
//! semantics here are this project's, documented in docs/specials.md).

use super::{Arg, ArgKind, Context};

/// `energy_denominator_rhf T eps` (signature `ur`): divides every element of the rank-4 block
/// `T[i,a,j,b]` (occupied, virtual, occupied, virtual) by `eps_i - eps_a + eps_j - eps_b`, the
/// closed-shell MP2 denominator, where `eps` is a static array of orbital energies over the
/// molecular orbitals and `i, a, j, b` are the orbitals (global numbers) of each element.
pub fn energy_denominator_rhf(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [t, eps] = args else {
        return Err(format!(
            "expects 2 arguments (a block and the orbital energies), got {}",
            args.len()
        ));
    };
    if t.kind != ArgKind::Block || t.shape.len() != 4 {
        return Err(format!(
            "the first argument must be a rank-4 block, got {}",
            t.describe()
        ));
    }
    if eps.kind != ArgKind::WholeArray || eps.shape.len() != 1 {
        return Err(format!(
            "the second argument must be a whole static array of rank 1 (orbital energies), got {}",
            eps.describe()
        ));
    }
    let eps_start = ctx
        .declared_lower(&eps.name, 0)
        .and_then(|lo| ctx.global_offset(&eps.name, 0, lo))
        .ok_or("cannot locate the orbitals of the orbital-energy array")?;
    let mut first = [0usize; 4];
    for (d, f) in first.iter_mut().enumerate() {
        *f = ctx
            .global_offset(&t.name, d, t.segments[d])
            .ok_or("cannot locate the orbitals of the block")?;
    }
    let energy = |global: usize| -> Result<f64, String> {
        global
            .checked_sub(eps_start)
            .and_then(|k| eps.data.get(k))
            .copied()
            .ok_or_else(|| format!("orbital {} has no energy in {}", global + 1, eps.name))
    };
    let e: Vec<Vec<f64>> = (0..4)
        .map(|d| {
            (0..t.shape[d])
                .map(|x| energy(first[d] + x))
                .collect::<Result<Vec<f64>, String>>()
        })
        .collect::<Result<_, _>>()?;
    let (n0, n1, n2) = (t.shape[0], t.shape[1], t.shape[2]);
    for (k, value) in t.data.iter_mut().enumerate() {
        let (x0, x1, x2, x3) = (
            k % n0,
            (k / n0) % n1,
            (k / (n0 * n1)) % n2,
            k / (n0 * n1 * n2),
        );
        let denominator = e[0][x0] - e[1][x1] + e[2][x2] - e[3][x3];
        if denominator == 0.0 {
            return Err("zero energy denominator".into());
        }
        *value /= denominator;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specials::fake::Fake;

    #[test]
    fn needs_to_know_where_the_orbitals_are() {
        // The fake context cannot place segments; the special must say so, not guess.
        let mut ctx = Fake::new();
        let mut args = [
            Arg::block("t", vec![1, 1, 1, 1], vec![1, 2, 1, 1], vec![1.0, 1.0]),
            Arg::whole_array("eps", vec![3], vec![-1.0, 0.5, 0.25]),
        ];
        let err = energy_denominator_rhf(&mut ctx, &mut args).unwrap_err();
        assert!(err.contains("cannot locate"), "{err}");
        let mut wrong = [
            Arg::scalar("x", 1.0),
            Arg::whole_array("eps", vec![3], vec![0.0; 3]),
        ];
        assert!(energy_denominator_rhf(&mut ctx, &mut wrong).is_err());
    }
}
