//! The two-electron integral specials that return integrals or use them directly:
//! `compute_integral_batch`, `compute_aabb_batch`, `aoladder_contraction`, and the
//! scratch-memory no-ops.

use sial_superinstructions::special::{Arg, ArgKind, Context};

use super::basis::{BasisSet, Shell};
use super::blocks::{Span, spans};
use super::engine::{Kept, Quartets, quartet};
use super::with_basis;
use crate::args;

/// Calls `f(a, b, c, d, value)` for every element of a quartet batch, with a, b, c, d the
/// elements' positions counted from `start` in each dimension.
pub(crate) fn for_each_element(
    q: [&Shell; 4],
    batch: &[f64],
    start: [usize; 4],
    mut f: impl FnMut(usize, usize, usize, usize, f64),
) {
    let len = q.map(Shell::len);
    let mut p = 0;
    for d in 0..len[3] {
        for c in 0..len[2] {
            for b in 0..len[1] {
                for a in 0..len[0] {
                    f(
                        start[0] + a,
                        start[1] + b,
                        start[2] + c,
                        start[3] + d,
                        batch[p],
                    );
                    p += 1;
                }
            }
        }
    }
}

/// The integrals of the block of `spans` (extents `shape`): the block kept in the basis set's
/// cache if a block of the same AOs, in any ordering, was computed before (`data` untouched),
/// else `None` with the integrals written into `data` (and a copy kept if the cache has room).
pub(crate) fn block_integrals(
    basis: &BasisSet,
    spans: &[Span],
    shape: &[usize],
    data: &mut [f64],
) -> Option<Kept> {
    let key = [0, 1, 2, 3].map(|d| (spans[d].offset, spans[d].extent));
    if let Some(kept) = basis.cache.block(&key)
        && kept.data.len() == data.len()
    {
        return Some(kept);
    }
    fill_integrals(basis, spans, shape, data);
    basis.cache.keep_block(&key, data);
    None
}

/// Writes the integrals of all quartets of `spans` into the column-major block `data` of
/// extents `shape` (the spans' extents; every element, as the spans lie on shell boundaries),
/// shell quartet by shell quartet; each distinct quartet is computed once per call
/// ([`Quartets`]). The first shell runs innermost, so consecutive
/// quartets fill neighbouring parts of the same cache lines of the block (its first index runs
/// contiguously) while they are still in cache.
pub(crate) fn fill_integrals(basis: &BasisSet, spans: &[Span], shape: &[usize], data: &mut [f64]) {
    let strides = [
        shape[0],
        shape[0] * shape[1],
        shape[0] * shape[1] * shape[2],
    ];
    let ranges = [0, 1, 2, 3].map(|d| spans[d].shells.clone());
    let mut source = Quartets::new(basis);
    for s in ranges[3].clone() {
        for r in ranges[2].clone() {
            for n in ranges[1].clone() {
                for m in ranges[0].clone() {
                    let q = [m, n, r, s];
                    let local = [0, 1, 2, 3].map(|d| basis.shells[q[d]].first - spans[d].offset);
                    let at = local[0]
                        + strides[0] * local[1]
                        + strides[1] * local[2]
                        + strides[2] * local[3];
                    source.write(q, data, at, strides);
                }
            }
        }
    }
}

/// `compute_integral_batch aoint[a,b,c,d]` (w): element (a, b, c, d) of the block becomes the
/// integral (AB|CD) over the AOs A, B, C, D the element stands for, whatever the segments.
pub fn compute_integral_batch(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [aoint] = args::exactly::<1>(args, "a rank-4 AO block")?;
    with_basis(ctx, |ctx, basis| {
        let s = spans(ctx, basis, aoint, 0, 4)?;
        if let Some(kept) = block_integrals(basis, &s, &aoint.shape, &mut aoint.data) {
            kept.copy_to(&mut aoint.data);
        }
        Ok(())
    })
}

/// `compute_aabb_batch aoint[mu,nu,lambda,sigma] screen` (ww): for every shell m of the μ
/// segment and n of the ν segment, screen(m, n) = max |(mn|mn)| (the Schwarz table ACES4 once
/// meant to build; its programs only mention this call in comments). `screen` is a whole
/// square table indexed by shell numbers; the block stays zero and its λ, σ segments play no
/// part. Like ACES4, only the entries of this call's shell pairs are written (the runtime
/// zero-fills the whole table before every call).
pub fn compute_aabb_batch(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [aoint, screen] = args::exactly::<2>(args, "a rank-4 AO block and a shell table")?;
    with_basis(ctx, |ctx, basis| {
        let s = spans(ctx, basis, aoint, 0, 4)?;
        let (rows, cols) = args::matrix(screen, 1)?;
        let nshells = basis.shells.len();
        if rows != cols || rows < nshells || screen.data.len() != rows * cols {
            return Err(format!(
                "argument 2 ({}) is {rows} x {cols}: it must be a square table with at least one \
                 row per shell (nshells = {nshells})",
                screen.describe()
            ));
        }
        aoint.data.fill(0.0);
        let mut batch = Vec::new();
        for m in s[0].shells.clone() {
            for n in s[1].shells.clone() {
                let (sm, sn) = (&basis.shells[m], &basis.shells[n]);
                quartet(basis, [sm, sn, sm, sn], &mut batch);
                let max = batch.iter().fold(0.0, |acc: f64, v| acc.max(v.abs()));
                screen.data[m + rows * n] = max;
            }
        }
        Ok(())
    })
}

/// Checks that argument `k` is a rank-4 array and returns its extents.
fn rank4(arg: &Arg, k: usize) -> Result<[usize; 4], String> {
    match (arg.kind, arg.shape.as_slice()) {
        (ArgKind::Block | ArgKind::WholeArray, &[a, b, c, d])
            if arg.data.len() == a * b * c * d =>
        {
            Ok([a, b, c, d])
        }
        _ => Err(format!(
            "argument {} must be a block of rank 4, got {} (rank {})",
            k + 1,
            arg.describe(),
            arg.shape.len()
        )),
    }
}

/// `aoladder_contraction aoint[lambda,mu,sigma,nu] T[lambda,i,sigma,j] Y[mu,i,nu,j]` (rru):
/// `Y[μ,i,ν,j] = Σ_λσ (λμ|σν)·T[λ,i,σ,j]` over the λ and σ of the blocks, replacing Y's contents.
///
/// This is the intended AO-ladder contraction. ACES4's routine instead overwrites each (μ-shell,
/// ν-shell) patch of Y with the contribution of one (λ-shell, σ-shell) pair after another, so
/// only the last pair survives; it equals this sum only when each λ and σ segment holds a single
/// shell. ACES4's programs never execute it (the proc that does is not called), so the correct
/// sum is the useful choice. The integrals come from `aoint`, which must already hold them
/// (`compute_integral_batch`); the basis set is not needed.
pub fn aoladder_contraction(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    let [aoint, t, y] = args::exactly::<3>(
        args,
        "the integrals aoint[lambda,mu,sigma,nu], T[lambda,i,sigma,j], Y[mu,i,nu,j]",
    )?;
    let [el, em, es, en] = rank4(aoint, 0)?;
    let [tl, ni, ts, nj] = rank4(t, 1)?;
    let ys = rank4(y, 2)?;
    if tl != el || ts != es {
        return Err(format!(
            "argument 2 ({}) is {:?}: its dimensions 1 and 3 must match dimensions 1 and 3 of \
             argument 1 ({}, {:?})",
            t.describe(),
            t.shape,
            aoint.describe(),
            aoint.shape
        ));
    }
    if ys != [em, ni, en, nj] {
        return Err(format!(
            "argument 3 ({}) is {:?}, but arguments 1 and 2 make it {:?}",
            y.describe(),
            y.shape,
            [em, ni, en, nj]
        ));
    }
    let integral =
        |a: usize, b: usize, c: usize, d: usize| aoint.data[a + el * (b + em * (c + es * d))];
    for j in 0..nj {
        for d in 0..en {
            for i in 0..ni {
                for b in 0..em {
                    let mut sum = 0.0;
                    for c in 0..es {
                        let tcol = el * (i + ni * (c + es * j));
                        for a in 0..el {
                            sum += integral(a, b, c, d) * t.data[tcol + a];
                        }
                    }
                    y.data[b + em * (i + ni * (d + en * j))] = sum;
                }
            }
        }
    }
    Ok(())
}

/// `compute_int_scratchmem x zmax imax` (uuu): nothing. ACES4 sizes the scratch memory of its
/// Fortran integral packages here and leaves the arguments alone.
pub fn compute_int_scratchmem(_ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    args::exactly::<3>(args, "ACES4 passes oed_ovl zmax imax")?;
    Ok(())
}

/// `compute_int_scratchmem_lowmem …`: nothing, with any arguments (ACES4's fragment programs
/// call it with two or three).
pub fn compute_int_scratchmem_lowmem(
    _ctx: &mut dyn Context,
    _args: &mut [Arg],
) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{Case, ao_block, place, segment_starts};
    use super::*;
    use sial_superinstructions::special::fake::Fake;

    /// The whole ERI tensor over the case's segments, block by block (column-major n⁴).
    fn all_blocks(ctx: &mut Fake, segments: &[usize]) -> Vec<f64> {
        let n: usize = segments.iter().sum();
        let starts = segment_starts(segments);
        place(ctx, "aoint", 4, segments);
        let k = segments.len() as i32;
        let mut full = vec![f64::NAN; n.pow(4)];
        for s0 in 1..=k {
            for s1 in 1..=k {
                for s2 in 1..=k {
                    for s3 in 1..=k {
                        let segs = [s0, s1, s2, s3];
                        let mut args = [ao_block("aoint", &segs, segments)];
                        args[0].data.fill(9.0);
                        compute_integral_batch(ctx, &mut args).expect("batch");
                        let e = &args[0].shape;
                        let o = segs.map(|s| starts[s as usize - 1]);
                        let mut p = 0;
                        for d in 0..e[3] {
                            for c in 0..e[2] {
                                for b in 0..e[1] {
                                    for a in 0..e[0] {
                                        let x = (o[0] + a)
                                            + n * ((o[1] + b) + n * ((o[2] + c) + n * (o[3] + d)));
                                        full[x] = args[0].data[p];
                                        p += 1;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        full
    }

    /// Checks a full tensor against the case's samples and sums.
    fn check_against_reference(case: &Case, name: &str, full: &[f64]) {
        let n = (full.len() as f64).powf(0.25).round() as usize;
        for ([i, j, k, l], want) in case.eri_samples() {
            let got = full[i + n * (j + n * (k + n * l))];
            assert!(
                (got - want).abs() < 1e-12,
                "{name} ({i}{j}|{k}{l}): {got} vs {want}"
            );
        }
        let mut squares = 0.0;
        let mut weighted = 0.0;
        for (x, v) in full.iter().enumerate() {
            let idx = [x % n, (x / n) % n, (x / (n * n)) % n, x / (n * n * n)];
            let w = (0.1 * idx[0] as f64
                + 0.2 * idx[1] as f64
                + 0.3 * idx[2] as f64
                + 0.7 * idx[3] as f64)
                .cos();
            squares += v * v;
            weighted += v * w;
        }
        let want = case.value("eri_sum_squares");
        assert!(
            (squares - want).abs() < 1e-11 * want,
            "{name}: Σ I² {squares} vs {want}"
        );
        let want = case.value("eri_weighted_sum");
        assert!(
            (weighted - want).abs() < 1e-10,
            "{name}: Σ w I {weighted} vs {want}"
        );
    }

    #[test]
    fn integral_batches_match_pyscf_over_segmented_layouts() {
        for name in ["hf_321g", "water_321g", "ne_ccpvdz", "synthetic_spherical"] {
            let case = Case::load(name);
            let mut ctx = case.context();
            let full = all_blocks(&mut ctx, &case.segments());
            check_against_reference(&case, name, &full);
            // Asked again, every block comes whole from the basis set's cache, bit for bit.
            let again = all_blocks(&mut ctx, &case.segments());
            assert!(
                full.iter()
                    .zip(&again)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}: kept blocks differ"
            );
        }
    }

    #[test]
    fn cartesian_d_and_f_in_one_block() {
        let case = Case::load("synthetic_cartesian");
        let mut ctx = case.context();
        let n: usize = case.segments().iter().sum();
        let full = all_blocks(&mut ctx, &[n]);
        check_against_reference(&case, "synthetic_cartesian", &full);
    }

    #[test]
    fn integral_batch_errors() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        place(&mut ctx, "aoint", 4, &[3, 5, 5]);
        // The second segment ends inside the p shell (AOs 4..9).
        let mut args = [ao_block("aoint", &[1, 1, 1, 2], &[3, 5, 5])];
        let e = compute_integral_batch(&mut ctx, &mut args).expect_err("misaligned");
        assert!(e.starts_with("argument 1 (aoint[1,1,1,2]), dimension 4: AOs 4..8 do not end"));
        let mut args = [ao_block("aoint", &[1, 1], &[3, 5, 5])];
        let e = compute_integral_batch(&mut ctx, &mut args).expect_err("rank 2");
        assert!(e.contains("must be a block of rank 4"), "{e}");
        let e = compute_integral_batch(&mut ctx, &mut []).expect_err("no args");
        assert!(e.starts_with("expects 1 argument"), "{e}");
    }

    #[test]
    fn schwarz_table() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        place(&mut ctx, "aoint", 4, &[3, 6, 4]);
        let mut args = [
            ao_block("aoint", &[2, 3, 1, 1], &[3, 6, 4]),
            Arg::whole_array("screen_array", vec![4, 4], vec![0.0; 16]),
        ];
        compute_aabb_batch(&mut ctx, &mut args).expect("aabb");
        assert!(args[0].data.iter().all(|v| *v == 0.0));
        let full = all_blocks(&mut ctx, &[13]);
        let eri = |i: usize, j: usize, k: usize, l: usize| full[i + 13 * (j + 13 * (k + 13 * l))];
        // Shell 2 (AOs 3..8) with shells 3 (9..10) and 4 (11..12).
        for (n, aos) in [(2, 9..11), (3, 11..13)] {
            let mut max: f64 = 0.0;
            for a in 3..9 {
                for b in aos.clone() {
                    for c in 3..9 {
                        for d in aos.clone() {
                            max = max.max(eri(a, b, c, d).abs());
                        }
                    }
                }
            }
            assert!((args[1].data[1 + 4 * n] - max).abs() < 1e-14);
        }
        let written: Vec<usize> = (0..16).filter(|&p| args[1].data[p] != 0.0).collect();
        assert_eq!(written, [9, 13]);
        args[1] = Arg::whole_array("screen_array", vec![3, 3], vec![0.0; 9]);
        let e = compute_aabb_batch(&mut ctx, &mut args).expect_err("too small");
        assert!(e.contains("argument 2 (screen_array) is 3 x 3"), "{e}");
    }

    #[test]
    fn ao_ladder_is_the_intended_sum() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        let full = all_blocks(&mut ctx, &[3, 6, 4]);
        let eri = |i: usize, j: usize, k: usize, l: usize| full[i + 13 * (j + 13 * (k + 13 * l))];
        // lambda = segment 3 (two shells), mu = 2, sigma = 3, nu = 1; i and j have 2 and 3 values.
        let (ni, nj) = (2, 3);
        let mut block = ao_block("aoint", &[3, 2, 3, 1], &[3, 6, 4]);
        compute_integral_batch(&mut ctx, std::slice::from_mut(&mut block)).expect("batch");
        let tdata: Vec<f64> = (0..4 * ni * 4 * nj)
            .map(|x| (x as f64 * 0.37).sin())
            .collect();
        let t = Arg::block("t", vec![3, 1, 3, 1], vec![4, ni, 4, nj], tdata.clone());
        let y = Arg::block(
            "y",
            vec![2, 1, 1, 1],
            vec![6, ni, 3, nj],
            vec![5.0; 6 * ni * 3 * nj],
        );
        let mut args = [block, t, y];
        aoladder_contraction(&mut ctx, &mut args).expect("ladder");
        for j in 0..nj {
            for d in 0..3 {
                for i in 0..ni {
                    for b in 0..6 {
                        let mut want = 0.0;
                        for c in 0..4 {
                            for a in 0..4 {
                                want += eri(9 + a, 3 + b, 9 + c, d)
                                    * tdata[a + 4 * (i + ni * (c + 4 * j))];
                            }
                        }
                        let got = args[2].data[b + 6 * (i + ni * (d + 3 * j))];
                        assert!((got - want).abs() < 1e-14);
                    }
                }
            }
        }
        // Shape errors.
        let bad_y = Arg::block(
            "y",
            vec![2, 1, 1, 1],
            vec![6, ni, 4, nj],
            vec![0.0; 6 * ni * 4 * nj],
        );
        let mut wrong = [args[0].clone(), args[1].clone(), bad_y];
        let e = aoladder_contraction(&mut ctx, &mut wrong).expect_err("y shape");
        assert!(
            e.starts_with("argument 3 (y[2,1,1,1]) is [6, 2, 4, 3], but"),
            "{e}"
        );
        let bad_t = Arg::block(
            "t",
            vec![1, 1, 3, 1],
            vec![3, ni, 4, nj],
            vec![0.0; 3 * ni * 4 * nj],
        );
        let mut wrong = [args[0].clone(), bad_t, args[2].clone()];
        let e = aoladder_contraction(&mut ctx, &mut wrong).expect_err("t shape");
        assert!(e.contains("dimensions 1 and 3 must match"), "{e}");
        let mut wrong = [args[0].clone(), Arg::scalar("t", 1.0), args[2].clone()];
        let e = aoladder_contraction(&mut ctx, &mut wrong).expect_err("scalar");
        assert!(e.starts_with("argument 2 must be a block of rank 4"), "{e}");
    }

    #[test]
    fn scratch_memory_does_nothing() {
        let mut ctx = Fake::new();
        let mut args = [
            Arg::whole_array("oed_ovl", vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]),
            Arg::scalar("zmax", 0.5),
            Arg::scalar("imax", 0.25),
        ];
        let before = args.clone();
        compute_int_scratchmem(&mut ctx, &mut args).expect("no-op");
        assert_eq!(args, before);
        let e = compute_int_scratchmem(&mut ctx, &mut args[..2]).expect_err("two");
        assert!(e.starts_with("expects 3 arguments"), "{e}");
        compute_int_scratchmem_lowmem(&mut ctx, &mut args[1..]).expect("any count");
        compute_int_scratchmem_lowmem(&mut ctx, &mut args).expect("any count");
        assert_eq!(args, before);
    }
}

/// Timings of the full-AO-block calls (run with
/// `cargo test --release -p sial-chemistry --lib integrals::two_electron::timing -- --ignored --nocapture`).
#[cfg(test)]
mod timing {
    use super::super::fock::compute_ubatch6;
    use super::super::testdata::{Case, ao_block, place};
    use super::*;
    use std::time::Instant;

    #[test]
    #[ignore = "timing; run in release"]
    fn full_block_timings() {
        for name in ["hf_321g", "water_321g", "ne_ccpvdz", "synthetic_spherical"] {
            let case = Case::load(name);
            let mut ctx = case.context();
            let n: usize = case.segments().iter().sum();
            place(&mut ctx, "aoint", 4, &[n]);
            // The first call builds the basis set; time the later ones.
            let mut args = [ao_block("aoint", &[1, 1, 1, 1], &[n])];
            compute_integral_batch(&mut ctx, &mut args).expect("batch");
            let reps = 20;
            let t = Instant::now();
            for _ in 0..reps {
                compute_integral_batch(&mut ctx, &mut args).expect("batch");
            }
            let batch = t.elapsed().as_secs_f64() / reps as f64;
            let whole = |d: Vec<f64>| Arg::whole_array("m", vec![n, n], d);
            let mut args = [
                ao_block("aoint", &[1, 1, 1, 1], &[n]),
                whole(case.reals("Da")),
                whole(case.reals("Db")),
                whole(vec![0.0; n * n]),
                whole(vec![0.0; n * n]),
            ];
            let t = Instant::now();
            for _ in 0..reps {
                compute_ubatch6(&mut ctx, &mut args).expect("ubatch6");
            }
            let fock = t.elapsed().as_secs_f64() / reps as f64;
            println!(
                "{name}: {n} AOs, compute_integral_batch {:.3} ms, compute_ubatch6 {:.3} ms",
                batch * 1e3,
                fock * 1e3
            );
        }
    }
}
