//! A worker sums its `put +=` terms to a block before it sends them (`worker::sums`): one
//! request per block and section (two with a low part) instead of one per term, and the values
//! of one process. `programs/summed_puts.sial` gives every element terms that plain sums lose;
//! tests/distributed.rs also runs it in every configuration, under mpirun too.

mod common;

use common::n;
use serde_json::Value;

/// Every worker's (puts, put_messages), and the program's `total` and `count`.
fn run(args: &[&str]) -> (Vec<(u64, u64)>, Value, Value) {
    let run = common::sial("programs/summed_puts.sial", args, true);
    assert!(run.ok, "{}", run.stderr);
    let workers = run.stats["workers"].as_array().expect("workers");
    let counts = workers
        .iter()
        .map(|w| (n(&w["puts"]), n(&w["put_messages"])))
        .collect();
    let scalars = &run.dump["programs"][0]["scalars"];
    (counts, scalars["total"].clone(), scalars["count"].clone())
}

#[test]
fn terms_to_one_block_go_as_one_sum() {
    for ranks in [
        ["--workers", "2", "--servers", "1"],
        ["--workers", "3", "--servers", "2"],
    ] {
        let (counts, total, count) = run(&ranks);
        // 38² for each of the 202 elements, exactly: 1e16 + 38 × 1 − 1e16 in any order.
        assert_eq!(total, 291688.0, "{ranks:?}");
        assert_eq!(count, 202.0, "{ranks:?}");
        assert_eq!(counts.iter().map(|c| c.0).sum::<u64>(), 80, "{ranks:?}");
        for (puts, messages) in counts {
            // At most two blocks per worker, each a high and a low part.
            assert!(
                messages <= 4 && messages < puts,
                "{ranks:?}: {messages} for {puts}"
            );
        }
    }
}

#[test]
fn one_process_sends_every_term() {
    let (counts, total, _) = run(&["--workers", "1", "--servers", "0"]);
    assert_eq!(total, 291688.0);
    assert_eq!(counts, [(80, 80)]);
}

#[test]
fn without_room_for_the_sums_terms_go_as_they_are() {
    // 4 KiB hold the temp block t (1.6 KB, a 200-element segment) and one sum to the large
    // block, but not its low part: from the second term on, each term to it sends the one
    // before, and its 40 terms go as 40 requests.
    let (counts, total, _) = run(&["--workers", "2", "--servers", "1", "--worker-memory", "4K"]);
    assert_eq!(total, 291688.0);
    let (puts, messages) = counts.iter().fold((0, 0), |(p, m), c| (p + c.0, m + c.1));
    assert_eq!(puts, 80);
    assert!(
        messages >= 40,
        "the 40 terms to the large block go one by one: {messages}"
    );
}
