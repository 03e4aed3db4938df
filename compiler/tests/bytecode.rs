//! The bytecode file format and the listing, on compiled programs.

use sial_compiler::bytecode::{FORMAT_VERSION, LoadError, Program, decode, disassemble, encode};
use sial_compiler::{Options, compile_source};

/// Magic, version, payload length and checksum.
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

fn program() -> Program {
    let src = "sial t\nindex i = 1:3\nstatic s[i]\nscalar x = 0.5\ndo i\ns[i] = x\nx += s[i] * 2.0\nenddo i\nendsial t\n";
    let c = compile_source(
        std::path::Path::new("t.sial"),
        src.to_string(),
        &Options::default(),
    );
    c.program.expect("compiles")
}

#[test]
fn round_trip() {
    let p = program();
    assert_eq!(decode(&encode(&p)), Ok(p));
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = encode(&program());
    for n in 0..bytes.len() {
        assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes accepted");
    }
}

#[test]
fn every_flipped_payload_byte_is_detected() {
    let bytes = encode(&program());
    for i in HEADER_LEN..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x01;
        assert_eq!(decode(&b), Err(LoadError::Checksum), "byte {i}");
    }
}

#[test]
fn foreign_and_future_files() {
    assert_eq!(
        decode(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
        Err(LoadError::NotBytecode)
    );
    let mut b = encode(&program());
    b[8] = 2;
    assert_eq!(
        decode(&b),
        Err(LoadError::Version {
            found: 2,
            expected: FORMAT_VERSION
        })
    );
}

fn listing(src: &str) -> String {
    let c = compile_source(
        std::path::Path::new("t.sial"),
        src.to_string(),
        &Options::default(),
    );
    disassemble(&c.program.expect("compiles"), &|_, _| None)
}

#[test]
fn expressions_keep_their_grouping() {
    let text = listing(
        "sial t\nindex i = 1:2\nscalar s\nint n\ntemp a[i]\ntemp b[i]\ndo i\ns = (scalar) (100 * i + n)\na[i] = 1.0\nb[i] = a[i] * (s + 1.0)\nenddo i\nendsial t\n",
    );
    assert!(text.contains("s = (scalar)((100 * i) + n)"), "{text}");
    assert!(text.contains("fill b[i] a[i] * (s + 1.0)"), "{text}");
}

fn sial_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sial_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "sial" || x == "sialx") {
            out.push(p);
        }
    }
}

/// Everything the compiler emits passes the validation that every loaded file goes through:
/// the project's programs and, where `SIAL_ACES4_DIR` is set, ACES4's chemistry programs.
#[test]
fn compiled_programs_are_valid() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    sial_files(&root.join("programs"), &mut files);
    sial_files(&root.join("benches"), &mut files);
    if let Ok(dir) = std::env::var("SIAL_ACES4_DIR") {
        sial_files(&std::path::Path::new(&dir).join("qm"), &mut files);
    }
    let mut compiled = 0;
    for f in &files {
        let Ok(c) = sial_compiler::compile_file(f, &Options::default()) else {
            continue;
        };
        if let Some(p) = c.program {
            if let Err(e) = p.validate() {
                panic!("{}: {e}", f.display());
            }
            compiled += 1;
        }
    }
    assert!(compiled >= 60, "only {compiled} programs compiled");
}
