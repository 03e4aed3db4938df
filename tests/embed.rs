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

/// A program in a file of its own under the temporary folder.
fn program_file(name: &str, source: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sial-embed-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(format!("{name}.sial"));
    std::fs::write(&path, source).expect("program");
    path
}

/// twice_and_thrice (u u): the first block times 2, the second times 3.
fn twice_and_thrice(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [a, b] = args else {
        return Err(format!("takes 2 arguments, got {}", args.len()));
    };
    a.data.iter_mut().for_each(|x| *x *= 2.0);
    b.data.iter_mut().for_each(|x| *x *= 3.0);
    Ok(())
}

/// scribble (r): writes into a block it may only read.
fn scribble(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    args[0].data.iter_mut().for_each(|x| *x = 5.0);
    Ok(())
}

/// grow (u): adds an element to its block, which no block can take.
fn grow(_: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    args[0].data.to_mut().push(0.0);
    Ok(())
}

/// Blocks are lent to specials, not copied (docs/benchmarks.md, "Specials' block arguments
/// lent, not copied"), yet behave as copies: each of two blocks comes back with what the
/// special left in it; a block named by two arguments is passed as two copies, the second
/// written back last; what a special writes into a block it only reads, lent or fetched, is
/// dropped; a special that changes a block's size is an error naming it.
#[test]
fn specials_get_blocks_back_as_they_left_them() {
    let source = "sial lend\nspecial twice_and_thrice uu\nspecial grow u\n\
        special scribble r\naoindex i = 1:2\ntemp t[i]\ntemp u[i]\ndistributed d[i]\n\
        scalar st\nscalar su\nscalar mine\nscalar total\npredefined int mode\nmine = 0.0\n\
        pardo i\n  t[i] = 1.0\n  u[i] = 1.0\n\
        if mode == 0\n    execute twice_and_thrice t[i] u[i]\n  endif\n\
        if mode == 1\n    execute twice_and_thrice t[i] t[i]\n  endif\n\
        if mode == 2\n    execute grow t[i]\n  endif\n\
        if mode == 3\n    execute scribble t[i]\n    put d[i] = u[i]\n  endif\n\
        st = t[i] * t[i]\n  su = u[i] * u[i]\n  mine += st + 10.0 * su\n\
        endpardo i\n\
        if mode == 3\n  sip_barrier\n  pardo i\n    get d[i]\n    execute scribble d[i]\n\
        su = d[i] * d[i]\n    mine += 100.0 * su\n  endpardo i\nendif\n\
        collective total += mine\nendsial lend\n";
    let path = program_file("lend", source);
    let run = |mode: &str, (workers, servers)| {
        let mut specials = Registry::shipped();
        specials.register("twice_and_thrice", twice_and_thrice);
        specials.register("grow", grow);
        specials.register("scribble", scribble);
        Job::from_file(&path)
            .expect("compiles")
            .set("mode", mode)
            .expect("mode")
            .segments("aoindex", &[3, 4])
            .registry(specials)
            .ranks(workers, servers)
            .run_to(&mut std::io::sink())
    };
    for ranks in [(1, 0), (2, 1)] {
        // 7 elements per array: t = 2, u = 3 gives 7 * (4 + 10 * 9).
        let done = run("0", ranks).expect("runs");
        assert_eq!(done.scalar("lend", "total"), Some(7.0 * (4.0 + 90.0)));
        // The same block twice: two copies, the second (times 3) written back last.
        let done = run("1", ranks).expect("runs");
        assert_eq!(done.scalar("lend", "total"), Some(7.0 * (9.0 + 10.0)));
        // Scribbles on read blocks are dropped: 7 * (1 + 10) + 7 * 100.
        let done = run("3", ranks).expect("runs");
        assert_eq!(done.scalar("lend", "total"), Some(777.0));
        let Err(err) = run("2", ranks) else {
            panic!("a special that resized a block went unnoticed");
        };
        let text = err.to_string();
        assert!(
            text.contains("grow changed the size of its argument 1 (4 elements, not 3)")
                || text.contains("grow changed the size of its argument 1 (5 elements, not 4)"),
            "{text}"
        );
    }
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}
