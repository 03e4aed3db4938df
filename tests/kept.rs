//! Fetched copies kept past a barrier (`worker::cache`, docs/ARCHITECTURE.md "Ranks and
//! transports"): where a fetched block is a copy (MPI), a worker keeps its copies of the arrays
//! no worker changed in the section and a later `get` uses them; copies of a changed array,
//! even changed by another worker only, are fetched again; a read through a kept copy is still
//! checked for races. `programs/reread_sections.sial` (x changed by one worker before its
//! fourth of five reads) and `programs/reread_after_put.sial` (a kept copy made stale by the
//! worker's own put, then read in the same section) also run in every configuration in
//! tests/distributed.rs.

mod common;

use common::{Run, n};

fn total(run: &Run) -> Option<f64> {
    run.dump["programs"][0]["scalars"]["total"].as_f64()
}

/// Per worker: (blocks fetched, gets served by a kept copy).
fn fetches(run: &Run) -> Vec<(u64, u64)> {
    run.stats["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .map(|w| (n(&w["blocks_fetched"]), n(&w["blocks_kept"])))
        .collect()
}

#[test]
fn threads_share_the_servers_blocks_and_keep_none() {
    let run = common::sial(
        "programs/reread_sections.sial",
        &["--workers", "2", "--servers", "1"],
        true,
    );
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(total(&run), Some(176.0));
    // Five reads of x's four blocks by each worker's pardo iteration, and two blocks of y.
    assert_eq!(fetches(&run), [(22, 0), (22, 0)]);
}

#[cfg(feature = "mpi")]
#[test]
fn mpi_copies_stay_until_any_worker_changes_their_array() {
    let launcher = common::launch::mpirun(3);
    let run = |args: &[&str]| {
        let run = common::sial_via(&launcher, "programs/reread_sections.sial", args, true);
        assert!(run.ok, "{args:?}: {}", run.stderr);
        assert_eq!(total(&run), Some(176.0), "{args:?}");
        fetches(&run)
    };
    // Reads 2, 3 and 5 use the copies of the read before (4 blocks each); read 4 follows the
    // change that worker 1 did not make, and fetches again.
    assert_eq!(run(&["--prefetch", "off"]), [(10, 12), (10, 12)]);
    // The copies kept hold at most a quarter of the budget: 32 of 128 bytes, two blocks.
    assert_eq!(
        run(&["--prefetch", "off", "--worker-memory", "128"]),
        [(16, 6), (16, 6)]
    );
    // A prefetch finds a kept copy present and asks for nothing.
    for (fetched, kept) in run(&["--prefetch", "2"]) {
        assert!(
            kept == 12 && fetched <= 12,
            "{fetched} fetched, {kept} kept"
        );
    }
}

#[cfg(feature = "mpi")]
#[test]
fn mpi_a_race_through_a_kept_copy_is_reported() {
    let launcher = common::launch::mpirun(3);
    let run = common::sial_via(&launcher, "tests/kept/race.sial", &[], false);
    assert!(!run.ok, "the race went unnoticed");
    assert!(
        // Reported by whichever of the read and the put reaches the server second.
        run.stderr.to_lowercase().contains("data race") && run.stderr.contains("x[4]"),
        "{}",
        run.stderr
    );
}
