//! The command line: exit statuses, bytecode file validation, import search paths.

mod common;

use common::{Outcome, Sial, scratch};

/// `sial ARGS` in `dir`, with no `SIALPATH` from the environment.
fn sial(args: &[&str], dir: &std::path::Path) -> Outcome {
    Sial::new()
        .args(args)
        .current_dir(dir)
        .env_remove("SIALPATH")
        .run()
}

const PROGRAM: &str = "sial tiny\nscalar x\nx = 2.0 * 3.0\nprint x\nendsial tiny\n";

#[test]
fn missing_file_is_a_clear_error() {
    let dir = scratch("cli-missing");
    let out = sial(&["check", "nope.sial"], &dir);
    assert_eq!(out.code, Some(1));
    let err = &out.stderr;
    assert!(err.contains("nope.sial: error: cannot read file"), "{err}");
}

#[test]
fn warnings_do_not_fail_the_check() {
    let dir = scratch("cli-warn");
    std::fs::write(
        dir.join("w.sial"),
        "sial w\nindex i = 1:2\nlocal a[i]\nscalar x\nx = 1.0\nendsial w\n",
    )
    .expect("write");
    let out = sial(&["check", "w.sial"], &dir);
    assert_eq!(out.code, Some(0));
    let err = &out.stderr;
    assert!(
        err.starts_with("w.sial:3:7: warning: array a at line 3 is never used"),
        "{err}"
    );
}

#[test]
fn bytecode_files_are_validated() {
    let dir = scratch("cli-bytecode");
    std::fs::write(dir.join("tiny.sial"), PROGRAM).expect("write");
    assert!(sial(&["compile", "tiny.sial", "-o", "tiny.siox"], &dir).ok);
    let good = std::fs::read(dir.join("tiny.siox")).expect("read");
    let listing = sial(&["disasm", "tiny.siox"], &dir);
    assert!(listing.ok);
    assert!(listing.stdout.contains("x = 2.0 * 3.0"));

    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..good.len() - 3].to_vec(), "truncated"),
        (
            "corrupt",
            {
                let mut b = good.clone();
                let n = b.len();
                b[n - 2] ^= 0x55;
                b
            },
            "checksum",
        ),
        (
            "version",
            {
                let mut b = good.clone();
                b[8] = 99;
                b
            },
            "format version 99 is not supported",
        ),
        ("header", good[..10].to_vec(), "truncated"),
    ];
    for (name, bytes, message) in cases {
        let file = format!("{name}.siox");
        std::fs::write(dir.join(&file), bytes).expect("write");
        let out = sial(&["disasm", &file], &dir);
        assert_eq!(out.code, Some(1), "{name}");
        let err = &out.stderr;
        assert!(err.contains(message), "{name}: {err}");
    }
    // A file that is neither bytecode nor SIAL is reported as a syntax error, not a crash.
    std::fs::write(dir.join("foreign.siox"), [0u8, 1, 2, 3, 0xff, 0xfe]).expect("write");
    let out = sial(&["disasm", "foreign.siox"], &dir);
    assert_eq!(out.code, Some(1));
}

#[test]
fn imports_search_include_dirs_then_sialpath() {
    let dir = scratch("cli-imports");
    std::fs::create_dir_all(dir.join("inc")).expect("dir");
    std::fs::create_dir_all(dir.join("env")).expect("dir");
    std::fs::write(
        dir.join("inc/defs.sial"),
        "sial defs\nscalar shared\nendsial defs\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("env/more.sial"),
        "sial more\nscalar other\nendsial more\n",
    )
    .expect("write");
    std::fs::write(dir.join("main.sial"), "import \"defs.sial\"\nimport \"more.sial\"\nsial main\nshared = 1.0\nmore.other = shared\nendsial main\n").expect("write");
    let out = sial(&["check", "main.sial"], &dir);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("imported file \"defs.sial\" not found"));
    let out = Sial::new()
        .args(["check", "main.sial", "-I", "inc"])
        .current_dir(&dir)
        .env("SIALPATH", dir.join("env"))
        .run();
    assert!(out.ok, "{}", out.stderr);
}
