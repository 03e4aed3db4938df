//! Servers holding more than their memory: the same results with any `--server-memory`, the
//! peak within the budget, and clear errors for a full disk, a missing scratch folder and a
//! budget smaller than one block.

mod common;

use common::{Sial, root, scratch};
use std::path::Path;

/// `sial run tests/spill/spill_job.sial ARGS --quiet` in `dir`: (success, stderr).
fn sial(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Sial::new()
        .arg("run")
        .arg(root().join("tests/spill/spill_job.sial"))
        .args(args)
        .arg("--quiet")
        .current_dir(dir)
        .run();
    (out.ok, out.stderr)
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("read")).expect("json")
}

/// The checksum of spill_job.sial computed here, independently of sial: 8^4 elements per
/// block, c[p,q,r,s] = (p + 2q + 3r + 5s) + 1.5 + (1 for the transposed accumulate), b = 4.5.
fn expected_total() -> f64 {
    let mut c = std::collections::HashMap::new();
    for p in 1..=4 {
        for q in 1..=4 {
            for r in 1..=4 {
                for s in 1..=4 {
                    *c.entry((p, q, r, s)).or_insert(0.0) +=
                        f64::from(p + 2 * q + 3 * r + 5 * s) + 1.5;
                    *c.entry((q, p, s, r)).or_insert(0.0) += 1.0;
                }
            }
        }
    }
    let per_block = 8.0f64.powi(4);
    c.values().map(|v| v * v * per_block).sum::<f64>() + 4.5 * 4.5 * per_block * 256.0
}

#[test]
fn arrays_four_times_the_server_memory_give_the_same_dump() {
    let dir = scratch("spill-same");
    // 4 arrays of 256 blocks of 32 KiB = 32 MiB; 2 servers of 4 MiB hold 8 MiB: 4x over.
    for ranks in [
        ["--workers", "3", "--servers", "2"],
        ["--workers", "1", "--servers", "2"],
    ] {
        let mut free = vec!["--dump", "free.json"];
        free.extend(ranks);
        let (ok, err) = sial(&dir, &free);
        assert!(ok, "{err}");
        let mut tight = vec![
            "--dump",
            "tight.json",
            "--stats",
            "stats.json",
            "--server-memory",
            "4M",
        ];
        tight.extend(ranks);
        let (ok, err) = sial(&dir, &tight);
        assert!(ok, "{err}");
        let (a, b) = (json(&dir.join("free.json")), json(&dir.join("tight.json")));
        assert_eq!(a, b, "{ranks:?}: spilling changed a value");
        let total = a["programs"][0]["scalars"]["total"]
            .as_f64()
            .expect("total");
        assert_eq!(total, expected_total());
        let stats = json(&dir.join("stats.json"));
        for s in stats["servers"].as_array().expect("servers") {
            let peak = s["disk"]["peak_memory_bytes"].as_u64().expect("peak");
            assert!(peak <= 4 << 20, "peak {peak} over the budget");
            assert!(s["disk"]["blocks_spilled"].as_u64() > Some(0));
            assert!(s["disk"]["blocks_reloaded"].as_u64() > Some(0));
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("sial-scratch"))
            .collect();
        assert!(left.is_empty(), "the scratch folder must be removed");
    }
    // One process: the worker's own server spills the same way.
    let (ok, err) = sial(
        &dir,
        &[
            "--dump",
            "solo.json",
            "--workers",
            "1",
            "--servers",
            "0",
            "--server-memory",
            "2M",
        ],
    );
    assert!(ok, "{err}");
    let solo = json(&dir.join("solo.json"));
    assert_eq!(
        solo["programs"][0]["scalars"]["total"].as_f64(),
        Some(expected_total())
    );
}

#[test]
fn spill_errors_name_the_server_the_array_and_the_path() {
    let dir = scratch("spill-errors");
    let (ok, err) = sial(
        &dir,
        &[
            "--workers",
            "2",
            "--servers",
            "1",
            "--server-memory",
            "1M",
            "--scratch-limit",
            "2M",
        ],
    );
    assert!(!ok);
    assert!(err.contains("server 0: cannot spill block"), "{err}");
    // Blocks are named with one segment per dimension of their 4-index arrays.
    let named = err
        .split("cannot spill block ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default();
    assert_eq!(named.matches(',').count(), 3, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("sial-scratch-"), "{err}");
    let (ok, err) = sial(
        &dir,
        &[
            "--server-memory",
            "1M",
            "--scratch-dir",
            "/nonexistent/scratch",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("scratch directory /nonexistent/scratch does not exist"),
        "{err}"
    );
    // A scratch folder on a file system that cannot be written (sysfs is read-only, also for
    // root): an error before the job starts.
    let read_only = std::path::Path::new("/sys/kernel");
    if read_only.is_dir() && std::fs::write(read_only.join(".sial-probe"), b"").is_err() {
        let (ok, err) = sial(
            &dir,
            &["--server-memory", "1M", "--scratch-dir", "/sys/kernel"],
        );
        assert!(!ok);
        assert!(
            err.contains("scratch directory /sys/kernel is not writable"),
            "{err}"
        );
    }
    let (ok, err) = sial(
        &dir,
        &["--workers", "1", "--servers", "1", "--server-memory", "16K"],
    );
    assert!(!ok);
    assert!(
        err.contains("needs 32768 bytes but the server memory budget is 16384 bytes"),
        "{err}"
    );
    let (ok, err) = sial(
        &dir,
        &[
            "--workers",
            "1",
            "--servers",
            "1",
            "--server-memory",
            "2M",
            "--keep-scratch",
        ],
    );
    assert!(ok, "{err}");
    let kept = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("sial-scratch"));
    assert!(kept, "--keep-scratch keeps the spill files");
}

/// Under mpirun (MPICH: `mpirun -n 4`, 2 workers and 2 server processes) the spilled run
/// gives the dump of the unlimited one.
#[cfg(feature = "mpi")]
#[test]
fn mpi_servers_spill_without_changing_the_dump() {
    let dir = scratch("spill-mpi");
    let launcher = common::launch::mpirun(4);
    let run = |extra: &[&str], dump: &str| {
        let out = Sial::via(&launcher)
            .arg("run")
            .arg(root().join("tests/spill/spill_job.sial"))
            .args([
                "--workers",
                "2",
                "--servers",
                "2",
                "--quiet",
                "--dump",
                dump,
            ])
            .args(extra)
            .current_dir(&dir)
            .run();
        assert!(out.ok, "{}", out.stderr);
        json(&dir.join(dump))
    };
    let free = run(&[], "free.json");
    let tight = run(
        &["--server-memory", "4M", "--stats", "stats.json"],
        "tight.json",
    );
    assert_eq!(free, tight, "spilling under MPI changed a value");
    assert_eq!(
        free["programs"][0]["scalars"]["total"].as_f64(),
        Some(expected_total())
    );
    let stats = json(&dir.join("stats.json"));
    for s in stats["servers"].as_array().expect("servers") {
        assert!(s["disk"]["peak_memory_bytes"].as_u64() <= Some(4 << 20));
        assert!(s["disk"]["blocks_spilled"].as_u64() > Some(0));
    }
}
