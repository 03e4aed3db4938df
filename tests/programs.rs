//! Every program in `programs/` compiles, and its bytecode survives a write/read round trip
//! through `sial compile` and `sial disasm`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn programs() -> Vec<PathBuf> {
    let mut files = sial_sources(&root().join("programs"));
    files.sort();
    files
}

#[test]
fn all_programs_check_cleanly() {
    let files = programs();
    assert!(
        files.len() >= 40,
        "expected at least 40 programs, found {}",
        files.len()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_sial"))
        .arg("check")
        .args(&files)
        .current_dir(root())
        .env_remove("SIALPATH")
        .output()
        .expect("run sial");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sial check failed:\n{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn compiled_bytecode_disassembles() {
    let dir = std::env::temp_dir().join(format!("sial-programs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for file in programs() {
        let out_file = dir
            .join(file.file_name().expect("name"))
            .with_extension("siox");
        let status = Command::new(env!("CARGO_BIN_EXE_sial"))
            .arg("compile")
            .arg(&file)
            .arg("-o")
            .arg(&out_file)
            .current_dir(root())
            .status()
            .expect("run sial compile");
        assert!(status.success(), "compile {}", file.display());
        let listing = Command::new(env!("CARGO_BIN_EXE_sial"))
            .arg("disasm")
            .arg(&out_file)
            .output()
            .expect("run sial disasm");
        assert!(listing.status.success(), "disasm {}", file.display());
        let text = String::from_utf8_lossy(&listing.stdout);
        assert!(
            text.contains("code:") && text.contains(" end "),
            "listing of {}:\n{text}",
            file.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `.sial` files of `dir` and of its subdirectories, except the import-only `lib/`.
fn sial_sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read programs/").flatten() {
        let path = entry.path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "lib") {
            out.extend(sial_sources(&path));
        } else if path.extension().is_some_and(|x| x == "sial") {
            out.push(path);
        }
    }
    out
}
