//! Specials from shared libraries (`sial run --specials LIB`, include/sial_special.h): the
//! examples in C, Fortran and Rust (`examples/specials/`) are built here and give the same
//! result as the hand computation in `scale.sial`; a library without the entry point, a missing
//! library, a special that fails and a call with the wrong number of arguments are clear errors
//! naming the library, the special and the line. A language whose compiler is not installed
//! is skipped with a note (CI installs gfortran).

mod common;

use common::{Outcome, Sial, root, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `source` into `dir/name` with `compiler args…`; `None` when the compiler is missing.
fn build(compiler: &str, args: &[&str], source: &Path, out: &Path) -> Option<PathBuf> {
    let status = Command::new(compiler)
        .args(args)
        .arg(source)
        .arg("-o")
        .arg(out)
        .status();
    match status {
        Ok(s) if s.success() => Some(out.to_path_buf()),
        Ok(s) => panic!("{compiler} {}: {s}", source.display()),
        Err(_) => {
            eprintln!("{compiler} is not installed: its example is not checked");
            None
        }
    }
}

fn examples(dir: &Path) -> Vec<PathBuf> {
    let ex = root().join("examples/specials");
    let include = root().join("include");
    let include = format!("-I{}", include.display());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    [
        build(
            "cc",
            &["-shared", "-fPIC", &include],
            &ex.join("scale.c"),
            &dir.join("libscale_c.so"),
        ),
        build(
            "gfortran",
            &["-shared", "-fPIC", "-J", &dir.to_string_lossy()],
            &ex.join("scale.f90"),
            &dir.join("libscale_f.so"),
        ),
        build(
            &rustc,
            &["--edition", "2021", "--crate-type", "cdylib", "-O"],
            &ex.join("scale.rs"),
            &dir.join("libscale_rs.so"),
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn run(library: &Path, program: &Path, extra: &[&str]) -> Outcome {
    Sial::new()
        .arg("run")
        .arg("--specials")
        .arg(library)
        .arg(program)
        .args(extra)
        .current_dir(root())
        .run()
}

#[test]
fn specials_in_c_fortran_and_rust_compute_the_example() {
    let dir = scratch("plugins");
    let libraries = examples(&dir);
    assert!(!libraries.is_empty(), "no compiler at all");
    let program = root().join("examples/specials/scale.sial");
    for library in &libraries {
        for ranks in [
            ["--workers", "1", "--servers", "0"],
            ["--workers", "2", "--servers", "1"],
        ] {
            let dump = dir.join("d.json");
            let out = run(
                library,
                &program,
                &[&ranks[..], &["-q", "--dump", &dump.to_string_lossy()]].concat(),
            );
            assert!(out.ok, "{}: {}", library.display(), out.stderr);
            let total = common::read_json(&dump)["programs"][0]["scalars"]["total"].as_f64();
            // 7 x 7 elements of (2.0 * 1.5)^2: computed by hand in scale.sial.
            assert_eq!(total, Some(441.0), "{}", library.display());
        }
    }
}

#[test]
fn plugin_errors_name_the_library_the_special_and_the_line() {
    let dir = scratch("plugin-errors");
    let Some(library) = build(
        "cc",
        &[
            "-shared",
            "-fPIC",
            &format!("-I{}", root().join("include").display()),
        ],
        &root().join("examples/specials/scale.c"),
        &dir.join("libscale_c.so"),
    ) else {
        return;
    };
    let shown = library.display().to_string();
    // A special that fails: scale_by refuses a negative factor.
    let negative = dir.join("negative.sial");
    std::fs::write(
        &negative,
        "sial negative\nspecial scale_by ur\naoindex i = 1:2\ntemp t[i]\nscalar f\nf = -1.0\ndo i\n   t[i] = 1.0\n   execute scale_by t[i] f\nenddo i\nendsial negative\n",
    )
    .expect("program");
    let out = run(&library, &negative, &["--segments", "aoindex=2,2"]);
    assert!(!out.ok);
    assert!(
        out.stderr.contains(&format!(
            "special scale_by (library {shown}) failed with code 2: a negative factor (-1)"
        )) && out.stderr.contains("at negative:9"),
        "{}",
        out.stderr
    );
    // A call with more arguments than the library's signature.
    let extra = dir.join("extra.sial");
    std::fs::write(
        &extra,
        "sial extra\nspecial scale_by urr\naoindex i = 1:2\ntemp t[i]\ndo i\n   t[i] = 1.0\n   execute scale_by t[i] 2.0 3.0\nenddo i\nendsial extra\n",
    )
    .expect("program");
    let out = run(&library, &extra, &["--segments", "aoindex=2,2"]);
    assert!(!out.ok);
    assert!(
        out.stderr.contains(&format!(
            "special scale_by (library {shown}) takes 2 arguments, this call gives 3"
        )) && out.stderr.contains("at extra:7"),
        "{}",
        out.stderr
    );
    // A library without the entry point, and no library at all.
    let empty_c = dir.join("empty.c");
    std::fs::write(&empty_c, "int nothing_here(void) { return 0; }\n").expect("source");
    let empty = build(
        "cc",
        &["-shared", "-fPIC"],
        &empty_c,
        &dir.join("libempty.so"),
    )
    .expect("cc");
    let program = root().join("examples/specials/scale.sial");
    let out = run(&empty, &program, &[]);
    assert!(!out.ok);
    assert!(
        out.stderr.contains(&format!(
            "--specials {}: no function sial_specials_v1",
            empty.display()
        )),
        "{}",
        out.stderr
    );
    // A special that crashes: the process ends, and says where.
    let crash_c = dir.join("crash.c");
    std::fs::write(
        &crash_c,
        concat!(
            "#include \"sial_special.h\"\n",
            "static int32_t crash(sial_arg *a, int32_t n, char *m, int32_t l) {\n",
            "    (void)a; (void)n; (void)m; (void)l;\n",
            "    volatile double *nowhere = 0; *nowhere = 1.0; return 0;\n",
            "}\n",
            "static const sial_special table[] = {{\"crash\", \"r\", crash}};\n",
            "const sial_special *sial_specials_v1(int32_t *count) { *count = 1; return table; }\n",
        ),
    )
    .expect("source");
    let include = format!("-I{}", root().join("include").display());
    let crashing = build(
        "cc",
        &["-shared", "-fPIC", &include],
        &crash_c,
        &dir.join("libcrash.so"),
    )
    .expect("cc");
    let crashy = dir.join("crashy.sial");
    std::fs::write(
        &crashy,
        "sial crashy\nspecial crash r\nscalar x\nx = 1.0\nexecute crash x\nendsial crashy\n",
    )
    .expect("program");
    let out = run(&crashing, &crashy, &[]);
    assert!(
        !out.ok && out.code.is_none(),
        "ended by a signal: {:?}",
        out.code
    );
    assert!(
        out.stderr.contains(&format!(
            "special crash (library {}) crashed at crashy:5",
            crashing.display()
        )),
        "{}",
        out.stderr
    );
    let missing = dir.join("libmissing.so");
    let out = run(&missing, &program, &[]);
    assert!(!out.ok);
    assert!(
        out.stderr.contains(&format!(
            "--specials {}: cannot load the library",
            missing.display()
        )),
        "{}",
        out.stderr
    );
}
