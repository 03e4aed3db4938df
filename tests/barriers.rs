//! Barriers (SIAL-SPEC §7.6): a worker syncs only with the servers it sent something to since
//! its last barrier, and the results stay those of one process. (`programs/quiet_barriers.sial`
//! also runs in every configuration of tests/distributed.rs, under mpirun too.)

mod common;

use common::n;

#[test]
fn quiet_sections_send_no_sync() {
    let run = common::sial(
        "programs/quiet_barriers.sial",
        &["--workers", "3", "--servers", "2"],
        true,
    );
    assert!(run.ok, "{}", run.stderr);
    let scalars = &run.dump["programs"][0]["scalars"];
    assert_eq!(scalars["total"], 4624.0);
    assert_eq!(scalars["ones"], 16.0);
    // Each worker sends its puts and get requests, a Sync to each server after the three
    // sections that wrote or read and an Expect before its first request of the section
    // after each (12 in all), and little else; the 20 quiet barriers in between would add 40
    // Syncs per worker if every barrier synced with every server.
    for w in run.stats["workers"].as_array().expect("workers") {
        let sent = n(&w["messages_sent"]);
        let work = n(&w["put_messages"]) + n(&w["blocks_fetched"]);
        assert!(
            sent >= work && sent - work < 24,
            "worker {}: {sent} messages for {work} puts and fetches",
            w["rank"]
        );
    }
}
