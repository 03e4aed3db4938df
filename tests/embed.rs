//! sial as a library (`sial::Job`): a program run with specials registered as Rust functions
//! gives the value computed by hand in `examples/specials/scale.sial` (the same specials as
//! the C, Fortran and Rust plugins of tests/plugins.rs), on one process and on threads; a
//! program that does not compile is an error with its diagnostics.

use sial::{Arg, Context, Error, Job, Registry};

/// scale_by (u r): block *= factor.
fn scale_by(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [block, factor] = args else {
        return Err(format!("scale_by takes 2 arguments, got {}", args.len()));
    };
    let f = factor.data[0];
    block.data.iter_mut().for_each(|x| *x *= f);
    Ok(())
}

/// sum_squares (w r): scalar = the block's sum of squares.
fn sum_squares(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [total, block] = args else {
        return Err(format!("sum_squares takes 2 arguments, got {}", args.len()));
    };
    total.data[0] = block.data.iter().map(|x| x * x).sum();
    Ok(())
}

#[test]
fn a_program_runs_with_rust_specials() {
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specials/scale.sial");
    for (workers, servers) in [(1, 0), (2, 1)] {
        let mut specials = Registry::shipped();
        specials.register("scale_by", scale_by);
        specials.register("sum_squares", sum_squares);
        let done = Job::from_file(program)
            .expect("compiles")
            .registry(specials)
            .ranks(workers, servers)
            .run_to(&mut std::io::sink())
            .expect("runs");
        // 7 x 7 elements of (2.0 * 1.5)^2 (segments 2, 3, 2 from scale.toml).
        assert_eq!(done.scalar("scale", "total"), Some(441.0));
        assert_eq!(done.report.workers.len(), workers);
    }
}

#[test]
fn errors_say_what_went_wrong() {
    let dir = std::env::temp_dir().join(format!("sial-embed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let bad = dir.join("bad.sial");
    std::fs::write(&bad, "sial bad\nscalar x\nx = y\nendsial bad\n").expect("program");
    match Job::from_file(&bad) {
        Err(Error::Diagnostics(message)) => assert!(message.contains("y"), "{message}"),
        other => panic!("{:?}", other.err()),
    }
    // A special the registry does not have is an error of the run, at its line.
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/specials/scale.sial");
    let run = Job::from_file(program)
        .expect("compiles")
        .ranks(1, 0)
        .run_to(&mut std::io::sink());
    let Err(err) = run else {
        panic!("scale_by is not registered, yet the run succeeded");
    };
    assert!(err.to_string().contains("scale_by"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
