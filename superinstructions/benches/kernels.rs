//! Kernel benchmarks: permute (GB/s, counting one read and one write of every element),
//! contract (GFLOP/s, shown by criterion as "Gelem/s" with one element = one flop), and the
//! element-wise `a += s * b` (`axpy`, elements per second) against the same loop built for the
//! baseline CPU only, at block sizes of the chemistry jobs.
//!
//! Run: `cargo bench -p sial-superinstructions -- --warm-up-time 1 --measurement-time 3`.
//! `benches/numpy_compare.py` times the same operations with numpy; results and the comparison
//! are in docs/benchmarks.md.

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use sial_superinstructions::{ContractionPlan, Label, Parallelism, Shape, axpy, copy, permute};
use std::num::NonZeroUsize;

fn shape(ext: &[usize]) -> Shape {
    Shape::new(ext).expect("benchmark shapes are valid")
}

fn data(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i % 1013) as f64 * 0.001).collect()
}

/// The textbook loop over destination indices, to show what cache blocking buys.
fn naive_permute(
    dst: &mut [f64],
    dst_shape: &Shape,
    src: &[f64],
    src_shape: &Shape,
    perm: &[usize],
) {
    let rank = dst_shape.rank();
    let ss = src_shape.strides();
    let ext = dst_shape.extents();
    let mut idx = [0usize; 6];
    for d in dst.iter_mut() {
        let off: usize = (0..rank).map(|k| idx[k] * ss[perm[k]]).sum();
        *d = src[off];
        for k in 0..rank {
            idx[k] += 1;
            if idx[k] < ext[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

fn bench_permute(c: &mut Criterion) {
    let mut g = c.benchmark_group("permute");
    let cases: [(&str, &[usize], &[usize]); 3] = [
        ("2d_1000x1000_[1,0]", &[1000, 1000], &[1, 0]),
        ("4d_40^4_[3,2,1,0]", &[40, 40, 40, 40], &[3, 2, 1, 0]),
        ("4d_40^4_[1,0,3,2]", &[40, 40, 40, 40], &[1, 0, 3, 2]),
    ];
    for (name, ext, perm) in cases {
        let ss = shape(ext);
        let ds = ss.permuted(perm).expect("valid permutation");
        let src = data(ss.len());
        let mut dst = vec![0.0; ds.len()];
        g.throughput(Throughput::Bytes(2 * 8 * ss.len() as u64));
        g.bench_function(BenchmarkId::new("blocked", name), |b| {
            b.iter(|| permute(&mut dst, &ds, black_box(&src), &ss, perm).expect("valid"))
        });
        g.bench_function(BenchmarkId::new("naive", name), |b| {
            b.iter(|| naive_permute(&mut dst, &ds, black_box(&src), &ss, perm))
        });
    }
    // The bandwidth ceiling for the same bytes: a plain copy of 1000x1000.
    let src = data(1_000_000);
    let mut dst = vec![0.0; src.len()];
    g.throughput(Throughput::Bytes(2 * 8 * src.len() as u64));
    g.bench_function("memcpy_1000x1000", |b| {
        b.iter(|| copy(&mut dst, black_box(&src)).expect("same length"))
    });
    g.finish();
}

/// Name, labels of (dst, left, right), extents of (dst, left, right).
type Case = (&'static str, [&'static [Label]; 3], [&'static [usize]; 3]);

fn bench_contract(c: &mut Criterion) {
    let mut g = c.benchmark_group("contract");
    let two = Parallelism::Threads(NonZeroUsize::MIN.saturating_add(1));
    const A: Label = 1;
    const B: Label = 2;
    const C: Label = 3;
    const D: Label = 4;
    const I: Label = 5;
    const J: Label = 6;
    const E: usize = 24;
    let cases: [Case; 3] = [
        (
            "matmul_500^3",
            [&[I, J], &[I, C], &[C, J]],
            [&[500, 500], &[500, 500], &[500, 500]],
        ),
        (
            "abij=abcd*cdij_24",
            [&[A, B, I, J], &[A, B, C, D], &[C, D, I, J]],
            [&[E; 4], &[E; 4], &[E; 4]],
        ),
        // Same flops, but every operand needs a permute first.
        (
            "aibj=cadb*icjd_24",
            [&[A, I, B, J], &[C, A, D, B], &[I, C, J, D]],
            [&[E; 4], &[E; 4], &[E; 4]],
        ),
    ];
    for (name, labels, exts) in cases {
        let [ds, ls, rs] = exts.map(shape);
        let plan = ContractionPlan::new((labels[0], &ds), (labels[1], &ls), (labels[2], &rs))
            .expect("valid contraction");
        let l = data(ls.len());
        let r = data(rs.len());
        let mut out = vec![0.0; ds.len()];
        g.throughput(Throughput::Elements(plan.flops() as u64));
        for (tag, p) in [
            ("seq", plan.clone()),
            ("2threads", plan.with_parallelism(two)),
        ] {
            g.bench_function(BenchmarkId::new(tag, name), |bn| {
                bn.iter(|| {
                    p.execute(&mut out, black_box(&l), black_box(&r), 0.0)
                        .expect("valid")
                })
            });
        }
    }
    g.finish();
}

/// `dst += alpha * src` as the kernel was before it was compiled per vector width: for the
/// baseline CPU (SSE2 on x86-64) only.
#[inline(never)]
fn baseline_axpy(dst: &mut [f64], alpha: f64, src: &[f64]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d += alpha * s);
}

fn bench_elementwise(c: &mut Criterion) {
    let mut g = c.benchmark_group("axpy");
    // The test job's, water/cc-pVDZ's and water/cc-pVTZ's 4-index blocks, 45^4 (in L3) and
    // 64 MiB (from memory).
    for n in [2025usize, 9025, 18225, 531_441, 4_100_625, 8 << 20] {
        let src = data(n);
        let mut dst = data(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("dispatched", n), |b| {
            b.iter(|| {
                axpy(black_box(&mut dst), black_box(1e-9), black_box(&src)).expect("same lengths")
            })
        });
        g.bench_function(BenchmarkId::new("baseline", n), |b| {
            b.iter(|| baseline_axpy(black_box(&mut dst), black_box(1e-9), black_box(&src)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_permute, bench_contract, bench_elementwise);
criterion_main!(benches);
