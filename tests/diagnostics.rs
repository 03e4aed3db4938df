//! Golden diagnostics: every `tests/diagnostics/*.sial` must fail `sial check` with exactly the
//! text in the `.golden` file beside it; every `tests/diagnostics/valid/*.sial` must pass (its
//! warnings, if any, match its `.golden`). `SIAL_BLESS=1 cargo test --test diagnostics` rewrites
//! the golden files; review the diff before committing it.

mod common;

use common::{Sial, files_with_extension, root};
use std::path::{Path, PathBuf};

fn sial_check(file: &Path) -> (i32, String) {
    let rel = file.strip_prefix(root()).unwrap_or(file);
    let out = Sial::new()
        .arg("check")
        .arg(rel)
        .env_remove("SIALPATH")
        .run();
    (out.code.unwrap_or(-1), out.stderr)
}

/// Compares every file's output with its golden file; returns the list of problems.
fn compare(files: &[PathBuf], want_status: i32) -> Vec<String> {
    let bless = std::env::var_os("SIAL_BLESS").is_some();
    let mut problems = Vec::new();
    for file in files {
        let (status, text) = sial_check(file);
        let name = file.display();
        if status != want_status {
            problems.push(format!(
                "{name}: exit status {status}, expected {want_status}\n{text}"
            ));
            continue;
        }
        let golden = file.with_extension("golden");
        if bless {
            if !text.is_empty() || golden.exists() {
                std::fs::write(&golden, &text).expect("write golden");
            }
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != text {
            problems.push(format!(
                "{name}: diagnostics differ from {}\n--- expected\n{expected}--- actual\n{text}",
                golden.display()
            ));
        }
    }
    problems
}

#[test]
fn invalid_programs_report_their_golden_diagnostics() {
    let files = files_with_extension(&root().join("tests/diagnostics"), "sial");
    assert!(
        files.len() >= 80,
        "expected at least 80 invalid programs, found {}",
        files.len()
    );
    for f in &files {
        assert!(
            f.with_extension("golden").exists() || std::env::var_os("SIAL_BLESS").is_some(),
            "{} has no .golden file",
            f.display()
        );
    }
    let problems = compare(&files, 1);
    assert!(
        problems.is_empty(),
        "{} of {} files differ:\n{}",
        problems.len(),
        files.len(),
        problems.join("\n")
    );
}

#[test]
fn valid_edge_cases_compile() {
    let files = files_with_extension(&root().join("tests/diagnostics/valid"), "sial");
    assert!(!files.is_empty());
    let problems = compare(&files, 0);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
