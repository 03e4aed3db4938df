//! Golden listings (`sial disasm`) of programs that between them use nearly every kind of
//! instruction: a change of code generation shows in review as a change of these files.
//! `SIAL_BLESS=1 cargo test --test listings` rewrites them.

mod common;

use common::{Sial, root};
use std::path::{Path, PathBuf};

const PROGRAMS: &[&str] = &[
    "programs/allocate_wildcards.sial",
    "programs/block_add_sub.sial",
    "programs/broadcast.sial",
    "programs/collective_assert.sial",
    "programs/contiguous_local.sial",
    "programs/contraction_matmul.sial",
    "programs/distributed_put_get.sial",
    "programs/gpu_hints.sial",
    "programs/persist_read.sial",
    "programs/persist_write.sial",
    "programs/procedures.sial",
    "programs/sections.sial",
    "programs/served_prepare_request.sial",
    "programs/specials_general.sial",
    "programs/stop_program.sial",
    "programs/subindex_slice.sial",
    "programs/water/scf.sial",
];

fn golden(program: &str) -> PathBuf {
    let name = Path::new(program)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    root().join("tests/listings").join(format!("{name}.golden"))
}

#[test]
fn listings_match_their_golden_files() {
    let bless = std::env::var_os("SIAL_BLESS").is_some();
    let mut changed = Vec::new();
    for program in PROGRAMS {
        let out = Sial::new().args(["disasm", program]).run();
        assert!(out.ok, "{program}: {}", out.stderr);
        let listing = out.stdout;
        let file = golden(program);
        if bless {
            std::fs::write(&file, &listing).expect("write golden");
            continue;
        }
        let want = std::fs::read_to_string(&file).unwrap_or_default();
        if want != listing {
            changed.push(format!(
                "{program}: listing differs from {} (SIAL_BLESS=1 rewrites it)\n{listing}",
                file.display()
            ));
        }
    }
    assert!(changed.is_empty(), "{}", changed.join("\n"));
}
