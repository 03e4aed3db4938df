//! The one-electron and nuclear specials: `return_h1`, `return_ovl`, `compute_dipole_integrals`,
//! `compute_nn_repulsion` and `return_1el_ecpints`.

use sial_superinstructions::special::{Arg, Context};

use super::basis::{BasisSet, Nuclei};
use super::blocks::spans;
use super::engine::{OneElectron, pair};
use super::with_basis;
use crate::args;

/// Fills the rank-2 AO block `arg` (argument `k`) with the integrals of the operators in `ops`,
/// summed in that order per element (ACES4 adds the kinetic batch, then the nuclear one), taking
/// output `output` of each (the component of a dipole).
fn fill_pair_block(
    ctx: &dyn Context,
    basis: &BasisSet,
    arg: &mut Arg,
    k: usize,
    ops: &[OneElectron<'_>],
    output: usize,
) -> Result<(), String> {
    let s = spans(ctx, basis, arg, k, 2)?;
    let rows = arg.shape[0];
    arg.data.fill(0.0);
    let shells = [s[0].shells.clone(), s[1].shells.clone()];
    let origin = [s[0].offset, s[1].offset];
    add_pairs(basis, shells, origin, (&mut arg.data, rows), ops, output);
    Ok(())
}

/// Adds the integrals of `ops` over the shell pairs of `shells` into the column-major matrix
/// `(data, rows)`, whose element (0, 0) is AO pair `origin`.
fn add_pairs(
    basis: &BasisSet,
    shells: [std::ops::Range<usize>; 2],
    origin: [usize; 2],
    (data, rows): (&mut [f64], usize),
    ops: &[OneElectron<'_>],
    output: usize,
) {
    let [s0, s1] = shells;
    for m in &basis.shells[s0] {
        for n in &basis.shells[s1.clone()] {
            let i0 = m.first - origin[0];
            let j0 = n.first - origin[1];
            for op in ops {
                let batch = &pair(basis, *op, m, n)[output];
                for j in 0..n.len() {
                    for i in 0..m.len() {
                        data[i0 + i + rows * (j0 + j)] += batch[i + m.len() * j];
                    }
                }
            }
        }
    }
}

/// The core Hamiltonian over all AOs (nao × nao), computed once per basis set: the SCF asks
/// for its blocks in every iteration. Each element is summed as [`fill_pair_block`] sums it.
fn core_hamiltonian(basis: &BasisSet) -> &[f64] {
    basis.core_hamiltonian.get_or_init(|| {
        let n = basis.nao;
        let mut h = vec![0.0; n * n];
        let charges = basis.nuclei.point_charges();
        let ops = [OneElectron::Kinetic, OneElectron::Nuclear(&charges)];
        let all = 0..basis.shells.len();
        add_pairs(basis, [all.clone(), all], [0, 0], (&mut h, n), &ops, 0);
        h
    })
}

/// The single block argument of a `w` one-electron special.
fn only_block<'a>(args: &'a mut [Arg], what: &str) -> Result<&'a mut Arg, String> {
    let [arg] = args::exactly::<1>(args, what)?;
    Ok(arg)
}

/// `return_h1 h[mu,nu]` (w): the core Hamiltonian, kinetic energy plus the attraction of all
/// `ncenters` nuclei (charges `charge`, positions `coords`), over the block's AOs.
pub fn return_h1(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let h = only_block(args, "an AO block")?;
    with_basis(ctx, |ctx, basis| {
        let s = spans(ctx, basis, h, 0, 2)?;
        let (rows, n) = (h.shape[0], basis.nao);
        let whole = core_hamiltonian(basis);
        for (j, col) in h.data.chunks_mut(rows.max(1)).enumerate() {
            let from = s[0].offset + n * (s[1].offset + j);
            col.copy_from_slice(&whole[from..from + rows]);
        }
        Ok(())
    })
}

/// `return_ovl s[mu,nu]` (w): the overlap integrals of the block's AOs.
pub fn return_ovl(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let s = only_block(args, "an AO block")?;
    with_basis(ctx, |ctx, basis| {
        fill_pair_block(ctx, basis, s, 0, &[OneElectron::Overlap], 0)
    })
}

/// What the selector of `compute_dipole_integrals` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DipoleRequest {
    /// 1, 2, 3: the electronic integrals of x, y or z and the nuclear component.
    Integrals(usize),
    /// 10, 11, 12: only the nuclear component; the block stays zero.
    NuclearOnly(usize),
}

/// ACES4 truncates the selector toward zero (its tolerance test is dead code), so 2.9999 is 2.
fn dipole_request(selector: f64) -> Result<DipoleRequest, String> {
    match selector.trunc() {
        v @ (1.0 | 2.0 | 3.0) => Ok(DipoleRequest::Integrals(v as usize - 1)),
        v @ (10.0 | 11.0 | 12.0) => Ok(DipoleRequest::NuclearOnly(v as usize - 10)),
        _ => Err(format!(
            "argument 3 selects the dipole component: 1, 2, 3 (x, y, z integrals) or 10, 11, 12 \
             (nuclear part only), got {selector}"
        )),
    }
}

/// Σ_A charge(A)·coords(axis, A), summed in atom order from 0.0 as ACES4 does.
fn nuclear_dipole(nuclei: &Nuclei, axis: usize) -> f64 {
    nuclei
        .positions
        .iter()
        .zip(&nuclei.charges)
        .fold(0.0, |acc, (r, z)| acc + z * r[axis])
}

/// `compute_dipole_integrals d[mu,nu] nuc xyz` (wur): for xyz = 1, 2, 3 the block gets
/// ⟨μ|x|ν⟩ (y, z) about the coordinate origin (no charge sign), and `nuc` the nuclear dipole
/// component Σ_A Z_A·X_A; for xyz = 10, 11, 12 only `nuc` is set and the block stays zero.
/// Unlike ACES4, the setup's `atom` array is not needed (ACES4 reads it without using it).
pub fn compute_dipole_integrals(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [d, nuc, selector] = args::exactly::<3>(
        args,
        "an AO block, a scalar for the nuclear dipole, the component selector",
    )?;
    args::scalar(nuc, 1)?;
    let request = dipole_request(args::scalar(selector, 2)?)?;
    match request {
        DipoleRequest::Integrals(axis) => with_basis(ctx, |ctx, basis| {
            fill_pair_block(ctx, basis, d, 0, &[OneElectron::Dipole], axis)?;
            args::set_scalar(nuc, 1, nuclear_dipole(&basis.nuclei, axis))
        }),
        DipoleRequest::NuclearOnly(axis) => {
            super::blocks::check_rank(d, 0, 2)?;
            d.data.fill(0.0);
            let nuclei = Nuclei::from_setup(ctx)?;
            args::set_scalar(nuc, 1, nuclear_dipole(&nuclei, axis))
        }
    }
}

/// Σ_{A<B} Z_A Z_B / R_AB in ACES4's order of operations (A outer, B inner, the squared
/// distance summed x, y, z), which reproduces the setups' `nn_repulsion` to the last bit.
pub fn nn_repulsion(nuclei: &Nuclei) -> f64 {
    let mut e = 0.0;
    for (a, (ra, za)) in nuclei.positions.iter().zip(&nuclei.charges).enumerate() {
        for (rb, zb) in nuclei.positions.iter().zip(&nuclei.charges).skip(a + 1) {
            let d2 = (ra[0] - rb[0]).powi(2) + (ra[1] - rb[1]).powi(2) + (ra[2] - rb[2]).powi(2);
            e += za * zb / d2.sqrt();
        }
    }
    e
}

/// `compute_nn_repulsion e` (u): the nuclear repulsion energy of `charge` at `coords`.
pub fn compute_nn_repulsion(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [e] = args::exactly::<1>(args, "a scalar")?;
    args::scalar(e, 0)?;
    let nuclei = Nuclei::from_setup(ctx)?;
    args::set_scalar(e, 0, nn_repulsion(&nuclei))
}

/// `return_1el_ecpints h[mu,nu]` (w): the semilocal ECP integrals. When the setup says that no
/// atom carries an ECP (`iecp_on` = 0 or `necp_atoms` = 0) the matrix is zero and so is the
/// block; ECP integrals themselves are not implemented. Without any ECP data ACES4 aborts
/// (its predefined ECP arrays are missing), and so does this, with a clearer message.
pub fn return_1el_ecpints(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let h = only_block(args, "an AO block")?;
    super::blocks::check_rank(h, 0, 2)?;
    let on = ctx.int_constant("iecp_on");
    let atoms = ctx.int_constant("necp_atoms");
    match (on, atoms) {
        (Some(0), _) | (_, Some(0)) => {
            h.data.fill(0.0);
            Ok(())
        }
        (None, None) => Err(
            "the setup has no ECP data (neither iecp_on nor necp_atoms): ACES4 aborts here too"
                .into(),
        ),
        (_, n) => Err(format!(
            "ECP integrals are not supported (the setup has iecp_on = {} and necp_atoms = {})",
            on.map_or("(none)".to_string(), |v| v.to_string()),
            n.map_or("(none)".to_string(), |v| v.to_string()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{Case, ao_block, max_diff, place, segment_starts};
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    /// The whole matrix of a rank-2 special, block by block over the case's AO segments.
    fn assemble(
        ctx: &mut Fake,
        segments: &[usize],
        special: fn(&mut dyn Context, &mut [Arg]) -> Result<(), String>,
        extra: &[Arg],
    ) -> Vec<f64> {
        let n: usize = segments.iter().sum();
        let starts = segment_starts(segments);
        place(ctx, "m", 2, segments);
        let mut full = vec![f64::NAN; n * n];
        for a in 1..=segments.len() as i32 {
            for b in 1..=segments.len() as i32 {
                let mut args = vec![ao_block("m", &[a, b], segments)];
                args.extend(extra.iter().cloned());
                special(ctx, &mut args).expect("special");
                let (r, c) = (args[0].shape[0], args[0].shape[1]);
                let (r0, c0) = (starts[a as usize - 1], starts[b as usize - 1]);
                for j in 0..c {
                    for i in 0..r {
                        full[r0 + i + n * (c0 + j)] = args[0].data[i + r * j];
                    }
                }
            }
        }
        full
    }

    #[test]
    fn h1_overlap_and_dipoles_match_pyscf() {
        for name in ["hf_321g", "water_321g", "ne_ccpvdz", "synthetic_spherical"] {
            let case = Case::load(name);
            let mut ctx = case.context();
            let seg = case.segments();
            let s = assemble(&mut ctx, &seg, return_ovl, &[]);
            assert!(max_diff(&s, &case.reals("S")) < 1e-13, "{name} S");
            let h = assemble(&mut ctx, &seg, return_h1, &[]);
            assert!(max_diff(&h, &case.reals("H")) < 1e-11, "{name} H");
            for (axis, key) in ["DX", "DY", "DZ"].iter().enumerate() {
                let extra = [Arg::scalar("nuc", 7.0), Arg::literal(axis as f64 + 1.0)];
                let d = assemble(&mut ctx, &seg, compute_dipole_integrals, &extra);
                assert!(max_diff(&d, &case.reals(key)) < 1e-13, "{name} {key}");
            }
        }
    }

    /// Values of ACES4's own OED code for second_ccsdpt_test and ccsdpt_test, printed by
    /// ACES4 (OED screens primitive pairs below 1e-14; we do not, which explains differences
    /// of up to ~1e-13).
    #[test]
    fn matches_aces4_values() {
        let case = Case::load("hf_321g");
        let mut ctx = case.context();
        let s = assemble(&mut ctx, &[11], return_ovl, &[]);
        let h = assemble(&mut ctx, &[11], return_h1, &[]);
        let at = |m: &[f64], i: usize, j: usize| m[i - 1 + 11 * (j - 1)];
        assert!((at(&s, 1, 2) - 6.458989404992365e-01).abs() < 1e-15);
        assert!((at(&s, 3, 4) - 2.147136139640707e-01).abs() < 1e-15);
        assert!((at(&h, 1, 1) - -5.358172574994026e+00).abs() < 1e-13);
        assert!((at(&h, 3, 3) - -40.795_875_512_673_6).abs() < 1e-12);
        assert!((at(&h, 11, 11) - -6.125486398974349e+00).abs() < 1e-13);
        assert!((at(&h, 1, 11) - -3.531728251550068e+00).abs() < 1e-13);
        let z = [Arg::scalar("nuc", 0.0), Arg::literal(3.0)];
        let dz = assemble(&mut ctx, &[11], compute_dipole_integrals, &z);
        assert!((at(&dz, 1, 1) - 1.645583976639).abs() < 1e-14);
        assert!((at(&dz, 3, 11) - 8.121309382998342e-03).abs() < 1e-15);
        let x = [Arg::scalar("nuc", 0.0), Arg::literal(1.0)];
        let dx = assemble(&mut ctx, &[11], compute_dipole_integrals, &x);
        assert!((at(&dx, 3, 6) - 5.841534128122466e-02).abs() < 1e-15);
        let ne = Case::load("ne_ccpvdz");
        let mut ctx = ne.context();
        let h = assemble(&mut ctx, &[14], return_h1, &[]);
        assert!((h[9 + 14 * 9] - -4.922246570663294e+00).abs() < 1e-13);
    }

    #[test]
    fn dipole_selector_and_nuclear_part() {
        let case = Case::load("hf_321g");
        let mut ctx = case.context();
        place(&mut ctx, "d", 2, &[11]);
        let run = |ctx: &mut Fake, selector: f64| {
            let mut args = vec![
                ao_block("d", &[1, 1], &[11]),
                Arg::scalar("nuc", 123.0),
                Arg::scalar("xyz", selector),
            ];
            compute_dipole_integrals(ctx, &mut args).map(|()| args)
        };
        let args = run(&mut ctx, 3.0).expect("z");
        assert_eq!(args[1].data, [0.859931182647]);
        // Truncation toward zero: 3.9 is z as well.
        let args = run(&mut ctx, 3.9).expect("z");
        assert_eq!(args[1].data, [0.859931182647]);
        let args = run(&mut ctx, 12.0).expect("nuclear z only");
        assert_eq!(args[1].data, [0.859931182647]);
        assert!(args[0].data.iter().all(|v| *v == 0.0));
        let args = run(&mut ctx, 10.5).expect("nuclear x only");
        assert_eq!(args[1].data, [0.0]);
        for bad in [0.0, 4.0, 9.0, -1.0, 13.0, f64::NAN] {
            let e = run(&mut ctx, bad).expect_err("bad selector");
            assert!(e.contains("argument 3 selects the dipole component"), "{e}");
        }
        // Argument checks.
        let mut args = vec![ao_block("d", &[1, 1], &[11]), Arg::scalar("nuc", 0.0)];
        let e = compute_dipole_integrals(&mut ctx, &mut args).expect_err("2 args");
        assert!(e.starts_with("expects 3 arguments"), "{e}");
        let mut args = vec![
            ao_block("d", &[1, 1], &[11]),
            ao_block("d", &[1, 1], &[11]),
            Arg::literal(1.0),
        ];
        let e = compute_dipole_integrals(&mut ctx, &mut args).expect_err("block as scalar");
        assert!(e.starts_with("argument 2 must be a scalar"), "{e}");
        let mut args = vec![
            Arg::block("d", vec![1], vec![11], vec![0.0; 11]),
            Arg::scalar("nuc", 0.0),
            Arg::literal(12.0),
        ];
        let e = compute_dipole_integrals(&mut ctx, &mut args).expect_err("rank 1");
        assert!(e.contains("must be a block of rank 2"), "{e}");
        // No `atom` array is needed (ccsdpt_test has none).
        ctx.int_arrays.remove("atom");
        assert!(run(&mut ctx, 1.0).is_ok());
    }

    #[test]
    fn nuclear_repulsion_is_the_setups_to_the_last_bit() {
        for name in ["hf_321g", "water_321g", "ne_ccpvdz"] {
            let case = Case::load(name);
            let mut ctx = case.context();
            let mut args = [Arg::scalar("repulsion", 17.0)];
            compute_nn_repulsion(&mut ctx, &mut args).expect("nn");
            assert_eq!(args[0].data[0], case.value("nn_repulsion"), "{name}");
            let pyscf = case.value("nn_repulsion_pyscf");
            assert!((args[0].data[0] - pyscf).abs() < 1e-13, "{name}");
        }
        let mut ctx = Case::load("water_321g").context();
        let e = compute_nn_repulsion(&mut ctx, &mut []).expect_err("no argument");
        assert!(e.starts_with("expects 1 argument"), "{e}");
        let mut args = [Arg::block("e", vec![1], vec![2], vec![0.0; 2])];
        let e = compute_nn_repulsion(&mut ctx, &mut args).expect_err("not a scalar");
        assert!(e.starts_with("argument 1 must be a scalar"), "{e}");
        ctx.arrays.remove("charge");
        let e = compute_nn_repulsion(&mut ctx, &mut [Arg::scalar("e", 0.0)]).expect_err("charge");
        assert!(e.contains("no predefined array charge"), "{e}");
    }

    #[test]
    fn ecp_integrals() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        place(&mut ctx, "h", 2, &[13]);
        let mut args = [ao_block("h", &[1, 1], &[13])];
        args[0].data.fill(3.0);
        // The water job's setup has iecp_on = 0: the ECP matrix is zero.
        return_1el_ecpints(&mut ctx, &mut args).expect("no ECP atoms");
        assert!(args[0].data.iter().all(|v| *v == 0.0));
        ctx.ints.insert("iecp_on".into(), 1);
        ctx.ints.insert("necp_atoms".into(), 3);
        let e = return_1el_ecpints(&mut ctx, &mut args).expect_err("ECPs");
        assert!(e.starts_with("ECP integrals are not supported"), "{e}");
        ctx.ints.remove("iecp_on");
        ctx.ints.remove("necp_atoms");
        let e = return_1el_ecpints(&mut ctx, &mut args).expect_err("no ECP data");
        assert!(e.contains("no ECP data"), "{e}");
        let e = return_1el_ecpints(&mut ctx, &mut []).expect_err("no argument");
        assert!(e.starts_with("expects 1 argument"), "{e}");
    }

    #[test]
    fn argument_errors() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        place(&mut ctx, "h", 2, &[2, 11]);
        // Segments of 2 and 11 split the O s shell (AOs 1..3).
        let mut args = [ao_block("h", &[1, 2], &[2, 11])];
        let e = return_h1(&mut ctx, &mut args).expect_err("misaligned");
        assert!(
            e.contains("argument 1 (h[1,2]), dimension 1: AOs 1..2 do not end"),
            "{e}"
        );
        let mut args = [Arg::block("h", vec![1, 1, 1], vec![2, 2, 2], vec![0.0; 8])];
        let e = return_ovl(&mut ctx, &mut args).expect_err("rank 3");
        assert!(e.contains("must be a block of rank 2"), "{e}");
        let e = return_ovl(&mut ctx, &mut []).expect_err("no argument");
        assert!(e.starts_with("expects 1 argument"), "{e}");
        let mut bare = Fake::new();
        let mut args = [ao_block("h", &[1, 1], &[2])];
        let e = return_h1(&mut bare, &mut args).expect_err("no setup");
        assert!(e.contains("nshells"), "{e}");
    }
}
