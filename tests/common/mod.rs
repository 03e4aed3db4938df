//! Running `sial run` from the end-to-end tests: exit status, stderr, `--stats` and `--dump`.

#[cfg(feature = "mpi")]
pub mod launch;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub struct Run {
    pub ok: bool,
    pub stderr: String,
    pub stats: Value,
    pub dump: Value,
}

/// `sial run PROGRAM ARGS --stats …` (and `--dump …` when `dump`), from the repository root.
pub fn sial(program: &str, args: &[&str], dump: bool) -> Run {
    sial_via(&[], program, args, dump)
}

/// The same, started by `launcher` (e.g. `mpirun -n 3 <sial>`; empty: `sial` itself).
pub fn sial_via(launcher: &[String], program: &str, args: &[&str], dump: bool) -> Run {
    // One folder per run: tests run in parallel.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sial-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let stats = dir.join("stats.json");
    let dumped = dir.join("dump.json");
    let mut cmd = match launcher.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest);
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_sial")),
    };
    cmd.arg("run")
        .arg(program)
        .args(args)
        .arg("--stats")
        .arg(&stats)
        .current_dir(root());
    if dump {
        cmd.arg("--dump").arg(&dumped);
    }
    let out = cmd.output().expect("run sial");
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    };
    let run = Run {
        ok: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stats: read(&stats),
        dump: read(&dumped),
    };
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// A count in the stats.
pub fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}
