//! The examples of the documentation run: every ```sial block of `docs/*.md` is a complete
//! program, run as it stands (with the options of its `# run:` line) in one process and with 2
//! workers and a server, and gives the values its `# expect:` lines state.

mod common;

use common::{Sial, read_json, root, scratch};

/// Every ```sial block of the documentation, with the file it is in.
fn examples() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for doc in common::files_with_extension(&root().join("docs"), "md") {
        let text = std::fs::read_to_string(&doc).expect("doc");
        let name = doc
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (i, part) in text.split("```sial\n").enumerate().skip(1) {
            let code = part.split("```").next().unwrap_or_default();
            out.push((format!("{name} example {i}"), code.to_string()));
        }
    }
    out
}

#[test]
fn every_example_of_the_docs_runs_and_gives_its_values() {
    let examples = examples();
    assert!(examples.len() >= 11, "{} examples", examples.len());
    let dir = scratch("docs");
    for (what, code) in examples {
        let file = dir.join("example.sial");
        std::fs::write(&file, &code).expect("example");
        let options: Vec<&str> = code
            .lines()
            .filter_map(|l| l.strip_prefix("# run:"))
            .flat_map(str::split_whitespace)
            .collect();
        let expects: Vec<(&str, f64)> = code
            .lines()
            .filter_map(|l| l.strip_prefix("# expect:"))
            .filter_map(|l| {
                let (name, value) = l.split_once('=')?;
                Some((name.trim(), value.trim().parse().ok()?))
            })
            .collect();
        assert!(!expects.is_empty(), "{what} states no values");
        for ranks in [
            ["--workers", "1", "--servers", "0"],
            ["--workers", "2", "--servers", "1"],
        ] {
            let dump = dir.join("d.json");
            let out = Sial::new()
                .arg("run")
                .arg(&file)
                .args(&options)
                .args(ranks)
                .arg("-q")
                .arg("--dump")
                .arg(&dump)
                .run();
            assert!(out.ok, "{what} {ranks:?}: {}", out.stderr);
            let program = &read_json(&dump)["programs"][0];
            for (name, value) in &expects {
                let got = program["scalars"][name]
                    .as_f64()
                    .or_else(|| program["ints"][name].as_f64());
                assert_eq!(got, Some(*value), "{what} {ranks:?}: {name}");
            }
        }
    }
}
