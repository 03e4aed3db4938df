//! Error paths of the distributed runtime (threads): data races found by the servers, reads of
//! blocks never written or never fetched, the worker memory budget (eviction, and a request that
//! cannot fit), and ranks that die. Every case must end with the right message and a non-zero
//! status within seconds, never a hang.

mod common;

use common::{Outcome, Sial, root, scratch};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `sial run ARGS` from the root; kills it after 60 s (a hang is a failure).
fn sial(args: &[&str]) -> Outcome {
    let o = Sial::new()
        .arg("run")
        .args(args)
        .arg("--quiet")
        .discard_stdout()
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!o.timed_out, "sial run {args:?} hung for 60 s");
    o
}

fn fails_with(args: &[&str], message: &str) -> Outcome {
    let o = sial(args);
    assert!(!o.ok, "{args:?} should fail");
    assert!(
        o.stderr.contains(message),
        "{args:?}: expected {message:?} in\n{}",
        o.stderr
    );
    o
}

#[test]
fn two_workers_replacing_one_block_is_a_race() {
    fails_with(
        &[
            "tests/failures/race_put.sial",
            "--workers",
            "2",
            "--servers",
            "1",
        ],
        "Incorrect PUT block semantics (data race) for d[1] from worker",
    );
    fails_with(
        &[
            "tests/failures/race_put.sial",
            "--workers",
            "2",
            "--servers",
            "1",
        ],
        "Probably a missing sip_barrier at race_put:11",
    );
    // One worker replacing its own block is no race.
    assert!(
        sial(&[
            "tests/failures/race_put.sial",
            "--workers",
            "1",
            "--servers",
            "1"
        ])
        .ok
    );
}

#[test]
fn a_read_and_a_write_of_one_block_in_one_section_is_a_race() {
    let o = fails_with(
        &[
            "tests/failures/race_get_put.sial",
            "--workers",
            "2",
            "--servers",
            "1",
        ],
        "Probably a missing sip_barrier at race_get_put:",
    );
    assert!(o.stderr.contains("d[1]"), "{}", o.stderr);
}

#[test]
fn blocks_never_written_or_never_fetched_are_named() {
    for (w, s) in [("2", "1"), ("3", "2")] {
        fails_with(
            &[
                "tests/runtime_errors/get_never_put.sial",
                "--workers",
                w,
                "--servers",
                s,
            ],
            "It has not been put/prepared before ! at get_never_put:15",
        );
        fails_with(
            &[
                "tests/runtime_errors/distributed_read_without_get.sial",
                "--workers",
                w,
                "--servers",
                s,
            ],
            "Attempting to read non-existent block d[",
        );
    }
}

#[test]
fn the_worker_memory_budget_evicts_and_reports_what_does_not_fit() {
    let dir = scratch("failures");
    let (small, big) = (dir.join("small.json"), dir.join("big.json"));
    let stats = dir.join("stats.json");
    let program = "tests/failures/budget.sial";
    let common = ["--workers", "1", "--servers", "1"];
    // Four fetched blocks of 2 KiB and one temp block: 10 KiB at the most at once.
    let mut args = vec![program, "--worker-memory", "11K", "--dump"];
    let small_s = small.to_string_lossy().into_owned();
    let stats_s = stats.to_string_lossy().into_owned();
    args.extend([small_s.as_str(), "--stats", stats_s.as_str()]);
    args.extend(common);
    assert!(
        sial(&args).ok,
        "a budget of five blocks and a half is enough"
    );
    let big_s = big.to_string_lossy().into_owned();
    let mut args = vec![program, "--dump", big_s.as_str()];
    args.extend(common);
    assert!(sial(&args).ok);
    let read = |p: &PathBuf| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).expect("read")).expect("json")
    };
    let (s, b) = (read(&small), read(&big));
    assert_eq!(s, b, "eviction must not change any value");
    assert_eq!(s["programs"][0]["scalars"]["total"], 16.0 * 256.0);
    let st = read(&stats);
    let evicted = st["workers"][0]["blocks_evicted"].as_u64().unwrap_or(0);
    assert!(
        evicted >= 8,
        "rows of blocks must have been evicted, got {evicted}"
    );
    let peak = st["workers"][0]["cache_peak_bytes"]
        .as_u64()
        .unwrap_or(u64::MAX);
    assert!(peak <= 11 * 1024, "peak {peak} over the budget");
    fails_with(
        &[
            program,
            "--worker-memory",
            "7K",
            "--workers",
            "1",
            "--servers",
            "1",
        ],
        "worker memory budget exceeded: block d[1,4] needs 2048 bytes, 6144 of the 7168 byte budget are held by fetched blocks in use and 0 by the worker's local, temp and static blocks (give more with --worker-memory) at budget:17",
    );
    // The worker's own blocks count too: a local array larger than the budget.
    fails_with(
        &[
            "tests/failures/budget_local.sial",
            "--worker-memory",
            "16K",
            "--workers",
            "1",
            "--servers",
            "1",
        ],
        "worker memory budget exceeded writing l: the worker's local, temp and static blocks hold 32768 bytes and fetched blocks in use 0 bytes, over the 16384 byte budget (give more with --worker-memory) at budget_local:6",
    );
    fails_with(&[program, "--worker-memory", "7Q"], "bad size");
    fails_with(
        &[program, "--integral-cache", "7Q"],
        "--integral-cache: bad size",
    );
}

#[test]
fn a_rank_that_dies_stops_the_job_within_seconds() {
    for (fault, who) in [
        ("worker:1", "worker 1 died"),
        ("worker:0", "worker 0 died"),
        ("server:0", "server 0 died"),
        ("server:1", "server 1 died"),
    ] {
        let o = fails_with(
            &[
                "programs/water/water.json",
                "--workers",
                "2",
                "--servers",
                "2",
                "--inject-fault",
                fault,
            ],
            who,
        );
        assert!(
            o.elapsed < Duration::from_secs(10),
            "{fault}: took {:?}",
            o.elapsed
        );
    }
}

#[test]
fn worker_and_server_counts_are_checked() {
    fails_with(
        &["programs/do_loops.sial", "--workers", "0"],
        "--workers must be at least 1",
    );
    fails_with(
        &["programs/do_loops.sial", "--workers", "2", "--servers", "0"],
        "several workers need at least one server",
    );
}

/// Runs `sial run ARGS` in `dir`; returns (success, stderr).
fn sial_in(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Sial::new()
        .arg("run")
        .args(args)
        .arg("--quiet")
        .current_dir(dir)
        .run();
    (out.ok, out.stderr)
}

/// The job id of the `--restart` hint in a failed job's message.
fn restart_id(err: &str) -> String {
    err.split("--restart ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no restart hint in {err}"))
        .to_string()
}

/// The scalar `sum` of a restarted job's dump, which holds only its last program.
fn last_sum(dump: &std::path::Path) -> f64 {
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dump).expect("dump")).expect("json");
    let programs = d["programs"].as_array().expect("programs");
    assert_eq!(programs.len(), 1, "only the last program runs again");
    programs[0]["scalars"]["sum"].as_f64().expect("sum")
}

#[test]
fn a_failed_job_restarts_from_its_last_completed_program() {
    // 2 * (10 + 20 + 30) from the restored distributed array, 1 + 2 + 3 from the static
    // array, 6.5 from the scalar.
    restarts("restart", 132.5);
}

/// A program between that saves a restored array again unchanged leaves the checkpoint before
/// it in place (it is not written again); one that saves other values under the label writes
/// it again: the restart reads the arrays as the last completed program left them.
#[test]
fn a_restart_reads_the_saved_arrays_of_the_last_completed_program() {
    restarts("restart_kept", 132.5);
    // The distributed array doubled by the program between.
    restarts("restart_doubled", 252.5);
}

/// A job that fails twice: the second restart reads the array that neither the restart nor
/// the program before it changed from the file the first run wrote, and the checkpoint of the
/// restarted program writes only its new array.
#[test]
fn a_job_restarted_twice_reads_arrays_written_before_the_first_restart() {
    for (w, s) in [("1", "0"), ("2", "2")] {
        let dir = scratch(&format!("restart-twice-{w}{s}"));
        let job = root().join("tests/failures/restart_twice.toml");
        let job = job.to_string_lossy();
        let mut args = vec![job.as_ref(), "--workers", w, "--servers", s];
        let (ok, err) = sial_in(&dir, &args);
        assert!(
            !ok && err.contains("Could not find predefined integer : stage"),
            "{err}"
        );
        let id = restart_id(&err);
        let checkpoints = dir.join("sial-jobs").join(&id);
        // The servers' array files (`server-RANK.N`) and their bytes.
        let arrays = || {
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&checkpoints)
                .expect("checkpoints")
                .map(|e| e.expect("entry"))
                .filter(|e| e.file_name().to_string_lossy().contains('.'))
                .map(|e| {
                    let bytes = std::fs::read(e.path()).expect("file");
                    (e.file_name().to_string_lossy().into_owned(), bytes)
                })
                .collect();
            files.sort();
            files
        };
        let first = arrays();
        assert!(!first.is_empty());
        args.extend(["--restart", &id, "--set", "stage=3"]);
        let (ok, err) = sial_in(&dir, &args);
        assert!(
            !ok && err.contains("Could not find predefined integer : factor"),
            "{err}"
        );
        let second = arrays();
        for file in &first {
            assert!(second.contains(file), "{} was written again", file.0);
        }
        assert!(second.len() > first.len(), "the new array has its files");
        let dump = dir.join("dump.json");
        let dump_s = dump.to_string_lossy();
        args.extend(["--set", "factor=2", "--dump", &dump_s]);
        let (ok, err) = sial_in(&dir, &args);
        assert!(ok, "{err}");
        // The doubled array as in restart_doubled.
        assert_eq!(last_sum(&dump), 252.5);
        assert!(
            !checkpoints.exists(),
            "a completed job removes its checkpoints"
        );
    }
}

/// Runs job `name` (its last program needs the predefined `factor`, missing), restarts it
/// with `factor=2` and checks the last program's `sum`.
fn restarts(name: &str, sum: f64) {
    for (w, s) in [("1", "0"), ("2", "2")] {
        let dir = scratch(&format!("{name}-{w}{s}"));
        let job = root().join(format!("tests/failures/{name}.toml"));
        let job = job.to_string_lossy();
        let ranks = ["--workers", w, "--servers", s];
        let mut args = vec![job.as_ref()];
        args.extend(ranks);
        let (ok, err) = sial_in(&dir, &args);
        assert!(!ok);
        assert!(
            err.contains("Could not find predefined integer : factor"),
            "{err}"
        );
        let id = restart_id(&err);
        // Restarting with another number of servers is refused.
        let other = if s == "0" { "1" } else { "3" };
        let (ok, err) = sial_in(
            &dir,
            &[
                job.as_ref(),
                "--restart",
                &id,
                "--servers",
                other,
                "--set",
                "factor=2",
            ],
        );
        assert!(!ok && err.contains("restart it with --servers"), "{err}");
        let dump = dir.join("dump.json");
        let dump_s = dump.to_string_lossy();
        let mut args = vec![
            job.as_ref(),
            "--restart",
            &id,
            "--set",
            "factor=2",
            "--dump",
            &dump_s,
        ];
        args.extend(ranks);
        let (ok, err) = sial_in(&dir, &args);
        assert!(ok, "{err}");
        assert_eq!(last_sum(&dump), sum);
        assert!(
            !dir.join("sial-jobs").join(&id).exists(),
            "a completed job removes its checkpoints"
        );
    }
}

/// `--restart` names a job, never a path: another folder is neither read nor removed; a job's
/// checkpoints are refused for other programs and when damaged, and are kept in both cases.
#[test]
fn restart_never_trusts_its_argument() {
    let dir = scratch("restart-trust");
    let victim = dir.join("victim");
    std::fs::create_dir_all(&victim).expect("temp dir");
    std::fs::write(victim.join("worker"), "not a checkpoint").expect("write");
    std::fs::write(victim.join("thesis.tex"), "years of work").expect("write");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("temp dir");
    let job = root().join("tests/failures/restart.toml");
    let job = job.to_string_lossy();
    for id in ["../victim", "../../victim", "/tmp", "job-1"] {
        let (ok, err) = sial_in(&work, &[job.as_ref(), "--restart", id]);
        assert!(!ok && err.contains("not a job id"), "{id}: {err}");
    }
    assert!(victim.join("thesis.tex").exists() && victim.join("worker").exists());

    let (ok, err) = sial_in(&work, &[job.as_ref()]);
    assert!(!ok);
    let id = restart_id(&err);
    let checkpoints = work.join("sial-jobs").join(&id);
    let other = root().join("programs/scalar_arith.sial");
    let (ok, err) = sial_in(&work, &[other.to_string_lossy().as_ref(), "--restart", &id]);
    assert!(!ok && err.contains("ran other programs"), "{err}");
    assert!(checkpoints.join("worker").exists(), "checkpoints kept");

    let server = checkpoints.join("server-0");
    let worker = checkpoints.join("worker");
    let damaged = if server.exists() { server } else { worker };
    let mut bytes = std::fs::read(&damaged).expect("checkpoint");
    let last = bytes.len() - 6;
    bytes[last] ^= 0x01;
    std::fs::write(&damaged, &bytes).expect("damage");
    let (ok, err) = sial_in(
        &work,
        &[job.as_ref(), "--restart", &id, "--set", "factor=2"],
    );
    assert!(!ok && err.contains("checksum does not match"), "{err}");
    assert!(
        damaged.exists(),
        "a damaged checkpoint is kept for inspection"
    );
}

/// The extents listed after `prefix` in a message (`… of shape [300, 300, 1, 1] …`).
fn shape_after(err: &str, prefix: &str) -> Vec<u128> {
    err.split(prefix)
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap_or_default()
        .split(", ")
        .filter_map(|e| e.parse().ok())
        .collect()
}

/// Sizes from the input are checked before anything is allocated: a block bigger than the
/// worker memory budget, or whose size overflows, is an error naming the block, its shape,
/// the size and the budget, never an abort by the allocator or a panic.
#[test]
fn blocks_too_big_for_the_budget_are_named_before_allocation() {
    let dir = scratch("sizes");
    let program = root().join("benches/put_get_contract.sial");
    let program = program.to_string_lossy();
    for segments in [
        "aoindex=300,1,1",
        "aoindex=100000,1,1",
        "aoindex=2147483647,1,1",
    ] {
        for ranks in [
            ["--workers", "1", "--servers", "0"],
            ["--workers", "2", "--servers", "1"],
        ] {
            let mut args = vec![
                program.as_ref(),
                "--segments",
                segments,
                "--worker-memory",
                "1G",
            ];
            args.extend(ranks);
            let (ok, err) = sial_in(&dir, &args);
            assert!(!ok, "{segments}");
            assert!(
                err.contains("block x[")
                    && err.contains("worker memory budget of 1073741824 bytes")
                    && err.contains("put_get_contract:20"),
                "{segments}: {err}"
            );
            // Which block fails first depends on which worker gets there first; the size said
            // is that of the shape said.
            let shape = shape_after(&err, "of shape [");
            assert_eq!(shape.len(), 4, "{err}");
            let bytes = shape.iter().product::<u128>() * 8;
            let said = if bytes > u64::MAX as u128 {
                "needs more than 2^64 bytes".to_string()
            } else {
                format!("needs {bytes} bytes")
            };
            assert!(err.contains(&said), "{said}: {err}");
            assert!(!err.contains("panicked") && !err.contains("died"), "{err}");
        }
    }
    // A budget larger than the machine (here: than any machine's address space, 589 TiB for
    // the largest block, 216 GB for the smallest): the allocator's refusal is an error at the
    // line, not an abort. Where the kernel grants every allocation (overcommit mode 1) there is
    // no refusal to see.
    let always_granted =
        std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "1");
    if always_granted {
        eprintln!("vm.overcommit_memory = 1: allocations are never refused here; not checked");
    }
    for ranks in [
        ["--workers", "1", "--servers", "0"],
        ["--workers", "2", "--servers", "1"],
    ]
    .into_iter()
    .filter(|_| !always_granted)
    {
        let mut args = vec![
            program.as_ref(),
            "--segments",
            "aoindex=3000,1,1",
            "--worker-memory",
            "1000T",
        ];
        args.extend(ranks);
        let (ok, err) = sial_in(&dir, &args);
        assert!(!ok);
        // Which block a worker allocates first depends on the worker: the size said is that
        // of the shape said.
        let shape = shape_after(&err, "out of memory: a block of [");
        assert_eq!(shape.len(), 4, "{err}");
        let bytes = shape.iter().product::<u128>() * 8;
        assert!(
            err.contains(&format!("({bytes} bytes) cannot be allocated"))
                && err.contains("put_get_contract:20"),
            "{err}"
        );
        assert!(!err.contains("panicked") && !err.contains("died"), "{err}");
    }
}

/// Options are checked before the job starts: a typo in `--set`, a value of the wrong type, a
/// job file given with programs, output files that cannot be written, more thread ranks than
/// one process runs.
#[test]
fn options_are_checked_before_the_job_starts() {
    let p = "programs/distributed_put_get.sial";
    fails_with(
        &[p, "--set", "nrob=4"],
        "no program of the job declares a predefined int or scalar nrob, and the setup does not define it (did you mean norb?)",
    );
    fails_with(
        &[p, "--set", "norb=2.5"],
        "norb is a predefined int; \"2.5\" is not an int",
    );
    fails_with(
        &["tests/failures/restart.toml", "programs/scalar_arith.sial"],
        "restart.toml lists the job's programs",
    );
    let o = fails_with(
        &[p, "--dump", "/nonexistent-sial-folder/d.json"],
        "--dump /nonexistent-sial-folder/d.json: cannot write there",
    );
    assert!(o.elapsed < Duration::from_secs(5));
    let tmp = std::env::temp_dir();
    fails_with(
        &[p, "--stats", tmp.to_string_lossy().as_ref()],
        "is a folder",
    );
    let o = fails_with(
        &[p, "--workers", "100000"],
        "one process runs at most 1024 ranks as threads",
    );
    assert!(o.elapsed < Duration::from_secs(5));
    // A value the setup defines may be set even where no program declares it (specials read
    // setup values by name).
    let o = sial(&[p, "--set", "norb=3"]);
    assert!(o.ok, "{}", o.stderr);
}

/// SIGINT and SIGTERM end a run promptly: its scratch folder is removed (kept with
/// `--keep-scratch`), the status is 130 or 143, and the next run reports a folder that a killed
/// run left behind.
#[test]
fn a_signal_ends_a_run_cleanly() {
    let base = scratch("signal");
    for (signal, code, keep) in [
        ("INT", 130, false),
        ("TERM", 143, false),
        ("KILL", -1, true),
    ] {
        let scratch = base.join(signal);
        std::fs::create_dir_all(&scratch).expect("temp dir");
        let mut args = vec![
            "run",
            "tests/failures/endless.sial",
            "--workers",
            "2",
            "--servers",
            "1",
            "--server-memory",
            "1M",
            "-q",
            "--scratch-dir",
        ];
        let s = scratch.to_string_lossy().to_string();
        args.push(&s);
        // Started and watched here: the test signals the running process.
        let mut child = Sial::new()
            .args(&args)
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sial");
        let folder = scratch.join(format!("sial-scratch-{}", child.id()));
        let start = Instant::now();
        while !folder.exists() {
            assert!(start.elapsed() < Duration::from_secs(30), "no spill folder");
            std::thread::sleep(Duration::from_millis(20));
        }
        let sent = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let stopped = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            assert!(
                stopped.elapsed() < Duration::from_secs(10),
                "SIG{signal} did not stop the run"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        if keep {
            // SIGKILL cannot be caught: the folder stays, and the next run names it.
            assert!(folder.exists());
            let o = Sial::new()
                .args([
                    "run",
                    "programs/scalar_arith.sial",
                    "-q",
                    "--scratch-dir",
                    &s,
                ])
                .run();
            let warn = &o.stderr;
            assert!(
                warn.contains(&format!(
                    "{} is the scratch folder of a run that no longer runs",
                    folder.display()
                )),
                "{warn}"
            );
        } else {
            assert_eq!(status.code(), Some(code), "{err}");
            assert!(err.contains(&format!("stopped by SIG{signal}")), "{err}");
            assert!(!folder.exists(), "SIG{signal} left {}", folder.display());
        }
    }
}
