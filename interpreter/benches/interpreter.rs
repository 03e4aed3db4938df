//! Interpreter benchmarks (results and analysis: docs/benchmarks.md, section "Interpreter").
//!
//! Run: `cargo bench -p sial-interpreter --bench interpreter -- --warm-up-time 1 --measurement-time 3`
//! (add a filter such as `instr_rate` to run one group).
//!
//! Groups:
//! * `instr_rate`: `benches/instr_rate.sial`, 11 bytecode instructions per loop iteration
//!   (10 int/scalar assignments + `loop_end`); criterion's "elem/s" = instructions per second.
//! * `block_ops`: `benches/block_ops.sial` (aoindex, 1-element segments: block kernels) and
//!   `benches/block_ops_simple.sial` (simple index: scalar-load forms), 8 block operations per
//!   inner iteration. `with_loop` is the whole program; `net` subtracts the same program run
//!   with `ops = 0` (the loops and the `if` only), so it is the cost of the 8 statements alone.
//!   "elem/s" = block operations per second.
//! * `contract`: `benches/contract.sial` with extents 16/32/48, pattern 1 (no permutes) and 2
//!   (every operand permuted); the time is (run with nrep = N) - (run with nrep = 0), per
//!   contraction. `gemm` is the same flops as one column-major matrix product
//!   (m = n = k = S², one faer `matmul` call through `ContractionPlan`, which for a 2-index
//!   product calls faer directly on the slices). "elem/s" = flops per second (2·m·n·k).
//! * `permute`: a 32⁴ block, permutation [3,2,1,0], `sial_superinstructions::permute` vs
//!   `copy_from_slice` of the same bytes; bytes = one read + one write of every element. Also,
//!   for the analysis: 31⁴ and 33⁴ with [3,2,1,0], [1,0,3,2], a 1024² transpose (same 8 MiB),
//!   and the worst case and the copy on buffers advised for 2 MiB transparent huge pages.
//! * `block_keys`: the maps keyed by blocks (`store::BlockKeyMap`): hashing one `BlockKey`,
//!   and every block of a four-index array (10⁴ × 10 × 1 × 1 and 20⁴ segments) inserted, looked
//!   up and removed in a loop's order, as a worker's temp blocks and fetched copies are;
//!   "elem/s" = keys.
//! * `ao2mo_transform`: `programs/ao2mo_transform.sial` (water/6-31G, four-index transformation
//!   through distributed arrays) in process: setup load + compile + run.

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, black_box, criterion_group, criterion_main,
};
use sial_compiler::bytecode::Program;
use sial_interpreter::setup::Setup;
use sial_interpreter::specials::Registry;
use sial_superinstructions::{ContractionPlan, Shape, permute};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn compile(rel: &str) -> Program {
    let path = root().join(rel);
    let text = std::fs::read_to_string(&path).expect("benchmark program");
    let c = sial_compiler::compile_source(&path, text, &sial_compiler::Options::default());
    match c.program {
        Some(p) => p,
        None => panic!(
            "{rel} does not compile: {}",
            c.diagnostics.render(&c.sources)
        ),
    }
}

fn setup(ints: &[(&str, i32)], segments: &[(&str, Vec<usize>)]) -> Setup {
    let mut s = Setup::default();
    for (k, v) in ints {
        s.ints.insert((*k).to_string(), *v);
    }
    for (k, v) in segments {
        s.segments.insert((*k).to_string(), v.clone());
    }
    s
}

/// Runs one program to its end, output discarded; returns the wall time of the run.
fn run(program: &Program, setup: &Setup, registry: &Registry) -> Duration {
    let mut out = std::io::sink();
    let start = Instant::now();
    sial_interpreter::job::run(
        std::slice::from_ref(program),
        setup,
        registry,
        &mut out,
        &sial_interpreter::options::Options {
            work_dir: std::env::temp_dir(),
            ..Default::default()
        },
        |_| Ok(()),
    )
    .expect("benchmark program runs");
    start.elapsed()
}

/// Criterion's time for `iters` iterations of (run `with`) - (run `without`), never negative.
fn net(
    iters: u64,
    program: &Program,
    with: &Setup,
    without: &Setup,
    registry: &Registry,
    per: u32,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let a = run(program, with, registry);
        let b = run(program, without, registry);
        total += a.saturating_sub(b) / per;
    }
    total
}

fn bench_instr_rate(c: &mut Criterion) {
    let registry = sial_interpreter::specials::general_registry();
    let program = compile("benches/instr_rate.sial");
    let mut g = c.benchmark_group("instr_rate");
    g.sample_size(10).sampling_mode(SamplingMode::Flat);
    let n = 1_000_000i32;
    let s = setup(&[("n", n)], &[]);
    g.throughput(Throughput::Elements(11 * n as u64));
    g.bench_function(BenchmarkId::new("do_loop_10_statements", n), |b| {
        b.iter(|| run(&program, &s, &registry))
    });
    g.finish();
}

fn bench_block_ops(c: &mut Criterion) {
    let registry = sial_interpreter::specials::general_registry();
    let mut g = c.benchmark_group("block_ops");
    g.sample_size(10).sampling_mode(SamplingMode::Flat);
    let (nrep, m) = (1000i32, 100usize);
    let segs = vec![("aoindex", vec![1usize; m])];
    for (name, file) in [
        ("aoindex_extent1", "benches/block_ops.sial"),
        ("simple_index", "benches/block_ops_simple.sial"),
    ] {
        let program = compile(file);
        let with = setup(&[("nrep", nrep), ("m", m as i32), ("ops", 1)], &segs);
        let without = setup(&[("nrep", nrep), ("m", m as i32), ("ops", 0)], &segs);
        g.throughput(Throughput::Elements(8 * nrep as u64 * m as u64));
        g.bench_function(BenchmarkId::new("with_loop", name), |b| {
            b.iter(|| run(&program, &with, &registry))
        });
        g.bench_function(BenchmarkId::new("net", name), |b| {
            b.iter_custom(|iters| net(iters, &program, &with, &without, &registry, 1))
        });
        g.bench_function(BenchmarkId::new("loop_only", name), |b| {
            b.iter(|| run(&program, &without, &registry))
        });
    }
    g.finish();
}

fn bench_contract(c: &mut Criterion) {
    let registry = sial_interpreter::specials::general_registry();
    let program = compile("benches/contract.sial");
    let mut g = c.benchmark_group("contract");
    g.sample_size(10).sampling_mode(SamplingMode::Flat);
    for s in [16usize, 32, 48] {
        let flops = 2 * (s as u64).pow(6);
        g.throughput(Throughput::Elements(flops));
        // Enough repetitions that the difference is well above the noise of one run.
        let nrep: i32 = match s {
            16 => 100,
            32 => 4,
            _ => 1,
        };
        for pattern in [1, 2] {
            let name = if pattern == 1 {
                format!("abij=abcd*cdij_{s}")
            } else {
                format!("iajb=acbd*dicj_{s}")
            };
            let segs = vec![("aoindex", vec![s])];
            let with = setup(&[("norb", 1), ("nrep", nrep), ("pattern", pattern)], &segs);
            let without = setup(&[("norb", 1), ("nrep", 0), ("pattern", pattern)], &segs);
            g.bench_function(BenchmarkId::new("interpreter", name), |b| {
                b.iter_custom(|iters| net(iters, &program, &with, &without, &registry, nrep as u32))
            });
        }
        // The same flops as one GEMM: C (S²×S²) = A (S²×S²) · B (S²×S²), column-major.
        let n = s * s;
        let sh = Shape::new(&[n, n]).expect("shape");
        let plan = ContractionPlan::new((&[0, 2], &sh), (&[0, 1], &sh), (&[1, 2], &sh))
            .expect("matrix product plan");
        assert_eq!(
            plan.permutes(),
            Default::default(),
            "a matrix product needs no permute"
        );
        let a: Vec<f64> = (0..n * n).map(|i| (i % 1013) as f64 * 0.001).collect();
        let bm = a.clone();
        let mut cm = vec![0.0; n * n];
        g.bench_function(BenchmarkId::new("gemm", format!("{n}^3")), |b| {
            b.iter(|| {
                plan.execute(&mut cm, black_box(&a), &bm, 0.0)
                    .expect("gemm")
            })
        });
    }
    g.finish();
}

/// An f64 buffer (zero-filled after the advice) aligned to 2 MiB and advised for transparent huge pages (diagnostic: is
/// the worst-case permute limited by TLB misses?).
struct HugeBuf {
    ptr: *mut f64,
    len: usize,
    layout: std::alloc::Layout,
}

unsafe extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
}

impl HugeBuf {
    fn new(len: usize) -> HugeBuf {
        const HUGE: usize = 2 << 20;
        let bytes = (len * 8).div_ceil(HUGE) * HUGE;
        let layout = std::alloc::Layout::from_size_align(bytes, HUGE).expect("layout");
        // SAFETY: non-zero size; the pages are advised before they are first touched.
        let ptr = unsafe { std::alloc::alloc(layout) } as *mut f64;
        assert!(!ptr.is_null());
        // MADV_HUGEPAGE = 14 on Linux.
        unsafe { madvise(ptr.cast(), bytes, 14) };
        let mut b = HugeBuf { ptr, len, layout };
        b.as_mut().fill(0.0);
        b
    }
    fn as_mut(&mut self) -> &mut [f64] {
        // SAFETY: ptr holds len initialised f64 for the buffer's lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
    fn as_ref(&self) -> &[f64] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for HugeBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr.cast(), self.layout) };
    }
}

fn anon_huge_kib() -> String {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("AnonHugePages:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
        })
        .unwrap_or_else(|| "?".into())
}

fn bench_permute(c: &mut Criterion) {
    let mut g = c.benchmark_group("permute");
    let data = |n: usize| -> Vec<f64> { (0..n).map(|i| (i % 1013) as f64 * 0.001).collect() };
    // The target case first, then reference points with the same 8 MiB of data.
    let cases: [(&str, &[usize], &[usize]); 5] = [
        ("permute_32^4_[3,2,1,0]", &[32, 32, 32, 32], &[3, 2, 1, 0]),
        // Not a power of two: source rows are not 256 KiB apart (cache-set conflicts?).
        ("permute_31^4_[3,2,1,0]", &[31, 31, 31, 31], &[3, 2, 1, 0]),
        ("permute_33^4_[3,2,1,0]", &[33, 33, 33, 33], &[3, 2, 1, 0]),
        ("permute_32^4_[1,0,3,2]", &[32, 32, 32, 32], &[1, 0, 3, 2]),
        ("permute_1024^2_[1,0]", &[1024, 1024], &[1, 0]),
    ];
    for (name, ext, perm) in cases {
        let ss = Shape::new(ext).expect("shape");
        let ds = ss.permuted(perm).expect("perm");
        let src = data(ss.len());
        let mut dst = vec![0.0; ds.len()];
        g.throughput(Throughput::Bytes(2 * 8 * ss.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| permute(&mut dst, &ds, black_box(&src), &ss, perm).expect("permute"))
        });
    }
    let n = 32usize.pow(4);
    let src = data(n);
    let mut dst = vec![0.0; n];
    g.bench_function("memcpy_32^4", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)))
    });
    // Diagnostic: the same worst case on 2 MiB pages.
    let ss = Shape::new(&[32, 32, 32, 32]).expect("shape");
    let perm = [3usize, 2, 1, 0];
    let ds = ss.permuted(&perm).expect("perm");
    let mut hs = HugeBuf::new(n);
    hs.as_mut().copy_from_slice(&src);
    let mut hd = HugeBuf::new(n);
    eprintln!(
        "AnonHugePages after huge-page buffers: {} KiB",
        anon_huge_kib()
    );
    g.bench_function("permute_32^4_[3,2,1,0]_hugepages", |b| {
        b.iter(|| permute(hd.as_mut(), &ds, black_box(hs.as_ref()), &ss, &perm).expect("permute"))
    });
    g.bench_function("memcpy_32^4_hugepages", |b| {
        b.iter(|| hd.as_mut().copy_from_slice(black_box(hs.as_ref())))
    });
    g.finish();
}

fn bench_block_keys(c: &mut Criterion) {
    use sial_interpreter::store::{BlockKey, BlockKeyMap};
    use std::hash::BuildHasher;
    let key = |a: i32, b: i32, c: i32, d: i32| BlockKey {
        segments: [a, b, c, d, 0, 0],
        parents: [0; 6],
    };
    let mut g = c.benchmark_group("block_keys");
    g.throughput(Throughput::Elements(1));
    let hasher = std::hash::BuildHasherDefault::<sial_interpreter::store::NearHasher>::default();
    let k = key(17, 3, 1, 1);
    g.bench_function("hash", |b| b.iter(|| hasher.hash_one(black_box(&k))));
    // A first dimension longer than a run of neighbouring slots, and a four-index array.
    let long: Vec<BlockKey> = (1..=10)
        .flat_map(|b| (1..=10_000).map(move |a| key(a, b, 1, 1)))
        .collect();
    let square: Vec<BlockKey> = (1..=20)
        .flat_map(|d| {
            (1..=20).flat_map(move |c| {
                (1..=20).flat_map(move |b| (1..=20).map(move |a| key(a, b, c, d)))
            })
        })
        .collect();
    for (name, keys) in [("10000x10", &long), ("20^4", &square)] {
        g.throughput(Throughput::Elements(keys.len() as u64));
        g.bench_function(BenchmarkId::new("insert_get_remove", name), |b| {
            b.iter(|| {
                let mut map: BlockKeyMap<BlockKey, u64> = BlockKeyMap::default();
                map.reserve(keys.len());
                for (i, k) in keys.iter().enumerate() {
                    map.insert(*k, i as u64);
                }
                let mut sum = 0;
                for k in keys.iter() {
                    sum += map.get(k).copied().unwrap_or(0);
                }
                for k in keys.iter() {
                    sum += map.remove(k).unwrap_or(0);
                }
                black_box(sum)
            })
        });
    }
    g.finish();
}

fn bench_ao2mo(c: &mut Criterion) {
    let path = root().join("programs/ao2mo_transform.sial");
    let registry = sial_interpreter::specials::general_registry();
    let toml = path.with_extension("toml");
    let mut g = c.benchmark_group("ao2mo_transform");
    g.bench_function("load_compile_run", |b| {
        b.iter(|| {
            let s = sial_interpreter::setup::load(&toml, &[]).expect("setup");
            let text = std::fs::read_to_string(&path).expect("source");
            let p = sial_compiler::compile_source(&path, text, &sial_compiler::Options::default())
                .program
                .expect("compiles");
            run(&p, &s, &registry)
        })
    });
    let s = sial_interpreter::setup::load(&toml, &[]).expect("setup");
    let p = compile("programs/ao2mo_transform.sial");
    g.bench_function("run_only", |b| b.iter(|| run(&p, &s, &registry)));
    g.finish();
}

criterion_group!(
    benches,
    bench_instr_rate,
    bench_block_ops,
    bench_contract,
    bench_permute,
    bench_block_keys,
    bench_ao2mo
);
criterion_main!(benches);
