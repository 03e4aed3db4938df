//! `drop_core_in_sip`: the frozen-core approximation of ACES4's `drop_core_in_sial` program,
//! which zeroes the core orbitals' coefficients before the integral transformation.

use sial_superinstructions::special::{Arg, Context};

use super::{array_of_rank, nth};
use crate::args;

/// `drop_core_in_sip C F` (`uu`): `C[mu,i]` (AO × occupied MO coefficients) loses its first
/// `ncore` columns (set to 0), ncore counted from the nuclear charges of the setup (`ncenters`,
/// `charge`); F is checked but untouched. Prints ACES4's line
/// ` Setting first           1 occupied orbitals to zero`.
///
/// The core count is ACES4's (see [`core_of`]), including its quirk beyond neon: it adds the
/// core *electrons* (10, 18, ...) rather than orbitals, so results stay identical to ACES4's.
pub(super) fn drop_core_in_sip(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [mo, fock] = args::exactly::<2>(args, "the occupied MO coefficients and the Fock matrix")?;
    array_of_rank(mo, 0, 2)?;
    array_of_rank(fock, 1, 2)?;
    let ncore = core_orbitals(ctx)?;
    let (rows, columns) = (mo.shape[0], mo.shape[1]);
    if ncore > columns {
        return Err(format!(
            "error, drop_core greater than occupied space: the cores need {ncore} orbitals, {} ({}) has {columns}",
            nth(0),
            mo.describe()
        ));
    }
    ctx.print(&format!(
        " Setting first{ncore:>12} occupied orbitals to zero\n"
    ));
    mo.data[..rows * ncore].fill(0.0);
    Ok(())
}

/// The number of core orbitals to drop: the sum of [`core_of`] over the first `ncenters`
/// nuclear charges, printing ACES4's warnings for krypton and xenon cores.
fn core_orbitals(ctx: &mut dyn Context) -> Result<usize, String> {
    let atoms = args::int_constant(ctx, "ncenters")?;
    let (_, charges) = args::array(ctx, "charge")?;
    // A Fortran loop 1..ncenters runs no times for ncenters <= 0.
    let atoms = usize::try_from(atoms).unwrap_or(0);
    let Some(charges) = charges.get(..atoms) else {
        return Err(format!(
            "the setup's charge array has {} elements for ncenters = {atoms} atoms",
            charges.len()
        ));
    };
    let mut ncore = 0;
    for &charge in charges {
        let (count, warning) = core_of(charge);
        if let Some(warning) = warning {
            ctx.print(warning);
        }
        ncore += count;
    }
    Ok(ncore)
}

/// ACES4's core count for nuclear charge `charge` (truncated to an integer, as Fortran's
/// conversion does): none up to helium, 1 up to neon, then 10, 18, 36, 54 (ACES4's numbers,
/// the electrons of the noble-gas core), with ACES4's warning for the last two.
fn core_of(charge: f64) -> (usize, Option<&'static str>) {
    match charge.trunc() {
        z if z <= 2.0 => (0, None),
        z if z <= 10.0 => (1, None),
        z if z <= 18.0 => (10, None),
        z if z <= 36.0 => (18, None),
        z if z <= 54.0 => (36, Some(" Warning: dropping krypton core\n")),
        _ => (54, Some(" Serious warning: dropping xenon core\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    fn setup(charges: &[f64]) -> Fake {
        let mut ctx = Fake::new();
        ctx.ints.insert("ncenters".into(), charges.len() as i32);
        ctx.arrays
            .insert("charge".into(), (vec![charges.len()], charges.to_vec()));
        ctx
    }

    /// tc (rows × columns, elements 1, 2, ...) and fock_a (3 × 3 of 0.5).
    fn tc_and_fock(rows: usize, columns: usize) -> Vec<Arg> {
        let n = rows * columns;
        vec![
            Arg::whole_array(
                "tc",
                vec![rows, columns],
                (1..=n).map(|v| v as f64).collect(),
            ),
            Arg::whole_array("fock_a", vec![3, 3], vec![0.5; 9]),
        ]
    }

    #[test]
    fn water_drops_the_oxygen_core() {
        // cc_utils.md §14.6 (lccd_test): charges [8,1,1] -> column 1 zeroed.
        let mut ctx = setup(&[8.0, 1.0, 1.0]);
        let mut args = tc_and_fock(3, 5);
        drop_core_in_sip(&mut ctx, &mut args).expect("water");
        let mut expected: Vec<f64> = (1..=15).map(|v| v as f64).collect();
        expected[..3].fill(0.0);
        assert_eq!(args[0].data, expected);
        assert_eq!(args[1].data, vec![0.5; 9], "the Fock matrix is untouched");
        assert_eq!(
            ctx.printed,
            " Setting first           1 occupied orbitals to zero\n"
        );
    }

    #[test]
    fn hydrogen_only_drops_nothing_but_still_prints() {
        let mut ctx = setup(&[1.0, 1.0]);
        let mut args = tc_and_fock(2, 1);
        drop_core_in_sip(&mut ctx, &mut args).expect("H2");
        assert_eq!(args[0].data, vec![1.0, 2.0]);
        assert_eq!(
            ctx.printed,
            " Setting first           0 occupied orbitals to zero\n"
        );
    }

    #[test]
    fn core_counts_follow_aces4() {
        let counts: Vec<usize> = [
            2.9, 3.0, 10.0, 11.0, 18.0, 19.0, 36.0, 37.0, 54.0, 55.0, -1.0,
        ]
        .iter()
        .map(|&z| core_of(z).0)
        .collect();
        assert_eq!(counts, vec![0, 1, 1, 10, 10, 18, 18, 36, 36, 54, 0]);
    }

    #[test]
    fn heavy_atoms_print_aces4s_warnings() {
        let mut ctx = setup(&[37.0, 55.0]);
        let mut args = tc_and_fock(1, 91);
        drop_core_in_sip(&mut ctx, &mut args).expect("Rb Cs");
        // 36 + 54 columns zeroed, the last one kept.
        assert_eq!(args[0].data[90], 91.0);
        assert_eq!(args[0].data[..90], [0.0; 90]);
        assert_eq!(
            ctx.printed,
            " Warning: dropping krypton core\n Serious warning: dropping xenon core\n Setting first          90 occupied orbitals to zero\n"
        );
    }

    #[test]
    fn more_core_than_occupied_orbitals_is_an_error() {
        // cc_utils.md §14.6: charges [9,17] -> 1 + 10 = 11 > 5 columns.
        let mut ctx = setup(&[9.0, 17.0]);
        let mut args = tc_and_fock(3, 5);
        assert_eq!(
            drop_core_in_sip(&mut ctx, &mut args),
            Err("error, drop_core greater than occupied space: the cores need 11 orbitals, argument 1 (tc) has 5".into())
        );
        assert_eq!(ctx.printed, "");
        assert_eq!(args[0].data[0], 1.0);
    }

    #[test]
    fn drop_core_errors() {
        let mut ctx = setup(&[8.0]);
        let mut args = tc_and_fock(3, 5);
        args[1] = Arg::whole_array("fock_a", vec![9], vec![0.0; 9]);
        assert_eq!(
            drop_core_in_sip(&mut ctx, &mut args),
            Err("argument 2 must be an array of rank 2, got fock_a (rank 1)".into())
        );
        let mut args = tc_and_fock(3, 5);
        args[0] = Arg::whole_array("tc", vec![15], vec![0.0; 15]);
        assert_eq!(
            drop_core_in_sip(&mut ctx, &mut args),
            Err("argument 1 must be an array of rank 2, got tc (rank 1)".into())
        );
        let mut args = tc_and_fock(3, 5);
        ctx.ints.insert("ncenters".into(), 2);
        assert_eq!(
            drop_core_in_sip(&mut ctx, &mut args),
            Err("the setup's charge array has 1 elements for ncenters = 2 atoms".into())
        );
        ctx.arrays.clear();
        assert_eq!(
            drop_core_in_sip(&mut ctx, &mut args),
            Err("the setup has no predefined array charge".into())
        );
        ctx.ints.clear();
        assert_eq!(
            drop_core_in_sip(&mut ctx, &mut args),
            Err(
                "the setup has no predefined int ncenters (give it in the job file or with --set)"
                    .into()
            )
        );
        assert_eq!(
            drop_core_in_sip(&mut ctx, &mut args[..1]),
            Err(
                "expects 2 arguments (the occupied MO coefficients and the Fock matrix), got 1"
                    .into()
            )
        );
    }
}
