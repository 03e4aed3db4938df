//! Golden runtime errors: every `tests/runtime_errors/*.sial` whose first line is `# expect: …`
//! is a valid program (`sial check` passes) that must fail `sial run` with exit status 1 and
//! exactly the standard error in the `.golden` file beside it (one `FATAL ERROR: … at
//! program:line`, SIAL-SPEC §7.15). Every `tests/runtime_errors/*.toml` with a `programs = […]`
//! list is a job checked the same way; the programs it lists start with `# part of: NAME.toml`
//! and are not run on their own. `tests/runtime_errors/valid/*.sial` must run successfully and
//! print exactly their `.golden`. `SIAL_BLESS=1 cargo test --test runtime_errors` rewrites the
//! golden files; review every message before committing it.

mod common;

use common::{Outcome, Sial, files_with_extension, root};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A run that takes longer than this is reported as a hang.
const TIME_LIMIT: Duration = Duration::from_secs(60);

fn dir() -> PathBuf {
    root().join("tests/runtime_errors")
}

fn blessing() -> bool {
    std::env::var_os("SIAL_BLESS").is_some()
}

/// Runs `sial SUBCOMMAND FILE` from the repository root, killing it after `TIME_LIMIT`.
fn sial(subcommand: &str, file: &Path) -> Outcome {
    let rel = file.strip_prefix(root()).unwrap_or(file);
    let ranks: &[&str] = if subcommand == "run" {
        &["--workers", "1", "--servers", "0"]
    } else {
        &[]
    };
    Sial::new()
        .arg(subcommand)
        .arg(rel)
        .args(ranks)
        .env_remove("SIALPATH")
        .timeout(TIME_LIMIT)
        .run()
}

fn first_line(file: &Path) -> String {
    std::fs::read_to_string(file)
        .expect("read file")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The program list of a job setup file (`programs = ["a.sial", …]`), if it has one.
fn job_programs(toml: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(toml).expect("read toml");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("programs") && l.contains('='))?;
    let list = line.split_once('=')?.1;
    Some(
        list.split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// Stand-alone error programs (`# expect:`) and job files, in name order.
fn error_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = files_with_extension(&dir(), "sial")
        .into_iter()
        .filter(|f| first_line(f).starts_with("# expect:"))
        .collect();
    cases.extend(
        files_with_extension(&dir(), "toml")
            .into_iter()
            .filter(|t| job_programs(t).is_some()),
    );
    cases.sort();
    cases
}

/// Checks one failing case against its golden file; returns the problem, if any.
fn check_error_case(case: &Path) -> Option<String> {
    let name = case.display();
    let mut out = sial("run", case);
    // A job of several programs that failed after completing some says how to restart it;
    // the hint names a fresh job id, so it is checked here and left out of the golden text.
    if let Some(hint) = out.stderr.lines().find(|l| l.contains("--restart job-")) {
        let dir = hint
            .split("(checkpoints in ")
            .nth(1)
            .and_then(|r| r.strip_suffix(')'))
            .map(PathBuf::from);
        match dir {
            Some(d) if d.is_dir() => {
                let _ = std::fs::remove_dir_all(&d);
                if let Some(parent) = d.parent() {
                    let _ = std::fs::remove_dir(parent);
                }
            }
            _ => {
                return Some(format!(
                    "{name}: the restart hint names no checkpoint folder: {hint}"
                ));
            }
        }
        let hint = hint.to_string();
        out.stderr = out
            .stderr
            .lines()
            .filter(|l| *l != hint)
            .map(|l| format!("{l}\n"))
            .collect();
    }
    if out.timed_out {
        return Some(format!("{name}: no result within {TIME_LIMIT:?} (hang)"));
    }
    if out.stderr.contains("panicked") || out.stderr.contains("RUST_BACKTRACE") {
        return Some(format!("{name}: the runtime panicked\n{}", out.stderr));
    }
    if out.code != Some(1) {
        return Some(format!(
            "{name}: exit status {:?}, expected 1\n{}",
            out.code, out.stderr
        ));
    }
    let fatal = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("FATAL ERROR: "))
        .count();
    if fatal != 1 {
        return Some(format!(
            "{name}: expected exactly one `FATAL ERROR:` line, found {fatal}\n{}",
            out.stderr
        ));
    }
    let golden = case.with_extension("golden");
    if blessing() {
        std::fs::write(&golden, &out.stderr).expect("write golden");
        return None;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    (expected != out.stderr).then(|| {
        format!(
            "{name}: error differs from {}\n--- expected\n{expected}--- actual\n{}",
            golden.display(),
            out.stderr
        )
    })
}

#[test]
fn runtime_errors_report_their_golden_messages() {
    let cases = error_cases();
    assert!(
        cases.len() >= 40,
        "expected at least 40 runtime-error cases, found {}",
        cases.len()
    );
    for case in &cases {
        assert!(
            case.with_extension("golden").exists() || blessing(),
            "{} has no .golden file",
            case.display()
        );
    }
    let problems: Vec<String> = cases.iter().filter_map(|c| check_error_case(c)).collect();
    assert!(
        problems.is_empty(),
        "{} of {} cases differ:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
}

#[test]
fn every_error_program_is_valid_for_the_compiler_and_has_a_header() {
    let mut problems = Vec::new();
    let jobs: Vec<(PathBuf, Vec<String>)> = files_with_extension(&dir(), "toml")
        .into_iter()
        .filter_map(|t| job_programs(&t).map(|p| (t, p)))
        .collect();
    for file in files_with_extension(&dir(), "sial") {
        let name = file.display();
        let text = std::fs::read_to_string(&file).expect("read program");
        let mut lines = text.lines();
        let first = lines.next().unwrap_or_default();
        if let Some(job) = first.strip_prefix("# part of: ") {
            let listed = jobs.iter().any(|(toml, programs)| {
                toml.file_name().is_some_and(|n| n == job.trim())
                    && programs
                        .iter()
                        .any(|p| file.file_name().is_some_and(|n| n == p.as_str()))
            });
            if !listed {
                problems.push(format!("{name}: not listed by the job {job}"));
            }
        } else if !first.starts_with("# expect: ")
            || !lines.next().unwrap_or_default().starts_with("# spec: ")
        {
            problems.push(format!(
                "{name}: must start with `# expect: …` and `# spec: …` (or `# part of: JOB.toml`)"
            ));
        }
        let out = sial("check", &file);
        if out.code != Some(0) {
            problems.push(format!(
                "{name}: `sial check` failed ({:?})\n{}",
                out.code, out.stderr
            ));
        }
    }
    for (toml, programs) in &jobs {
        let text = std::fs::read_to_string(toml).expect("read job");
        if !text.starts_with("# expect: ") {
            problems.push(format!("{}: must start with `# expect: …`", toml.display()));
        }
        for p in programs {
            if !dir().join(p).exists() {
                problems.push(format!("{}: lists missing program {p}", toml.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn valid_edge_cases_run() {
    let files = files_with_extension(&dir().join("valid"), "sial");
    assert!(!files.is_empty());
    let mut problems = Vec::new();
    for file in &files {
        let name = file.display();
        let out = sial("run", file);
        if out.timed_out || out.code != Some(0) || out.stderr.contains("panicked") {
            problems.push(format!(
                "{name}: exit status {:?} (timed out: {}), expected success\n{}",
                out.code, out.timed_out, out.stderr
            ));
            continue;
        }
        let golden = file.with_extension("golden");
        if blessing() {
            std::fs::write(&golden, &out.stdout).expect("write golden");
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != out.stdout {
            problems.push(format!(
                "{name}: output differs from {}\n--- expected\n{expected}--- actual\n{}",
                golden.display(),
                out.stdout
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
