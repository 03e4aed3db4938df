//! The basis sets `sial setup` knows, shipped in the repository (`chemistry/basis/*.json`,
//! written from the Basis Set Exchange by `chemistry/basis/make_basis.py`) and compiled into
//! the binary, so a job can be made without the network.

use super::SetupError;
use super::elements::symbol;
use serde::Deserialize;
use std::collections::BTreeMap;

/// (name as users write it, file contents).
const BASES: &[(&str, &str)] = &[
    ("sto-3g", include_str!("../../basis/sto-3g.json")),
    ("3-21g", include_str!("../../basis/3-21g.json")),
    ("6-31g", include_str!("../../basis/6-31g.json")),
    ("6-31g*", include_str!("../../basis/6-31g_st.json")),
    ("cc-pvdz", include_str!("../../basis/cc-pvdz.json")),
    ("cc-pvtz", include_str!("../../basis/cc-pvtz.json")),
    ("aug-cc-pvdz", include_str!("../../basis/aug-cc-pvdz.json")),
];

/// One shell as the Basis Set Exchange gives it: several angular momenta only for Pople's sp
/// shells (one coefficient row per angular momentum), otherwise one angular momentum with one
/// row per contracted function.
#[derive(Clone, Debug, Deserialize)]
pub struct BseShell {
    pub l: Vec<u32>,
    pub exponents: Vec<f64>,
    pub coefficients: Vec<Vec<f64>>,
}

#[derive(Deserialize)]
struct BseFile {
    name: String,
    function_types: Vec<String>,
    elements: BTreeMap<String, Vec<BseShell>>,
}

/// A basis set: its shells per element, and whether its functions are spherical.
#[derive(Clone, Debug)]
pub struct BasisSet {
    pub name: String,
    pub spherical: bool,
    elements: BTreeMap<u32, Vec<BseShell>>,
}

impl BasisSet {
    /// The basis set `name` (case-insensitive: `cc-pVDZ`, `6-31G*`, ...).
    pub fn named(name: &str) -> Result<BasisSet, SetupError> {
        let wanted = name.to_ascii_lowercase();
        let Some((_, text)) = BASES.iter().find(|(n, _)| *n == wanted) else {
            return Err(SetupError::Option {
                option: "--basis".into(),
                message: format!(
                    "unknown basis set {name:?}; known: {}",
                    BASES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                ),
            });
        };
        let file: BseFile = serde_json::from_str(text).map_err(|e| SetupError::Option {
            option: "--basis".into(),
            message: format!("the shipped data of {name} is damaged: {e}"),
        })?;
        let mut elements = BTreeMap::new();
        for (z, shells) in file.elements {
            if let Ok(z) = z.parse::<u32>() {
                elements.insert(z, shells);
            }
        }
        Ok(BasisSet {
            name: file.name,
            spherical: file.function_types.iter().any(|t| t == "gto_spherical"),
            elements,
        })
    }

    /// The names `named` accepts.
    pub fn known() -> impl Iterator<Item = &'static str> {
        BASES.iter().map(|(n, _)| *n)
    }

    /// The shells of element `z`, or an error naming the element and the basis set.
    pub fn shells(&self, z: u32) -> Result<&[BseShell], SetupError> {
        self.elements
            .get(&z)
            .map(Vec::as_slice)
            .ok_or_else(|| SetupError::Option {
                option: "--basis".into(),
                message: format!("basis set {} has no functions for {}", self.name, symbol(z)),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_basis_loads_for_h_to_ar() {
        for name in BasisSet::known() {
            let b = BasisSet::named(name).expect(name);
            for z in 1..=18 {
                let shells = b.shells(z).expect("element present");
                assert!(!shells.is_empty());
                for s in shells {
                    assert_eq!(s.coefficients.len().max(1), s.coefficients.len());
                    for row in &s.coefficients {
                        assert_eq!(row.len(), s.exponents.len(), "{name} Z={z}");
                    }
                }
            }
        }
        assert!(BasisSet::named("CC-PVDZ").expect("any case").spherical);
        assert!(!BasisSet::named("6-31G*").expect("star").spherical);
    }

    #[test]
    fn unknown_names_and_elements() {
        let e = BasisSet::named("def2-svp")
            .expect_err("unknown")
            .to_string();
        assert!(
            e.contains("--basis") && e.contains("def2-svp") && e.contains("cc-pvdz"),
            "{e}"
        );
        let b = BasisSet::named("sto-3g").expect("known");
        let e = b.shells(19).expect_err("K").to_string();
        assert!(e.contains("no functions for K"), "{e}");
    }
}
