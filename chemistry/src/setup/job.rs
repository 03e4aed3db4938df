//! The ACES4 job for a molecule: shells, segments, predefined values, program chain.

use super::SetupError;
use super::elements::{core_orbitals, symbol};
use super::library::BasisSet;
use super::molecule::Molecule;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::str::FromStr;

/// What the job computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Scf,
    Mp2,
    Ccsd,
    CcsdT,
}

impl FromStr for Method {
    type Err = SetupError;
    fn from_str(s: &str) -> Result<Method, SetupError> {
        match s.to_ascii_lowercase().as_str() {
            "scf" | "rhf" | "hf" => Ok(Method::Scf),
            "mp2" => Ok(Method::Mp2),
            "ccsd" => Ok(Method::Ccsd),
            "ccsd(t)" | "ccsd_t" | "ccsdt" => Ok(Method::CcsdT),
            _ => Err(SetupError::Option {
                option: "--method".into(),
                message: format!("unknown method {s:?}; use scf, mp2, ccsd or ccsd(t)"),
            }),
        }
    }
}

impl Method {
    /// ACES4's programs for the method, in the order they run.
    pub fn programs(self) -> &'static [&'static str] {
        match self {
            Method::Scf => &["scf_rhf_coreh"],
            Method::Mp2 => &["scf_rhf_coreh", "mp2_rhf_disc"],
            Method::Ccsd => &["scf_rhf_coreh", "tran_rhf_no4v", "rccsd_rhf"],
            Method::CcsdT => &[
                "scf_rhf_coreh",
                "tran_rhf_no4v",
                "rccsd_rhf",
                "rccsdpt_aaa",
                "rccsdpt_aab",
            ],
        }
    }
}

/// The choices of `sial setup` besides the molecule and the basis set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub method: Method,
    /// Net charge of the molecule.
    pub charge: i64,
    /// Leave the core orbitals uncorrelated.
    pub frozen_core: bool,
    /// Bytes of memory per rank the segment sizes are chosen for.
    pub memory: u64,
}

/// Convergence thresholds of the SCF (largest density change) and the CC iterations.
const SCF_CONV: f64 = 1e-10;
const CC_CONV: f64 = 1e-10;
/// Rank-4 blocks a worker of ACES4's CC programs holds at once, at most (for segment sizes).
const BLOCKS_HELD: u64 = 40;
/// Largest and smallest segment sizes chosen.
const MAX_SEGMENT: usize = 30;
const MIN_SEGMENT: usize = 4;

/// An ACES4 job: everything of its JSON setup file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Job {
    pub programs: Vec<String>,
    pub ints: BTreeMap<String, i64>,
    pub scalars: BTreeMap<String, f64>,
    pub segments: BTreeMap<String, Vec<usize>>,
    pub arrays: BTreeMap<String, (Vec<usize>, Vec<f64>)>,
    pub int_arrays: BTreeMap<String, (Vec<usize>, Vec<i64>)>,
}

/// One generally contracted shell of ACES4: one atom, one angular momentum, primitives shared
/// by its contracted functions.
struct Shell {
    atom: usize,
    l: u32,
    exponents: Vec<f64>,
    /// One column per contracted function, primitive index fastest.
    coefficients: Vec<Vec<f64>>,
}

impl Shell {
    fn functions(&self, spherical: bool) -> usize {
        let per = if spherical && self.l >= 2 {
            2 * self.l + 1
        } else {
            (self.l + 1) * (self.l + 2) / 2
        };
        per as usize * self.coefficients.len()
    }
}

/// Makes the job for `molecule` in `basis`.
pub fn build(molecule: &Molecule, basis: &BasisSet, options: &Options) -> Result<Job, SetupError> {
    let electrons = molecule.nuclear_charge() - options.charge;
    if electrons <= 0 {
        return Err(SetupError::Option {
            option: "--charge".into(),
            message: format!(
                "a charge of {} leaves {electrons} electrons",
                options.charge
            ),
        });
    }
    if electrons % 2 != 0 {
        return Err(SetupError::Option {
            option: "--charge".into(),
            message: format!(
                "{electrons} electrons: closed-shell RHF needs an even number (change --charge)"
            ),
        });
    }
    let shells = shells(molecule, basis)?;
    let nbasis: usize = shells.iter().map(|s| s.functions(basis.spherical)).sum();
    let nocc = (electrons / 2) as usize;
    if nocc > nbasis {
        return Err(SetupError::Option {
            option: "--basis".into(),
            message: format!(
                "{} has {nbasis} functions for this molecule, fewer than its {nocc} doubly occupied orbitals",
                basis.name
            ),
        });
    }
    let ncore = if options.frozen_core && options.method != Method::Scf {
        molecule
            .atoms
            .iter()
            .map(|a| core_orbitals(a.z))
            .sum::<usize>()
    } else {
        0
    };
    if ncore >= nocc {
        return Err(SetupError::Option {
            option: "--frozen-core".into(),
            message: format!(
                "all {nocc} occupied orbitals are core orbitals: nothing to correlate"
            ),
        });
    }
    let target = segment_size(options.memory);
    let mut job = Job {
        programs: options
            .method
            .programs()
            .iter()
            .map(|p| format!("{p}.siox"))
            .collect(),
        ..Job::default()
    };
    let ao_segments = ao_segments(&shells, basis.spherical, target);
    let mo = mo_segments(ncore, nocc, nbasis, target);
    add_basis(&mut job, molecule, &shells, basis.spherical, &ao_segments);
    add_orbitals(&mut job, &mo, ncore, nocc, nbasis, ao_segments.len());
    add_controls(&mut job, molecule);
    Ok(job)
}

/// Segment size for `memory` bytes per rank: the rank-4 blocks the CC programs hold fit.
fn segment_size(memory: u64) -> usize {
    let per_block = memory / BLOCKS_HELD / 8;
    let s = (per_block as f64).powf(0.25).floor() as usize;
    s.clamp(MIN_SEGMENT, MAX_SEGMENT)
}

/// ACES4's shells: atom by atom, angular momentum ascending, every contracted function of one
/// angular momentum in one shell over the union of their exponents, each normalised.
fn shells(molecule: &Molecule, basis: &BasisSet) -> Result<Vec<Shell>, SetupError> {
    let mut out = Vec::new();
    for (atom, a) in molecule.atoms.iter().enumerate() {
        let bse = basis.shells(a.z)?;
        let mut by_l: BTreeMap<u32, Vec<Contraction<'_>>> = BTreeMap::new();
        for s in bse {
            if s.l.len() > 1 {
                // Pople sp shell: one coefficient row per angular momentum.
                for (l, row) in s.l.iter().zip(&s.coefficients) {
                    by_l.entry(*l).or_default().push((&s.exponents, row));
                }
            } else if let Some(&l) = s.l.first() {
                for row in &s.coefficients {
                    by_l.entry(l).or_default().push((&s.exponents, row));
                }
            }
        }
        for (l, functions) in by_l {
            out.push(general_shell(atom, l, &functions, &basis.name, a.z)?);
        }
    }
    Ok(out)
}

/// One contracted function as the basis set gives it: (exponents, coefficients).
type Contraction<'a> = (&'a [f64], &'a [f64]);

fn general_shell(
    atom: usize,
    l: u32,
    functions: &[Contraction<'_>],
    basis: &str,
    z: u32,
) -> Result<Shell, SetupError> {
    let mut exponents: Vec<f64> = Vec::new();
    for (exps, _) in functions {
        for &e in *exps {
            if !(e > 0.0 && e.is_finite()) {
                return Err(SetupError::Option {
                    option: "--basis".into(),
                    message: format!("{basis} has exponent {e} for {}", symbol(z)),
                });
            }
            if !exponents.contains(&e) {
                exponents.push(e);
            }
        }
    }
    let mut coefficients = Vec::new();
    for (exps, row) in functions {
        let mut c = vec![0.0; exponents.len()];
        for (&e, &v) in exps.iter().zip(row.iter()) {
            if let Some(k) = exponents.iter().position(|&x| x == e) {
                c[k] += v;
            }
        }
        normalise(&mut c, &exponents, l);
        coefficients.push(c);
    }
    Ok(Shell {
        atom,
        l,
        exponents,
        coefficients,
    })
}

/// Scales contraction coefficients (of normalised primitives) to a unit-norm function.
fn normalise(c: &mut [f64], exponents: &[f64], l: u32) {
    let mut norm = 0.0;
    for (i, &a) in exponents.iter().enumerate() {
        for (j, &b) in exponents.iter().enumerate() {
            let s = (2.0 * (a * b).sqrt() / (a + b)).powf(f64::from(l) + 1.5);
            norm += c[i] * c[j] * s;
        }
    }
    if norm > 0.0 {
        let f = 1.0 / norm.sqrt();
        for x in c.iter_mut() {
            *x *= f;
        }
    }
}

/// AO segments: whole shells in order, as many segments as `target` functions each need, each
/// closed at the shell boundary nearest its share of the functions (even blocks balance the
/// work of a pardo).
fn ao_segments(shells: &[Shell], spherical: bool, target: usize) -> Vec<usize> {
    let sizes: Vec<usize> = shells.iter().map(|s| s.functions(spherical)).collect();
    let total: usize = sizes.iter().sum();
    let count = total.div_ceil(target.max(1)).max(1);
    let mut segments = Vec::new();
    let (mut current, mut done) = (0, 0);
    for (k, &n) in sizes.iter().enumerate() {
        current += n;
        done += n;
        let left = sizes.len() - k - 1;
        // The end of this segment's share of all functions so far.
        let share = total * (segments.len() + 1) / count;
        if left > 0
            && segments.len() + 1 < count
            && (done >= share || current + sizes[k + 1] > target)
        {
            segments.push(current);
            current = 0;
        }
    }
    if current > 0 {
        segments.push(current);
    }
    segments
}

/// `n` elements in segments of at most `target`, as equal as possible.
fn split(n: usize, target: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let k = n.div_ceil(target.max(1));
    (0..k).map(|i| n / k + usize::from(i < n % k)).collect()
}

/// MO segments: the frozen core alone first, then the correlated occupied orbitals (at most four
/// segments: ACES4's (T) programs split occupied segments into chunks of up to five orbitals
/// and fail beyond), then the virtual orbitals.
struct MoSegments {
    extents: Vec<usize>,
    first_occupied: usize,
    last_occupied: usize,
}

fn mo_segments(ncore: usize, nocc: usize, nbasis: usize, target: usize) -> MoSegments {
    let active = nocc - ncore;
    let occ_target = target.max(active.div_ceil(4));
    let mut extents = Vec::new();
    if ncore > 0 {
        extents.push(ncore);
    }
    let first_occupied = extents.len() + 1;
    extents.extend(split(active, occ_target));
    let last_occupied = extents.len();
    extents.extend(split(nbasis - nocc, target));
    MoSegments {
        extents,
        first_occupied,
        last_occupied,
    }
}

fn add_orbitals(
    job: &mut Job,
    mo: &MoSegments,
    ncore: usize,
    nocc: usize,
    nbasis: usize,
    ao_segments: usize,
) {
    let nseg = mo.extents.len() as i64;
    let (bocc, eocc) = (mo.first_occupied as i64, mo.last_occupied as i64);
    let nvirt = (nbasis - nocc) as i64;
    // With no virtual orbitals the virtual range is empty (ACES4's programs then skip it).
    let (bvirt, evirt) = (eocc + 1, nseg.max(eocc + 1));
    let ints = [
        ("norb", ao_segments as i64),
        ("bocc", bocc),
        ("eocc", eocc),
        ("baocc", bocc),
        ("eaocc", eocc),
        ("bbocc", bocc),
        ("ebocc", eocc),
        ("bavirt", bvirt),
        ("eavirt", evirt),
        ("bbvirt", bvirt),
        ("ebvirt", evirt),
        ("bavirtorb", nocc as i64 + 1),
        ("eavirtorb", nbasis as i64),
        ("bbvirtorb", nocc as i64 + 1),
        ("ebvirtorb", nbasis as i64),
        ("naocc", nocc as i64),
        ("nbocc", nocc as i64),
        ("nalpha_occupied", nocc as i64),
        ("nbeta_occupied", nocc as i64),
        ("nalpha_virtual", nvirt),
        ("nbeta_virtual", nvirt),
        ("nbasis_funcs", nbasis as i64),
    ];
    for (k, v) in ints {
        job.ints.insert(k.into(), v);
    }
    let _ = ncore;
    for kind in ["moindex", "moaindex", "mobindex"] {
        job.segments.insert(kind.into(), mo.extents.clone());
    }
    let table: Vec<i64> = mo.extents.iter().map(|&e| e as i64).collect();
    for name in ["mo_seg_ranges", "moa_seg_ranges", "mob_seg_ranges"] {
        job.int_arrays
            .insert(name.into(), (vec![table.len()], table.clone()));
    }
}

fn add_basis(
    job: &mut Job,
    molecule: &Molecule,
    shells: &[Shell],
    spherical: bool,
    ao_segments: &[usize],
) {
    let natoms = molecule.atoms.len();
    let mut alphas = Vec::new();
    let mut pcoeffs = Vec::new();
    let (mut ixalphas, mut ixpcoeffs, mut npfps, mut ncfps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut ivangmom, mut atom, mut end_nfps, mut indx_cc) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut ccbeg, mut ccend, mut tcoords) = (Vec::new(), Vec::new(), Vec::new());
    let mut functions = 0i64;
    for s in shells {
        ixalphas.push(alphas.len() as i64 + 1);
        ixpcoeffs.push(pcoeffs.len() as i64 + 1);
        indx_cc.push(ccbeg.len() as i64 + 1);
        alphas.extend_from_slice(&s.exponents);
        for c in &s.coefficients {
            pcoeffs.extend_from_slice(c);
            let first = c.iter().position(|&x| x != 0.0).unwrap_or(0);
            let last = c.iter().rposition(|&x| x != 0.0).unwrap_or(0);
            ccbeg.push(first as i64 + 1);
            ccend.push(last as i64 + 1);
        }
        npfps.push(s.exponents.len() as i64);
        ncfps.push(s.coefficients.len() as i64);
        ivangmom.push(i64::from(s.l));
        atom.push(s.atom as i64 + 1);
        functions += s.functions(spherical) as i64;
        end_nfps.push(functions);
        tcoords.extend_from_slice(&molecule.atoms[s.atom].position);
    }
    let nshells = shells.len();
    let coords: Vec<f64> = molecule.atoms.iter().flat_map(|a| a.position).collect();
    let charge: Vec<f64> = molecule.atoms.iter().map(|a| f64::from(a.z)).collect();
    let mut ao_ends = Vec::new();
    let mut end = 0i64;
    for &e in ao_segments {
        end += e as i64;
        ao_ends.push(end);
    }
    job.segments.insert("aoindex".into(), ao_segments.to_vec());
    let arrays = [
        ("alphas", vec![alphas.len()], alphas.clone()),
        ("pcoeffs", vec![pcoeffs.len()], pcoeffs.clone()),
        ("coords", vec![3, natoms], coords),
        ("tcoords", vec![3, nshells], tcoords),
        ("charge", vec![natoms], charge),
    ];
    for (name, shape, data) in arrays {
        job.arrays.insert(name.into(), (shape, data));
    }
    let int_arrays = [
        ("ixalphas", ixalphas),
        ("ixpcoeffs", ixpcoeffs),
        ("npfps", npfps),
        ("ncfps", ncfps),
        ("ivangmom", ivangmom),
        ("atom", atom),
        ("end_nfps", end_nfps),
        ("indx_cc", indx_cc),
        ("ccbeg", ccbeg.clone()),
        ("ccend", ccend),
        ("ao_seg_ranges", ao_ends),
    ];
    for (name, data) in int_arrays {
        job.int_arrays.insert(name.into(), (vec![data.len()], data));
    }
    let ints = [
        ("nshells", nshells as i64),
        ("ntotshells", nshells as i64),
        ("ncenters", natoms as i64),
        ("natoms", natoms as i64),
        ("three_natoms", 3 * natoms as i64),
        ("nalphas", alphas.len() as i64),
        ("npcoeffs", pcoeffs.len() as i64),
        ("n_c_funcs", ccbeg.len() as i64),
        ("intspherical", i64::from(spherical)),
    ];
    for (k, v) in ints {
        job.ints.insert(k.into(), v);
    }
}

/// The iteration controls ACES4's programs read, with the values of ACES4's own jobs, and the
/// convergence thresholds.
fn add_controls(job: &mut Job, molecule: &Molecule) {
    let ints = [
        ("cc_iter", 100),
        ("scf_iter", 150),
        ("scf_hist", 6),
        ("scf_beg", 2),
        ("diis_start", 2),
        ("diis_order", 6),
        ("eom_roots", 0),
        ("eom_subspc", 0),
        ("fromvar", 0),
        ("nfrags", 0),
        ("max_shells", 5000),
        ("guess", 0),
        ("intgrl_tol", 14),
        ("lindep_tol", 8),
        ("damp_type", 0),
        ("damp_tol", 10),
        ("damp_end", 200),
        ("lock_orbitals", 0),
        ("lock_orbocc", 0),
        ("lshft_a1", 0),
        ("lshft_b1", 0),
        ("iecp_on", 0),
        ("necp_atoms", 0),
        ("reference", 0),
    ];
    for (k, v) in ints {
        job.ints.insert(k.into(), v);
    }
    let scalars = [
        ("scf_conv", SCF_CONV),
        ("cc_conv", CC_CONV),
        ("damp", 0.2),
        ("eom_tol", 0.0),
        ("nn_repulsion", molecule.nuclear_repulsion()),
        ("scfeneg", 0.0),
        ("totenerg", 0.0),
    ];
    for (k, v) in scalars {
        job.scalars.insert(k.into(), v);
    }
}

impl Job {
    /// The job as ACES4's JSON setup file (SIAL-SPEC §9.3).
    pub fn to_json(&self) -> String {
        let mut top = Map::new();
        top.insert("SialPrograms".into(), json!(self.programs));
        top.insert("PredefinedIntegers".into(), json!(self.ints));
        top.insert("PredefinedScalars".into(), json!(self.scalars));
        top.insert("SegmentSizeArrays".into(), json!(self.segments));
        let arrays: Map<String, Value> = self
            .arrays
            .iter()
            .map(|(k, (shape, data))| {
                (
                    k.clone(),
                    json!({"Rank": shape.len(), "Dims": shape, "Data": data}),
                )
            })
            .collect();
        top.insert("PredefinedScalarArrays".into(), Value::Object(arrays));
        let int_arrays: Map<String, Value> = self
            .int_arrays
            .iter()
            .map(|(k, (shape, data))| {
                (
                    k.clone(),
                    json!({"Rank": shape.len(), "Dims": shape, "Data": data}),
                )
            })
            .collect();
        top.insert("PredefinedIntegerArrays".into(), Value::Object(int_arrays));
        let mut text = serde_json::to_string_pretty(&Value::Object(top)).unwrap_or_default();
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn water() -> Molecule {
        Molecule::parse(
            "w.xyz",
            "3\n\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nH 0 -0.7572 -0.4692\n",
        )
        .expect("water")
    }

    fn options(method: Method) -> Options {
        Options {
            method,
            charge: 0,
            frozen_core: false,
            memory: 2 << 30,
        }
    }

    #[test]
    fn water_321g_matches_aces4s_own_job_layout() {
        // ACES4's eom_ccsd_water_test.dat: water in 3-21G, shells O s (6 primitives, 3
        // functions), O p (3, 2), H s (3, 2) twice; 13 functions.
        let basis = BasisSet::named("3-21g").expect("known");
        let job = build(&water(), &basis, &options(Method::Ccsd)).expect("job");
        assert_eq!(job.int_arrays["npfps"].1, vec![6, 3, 3, 3]);
        assert_eq!(job.int_arrays["ncfps"].1, vec![3, 2, 2, 2]);
        assert_eq!(job.int_arrays["end_nfps"].1, vec![3, 9, 11, 13]);
        assert_eq!(job.int_arrays["ivangmom"].1, vec![0, 1, 0, 0]);
        assert_eq!(job.int_arrays["ixalphas"].1, vec![1, 7, 10, 13]);
        assert_eq!(job.int_arrays["ixpcoeffs"].1, vec![1, 19, 25, 31]);
        assert_eq!(job.int_arrays["ccbeg"].1, vec![1, 4, 6, 1, 3, 1, 3, 1, 3]);
        assert_eq!(job.int_arrays["ccend"].1, vec![3, 5, 6, 2, 3, 2, 3, 2, 3]);
        assert_eq!(job.int_arrays["atom"].1, vec![1, 1, 2, 3]);
        assert_eq!(job.ints["nshells"], 4);
        assert_eq!(job.ints["npcoeffs"], 36);
        assert_eq!(job.ints["naocc"], 5);
        assert_eq!(job.ints["eavirtorb"], 13);
        assert_eq!(job.segments["aoindex"], vec![13]);
        assert_eq!(job.segments["moaindex"], vec![5, 8]);
        assert_eq!(
            (
                job.ints["baocc"],
                job.ints["eaocc"],
                job.ints["bavirt"],
                job.ints["eavirt"]
            ),
            (1, 1, 2, 2)
        );
        // The first O s contraction, normalised, as in ACES4's job file.
        let c = &job.arrays["pcoeffs"].1;
        for (got, want) in
            c[..3]
                .iter()
                .zip([0.059239393389395906, 0.3514999607756436, 0.7076579210314948])
        {
            assert!((got - want).abs() < 1e-8, "{got} {want}");
        }
        assert_eq!(
            job.programs,
            vec!["scf_rhf_coreh.siox", "tran_rhf_no4v.siox", "rccsd_rhf.siox"]
        );
    }

    #[test]
    fn frozen_core_gets_its_own_segment() {
        let basis = BasisSet::named("3-21g").expect("known");
        let mut o = options(Method::CcsdT);
        o.frozen_core = true;
        let job = build(&water(), &basis, &o).expect("job");
        assert_eq!(job.segments["moaindex"], vec![1, 4, 8]);
        assert_eq!((job.ints["baocc"], job.ints["eaocc"]), (2, 2));
        assert_eq!((job.ints["bavirt"], job.ints["eavirt"]), (3, 3));
        assert_eq!(job.ints["naocc"], 5);
    }

    #[test]
    fn small_memory_gives_more_segments_on_shell_boundaries() {
        let basis = BasisSet::named("cc-pvdz").expect("known");
        let mut o = options(Method::Ccsd);
        o.memory = 40 * 8 * 8u64.pow(4);
        let job = build(&water(), &basis, &o).expect("job");
        let ao = &job.segments["aoindex"];
        assert_eq!(ao.iter().sum::<usize>(), 24);
        // Every segment ends on a shell boundary.
        let ends = &job.int_arrays["end_nfps"].1;
        let mut end = 0;
        for e in ao {
            end += *e as i64;
            assert!(ends.contains(&end), "{ao:?} {ends:?}");
        }
        assert!(ao.len() > 1);
        assert!(job.segments["moaindex"].iter().all(|&e| e <= 8));
        assert_eq!(job.ints["intspherical"], 1);
    }

    #[test]
    fn bad_charges_and_methods() {
        let basis = BasisSet::named("sto-3g").expect("known");
        let mut o = options(Method::Scf);
        o.charge = 1;
        let e = build(&water(), &basis, &o).expect_err("odd").to_string();
        assert!(
            e.starts_with("--charge:") && e.contains("9 electrons"),
            "{e}"
        );
        o.charge = 10;
        let e = build(&water(), &basis, &o).expect_err("none").to_string();
        assert!(e.contains("leaves 0 electrons"), "{e}");
        assert!("mp3".parse::<Method>().is_err());
        assert_eq!("CCSD(T)".parse::<Method>(), Ok(Method::CcsdT));
    }

    #[test]
    fn json_has_every_section() {
        let basis = BasisSet::named("sto-3g").expect("known");
        let job = build(&water(), &basis, &options(Method::Scf)).expect("job");
        let v: Value = serde_json::from_str(&job.to_json()).expect("json");
        for key in [
            "SialPrograms",
            "PredefinedIntegers",
            "PredefinedScalars",
            "SegmentSizeArrays",
            "PredefinedScalarArrays",
            "PredefinedIntegerArrays",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        assert_eq!(v["PredefinedScalarArrays"]["coords"]["Dims"], json!([3, 3]));
    }
}
