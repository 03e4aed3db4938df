//! Damaged bytecode never panics: compiled programs of `programs/` with bytes of their payload
//! changed and the checksum made right again (so the damage reaches the decoder and the
//! runtime) are run; each run ends with a result or a clear error, never a panic.

mod common;

use common::{Sial, root};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Magic, version, payload length and checksum.
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

/// Small programs of `programs/` that run alone: the source and its setup file, if any.
const PROGRAMS: &[&str] = &[
    "allocate_wildcards",
    "block_copy",
    "contiguous_local",
    "contraction_matmul",
    "distributed_put_get",
    "do_loops",
    "exit_loop",
    "if_else",
    "int_arith",
    "pardo_where",
    "procedures",
    "scalar_arith",
    "served_prepare_request",
    "sections",
    "static_arrays",
    "subindex_slice",
];

struct Compiled {
    bytes: Vec<u8>,
    setup: Option<PathBuf>,
}

fn compiled(dir: &Path) -> Vec<Compiled> {
    PROGRAMS
        .iter()
        .filter_map(|name| {
            let src = root().join("programs").join(format!("{name}.sial"));
            if !src.exists() {
                return None;
            }
            let out = dir.join(format!("{name}.sialx"));
            let compiled = Sial::new()
                .arg("compile")
                .arg(&src)
                .arg("-o")
                .arg(&out)
                .run();
            assert!(compiled.ok, "{name} does not compile: {}", compiled.stderr);
            let setup = root().join("programs").join(format!("{name}.toml"));
            Some(Compiled {
                bytes: std::fs::read(&out).expect("compiled file"),
                setup: setup.exists().then_some(setup),
            })
        })
        .collect()
}

/// Runs the damaged file; the panic message or `None`. A run that does not end within the time
/// limit (a damaged jump may loop forever, as a program may) is stopped and counts as no panic.
fn run(file: &Path, setup: Option<&Path>) -> Option<String> {
    let mut sial = Sial::new()
        .args(["run", "-q", "--workers", "2", "--servers", "1"])
        .arg(file)
        .discard_stdout()
        .timeout(Duration::from_secs(10));
    if let Some(s) = setup {
        sial = sial.arg("--setup").arg(s);
    }
    let out = sial.run();
    let panicked = !out.timed_out && (out.stderr.contains("panicked") || out.code == Some(101));
    panicked.then_some(out.stderr)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn damaged_bytecode_gives_an_error_not_a_panic(
        program in 0usize..PROGRAMS.len(),
        changes in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        thread_local! {
            // Removed when the test's thread ends.
            static DIR: common::Scratch = common::scratch("mutation");
        }
        let dir = DIR.with(|d| d.to_path_buf());
        thread_local! {
            static PROGRAMS_COMPILED: std::cell::OnceCell<Vec<Compiled>> = const { std::cell::OnceCell::new() };
        }
        let (mut bytes, setup) = PROGRAMS_COMPILED.with(|c| {
            let all = c.get_or_init(|| compiled(&dir));
            let p = &all[program % all.len()];
            (p.bytes.clone(), p.setup.clone())
        });
        let payload = bytes.len() - HEADER_LEN;
        for (at, xor) in &changes {
            bytes[HEADER_LEN + at.index(payload)] ^= xor;
        }
        let crc = crc32fast::hash(&bytes[HEADER_LEN..]);
        bytes[20..24].copy_from_slice(&crc.to_le_bytes());
        let file = dir.join("damaged.sialx");
        std::fs::write(&file, &bytes).expect("write");
        if let Some(stderr) = run(&file, setup.as_deref()) {
            let kept = dir.join(format!("panic-{}.sialx", crc));
            let _ = std::fs::copy(&file, &kept);
            prop_assert!(false, "panic (file kept as {}):\n{}", kept.display(), stderr);
        }
    }
}
