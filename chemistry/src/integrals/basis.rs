//! The job's basis set and nuclei, read from the setup's predefined arrays and checked.
//!
//! ACES4 trusts these arrays (an inconsistent setup makes its Fortran read out of bounds); here
//! every inconsistency is an error that names the setup key, so a bad job file fails at the
//! first integral special instead of producing wrong numbers.

use integral::math::am::n_cart;
use sial_superinstructions::special::Context;

use super::spherical::shell_transform;
use crate::args;

/// Highest angular momentum the `integral` crate supports (i functions).
pub const MAX_L: usize = 6;

/// The nuclei: positions (bohr) from `coords` and charges from `charge`, `ncenters` of each.
#[derive(Clone, Debug, PartialEq)]
pub struct Nuclei {
    pub positions: Vec<[f64; 3]>,
    pub charges: Vec<f64>,
}

impl Nuclei {
    /// Reads `ncenters`, `coords` (3 × ncenters) and `charge` (ncenters).
    pub fn from_setup(ctx: &dyn Context) -> Result<Nuclei, String> {
        let n = count(ctx, "ncenters")?;
        let (_, coords) = args::array(ctx, "coords")?;
        if coords.len() != 3 * n {
            return Err(format!(
                "the setup's coords holds {} values, but ncenters = {n} needs 3 x {n}",
                coords.len()
            ));
        }
        let (_, charges) = args::array(ctx, "charge")?;
        if charges.len() != n {
            return Err(format!(
                "the setup's charge holds {} values, but ncenters is {n}",
                charges.len()
            ));
        }
        finite("coords", &coords)?;
        finite("charge", &charges)?;
        let positions = coords.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
        Ok(Nuclei { positions, charges })
    }

    /// The nuclei as point charges for the crate's nuclear-attraction kernel.
    pub fn point_charges(&self) -> Vec<([f64; 3], f64)> {
        self.positions
            .iter()
            .copied()
            .zip(self.charges.iter().copied())
            .collect()
    }
}

/// One ACES4 shell: `contractions` contracted functions of angular momentum `l` on one centre,
/// each with `components` functions; its AOs are `first .. first + len()` (0-based).
#[derive(Clone, Debug, PartialEq)]
pub struct Shell {
    pub l: usize,
    pub center: [f64; 3],
    pub first: usize,
    pub contractions: usize,
    pub components: usize,
    /// Position in [`BasisSet::engine`] of the crate shell of the first contracted function
    /// (the others follow).
    pub(crate) sub: usize,
    /// Crate Cartesian components → ACES4 functions (row-major, `components` × n_cart), or
    /// `None` where they coincide (s, p).
    pub(crate) transform: Option<Vec<f64>>,
}

impl Shell {
    /// Number of AOs of the shell.
    pub fn len(&self) -> usize {
        self.contractions * self.components
    }

    /// Never true: a shell has at least one contracted function (checked when reading).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One past the last AO of the shell (0-based), i.e. `end_nfps` of the shell.
    pub fn end(&self) -> usize {
        self.first + self.len()
    }

    /// Number of Cartesian components the crate computes for the shell.
    pub(crate) fn n_cart(&self) -> usize {
        n_cart(self.l)
    }
}

/// The basis set: ACES4's shells, the nuclei, and one `integral` crate shell per contracted
/// function (a generally contracted ACES4 shell shares its primitives among several contracted
/// functions; the crate has no general contractions, so each becomes a shell of its own, with
/// the primitives whose coefficient is zero left out, as ACES4's ccbeg/ccend do).
#[derive(Clone, Debug)]
pub struct BasisSet {
    pub shells: Vec<Shell>,
    pub nuclei: Nuclei,
    /// Number of AOs (`end_nfps(nshells)`).
    pub nao: usize,
    /// `intspherical == 1`.
    pub spherical: bool,
    pub(crate) engine: integral::Basis,
    /// Integral blocks kept between calls, shared by the process's workers and programs that
    /// build the same basis set (see [`super::engine::QuartetCache`]); a subset has its own.
    pub(crate) cache: std::sync::Arc<super::engine::QuartetCache>,
    /// The core Hamiltonian over all AOs, once asked for (`return_h1`).
    pub(crate) core_hamiltonian: std::sync::OnceLock<Vec<f64>>,
}

/// The per-shell integer arrays of the setup.
struct ShellArrays {
    ivangmom: Vec<i64>,
    npfps: Vec<i64>,
    ncfps: Vec<i64>,
    ixalphas: Vec<i64>,
    ixpcoeffs: Vec<i64>,
    end_nfps: Vec<i64>,
}

impl BasisSet {
    /// Builds and checks the basis set from the setup (see the module docs of
    /// [`crate::integrals`] for the arrays and conventions).
    pub fn from_setup(ctx: &dyn Context) -> Result<BasisSet, String> {
        let nshells = count(ctx, "nshells")?;
        if nshells == 0 {
            return Err("the setup's nshells is 0: the job has no basis set".into());
        }
        let arrays = ShellArrays {
            ivangmom: per_shell(ctx, "ivangmom", nshells)?,
            npfps: per_shell(ctx, "npfps", nshells)?,
            ncfps: per_shell(ctx, "ncfps", nshells)?,
            ixalphas: per_shell(ctx, "ixalphas", nshells)?,
            ixpcoeffs: per_shell(ctx, "ixpcoeffs", nshells)?,
            end_nfps: per_shell(ctx, "end_nfps", nshells)?,
        };
        let spherical = args::int_constant(ctx, "intspherical")? == 1;
        let (_, alphas) = args::array(ctx, "alphas")?;
        let (_, pcoeffs) = args::array(ctx, "pcoeffs")?;
        let (_, tcoords) = args::array(ctx, "tcoords")?;
        if tcoords.len() != 3 * nshells {
            return Err(format!(
                "the setup's tcoords holds {} values, but nshells = {nshells} needs 3 x {nshells}",
                tcoords.len()
            ));
        }
        finite("tcoords", &tcoords)?;
        let nuclei = Nuclei::from_setup(ctx)?;
        let mut shells = Vec::with_capacity(nshells);
        let mut engine = Vec::new();
        for s in 0..nshells {
            let first = shells.last().map_or(0, Shell::end);
            let center = [tcoords[3 * s], tcoords[3 * s + 1], tcoords[3 * s + 2]];
            let (shell, subs) =
                read_shell(&arrays, s, first, center, spherical, &alphas, &pcoeffs)?;
            shells.push(Shell {
                sub: engine.len(),
                ..shell
            });
            engine.extend(subs);
        }
        let nao = shells.last().map_or(0, Shell::end);
        // What the integrals depend on: the process's cache serves this basis set only if all
        // of it is the same.
        let identity = format!("{spherical:?} {shells:?} {nuclei:?} {engine:?}");
        Ok(BasisSet {
            shells,
            nuclei,
            nao,
            spherical,
            engine: integral::Basis::new(engine),
            cache: super::engine::QuartetCache::for_basis(identity),
            core_hamiltonian: Default::default(),
        })
    }

    /// The basis of a subset of the shells (AOs renumbered from 0 in the given order) with
    /// other nuclei: the one-atom problems of the atomic guess.
    pub fn subset(&self, shells: &[usize], nuclei: Nuclei) -> BasisSet {
        let mut out = Vec::with_capacity(shells.len());
        let mut engine = Vec::new();
        for &s in shells {
            let Some(shell) = self.shells.get(s) else {
                continue;
            };
            let first = out.last().map_or(0, Shell::end);
            let subs = &self.engine.shells()[shell.sub..shell.sub + shell.contractions];
            out.push(Shell {
                first,
                sub: engine.len(),
                ..shell.clone()
            });
            engine.extend(subs.iter().cloned());
        }
        let nao = out.last().map_or(0, Shell::end);
        BasisSet {
            shells: out,
            nuclei,
            nao,
            spherical: self.spherical,
            engine: integral::Basis::new(engine),
            cache: Default::default(),
            core_hamiltonian: Default::default(),
        }
    }

    /// The crate shells of ACES4 shell `s`, one per contracted function.
    pub(crate) fn subshells(&self, s: &Shell) -> &[integral::Shell] {
        &self.engine.shells()[s.sub..s.sub + s.contractions]
    }
}

/// Reads shell `s` (0-based) and checks it against the arrays it indexes and against
/// `end_nfps`; returns the shell (its `sub` is set by the caller) and its crate shells.
fn read_shell(
    a: &ShellArrays,
    s: usize,
    first: usize,
    center: [f64; 3],
    spherical: bool,
    alphas: &[f64],
    pcoeffs: &[f64],
) -> Result<(Shell, Vec<integral::Shell>), String> {
    let n = s + 1;
    let l = usize::try_from(a.ivangmom[s])
        .ok()
        .filter(|&l| l <= MAX_L)
        .ok_or_else(|| {
            format!(
                "the setup's ivangmom({n}) = {}: angular momentum must be 0..{MAX_L}",
                a.ivangmom[s]
            )
        })?;
    let np = positive("npfps", n, a.npfps[s])?;
    let nc = positive("ncfps", n, a.ncfps[s])?;
    let exps = range_of(alphas, "alphas", "ixalphas", n, a.ixalphas[s], np)?;
    if let Some(bad) = exps.iter().find(|e| !(e.is_finite() && **e > 0.0)) {
        return Err(format!(
            "the setup's alphas of shell {n} include {bad}: exponents must be positive"
        ));
    }
    let count = np.checked_mul(nc).ok_or_else(|| {
        format!("the setup's npfps({n}) = {np} and ncfps({n}) = {nc} are too large")
    })?;
    let coefs = range_of(pcoeffs, "pcoeffs", "ixpcoeffs", n, a.ixpcoeffs[s], count)?;
    finite("pcoeffs", coefs)?;
    let components = if spherical && l >= 2 {
        2 * l + 1
    } else {
        n_cart(l)
    };
    let end = first + nc * components;
    let previous = if s == 0 {
        "0 (before the first shell)".to_string()
    } else {
        format!("end_nfps({s}) = {first}")
    };
    if a.end_nfps[s] <= first as i64 {
        return Err(format!(
            "the setup's end_nfps is not increasing: end_nfps({n}) = {} after {previous}",
            a.end_nfps[s]
        ));
    }
    if a.end_nfps[s] != end as i64 {
        return Err(format!(
            "the setup's end_nfps({n}) = {}, but shell {n} (L = {l}, ncfps = {nc}, {components} \
             function(s) each with intspherical {}) ends at {end} after {previous}",
            a.end_nfps[s],
            if spherical { "= 1" } else { "!= 1" }
        ));
    }
    let subs = coefs
        .chunks(np)
        .map(|column| {
            let kept: Vec<(f64, f64)> = exps
                .iter()
                .zip(column)
                .filter(|(_, c)| **c != 0.0)
                .map(|(e, c)| (*e, *c))
                .collect();
            // An all-zero contracted function stays, as a zero function.
            let (e, c): (Vec<f64>, Vec<f64>) = if kept.is_empty() {
                (exps.to_vec(), column.to_vec())
            } else {
                kept.into_iter().unzip()
            };
            integral::Shell::new(l, center, e, c).map_err(|e| format!("shell {n}: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let shell = Shell {
        l,
        center,
        first,
        contractions: nc,
        components,
        sub: 0,
        transform: shell_transform(l, spherical),
    };
    Ok((shell, subs))
}

/// A non-negative predefined int, or an error naming it.
fn count(ctx: &dyn Context, name: &str) -> Result<usize, String> {
    let v = args::int_constant(ctx, name)?;
    usize::try_from(v).map_err(|_| format!("the setup's {name} is {v}: it must not be negative"))
}

/// A per-shell int array, which must have exactly `nshells` entries.
fn per_shell(ctx: &dyn Context, name: &str, nshells: usize) -> Result<Vec<i64>, String> {
    let v = args::int_array(ctx, name)?;
    if v.len() != nshells {
        return Err(format!(
            "the setup's {name} has {} entries, but nshells is {nshells}",
            v.len()
        ));
    }
    Ok(v)
}

/// `value` of `name(shell)` as a count of at least 1.
fn positive(name: &str, shell: usize, value: i64) -> Result<usize, String> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| format!("the setup's {name}({shell}) = {value}: it must be at least 1"))
}

/// The `len` values of `data` (setup array `name`) starting at the 1-based position `start`
/// (from the index array `index`), or an error if they are not all inside it.
fn range_of<'a>(
    data: &'a [f64],
    name: &str,
    index: &str,
    shell: usize,
    start: i64,
    len: usize,
) -> Result<&'a [f64], String> {
    usize::try_from(start)
        .ok()
        .filter(|&s| s >= 1)
        .and_then(|s| data.get(s - 1..(s - 1).checked_add(len)?))
        .ok_or_else(|| {
            format!(
                "the setup's {index}({shell}) = {start} points outside {name}: shell {shell} needs \
                 {len} value(s) from there, {name} has {}",
                data.len()
            )
        })
}

/// Checks that setup array `name` holds only finite numbers.
fn finite(name: &str, values: &[f64]) -> Result<(), String> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(format!(
            "the setup's {name} holds {} at position {}",
            values[i],
            i + 1
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::Case;
    use super::*;

    #[test]
    fn hf_shells_follow_the_setup() {
        let ctx = Case::load("hf_321g").context();
        let b = BasisSet::from_setup(&ctx).expect("basis");
        assert_eq!(b.nao, 11);
        assert!(!b.spherical);
        let ends: Vec<usize> = b.shells.iter().map(Shell::end).collect();
        assert_eq!(ends, [2, 5, 11]);
        let p = &b.shells[2];
        assert_eq!((p.l, p.contractions, p.components, p.first), (1, 2, 3, 5));
        assert!(!p.is_empty());
        // Zero coefficients are dropped: the F 1s' uses primitives 1..3, 2s' 4..5, 2s'' 6.
        let prims: Vec<usize> = b
            .subshells(&b.shells[1])
            .iter()
            .map(integral::Shell::n_prim)
            .collect();
        assert_eq!(prims, [3, 2, 1]);
        assert_eq!(b.nuclei.charges, [1.0, 9.0]);
        assert_eq!(b.engine.shells().len(), 7);
    }

    #[test]
    fn spherical_d_has_five_functions() {
        let ctx = Case::load("ne_ccpvdz").context();
        let b = BasisSet::from_setup(&ctx).expect("basis");
        assert!(b.spherical);
        assert_eq!(b.nao, 14);
        assert_eq!(b.shells[2].components, 5);
        assert_eq!(b.shells[1].components, 3);
    }

    #[test]
    fn subsets_renumber_the_aos() {
        let ctx = Case::load("water_321g").context();
        let b = BasisSet::from_setup(&ctx).expect("basis");
        let h = b.subset(
            &[2],
            Nuclei {
                positions: vec![b.shells[2].center],
                charges: vec![1.0],
            },
        );
        assert_eq!(h.nao, 2);
        assert_eq!(h.shells[0].first, 0);
        assert_eq!(h.subshells(&h.shells[0]).len(), 2);
    }

    /// Each error path names the setup key at fault.
    #[test]
    fn inconsistent_setups_are_reported() {
        let case = Case::load("hf_321g");
        let check = |edit: &dyn Fn(&mut sial_superinstructions::special::fake::Fake),
                     want: &str| {
            let mut ctx = case.context();
            edit(&mut ctx);
            let e = BasisSet::from_setup(&ctx).expect_err(want);
            assert!(e.contains(want), "{e:?} should mention {want:?}");
        };
        check(
            &|c| {
                c.ints.remove("nshells");
            },
            "no predefined int nshells",
        );
        check(
            &|c| {
                c.ints.insert("nshells".into(), 0);
            },
            "nshells is 0",
        );
        check(
            &|c| {
                c.ints.insert("nshells".into(), -2);
            },
            "must not be negative",
        );
        check(
            &|c| {
                c.ints.insert("nshells".into(), 4);
            },
            "ivangmom has 3 entries, but nshells is 4",
        );
        check(
            &|c| {
                c.int_arrays
                    .get_mut("ixalphas")
                    .expect("ixalphas")
                    .1
                    .push(13)
            },
            "ixalphas has 4 entries, but nshells is 3",
        );
        check(
            &|c| {
                c.int_arrays.remove("end_nfps");
            },
            "no predefined int array end_nfps",
        );
        check(
            &|c| {
                c.ints.remove("intspherical");
            },
            "intspherical",
        );
        check(
            &|c| {
                c.arrays.remove("alphas");
            },
            "no predefined array alphas",
        );
        check(
            &|c| c.int_arrays.get_mut("end_nfps").expect("end_nfps").1[1] = 2,
            "end_nfps is not increasing: end_nfps(2) = 2 after end_nfps(1) = 2",
        );
        check(
            &|c| c.int_arrays.get_mut("end_nfps").expect("end_nfps").1[2] = 8,
            "end_nfps(3) = 8, but shell 3 (L = 1, ncfps = 2",
        );
        // A spherical flag changes nothing for s and p, but a d shell would need 5 functions.
        check(
            &|c| c.int_arrays.get_mut("ivangmom").expect("ivangmom").1[2] = 2,
            "end_nfps(3) = 11, but shell 3 (L = 2",
        );
        check(
            &|c| c.int_arrays.get_mut("ivangmom").expect("ivangmom").1[0] = 7,
            "ivangmom(1) = 7",
        );
        check(
            &|c| c.int_arrays.get_mut("ixpcoeffs").expect("ixpcoeffs").1[2] = 28,
            "ixpcoeffs(3) = 28 points outside pcoeffs",
        );
        check(
            &|c| c.int_arrays.get_mut("ixalphas").expect("ixalphas").1[0] = 0,
            "ixalphas(1) = 0 points outside alphas",
        );
        check(
            &|c| c.int_arrays.get_mut("ixpcoeffs").expect("ixpcoeffs").1[0] = i64::MAX,
            "ixpcoeffs(1) = 9223372036854775807 points outside pcoeffs",
        );
        check(
            &|c| c.int_arrays.get_mut("ncfps").expect("ncfps").1[0] = i64::MAX,
            "are too large",
        );
        check(
            &|c| c.int_arrays.get_mut("npfps").expect("npfps").1[0] = 0,
            "npfps(1) = 0",
        );
        check(
            &|c| c.int_arrays.get_mut("ncfps").expect("ncfps").1[1] = -1,
            "ncfps(2) = -1",
        );
        check(
            &|c| c.arrays.get_mut("alphas").expect("alphas").1[0] = -1.0,
            "exponents must be positive",
        );
        check(
            &|c| c.arrays.get_mut("pcoeffs").expect("pcoeffs").1[0] = f64::NAN,
            "pcoeffs holds NaN",
        );
        check(
            &|c| {
                c.arrays.get_mut("tcoords").expect("tcoords").1.pop();
            },
            "tcoords holds 8 values",
        );
        check(
            &|c| c.arrays.get_mut("coords").expect("coords").1.push(0.0),
            "coords holds 7 values",
        );
        check(
            &|c| c.arrays.get_mut("charge").expect("charge").1.push(1.0),
            "charge holds 3 values, but ncenters is 2",
        );
        check(
            &|c| {
                c.ints.remove("ncenters");
            },
            "no predefined int ncenters",
        );
    }
}
