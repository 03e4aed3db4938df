//! Prefetching (docs/ARCHITECTURE.md "Prefetch"): the figures it reports,
//! and that it changes no result and no error: speculative requests are not reads for race
//! checking until a `get` uses them, a prefetched block that does not exist is no error, and a
//! race through a prefetched block is still reported. (Every program of `programs/` is run
//! with several depths in tests/distributed.rs.)

mod common;

use common::{Run, n};
use serde_json::Value;

fn sial(program: &str, args: &[&str]) -> Run {
    common::sial(&format!("tests/prefetch/{program}.sial"), args, true)
}

/// The blocks of distributed array `name` in the dump, by first segment.
fn blocks(run: &Run, name: &str) -> Vec<(i64, Vec<f64>)> {
    run.dump["programs"][0]["arrays"][name]["blocks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|b| {
            let data = b["data"]
                .as_array()
                .map(|d| d.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            (b["segments"][0].as_i64().unwrap_or(0), data)
        })
        .collect()
}

/// c[i,j] = i + j everywhere, with segment extents [3,2,4,3,2,3] (loop.toml).
fn check_loop_result(run: &Run) {
    let ext = [3usize, 2, 4, 3, 2, 3];
    let mut want: Vec<(i64, f64)> = Vec::new();
    for (i, _) in ext.iter().enumerate() {
        for (j, _) in ext.iter().enumerate() {
            want.push(((i + 1) as i64, (i + j + 2) as f64));
        }
    }
    let got = blocks(run, "c");
    assert_eq!(got.len(), 36, "blocks of c: {}", run.stderr);
    for (seg, data) in got {
        assert!(
            data.iter()
                .all(|v| want.iter().any(|(s, w)| *s == seg && w == v))
        );
    }
    let total = run.dump["programs"][0]["scalars"]["total"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let expected: f64 = (0..6)
        .flat_map(|i| (0..6).map(move |j| (i, j)))
        .map(|(i, j)| ((i + j + 2) as f64).powi(2) * (ext[i] * ext[j]) as f64)
        .sum();
    assert_eq!(total, expected);
}

#[test]
fn figures_per_site_in_stats_and_profile() {
    let run = sial(
        "loop",
        &[
            "--workers",
            "2",
            "--servers",
            "1",
            "--prefetch",
            "4",
            "--profile",
        ],
    );
    assert!(run.ok, "{}", run.stderr);
    check_loop_result(&run);
    let p = &run.stats["prefetch"];
    assert!(n(&p["requested"]) > 0);
    // A loop that gets every block it predicts wastes nothing.
    assert_eq!(n(&p["used"]), n(&p["requested"]));
    assert_eq!(n(&p["wasted"]), 0);
    let h = p["hit_ratio"].as_f64().unwrap_or(-1.0);
    assert!((0.0..=1.0).contains(&h));
    assert!(p["wait_seconds"].as_f64().is_some_and(|w| w >= 0.0));
    let sites = p["sites"].as_array().cloned().unwrap_or_default();
    let lines: Vec<u64> = sites.iter().map(|s| n(&s["line"])).collect();
    // The two gets of the loop (lines 21, 22) and the final one (line 30).
    assert_eq!(lines, vec![21, 22, 30]);
    for s in &sites[..2] {
        assert_eq!(s["program"], "loop");
        // 6 x 6 iterations over both workers, each get read once.
        assert_eq!(n(&s["gets"]), 36);
        assert_eq!(n(&s["reads"]), 36);
        assert!(n(&s["requested"]) > 0);
    }
    assert!(run.stderr.contains("prefetch: "), "{}", run.stderr);
    assert!(run.stderr.contains("loop:21"), "{}", run.stderr);
}

#[test]
fn off_requests_nothing_and_gives_the_same_result() {
    let run = sial(
        "loop",
        &["--workers", "2", "--servers", "1", "--prefetch", "off"],
    );
    assert!(run.ok, "{}", run.stderr);
    check_loop_result(&run);
    assert_eq!(n(&run.stats["prefetch"]["requested"]), 0);
    assert_eq!(n(&run.stats["prefetch"]["reads"]), 36 * 2 + 36);
    let solo = sial("loop", &["--workers", "1", "--servers", "0"]);
    check_loop_result(&solo);
}

#[test]
fn every_prefetched_block_is_used_or_wasted() {
    for depth in ["1", "4", "auto"] {
        let run = sial(
            "conditional",
            &["--workers", "2", "--servers", "1", "--prefetch", depth],
        );
        assert!(run.ok, "{}", run.stderr);
        let p = &run.stats["prefetch"];
        assert_eq!(
            n(&p["requested"]),
            n(&p["used"]) + n(&p["wasted"]),
            "depth {depth}"
        );
        assert!(n(&p["wasted"]) > 0, "depth {depth}: {p}");
        // 4 rows of 8 blocks of 2 x 2 ones; only j = 1 is read: 4 blocks of 4 ones.
        let total = run.dump["programs"][0]["scalars"]["total"].as_f64();
        assert_eq!(total, Some(16.0));
    }
}

/// Each site's figures add up too, and each worker's, also where two gets read the same
/// block (a block one site prefetched counts as used by that site when another site reads it).
#[test]
fn every_site_and_worker_accounts_for_its_prefetches() {
    for program in [
        "programs/served_prepare_request.sial",
        "programs/mp2_served.sial",
    ] {
        let run = common::sial(program, &["--workers", "2", "--servers", "1"], false);
        assert!(run.ok, "{}", run.stderr);
        let sites = run.stats["prefetch"]["sites"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let workers = run.stats["workers"].as_array().cloned().unwrap_or_default();
        assert!(!sites.is_empty() && workers.len() == 2, "{program}");
        let figures = sites.iter().chain(workers.iter().map(|w| &w["prefetch"]));
        for p in figures {
            assert_eq!(
                n(&p["requested"]),
                n(&p["used"]) + n(&p["wasted"]),
                "{program}: {p}"
            );
        }
    }
}

#[test]
fn a_prefetch_is_not_a_read_until_a_get_uses_it() {
    for depth in ["off", "2", "8"] {
        let run = sial(
            "speculative_race",
            &["--workers", "2", "--servers", "1", "--prefetch", depth],
        );
        assert!(run.ok, "depth {depth}: {}", run.stderr);
        // y[3] = 3 + one accumulation of 1 per pardo iteration.
        let y = blocks(&run, "y");
        assert_eq!(
            y,
            vec![(1, vec![1.0; 3]), (2, vec![2.0; 3]), (3, vec![7.0; 3])]
        );
    }
}

#[test]
fn a_race_through_a_prefetched_block_is_reported() {
    for depth in ["off", "4"] {
        let run = sial(
            "race",
            &["--workers", "2", "--servers", "1", "--prefetch", depth],
        );
        assert!(!run.ok, "depth {depth}: the race went unnoticed");
        let e = run.stderr.to_lowercase();
        assert!(
            e.contains("data race") && e.contains("x[4]"),
            "depth {depth}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_missing_block_is_no_error_until_the_program_gets_it() {
    let ok = sial(
        "missing",
        &["--workers", "2", "--servers", "1", "--prefetch", "4"],
    );
    assert!(ok.ok, "{}", ok.stderr);
    assert!(n(&ok.stats["prefetch"]["requested"]) > 0);
    for depth in ["off", "4"] {
        let run = sial(
            "missing",
            &[
                "--workers",
                "2",
                "--servers",
                "1",
                "--prefetch",
                depth,
                "--set",
                "fail=1",
            ],
        );
        assert!(!run.ok);
        assert!(
            run.stderr
                .contains("It has not been put/prepared before ! at missing:32"),
            "depth {depth}: {}",
            run.stderr
        );
    }
}

#[test]
fn bad_options_are_named() {
    let run = sial("loop", &["--prefetch", "deep"]);
    assert!(!run.ok);
    assert!(run.stderr.contains("--prefetch"), "{}", run.stderr);
    let run = sial("loop", &["--simulated-latency", "3 parsecs"]);
    assert!(!run.ok);
    assert!(run.stderr.contains("--simulated-latency"), "{}", run.stderr);
    let run = sial(
        "loop",
        &[
            "--workers",
            "1",
            "--servers",
            "0",
            "--simulated-latency",
            "1ms",
        ],
    );
    assert!(!run.ok);
    assert!(run.stderr.contains("thread transport"), "{}", run.stderr);
}

#[test]
fn a_prefetched_block_is_not_fetched_until_a_get_asks_for_it() {
    for depth in ["off", "4"] {
        let run = sial(
            "unfetched",
            &["--workers", "2", "--servers", "1", "--prefetch", depth],
        );
        assert!(
            !run.ok,
            "depth {depth}: the read without a get went unnoticed"
        );
        assert!(
            run.stderr
                .contains("Attempting to read non-existent block a[")
                && run.stderr.contains("must be fetched with get"),
            "depth {depth}: {}",
            run.stderr
        );
    }
}

/// The look-ahead mirrors every loop manager, where clauses, the balanced counter running on
/// across pardos, and do-in loops: with a fixed depth nothing is wasted, so every prediction
/// was right.
#[test]
fn predictions_follow_every_loop_manager_exactly() {
    for w in ["1", "2", "3"] {
        let run = sial(
            "managers",
            &["--workers", w, "--servers", "1", "--prefetch", "4"],
        );
        assert!(run.ok, "W={w}: {}", run.stderr);
        let p = &run.stats["prefetch"];
        assert!(n(&p["requested"]) > 0, "W={w}: {p}");
        assert_eq!(n(&p["wasted"]), 0, "W={w}: {p}");
        assert_eq!(n(&p["used"]), n(&p["requested"]), "W={w}: {p}");
        let off = sial(
            "managers",
            &["--workers", w, "--servers", "1", "--prefetch", "off"],
        );
        let total = |r: &Run| r.dump["programs"][0]["scalars"]["total"].as_f64();
        assert_eq!(total(&run), total(&off), "W={w}");
        assert!(total(&run).is_some());
    }
}

/// Under MPI the speculative gets, their claims and the race check cross process boundaries.
#[cfg(feature = "mpi")]
#[test]
fn mpi_prefetch_keeps_the_race_check() {
    let launcher = common::launch::mpirun(3);
    let mpi = |program: &str| {
        common::sial_via(
            &launcher,
            &format!("tests/prefetch/{program}.sial"),
            &["--prefetch", "4"],
            true,
        )
    };
    let ok = mpi("speculative_race");
    assert!(ok.ok, "{}", ok.stderr);
    assert_eq!(
        blocks(&ok, "y"),
        vec![(1, vec![1.0; 3]), (2, vec![2.0; 3]), (3, vec![7.0; 3])]
    );
    let race = mpi("race");
    assert!(!race.ok, "the race went unnoticed");
    assert!(
        race.stderr.to_lowercase().contains("data race") && race.stderr.contains("x[4]"),
        "{}",
        race.stderr
    );
}
