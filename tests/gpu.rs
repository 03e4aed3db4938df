//! Devices (docs/ARCHITECTURE.md "Devices"), on the host-memory device
//! (`--gpu-backend host`: separate device memory, copies on stream threads, the same version
//! protocol, pinned cache and placement as a GPU): transfer counts of the protocol, the
//! pinned cache on the water programs, eviction under a device memory budget, automatic
//! placement, and the CPU-only behaviour where no GPU exists. Every program of `programs/`
//! gives the same dump on the device: tests/distributed.rs.

mod common;

use common::{Run, n};

/// Counts come from a run without `--dump` (a dump reads every block back), values from a
/// run with it.
fn sial(program: &str, args: &[&str]) -> Run {
    let counted = common::sial(program, args, false);
    let dumped = common::sial(program, args, true);
    Run {
        ok: counted.ok && dumped.ok,
        stderr: counted.stderr,
        stats: counted.stats,
        dump: dumped.dump,
    }
}

/// A scalar of the last program of the job that has it.
fn scalar(run: &Run, name: &str) -> f64 {
    let programs = run.dump["programs"].as_array().cloned().unwrap_or_default();
    programs
        .iter()
        .rev()
        .find_map(|p| p["scalars"][name].as_f64())
        .unwrap_or(f64::NAN)
}

#[test]
fn a_chain_on_resident_blocks_moves_only_the_result() {
    let run = sial("tests/gpu/chain.sial", &common::device());
    assert!(run.ok, "{}", run.stderr);
    let g = &run.stats["gpu"];
    // Ten instructions, all on the device; the inputs are written there (no upload), and only
    // the block the host reads at the end comes back.
    assert_eq!(n(&g["device_instructions"]), 10, "{g}");
    assert_eq!(n(&g["uploads"]), 0, "{g}");
    assert_eq!(n(&g["downloads"]), 1, "{g}");
    assert_eq!(n(&g["download_bytes"]), 4 * 4 * 8);
    // a = 1, b = 2, c = 3, 1.5, 0.5, b = 1.5, c = 2.5, 4: s = 16 elements of 4 * 4.
    assert_eq!(scalar(&run, "s"), 256.0);
}

#[test]
fn reads_upload_once_until_the_host_writes() {
    let mut args = common::device();
    args.extend(["--set", "part=2"]);
    let run = sial("tests/gpu/chain.sial", &args);
    assert!(run.ok, "{}", run.stderr);
    let g = &run.stats["gpu"];
    // a is written on the host, read twice on the device (one upload), written on the host
    // again and read again (a second upload); b and c come back for the final dot product.
    assert_eq!(n(&g["device_instructions"]), 3, "{g}");
    assert_eq!(n(&g["uploads"]), 2, "{g}");
    assert_eq!(n(&g["downloads"]), 2, "{g}");
    // c = 1..16, b = 2..17: s = sum k (k + 1).
    let want: f64 = (1..=16).map(|k| (k * (k + 1)) as f64).sum();
    assert_eq!(scalar(&run, "s"), want);
}

/// The water job: RHF SCF from the geometry, the integral transformation, MP2 (programs/water).
const WATER: &str = "programs/water/water.json";
/// PySCF's MP2 correlation energy of the job (tests/setup/references.json).
const WATER_MP2: f64 = -0.20400356383395865;

#[test]
fn the_water_job_reuses_pinned_buffers_and_keeps_its_energies() {
    let run = sial(WATER, &common::device());
    assert!(run.ok, "{}", run.stderr);
    let g = &run.stats["gpu"];
    assert!(n(&g["device_instructions"]) > 0, "{g}");
    let hit = g["pinned_hit_ratio"].as_f64().unwrap_or(0.0);
    assert!(hit >= 0.9, "pinned hit ratio {hit}");
    for name in ["e_mp2", "mp2_correlation"] {
        let e = scalar(&run, name);
        assert!((e - WATER_MP2).abs() < 1e-10, "{name} = {e}");
    }
}

#[test]
fn a_small_device_memory_evicts_and_writes_back() {
    let mut args = common::device();
    args.extend(["--gpu-memory", "160K"]);
    let run = sial(WATER, &args);
    assert!(run.ok, "{}", run.stderr);
    let g = &run.stats["gpu"];
    assert!(n(&g["evictions"]) > 0, "{g}");
    let e = scalar(&run, "mp2_correlation");
    assert!((e - WATER_MP2).abs() < 1e-10, "mp2_correlation = {e}");
}

#[test]
fn an_operand_evicted_by_its_own_instruction_keeps_its_data() {
    // Room for two of product_added's 29 KB blocks: placing `x` for `x += t` evicts `t`,
    // dirty, which is then uploaded again for the same instruction. It was uploaded from its
    // stale host copy (zeros) and every sum was lost: xsum came out 58320.
    let mut args = common::device();
    args.extend(["--gpu-memory", "64K"]);
    let run = sial("programs/product_added.sial", &args);
    assert!(run.ok, "{}", run.stderr);
    assert!(n(&run.stats["gpu"]["write_backs"]) > 0);
    // The values of the program's header, by hand.
    for (name, value) in [
        ("xsum", 5832000.0),
        ("ysum", 7056720.0),
        ("zsum", 4723920.0),
        ("tsum", 2361960.0),
    ] {
        assert_eq!(scalar(&run, name), value, "{name}");
    }
}

#[test]
fn auto_sends_large_contractions_to_the_device_and_keeps_small_work() {
    let base = [
        "--workers",
        "1",
        "--servers",
        "0",
        "--gpu-backend",
        common::backend(),
    ];
    let cpu = sial(
        "tests/gpu/mixed.sial",
        &[&base[..], &["--device", "cpu"]].concat(),
    );
    let auto = sial(
        "tests/gpu/mixed.sial",
        &[&base[..], &["--device", "auto"]].concat(),
    );
    assert!(cpu.ok && auto.ok, "{}{}", cpu.stderr, auto.stderr);
    assert!(cpu.stats["gpu"].is_null());
    let g = &auto.stats["gpu"];
    // The 8 contractions of 240 x 240 blocks go to the device; the 16 fills, copies and
    // scalings of 2 x 2 blocks stay. A real GPU's cost model also takes the scalings of the
    // contractions' results, which are already there.
    if common::backend() == "host" {
        assert_eq!(n(&g["device_instructions"]), 8, "{g}");
    } else {
        assert!((8..=16).contains(&n(&g["device_instructions"])), "{g}");
    }
    assert!(n(&g["host_instructions"]) >= 16, "{g}");
    for name in ["s", "t"] {
        let (a, b) = (scalar(&cpu, name), scalar(&auto, name));
        assert!((a - b).abs() <= 1e-12 * a.abs(), "{name}: {a} vs {b}");
    }
    assert_eq!(scalar(&auto, "t"), 16.0 * 4.0 * 3.0);
}

#[test]
fn without_a_gpu_auto_runs_on_the_cpu_and_gpu_is_refused() {
    let auto = sial(WATER, &["--workers", "1", "--servers", "0"]);
    assert!(auto.ok, "{}", auto.stderr);
    assert!(auto.stderr.contains("devices: "), "{}", auto.stderr);
    if !auto.stderr.contains("CPU only") {
        eprintln!("a GPU is present: the refusal is not checked");
        return;
    }
    assert!(auto.stats["gpu"].is_null());
    let gpu = sial(
        WATER,
        &["--workers", "1", "--servers", "0", "--device", "gpu"],
    );
    assert!(!gpu.ok);
    assert!(gpu.stderr.contains("no GPU found"), "{}", gpu.stderr);
}

#[test]
fn bad_device_options_are_named() {
    for (flag, value) in [
        ("--device", "tpu"),
        ("--gpu-backend", "opencl"),
        ("--gpu-memory", "lots"),
        ("--gpu-streams", "0"),
    ] {
        let run = sial(WATER, &[flag, value]);
        assert!(!run.ok);
        assert!(run.stderr.contains(flag), "{flag}: {}", run.stderr);
    }
}

/// Under MPI every worker process opens its own device; the summary adds up their figures.
#[cfg(feature = "mpi")]
#[test]
fn mpi_workers_use_their_devices() {
    let launcher = common::launch::mpirun(3);
    let args = ["--device", "gpu", "--gpu-backend", common::backend()];
    let run = common::sial_via(&launcher, WATER, &args, true);
    assert!(run.ok, "{}", run.stderr);
    // The same two workers as threads: the pardo work split the same way and the SCF's
    // replicated loops run by both, every instruction on a device.
    let threads = [args.as_slice(), &["--workers", "2", "--servers", "1"]].concat();
    let single = common::sial(WATER, &threads, false);
    assert!(single.ok, "{}", single.stderr);
    let g = &run.stats["gpu"];
    assert_eq!(
        n(&g["device_instructions"]),
        n(&single.stats["gpu"]["device_instructions"]),
        "{g}"
    );
    assert_eq!(
        n(&g["host_instructions"]),
        n(&single.stats["gpu"]["host_instructions"])
    );
    let e = scalar(&run, "mp2_correlation");
    assert!((e - WATER_MP2).abs() < 1e-10, "mp2_correlation = {e}");
}
