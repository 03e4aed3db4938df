//! Runs every program in `programs/` and checks its results against the values written in its
//! header, computed independently (by hand or with numpy) when the program was written:
//! `# expect: NAME = VALUE` (final value of a scalar or int), `# expect-print: TEXT` (the whole
//! standard output, line by line), `# expect-print-contains: TEXT` (a line that must appear),
//! `# expect-error: TEXT` (the run must fail with this message), `# expect-warning: TEXT` (a
//! warning on stderr). Programs marked
//! `# job: FILE` (a job file beside the program) run as part of that job.

mod common;

use common::{Outcome, Sial, read_json, root, sial_sources};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Default, Debug)]
struct Expectations {
    values: Vec<(String, f64)>,
    print: Vec<String>,
    print_contains: Vec<String>,
    warnings: Vec<String>,
    error: Option<String>,
    job: Option<String>,
}

fn expectations(path: &Path) -> Expectations {
    let text = std::fs::read_to_string(path).expect("read program");
    let mut e = Expectations::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# expect: ") {
            let (name, value) = rest.split_once('=').expect("NAME = VALUE");
            let value: f64 = value
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{}: bad value in {line}", path.display()));
            e.values.push((name.trim().to_string(), value));
        } else if let Some(rest) = line.strip_prefix("# expect-print-contains: ") {
            e.print_contains.push(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("# expect-print:") {
            e.print
                .push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
        } else if let Some(rest) = line.strip_prefix("# expect-warning: ") {
            e.warnings.push(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("# expect-error: ") {
            e.error = Some(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("# job: ") {
            e.job = Some(
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    e
}

/// `sial run JOB --workers 1 --servers 0 --dump DUMP`: the outcome and the dump.
fn run(job: &Path, dump: &Path) -> (Outcome, Value) {
    let out = Sial::new()
        .arg("run")
        .arg(job)
        .args(["--workers", "1", "--servers", "0"])
        .arg("--dump")
        .arg(dump)
        .env_remove("SIALPATH")
        .run();
    (out, read_json(dump))
}

/// Compares the `# expect` lines of one program with its outcome; returns the problems.
fn check(name: &str, e: &Expectations, outcome: &Outcome, state: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(err) = &e.error {
        if outcome.ok || !outcome.stderr.contains(err.as_str()) {
            problems.push(format!(
                "{name}: expected failure with {err:?}, got ok={} stderr={}",
                outcome.ok, outcome.stderr
            ));
        }
        return problems;
    }
    if !outcome.ok {
        problems.push(format!("{name}: run failed: {}", outcome.stderr));
        return problems;
    }
    for (var, want) in &e.values {
        let got = state["scalars"]
            .get(var)
            .or_else(|| state["ints"].get(var))
            .and_then(|v| v.as_f64());
        match got {
            Some(got) if (got - want).abs() <= 1e-10 * want.abs().max(1.0) => {}
            Some(got) => problems.push(format!("{name}: {var} = {got:?}, expected {want:?}")),
            None => problems.push(format!("{name}: no scalar or int named {var} in the dump")),
        }
    }
    if !e.print.is_empty() {
        let got: Vec<&str> = outcome.stdout.lines().collect();
        if got != e.print.iter().map(String::as_str).collect::<Vec<_>>() {
            problems.push(format!(
                "{name}: output differs\n--- expected\n{}\n--- actual\n{}",
                e.print.join("\n"),
                outcome.stdout
            ));
        }
    }
    for w in &e.warnings {
        if !outcome
            .stderr
            .lines()
            .any(|l| l.starts_with("WARNING:") && l.contains(w.as_str()))
        {
            problems.push(format!(
                "{name}: no warning containing {w:?}\n--- stderr\n{}",
                outcome.stderr
            ));
        }
    }
    for line in &e.print_contains {
        if !outcome
            .stdout
            .lines()
            .any(|l| l.trim_end() == line.trim_end())
        {
            problems.push(format!(
                "{name}: output lacks the line {line:?}\n--- actual\n{}",
                outcome.stdout
            ));
        }
    }
    problems
}

#[test]
fn programs_compute_their_expected_results() {
    let dir = std::env::temp_dir().join(format!("sial-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let files = sial_sources(&root().join("programs"));
    let mut problems = Vec::new();
    let mut jobs: BTreeMap<String, Vec<(String, Expectations)>> = BTreeMap::new();
    let mut checked = 0;
    for file in &files {
        let name = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let e = expectations(file);
        if let Some(job) = e.job.clone() {
            // The job file lives beside its programs.
            let rel = file.strip_prefix(root()).unwrap_or(file);
            let job = rel.parent().unwrap_or(Path::new("programs")).join(job);
            jobs.entry(job.display().to_string())
                .or_default()
                .push((name, e));
            continue;
        }
        let dump = dir.join(format!("{name}.json"));
        let (outcome, dumped) = run(file.strip_prefix(root()).unwrap_or(file), &dump);
        let state = dumped["programs"]
            .as_array()
            .and_then(|p| p.last())
            .cloned()
            .unwrap_or_default();
        problems.extend(check(&name, &e, &outcome, &state));
        checked += 1;
    }
    for (job, members) in &jobs {
        let dump = dir.join(format!("{}.json", job.replace('/', "_")));
        let (outcome, dumped) = run(Path::new(job), &dump);
        let states = dumped["programs"].as_array().cloned().unwrap_or_default();
        for (name, e) in members {
            let state = states
                .iter()
                .find(|s| s["program"] == name.as_str())
                .cloned()
                .unwrap_or_default();
            problems.extend(check(name, e, &outcome, &state));
            checked += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(checked >= 40, "only {checked} programs checked");
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

/// How many times each line of `program` ran (`--profile`, one process), by line number.
fn line_counts(program: &str) -> BTreeMap<usize, u64> {
    let path = root().join("programs").join(program);
    let out = Sial::new()
        .arg("run")
        .arg(&path)
        .args(["--workers", "1", "--servers", "0", "--profile", "-q"])
        .env_remove("SIALPATH")
        .run();
    assert!(out.ok, "{}", out.stderr);
    let name = program.trim_end_matches(".sial");
    out.stderr
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let line = words.next()?.strip_prefix(name)?.strip_prefix(':')?;
            Some((line.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

/// The line of `program`'s source whose text (trimmed) is `text`.
fn line_of(program: &str, text: &str) -> usize {
    let source = std::fs::read_to_string(root().join("programs").join(program)).expect("read");
    source
        .lines()
        .position(|l| l.trim() == text)
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{program}: no line `{text}`"))
}

/// Whether this CPU runs the broadcast-products contraction kernel (AVX-512 F and VL), the
/// one that adds `t = l * r` straight into a sum here.
fn broadcast_kernel_runs_here() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::env::var_os("SIAL_NO_BROADCAST_KERNEL").is_none()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[test]
fn temps_only_the_next_add_reads_are_skipped() {
    let p = "product_added.sial";
    let ran = line_counts(p);
    let count = |text: &str| ran.get(&line_of(p, text)).copied().unwrap_or(0);
    // 16 pardo iterations x 2 segments of e.
    assert_eq!(count("t[a,b,c,k] = l[a,e,c,k] * r[e,b]"), 32);
    // Added straight into x and y where the kernel adds in place: the adds (and the copy)
    // never run as instructions. Elsewhere everything runs (the results are the same).
    let folded = if broadcast_kernel_runs_here() { 0 } else { 32 };
    assert_eq!(count("x[a,b,c,k] += t[a,b,c,k]"), folded);
    assert_eq!(count("t2[a,b,c,k] = l[a,e,c,k] * r[e,b]"), 32);
    assert_eq!(count("u[a,b,c,k] = t2[a,b,c,k]"), folded);
    // Not the add either way: where the contraction runs, the copy and the add run as one
    // (`y += t2`, counted at the copy's line).
    assert_eq!(count("y[a,b,c,k] += u[a,b,c,k]"), 0);
    // t3 is read again: everything runs.
    assert_eq!(count("z[a,b,c,k] += t3[a,b,c,k]"), 32);
}
