//! Planes whose sides are not both multiples of 8, moved by AVX-512 gathers (on Intel CPUs).
//!
//! The 4 × 4 register transposes of [`super::tile`] cover a side that is not a multiple of 4
//! with a block overlapping the last whole one, and a side under 4 element by element: a
//! plane of 5 × 95 (water's occupied segment against a pair of segments) moves two blocks of
//! 16 elements for every 20, and rows of 19 are written by unaligned stores of 4. Here each
//! destination vector of 8 is one gather from the source: a destination row is written 8
//! elements at a time and its end by one masked store. Where the destination's rows are
//! shorter than a vector, they and the loops that continue them in the destination make runs
//! of contiguous elements, and the vectors run across those (`Across`), so that none is
//! partly empty. An accumulate multiplies and then adds, as the other kernels do: the same
//! bits. On a 2-core Intel Xeon the 24 permutations of 31⁴ went from worst 0.34 / median
//! 0.66 of memcpy to 0.59 / 0.92, those of water's `[19,5,19,5]` from median 0.38 to 0.50,
//! the benzene job's three odd-extent transposes 1.4–1.8× as fast, and the contraction
//! `mibc = aibn * amcn` (three operands permuted) from 57% to 71% of the GEMM rate
//! (docs/benchmarks.md, "Permutations: planes with odd sides by gathers").
//! `SIAL_NO_GATHERS=1` turns the form off, for side-by-side runs.

use super::tile::Tile;
use super::{Loop, Store, for_each_offset, reach};

/// Whether the CPU has AVX-512 gathers and `SIAL_NO_GATHERS` is unset.
pub(super) fn present() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::env::var_os("SIAL_NO_GATHERS").is_none()
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether planes may go by gathers: where they are [`present`], on Intel CPUs. AMD's are far
/// slower: on a Zen 5 the permutations of 31⁴ that took them ran 3–7× slower than without,
/// and water's blocks up to 2× (docs/benchmarks.md, "Permutations: gathers on AMD only for the
/// smallest blocks").
pub(super) fn available() -> bool {
    present() && super::intel()
}

/// Whether the planes of `a` (the destination's unit-stride loop) and `b` (the source's) go
/// by gathers ([`available`]), unless both sides are multiples of 8 (those move as whole
/// 8 × 8 blocks in registers, each line read and written once). Planes whose source rows
/// share L1 sets keep their staged paths (the caller's check): gathered, the 12⁶ reversal
/// ran at half their speed.
pub(super) fn pays(a: Loop, b: Loop) -> bool {
    available() && !(a.n.is_multiple_of(8) && b.n.is_multiple_of(8))
}

/// Moves every plane of `a × b` along the loops `outer`: element `(i, k)` of a plane from
/// `soff + i * a.ss + k` to `doff + i + k * b.ds`. Returns false, having moved nothing, where
/// the CPU lacks AVX-512 or an element would lie outside the buffers (never for a validated
/// nest); the caller then takes another path.
pub(super) fn run<S: Store>(
    dst: &mut [f64],
    src: &[f64],
    (a, b): (Loop, Loop),
    outer: &[Loop],
    st: S,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") && a.ds == 1 && b.ss == 1 {
        let end = |step: fn(&Loop) -> usize| reach([a, b].iter().chain(outer), step);
        match (end(|l| l.ds), end(|l| l.ss)) {
            (Some(d), Some(s)) if d <= dst.len() && s <= src.len() => {}
            _ => return false,
        }
        let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
        if let Some((across, rest)) = x86::Across::of(a, b, outer) {
            let rest = rest.as_slice();
            for_each_offset(rest, |doff, soff| {
                // SAFETY: AVX-512F is present, every element lies inside the buffers
                // (above), and `dst` and `src` are distinct borrows.
                unsafe {
                    match st.alpha() {
                        None => across.run::<false>(d.add(doff), s.add(soff), 0.0),
                        Some(al) => across.run::<true>(d.add(doff), s.add(soff), al),
                    }
                }
            });
            return true;
        }
        for_each_offset(outer, |doff, soff| {
            let t = Tile {
                d0: doff,
                s0: soff,
                na: a.n,
                nb: b.n,
                src_row: a.ss,
                dst_row: b.ds,
            };
            // SAFETY: as above.
            unsafe {
                match st.alpha() {
                    None => x86::rows::<false>(d, s, t, 0.0),
                    Some(al) => x86::rows::<true>(d, s, t, al),
                }
            }
        });
        return true;
    }
    let _ = (dst, src, a, b, outer, st);
    false
}

/// Source rows per strip of a plane moved row by row: 64 rows' lines (4 KiB) stay in L1
/// while the strip's destination rows are written, 8 lines each.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const STRIP: usize = 64;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Loop, STRIP, Tile};
    use crate::permute::Loops;
    use crate::shape::MAX_RANK;
    use std::arch::x86_64::{
        __m512d, __m512i, __mmask8, _mm512_add_pd, _mm512_i64gather_pd, _mm512_loadu_epi64,
        _mm512_mask_i64gather_pd, _mm512_mask_storeu_pd, _mm512_maskz_loadu_pd, _mm512_mul_pd,
        _mm512_set1_pd, _mm512_setzero_pd,
    };

    /// The first `n` lanes of a vector (`n <= 8`).
    fn lanes(n: usize) -> __mmask8 {
        (((1u16 << n) - 1) & 0xff) as __mmask8
    }

    /// Writes `x` to the first `n` lanes at `p`, or adds `alpha · x` to them.
    ///
    /// # Safety
    /// AVX-512F; `p..p + n` in bounds.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn put<const ADD: bool>(p: *mut f64, x: __m512d, n: usize, alpha: f64) {
        let m = lanes(n);
        // SAFETY: the caller's contract; masked lanes are not touched.
        unsafe {
            if ADD {
                let old = _mm512_maskz_loadu_pd(m, p);
                let new = _mm512_add_pd(old, _mm512_mul_pd(_mm512_set1_pd(alpha), x));
                _mm512_mask_storeu_pd(p, m, new);
            } else {
                _mm512_mask_storeu_pd(p, m, x);
            }
        }
    }

    /// A plane row by row: destination row `k` is gathered 8 elements at a time down the
    /// source's rows (`src_row` apart), in strips of [`STRIP`] source rows.
    ///
    /// # Safety
    /// AVX-512F; the tile inside both buffers.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows<const ADD: bool>(d: *mut f64, s: *const f64, t: Tile, alpha: f64) {
        let step: [i64; 8] = std::array::from_fn(|l| (l * t.src_row) as i64);
        // SAFETY (all loads and stores below): elements `(i, k)` with `i < na`, `k < nb`,
        // which the caller checked lie inside; masked lanes are not touched.
        unsafe {
            let idx = _mm512_loadu_epi64(step.as_ptr());
            for i0 in (0..t.na).step_by(STRIP) {
                let strip = STRIP.min(t.na - i0);
                for k in 0..t.nb {
                    let out = d.add(t.d0 + k * t.dst_row + i0);
                    let from = s.add(t.s0 + i0 * t.src_row + k);
                    let mut i = 0;
                    while i + 8 <= strip {
                        let x = _mm512_i64gather_pd::<8>(idx, from.add(i * t.src_row));
                        put::<ADD>(out.add(i), x, 8, alpha);
                        i += 8;
                    }
                    if i < strip {
                        let m = lanes(strip - i);
                        let x = _mm512_mask_i64gather_pd::<8>(
                            _mm512_setzero_pd(),
                            m,
                            idx,
                            from.add(i * t.src_row),
                        );
                        put::<ADD>(out.add(i), x, strip - i, alpha);
                    }
                }
            }
        }
    }

    /// Destination rows shorter than a vector (`a.n < 8`) continued in the destination by
    /// other loops: the rows, and the loops that continue them while they are shorter than
    /// a vector, make a run of `len` elements (at most [`RUN`]); a further loop `c` continues
    /// the run (`c.ds == len`), so that its steps are `len · c.n` contiguous elements,
    /// gathered 8 at a time across runs. Vector `v` of a group of 8 steps of `c` holds
    /// elements `q = 8v..8v + 8` of the group, element `q mod len` of step `q div len`; the
    /// `len` vectors of a group cover its 8 steps exactly.
    pub(super) struct Across {
        len: usize,
        c: Loop,
        /// Vector `v`'s source offsets, from the group's first element.
        idx: [__m512i; RUN],
    }

    /// The longest run of destination elements gathered by one table of offsets.
    const RUN: usize = 32;

    impl Across {
        /// The form and the loops left to walk around it (the source's loop innermost where
        /// it is left, so that the lines one walk step reads are read again at the next).
        pub(super) fn of(a: Loop, b: Loop, outer: &[Loop]) -> Option<(Across, Loops)> {
            if a.n >= 8 {
                return None;
            }
            let mut all = [Loop::ONCE; MAX_RANK];
            all[0] = b;
            all[1..=outer.len()].copy_from_slice(outer);
            let all = &all[..=outer.len()];
            let mut used = [0usize; MAX_RANK];
            let mut n_used = 0;
            let mut offs = [0usize; RUN];
            for (i, o) in offs.iter_mut().enumerate().take(a.n) {
                *o = i * a.ss;
            }
            let mut run = a.n;
            let next = |used: &[usize], p: usize| {
                (0..all.len()).find(|&j| !used.contains(&j) && all[j].ds == p)
            };
            // Loops that continue the run while it is shorter than a vector.
            while run < 8 {
                let Some(j) = next(&used[..n_used], run) else {
                    break;
                };
                let l = all[j];
                if run * l.n > RUN {
                    break;
                }
                for k in 1..l.n {
                    for i in 0..run {
                        offs[k * run + i] = offs[i] + k * l.ss;
                    }
                }
                run *= l.n;
                used[n_used] = j;
                n_used += 1;
            }
            let at = next(&used[..n_used], run)?;
            used[n_used] = at;
            n_used += 1;
            let c = all[at];
            let mut lanes = [[0i64; 8]; RUN];
            for (v, lanes) in lanes.iter_mut().enumerate().take(run) {
                for (l, x) in lanes.iter_mut().enumerate() {
                    let q = 8 * v + l;
                    *x = (offs[q % run] + (q / run) * c.ss) as i64;
                }
            }
            // SAFETY: `__m512i` is 8 `i64`s, any bits valid.
            let idx = unsafe { std::mem::transmute::<[[i64; 8]; RUN], [__m512i; RUN]>(lanes) };
            let across = Across { len: run, c, idx };
            Some((across, Loops::except(all, &used[..n_used])))
        }

        /// The runs along `c` from `d` and `s`.
        ///
        /// # Safety
        /// AVX-512F; every element of the runs inside the buffers.
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn run<const ADD: bool>(&self, d: *mut f64, s: *const f64, alpha: f64) {
            let (run, c) = (self.len, self.c);
            let groups = c.n / 8;
            // SAFETY (all loads and stores below): group `g` reads steps `8g..8g + 8` of `c`
            // and writes elements `8g · run..(8g + 8) · run`; the last group only its
            // `rest · run` elements. All inside, as the caller checked; masked lanes are not
            // touched.
            unsafe {
                for g in 0..groups {
                    let out = d.add(8 * g * run);
                    let from = s.add(8 * g * c.ss);
                    for (v, &ix) in self.idx[..run].iter().enumerate() {
                        let x = _mm512_i64gather_pd::<8>(ix, from);
                        put::<ADD>(out.add(8 * v), x, 8, alpha);
                    }
                }
                let rest = (c.n - 8 * groups) * run;
                let out = d.add(8 * groups * run);
                let from = s.add(8 * groups * c.ss);
                for (v, &ix) in self.idx[..run].iter().enumerate().take(rest.div_ceil(8)) {
                    let n = (rest - 8 * v).min(8);
                    let x = _mm512_mask_i64gather_pd::<8>(_mm512_setzero_pd(), lanes(n), ix, from);
                    put::<ADD>(out.add(8 * v), x, n, alpha);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AddScaled, Assign, tile};
    use super::*;
    use crate::testutil::random_vec;

    /// Planes of every kind the gathers take (rows shorter than a vector, contiguous or
    /// not, longer ones with ends, strips of 64 rows and a part of one), each with its
    /// planes batched along an outer loop, give the bits of the scalar transpose, for a
    /// copy and for an accumulate.
    #[test]
    fn gathered_planes_give_the_scalar_transposes_bits() {
        let shapes = [
            (1, 9),
            (5, 95),
            (5, 3),
            (7, 8),
            (3, 1),
            (19, 95),
            (95, 5),
            (9, 19),
            (150, 7),
            (64, 13),
        ];
        for (na, nb) in shapes {
            // Destination rows `na` apart (contiguous planes) and further.
            for (gap, batch) in [(0, 3), (2, 2)] {
                let a = Loop {
                    n: na,
                    ds: 1,
                    ss: nb + 1,
                };
                let b = Loop {
                    n: nb,
                    ds: na + gap,
                    ss: 1,
                };
                let plane_src = na * (nb + 1);
                let plane_dst = nb * (na + gap);
                let outer = [Loop {
                    n: batch,
                    ds: plane_dst + 4,
                    ss: plane_src + 2,
                }];
                let src = random_vec(batch * (plane_src + 2), (na * 1000 + nb) as u64);
                let start = random_vec(batch * (plane_dst + 4), 11);
                let tiles: Vec<tile::Tile> = (0..batch)
                    .map(|r| tile::Tile {
                        d0: r * (plane_dst + 4),
                        s0: r * (plane_src + 2),
                        na,
                        nb,
                        src_row: a.ss,
                        dst_row: b.ds,
                    })
                    .collect();
                let slow = |st: &dyn Fn(&mut [f64], tile::Tile)| {
                    let mut out = start.clone();
                    for &t in &tiles {
                        st(&mut out, t);
                    }
                    out
                };
                let copy = slow(&|out, t| tile::by_rows(out, &src, t, Assign));
                let add = slow(&|out, t| tile::by_rows(out, &src, t, AddScaled(-0.7)));
                let mut fast = start.clone();
                if !run(&mut fast, &src, (a, b), &outer, Assign) {
                    // No AVX-512 here: nothing to compare.
                    assert_eq!(fast, start);
                    return;
                }
                assert_eq!(fast, copy, "copy {na}x{nb}, gap {gap}");
                let mut fast = start.clone();
                assert!(run(&mut fast, &src, (a, b), &outer, AddScaled(-0.7)));
                assert_eq!(fast, add, "accumulate {na}x{nb}, gap {gap}");
            }
        }
    }

    /// A plane that would reach past its buffers is refused, untouched.
    #[test]
    fn planes_outside_their_buffers_are_refused() {
        let a = Loop {
            n: 5,
            ds: 1,
            ss: 10,
        };
        let b = Loop {
            n: 10,
            ds: 5,
            ss: 1,
        };
        let src = random_vec(49, 1);
        let mut dst = vec![0.0; 50];
        assert!(!run(&mut dst, &src, (a, b), &[], Assign));
        let src = random_vec(50, 1);
        let outer = [Loop {
            n: 2,
            ds: 50,
            ss: 50,
        }];
        assert!(!run(&mut dst, &src, (a, b), &outer, Assign));
        assert!(dst.iter().all(|&x| x == 0.0));
    }
}
