//! Pardo iteration assignment of the loop managers (SIAL-SPEC §7.10), checked block by block:
//! each iteration records the rank of the worker that ran it.

mod common;

use common::Sial;

fn owners(workers: usize, array: &str) -> Vec<(i64, f64)> {
    let dump =
        std::env::temp_dir().join(format!("sial-pardo-{}-{workers}.json", std::process::id()));
    let w = workers.to_string();
    let out = Sial::new()
        .args([
            "run",
            "tests/pardo/assignment.sial",
            "--quiet",
            "--workers",
            &w,
            "--servers",
            "1",
            "--dump",
        ])
        .arg(&dump)
        .run();
    assert!(out.ok, "{}", out.stderr);
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump).expect("dump")).expect("json");
    let _ = std::fs::remove_file(&dump);
    d["programs"][0]["arrays"][array]["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .map(|b| {
            (
                b["segments"][0].as_i64().expect("segment"),
                b["data"][0].as_f64().expect("value"),
            )
        })
        .collect()
}

#[test]
fn balanced_static_and_sequential_managers_assign_as_the_spec_says() {
    for w in [1usize, 2, 3] {
        // Default: valid iterations 1,2,4,5,6,7 are k = 0..5; the second pardo (5,6,7)
        // continues the count at k = 6, 7, 8.
        let first: Vec<(i64, f64)> = [1, 2, 4, 5, 6, 7]
            .iter()
            .enumerate()
            .map(|(k, &i)| (i, (k % w) as f64))
            .collect();
        assert_eq!(
            owners(w, "first"),
            first,
            "W={w}: default manager, first pardo"
        );
        let second: Vec<(i64, f64)> = [5, 6, 7]
            .iter()
            .enumerate()
            .map(|(k, &i)| (i, ((k + 6) % w) as f64))
            .collect();
        assert_eq!(
            owners(w, "second"),
            second,
            "W={w}: the counter continues across pardos"
        );
        // Static: iteration i is the (i-1)-th of the loop, where clauses applied after.
        let fixed: Vec<(i64, f64)> = [1, 2, 4, 5, 6, 7]
            .iter()
            .map(|&i| (i, ((i - 1) as usize % w) as f64))
            .collect();
        assert_eq!(owners(w, "fixed"), fixed, "W={w}: static manager");
        let everyone: Vec<(i64, f64)> = (1..=7).map(|i| (i, w as f64)).collect();
        assert_eq!(owners(w, "everyone"), everyone, "W={w}: sequential manager");
    }
}
