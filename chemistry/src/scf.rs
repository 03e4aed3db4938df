//! ACES4's SCF helper specials, used by `scf_rhf`, `scf_uhf` and `scf_rhf_coreh`:
//!
//! | special | what |
//! |---|---|
//! | `check_dconf D x` | x = max\|D\| of a density-change block (the convergence measure) |
//! | `a4_get_init_occupation occ flag` | aufbau occupation numbers (1.0 for the occupied orbitals of a spin) |
//! | `a4_return_occupation O occ` | ACES4's (broken) maximum-overlap occupation: equals aufbau |
//! | `a4_david_damp_factor p f` | Davidson's dynamic damping factor from the last energy changes |
//! | `a4_dscale C occ flag` | scales the MO columns of a coefficient block by their occupation |
//! | `set_flags2 b` | no visible effect in ACES4 (a derivative-integral flag every reader overwrites) |
//!
//! `a4_scf_atom` (the atomic guess) needs the integral engine and lives elsewhere; `scf_atom`
//! was never installed in ACES4 and is not registered here either, so executing it is the same
//! "not installed" error.

use std::path::Path;

use sial_superinstructions::special::{Arg, Context, SpecialFn};

use crate::args;
use crate::linalg::{array_of_rank, first_positions, name};

/// The specials of this module: SIAL name, ACES4 signature, function.
pub const SPECIALS: &[(&str, &str, SpecialFn)] = &[
    ("check_dconf", "rw", check_dconf),
    ("a4_get_init_occupation", "wr", a4_get_init_occupation),
    ("a4_return_occupation", "rw", a4_return_occupation),
    ("a4_david_damp_factor", "ru", a4_david_damp_factor),
    ("a4_dscale", "urr", a4_dscale),
    ("set_flags2", "r", set_flags2),
];

/// Davidson damping: the factor by which the damping grows or shrinks in one step.
const DAMP_STEP: f64 = 16.0;
/// Davidson damping: the largest damping factor.
const DAMP_MAX: f64 = 256.0;

/// The file from which ACES4 would read occupation numbers instead of the aufbau ones.
const OCCNUMS_FILE: &str = "OCCNUMS";

/// A spin or offset flag as ACES4 reads it from a double: truncated toward zero (`INT`).
/// NaN and infinities are refused (ACES4's conversion of them is undefined).
fn truncated_flag(arg: &Arg, k: usize) -> Result<f64, String> {
    let value = args::scalar(arg, k)?;
    if !value.is_finite() {
        return Err(format!(
            "{} must be a finite flag (0 for alpha, 1 for beta), got {value}",
            name(arg, k)
        ));
    }
    Ok(value.trunc())
}

/// `check_dconf D x` (rw): x = the largest absolute value among the elements of the rank-2
/// block `D` (0 for an all-zero block; NaNs are skipped, as ACES4's strict `>` does). The
/// programs take the maximum over all blocks and both spins as the SCF convergence measure.
pub fn check_dconf(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [change, result] = args::exactly::<2>(
        args,
        "a density-change block and a scalar for its largest element",
    )?;
    array_of_rank(change, 0, 2)?;
    args::scalar(result, 1)?;
    let largest = change.data.iter().fold(
        0.0,
        |largest: f64, v| {
            if v.abs() > largest { v.abs() } else { largest }
        },
    );
    args::set_scalar(result, 1, largest)
}

/// `a4_get_init_occupation occ flag` (wr): aufbau occupation numbers. `occ` (already zeroed by
/// the runtime) gets 1.0 in its first `nalpha_occupied` elements when the truncated flag is 0,
/// else in its first `nbeta_occupied` elements.
///
/// ACES4 would read the numbers from a file `OCCNUMS` in the working directory if there is one;
/// that format is not supported, so such a file is an error rather than silently ignored.
pub fn a4_get_init_occupation(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [occupation, flag] = args::exactly::<2>(args, "the occupation vector and the spin flag")?;
    array_of_rank(occupation, 0, 1)?;
    let alpha = truncated_flag(flag, 1)? == 0.0;
    if Path::new(OCCNUMS_FILE).exists() {
        return Err(format!(
            "a file {OCCNUMS_FILE} is in the working directory: ACES4 would take the occupation numbers from it, which is not supported (remove it)"
        ));
    }
    let constant = if alpha {
        "nalpha_occupied"
    } else {
        "nbeta_occupied"
    };
    let occupied = usize::try_from(args::int_constant(ctx, constant)?).unwrap_or(0);
    if occupied > occupation.data.len() {
        return Err(format!(
            "{} has {} elements, fewer than the {occupied} occupied orbitals ({constant})",
            name(occupation, 0),
            occupation.data.len()
        ));
    }
    occupation.data[..occupied].fill(1.0);
    Ok(())
}

/// `a4_return_occupation O occ` (rw): ACES4's maximum-overlap occupation, reproduced as
/// implemented there: for every column b of the overlap matrix `O` (current MOs × previous
/// occupied MOs), if some row c among the first `len(occ)` attains the column's largest
/// |O(c,b)|, then occ(b) = 1 — the column index is written, not the row, so with the whole
/// array this is the aufbau occupation of the first `columns` orbitals. `occ` arrives zeroed.
///
/// ACES4 shifts both indices of `O` by the segment offsets of a block; for a block not at the
/// first segments that reads outside the block, so only whole arrays and first-segment blocks
/// are accepted.
pub fn a4_return_occupation(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [overlap, occupation] =
        args::exactly::<2>(args, "the MO overlap matrix and the occupation vector")?;
    array_of_rank(overlap, 0, 2)?;
    array_of_rank(occupation, 1, 1)?;
    let first = first_positions(ctx, overlap, 0, &[0, 1])?;
    if first.iter().any(|&offset| offset != 0) {
        return Err(format!(
            "{} must be the whole array or a block at its first segments (ACES4 would read outside the block)",
            name(overlap, 0)
        ));
    }
    let (rows, columns) = (overlap.shape[0], overlap.shape[1]);
    let candidates = occupation.data.len();
    if candidates > rows || columns > candidates {
        return Err(format!(
            "{} has {candidates} elements but must have as many as {} has rows ({rows}) and no fewer than its columns ({columns})",
            name(occupation, 1),
            name(overlap, 0)
        ));
    }
    for (b, column) in overlap.data.chunks(rows.max(1)).enumerate().take(columns) {
        let largest = column.iter().fold(0.0, |z: f64, v| z.max(v.abs()));
        if column[..candidates].iter().any(|v| v.abs() == largest) {
            occupation.data[b] = 1.0;
        }
    }
    Ok(())
}

/// The energy changes Davidson's damping looks at: `DE = E₀ − E₁`, `DEP = E₁ − E₂` and the
/// running average `DEAVG` the program maintains.
struct EnergyChanges {
    de: f64,
    dep: f64,
    deavg: f64,
}

/// Davidson's dynamic damping update of `damp` (ACES4's `damp_factor`, from ACES II): grows the
/// damping when the energy oscillates or rises, shrinks it when the energy settles, capped at
/// 256. The branches and comparison operators are ACES4's, so borderline and NaN cases go the
/// same way.
fn davidson_damping(changes: &EnergyChanges, damp: f64) -> f64 {
    let EnergyChanges { de, dep, deavg } = *changes;
    let at_least_average = |d: f64| d.max(deavg);
    let damp = if de > 0.0 {
        if dep > 0.0 {
            let d = 4.0 * at_least_average(damp);
            if de < 4.0 * dep {
                if de > 0.25 * dep {
                    (de / dep) * (de / dep) * at_least_average(d)
                } else {
                    d / DAMP_STEP
                }
            } else {
                DAMP_STEP * at_least_average(d)
            }
        } else {
            let mut d = 4.0 * at_least_average(damp);
            if de > 0.5 * deavg {
                d *= DAMP_STEP;
            }
            if de - dep >= 0.2 * deavg {
                d
            } else {
                d / DAMP_STEP
            }
        }
    } else if dep > 0.0 {
        let mut d = 4.0 * at_least_average(damp);
        if -de > deavg {
            d *= DAMP_STEP;
        }
        if -de + dep >= deavg { d } else { d / DAMP_STEP }
    } else if de > dep {
        if de > 0.25 * dep {
            damp / DAMP_STEP
        } else {
            (de / dep) * (de / dep) * at_least_average(damp)
        }
    } else if de.abs() < 2.0 * deavg {
        if de.abs() > 0.5 * deavg {
            damp
        } else {
            damp / DAMP_STEP
        }
    } else {
        DAMP_STEP * at_least_average(damp)
    };
    damp.min(DAMP_MAX)
}

/// `a4_david_damp_factor p f` (ru): updates the damping factor scalar `f` from `p = (DE, DEP,
/// DEAVG)` with Davidson's rules (see [`davidson_damping`]).
pub fn a4_david_damp_factor(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [parameters, factor] = args::exactly::<2>(
        args,
        "the energy changes (DE, DEP, DEAVG) and the damping factor",
    )?;
    array_of_rank(parameters, 0, 1)?;
    let &[de, dep, deavg, ..] = parameters.data.as_slice() else {
        return Err(format!(
            "{} must hold the 3 energy changes DE, DEP, DEAVG, got {} elements",
            name(parameters, 0),
            parameters.data.len()
        ));
    };
    let damp = args::scalar(factor, 1)?;
    let changes = EnergyChanges { de, dep, deavg };
    args::set_scalar(factor, 1, davidson_damping(&changes, damp))
}

/// `a4_dscale C occ flag` (urr): multiplies every MO column j of the rank-2 block `C[mu,p]` by
/// the occupation of its orbital, `occ[offset + j]`, where the offset is the global position of
/// the block's MO segment when the truncated flag is 0 (alpha) or 1 (beta). For any other flag
/// (the programs set the beta flag to −1 after their last iteration) ACES4 leaves the offset at
/// 0 whatever the segment, and so do we. The program then forms `D = Σ_p C·occ·Cᵀ`.
pub fn a4_dscale(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [coefficients, occupation, flag] = args::exactly::<3>(
        args,
        "a coefficient block, the occupation vector and the spin flag",
    )?;
    array_of_rank(coefficients, 0, 2)?;
    array_of_rank(occupation, 1, 1)?;
    let spin = truncated_flag(flag, 2)?;
    let offset = if spin == 0.0 || spin == 1.0 {
        first_positions(ctx, coefficients, 0, &[1])?[1]
    } else {
        0
    };
    let (rows, columns) = (coefficients.shape[0], coefficients.shape[1]);
    let scales = occupation
        .data
        .get(offset..offset + columns)
        .ok_or_else(|| {
            format!(
                "{} has {} elements, too few for orbitals {}..{} of {}",
                name(occupation, 1),
                occupation.data.len(),
                offset + 1,
                offset + columns,
                name(coefficients, 0)
            )
        })?;
    for (column, &scale) in coefficients.data.chunks_mut(rows.max(1)).zip(scales) {
        column.iter_mut().for_each(|v| *v *= scale);
    }
    Ok(())
}

/// `set_flags2 b` (r): ACES4 stores the block's two segment numbers as a derivative-integral
/// (atom, component) flag that every integral routine overwrites before reading, so it has no
/// visible effect; it does nothing here. The block must have at least two indices, as ACES4
/// reads two segment numbers.
pub fn set_flags2(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [flags] = args::exactly::<1>(args, "a block of the flags array")?;
    if flags.shape.len() < 2 {
        return Err(format!(
            "{} must have at least 2 indices, got rank {}",
            name(flags, 0),
            flags.shape.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    fn whole(name: &str, shape: &[usize], data: &[f64]) -> Arg {
        Arg::whole_array(name, shape.to_vec(), data.to_vec())
    }

    // --- check_dconf ---------------------------------------------------------------------

    #[test]
    fn check_dconf_takes_the_largest_magnitude() {
        let mut ctx = Fake::new();
        let block = Arg::block(
            "txx",
            vec![1, 2],
            vec![2, 2],
            vec![-3.0, 2.0, f64::NAN, 1.0],
        );
        let mut args = [block, Arg::scalar("donea", 0.0)];
        check_dconf(&mut ctx, &mut args).expect("check_dconf");
        assert_eq!(args[1].data, vec![3.0]);
        args[0].data = vec![0.0, -0.0, 0.0, 0.0].into();
        check_dconf(&mut ctx, &mut args).expect("zero block");
        assert_eq!(args[1].data, vec![0.0]);
        assert!(ctx.printed.is_empty());
    }

    #[test]
    fn check_dconf_errors() {
        let err = |args: &mut [Arg]| check_dconf(&mut Fake::new(), args).expect_err("must fail");
        let e = err(&mut [whole("t", &[4], &[1.0; 4]), Arg::scalar("x", 0.0)]);
        assert!(
            e.contains("argument 1 (t) must be an array of rank 2"),
            "{e}"
        );
        let e = err(&mut [whole("t", &[2, 2], &[1.0; 4]), whole("x", &[2], &[0.0; 2])]);
        assert!(e.contains("argument 2 must be a scalar"), "{e}");
        let e = err(&mut [whole("t", &[2, 2], &[1.0; 3]), Arg::scalar("x", 0.0)]);
        assert!(e.contains("3 elements"), "{e}");
        let e = err(&mut [whole("t", &[2, 2], &[1.0; 4])]);
        assert!(e.contains("expects 2 arguments"), "{e}");
    }

    // --- occupations ---------------------------------------------------------------------

    fn occupation_context() -> Fake {
        let mut ctx = Fake::new();
        ctx.ints.insert("nalpha_occupied".into(), 3);
        ctx.ints.insert("nbeta_occupied".into(), 2);
        ctx
    }

    fn initial_occupation(ctx: &mut Fake, flag: f64) -> Result<Vec<f64>, String> {
        let mut args = [
            whole("a_occ_nums", &[5], &[0.0; 5]),
            Arg::scalar("zero", flag),
        ];
        a4_get_init_occupation(ctx, &mut args)?;
        Ok(args[0].data.to_vec())
    }

    #[test]
    fn initial_occupation_is_aufbau_per_spin() {
        let mut ctx = occupation_context();
        let alpha = vec![1.0, 1.0, 1.0, 0.0, 0.0];
        let beta = vec![1.0, 1.0, 0.0, 0.0, 0.0];
        assert_eq!(initial_occupation(&mut ctx, 0.0), Ok(alpha.clone()));
        // The flag is truncated toward zero: 0.7 and -0.5 are alpha, anything else beta.
        assert_eq!(initial_occupation(&mut ctx, 0.7), Ok(alpha.clone()));
        assert_eq!(initial_occupation(&mut ctx, -0.5), Ok(alpha));
        assert_eq!(initial_occupation(&mut ctx, 1.0), Ok(beta.clone()));
        assert_eq!(initial_occupation(&mut ctx, -1.0), Ok(beta.clone()));
        assert_eq!(initial_occupation(&mut ctx, 2.0), Ok(beta));
        ctx.ints.insert("nbeta_occupied".into(), 0);
        assert_eq!(initial_occupation(&mut ctx, 1.0), Ok(vec![0.0; 5]));
        assert!(ctx.printed.is_empty());
    }

    #[test]
    fn initial_occupation_errors() {
        let mut ctx = occupation_context();
        ctx.ints.insert("nalpha_occupied".into(), 6);
        let e = initial_occupation(&mut ctx, 0.0).expect_err("too many");
        assert!(
            e.contains("argument 1 (a_occ_nums) has 5 elements, fewer than the 6"),
            "{e}"
        );
        let e = initial_occupation(&mut Fake::new(), 1.0).expect_err("no constant");
        assert!(e.contains("nbeta_occupied"), "{e}");
        let e = initial_occupation(&mut occupation_context(), f64::NAN).expect_err("NaN");
        assert!(e.contains("argument 2 (zero) must be a finite flag"), "{e}");
        let mut args = [whole("occ", &[5, 1], &[0.0; 5]), Arg::scalar("zero", 0.0)];
        let e = a4_get_init_occupation(&mut occupation_context(), &mut args).expect_err("rank");
        assert!(e.contains("rank 1"), "{e}");
    }

    #[test]
    fn return_occupation_occupies_one_orbital_per_column() {
        // ORB_OVLP_A (4 MOs x 2 previous occupied MOs): ACES4 marks the column numbers, so
        // orbitals 1 and 2 are occupied whatever the overlaps (a zero column included).
        let mut ctx = Fake::new();
        let overlap = [0.1, -0.9, 0.3, 0.2, 0.0, 0.0, 0.0, 0.0];
        let mut args = [
            whole("orb_ovlp_a", &[4, 2], &overlap),
            whole("a_occ_nums", &[4], &[0.0; 4]),
        ];
        a4_return_occupation(&mut ctx, &mut args).expect("a4_return_occupation");
        assert_eq!(args[1].data, vec![1.0, 1.0, 0.0, 0.0]);
        // A block at the first segments behaves like the whole array.
        ctx.offsets.insert(("o".into(), 0, 1), 0);
        ctx.offsets.insert(("o".into(), 1, 1), 0);
        let mut args = [
            Arg::block("o", vec![1, 1], vec![4, 3], vec![0.5; 12]),
            whole("occ", &[4], &[0.0; 4]),
        ];
        a4_return_occupation(&mut ctx, &mut args).expect("first-segment block");
        assert_eq!(args[1].data, vec![1.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn return_occupation_errors() {
        let err = |ctx: &mut Fake, args: &mut [Arg]| {
            a4_return_occupation(ctx, args).expect_err("must fail")
        };
        let e = err(
            &mut Fake::new(),
            &mut [whole("o", &[4], &[0.0; 4]), whole("occ", &[4], &[0.0; 4])],
        );
        assert!(
            e.contains("argument 1 (o) must be an array of rank 2, got rank 1"),
            "{e}"
        );
        let e = err(
            &mut Fake::new(),
            &mut [
                whole("o", &[2, 3], &[0.0; 6]),
                whole("occ", &[2], &[0.0; 2]),
            ],
        );
        assert!(e.contains("argument 2 (occ) has 2 elements"), "{e}");
        let e = err(
            &mut Fake::new(),
            &mut [
                whole("o", &[2, 2], &[0.0; 4]),
                whole("occ", &[3], &[0.0; 3]),
            ],
        );
        assert!(e.contains("argument 2 (occ) has 3 elements"), "{e}");
        let mut ctx = Fake::new();
        ctx.offsets.insert(("o".into(), 0, 2), 4);
        ctx.offsets.insert(("o".into(), 1, 1), 0);
        let block = Arg::block("o", vec![2, 1], vec![2, 2], vec![0.0; 4]);
        let e = err(&mut ctx, &mut [block, whole("occ", &[2], &[0.0; 2])]);
        assert!(e.contains("first segments"), "{e}");
    }

    // --- damping -------------------------------------------------------------------------

    /// Runs a4_david_damp_factor with (DE, DEP, DEAVG) and the incoming factor.
    fn damp(de: f64, dep: f64, deavg: f64, factor: f64) -> f64 {
        let mut args = [
            whole("damp_parms", &[3], &[de, dep, deavg]),
            Arg::scalar("damp_factor", factor),
        ];
        a4_david_damp_factor(&mut Fake::new(), &mut args).expect("a4_david_damp_factor");
        args[1].data[0]
    }

    #[test]
    fn damping_energy_falling_twice() {
        // DE > 0, DEP > 0; each value worked out by hand from the notes' table.
        // DE >= 4·DEP: 4·max(0.11, 0.5) = 2, then 16·max(2, 0.5) = 32.
        assert_eq!(damp(1.0, 0.1, 0.5, 0.11), 32.0);
        // DE <= DEP/4: 2 / 16.
        assert_eq!(damp(0.01, 1.0, 0.5, 0.11), 0.125);
        // in between: (0.5/1)² · max(2, 0.5) = 0.5.
        assert_eq!(damp(0.5, 1.0, 0.5, 0.11), 0.5);
        // capped at 256: 4·10 = 40, 16·40 = 640 → 256.
        assert_eq!(damp(1.0, 0.1, 0.5, 10.0), 256.0);
        // DE = 4·DEP exactly takes the growing branch.
        assert_eq!(damp(0.4, 0.1, 0.5, 0.11), 32.0);
    }

    #[test]
    fn damping_energy_falling_after_rising() {
        // DE > 0, DEP <= 0: 4·max(0.11, 0.5) = 2; DE > DEAVG/2 → 32; DE − DEP = 2 >= 0.1 keeps it.
        assert_eq!(damp(1.0, -1.0, 0.5, 0.11), 32.0);
        // 4·max(0.11, 1) = 4; DE = 0.1 is not > 0.5; DE − DEP = 0.1 < 0.2 → 4/16.
        assert_eq!(damp(0.1, 0.0, 1.0, 0.11), 0.25);
    }

    #[test]
    fn damping_energy_rising_after_falling() {
        // DE <= 0, DEP > 0: 2; −DE = 1 > 0.5 → 32; −DE + DEP = 1.5 >= 0.5 keeps it.
        assert_eq!(damp(-1.0, 0.5, 0.5, 0.11), 32.0);
        // 4; −DE = 0.1 not > 1; 0.2 < 1 → 4/16.
        assert_eq!(damp(-0.1, 0.1, 1.0, 0.11), 0.25);
    }

    #[test]
    fn damping_energy_rising_twice() {
        // DE <= 0, DEP <= 0, DE > DEP: DE = −0.1 > DEP/4 = −0.25 → 0.11/16.
        assert_eq!(damp(-0.1, -1.0, 0.2, 0.11), 0.11 / 16.0);
        // DE = −0.5 <= −0.25 → (0.5)² · max(0.11, 0.2) = 0.05.
        assert_eq!(damp(-0.5, -1.0, 0.2, 0.11), 0.25 * 0.2);
        // DE <= DEP <= 0: |DE| = 1 >= 2·0.1 → 16·max(0.11, 0.1) = 1.76.
        assert_eq!(damp(-1.0, -0.5, 0.1, 0.11), 16.0 * 0.11);
        // |DE| = 1 < 2, > 0.5 → unchanged.
        assert_eq!(damp(-1.0, -1.0, 1.0, 0.11), 0.11);
        // |DE| = 0.1 <= 0.5 → 0.11/16.
        assert_eq!(damp(-0.1, -0.05, 1.0, 0.11), 0.11 / 16.0);
        // DE = DEP = DEAVG = 0 (no change at all): |DE| = 0 is not < 2·DEAVG = 0 → grows:
        // 16·max(0.11, 0).
        assert_eq!(damp(0.0, 0.0, 0.0, 0.11), 16.0 * 0.11);
    }

    #[test]
    fn damping_errors() {
        let mut args = [whole("p", &[2], &[1.0, 1.0]), Arg::scalar("f", 0.11)];
        let e = a4_david_damp_factor(&mut Fake::new(), &mut args).expect_err("short");
        assert!(
            e.contains("argument 1 (p) must hold the 3 energy changes"),
            "{e}"
        );
        let mut args = [whole("p", &[3], &[1.0; 3]), whole("f", &[2], &[0.0; 2])];
        let e = a4_david_damp_factor(&mut Fake::new(), &mut args).expect_err("not scalar");
        assert!(e.contains("argument 2 must be a scalar"), "{e}");
        let mut args = [Arg::scalar("p", 1.0), Arg::scalar("f", 0.11)];
        let e = a4_david_damp_factor(&mut Fake::new(), &mut args).expect_err("scalar");
        assert!(e.contains("rank 1"), "{e}");
    }

    // --- a4_dscale -----------------------------------------------------------------------

    /// A TXP[mu,p] block (2 AOs x 3 MOs) in MO segment 2, whose orbitals are 4..6
    /// (offset 3), scaled with occupations (1,1,1,1,0,0,0) and the given flag.
    fn scaled(flag: f64) -> Result<Vec<f64>, String> {
        let mut ctx = Fake::new();
        ctx.offsets.insert(("txp".into(), 0, 1), 0);
        ctx.offsets.insert(("txp".into(), 1, 2), 3);
        let data: Vec<f64> = (1..=6).map(f64::from).collect();
        let mut args = [
            Arg::block("txp", vec![1, 2], vec![2, 3], data),
            whole("a_occ_nums", &[7], &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]),
            Arg::scalar("zero", flag),
        ];
        a4_dscale(&mut ctx, &mut args)?;
        assert!(ctx.printed.is_empty());
        Ok(args[0].data.to_vec())
    }

    #[test]
    fn dscale_uses_the_orbitals_of_the_block() {
        // Flags 0 (alpha) and 1 (beta): orbitals 4, 5, 6 → occupations 1, 0, 0.
        assert_eq!(scaled(0.0), Ok(vec![1.0, 2.0, 0.0, 0.0, 0.0, 0.0]));
        assert_eq!(scaled(1.0), Ok(vec![1.0, 2.0, 0.0, 0.0, 0.0, 0.0]));
        assert_eq!(scaled(1.9), Ok(vec![1.0, 2.0, 0.0, 0.0, 0.0, 0.0]));
        // Any other flag: ACES4 leaves the offset at 0 → occupations 1, 2, 3 → all 1.
        assert_eq!(scaled(-1.0), Ok(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
        // A whole array has offsets 0.
        let mut args = [
            whole("c", &[1, 2], &[2.0, 3.0]),
            whole("occ", &[2], &[0.5, 0.0]),
            Arg::scalar("zero", 0.0),
        ];
        a4_dscale(&mut Fake::new(), &mut args).expect("whole array");
        assert_eq!(args[0].data, vec![1.0, 0.0]);
    }

    #[test]
    fn dscale_errors() {
        let e = scaled(f64::INFINITY).expect_err("infinite flag");
        assert!(e.contains("argument 3 (zero) must be a finite flag"), "{e}");
        let err = |ctx: &mut Fake, args: &mut [Arg]| a4_dscale(ctx, args).expect_err("must fail");
        let flag = || Arg::scalar("zero", 0.0);
        let e = err(
            &mut Fake::new(),
            &mut [
                whole("c", &[2, 2, 1], &[0.0; 4]),
                whole("occ", &[4], &[1.0; 4]),
                flag(),
            ],
        );
        assert!(
            e.contains("argument 1 (c) must be an array of rank 2, got rank 3"),
            "{e}"
        );
        let e = err(
            &mut Fake::new(),
            &mut [
                whole("c", &[2, 3], &[0.0; 6]),
                whole("occ", &[2], &[1.0; 2]),
                flag(),
            ],
        );
        assert!(
            e.contains("argument 2 (occ) has 2 elements, too few for orbitals 1..3"),
            "{e}"
        );
        let block = Arg::block("c", vec![1, 2], vec![2, 2], vec![0.0; 4]);
        let e = err(
            &mut Fake::new(),
            &mut [block, whole("occ", &[4], &[1.0; 4]), flag()],
        );
        assert!(e.contains("cannot locate dimension 2"), "{e}");
        let e = err(
            &mut Fake::new(),
            &mut [
                whole("c", &[2, 2], &[0.0; 4]),
                whole("occ", &[4], &[1.0; 4]),
            ],
        );
        assert!(e.contains("expects 3 arguments"), "{e}");
    }

    // --- set_flags2 ----------------------------------------------------------------------

    #[test]
    fn set_flags2_does_nothing_visible() {
        let mut ctx = Fake::new();
        let mut args = [Arg::block("dflags12", vec![1, 2], vec![1, 1], vec![0.0])];
        set_flags2(&mut ctx, &mut args).expect("set_flags2");
        assert_eq!(args[0].data, vec![0.0]);
        assert!(ctx.printed.is_empty());
        let e = set_flags2(&mut ctx, &mut [Arg::scalar("x", 1.0)]).expect_err("rank 0");
        assert!(e.contains("at least 2 indices"), "{e}");
        let e = set_flags2(&mut ctx, &mut []).expect_err("no argument");
        assert!(e.contains("expects 1 argument"), "{e}");
    }

    #[test]
    fn specials_table() {
        let names: Vec<(&str, &str)> = SPECIALS.iter().map(|(n, s, _)| (*n, *s)).collect();
        assert_eq!(
            names,
            [
                ("check_dconf", "rw"),
                ("a4_get_init_occupation", "wr"),
                ("a4_return_occupation", "rw"),
                ("a4_david_damp_factor", "ru"),
                ("a4_dscale", "urr"),
                ("set_flags2", "r"),
            ]
        );
        assert!(
            !names
                .iter()
                .any(|(n, _)| *n == "scf_atom" || *n == "a4_scf_atom")
        );
    }
}
