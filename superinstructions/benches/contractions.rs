//! Contractions with permuted operands against a plain GEMM of the same `m, n, k`.
//!
//! The patterns are those `rccsd_rhf` and `rccsdpt_aaa` (ACES4's CCSD and CCSD(T) programs)
//! spend their contraction time in, taken from `sial run ... --profile` on the water/cc-pVDZ
//! `sial setup` job (occupied 5, virtual 19, AO 24) and on ACES4's `ccsdpt_test.dat` (5, 9,
//! 14), at the segment sizes of a larger molecule (occupied 10, virtual and AO 40) and of
//! benzene/6-31G (21, 24, 23); see docs/benchmarks.md, "Contractions with permuted
//! operands". The copies column ends in `P`
//! where the plan runs the packed GEMM (`ContractionPlan::cpu_packed`); with
//! `SIAL_NO_PACKED_GEMM=1` it never does, for side-by-side runs.
//!
//! Each case times `ContractionPlan::execute` (beta 0, sequential) and the GEMM of the same
//! `m, n, k` ([`ContractionPlan::gemm_dims`]) on contiguous `m×k` and `k×n` matrices, as the
//! contractions run it (`column_major_gemm`: faer's `matmul`, in chunks of rows where its left
//! operand is large) and as one call of faer's `matmul` ("faer µs"), alternating batches of
//! calls, and prints the medians and the ratio of the contraction's rate to the GEMM's.
//!
//! Run: `cargo bench -p sial-superinstructions --bench contractions [-- [--cold] FILTER...]`,
//! where a filter is a job, a source line, a pattern, or `JOB/LINE` (`benzene/1894`). The
//! blocks are allocated by the `sial` binary's allocator (`line_aligned`), on cache lines. With
//! `--cold`, both sides take 16 sets of blocks in turn, so that their blocks come from L3 or
//! memory rather than L2.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use sial_superinstructions::line_aligned::LineAligned;
use sial_superinstructions::{ContractionPlan, Label, Shape, column_major_gemm};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Blocks and scratch placed as in the `sial` binary.
#[global_allocator]
static ALLOCATOR: LineAligned = LineAligned;

/// `(source lines, dst=left*right with one letter per label)`; extents per letter come from
/// [`Scale`].
const PATTERNS: &[(&str, &str)] = &[
    ("rccsd_rhf:1396", "MiNj=LMSN*LiSj"),
    ("rccsdpt_aaa:960,1190", "abck=aec*ebk"),
    ("rccsdpt_aaa:1038,1264", "abck=ebc*eak"),
    ("rccsdpt_aaa:722", "abck=aeck*eb"),
    ("rccsdpt_aaa:883", "abck=abek*ec"),
    ("rccsdpt_aaa:1116,1339", "abck=abe*eck"),
    ("rccsdpt_aaa:1418,1643", "abck=amc*mbk"),
    ("rccsdpt_aaa:1493,1719", "abck=mbc*mak"),
    ("rccsd_rhf:1603,1740", "aibj=aicl*clbj"),
    ("rccsdpt_aaa:804", "abck=ebck*ea"),
    ("rccsd_rhf:1916", "aibj=amcj*mibc"),
    ("rccsd_rhf:1894", "mibc=aibn*amcn"),
    ("rccsdpt_aaa:1868", "abck=amck*mb"),
    ("rccsd_rhf:953,1524", "aibj=ambn*minj"),
    ("rccsd_rhf:1701", "aibj=cjbn*aicn"),
    ("rccsd_rhf:1620", "aibj=aicl*bjcl"),
    ("rccsd_rhf:787", "ai=cadm*dicm"),
    ("rccsd_rhf:1507", "minj=amcn*aicj"),
    ("rccsd_rhf:1103", "aibj=acbj*ci"),
    ("rccsdpt_aab:564", "abck=ae*ebck"),
];

/// Block extents of one job: lower-case `a..h` virtual, `i..n` occupied, upper-case AO.
#[derive(Clone, Copy)]
struct Scale {
    name: &'static str,
    occ: usize,
    virt: usize,
    ao: usize,
}

const SCALES: &[Scale] = &[
    Scale {
        name: "water",
        occ: 5,
        virt: 19,
        ao: 24,
    },
    Scale {
        name: "large",
        occ: 10,
        virt: 40,
        ao: 40,
    },
    Scale {
        name: "ccsdpt_test",
        occ: 5,
        virt: 9,
        ao: 14,
    },
    // Benzene/6-31G from `sial setup` (occupied 21, virtual segments 18-27, AO 22-23).
    Scale {
        name: "benzene",
        occ: 21,
        virt: 24,
        ao: 23,
    },
    // Water/cc-pVTZ from `sial setup` (virtual segments 27 and 26, AO 30 and 28).
    Scale {
        name: "tz",
        occ: 5,
        virt: 27,
        ao: 30,
    },
];

impl Scale {
    fn extent(self, c: char) -> usize {
        match c {
            'A'..='Z' => self.ao,
            'i'..='n' => self.occ,
            _ => self.virt,
        }
    }
}

/// One block of a pattern: labels (the letters' code points) and shape.
struct Block {
    labels: Vec<Label>,
    shape: Shape,
}

fn block(letters: &str, scale: Scale) -> Block {
    let ext: Vec<usize> = letters.chars().map(|c| scale.extent(c)).collect();
    Block {
        labels: letters.chars().map(|c| c as Label).collect(),
        shape: Shape::new(&ext).expect("benchmark shapes are valid"),
    }
}

fn blocks(pattern: &str, scale: Scale) -> [Block; 3] {
    let (d, rest) = pattern.split_once('=').expect("pattern has '='");
    let (l, r) = rest.split_once('*').expect("pattern has '*'");
    [block(d, scale), block(l, scale), block(r, scale)]
}

fn data(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7 + seed) % 1013) as f64 * 1e-3)
        .collect()
}

/// Median seconds per call of each of `fs`, timed in alternating batches of `reps` calls.
fn alternate<const N: usize>(
    rounds: usize,
    reps: usize,
    mut fs: [&mut dyn FnMut(); N],
) -> [f64; N] {
    let mut ts: [Vec<f64>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for _ in 0..rounds {
        for (f, t) in fs.iter_mut().zip(&mut ts) {
            let start = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.push(start.elapsed().as_secs_f64() / reps as f64);
        }
    }
    ts.map(|mut t| median(&mut t))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Calls per batch so that one batch of `f` takes about `target`.
fn reps_for(target: Duration, mut f: impl FnMut()) -> usize {
    let t = Instant::now();
    let mut n = 0;
    while t.elapsed() < target / 4 {
        f();
        n += 1;
    }
    (4 * n).max(1)
}

fn run_case(lines: &str, pattern: &str, scale: Scale) {
    let [d, l, r] = blocks(pattern, scale);
    let plan = ContractionPlan::new(
        (&d.labels, &d.shape),
        (&l.labels, &l.shape),
        (&r.labels, &r.shape),
    )
    .expect("benchmark patterns are valid contractions");
    let [m, n, k] = plan.gemm_dims();
    // One set of blocks, or with `--cold` 16 sets taken in turn, so that each call finds its
    // blocks in L3 or memory, as a job's freshly fetched or computed blocks often are.
    let sets = if std::env::args().any(|a| a == "--cold") {
        16
    } else {
        1
    };
    let each =
        |len: usize, seed: usize| -> Vec<Vec<f64>> { (0..sets).map(|_| data(len, seed)).collect() };
    let (lv, rv) = (each(l.shape.len(), 1), each(r.shape.len(), 2));
    let mut dv = each(d.shape.len(), 0);
    let (a, b) = (each(m * k, 3), each(k * n, 4));
    let mut c = each(m * n, 0);
    let mut cf = each(m * n, 0);
    let (mut at, mut gat) = (0, 0);
    let mut contract = || {
        at = (at + 1) % sets;
        plan.execute(
            black_box(&mut dv[at]),
            black_box(&lv[at]),
            black_box(&rv[at]),
            0.0,
        )
        .expect("buffers match the plan");
    };
    let mut gemm = || {
        gat = (gat + 1) % sets;
        column_major_gemm(
            black_box(&mut c[gat]),
            black_box(&a[gat]),
            black_box(&b[gat]),
            [m, n, k],
        );
    };
    let mut fat = 0;
    let mut faer = || {
        fat = (fat + 1) % sets;
        matmul(
            MatMut::from_column_major_slice_mut(black_box(&mut cf[fat]), m, n),
            Accum::Replace,
            MatRef::from_column_major_slice(black_box(&a[fat]), m, k),
            MatRef::from_column_major_slice(black_box(&b[fat]), k, n),
            1.0,
            Par::Seq,
        );
    };
    let reps = reps_for(Duration::from_millis(2), &mut contract);
    let [tc, tg, tf] = alternate(21, reps, [&mut contract, &mut gemm, &mut faer]);
    let flops = plan.flops();
    let p = plan.cpu_permutes();
    let moved: String = [(p.left, 'l'), (p.right, 'r'), (p.dst, 'd')]
        .iter()
        .map(|&(on, c)| if on { c } else { '-' })
        .collect();
    let form = if plan.cpu_packed() {
        "P"
    } else if plan.cpu_inner_products() {
        "D"
    } else if plan.cpu_broadcast() {
        "B"
    } else {
        ""
    };
    // Summed in slices: slices × the calls of each.
    let calls = match plan.cpu_slices() {
        1 => plan.cpu_gemm_calls().to_string(),
        n => format!("{n}x{}", plan.cpu_gemm_calls() / n),
    };
    let moved = format!("{moved} {calls}{form}");
    println!(
        "{:<12} {:<22} {:<16} {:>5} {:>4} {:>5} {:>6} {:>10.2} {:>10.2} {:>10.2} {:>7.1} {:>7.1} {:>6.0}%",
        scale.name,
        lines,
        pattern,
        m,
        n,
        k,
        moved,
        tc * 1e6,
        tg * 1e6,
        tf * 1e6,
        flops / tc * 1e-9,
        flops / tg * 1e-9,
        100.0 * tg / tc
    );
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters by pattern or source line.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    println!(
        "{:<12} {:<22} {:<16} {:>5} {:>4} {:>5} {:>6} {:>10} {:>10} {:>10} {:>7} {:>7} {:>7}",
        "job",
        "lines",
        "pattern",
        "m",
        "n",
        "k",
        "copies",
        "contr µs",
        "gemm µs",
        "faer µs",
        "GF/s c",
        "GF/s g",
        "ratio"
    );
    for &scale in SCALES {
        for &(lines, pattern) in PATTERNS {
            let wanted = filter.is_empty()
                || filter.iter().any(|f| match f.split_once('/') {
                    Some((job, line)) => scale.name == job && lines.contains(line),
                    None => lines.contains(f.as_str()) || pattern == f || scale.name == f,
                });
            if wanted {
                run_case(lines, pattern, scale);
            }
        }
    }
}
