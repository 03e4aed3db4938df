//! The SCF Fock-build specials `compute_ubatch1/2/4/6/7/8` (wrruu):
//! `execute compute_ubatchK aoint[mu,nu,lambda,sigma] Da Db Fa Fb`.
//!
//! ACES4's SCF programs (PROC FOCK_MATRIX_FAST) visit one representative block of every orbit
//! of AO segment quartets under the 8-fold permutational symmetry, in eight PARDOs, and call
//! the special of the block's class. For every element (a, b, c, d) of the block, I = (ab|cd),
//! the special adds I's contributions from the images of the element that no other visited
//! element stands for, so that the eight classes together give
//!
//! ```text
//! Fa += J[Da+Db] − K[Da],  Fb += J[Da+Db] − K[Db],
//! J[D](μ,ν) = Σ (μν|λσ) D(λ,σ),  K[D](μ,ν) = Σ (μλ|νσ) D(λ,σ).
//! ```
//!
//! Each special must add exactly its own class's share (the accumulators are summed over all
//! calls and workers afterwards), so the formulas are ACES4's per class, with ACES4's choice of
//! density elements. The densities and Fock matrices are
//! whole nao × nao arrays indexed by absolute AO numbers. The block comes back zero, except for
//! ubatch6, which also returns the integrals (mp2_rhf_disc relies on it).

use sial_superinstructions::special::{Arg, Context};

use super::two_electron::{block_integrals, for_each_element};
use super::with_basis;
use super::{basis::BasisSet, blocks::spans};
use crate::args;

/// The symmetry classes, by the images each block element stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// ubatch1 and ubatch4: segment quartets with 8 distinct images.
    EightFold,
    /// ubatch2, (MM|LS) with L < S: (ab|cd), (ab|dc), (cd|ab), (dc|ab).
    SameBra,
    /// ubatch8, (MN|MN) with M < N: (ab|cd), (ba|cd), (ab|dc), (ba|dc).
    PairPair,
    /// ubatch7, (MM|LL) with M < L: (ab|cd), (cd|ab).
    BraKet,
    /// ubatch6, (MM|MM): the element itself.
    OneFold,
}

/// One of a class's contributions, a sum over the block `I[a,b,c,d]` (labels 0 to 3) and
/// the two labels of `source`: `R[x,y] = Σ I[a,b,c,d]·M[u,v]`, `target = [x, y]`,
/// `source = [u, v]`, added into the Fock matrices at `(x, y)` and, if `mirrored`, at `(y, x)`.
/// Coulomb terms take `M = factor·(Da + Db)` and add R to both Fock matrices; exchange terms
/// take `M = −Dσ` and add each spin's R to that spin's Fock matrix.
#[derive(Clone, Copy, Debug)]
struct Term {
    coulomb: Option<f64>,
    target: [usize; 2],
    mirrored: bool,
    source: [usize; 2],
}

const fn coulomb(factor: f64, target: [usize; 2], mirrored: bool, source: [usize; 2]) -> Term {
    Term {
        coulomb: Some(factor),
        target,
        mirrored,
        source,
    }
}

const fn exchange(target: [usize; 2], mirrored: bool, source: [usize; 2]) -> Term {
    Term {
        coulomb: None,
        target,
        mirrored,
        source,
    }
}

/// Block labels a, b, c, d.
const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const D: usize = 3;

impl Class {
    /// The contributions of every element (a, b, c, d) = I of a block of this class: the
    /// images it stands for, each giving `J` terms `F(p,q) += Dt(r,s)·I` and `K` terms
    /// `Fσ(p,r) −= Dσ(q,s)·I` (ACES4's formulas per class).
    fn terms(self) -> &'static [Term] {
        const EIGHT_FOLD: &[Term] = &[
            coulomb(2.0, [A, B], true, [C, D]),
            coulomb(2.0, [C, D], true, [A, B]),
            exchange([A, C], true, [B, D]),
            exchange([A, D], true, [B, C]),
            exchange([B, C], true, [A, D]),
            exchange([B, D], true, [A, C]),
        ];
        const SAME_BRA: &[Term] = &[
            coulomb(2.0, [A, B], false, [C, D]),
            coulomb(1.0, [C, D], true, [A, B]),
            exchange([A, C], true, [B, D]),
            exchange([A, D], true, [B, C]),
        ];
        const PAIR_PAIR: &[Term] = &[
            coulomb(2.0, [A, B], true, [C, D]),
            exchange([A, C], false, [B, D]),
            exchange([A, D], false, [B, C]),
            exchange([B, C], false, [A, D]),
            exchange([B, D], false, [A, C]),
        ];
        const BRA_KET: &[Term] = &[
            coulomb(1.0, [A, B], false, [C, D]),
            coulomb(1.0, [C, D], false, [A, B]),
            exchange([A, C], true, [B, D]),
        ];
        const ONE_FOLD: &[Term] = &[
            coulomb(1.0, [A, B], false, [C, D]),
            exchange([A, C], false, [B, D]),
        ];
        match self {
            Class::EightFold => EIGHT_FOLD,
            Class::SameBra => SAME_BRA,
            Class::PairPair => PAIR_PAIR,
            Class::BraKet => BRA_KET,
            Class::OneFold => ONE_FOLD,
        }
    }
}

/// The densities and Fock matrices of one call, all n × n column-major, and where the block's
/// four dimensions start among the AOs.
struct Matrices<'a> {
    n: usize,
    /// Da + Db.
    total: Vec<f64>,
    d: [&'a [f64]; 2],
    f: [&'a mut [f64]; 2],
    offsets: [usize; 4],
}

/// One term's operands while the block is read: the source matrices (one per spin it
/// touches, `factor·Dt` or `−Dσ`, dense `[u, v]`) and the results (dense `[x, y]`).
struct Partial {
    term: Term,
    sources: Vec<Vec<f64>>,
    results: Vec<Vec<f64>>,
}

impl Matrices<'_> {
    /// Adds the contributions of all of a class's `terms` from the integral block `block`
    /// (extents `shape`) in one pass over it. The block's first label `a` runs contiguously,
    /// and every term has `a` first in its target (`R[:, t] += M[s1, s2]·I[:, b, c, d]`) or in
    /// its source (`R[t1, t2] += I[:, b, c, d]·M[:, s]`), so each column of the block is an
    /// axpy or a dot product per term: the block is read once, in order, and never permuted.
    fn add(&mut self, terms: &[Term], block: &[f64], shape: [usize; 4]) -> Result<(), String> {
        let n = self.n;
        let mut partials = Vec::with_capacity(terms.len());
        for &term in terms {
            let ([u, v], [x, y]) = (term.source, term.target);
            if x != A && u != A {
                return Err(format!(
                    "internal: Fock term {term:?} reads the block across"
                ));
            }
            let spins = if term.coulomb.is_some() { 1 } else { 2 };
            let (ou, ov) = (self.offsets[u], self.offsets[v]);
            let sources = (0..spins)
                .map(|spin| {
                    let (from, factor) = match term.coulomb {
                        Some(f) => (&self.total[..], f),
                        None => (self.d[spin], -1.0),
                    };
                    let mut m = Vec::with_capacity(shape[u] * shape[v]);
                    for j in 0..shape[v] {
                        let col = &from[ou + n * (ov + j)..][..shape[u]];
                        m.extend(col.iter().map(|d| factor * d));
                    }
                    m
                })
                .collect();
            let results = vec![vec![0.0; shape[x] * shape[y]]; spins];
            partials.push(Partial {
                term,
                sources,
                results,
            });
        }
        columns(&mut partials, block, shape);
        for p in &partials {
            self.scatter(p, shape);
        }
        Ok(())
    }

    /// Adds a term's results into the Fock matrices (both from a Coulomb term's one result).
    fn scatter(&mut self, p: &Partial, shape: [usize; 4]) {
        let n = self.n;
        let [x, y] = p.term.target;
        let (ex, ey, ox, oy) = (shape[x], shape[y], self.offsets[x], self.offsets[y]);
        for spin in 0..2 {
            let r = &p.results[spin.min(p.results.len() - 1)];
            let f = &mut *self.f[spin];
            for j in 0..ey {
                for i in 0..ex {
                    let value = r[i + ex * j];
                    f[(ox + i) + n * (oy + j)] += value;
                    if p.term.mirrored {
                        f[(oy + j) + n * (ox + i)] += value;
                    }
                }
            }
        }
    }
}

/// The pass over the block for all of a class's terms, one slab `I[:, :, c, d]` (an
/// `e0 × e1` matrix, column `b` contiguous) at a time. Per slab and term:
/// - `a` and `b` in the target (`R[:, b] += M[c,d]·I[:, b, c, d]`): an axpy per column;
/// - `a` in the target with `c` or `d` (`R[:, y] += Σ_b M[b, w]·I[:, b, c, d]`): a
///   matrix–vector product, its column summed in registers over `b`;
/// - `a` in the source: a dot product per column.
///
/// Compiled for each vector width the CPU may have; the arithmetic is the same in every version
/// (no fused multiply-add, each sum's order fixed), so the results are the same bits everywhere.
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn columns(partials: &mut [Partial], block: &[f64], shape: [usize; 4]) {
    let (e0, e1) = (shape[A], shape[B]);
    if shape.contains(&0) {
        return;
    }
    let slab_len = e0 * e1;
    let mut coefs = vec![0.0; e1];
    for (slab, i) in block.chunks_exact(slab_len).zip(0..) {
        // The slab's (c, d); a runs down each column and b across them.
        let cd = [0, 0, i % shape[C], i / shape[C]];
        // A label's value in column b of the slab.
        let at = |label: usize, b: usize| if label == B { b } else { cd[label] };
        for p in partials.iter_mut() {
            let ([u, v], [x, y]) = (p.term.source, p.term.target);
            for (m, r) in p.sources.iter().zip(&mut p.results) {
                if x == A {
                    for (b, c) in coefs.iter_mut().enumerate() {
                        *c = m[at(u, b) + shape[u] * at(v, b)];
                    }
                    if y == B {
                        for ((column, out), &c) in slab
                            .chunks_exact(e0)
                            .zip(r.chunks_exact_mut(e0))
                            .zip(&coefs)
                        {
                            out.iter_mut().zip(column).for_each(|(o, i)| *o += c * i);
                        }
                    } else {
                        gemv(&mut r[e0 * cd[y]..][..e0], slab, &coefs);
                    }
                } else {
                    for (column, b) in slab.chunks_exact(e0).zip(0..) {
                        let m = &m[e0 * at(v, b)..][..e0];
                        r[at(x, b) + shape[x] * at(y, b)] += dot(column, m);
                    }
                }
            }
        }
    }
}

/// `out += Σ_b coefs[b]·matrix[:, b]` (`matrix` column-major, `out.len()` rows), each element
/// summed over `b` in order, eight rows at a time in registers.
#[inline(always)]
fn gemv(out: &mut [f64], matrix: &[f64], coefs: &[f64]) {
    let rows = out.len();
    let (out8, out_tail) = out.as_chunks_mut::<8>();
    for (o, chunk) in out8.iter_mut().zip(0..) {
        let mut acc = *o;
        for (&c, column) in coefs.iter().zip(matrix.chunks_exact(rows)) {
            let x = &column.as_chunks::<8>().0[chunk];
            for k in 0..8 {
                acc[k] += c * x[k];
            }
        }
        *o = acc;
    }
    let r0 = rows - out_tail.len();
    for (o, r) in out_tail.iter_mut().zip(r0..) {
        for (&c, column) in coefs.iter().zip(matrix.chunks_exact(rows)) {
            *o += c * column[r];
        }
    }
}

/// `Σ a·b` in eight interleaved partial sums added in a fixed order: vectorisable at any
/// width, with the same result at every width.
#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let (a8, a_tail) = a.as_chunks::<8>();
    let (b8, b_tail) = b.as_chunks::<8>();
    for (x, y) in a8.iter().zip(b8) {
        for k in 0..8 {
            lanes[k] += x[k] * y[k];
        }
    }
    let tail: f64 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    let [l0, l1, l2, l3, l4, l5, l6, l7] = lanes;
    (((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))) + tail
}

/// Checks that argument `k` is a whole n × n matrix.
fn full_matrix(arg: &Arg, k: usize, n: usize) -> Result<(), String> {
    let (r, c) = args::matrix(arg, k)?;
    if (r, c) != (n, n) || arg.data.len() != n * n {
        return Err(format!(
            "argument {} ({}) is {r} x {c}: it must be the whole AO x AO matrix ({n} x {n})",
            k + 1,
            arg.describe()
        ));
    }
    Ok(())
}

/// The body shared by the six specials.
fn fock_build(ctx: &mut dyn Context, args: &mut [Arg], class: Class) -> Result<(), String> {
    let [aoint, da, db, fa, fb] = args::exactly::<5>(
        args,
        "aoint[mu,nu,lambda,sigma], the alpha and beta densities, the alpha and beta Fock matrices",
    )?;
    with_basis(ctx, |ctx, basis: &BasisSet| {
        let s = spans(ctx, basis, aoint, 0, 4)?;
        let n = basis.nao;
        for (k, m) in [(1, &*da), (2, &*db), (3, &*fa), (4, &*fb)] {
            full_matrix(m, k, n)?;
        }
        let total = da.data.iter().zip(&db.data).map(|(x, y)| x + y).collect();
        let shape: [usize; 4] = [0, 1, 2, 3].map(|d| aoint.shape[d]);
        let mut m = Matrices {
            n,
            total,
            d: [&da.data, &db.data],
            f: [&mut fa.data, &mut fb.data],
            offsets: [0, 1, 2, 3].map(|d| s[d].offset),
        };
        // The whole block of integrals first (read in place where the cache keeps it in this
        // order, else computed or permuted into the block), then all the class's terms in one
        // pass over it.
        let in_place = match block_integrals(basis, &s, &shape, &mut aoint.data) {
            Some(k) if k.in_order() => Some(k.data),
            Some(k) => {
                k.copy_to(&mut aoint.data);
                None
            }
            None => None,
        };
        m.add(
            class.terms(),
            in_place.as_deref().unwrap_or(&aoint.data),
            shape,
        )?;
        // A `w` argument arrives zero-filled, so a block read in place is still zero.
        match (class, in_place) {
            (Class::OneFold, Some(data)) => aoint.data.copy_from_slice(&data),
            (Class::OneFold, None) | (_, Some(_)) => {}
            (_, None) => aoint.data.fill(0.0),
        }
        Ok(())
    })
}

/// `compute_ubatch1` (wrruu): Fock contributions of a block of class (MN|LS) with all four
/// segment pairs distinct (8 images per element). The block comes back zero.
pub fn compute_ubatch1(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    fock_build(ctx, args, Class::EightFold)
}

/// `compute_ubatch2` (wrruu): Fock contributions of a block (MM|LS), L < S. Zero block.
pub fn compute_ubatch2(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    fock_build(ctx, args, Class::SameBra)
}

/// `compute_ubatch4` (wrruu): as ubatch1, for the classes (MN|MS), (MN|NS), (MN|LN) with
/// M < N < S (M < L < N), which also have 8 images per element. Zero block.
pub fn compute_ubatch4(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    fock_build(ctx, args, Class::EightFold)
}

/// `compute_ubatch6` (wrruu): Fock contributions of a block (MM|MM) (one image per element:
/// the plain J − K rule, which is the whole Fock build when there is a single AO segment); the
/// block comes back holding the integrals.
pub fn compute_ubatch6(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    fock_build(ctx, args, Class::OneFold)
}

/// `compute_ubatch7` (wrruu): Fock contributions of a block (MM|LL), M < L. Zero block.
pub fn compute_ubatch7(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    fock_build(ctx, args, Class::BraKet)
}

/// `compute_ubatch8` (wrruu): Fock contributions of a block (MN|MN), M < N. Zero block.
pub fn compute_ubatch8(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    fock_build(ctx, args, Class::PairPair)
}

/// `J[Dt]` and `K[Da]`, `K[Db]` over a whole (small) basis — the Fock build of ACES4's atomic guess,
/// which has no SIAL blocks. Each canonical shell quartet (m ≥ n, r ≥ s, mn ≥ rs) is computed
/// once and every element contributes through its 8 permutational images, weighted by 1/2 for
/// each coincidence (m = n, r = s, mn = rs) so that every AO quadruple counts once.
pub(crate) fn coulomb_exchange(
    basis: &BasisSet,
    dt: &[f64],
    d: [&[f64]; 2],
) -> (Vec<f64>, [Vec<f64>; 2]) {
    let n = basis.nao;
    let mut j = vec![0.0; n * n];
    let mut k = [vec![0.0; n * n], vec![0.0; n * n]];
    let ns = basis.shells.len();
    let mut batch = Vec::new();
    for m in 0..ns {
        for nn in 0..=m {
            for r in 0..=m {
                let top = if r == m { nn } else { r };
                for s in 0..=top {
                    let q = [m, nn, r, s].map(|i| &basis.shells[i]);
                    super::engine::quartet(basis, q, &mut batch);
                    let mut w = 1.0;
                    for same in [m == nn, r == s, (m, nn) == (r, s)] {
                        if same {
                            w *= 0.5;
                        }
                    }
                    let start = q.map(|s| s.first);
                    for_each_element(q, &batch, start, |a, b, c, e, v| {
                        let v = w * v;
                        for (p, qq, rr, ss) in [
                            (a, b, c, e),
                            (b, a, c, e),
                            (a, b, e, c),
                            (b, a, e, c),
                            (c, e, a, b),
                            (e, c, a, b),
                            (c, e, b, a),
                            (e, c, b, a),
                        ] {
                            j[p + n * qq] += v * dt[rr + n * ss];
                            for (kx, dx) in k.iter_mut().zip(d) {
                                kx[p + n * rr] += v * dx[qq + n * ss];
                            }
                        }
                    });
                }
            }
        }
    }
    (j, k)
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{Case, ao_block, max_diff, place};
    use super::*;
    use sial_superinstructions::special::SpecialFn;
    use sial_superinstructions::special::fake::Fake;

    /// The special ACES4's FOCK_MATRIX_FAST calls for segment quartet (M, N, L, S), in the
    /// order of its eight PARDOs (their WHERE clauses), or None for a quartet no PARDO visits.
    fn class_of(m: i32, n: i32, l: i32, s: i32) -> Option<(SpecialFn, bool)> {
        if m < n && l < s && m < l && n != s && n != l && m != s {
            Some((compute_ubatch1, false))
        } else if m == n && l < s {
            Some((compute_ubatch2, false))
        } else if (n < s && m < n && l < s && m == l)
            || (m < n && l < s && m < s && n == l)
            || (m < n && l < s && m < l && n == s)
        {
            Some((compute_ubatch4, false))
        } else if m < n && l < s && n == s && m == l {
            Some((compute_ubatch8, false))
        } else if m < l && m == n && l == s {
            Some((compute_ubatch7, false))
        } else if m == n && n == l && l == s {
            Some((compute_ubatch6, true))
        } else {
            None
        }
    }

    fn whole(name: &str, data: Vec<f64>, n: usize) -> Arg {
        Arg::whole_array(name, vec![n, n], data)
    }

    /// Runs ACES4's Fock build over the case's AO segments and compares the two accumulated
    /// Fock matrices with PySCF's J[Da+Db] − K[Da], J[Da+Db] − K[Db].
    fn fock_matches(name: &str, segments: &[usize]) {
        let case = Case::load(name);
        let mut ctx = case.context();
        place(&mut ctx, "aoint", 4, segments);
        let n: usize = segments.iter().sum();
        let mut args = vec![
            ao_block("aoint", &[1, 1, 1, 1], segments),
            whole("oed_kin", case.reals("Da"), n),
            whole("oed_ovl", case.reals("Db"), n),
            whole("fockrohf_a", vec![0.0; n * n], n),
            whole("fockrohf_b", vec![0.0; n * n], n),
        ];
        let k = segments.len() as i32;
        // The second round takes every block from the basis set's cache.
        for round in 0..2 {
            args[3].data.fill(0.0);
            args[4].data.fill(0.0);
            fock_round(&mut ctx, &mut args, segments, k);
            let e = max_diff(&args[3].data, &case.reals("Fa"));
            assert!(e < 1e-12, "{name} round {round}: Fa off by {e}");
            let e = max_diff(&args[4].data, &case.reals("Fb"));
            assert!(e < 1e-12, "{name} round {round}: Fb off by {e}");
        }
    }

    /// One Fock build: every block ACES4's PARDOs visit, through its class's special.
    fn fock_round(ctx: &mut Fake, args: &mut [Arg], segments: &[usize], k: i32) {
        let mut calls = 0;
        for m in 1..=k {
            for nn in 1..=k {
                for l in 1..=k {
                    for s in 1..=k {
                        let Some((special, returns_integrals)) = class_of(m, nn, l, s) else {
                            continue;
                        };
                        args[0] = ao_block("aoint", &[m, nn, l, s], segments);
                        special(ctx, args).expect("fock build");
                        if !returns_integrals {
                            assert!(args[0].data.iter().all(|v| *v == 0.0));
                        }
                        calls += 1;
                    }
                }
            }
        }
        // One representative per orbit of the 8-fold symmetry.
        let pairs = k * (k + 1) / 2;
        assert_eq!(calls, pairs * (pairs + 1) / 2);
    }

    #[test]
    fn classes_sum_to_j_minus_k_over_three_segments() {
        fock_matches("water_321g", &[3, 6, 4]);
        fock_matches("hf_321g", &[2, 3, 6]);
    }

    #[test]
    fn one_segment_is_a_single_ubatch6() {
        fock_matches("water_321g", &[13]);
        fock_matches("ne_ccpvdz", &[14]);
    }

    #[test]
    fn direct_coulomb_exchange_matches_pyscf() {
        for name in ["water_321g", "synthetic_spherical"] {
            let case = Case::load(name);
            let basis = BasisSet::from_setup(&case.context()).expect("basis");
            let (da, db) = (case.reals("Da"), case.reals("Db"));
            let dt: Vec<f64> = da.iter().zip(&db).map(|(x, y)| x + y).collect();
            let (j, [ka, kb]) = coulomb_exchange(&basis, &dt, [&da, &db]);
            let fa: Vec<f64> = j.iter().zip(&ka).map(|(x, y)| x - y).collect();
            let fb: Vec<f64> = j.iter().zip(&kb).map(|(x, y)| x - y).collect();
            assert!(max_diff(&fa, &case.reals("Fa")) < 1e-11, "{name}");
            assert!(max_diff(&fb, &case.reals("Fb")) < 1e-11, "{name}");
        }
    }

    #[test]
    fn ubatch6_returns_the_integrals_and_adds() {
        let case = Case::load("hf_321g");
        let mut ctx = case.context();
        place(&mut ctx, "aoint", 4, &[11]);
        let fa0: Vec<f64> = (0..121).map(|x| x as f64).collect();
        let mut args = vec![
            ao_block("aoint", &[1, 1, 1, 1], &[11]),
            whole("da", case.reals("Da"), 11),
            whole("db", case.reals("Db"), 11),
            whole("fa", fa0.clone(), 11),
            whole("fb", vec![0.0; 121], 11),
        ];
        compute_ubatch6(&mut ctx, &mut args).expect("ubatch6");
        let mut batch = [ao_block("aoint", &[1, 1, 1, 1], &[11])];
        super::super::two_electron::compute_integral_batch(&mut ctx, &mut batch).expect("batch");
        assert_eq!(args[0].data, batch[0].data);
        // Fa was added to, not replaced.
        let fa: Vec<f64> = case
            .reals("Fa")
            .iter()
            .zip(&fa0)
            .map(|(f, x)| f + x)
            .collect();
        assert!(max_diff(&args[3].data, &fa) < 1e-11);
    }

    #[test]
    fn argument_errors() {
        let case = Case::load("water_321g");
        let mut ctx = case.context();
        place(&mut ctx, "aoint", 4, &[3, 6, 4]);
        let good = || {
            vec![
                ao_block("aoint", &[1, 1, 2, 3], &[3, 6, 4]),
                whole("da", vec![0.0; 169], 13),
                whole("db", vec![0.0; 169], 13),
                whole("fa", vec![0.0; 169], 13),
                whole("fb", vec![0.0; 169], 13),
            ]
        };
        compute_ubatch2(&mut ctx, &mut good()).expect("good");
        let mut args = good();
        args[3] = whole("fa", vec![0.0; 144], 12);
        let e = compute_ubatch2(&mut ctx, &mut args).expect_err("small Fock");
        assert_eq!(
            e,
            "argument 4 (fa) is 12 x 12: it must be the whole AO x AO matrix (13 x 13)"
        );
        let mut args = good();
        args[1] = Arg::scalar("d", 0.0);
        let e = compute_ubatch1(&mut ctx, &mut args).expect_err("scalar density");
        assert!(
            e.starts_with("argument 2 must be an array of rank 2"),
            "{e}"
        );
        let mut args = good();
        args[0] = ao_block("aoint", &[1, 1], &[3, 6, 4]);
        let e = compute_ubatch7(&mut ctx, &mut args).expect_err("rank 2 block");
        assert!(e.contains("must be a block of rank 4"), "{e}");
        let e = compute_ubatch8(&mut ctx, &mut good()[..4]).expect_err("4 args");
        assert!(e.starts_with("expects 5 arguments"), "{e}");
        let mut bare = Fake::new();
        let e = compute_ubatch4(&mut bare, &mut good()).expect_err("no setup");
        assert!(e.contains("nshells"), "{e}");
    }
}
