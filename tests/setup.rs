//! `sial setup` end to end: a molecule and a basis set in, an ACES4 job out, run with ACES4's
//! programs, energies out through `--results`, checked against PySCF
//! (`tests/setup/references.json`, made by `tests/setup/pyscf_references.py` with the same basis
//! set files) to 1e-8 Eh: SCF, MP2, CCSD and (T), with all electrons and with the frozen core.
//!
//! The jobs run ACES4's programs, which are not part of this repository: those trials find
//! them through `SIAL_ACES4_DIR` (as tests/aces4.rs) and are listed as ignored without it. The
//! bad-input trials always run.

mod common;

use common::{Sial, root, scratch};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};

const TOLERANCE: f64 = 1e-8;

/// `(molecule, basis set)` of the reference cases.
const MOLECULES: &[(&str, &str)] = &[
    ("water", "cc-pvdz"),
    ("ammonia", "6-31g*"),
    ("hydrogen_fluoride", "6-31g"),
];

/// The PySCF reference values of one case.
fn reference(molecule: &str, frozen: bool) -> Result<Value, Failed> {
    let text = std::fs::read_to_string(root().join("tests/setup/references.json"))
        .map_err(|e| format!("references.json: {e}"))?;
    let all: Value = serde_json::from_str(&text).map_err(|e| format!("references.json: {e}"))?;
    all["cases"]
        .as_array()
        .and_then(|cases| {
            cases
                .iter()
                .find(|c| c["molecule"] == format!("{molecule}.xyz") && c["frozen_core"] == frozen)
        })
        .cloned()
        .ok_or_else(|| format!("no reference for {molecule}").into())
}

/// setup -> run -> results, compared with PySCF.
fn job(
    aces4: &Path,
    molecule: &str,
    basis: &str,
    method: &str,
    frozen: bool,
    names: &[&str],
) -> Result<(), Failed> {
    let tag = format!(
        "{molecule}-{}-{}",
        method.replace(['(', ')'], ""),
        if frozen { "fc" } else { "all" }
    );
    let dir = scratch(&format!("setup-{tag}"));
    let xyz = root().join("tests/setup").join(format!("{molecule}.xyz"));
    let xyz = xyz.to_string_lossy().into_owned();
    let mut args = vec![
        "setup",
        "--molecule",
        &xyz,
        "--basis",
        basis,
        "--method",
        method,
        "-o",
        "job.json",
    ];
    if frozen {
        args.push("--frozen-core");
    }
    let out = Sial::new().args(&args).current_dir(&dir).run();
    if !out.ok {
        return Err(format!("setup failed: {}", out.stderr).into());
    }
    let mut run = vec!["run".to_string(), "job.json".into()];
    for d in ["scf", "cc", "utility"] {
        run.push("-I".into());
        run.push(aces4.join("qm").join(d).to_string_lossy().into_owned());
    }
    run.extend(["--results", "results.json", "-q"].map(String::from));
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let out = Sial::new().args(&run).current_dir(&dir).run();
    if !out.ok {
        let tail: Vec<&str> = out.stderr.lines().rev().take(10).collect();
        return Err(format!("run failed:\n{}", tail.join("\n")).into());
    }
    let text = std::fs::read_to_string(dir.join("results.json"))
        .map_err(|e| format!("results.json: {e}"))?;
    let results: Value = serde_json::from_str(&text).map_err(|e| format!("results: {e}"))?;
    if results["format"] != "sial-results/1" {
        return Err(format!("unexpected format {}", results["format"]).into());
    }
    let want = reference(molecule, frozen)?;
    let mut wrong = Vec::new();
    for name in names {
        let got = results["energies"][name]
            .as_f64()
            .ok_or_else(|| format!("no {name} in the results: {text}"))?;
        let expected = if *name == "total_energy" && method == "mp2" {
            want["scf_energy"].as_f64().unwrap_or(0.0)
                + want["mp2_correlation"].as_f64().unwrap_or(0.0)
        } else {
            want[name].as_f64().ok_or(format!("no reference {name}"))?
        };
        if (got - expected).abs() > TOLERANCE {
            wrong.push(format!(
                "{name}: {got:.12} PySCF {expected:.12} (difference {:.1e})",
                (got - expected).abs()
            ));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n").into())
    }
}

/// A `sial setup` that must fail with a message containing `parts`, leaving no job file.
fn refused(name: &str, xyz: &str, args: &[&str], parts: &[&str]) -> Result<(), Failed> {
    let dir = scratch(&format!("setup-bad-{name}"));
    std::fs::write(dir.join("m.xyz"), xyz).map_err(|e| e.to_string())?;
    let mut all = vec!["setup", "--molecule", "m.xyz", "-o", "job.json"];
    all.extend_from_slice(args);
    let out = Sial::new().args(&all).current_dir(&dir).run();
    let stderr = out.stderr;
    let written = dir.join("job.json").exists();
    if out.code != Some(1) {
        return Err(format!("exit status {:?}, expected 1: {stderr}", out.code).into());
    }
    if written {
        return Err("a job file was written for bad input".into());
    }
    for p in parts {
        if !stderr.contains(p) {
            return Err(format!("message lacks {p:?}: {stderr}").into());
        }
    }
    Ok(())
}

const WATER: &str = "3\nwater\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nH 0 -0.7572 -0.4692\n";

/// A water/STO-3G SCF job with one setup value changed (`edit` on the JSON), run with ACES4's
/// program: its exit status and standard error.
fn edited_job(
    aces4: &Path,
    name: &str,
    edit: impl Fn(&mut Value),
) -> Result<(bool, String), Failed> {
    let dir = scratch(&format!("setup-{name}"));
    std::fs::write(dir.join("w.xyz"), WATER).map_err(|e| e.to_string())?;
    let out = Sial::new()
        .args([
            "setup",
            "--molecule",
            "w.xyz",
            "--basis",
            "sto-3g",
            "-o",
            "job.json",
        ])
        .current_dir(&dir)
        .run();
    if !out.ok {
        return Err(out.stderr.into());
    }
    let text = std::fs::read_to_string(dir.join("job.json")).map_err(|e| e.to_string())?;
    let mut v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    edit(&mut v);
    std::fs::write(dir.join("job.json"), v.to_string()).map_err(|e| e.to_string())?;
    let scf = aces4.join("qm/scf").to_string_lossy().into_owned();
    let out = Sial::new()
        .args(["run", "job.json", "-I", &scf, "-q"])
        .current_dir(&dir)
        .run();
    Ok((out.ok, out.stderr))
}

/// A basis set array that disagrees with `nshells` stops the job with a message naming both and
/// the program line.
fn inconsistent_basis(aces4: &Path) -> Result<(), Failed> {
    let (ok, stderr) = edited_job(aces4, "inconsistent-basis", |v| {
        v["PredefinedIntegers"]["nshells"] = Value::from(5);
    })?;
    let named = stderr.contains("the setup's ivangmom has 4 entries, but nshells is 5")
        && stderr.contains("at scf_rhf_coreh:");
    if ok || !named {
        return Err(format!(
            "expected a failure naming ivangmom and nshells at scf_rhf_coreh:LINE: {stderr}"
        )
        .into());
    }
    Ok(())
}

/// An SCF that reaches scf_iter without converging finishes with a warning naming the loop,
/// the setup value and the line.
fn unconverged_scf(aces4: &Path) -> Result<(), Failed> {
    let (ok, stderr) = edited_job(aces4, "unconverged", |v| {
        v["PredefinedIntegers"]["scf_iter"] = Value::from(3);
    })?;
    let warning = "do kiter ran all its iterations up to scf_iter = 3 without leaving through exit: the iteration has not converged at scf_rhf_coreh:";
    if !ok || !stderr.contains(warning) {
        return Err(format!("expected the run to finish with {warning:?}: {stderr}").into());
    }
    Ok(())
}

fn bad_input_trials() -> Vec<Trial> {
    let cases: &[(&str, &str, &[&str], &[&str])] = &[
        (
            "unknown_element",
            "1\n\nQq 0 0 0\n",
            &["--basis", "sto-3g"],
            &["m.xyz:3:", "unknown element \"Qq\""],
        ),
        (
            "malformed_line",
            "2\n\nH 0 0 0\nH 0 0\n",
            &["--basis", "sto-3g"],
            &["m.xyz:4:", "three coordinates"],
        ),
        (
            "no_atoms",
            "0\n\n",
            &["--basis", "sto-3g"],
            &["m.xyz:1:", "no atoms"],
        ),
        (
            "not_a_count",
            "water\n",
            &["--basis", "sto-3g"],
            &["m.xyz:1:", "number of atoms"],
        ),
        (
            "unknown_basis",
            WATER,
            &["--basis", "def2-svp"],
            &["--basis", "unknown basis set \"def2-svp\""],
        ),
        (
            "element_without_basis",
            "2\n\nK 0 0 0\nH 0 0 2\n",
            &["--basis", "cc-pvdz"],
            &["--basis", "no functions for K"],
        ),
        (
            "odd_electrons",
            WATER,
            &["--basis", "sto-3g", "--charge", "1"],
            &["--charge", "9 electrons", "even"],
        ),
        (
            "no_electrons",
            WATER,
            &["--basis", "sto-3g", "--charge", "10"],
            &["--charge", "leaves 0 electrons"],
        ),
        (
            "unknown_method",
            WATER,
            &["--basis", "sto-3g", "--method", "mp3"],
            &["--method", "unknown method \"mp3\""],
        ),
        (
            "bad_memory",
            WATER,
            &["--basis", "sto-3g", "--memory", "lots"],
            &["--memory", "bad size"],
        ),
    ];
    cases
        .iter()
        .map(|&(name, xyz, args, parts)| {
            Trial::test(format!("refuses_{name}"), move || {
                refused(name, xyz, args, parts)
            })
        })
        .collect()
}

fn main() {
    let args = Arguments::from_args();
    let aces4 = std::env::var_os("SIAL_ACES4_DIR").map(PathBuf::from);
    if aces4.is_none() {
        eprintln!(
            "setup: SIAL_ACES4_DIR is not set, so the jobs (which run ACES4's programs) are listed as ignored"
        );
    }
    let mut trials = bad_input_trials();
    let mut add = |name: String,
                   molecule: &'static str,
                   basis: &'static str,
                   method: &'static str,
                   frozen: bool,
                   names: &'static [&'static str]| {
        let trial = match &aces4 {
            Some(d) => {
                let d = d.clone();
                Trial::test(name, move || {
                    job(&d, molecule, basis, method, frozen, names)
                })
            }
            None => Trial::test(name, || Ok(())).with_ignored_flag(true),
        };
        trials.push(trial);
    };
    const ALL: &[&str] = &[
        "scf_energy",
        "mp2_correlation",
        "ccsd_correlation",
        "triples_correction",
        "total_energy",
    ];
    for &(molecule, basis) in MOLECULES {
        for frozen in [false, true] {
            let name = format!(
                "ccsd_t_{molecule}_{}",
                if frozen {
                    "frozen_core"
                } else {
                    "all_electrons"
                }
            );
            add(name, molecule, basis, "ccsd(t)", frozen, ALL);
        }
    }
    const MP2: &[&str] = &["scf_energy", "mp2_correlation", "total_energy"];
    add(
        "mp2_water_frozen_core".into(),
        "water",
        "cc-pvdz",
        "mp2",
        true,
        MP2,
    );
    add(
        "scf_ammonia".into(),
        "ammonia",
        "6-31g*",
        "scf",
        false,
        &["scf_energy"],
    );
    type Check = fn(&Path) -> Result<(), Failed>;
    let checks: [(&str, Check); 2] = [
        ("inconsistent_basis_is_named", inconsistent_basis),
        ("unconverged_scf_warns", unconverged_scf),
    ];
    for (name, check) in checks {
        trials.push(match &aces4 {
            Some(d) => {
                let d = d.clone();
                Trial::test(name, move || check(&d))
            }
            None => Trial::test(name, || Ok(())).with_ignored_flag(true),
        });
    }
    libtest_mimic::run(&args, trials).exit();
}
