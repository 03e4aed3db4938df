//! `--trace FILE.json`: a Chrome/Perfetto timeline with a track per worker and server, events
//! that nest on each track, as many barriers and spills as `--stats` counts, and (under
//! mpirun) one file for every process of the job.

mod common;

use common::{Sial, read_json, root, scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The run's trace and stats.
fn traced(dir: &Path, launcher: &[String], program: &str, args: &[&str]) -> (Value, Value) {
    let trace = dir.join("t.json");
    let stats = dir.join("s.json");
    let out = Sial::via(launcher)
        .args(["run", program, "-q", "--trace"])
        .arg(&trace)
        .arg("--stats")
        .arg(&stats)
        .args(args)
        .current_dir(root())
        .run();
    assert!(out.ok, "{program}: {}", out.stderr);
    (read_json(&trace), read_json(&stats))
}

/// Events of each track (process, thread name), in time order.
fn tracks(trace: &Value) -> BTreeMap<(u64, String), Vec<Value>> {
    let events = trace["traceEvents"].as_array().cloned().unwrap_or_default();
    let mut names = BTreeMap::new();
    for e in &events {
        if e["ph"] == "M" && e["name"] == "thread_name" {
            let key = (
                e["pid"].as_u64().unwrap_or(0),
                e["tid"].as_u64().unwrap_or(0),
            );
            names.insert(
                key,
                e["args"]["name"].as_str().unwrap_or_default().to_string(),
            );
        }
    }
    let mut out: BTreeMap<(u64, String), Vec<Value>> = BTreeMap::new();
    for e in events
        .into_iter()
        .filter(|e| e["ph"] == "X" || e["ph"] == "C")
    {
        let key = (
            e["pid"].as_u64().unwrap_or(0),
            e["tid"].as_u64().unwrap_or(0),
        );
        let name = names
            .get(&key)
            .cloned()
            .unwrap_or_else(|| panic!("unnamed track {key:?}"));
        out.entry((key.0, name)).or_default().push(e);
    }
    for list in out.values_mut() {
        // Outer events first where two start together.
        let key = |e: &Value| {
            (
                e["ts"].as_f64().unwrap_or(0.0),
                -e["dur"].as_f64().unwrap_or(0.0),
            )
        };
        list.sort_by(|a, b| key(a).partial_cmp(&key(b)).expect("times"));
    }
    out
}

/// The intervals of a track nest: each starts after the previous one ended, or ends inside
/// the one it starts in.
fn check_nesting(track: &str, events: &[Value]) {
    let mut open: Vec<(f64, &Value)> = Vec::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let start = e["ts"].as_f64().expect("ts");
        let end = start + e["dur"].as_f64().expect("dur");
        while open.last().is_some_and(|o| o.0 <= start) {
            open.pop();
        }
        if let Some((outer, around)) = open.last() {
            // Microsecond timestamps of one clock: allow their rounding.
            assert!(
                end <= outer + 1.0,
                "{track}: {e} overlaps the event around it, {around}"
            );
        }
        open.push((end, e));
    }
}

fn count(events: &[Value], cat: &str, name: &str) -> usize {
    events
        .iter()
        .filter(|e| e["cat"] == cat && e["name"] == name)
        .count()
}

#[test]
fn threads_have_a_track_each_with_nested_events() {
    let dir = scratch("trace-threads");
    let (trace, stats) = traced(
        &dir,
        &[],
        "programs/delete_recreate.sial",
        &["--workers", "2", "--servers", "1", "--trace-min", "0s"],
    );
    let tracks = tracks(&trace);
    let names: Vec<&str> = tracks.keys().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["server 0", "worker 0", "worker 1"], "{names:?}");
    for ((_, name), events) in &tracks {
        check_nesting(name, events);
    }
    for w in 0..2 {
        let events = &tracks[&(0, format!("worker {w}"))];
        let barriers = stats["workers"][w]["barriers"].as_u64().expect("barriers") as usize;
        assert_eq!(count(events, "barrier", "barrier"), barriers, "worker {w}");
        // With no threshold every instruction is there.
        assert!(count(events, "instruction", "put") > 0, "worker {w}");
    }
    let server = &tracks[&(0, "server 0".to_string())];
    let requests = stats["servers"][0]["requests"].as_u64().expect("requests") as usize;
    assert_eq!(
        server.iter().filter(|e| e["cat"] == "server").count(),
        requests
    );
    assert!(count(server, "server", "put") > 0 && count(server, "server", "get") > 0);
}

#[test]
fn spills_and_reloads_are_on_the_server_track() {
    let dir = scratch("trace-spill");
    let (trace, stats) = traced(
        &dir,
        &[],
        "tests/spill/spill_job.sial",
        &["--workers", "2", "--servers", "1", "--server-memory", "1M"],
    );
    let tracks = tracks(&trace);
    let server = &tracks[&(0, "server 0".to_string())];
    let disk = &stats["servers"][0]["disk"];
    let spilled = disk["blocks_spilled"].as_u64().expect("spilled") as usize;
    let reloaded = disk["blocks_reloaded"].as_u64().expect("reloaded") as usize;
    assert!(spilled > 0 && reloaded > 0, "{disk}");
    assert_eq!(count(server, "disk", "spill"), spilled);
    assert_eq!(count(server, "disk", "reload"), reloaded);
    check_nesting("server 0", server);
}

/// Device transfers are on copy-stream tracks beside the worker's, as many as `--stats`
/// counts (the host-memory stand-in device: no GPU needed).
#[test]
fn device_transfers_are_on_copy_stream_tracks() {
    let dir = scratch("trace-device");
    let (trace, stats) = traced(
        &dir,
        &[],
        "programs/contraction_matmul.sial",
        &common::device(),
    );
    let tracks = tracks(&trace);
    let uploads = stats["gpu"]["uploads"].as_u64().expect("uploads") as usize;
    let downloads = stats["gpu"]["downloads"].as_u64().expect("downloads") as usize;
    assert!(uploads > 0 && downloads > 0, "{}", stats["gpu"]);
    let on = |track: &str, name: &str| {
        tracks
            .get(&(0, track.to_string()))
            .map_or(0, |events| count(events, "device", name))
    };
    assert_eq!(on("worker 0 copy stream 0", "upload"), uploads);
    assert_eq!(on("worker 0 copy stream 1", "download"), downloads);
}

#[test]
fn a_trace_that_cannot_be_written_is_an_error_before_the_run() {
    let out = Sial::new()
        .args([
            "run",
            "programs/delete_recreate.sial",
            "--trace",
            "/nonexistent/t.json",
        ])
        .current_dir(root())
        .run();
    assert!(!out.ok);
    assert!(
        out.stderr.contains("--trace /nonexistent/t.json"),
        "{}",
        out.stderr
    );
}

/// Under mpirun every process writes its part; rank 0 joins them into the one file.
#[cfg(feature = "mpi")]
#[test]
fn mpi_processes_are_one_trace() {
    let dir = scratch("trace-mpi");
    let (trace, _) = traced(
        &dir,
        &common::launch::mpirun(3),
        "programs/delete_recreate.sial",
        &["--trace-min", "0s"],
    );
    let tracks = tracks(&trace);
    let names: Vec<(u64, &str)> = tracks.keys().map(|(p, n)| (*p, n.as_str())).collect();
    assert_eq!(names, [(0, "worker 0"), (1, "worker 1"), (2, "server 0")]);
    for ((_, name), events) in &tracks {
        check_nesting(name, events);
    }
    let leftovers = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".rank-"))
        .count();
    assert_eq!(leftovers, 0, "the parts are joined and removed");
}
