//! `a4_scf_atom` (wwrrrr): ACES4's atomic UHF guess.
//!
//! `execute a4_scf_atom Da Db oed_kin oed_nai oed_ovl atom`: a small UHF calculation on one atom
//! (its own basis functions and nucleus only), whose α and β densities land in the atom's
//! diagonal block of `Da` and `Db` (everything else zero). The SCF programs add the densities of
//! all atoms and start from half their sum.
//!
//! The procedure is ACES4's: electrons from the atom's charge (H: one α electron; otherwise
//! ⌊Z⌋/2 β and the rest α), the core Hamiltonian with the atom's own nucleus, canonical
//! orthogonalisation of the atom's block of the molecular overlap (`oed_ovl`), the core guess,
//! then iterations of `F_σ = h + J[Dα+Dβ] − K[Dσ]` with ACES4's DIIS (its history slots, including
//! the error vectors that stop moving once the window is full) until the largest density change
//! is below `scf_conv` or `scf_iter` iterations have run.
//!
//! Atoms such as O (4 α, 4 β) occupy two of three degenerate 2p orbitals; which two is decided
//! by the eigensolver's basis of the degenerate space, so the guess can differ from ACES4's by a
//! rotation (see the notes). Only the molecular SCF it starts must agree. `oed_kin` and
//! `oed_nai` are not used (ACES4 uses their storage only when reading `ca.data`/`cb.data`,
//! which is not supported).

use std::path::Path;

use sial_superinstructions::special::{Arg, Context};

use super::basis::{BasisSet, Nuclei};
use super::engine::{OneElectron, pair};
use super::fock::coulomb_exchange;
use super::with_basis;
use crate::args;
use crate::linalg::{inverse_sqrt_eigen, lindep_threshold, solve_diis, symmetric_eigen};

/// Files from which ACES4 would read MO coefficients instead of running the atomic SCF.
const MO_FILES: [&str; 2] = ["ca.data", "cb.data"];

/// The iteration controls from the setup.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Settings {
    /// `scf_iter`: the most iterations.
    iterations: usize,
    /// `scf_hist`: DIIS history length.
    history: usize,
    /// `scf_beg`: the first iteration stored in the history.
    start: usize,
    /// `scf_conv`: converged when every density change is below it.
    convergence: f64,
    /// Overlap eigenvalues below it are dropped (`lindep_tol`).
    lindep: f64,
}

impl Settings {
    fn from_setup(ctx: &dyn Context) -> Result<Settings, String> {
        let count = |name: &str, least: i32| -> Result<usize, String> {
            let v = args::int_constant(ctx, name)?;
            usize::try_from(v)
                .ok()
                .filter(|_| v >= least)
                .ok_or_else(|| format!("the setup's {name} is {v}: it must be at least {least}"))
        };
        let convergence = ctx
            .scalar_constant("scf_conv")
            .ok_or("the setup has no predefined scalar scf_conv")?;
        Ok(Settings {
            iterations: count("scf_iter", 0)?,
            history: count("scf_hist", 1)?,
            start: count("scf_beg", 1)?,
            convergence,
            lindep: lindep_threshold(ctx),
        })
    }
}

/// The α and β electron counts ACES4 gives an atom of charge `z`: one α electron for exactly
/// 1.0, otherwise ⌊z⌋/2 β electrons and the rest α (an open shell is high-spin by one).
fn electrons(z: f64) -> [usize; 2] {
    if z == 1.0 {
        return [1, 0];
    }
    let total = z.trunc().max(0.0) as usize;
    [total - total / 2, total / 2]
}

/// The shells of atom `t` (0-based): from the setup's `atom` array, or, without it, the shells
/// centred exactly on the atom.
fn atom_shells(ctx: &dyn Context, basis: &BasisSet, t: usize) -> Result<Vec<usize>, String> {
    let Some((_, atoms)) = ctx.predefined_int_array("atom") else {
        let at = basis.nuclei.positions[t];
        return Ok((0..basis.shells.len())
            .filter(|&s| basis.shells[s].center == at)
            .collect());
    };
    if atoms.len() != basis.shells.len() {
        return Err(format!(
            "the setup's atom has {} entries, but nshells is {}",
            atoms.len(),
            basis.shells.len()
        ));
    }
    Ok((0..atoms.len())
        .filter(|&s| atoms[s] == t as i64 + 1)
        .collect())
}

/// Checks that argument `k` is a whole n × n matrix.
fn full_matrix(arg: &Arg, k: usize, n: usize) -> Result<(), String> {
    let (r, c) = args::matrix(arg, k)?;
    if (r, c) != (n, n) || arg.data.len() != n * n {
        return Err(format!(
            "argument {} ({}) is {r} x {c}: it must be the whole AO x AO matrix ({n} x {n})",
            k + 1,
            arg.describe()
        ));
    }
    Ok(())
}

/// ACES4 refuses to build a guess when the orbital counts do not add up to the basis size.
fn check_orbital_counts(ctx: &dyn Context, nao: usize) -> Result<(), String> {
    let nbf = match ctx.int_constant("nbasis_funcs") {
        Some(v) if usize::try_from(v).ok() != Some(nao) => {
            return Err(format!(
                "the setup's nbasis_funcs is {v}, but the basis set has {nao} functions"
            ));
        }
        _ => nao as i64,
    };
    for spin in ["alpha", "beta"] {
        let occ = args::int_constant(ctx, &format!("n{spin}_occupied"))?;
        let vir = args::int_constant(ctx, &format!("n{spin}_virtual"))?;
        if i64::from(occ) + i64::from(vir) != nbf {
            return Err(
                "The total number of alpha or beta orbitals are not equal to the total \
                        number of atomic basis functions.This is not allowed during HF guess \
                        generation."
                    .into(),
            );
        }
    }
    Ok(())
}

/// Column-major n × n products: `aᵀ·b` when `transpose_a`, else `a·b`.
fn product(a: &[f64], transpose_a: bool, b: &[f64], n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for j in 0..n {
        for k in 0..n {
            let bkj = b[k + n * j];
            if bkj == 0.0 {
                continue;
            }
            for i in 0..n {
                let aik = if transpose_a {
                    a[k + n * i]
                } else {
                    a[i + n * k]
                };
                c[i + n * j] += aik * bkj;
            }
        }
    }
    c
}

/// One atom's UHF problem: its basis (renumbered), core Hamiltonian, orthogonaliser, electrons.
struct Atom {
    basis: BasisSet,
    n: usize,
    h0: Vec<f64>,
    /// Q = U·diag(1/√s) of the atom's overlap block (dropped directions are zero columns).
    q: Vec<f64>,
    occupied: [usize; 2],
}

impl Atom {
    /// Orbitals of Fock matrix `f`: diagonalise QᵀFQ (ACES4's eigensolver and phase rule) and
    /// back-transform.
    fn orbitals(&self, f: &[f64]) -> Result<Vec<f64>, String> {
        let fq = product(f, false, &self.q, self.n);
        let qfq = product(&self.q, true, &fq, self.n);
        let eig =
            symmetric_eigen(&qfq, self.n).map_err(|e| format!("the atomic Fock matrix {e}"))?;
        Ok(product(&self.q, false, &eig.vectors, self.n))
    }

    /// D = C_occ C_occᵀ over the first `nocc` columns.
    fn density(&self, c: &[f64], nocc: usize) -> Vec<f64> {
        let n = self.n;
        let mut d = vec![0.0; n * n];
        for k in 0..nocc {
            let col = &c[n * k..n * (k + 1)];
            for j in 0..n {
                for i in 0..n {
                    d[i + n * j] += col[i] * col[j];
                }
            }
        }
        d
    }

    /// F_σ = h + J[Dα+Dβ] − K[Dσ].
    fn fock(&self, d: &[Vec<f64>; 2]) -> [Vec<f64>; 2] {
        let dt: Vec<f64> = d[0].iter().zip(&d[1]).map(|(a, b)| a + b).collect();
        let (j, k) = coulomb_exchange(&self.basis, &dt, [&d[0], &d[1]]);
        k.map(|kx| {
            self.h0
                .iter()
                .zip(&j)
                .zip(&kx)
                .map(|((h, j), k)| h + j - k)
                .collect()
        })
    }

    /// The DIIS error vector C_virᵀ F C_occ (virtual index fastest).
    fn error(&self, c: &[f64], f: &[f64], nocc: usize) -> Vec<f64> {
        let n = self.n;
        let fc = product(f, false, c, n);
        let mut e = Vec::with_capacity((n - nocc) * nocc);
        for i in 0..nocc {
            for a in nocc..n {
                e.push((0..n).map(|p| c[p + n * a] * fc[p + n * i]).sum());
            }
        }
        e
    }
}

/// ACES4's atomic DIIS history: Fock matrices and (α, β concatenated) error vectors in slots.
struct History {
    focks: Vec<Option<[Vec<f64>; 2]>>,
    errors: Vec<Option<Vec<f64>>>,
}

impl History {
    fn new(slots: usize) -> History {
        History {
            focks: vec![None; slots],
            errors: vec![None; slots],
        }
    }

    /// Extrapolates from slots 1..=k: F = Σ c_m F_m with Pulay's coefficients.
    fn extrapolate(&self, k: usize) -> Result<[Vec<f64>; 2], String> {
        let errors: Vec<&Vec<f64>> = self.errors[..k].iter().flatten().collect();
        let focks: Vec<&[Vec<f64>; 2]> = self.focks[..k].iter().flatten().collect();
        if errors.len() != k || focks.len() != k {
            return Err("atom DIIS history has an empty slot".into());
        }
        let mut b = vec![0.0; k * k];
        for (m, em) in errors.iter().enumerate() {
            for (l, el) in errors.iter().enumerate() {
                b[m + k * l] = em.iter().zip(el.iter()).map(|(x, y)| x * y).sum();
            }
        }
        let c = solve_diis(&b, k).map_err(|e| format!("Error in atom DIIS {}", e.info))?;
        let size = focks[0][0].len();
        Ok([0, 1].map(|spin| {
            let mut f = vec![0.0; size];
            for (cm, fm) in c.iter().zip(&focks) {
                for (x, y) in f.iter_mut().zip(&fm[spin]) {
                    *x += cm * y;
                }
            }
            f
        }))
    }
}

/// Runs the atomic UHF and returns the converged (or last) α and β densities.
fn solve(atom: &Atom, settings: &Settings) -> Result<[Vec<f64>; 2], String> {
    let (ds, mh) = (settings.start, settings.history);
    let full = mh + ds - 1;
    let h = [atom.h0.clone(), atom.h0.clone()];
    let mut c = [atom.orbitals(&h[0])?, atom.orbitals(&h[1])?];
    let mut d = [0, 1].map(|s| atom.density(&c[s], atom.occupied[s]));
    let mut history = History::new(mh);
    for iter in 1..=settings.iterations {
        let mut f = atom.fock(&d);
        if iter >= ds {
            let slot = if iter < full { iter - ds } else { mh - 1 };
            let mut e = atom.error(&c[0], &f[0], atom.occupied[0]);
            e.extend(atom.error(&c[1], &f[1], atom.occupied[1]));
            history.errors[slot] = Some(e);
            history.focks[slot] = Some(f.clone());
        }
        if iter > ds {
            let k = if iter < full { iter - ds + 1 } else { mh };
            f = history.extrapolate(k)?;
            if iter >= full {
                history.focks.rotate_left(1);
                history.focks[mh - 1] = Some(f.clone());
            }
        }
        c = [atom.orbitals(&f[0])?, atom.orbitals(&f[1])?];
        let new = [0, 1].map(|s| atom.density(&c[s], atom.occupied[s]));
        let change = (0..2)
            .flat_map(|s| new[s].iter().zip(&d[s]).map(|(a, b)| (a - b).abs()))
            .fold(0.0, f64::max);
        d = new;
        if change < settings.convergence {
            break;
        }
    }
    Ok(d)
}

/// Sets up atom `t`'s problem from the basis and the molecular overlap `s` (nao × nao), or
/// `None` for an atom without electrons.
fn atom_problem(
    ctx: &dyn Context,
    basis: &BasisSet,
    s: &[f64],
    t: usize,
    lindep: f64,
) -> Result<Option<(Atom, Vec<usize>)>, String> {
    let occupied = electrons(basis.nuclei.charges[t]);
    if occupied[0] == 0 {
        return Ok(None);
    }
    let shells = atom_shells(ctx, basis, t)?;
    let nucleus = Nuclei {
        positions: vec![basis.nuclei.positions[t]],
        charges: vec![basis.nuclei.charges[t]],
    };
    let sub = basis.subset(&shells, nucleus);
    let aos: Vec<usize> = shells
        .iter()
        .flat_map(|&sh| basis.shells[sh].first..basis.shells[sh].end())
        .collect();
    let n = aos.len();
    if occupied[0] > n {
        return Err(format!(
            "atom {} has {} alpha electrons but only {n} basis functions",
            t + 1,
            occupied[0]
        ));
    }
    let charges = sub.nuclei.point_charges();
    let mut h0 = vec![0.0; n * n];
    for m in &sub.shells {
        for k in &sub.shells {
            for op in [OneElectron::Kinetic, OneElectron::Nuclear(&charges)] {
                let b = &pair(&sub, op, m, k)[0];
                for j in 0..k.len() {
                    for i in 0..m.len() {
                        h0[m.first + i + n * (k.first + j)] += b[i + m.len() * j];
                    }
                }
            }
        }
    }
    let nao = basis.nao;
    let s_at: Vec<f64> = (0..n * n)
        .map(|x| s[aos[x % n] + nao * aos[x / n]])
        .collect();
    let inv = inverse_sqrt_eigen(&s_at, n, lindep)
        .map_err(|e| format!("the overlap block of atom {} {e}", t + 1))?;
    let q: Vec<f64> = (0..n * n)
        .map(|x| inv.vectors[x] * inv.diagonal[x / n])
        .collect();
    let atom = Atom {
        basis: sub,
        n,
        h0,
        q,
        occupied,
    };
    Ok(Some((atom, aos)))
}

/// `a4_scf_atom Da Db oed_kin oed_nai oed_ovl atom` (wwrrrr): the atomic UHF densities of atom
/// number `atom` (truncated) into its diagonal block of `Da` and `Db`; `oed_ovl` holds the
/// molecular overlap matrix.
pub fn a4_scf_atom(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [da, db, kin, nai, ovl, which] = args::exactly::<6>(
        args,
        "Da, Db, oed_kin, oed_nai, the overlap matrix, the atom number",
    )?;
    with_basis(ctx, |ctx, basis| {
        let n = basis.nao;
        full_matrix(da, 0, n)?;
        full_matrix(db, 1, n)?;
        args::matrix(kin, 2)?;
        args::matrix(nai, 3)?;
        full_matrix(ovl, 4, n)?;
        let value = args::scalar(which, 5)?;
        let natoms = basis.nuclei.charges.len();
        let t = Some(value.trunc())
            .filter(|v| *v >= 1.0 && *v <= natoms as f64)
            .ok_or_else(|| {
                format!("argument 6 must be an atom number from 1 to {natoms}, got {value}")
            })? as usize
            - 1;
        check_orbital_counts(ctx, n)?;
        if let Some(file) = MO_FILES.iter().find(|f| Path::new(f).exists()) {
            return Err(format!(
                "a file {file} is in the working directory: ACES4 would build the guess from \
                 the MO coefficients in it, which is not supported (remove it)"
            ));
        }
        let settings = Settings::from_setup(ctx)?;
        da.data.fill(0.0);
        db.data.fill(0.0);
        let Some((atom, aos)) = atom_problem(ctx, basis, &ovl.data, t, settings.lindep)? else {
            return Ok(());
        };
        let d = solve(&atom, &settings).map_err(|e| format!("atom {}: {e}", t + 1))?;
        let m = atom.n;
        for (out, ds) in [(&mut da.data, &d[0]), (&mut db.data, &d[1])] {
            for (x, v) in ds.iter().enumerate() {
                out[aos[x % m] + n * aos[x / m]] = *v;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{Case, max_diff};
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    /// Runs the special for atom `t` (1-based) of a case, with the case's (PySCF) overlap.
    fn run(ctx: &mut Fake, case: &Case, t: f64) -> Result<Vec<Arg>, String> {
        let s = case.reals("S");
        let n = (s.len() as f64).sqrt() as usize;
        let whole = |name: &str, d: Vec<f64>| Arg::whole_array(name, vec![n, n], d);
        let mut args = vec![
            whole("fockrohf_a", vec![7.0; n * n]),
            whole("fockrohf_b", vec![7.0; n * n]),
            whole("oed_kin", vec![0.0; n * n]),
            whole("oed_nai", vec![0.0; n * n]),
            whole("oed_ovl", s),
            Arg::scalar("etemp", t),
        ];
        a4_scf_atom(ctx, &mut args).map(|()| args)
    }

    /// The block of the column-major n × n `m` over AOs `aos`.
    fn block(m: &[f64], n: usize, aos: std::ops::Range<usize>) -> Vec<f64> {
        let k = aos.len();
        (0..k * k)
            .map(|x| m[aos.start + x % k + n * (aos.start + x / k)])
            .collect()
    }

    /// ½ Σ_σ (h + F_σ)·D_σ of an atom's densities, and checks tr(D_σ S) = n_σ and D S D = D.
    fn energy(ctx: &Fake, case: &Case, t: usize, d: [Vec<f64>; 2]) -> f64 {
        let basis = BasisSet::from_setup(ctx).expect("basis");
        let (atom, _) = atom_problem(ctx, &basis, &case.reals("S"), t, 1e-9)
            .expect("atom")
            .expect("electrons");
        let n = atom.n;
        let (full, nao) = (case.reals("S"), basis.nao);
        let aos: Vec<usize> = atom_shells(ctx, &basis, t)
            .expect("shells")
            .iter()
            .flat_map(|&sh| basis.shells[sh].first..basis.shells[sh].end())
            .collect();
        let s: Vec<f64> = (0..n * n)
            .map(|x| full[aos[x % n] + nao * aos[x / n]])
            .collect();
        for (spin, ds) in d.iter().enumerate() {
            let ds_ = product(ds, false, &s, n);
            let trace: f64 = (0..n).map(|i| ds_[i + n * i]).sum();
            assert!((trace - atom.occupied[spin] as f64).abs() < 1e-9);
            let dsd = product(&ds_, false, ds, n);
            assert!(max_diff(&dsd, ds) < 1e-9);
        }
        let f = atom.fock(&d);
        (0..2)
            .map(|x| {
                0.5 * (0..n * n)
                    .map(|p| (atom.h0[p] + f[x][p]) * d[x][p])
                    .sum::<f64>()
            })
            .sum()
    }

    #[test]
    fn hydrogen_and_oxygen_of_water() {
        let case = Case::load("water_321g");
        let reference = Case::load("atom_guess");
        let mut ctx = case.context();
        // H (atom 2, AOs 10..11): one alpha electron, a unique density.
        let args = run(&mut ctx, &case, 2.0).expect("H guess");
        let da = block(&args[0].data, 13, 9..11);
        assert!(max_diff(&da, &reference.reals("water_H2_Da")) < 1e-10);
        assert!(args[1].data.iter().all(|v| *v == 0.0));
        let outside = args[0]
            .data
            .iter()
            .enumerate()
            .filter(|(x, _)| !((9..11).contains(&(x % 13)) && (9..11).contains(&(x / 13))));
        assert!(outside.clone().all(|(_, v)| *v == 0.0));
        // O (atom 1, AOs 1..9): 4 + 4 electrons in a partly filled 2p shell; the density is
        // unique only up to a rotation, its energy is not.
        let args = run(&mut ctx, &case, 1.9).expect("O guess");
        let d = [0, 1].map(|s| block(&args[s].data, 13, 0..9));
        assert!(max_diff(&d[0], &d[1]) < 1e-12);
        let e = energy(&ctx, &case, 0, d);
        let want = reference.value("water_O1_energy");
        assert!((e - want).abs() < 1e-9, "O energy {e} vs {want}");
    }

    #[test]
    fn neon_with_a_spherical_d_shell() {
        let case = Case::load("ne_ccpvdz");
        let reference = Case::load("atom_guess");
        let mut ctx = case.context();
        // ccsdpt_test has neither `atom` nor `nbasis_funcs`; the orbital counts are 5 + 9.
        assert!(ctx.int_arrays.remove("atom").is_none());
        let args = run(&mut ctx, &case, 1.0).expect("Ne guess");
        assert!(max_diff(&args[0].data, &reference.reals("ne_Da")) < 1e-9);
        assert!(max_diff(&args[1].data, &reference.reals("ne_Db")) < 1e-9);
        let e = energy(
            &ctx,
            &case,
            0,
            [args[0].data.to_vec(), args[1].data.to_vec()],
        );
        assert!((e - reference.value("ne_energy")).abs() < 1e-9);
    }

    #[test]
    fn electron_counts() {
        assert_eq!(electrons(1.0), [1, 0]);
        assert_eq!(electrons(8.0), [4, 4]);
        assert_eq!(electrons(7.0), [4, 3]);
        assert_eq!(electrons(6.0), [3, 3]);
        assert_eq!(electrons(7.9), [4, 3]);
        assert_eq!(electrons(0.0), [0, 0]);
        assert_eq!(electrons(-3.0), [0, 0]);
    }

    #[test]
    fn ghost_atoms_get_nothing() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        ctx.arrays.get_mut("charge").expect("charge").1[2] = 0.0;
        let args = run(&mut ctx, &case, 3.0).expect("ghost");
        assert!(args[0].data.iter().chain(&args[1].data).all(|v| *v == 0.0));
    }

    #[test]
    fn errors() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        for bad in [0.0, 4.0, 0.5, f64::NAN] {
            let e = run(&mut ctx, &case, bad).expect_err("atom number");
            assert!(
                e.starts_with("argument 6 must be an atom number from 1 to 3"),
                "{e}"
            );
        }
        let mut args = run(&mut ctx, &case, 2.0).expect("good");
        args[4] = Arg::whole_array("oed_ovl", vec![12, 12], vec![0.0; 144]);
        let e = a4_scf_atom(&mut ctx, &mut args).expect_err("small overlap");
        assert!(e.starts_with("argument 5 (oed_ovl) is 12 x 12"), "{e}");
        let e = a4_scf_atom(&mut ctx, &mut args[..5]).expect_err("5 args");
        assert!(e.starts_with("expects 6 arguments"), "{e}");
        ctx.ints.insert("nalpha_virtual".into(), 7);
        let e = run(&mut ctx, &case, 2.0).expect_err("orbital counts");
        assert!(
            e.starts_with("The total number of alpha or beta orbitals"),
            "{e}"
        );
        ctx.ints.insert("nalpha_virtual".into(), 8);
        ctx.ints.insert("nbasis_funcs".into(), 14);
        let e = run(&mut ctx, &case, 2.0).expect_err("nbasis_funcs");
        assert!(
            e.contains("nbasis_funcs is 14, but the basis set has 13"),
            "{e}"
        );
        ctx.ints.insert("nbasis_funcs".into(), 13);
        ctx.scalar_constants.remove("scf_conv");
        let e = run(&mut ctx, &case, 2.0).expect_err("scf_conv");
        assert!(e.contains("no predefined scalar scf_conv"), "{e}");
        ctx.scalar_constants.insert("scf_conv".into(), 1e-10);
        ctx.ints.insert("scf_hist".into(), 0);
        let e = run(&mut ctx, &case, 2.0).expect_err("scf_hist");
        assert!(e.contains("scf_hist is 0: it must be at least 1"), "{e}");
        ctx.ints.insert("scf_hist".into(), 6);
        ctx.int_arrays.get_mut("atom").expect("atom").1.pop();
        let e = run(&mut ctx, &case, 2.0).expect_err("atom array");
        assert!(
            e.contains("the setup's atom has 3 entries, but nshells is 4"),
            "{e}"
        );
    }
}
