//! Checks of `sial run`'s options that need no run, so that a mistake stops the job before it
//! starts instead of being ignored or found at its end.

use sial_compiler::bytecode::Program;
use std::collections::BTreeSet;
use std::path::Path;

/// Ranks one process runs as threads (`--workers` + `--servers`); more is a job for mpirun.
pub const MAX_THREAD_RANKS: usize = 1024;

pub fn thread_ranks(workers: usize, servers: usize) -> Result<(), String> {
    if workers.saturating_add(servers) > MAX_THREAD_RANKS {
        return Err(format!(
            "--workers {workers} --servers {servers}: one process runs at most {MAX_THREAD_RANKS} ranks as threads; run more under mpirun"
        ));
    }
    Ok(())
}

/// An output file (`--dump`, `--stats`) can be written: its folder exists and it is not a
/// folder itself. Nothing is left behind by the check.
pub fn output_file(option: &str, path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!(
            "{option} {}: is a folder; give a file name",
            path.display()
        ));
    }
    let existed = path.exists();
    match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(format!(
            "{option} {}: cannot write there: {e}",
            path.display()
        )),
    }
}

/// An output folder (`--dump-arrays`) exists or can be made, and can be written.
pub fn output_dir(option: &str, dir: &Path) -> Result<(), String> {
    let cannot = |e: std::io::Error| format!("{option} {}: cannot write there: {e}", dir.display());
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "{option} {}: is a file; give a folder",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let probe = dir.join(format!(".sial-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(cannot)?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Every `--set NAME=VALUE` names a value the setup file defines or a predefined int or
/// scalar of one of the programs (a typo is an error with the nearest name), and a value for a
/// predefined int is an int.
pub fn sets(sets: &[String], known: &BTreeSet<String>, programs: &[Program]) -> Result<(), String> {
    let ints: BTreeSet<&str> = programs
        .iter()
        .flat_map(|p| p.ints.iter().filter(|i| i.predefined))
        .map(|i| i.name.as_str())
        .collect();
    let scalars: BTreeSet<&str> = programs
        .iter()
        .flat_map(|p| p.scalars.iter().filter(|s| s.predefined))
        .map(|s| s.name.as_str())
        .collect();
    for a in sets {
        let Some((name, value)) = a.split_once('=') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if ints.contains(name.as_str()) && value.parse::<i32>().is_err() {
            return Err(format!(
                "--set {a}: {name} is a predefined int; {value:?} is not an int"
            ));
        }
        let declared = ints.contains(name.as_str()) || scalars.contains(name.as_str());
        if !declared && !known.contains(&name) {
            let candidates = ints
                .iter()
                .chain(&scalars)
                .copied()
                .chain(known.iter().map(String::as_str));
            let hint = nearest(&name, candidates)
                .map(|n| format!(" (did you mean {n}?)"))
                .unwrap_or_default();
            return Err(format!(
                "--set {a}: no program of the job declares a predefined int or scalar {name}, and the setup does not define it{hint}"
            ));
        }
    }
    Ok(())
}

/// The candidate nearest to `name` by edit distance, when close enough to be a typo.
fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance, with a swap of two neighbours counted as one edit.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_name() {
        assert_eq!(distance("nrob", "norb"), 1);
        assert_eq!(
            nearest("nrob", ["norb", "nocc", "scf_conv"].into_iter()),
            Some("norb")
        );
        assert_eq!(nearest("zzzz", ["norb"].into_iter()), None);
    }

    #[test]
    fn rank_counts_and_output_files() {
        assert!(thread_ranks(4, 2).is_ok());
        assert!(thread_ranks(100_000, 1).is_err());
        let dir = std::env::temp_dir();
        assert!(output_file("--stats", &dir).is_err());
        assert!(output_file("--dump", &dir.join("no-such-folder-sial/d.json")).is_err());
        let f = dir.join(format!("sial-check-{}.json", std::process::id()));
        assert!(output_file("--dump", &f).is_ok());
        assert!(!f.exists(), "the check leaves nothing behind");
        let made = dir.join(format!("sial-arrays-check-{}", std::process::id()));
        assert!(output_dir("--dump-arrays", &made.join("a/b")).is_ok());
        let file = made.join("a-file");
        std::fs::write(&file, "x").expect("a file");
        assert!(output_dir("--dump-arrays", &file).is_err());
        let _ = std::fs::remove_dir_all(&made);
    }
}
