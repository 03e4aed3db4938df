//! The energies of a job under fixed names (`sial run --results`, and the end-of-run summary),
//! taken from the scalars ACES4's programs leave at their end.
//!
//! | result | ACES4 scalar | programs that compute it |
//! |---|---|---|
//! | `scf_energy` | `scf_energy` | scf_rhf_coreh, scf_rhf, scf_uhf |
//! | `mp2_correlation` | `mp2_correlation` | mp2_rhf_disc, rccsd_rhf (its first iteration) |
//! | `ccsd_correlation` | `ccsd_correlation` | rccsd_rhf |
//! | `triples_correction` | `ccsdpt_correlation` | rccsdpt_aab, rlamccsdpt_aab (aaa + aab parts) |
//! | `lccd_correlation` | `lccd_correlation` | rlccd_rhf |
//! | `lccsd_correlation` | `lccsd_correlation` | rlccsd_rhf |
//! | `total_energy` | `ccsdpt_energy`, `lccsd_energy`, `lccd_energy`, `ccsd_energy`, `mp2_energy`, `scf_energy` | the first of these (in this order) that any program computed |
//!
//! A value is taken from the last program of the job whose scalar of that name is not zero
//! (later programs restore some of them, or declare them and leave them at zero).

use serde_json::{Map, Value, json};

/// `(result name, ACES4 scalars in order of preference)`.
const RESULTS: &[(&str, &[&str])] = &[
    ("scf_energy", &["scf_energy"]),
    ("mp2_correlation", &["mp2_correlation"]),
    ("ccsd_correlation", &["ccsd_correlation"]),
    ("triples_correction", &["ccsdpt_correlation"]),
    ("lccd_correlation", &["lccd_correlation"]),
    ("lccsd_correlation", &["lccsd_correlation"]),
    (
        "total_energy",
        &[
            "ccsdpt_energy",
            "lccsd_energy",
            "lccd_energy",
            "ccsd_energy",
            "mp2_energy",
            "scf_energy",
        ],
    ),
];

/// The scalars of one finished program.
pub struct ProgramScalars {
    pub program: String,
    pub scalars: Vec<(String, f64)>,
}

/// One energy of the job and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Energy {
    pub name: &'static str,
    pub value: f64,
    /// `program.scalar`
    pub source: String,
}

/// The energies the job computed, in the order of the table above.
pub fn energies(programs: &[ProgramScalars]) -> Vec<Energy> {
    let mut out = Vec::new();
    for (name, scalars) in RESULTS {
        let found = scalars.iter().find_map(|s| {
            programs.iter().rev().find_map(|p| {
                p.scalars
                    .iter()
                    .find(|(n, v)| n == s && *v != 0.0 && v.is_finite())
                    .map(|(_, v)| Energy {
                        name,
                        value: *v,
                        source: format!("{}.{s}", p.program),
                    })
            })
        });
        out.extend(found);
    }
    out
}

/// The `sial-results/1` JSON document.
pub fn to_json(energies: &[Energy]) -> Value {
    let values: Map<String, Value> = energies
        .iter()
        .map(|e| (e.name.to_string(), json!(e.value)))
        .collect();
    let sources: Map<String, Value> = energies
        .iter()
        .map(|e| (e.name.to_string(), json!(e.source)))
        .collect();
    json!({"format": "sial-results/1", "energies": values, "sources": sources})
}

/// The table printed at the end of a run.
pub fn table(energies: &[Energy]) -> String {
    let mut out = String::from("energies (hartree):\n");
    for e in energies {
        out.push_str(&format!(
            "  {:<20} {:>22.12}   ({})\n",
            e.name, e.value, e.source
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(program: &str, scalars: &[(&str, f64)]) -> ProgramScalars {
        ProgramScalars {
            program: program.into(),
            scalars: scalars.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn a_ccsd_t_job() {
        let job = [
            p("scf_rhf_coreh", &[("scf_energy", -76.0)]),
            p("tran_rhf_no4v", &[]),
            p(
                "rccsd_rhf",
                &[
                    ("scf_energy", -76.0),
                    ("mp2_correlation", -0.20),
                    ("ccsd_correlation", -0.21),
                    ("ccsd_energy", -76.21),
                ],
            ),
            p("rccsdpt_aaa", &[("ccsdpt_correlation", 0.0)]),
            p(
                "rccsdpt_aab",
                &[("ccsdpt_correlation", -0.003), ("ccsdpt_energy", -76.213)],
            ),
        ];
        let e = energies(&job);
        let names: Vec<&str> = e.iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            vec![
                "scf_energy",
                "mp2_correlation",
                "ccsd_correlation",
                "triples_correction",
                "total_energy"
            ]
        );
        assert_eq!(e[3].value, -0.003);
        assert_eq!(e[3].source, "rccsdpt_aab.ccsdpt_correlation");
        assert_eq!(e[4].value, -76.213);
        assert_eq!(e[0].source, "rccsd_rhf.scf_energy");
        let j = to_json(&e);
        assert_eq!(j["format"], "sial-results/1");
        assert_eq!(j["energies"]["total_energy"], -76.213);
        assert!(table(&e).contains("triples_correction"));
    }

    #[test]
    fn scf_only_and_nothing() {
        let e = energies(&[p("scf", &[("scf_energy", -1.0)])]);
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].name, "total_energy");
        assert!(energies(&[p("x", &[("y", 1.0)])]).is_empty());
    }
}
