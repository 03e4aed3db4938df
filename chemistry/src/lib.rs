//! ACES4's quantum-chemistry super instructions ("specials", SIAL-SPEC §8.5), with ACES4's names,
//! arguments and results, so that ACES4's chemistry programs (SCF, integral transformation, MP2,
//! CCSD, CCSD(T), Λ, LCC, CIS, EOM) run unchanged:
//!
//! | module | specials |
//! |---|---|
//! | [`integrals`] | Gaussian integrals from the job's basis-set and geometry arrays: two-electron batches and Fock builds, one-electron, dipole, nuclear repulsion |
//! | [`linalg`] | dense linear algebra on static arrays: eigensolvers, DIIS, diagonal inverses |
//! | [`scf`] | SCF helpers: occupations, damping, convergence, the atomic guess |
//! | [`cc`] | coupled-cluster and EOM utilities: denominators, (T) helpers, symmetrisers, CIS guess, frozen core |
//!
//! Besides the specials: [`setup`] writes ACES4 jobs from a molecule and a basis-set name
//! (`sial setup`), and [`results`] names the energies a job computed (`sial run --results`).
//!
//! Nothing here knows the runtime: each special is a [`SpecialFn`] that sees its arguments and
//! the [`Context`](sial_superinstructions::special::Context) services, and [`register`] is the one
//! coupling (the `sial` command calls it).

pub mod args;
pub mod cc;
pub mod integrals;
pub mod linalg;
pub mod results;
pub mod scf;
pub mod setup;

use sial_superinstructions::special::{Registry, SpecialFn};

/// Every chemistry special: SIAL name, ACES4 signature (one intent letter per argument), function.
pub fn specials() -> impl Iterator<Item = &'static (&'static str, &'static str, SpecialFn)> {
    integrals::SPECIALS
        .iter()
        .chain(linalg::SPECIALS)
        .chain(scf::SPECIALS)
        .chain(cc::SPECIALS)
}

/// Registers every chemistry special (replacing any of the same name already registered).
pub fn register(registry: &mut Registry) {
    for (name, _, f) in specials() {
        registry.register(name, *f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lower_case() {
        let mut names: Vec<&str> = specials().map(|(n, _, _)| *n).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a special is listed twice");
        for name in names {
            assert_eq!(name, name.to_ascii_lowercase());
        }
    }
}
