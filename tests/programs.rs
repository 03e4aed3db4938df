//! Every program in `programs/` compiles, and its bytecode survives a write/read round trip
//! through `sial compile` and `sial disasm`.

mod common;

use common::{Sial, root, sial_sources};
use std::path::PathBuf;

fn programs() -> Vec<PathBuf> {
    sial_sources(&root().join("programs"))
}

#[test]
fn all_programs_check_cleanly() {
    let files = programs();
    assert!(
        files.len() >= 40,
        "expected at least 40 programs, found {}",
        files.len()
    );
    let out = Sial::new()
        .arg("check")
        .args(&files)
        .env_remove("SIALPATH")
        .run();
    let stderr = &out.stderr;
    assert!(out.ok, "sial check failed:\n{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn compiled_bytecode_disassembles() {
    let dir = common::scratch("programs");
    for file in programs() {
        let out_file = dir
            .join(file.file_name().expect("name"))
            .with_extension("siox");
        let compiled = Sial::new()
            .arg("compile")
            .arg(&file)
            .arg("-o")
            .arg(&out_file)
            .run();
        assert!(
            compiled.ok,
            "compile {}: {}",
            file.display(),
            compiled.stderr
        );
        let listing = Sial::new().arg("disasm").arg(&out_file).run();
        assert!(listing.ok, "disasm {}", file.display());
        let text = &listing.stdout;
        assert!(
            text.contains("code:") && text.contains(" end "),
            "listing of {}:\n{text}",
            file.display()
        );
    }
}
