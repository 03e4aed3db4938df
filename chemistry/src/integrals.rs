//! ACES4's integral super instructions: Gaussian integrals over the job's basis set, computed
//! block by block from the setup's basis-set and geometry arrays.
//!
//! | special | signature | what |
//! |---|---|---|
//! | `compute_integral_batch aoint[a,b,c,d]` | w | the block of (ab\|cd) |
//! | `compute_ubatch1/2/4/6/7/8 aoint Da Db Fa Fb` | wrruu | one symmetry class of the SCF Fock build: adds that class's share of `J[Da+Db]−K[Da]` to Fa and of `J[Da+Db]−K[Db]` to Fb; `aoint` comes back zero, except for ubatch6, which returns the integrals |
//! | `compute_aabb_batch aoint screen` | ww | max \|(mn\|mn)\| per shell pair into a shell-indexed table |
//! | `aoladder_contraction aoint T Y` | rru | `Y[μ,i,ν,j] = Σ_λσ (λμ\|σν) T[λ,i,σ,j]` over one block pair |
//! | `compute_int_scratchmem x y z`, `compute_int_scratchmem_lowmem …` | uuu | nothing (ACES4 sizes Fortran scratch memory) |
//! | `return_h1 h[μ,ν]` | w | kinetic + nuclear attraction |
//! | `return_ovl s[μ,ν]` | w | overlap |
//! | `compute_dipole_integrals d[μ,ν] nuc xyz` | wur | ⟨μ\|x\|ν⟩ (or y, z) about the origin, and the nuclear dipole component |
//! | `compute_nn_repulsion e` | u | Σ_{A<B} Z_A Z_B / R_AB |
//! | `return_1el_ecpints h[μ,ν]` | w | ECP integrals: zero when no atom has an ECP, otherwise not supported |
//! | `a4_scf_atom Da Db kin nai S atom` | wwrrrr | ACES4's atomic UHF guess density of one atom |
//!
//! # Conventions (ACES4's)
//!
//! * Shells are the setup's per-shell arrays in order; shell `s` holds `ncfps(s)` contracted
//!   functions of angular momentum `ivangmom(s)` over `npfps(s)` shared primitives (a general
//!   contraction), centred at `tcoords(:, s)`.
//! * AO order inside a shell: contracted function slow, component fast.
//! * Cartesian components `for lx = L..0, for ly = L−lx..0`; every component is unit-normalised
//!   (xx and xy alike), and `pcoeffs` multiply unit-normalised primitives as given.
//! * `intspherical = 1`: shells with L ≥ 2 are real solid harmonics, m = +L..0..−L, each
//!   unit-normalised (s and p stay s and x, y, z).
//! * Integrals in chemists' notation (ab|cd); nuclear attraction uses `charge` at `coords`.
//!
//! The integrals come from the `integral` crate (Obara–Saika / Rys), which normalises the x^l
//! component of a Cartesian shell and has its own spherical order; [`basis`] maps its Cartesian
//! output to ACES4's functions. Batches are computed shell quartet by shell quartet when a
//! special asks for them; nothing holds all n⁴ integrals.
//!
//! # Deviations from ACES4
//!
//! * No primitive screening: ACES4's OED/ERD drop primitive pairs below 1e-14, which changes
//!   matrix elements by at most ~5e-13 in the test jobs; ours are the unscreened integrals.
//! * Segments that split a shell are an error here (ACES4 corrupts memory or prints
//!   "indices mismatch" there); every ACES4 job has shell-aligned segments.
//! * `aoladder_contraction` computes the intended sum, not ACES4's last-shell-pair overwrite
//!   (ACES4's programs never execute it; see `aoladder_contraction` in two_electron.rs).
//! * `compute_dipole_integrals` does not need the setup's `atom` array (ACES4 reads it without
//!   using it, and aborts without it); `compute_nn_repulsion` does not need `nfrags` either.
//! * `return_1el_ecpints`: semilocal ECP integrals are not implemented (an error when an atom has
//!   an ECP; a zero block when the setup says no atom has one).
//! * `a4_scf_atom` does without the setup's `atom` (shells are matched to nuclei by centre),
//!   `nbasis_funcs` and `lindep_tol` (1e-9) where ACES4 aborts; it refuses to run when
//!   `ca.data`/`cb.data` exist (ACES4 would read MO coefficients from them). For atoms with a
//!   partly filled degenerate shell its density can differ from ACES4's by a rotation.

pub mod atom_guess;
pub mod basis;
mod blocks;
mod engine;
mod fock;
mod node;
mod one_electron;
mod spherical;
mod two_electron;

#[cfg(test)]
mod testdata;

use sial_superinstructions::special::{Context, SpecialFn};

pub use basis::{BasisSet, Nuclei, Shell};
pub use engine::{
    DEFAULT_BUDGET as DEFAULT_CACHE_BUDGET, set_budget as set_cache_budget, share_among_processes,
};

/// The specials of this module: SIAL name, ACES4 signature, function.
pub const SPECIALS: &[(&str, &str, SpecialFn)] = &[
    (
        "compute_integral_batch",
        "w",
        two_electron::compute_integral_batch,
    ),
    ("compute_ubatch1", "wrruu", fock::compute_ubatch1),
    ("compute_ubatch2", "wrruu", fock::compute_ubatch2),
    ("compute_ubatch4", "wrruu", fock::compute_ubatch4),
    ("compute_ubatch6", "wrruu", fock::compute_ubatch6),
    ("compute_ubatch7", "wrruu", fock::compute_ubatch7),
    ("compute_ubatch8", "wrruu", fock::compute_ubatch8),
    ("compute_aabb_batch", "ww", two_electron::compute_aabb_batch),
    (
        "aoladder_contraction",
        "rru",
        two_electron::aoladder_contraction,
    ),
    (
        "compute_int_scratchmem",
        "uuu",
        two_electron::compute_int_scratchmem,
    ),
    (
        "compute_int_scratchmem_lowmem",
        "uuu",
        two_electron::compute_int_scratchmem_lowmem,
    ),
    ("return_h1", "w", one_electron::return_h1),
    ("return_ovl", "w", one_electron::return_ovl),
    (
        "compute_dipole_integrals",
        "wur",
        one_electron::compute_dipole_integrals,
    ),
    (
        "compute_nn_repulsion",
        "u",
        one_electron::compute_nn_repulsion,
    ),
    ("return_1el_ecpints", "w", one_electron::return_1el_ecpints),
    ("a4_scf_atom", "wwrrrr", atom_guess::a4_scf_atom),
];

/// Runs `f` with the job's basis set, built from the setup on this worker's first use and kept
/// in the worker's [`State`](sial_superinstructions::special::State) for the rest of the
/// program (the setup does not change while a program runs, and rebuilding it on every block
/// would re-validate every array each time). The basis is taken out of the state for the call
/// and put back afterwards, whatever `f` returns.
pub(crate) fn with_basis<R>(
    ctx: &mut dyn Context,
    f: impl FnOnce(&mut dyn Context, &BasisSet) -> Result<R, String>,
) -> Result<R, String> {
    let basis = match ctx.state().take::<BasisSet>() {
        Some(basis) => basis,
        None => BasisSet::from_setup(ctx)?,
    };
    let result = f(ctx, &basis);
    ctx.state().put(basis);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    #[test]
    fn specials_table() {
        let names: Vec<&str> = SPECIALS.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names.len(), 17);
        for (name, signature, _) in SPECIALS {
            assert_eq!(*name, name.to_ascii_lowercase());
            assert!(signature.chars().all(|c| "rwu".contains(c)), "{name}");
        }
        let sig = |n: &str| {
            SPECIALS
                .iter()
                .find(|(m, _, _)| *m == n)
                .map(|(_, s, _)| *s)
        };
        assert_eq!(sig("compute_ubatch6"), Some("wrruu"));
        assert_eq!(sig("a4_scf_atom"), Some("wwrrrr"));
        assert_eq!(sig("compute_ubatch3"), None);
    }

    #[test]
    fn the_basis_is_built_once_and_kept() {
        let mut ctx = testdata::Case::load("hf_321g").context();
        let n = with_basis(&mut ctx, |_, b| Ok(b.nao)).expect("basis");
        assert_eq!(n, 11);
        // Once built, the setup is no longer read.
        ctx.int_arrays.clear();
        let n = with_basis(&mut ctx, |_, b| Ok(b.shells.len())).expect("cached basis");
        assert_eq!(n, 3);
        // An error inside the closure still puts the basis back.
        let e = with_basis(&mut ctx, |_, _| Err::<(), _>("boom".to_string()));
        assert_eq!(e, Err("boom".into()));
        assert!(ctx.state().get::<BasisSet>().is_some());
        // A fresh worker without the arrays reports the first missing one.
        let mut bare = Fake::new();
        let e = with_basis(&mut bare, |_, _| Ok(())).expect_err("no setup");
        assert!(e.contains("nshells"), "{e}");
    }
}
