//! Every permutation of 4-index blocks (16⁴, 24⁴, 31⁴, 32⁴, 48⁴, water's `[19,5,19,5]` and
//! `[27,5,27,5]`, the ACES4 test job's `[9,5,9,5]`),
//! common 6-index ones and the costliest ones of a real job, each against a plain copy of the
//! same bytes timed in the same run (docs/benchmarks.md, "Permutations against memcpy").
//!
//! Run: `cargo bench -p sial-superinstructions --bench permutations [-- [--cold] FILTER]`.
//! Prints one line per case: the median time of `permute` and of `copy_from_slice` over the same number of
//! bytes (alternating, so both see the same machine), the permute's rate counting one read and
//! one write of every element, and the ratio permute rate / copy rate. A summary per size gives
//! the worst and the median ratio. With `--cold`, each call finds its blocks in memory instead
//! of the caches ([`cold_times`]).
//!
//! With `--features hptt` (needs cmake and a C++ compiler) each case also runs HPTT's
//! `transpose_f64` (single thread, column-major, the same buffers' placement), checks that it
//! gives the same block, and prints its time, its ratio to the copy and sial's speed against it.

use sial_superinstructions::line_aligned::LineAligned;
use sial_superinstructions::permute_cases::{
    BENZENE_631G, SIX_INDEX, TEST_T2, TZ_T2, WATER_T2, all_permutations,
};
use sial_superinstructions::{Shape, permute};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The kernels' scratch space placed as in the `sial` binary.
#[global_allocator]
static ALLOCATOR: LineAligned = LineAligned;

/// Median of `samples` timings of `f`, each over enough calls to last about 2 ms.
fn median_time(mut f: impl FnMut(), samples: usize) -> Duration {
    let t = Instant::now();
    f();
    let once = t.elapsed().max(Duration::from_nanos(100));
    let reps = (Duration::from_millis(2).as_nanos() / once.as_nanos()).clamp(1, 10_000) as u32;
    let mut times: Vec<Duration> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed() / reps
        })
        .collect();
    times.sort();
    times[samples / 2]
}

/// A buffer placed 64 bytes past a 4 KiB boundary, where the `sial` binary's allocator
/// ([`LineAligned`]) puts large blocks (`mmap`, its header, the first line after it), so that
/// every run and every version of the kernel sees the same relative placement of source and
/// destination: with power-of-two strides the placement decides which cache sets collide, and
/// heap-placed buffers made one kernel look up to 1.5x slower or faster from one build to the
/// next.
struct Placed {
    buf: Vec<f64>,
    start: usize,
    len: usize,
}

impl Placed {
    fn new(len: usize) -> Placed {
        let buf = vec![0.0; len + 1024];
        let addr = buf.as_ptr() as usize;
        let start = (0..512)
            .find(|i| (addr + i * 8) % 4096 == 64)
            .expect("f64 buffers are 8-byte aligned");
        Placed { buf, start, len }
    }
    fn get(&mut self) -> &mut [f64] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// HPTT's time for the case (into `dst`), with `--features hptt`.
#[cfg(feature = "hptt")]
fn hptt_time(dst: &mut [f64], src: &[f64], case: &Case) -> Option<Duration> {
    let run = |dst: &mut [f64]| {
        hptt::transpose_f64(
            &case.perm,
            1.0,
            black_box(src),
            &case.ext,
            0.0,
            dst,
            1,
            hptt::MemoryOrder::ColumnMajor,
        )
        .expect("HPTT transposes the case")
    };
    Some(median_time(|| run(&mut *dst), 5))
}

#[cfg(not(feature = "hptt"))]
fn hptt_time(_: &mut [f64], _: &[f64], _: &Case) -> Option<Duration> {
    None
}

/// With `--cold`: the median over 5 rounds of the time of `permute` and of a copy, each call
/// on the next of enough source and destination blocks to span twice the last-level cache (32
/// MiB here), so that it finds both in memory, not in a cache, as a job's permute mostly does
/// (its source just fetched or computed among many other blocks, its destination new).
fn cold_times(ss: &Shape, ds: &Shape, perm: &[usize]) -> (f64, f64) {
    let bytes = 8 * ss.len();
    let n = ((64 << 20) / bytes).max(2);
    let mut srcs: Vec<Placed> = (0..n).map(|_| Placed::new(ss.len())).collect();
    for (k, b) in srcs.iter_mut().enumerate() {
        for (i, x) in b.get().iter_mut().enumerate() {
            *x = ((i + k) % 1013) as f64;
        }
    }
    let mut dsts: Vec<Placed> = (0..n).map(|_| Placed::new(ds.len())).collect();
    for b in &mut dsts {
        b.get().fill(1.0);
    }
    let (mut tp, mut tc) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        for (s, d) in srcs.iter_mut().zip(dsts.iter_mut()) {
            permute(d.get(), ds, black_box(s.get()), ss, perm).expect("valid permutation");
        }
        tp.push(t.elapsed().as_secs_f64() / n as f64);
        let t = Instant::now();
        for (s, d) in srcs.iter_mut().zip(dsts.iter_mut()) {
            d.get().copy_from_slice(black_box(s.get()));
        }
        tc.push(t.elapsed().as_secs_f64() / n as f64);
    }
    tp.sort_by(f64::total_cmp);
    tc.sort_by(f64::total_cmp);
    (tp[2], tc[2])
}

struct Case {
    ext: Vec<usize>,
    perm: Vec<usize>,
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_default();
    let cold = std::env::args().any(|a| a == "--cold");
    let mut groups: Vec<(String, Vec<Case>)> = [16usize, 24, 31, 32, 48]
        .iter()
        .map(|&n| {
            let cases = all_permutations(4)
                .into_iter()
                .map(|perm| Case {
                    ext: vec![n; 4],
                    perm,
                })
                .collect();
            (format!("{n}^4"), cases)
        })
        .collect();
    // 6-index blocks as (T) and EOM programs hold them.
    for n in [8usize, 12] {
        let cases = SIX_INDEX
            .iter()
            .map(|p| Case {
                ext: vec![n; 6],
                perm: p.to_vec(),
            })
            .collect();
        groups.push((format!("{n}^6"), cases));
    }
    // Every permutation of small-segment jobs' amplitude blocks: water/cc-pVDZ, an ACES4 test
    // job (`ccsdpt_test.dat`), water/cc-pVTZ.
    for (name, ext) in [("water", WATER_T2), ("test", TEST_T2), ("tz", TZ_T2)] {
        let cases = all_permutations(4)
            .into_iter()
            .map(|perm| Case {
                ext: ext.to_vec(),
                perm,
            })
            .collect();
        groups.push((name.to_string(), cases));
    }
    // The costliest permutations of a real job (benzene/6-31G CCSD).
    let cases = BENZENE_631G
        .iter()
        .map(|(ext, perm)| Case {
            ext: ext.to_vec(),
            perm: perm.to_vec(),
        })
        .collect();
    groups.push(("job".to_string(), cases));
    // Plain transposes: in L1 (the tile kernel alone), in L2, in L3 (512² and 1024², rows
    // 4 and 8 KiB apart), beyond it.
    let square = [32usize, 128, 512, 1024, 2048]
        .iter()
        .map(|&n| Case {
            ext: vec![n, n],
            perm: vec![1, 0],
        })
        .collect();
    groups.push(("n^2".to_string(), square));
    for (name, cases) in groups {
        let mut ratios = Vec::new();
        for case in cases {
            let label = format!("{name} {:?} {:?}", case.ext, case.perm);
            if !label.contains(&filter) {
                continue;
            }
            let ss = Shape::new(&case.ext).expect("benchmark shape");
            let ds = ss.permuted(&case.perm).expect("benchmark permutation");
            if cold {
                let (p, c) = cold_times(&ss, &ds, &case.perm);
                ratios.push(c / p);
                println!(
                    "{label:<28} cold: permute {:>9.1} us   copy {:>9.1} us   ratio {:.2}",
                    p * 1e6,
                    c * 1e6,
                    c / p
                );
                continue;
            }
            let mut src_buf = Placed::new(ss.len());
            for (i, x) in src_buf.get().iter_mut().enumerate() {
                *x = (i % 1013) as f64;
            }
            let src = &*src_buf.get();
            let mut dst_buf = Placed::new(ds.len());
            let dst = dst_buf.get();
            let mut copy_buf = Placed::new(ds.len());
            let copy_dst = copy_buf.get();
            let mut other_buf = Placed::new(ds.len());
            let other = other_buf.get();
            let (mut tp, mut tc, mut th) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..5 {
                if let Some(t) = hptt_time(other, src, &case) {
                    th.push(t);
                }
                tp.push(median_time(
                    || {
                        permute(dst, &ds, black_box(src), &ss, &case.perm)
                            .expect("valid permutation")
                    },
                    5,
                ));
                tc.push(median_time(|| copy_dst.copy_from_slice(black_box(src)), 5));
            }
            tp.sort();
            tc.sort();
            th.sort();
            let (p, c) = (tp[2].as_secs_f64(), tc[2].as_secs_f64());
            let gib = 2.0 * 8.0 * ss.len() as f64 / (1u64 << 30) as f64;
            let ratio = c / p;
            ratios.push(ratio);
            let hptt = match th.get(2) {
                Some(h) => {
                    assert!(dst == other, "{label}: HPTT gives another block");
                    let h = h.as_secs_f64();
                    format!(
                        "   hptt {:>9.1} us ratio {:.2}   sial/hptt {:.2}",
                        h * 1e6,
                        c / h,
                        h / p
                    )
                }
                None => String::new(),
            };
            println!(
                "{label:<28} permute {:>9.2} us {:>6.1} GiB/s   copy {:>9.2} us {:>6.1} GiB/s   ratio {:.2}{hptt}",
                p * 1e6,
                gib / p,
                c * 1e6,
                gib / c,
                ratio
            );
        }
        if !ratios.is_empty() {
            ratios.sort_by(f64::total_cmp);
            println!(
                "== {name}: {} cases, ratio to copy: worst {:.2}, median {:.2}, best {:.2}",
                ratios.len(),
                ratios[0],
                ratios[ratios.len() / 2],
                ratios[ratios.len() - 1]
            );
        }
    }
}
