//! Every program of `programs/` gives the same `--dump` in one process (`--workers 1 --servers
//! 0`) and with W workers and S servers as threads: exactly equal where the arithmetic is
//! done in the same order, within 1e-12 relative where sums are accumulated in another order
//! (relative to the largest element of a block, for block data).
//! Values a program declares `# per-worker:` (partial sums of one worker before a collective,
//! local arrays filled in a pardo) are worker 0's share and are not compared. Each run also
//! checks the program's `# expect:` values and `# expect-error:` messages. Built with
//! `--features mpi`, the same comparisons run under `mpirun -n 2, 3, 5` (`mpirun` from the
//! PATH, or the one `SIAL_MPIRUN` names).

mod common;

#[cfg(feature = "mpi")]
use common::launch::mpirun;
use common::{Outcome, Sial, read_json, root, sial_sources};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Default, Clone)]
struct Target {
    /// Program or job path relative to the root.
    path: PathBuf,
    per_worker: BTreeSet<String>,
    expect: Vec<(String, String, f64)>,
    error: Option<String>,
}

fn header_of(file: &Path) -> (Option<String>, Target) {
    let text = std::fs::read_to_string(file).expect("read program");
    let mut t = Target::default();
    let mut job = None;
    let name = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# per-worker: ") {
            t.per_worker
                .extend(rest.split_whitespace().map(str::to_string));
        } else if let Some(rest) = line.strip_prefix("# expect: ") {
            let (var, value) = rest.split_once('=').expect("NAME = VALUE");
            t.expect.push((
                name.clone(),
                var.trim().to_string(),
                value.trim().parse().expect("value"),
            ));
        } else if let Some(rest) = line.strip_prefix("# expect-error: ") {
            t.error = Some(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("# job: ") {
            job = rest.split_whitespace().next().map(str::to_string);
        }
    }
    (job, t)
}

/// Programs, and jobs (their members merged), of `programs/`.
fn targets() -> Vec<Target> {
    let files = sial_sources(&root().join("programs"));
    let mut out = Vec::new();
    let mut jobs: BTreeMap<PathBuf, Target> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(root()).expect("under root").to_path_buf();
        let (job, mut t) = header_of(&f);
        match job {
            Some(j) => {
                let path = rel.parent().expect("dir").join(j);
                let e = jobs.entry(path.clone()).or_insert_with(|| Target {
                    path,
                    ..Target::default()
                });
                e.per_worker.append(&mut t.per_worker);
                e.expect.append(&mut t.expect);
            }
            None => {
                t.path = rel;
                out.push(t);
            }
        }
    }
    out.extend(jobs.into_values());
    out
}

/// `sial run TARGET CONFIG --quiet --dump DUMP` (started by `launcher`): the outcome and the dump.
fn run(launcher: &[String], target: &Target, config: &[&str], dump: &Path) -> (Outcome, Value) {
    let _ = std::fs::remove_file(dump);
    let out = Sial::via(launcher)
        .arg("run")
        .arg(&target.path)
        .args(config)
        .arg("--quiet")
        .arg("--dump")
        .arg(dump)
        .env_remove("SIALPATH")
        .run();
    (out, read_json(dump))
}

/// Differences between two dumps, skipping per-worker names.
fn compare(a: &Value, b: &Value, path: &str, skip: &BTreeSet<String>, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let local = path.ends_with("/scalars")
                    || path.ends_with("/ints")
                    || path.ends_with("/arrays");
                if local && skip.contains(k) {
                    continue;
                }
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => compare(p, q, &format!("{path}/{k}"), skip, out),
                    _ => out.push(format!("{path}/{k}: present in only one dump")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                out.push(format!("{path}: {} vs {} entries", x.len(), y.len()));
                return;
            }
            // Block data: elements are compared relative to the largest of the block, so
            // that elements that are zero up to rounding (by symmetry) may differ in their noise.
            let numbers = |v: &[Value]| v.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>();
            if let (Some(p), Some(q)) = (numbers(x), numbers(y))
                && !p.is_empty()
            {
                let scale = p.iter().chain(&q).fold(0.0f64, |m, v| m.max(v.abs()));
                for (i, (a, b)) in p.iter().zip(&q).enumerate() {
                    if a != b && ((a - b).abs() > 1e-12 * scale || (a - b).is_nan()) {
                        out.push(format!("{path}[{i}]: {a:?} vs {b:?}"));
                    }
                }
                return;
            }
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                compare(p, q, &format!("{path}[{i}]"), skip, out);
            }
        }
        (Value::Number(p), Value::Number(q)) => {
            let (p, q) = (
                p.as_f64().unwrap_or(f64::NAN),
                q.as_f64().unwrap_or(f64::NAN),
            );
            if p != q && (p - q).abs() > 1e-12 * p.abs().max(q.abs()) {
                out.push(format!("{path}: {p:?} vs {q:?}"));
            }
        }
        _ if a == b => {}
        _ => out.push(format!("{path}: {a} vs {b}")),
    }
}

fn check_expectations(
    t: &Target,
    o: &Outcome,
    dump: &Value,
    label: &str,
    problems: &mut Vec<String>,
) {
    let name = t.path.display();
    if let Some(err) = &t.error {
        if o.ok || !o.stderr.contains(err.as_str()) {
            problems.push(format!(
                "{name} {label}: expected failure {err:?}, got ok={} stderr={}",
                o.ok, o.stderr
            ));
        }
        return;
    }
    if !o.ok {
        problems.push(format!("{name} {label}: failed: {}", o.stderr));
        return;
    }
    let programs = dump["programs"].as_array().cloned().unwrap_or_default();
    for (program, var, want) in &t.expect {
        let state = programs
            .iter()
            .rev()
            .find(|p| p["program"] == program.as_str())
            .or(programs.last());
        let got = state
            .and_then(|s| s["scalars"].get(var).or_else(|| s["ints"].get(var)))
            .and_then(Value::as_f64);
        match got {
            Some(g) if (g - want).abs() <= 1e-10 * want.abs().max(1.0) => {}
            other => problems.push(format!(
                "{name} {label}: {var} = {other:?}, expected {want}"
            )),
        }
    }
}

fn check_configs(launcher: &[String], configs: &[(&str, Vec<&str>)]) {
    // One folder per call: the tests run in parallel and each removes its folder at the end.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sial-distributed-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut problems = Vec::new();
    let targets = targets();
    assert!(targets.len() >= 40, "only {} programs", targets.len());
    for (i, t) in targets.iter().enumerate() {
        let (base, base_dump) = run(
            &[],
            t,
            &["--workers", "1", "--servers", "0"],
            &dir.join(format!("{i}-base.json")),
        );
        check_expectations(t, &base, &base_dump, "(1 worker, 0 servers)", &mut problems);
        for (label, config) in configs {
            let (o, dump) = run(launcher, t, config, &dir.join(format!("{i}.json")));
            check_expectations(t, &o, &dump, label, &mut problems);
            if base.ok && o.ok {
                let mut diffs = Vec::new();
                compare(&base_dump, &dump, "", &t.per_worker, &mut diffs);
                if !diffs.is_empty() {
                    problems.push(format!(
                        "{} {label}: dump differs from one process: {}",
                        t.path.display(),
                        diffs[..diffs.len().min(5)].join("; ")
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn threads_give_the_dump_of_one_process() {
    check_configs(
        &[],
        &[
            (
                "(threads W=1 S=1)",
                vec!["--workers", "1", "--servers", "1"],
            ),
            (
                "(threads W=2 S=1)",
                vec!["--workers", "2", "--servers", "1"],
            ),
            (
                "(threads W=3 S=2)",
                vec!["--workers", "3", "--servers", "2"],
            ),
        ],
    );
}

/// The water job's dumps with each of `budgets` for `--integral-cache` (`None`: the default),
/// started by `launcher` with the rank options `ranks`; each run's stderr goes to `stderr`
/// with its label, which says whether it is as expected.
fn integral_cache_dumps(
    (launcher, ranks): (Vec<String>, Vec<&str>),
    budgets: &[Option<&str>],
    stderr: impl Fn(&str, &str),
) -> Vec<(String, Value)> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sial-integral-cache-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let water = Target {
        path: "programs/water/water.json".into(),
        ..Target::default()
    };
    let mut dumps = Vec::new();
    for budget in budgets {
        let mut config = ranks.clone();
        config.extend(
            budget
                .map(|b| ["--integral-cache", b])
                .into_iter()
                .flatten(),
        );
        let label = format!("{launcher:?} {config:?}");
        let (outcome, dump) = run(&launcher, &water, &config, &dir.join("dump.json"));
        assert!(outcome.ok, "{label}: {}", outcome.stderr);
        stderr(&label, &outcome.stderr);
        dumps.push((label, dump));
    }
    let _ = std::fs::remove_dir_all(&dir);
    dumps
}

/// Every dump equal, bit for bit, to the first.
fn all_the_same(dumps: &[(String, Value)]) {
    let (first, rest) = dumps.split_first().expect("runs");
    for (label, dump) in rest {
        assert!(dump == &first.1, "{label} differs from {}", first.0);
    }
}

/// The integral cache never changes results: the water job's dump is the same, bit for bit,
/// with every integral block computed when asked (`--integral-cache 0`), with room for a few
/// blocks (the others computed again in every iteration), and with the default budget, both
/// in one process and with two workers.
#[test]
fn the_integral_cache_never_changes_results() {
    for ranks in [
        vec!["--workers", "1", "--servers", "0"],
        vec!["--workers", "2", "--servers", "1"],
    ] {
        let budgets = [Some("0"), Some("600K"), None];
        all_the_same(&integral_cache_dumps(
            (vec![], ranks),
            &budgets,
            |label, e| {
                assert!(!e.contains("warning"), "{label}: {e}");
            },
        ));
    }
}

/// Under mpirun the ranks of a node share one table of integral blocks, and the results are
/// the same, bit for bit, whatever its size: none (`0`), room for a few blocks, the default. A
/// table larger than the file system that holds it can take is not made: each rank keeps its
/// own blocks, says why once, and the results are the same again. The summary of a run that
/// shares a table says so.
#[cfg(feature = "mpi")]
#[test]
fn mpi_ranks_of_a_node_share_integral_blocks() {
    let budgets = [Some("0"), Some("600K"), None];
    let mut dumps = integral_cache_dumps((mpirun(3), vec![]), &budgets, |label, e| {
        assert!(!e.contains("warning"), "{label}: {e}")
    });
    dumps.extend(integral_cache_dumps(
        (mpirun(3), vec![]),
        &[Some("1000T")],
        |label, e| {
            let said = e.matches("each rank keeps its own integral blocks").count();
            assert_eq!(said, 1, "{label}: {e}");
            assert!(
                e.contains("MiB free, the node's table needs"),
                "{label}: {e}"
            );
        },
    ));
    all_the_same(&dumps);
    // The summary says that the table is shared, and by how many ranks.
    let out = Sial::via(&mpirun(3))
        .args(["run", "programs/water/water.json"])
        .env_remove("SIALPATH")
        .run();
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("integral blocks: one table for the 3 ranks of this node"),
        "{}",
        out.stderr
    );
}

/// Prefetching never changes results (docs/ARCHITECTURE.md "Prefetch"): off, auto and fixed depths, with and
/// without a simulated server latency.
#[test]
fn prefetch_depths_give_the_dump_of_one_process() {
    check_configs(
        &[],
        &[
            (
                "(threads W=2 S=1, prefetch off)",
                vec!["--workers", "2", "--servers", "1", "--prefetch", "off"],
            ),
            (
                "(threads W=1 S=1, prefetch 1)",
                vec!["--workers", "1", "--servers", "1", "--prefetch", "1"],
            ),
            (
                "(threads W=3 S=2, prefetch 2, latency 50us)",
                vec![
                    "--workers",
                    "3",
                    "--servers",
                    "2",
                    "--prefetch",
                    "2",
                    "--simulated-latency",
                    "50us",
                ],
            ),
            (
                "(threads W=2 S=2, prefetch 8)",
                vec!["--workers", "2", "--servers", "2", "--prefetch", "8"],
            ),
        ],
    );
}

/// Devices never change results: every block instruction the device can run on the
/// host-memory device (`--gpu-backend host`, the same protocol as a GPU), with a device memory
/// small enough to force evictions, and automatic placement.
#[test]
fn devices_give_the_dump_of_one_process() {
    check_configs(
        &[],
        &[
            ("(one process, device gpu)", common::device()),
            (
                "(threads W=2 S=1, device gpu, 64K of device memory)",
                vec![
                    "--workers",
                    "2",
                    "--servers",
                    "1",
                    "--device",
                    "gpu",
                    "--gpu-backend",
                    common::backend(),
                    "--gpu-memory",
                    "64K",
                ],
            ),
            (
                "(threads W=1 S=1, device auto)",
                vec![
                    "--workers",
                    "1",
                    "--servers",
                    "1",
                    "--device",
                    "auto",
                    "--gpu-backend",
                    common::backend(),
                ],
            ),
        ],
    );
}

#[cfg(feature = "mpi")]
#[test]
fn mpi_gives_the_dump_of_one_process() {
    for n in [2, 3, 5] {
        let label = format!("(mpirun -n {n})");
        check_configs(&mpirun(n), &[(label.as_str(), vec![])]);
    }
    check_configs(
        &mpirun(3),
        &[
            ("(mpirun -n 3, prefetch off)", vec!["--prefetch", "off"]),
            ("(mpirun -n 3, prefetch 1)", vec!["--prefetch", "1"]),
            ("(mpirun -n 3, prefetch 2)", vec!["--prefetch", "2"]),
            ("(mpirun -n 3, prefetch 8)", vec!["--prefetch", "8"]),
            (
                "(mpirun -n 3, device gpu)",
                vec!["--device", "gpu", "--gpu-backend", common::backend()],
            ),
        ],
    );
}

/// A rank that dies (as a killed process would) ends the whole MPI job promptly with a
/// failure status, whichever role it had.
#[cfg(feature = "mpi")]
#[test]
fn mpi_job_stops_when_a_rank_dies() {
    use std::time::{Duration, Instant};
    for fault in ["server:0", "worker:1"] {
        let launcher = mpirun(3);
        let started = Instant::now();
        // Watched here with its output discarded, not by `run`: after mpirun is killed its
        // ranks may live on and hold collected output pipes open.
        let mut child = Sial::via(&launcher)
            .args(["run", "programs/water/water.json", "--quiet"])
            .args(["--inject-fault", fault])
            .command()
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start mpirun");
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for mpirun") {
                break status;
            }
            if started.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("--inject-fault {fault}: the job still ran after 20 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            !status.success(),
            "--inject-fault {fault}: the job succeeded"
        );
    }
}

/// Under mpirun a failing job leaves what a threads run leaves: the dump of the programs that
/// completed and the `--restart` that continues it; compile warnings are printed once.
#[cfg(feature = "mpi")]
#[test]
fn mpi_failing_job_keeps_its_dump_and_warns_once() {
    let dir = common::scratch("mpi-fail");
    let launcher = mpirun(3);
    let job = root().join("tests/failures/restart.toml");
    let out = Sial::via(&launcher)
        .arg("run")
        .arg(&job)
        .args(["--quiet", "--dump", "dump.json"])
        .current_dir(&dir)
        .run();
    let err = &out.stderr;
    assert!(!out.ok);
    assert!(
        err.contains("1 of 2 programs completed; restart the job from there with --restart job-"),
        "{err}"
    );
    let dump: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dump.json")).expect("dump"))
            .expect("json");
    let programs = dump["programs"].as_array().expect("programs");
    assert_eq!(programs.len(), 1, "the completed program: {dump}");
    assert_eq!(programs[0]["program"], "restart_a");

    std::fs::write(
        dir.join("w.sial"),
        "sial w\nindex i = 1:2\nlocal a[i]\nscalar x\nx = 1.0\nendsial w\n",
    )
    .expect("write");
    let out = Sial::via(&launcher)
        .args(["run", "w.sial", "--quiet"])
        .current_dir(&dir)
        .run();
    let err = &out.stderr;
    assert!(out.ok, "{err}");
    assert_eq!(err.matches("declaration is never used").count(), 1, "{err}");
}

/// Under mpirun the ranks share the compiling of a job's programs (each rank compiles some and
/// every rank receives all): what the compiler says is printed once, in program order, whichever
/// rank compiled the program, and a program that does not compile stops every rank.
#[cfg(feature = "mpi")]
#[test]
fn mpi_ranks_share_the_compiling_and_stop_together() {
    let dir = common::scratch("mpi-compile");
    // The largest file goes to rank 0, the smallest (the failing one) to rank 2.
    let padding = format!("# {}\n", ".".repeat(200));
    let files = [
        (
            "a.sial",
            format!(
                "sial a\nindex i = 1:2\nlocal unused_a[i]\nscalar x\nx = 1.0\n{padding}endsial a\n"
            ),
        ),
        ("b.sial", "sial b\ny = 1.0\nendsial b\n".to_string()),
        (
            "c.sial",
            "sial c\nindex i = 1:2\nlocal unused_c[i]\nscalar x\nx = 2.0\n# ........\nendsial c\n"
                .to_string(),
        ),
    ];
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).expect("write");
    }
    let launcher = mpirun(3);
    let out = Sial::via(&launcher)
        .args(["run", "a.sial", "b.sial", "c.sial", "--quiet"])
        .current_dir(&dir)
        .run();
    let err = &out.stderr;
    assert!(!out.ok);
    assert_eq!(
        err.matches("b.sial:2:1: error: y not declared").count(),
        1,
        "{err}"
    );
    assert_eq!(err.matches("a.sial: warning").count(), 1, "{err}");
    assert!(
        !err.contains("c.sial"),
        "nothing after the first failure: {err}"
    );
    assert!(
        err.find("a.sial").unwrap_or(usize::MAX) < err.find("b.sial").unwrap_or(0),
        "{err}"
    );
    let out = Sial::via(&launcher)
        .args(["run", "a.sial", "missing.sial", "--quiet"])
        .current_dir(&dir)
        .run();
    assert!(!out.ok);
    assert_eq!(
        out.stderr.matches("missing.sial").count(),
        1,
        "{}",
        out.stderr
    );
    // Every program compiles: the job runs them in order, each program's warning said once.
    let out = Sial::via(&launcher)
        .args([
            "run",
            "a.sial",
            "c.sial",
            "a.sial",
            "--quiet",
            "--dump",
            "dump.json",
        ])
        .current_dir(&dir)
        .run();
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(
        out.stderr.matches("a.sial: warning").count(),
        2,
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("c.sial: warning").count(),
        1,
        "{}",
        out.stderr
    );
    let dump: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dump.json")).expect("dump"))
            .expect("json");
    let ran: Vec<(String, f64)> = dump["programs"]
        .as_array()
        .expect("programs")
        .iter()
        .map(|p| {
            let x = p["scalars"]["x"].as_f64().unwrap_or(f64::NAN);
            (p["program"].as_str().unwrap_or_default().to_string(), x)
        })
        .collect();
    assert_eq!(
        ran,
        [
            ("a".to_string(), 1.0),
            ("c".to_string(), 2.0),
            ("a".to_string(), 1.0)
        ],
        "{dump}"
    );
}

/// Under mpirun a rank whose process is stopped (SIGSTOP: it does not die, so mpirun does not
/// notice) is named by its neighbour's heartbeat, and the job ends, whether the stopped rank
/// is a worker or a server; a rank killed from outside (SIGKILL) ends the job too.
/// `tests/failures/endless.sial` would otherwise run for hours.
#[cfg(feature = "mpi")]
#[test]
fn mpi_a_stopped_rank_is_named_and_ends_the_job() {
    use std::time::{Duration, Instant};
    // mpirun -n 3: ranks 0 and 1 are workers 0 and 1, rank 2 is server 0.
    for (rank, name, how) in [
        (1, "worker 1", "-STOP"),
        (2, "server 0", "-STOP"),
        (2, "server 0", "-KILL"),
    ] {
        let dir = common::scratch(&format!("mpi-stopped-{rank}{how}"));
        let err_file = dir.join("stderr.txt");
        let mut child = Sial::via(&mpirun(3))
            .args(["run", "tests/failures/endless.sial", "--heartbeat", "2s"])
            .arg("--scratch-dir")
            .arg(&dir)
            .command()
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&err_file).expect("stderr file"))
            .spawn()
            .expect("start mpirun");
        let started = Instant::now();
        let mut stopped = None;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for mpirun") {
                break status;
            }
            let elapsed = started.elapsed();
            if stopped.is_none() && elapsed > Duration::from_secs(1) {
                stopped = rank_process(&dir, rank);
                if let Some(pid) = stopped {
                    signal(pid, how);
                }
            }
            if elapsed > Duration::from_secs(40) {
                let _ = child.kill();
                let _ = child.wait();
                stopped.into_iter().for_each(|p| signal(p, "-KILL"));
                panic!("{name} {how}: the job still ran after 40 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(stopped.is_some(), "no process of rank {rank} was found");
        let err = std::fs::read_to_string(&err_file).unwrap_or_default();
        assert!(!status.success(), "{name} {how}: the job succeeded");
        if how == "-STOP" {
            assert!(
                err.contains(&format!(
                    "{name} (MPI rank {rank}) has not answered for 2 s"
                )),
                "{err}"
            );
        }
    }
}

/// The process of MPI rank `rank` of the run whose command line names `marker`.
#[cfg(feature = "mpi")]
fn rank_process(marker: &Path, rank: usize) -> Option<u32> {
    let marker = marker.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline);
            if !cmdline.contains(&marker) || !cmdline.contains("endless.sial") {
                return None;
            }
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let environ = String::from_utf8_lossy(&environ);
            let wanted = [
                format!("PMI_RANK={rank}"),
                format!("OMPI_COMM_WORLD_RANK={rank}"),
            ];
            environ
                .split('\0')
                .any(|v| wanted.iter().any(|w| v == w))
                .then_some(pid)
        })
}

#[cfg(feature = "mpi")]
fn signal(pid: u32, which: &str) {
    let _ = std::process::Command::new("kill")
        .args([which, &pid.to_string()])
        .status();
}
