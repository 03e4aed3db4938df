//! Progress on stderr: pardo loops and programs of a job that run longer than a threshold get
//! lines with what is done of all (the threshold is 2 s; `--progress-after 0s` shows every
//! one here); `-q` shows none.

mod common;

use common::{Sial, root};

fn stderr(args: &[&str]) -> String {
    let out = Sial::new().arg("run").args(args).current_dir(root()).run();
    assert!(out.ok, "{}", out.stderr);
    out.stderr
}

#[test]
fn long_pardos_and_programs_say_how_far_they_are() {
    let segments = ["2"; 8].join(",");
    let aoindex = format!("aoindex={segments}");
    let program = [
        "benches/dump_big.sial",
        "--set",
        "nseg=8",
        "--segments",
        &aoindex,
        "--workers",
        "2",
        "--servers",
        "1",
    ];
    let err = stderr(&[&program[..], &["--progress-after", "0s"]].concat());
    // Stderr is not a terminal here: lines, not a redrawn bar.
    assert!(err.contains("pardo at dump_big:9: "), "{err}");
    assert!(err.contains("/64 iterations ("), "{err}");
    assert!(err.contains("/s, about "), "{err}");
    assert!(
        err.contains("pardo at dump_big:9: done, 64 iterations in "),
        "{err}"
    );
    let quiet = stderr(&[&program[..], &["--progress-after", "0s", "-q"]].concat());
    assert!(!quiet.contains("pardo at"), "{quiet}");
    let default = stderr(&program);
    assert!(
        !default.contains("pardo at"),
        "a short loop shows nothing: {default}"
    );

    let job = stderr(&["programs/persistence_job.toml", "--progress-after", "0s"]);
    assert!(
        job.contains("sial: program 2 of 3, persist_read, starts after "),
        "{job}"
    );
    assert!(
        job.contains("sial: program 3 of 3, persist_read_again"),
        "{job}"
    );
}
