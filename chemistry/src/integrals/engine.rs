//! Shell-pair and shell-quartet integral batches in ACES4's layout, from the `integral` crate.
//!
//! A batch covers all AOs of the shells involved, column-major (first shell's AO fastest), with
//! each shell's AOs in ACES4's order (contracted function slow, component fast). The crate
//! works on Cartesian shells with x^l-type normalisation and row-major blocks; the batch is
//! assembled from one crate block per combination of contracted functions, transformed to
//! ACES4's functions with the shells' matrices and scattered into place.

use rustc_hash::FxHashMap;
use sial_superinstructions::{Shape, permute};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use integral::engine::os::{self, Prim};

use super::basis::{BasisSet, Shell};
use super::node::{self, NodeBlocks, Ready, fingerprint};

/// A one-electron operator.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OneElectron<'a> {
    Overlap,
    /// −½∇².
    Kinetic,
    /// Σ_C −Z_C / |r − C| over the given point charges.
    Nuclear(&'a [([f64; 3], f64)]),
    /// x, y and z about the coordinate origin: three batches.
    Dipole,
}

impl OneElectron<'_> {
    /// Number of batches the operator produces.
    fn outputs(&self) -> usize {
        match self {
            OneElectron::Dipole => 3,
            _ => 1,
        }
    }

    /// Adds `scale` times the primitive-pair integrals to the row-major Cartesian blocks.
    fn accumulate(&self, a: Prim, b: Prim, scale: f64, out: &mut [Vec<f64>]) {
        match (self, out) {
            (OneElectron::Overlap, [o]) => os::overlap_into(a, b, scale, o),
            (OneElectron::Kinetic, [o]) => os::kinetic_into(a, b, scale, o),
            (OneElectron::Nuclear(charges), [o]) => os::nuclear_into(a, b, charges, scale, o),
            (OneElectron::Dipole, [x, y, z]) => {
                os::dipole_into(a, b, [0.0; 3], scale, x, y, z);
            }
            _ => {}
        }
    }
}

/// The primitives of a crate shell with their effective coefficients (contraction coefficient
/// times the crate's x^l normalisation).
fn primitives(s: &integral::Shell) -> impl Iterator<Item = (Prim, f64)> + '_ {
    (0..s.n_prim()).map(move |i| {
        (
            Prim::new(s.exponents()[i], s.center(), s.l()),
            s.primitive_coeff(i),
        )
    })
}

/// The batch(es) ⟨m|op|n⟩ of shells `m` and `n`: one column-major `m.len()` × `n.len()` matrix
/// per output of `op`.
pub(crate) fn pair(basis: &BasisSet, op: OneElectron<'_>, m: &Shell, n: &Shell) -> Vec<Vec<f64>> {
    let (rows, cols) = (m.len(), n.len());
    let mut out = vec![vec![0.0; rows * cols]; op.outputs()];
    let (nm, nn) = (m.n_cart(), n.n_cart());
    for (km, sm) in basis.subshells(m).iter().enumerate() {
        for (kn, sn) in basis.subshells(n).iter().enumerate() {
            let mut cart = vec![vec![0.0; nm * nn]; op.outputs()];
            for (a, ca) in primitives(sm) {
                for (b, cb) in primitives(sn) {
                    op.accumulate(a, b, ca * cb, &mut cart);
                }
            }
            for (o, block) in out.iter_mut().zip(cart) {
                let f = transform(block, &[nm, nn], &[m, n]);
                for i in 0..m.components {
                    for j in 0..n.components {
                        let row = km * m.components + i;
                        let col = kn * n.components + j;
                        o[row + rows * col] = f[i * n.components + j];
                    }
                }
            }
        }
    }
    out
}

/// The electron-repulsion batch (ab|cd) of the shell quartet `q` into `out` (resized to fit):
/// element (a, b, c, d), with a, b, c, d the AOs of the four shells counted from each shell's
/// first, is `out[a + na·(b + nb·(c + nc·d))]`.
pub(crate) fn quartet(basis: &BasisSet, q: [&Shell; 4], out: &mut Vec<f64>) {
    let len = [q[0].len(), q[1].len(), q[2].len(), q[3].len()];
    out.clear();
    out.resize(len.iter().product(), 0.0);
    let cart = q.map(Shell::n_cart);
    let comps = q.map(|s| s.components);
    for k0 in 0..q[0].contractions {
        for k1 in 0..q[1].contractions {
            for k2 in 0..q[2].contractions {
                for k3 in 0..q[3].contractions {
                    let block = basis.engine.eri_block(
                        q[0].sub + k0,
                        q[1].sub + k1,
                        q[2].sub + k2,
                        q[3].sub + k3,
                    );
                    debug_assert_eq!(block.len(), cart.iter().product::<usize>());
                    let f = transform(block, &cart, &q);
                    let first = [k0 * comps[0], k1 * comps[1], k2 * comps[2], k3 * comps[3]];
                    scatter4(&f, comps, first, len, out);
                }
            }
        }
    }
}

/// Blocks of electron-repulsion integrals kept between calls. SCF and CC programs compute the
/// same AO blocks in every iteration, and a block of spans (AB|CD) holds the same integrals as
/// the blocks of (BA|CD), (CD|AB), … in another order; so each block is kept once, under the
/// canonical ordering of its spans ([`canonical`]), and served to any of its 8 orderings: in
/// place in the kept order, permuted otherwise (a copy, a fraction of computing it). Up to a
/// budget of memory per process ([`set_budget`]; 0 turns the cache off) the blocks first met
/// are kept, and every other one is computed when needed: beyond the budget the integrals stay
/// direct, never all n⁴.
///
/// A block's contents are a function of its spans alone, whichever ordering was computed and
/// kept first: the batches it is assembled from hold the same value for every ordering of
/// the same four AOs ([`symmetrize`]). So a block served from the cache equals, bit for bit,
/// the block computed afresh, and results do not depend on which worker computed what first.
///
/// The workers of a process (threads) and the programs of a job share one cache per basis
/// set ([`QuartetCache::for_basis`]): SCF, transformation and CCSD compute the same integrals,
/// and a block one worker computed serves the others. Under mpirun the ranks of a node can
/// share one table of blocks as well ([`share_among_processes`]); then each process keeps
/// nothing of its own.
#[derive(Debug)]
pub(crate) struct QuartetCache {
    store: Store,
}

#[derive(Debug)]
enum Store {
    /// This process's blocks, up to a budget.
    Process { kept: RwLock<Blocks>, budget: usize },
    /// The node's table, under this basis set's fingerprint.
    Node { table: Arc<NodeBlocks>, basis: u64 },
}

/// The blocks of a process's [`QuartetCache`] and their size.
#[derive(Debug, Default)]
struct Blocks {
    /// Whole blocks in the canonical ordering of their spans, by that ordering; shared with the
    /// calls that read them in place.
    map: FxHashMap<SpanQuartet, Arc<[f64]>>,
    bytes: usize,
}

/// Where a block lies among the AOs: each dimension's first AO and extent.
pub(crate) type SpanQuartet = [(usize, usize); 4];

/// The integral cache's budget per process in bytes, until [`set_budget`] is called.
pub const DEFAULT_BUDGET: usize = 64 << 20;

static BUDGET: AtomicUsize = AtomicUsize::new(DEFAULT_BUDGET);

/// Sets the memory the process may keep integral blocks in (the caches made from now on).
pub fn set_budget(bytes: usize) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// The cache of the latest basis set built in the process, with the basis set's description.
type Shared = Option<(String, Arc<QuartetCache>)>;

static SHARED: Mutex<Shared> = Mutex::new(None);

/// The table of blocks the processes of this node share, once [`share_among_processes`] is
/// called.
static NODE: Mutex<Option<Arc<NodeBlocks>>> = Mutex::new(None);

/// Makes the caches made from now on keep their blocks in the table in `file`, which the other
/// processes of the node map as well (opened for reading and writing; zeros when new; its
/// length bounds the memory of all the blocks it holds).
pub fn share_among_processes(file: std::fs::File) -> std::io::Result<()> {
    let table = Arc::new(NodeBlocks::map(file)?);
    if let Ok(mut node) = NODE.lock() {
        *node = Some(table);
    }
    Ok(())
}

impl Default for QuartetCache {
    fn default() -> QuartetCache {
        QuartetCache::with_budget(BUDGET.load(Ordering::Relaxed))
    }
}

/// A block's elements in the cache: this process's copy, or the node's.
#[derive(Debug)]
pub(crate) enum Held {
    Process(Arc<[f64]>),
    Node(Arc<NodeBlocks>, Ready),
}

impl std::ops::Deref for Held {
    type Target = [f64];

    fn deref(&self) -> &[f64] {
        match self {
            Held::Process(data) => data,
            Held::Node(table, ready) => table.read(*ready),
        }
    }
}

/// A block served from the cache: the kept block and the permutation that turns it into the
/// asked ordering (`perm[d]`: the kept dimension that is dimension d of the asked block).
pub(crate) struct Kept {
    pub(crate) data: Held,
    pub(crate) shape: [usize; 4],
    pub(crate) perm: [usize; 4],
}

impl Kept {
    /// Whether the kept block is already in the asked ordering (then it can be read in place).
    pub(crate) fn in_order(&self) -> bool {
        self.perm == [0, 1, 2, 3]
    }

    /// Writes the block in the asked ordering into `dst` (of the asked block's size).
    pub(crate) fn copy_to(&self, dst: &mut [f64]) {
        if self.in_order() {
            dst.copy_from_slice(&self.data);
        } else {
            permute4(dst, &self.data, self.shape, self.perm);
        }
    }
}

impl QuartetCache {
    pub(crate) fn with_budget(budget: usize) -> QuartetCache {
        QuartetCache {
            store: Store::Process {
                kept: RwLock::default(),
                budget,
            },
        }
    }

    /// The process's cache for the basis set described by `basis` (its shells, nuclei and
    /// form, as text): the one the workers and earlier programs of the job use, if it is for
    /// the same basis set and budget (or node table), else a new one, which replaces it.
    pub(crate) fn for_basis(basis: String) -> Arc<QuartetCache> {
        let node = NODE.lock().ok().and_then(|n| n.clone());
        let Ok(mut shared) = SHARED.lock() else {
            return Arc::default();
        };
        let budget = BUDGET.load(Ordering::Relaxed);
        let same = |cache: &QuartetCache| match (&cache.store, &node) {
            (Store::Process { budget: b, .. }, None) => *b == budget,
            (Store::Node { table, .. }, Some(node)) => Arc::ptr_eq(table, node),
            _ => false,
        };
        match &*shared {
            Some((b, cache)) if *b == basis && same(cache) => Arc::clone(cache),
            _ => {
                let cache = Arc::new(match node {
                    Some(table) => QuartetCache {
                        store: Store::Node {
                            table,
                            basis: fingerprint(&basis),
                        },
                    },
                    None => QuartetCache::with_budget(budget),
                });
                *shared = Some((basis, Arc::clone(&cache)));
                cache
            }
        }
    }

    /// The block of integrals of `spans`, in any of its orderings, if kept.
    pub(crate) fn block(&self, spans: &SpanQuartet) -> Option<Kept> {
        let (key, from) = canonical(*spans);
        let data = match &self.store {
            Store::Process { kept, .. } => {
                Held::Process(Arc::clone(kept.read().ok()?.map.get(&key)?))
            }
            Store::Node { table, basis } => {
                Held::Node(Arc::clone(table), table.get(&node::key(*basis, &key)?)?)
            }
        };
        Some(Kept {
            data,
            shape: key.map(|(_, extent)| extent),
            perm: from,
        })
    }

    /// Keeps a copy of the block of integrals `data` of `spans` (in its canonical ordering),
    /// if no ordering of it is kept and there is room.
    pub(crate) fn keep_block(&self, spans: &SpanQuartet, data: &[f64]) {
        let (key, from) = canonical(*spans);
        let bytes = data.len() * 8;
        match &self.store {
            Store::Process { kept, budget } => {
                let fits = |b: &Blocks| !b.map.contains_key(&key) && b.bytes + bytes <= *budget;
                if !kept.read().is_ok_and(|b| fits(&b)) {
                    return;
                }
                // Permuted outside the lock; another worker may keep the same block meanwhile,
                // with the same contents.
                let block: Arc<[f64]> = in_canonical_order(spans, from, data).into();
                if let Ok(mut kept) = kept.write()
                    && fits(&kept)
                {
                    kept.bytes += bytes;
                    kept.map.insert(key, block);
                }
            }
            Store::Node { table, basis } => {
                let Some(key) = node::key(*basis, &key) else {
                    return;
                };
                // Another process may have kept it since it was looked for.
                if table.get(&key).is_none() {
                    table.insert(&key, &in_canonical_order(spans, from, data));
                }
            }
        }
    }
}

/// The block `data` of `spans` in the canonical ordering of its spans, `from` being where
/// [`canonical`] puts each of its dimensions.
fn in_canonical_order<'a>(
    spans: &SpanQuartet,
    from: [usize; 4],
    data: &'a [f64],
) -> std::borrow::Cow<'a, [f64]> {
    if from == [0, 1, 2, 3] {
        return data.into();
    }
    let mut out = vec![0.0; data.len()];
    // Dimension j of the canonical block is dimension order[j] of the computed one.
    permute4(
        &mut out,
        data,
        spans.map(|(_, extent)| extent),
        inverse(from),
    );
    out.into()
}

/// Shell quartets, each distinct one computed once: (mn|rs), (nm|rs), (mn|sr), (rs|mn), … are
/// the same integrals, so the batch of the canonical ordering is computed and permuted into
/// place. Within one call every canonical batch is kept (a block whose dimensions share shells
/// meets each up to 8 times).
pub(crate) struct Quartets<'a> {
    basis: &'a BasisSet,
    call: FxHashMap<[usize; 4], Vec<f64>>,
}

impl<'a> Quartets<'a> {
    /// A source of batches for quartets of shells of `basis`.
    pub(crate) fn new(basis: &'a BasisSet) -> Quartets<'a> {
        Quartets {
            basis,
            call: FxHashMap::default(),
        }
    }

    /// The batch of canonical quartet `canonical`, computed at most once per call.
    fn canonical_batch(&mut self, canonical: [usize; 4]) -> &[f64] {
        let basis = self.basis;
        self.call.entry(canonical).or_insert_with(|| {
            let shells = canonical.map(|s| &basis.shells[s]);
            let mut batch = Vec::new();
            quartet(basis, shells, &mut batch);
            symmetrize(canonical, shells.map(Shell::len), &mut batch);
            batch
        })
    }

    /// Writes the batch of shells `q` (indices into the basis) into `dst`: element (a, b, c, d)
    /// of the quartet, counted from each shell's first AO, at `at + a + strides[0]·b +
    /// strides[1]·c + strides[2]·d`. Rows over `a` are copied whole where the canonical batch
    /// has them contiguous.
    pub(crate) fn write(&mut self, q: [usize; 4], dst: &mut [f64], at: usize, strides: [usize; 3]) {
        let (canonical, from) = canonical(q);
        let basis = self.basis;
        let len = q.map(|s| basis.shells[s].len());
        let clen = canonical.map(|s| basis.shells[s].len());
        let source = self.canonical_batch(canonical);
        let cstride = [1, clen[0], clen[0] * clen[1], clen[0] * clen[1] * clen[2]];
        let stride = from.map(|axis| cstride[axis]);
        for d in 0..len[3] {
            for c in 0..len[2] {
                for b in 0..len[1] {
                    let base = b * stride[1] + c * stride[2] + d * stride[3];
                    let o = at + b * strides[0] + c * strides[1] + d * strides[2];
                    let row = &mut dst[o..o + len[0]];
                    if stride[0] == 1 {
                        row.copy_from_slice(&source[base..base + len[0]]);
                    } else {
                        for (a, x) in row.iter_mut().enumerate() {
                            *x = source[base + a * stride[0]];
                        }
                    }
                }
            }
        }
    }
}

/// `dst[i0,i1,i2,i3] = src[j]` with `j[perm[d]] = i_d`, for a column-major `src` of extents
/// `extents` and a `dst` of the same size.
fn permute4(dst: &mut [f64], src: &[f64], extents: [usize; 4], perm: [usize; 4]) {
    // The shapes and the permutation are right by construction (they come from the spans), so
    // the kernel's checks cannot fail here.
    let (Ok(from), Ok(to)) = (Shape::new(&extents), Shape::new(&perm.map(|d| extents[d]))) else {
        debug_assert!(false, "block extents {extents:?}");
        return;
    };
    let done = permute(dst, &to, src, &from, &perm);
    debug_assert!(done.is_ok(), "{done:?}");
}

/// Gives every element of the batch of canonical quartet `q` (element (a, b, c, d) at
/// `a + l0·(b + l1·(c + l2·d))`, `lens` the shells' lengths) the value of the element that
/// stands for the same four AOs in the first ordering: where shells coincide, (ab|cd),
/// (ba|cd), (ab|dc) and (cd|ab) are one integral, which the engine computes more than once,
/// equal only to rounding. Then every ordering of a block reads the same values.
fn symmetrize(q: [usize; 4], lens: [usize; 4], batch: &mut [f64]) {
    let (bra, ket, pairs) = (q[0] == q[1], q[2] == q[3], (q[0], q[1]) == (q[2], q[3]));
    if !(bra || ket || pairs) {
        return;
    }
    let at = |[a, b, c, d]: [usize; 4]| a + lens[0] * (b + lens[1] * (c + lens[2] * d));
    for d in 0..lens[3] {
        for c in 0..lens[2] {
            for b in 0..lens[1] {
                for a in 0..lens[0] {
                    let (mut x, mut y) = ((a, b), (c, d));
                    if bra && x.0 < x.1 {
                        x = (x.1, x.0);
                    }
                    if ket && y.0 < y.1 {
                        y = (y.1, y.0);
                    }
                    if pairs && x < y {
                        (x, y) = (y, x);
                    }
                    let first = at([x.0, x.1, y.0, y.1]);
                    let here = at([a, b, c, d]);
                    if first != here {
                        batch[here] = batch[first];
                    }
                }
            }
        }
    }
}

/// The canonical ordering of a shell quartet under the 8 permutational symmetries (bra shells
/// descending, ket shells descending, bra ≥ ket) and, for each position of `q`, the position
/// of the same shell in the canonical quartet.
fn canonical<T: Copy + Ord>(q: [T; 4]) -> ([T; 4], [usize; 4]) {
    let bra = if q[0] >= q[1] { [0, 1] } else { [1, 0] };
    let ket = if q[2] >= q[3] { [2, 3] } else { [3, 2] };
    let key = |p: [usize; 2]| (q[p[0]], q[p[1]]);
    let (first, second) = if key(bra) >= key(ket) {
        (bra, ket)
    } else {
        (ket, bra)
    };
    let order = [first[0], first[1], second[0], second[1]];
    (order.map(|i| q[i]), inverse(order))
}

/// The permutation that undoes `p` (`inverse(p)[p[i]] = i`).
fn inverse(p: [usize; 4]) -> [usize; 4] {
    let mut inv = [0; 4];
    for (i, &j) in p.iter().enumerate() {
        inv[j] = i;
    }
    inv
}

/// Puts the row-major function block `f` (dims `comps`) into the column-major quartet batch
/// `out` (dims `len`) starting at AO `first` of each shell.
fn scatter4(f: &[f64], comps: [usize; 4], first: [usize; 4], len: [usize; 4], out: &mut [f64]) {
    let mut p = 0;
    for a in 0..comps[0] {
        for b in 0..comps[1] {
            for c in 0..comps[2] {
                let base = (first[0] + a)
                    + len[0] * ((first[1] + b) + len[1] * (first[2] + c + len[2] * first[3]));
                let stride = len[0] * len[1] * len[2];
                for d in 0..comps[3] {
                    out[base + stride * d] = f[p];
                    p += 1;
                }
            }
        }
    }
}

/// Applies each shell's transform to its axis of the row-major block `block` (dims `dims`, the
/// shells' Cartesian component counts) and returns the row-major block over ACES4's functions.
fn transform(mut block: Vec<f64>, dims: &[usize], shells: &[&Shell]) -> Vec<f64> {
    let mut dims = dims.to_vec();
    for (axis, shell) in shells.iter().enumerate() {
        if let Some(t) = &shell.transform {
            block = transform_axis(&block, &dims, axis, t, shell.components);
            dims[axis] = shell.components;
        }
    }
    block
}

/// `out[.., p, ..] = Σ_k t[p, k] · block[.., k, ..]` along `axis` of a row-major array; `t` is
/// row-major `rows` × `dims[axis]`.
fn transform_axis(block: &[f64], dims: &[usize], axis: usize, t: &[f64], rows: usize) -> Vec<f64> {
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let n = dims[axis];
    let mut out = vec![0.0; outer * rows * inner];
    for o in 0..outer {
        for p in 0..rows {
            let dst = &mut out[(o * rows + p) * inner..(o * rows + p + 1) * inner];
            for k in 0..n {
                let c = t[p * n + k];
                if c == 0.0 {
                    continue;
                }
                let src = &block[(o * n + k) * inner..(o * n + k + 1) * inner];
                for (d, s) in dst.iter_mut().zip(src) {
                    *d += c * s;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::node::TempFile;
    use super::super::testdata::{Case, max_diff};
    use super::*;

    /// Whole matrices of an operator, shell pair by shell pair (column-major).
    fn matrix(basis: &BasisSet, op: OneElectron<'_>, output: usize) -> Vec<f64> {
        let n = basis.nao;
        let mut full = vec![0.0; n * n];
        for m in &basis.shells {
            for s in &basis.shells {
                let b = &pair(basis, op, m, s)[output];
                for j in 0..s.len() {
                    for i in 0..m.len() {
                        full[m.first + i + n * (s.first + j)] = b[i + m.len() * j];
                    }
                }
            }
        }
        full
    }

    #[test]
    fn one_electron_matrices_match_pyscf() {
        for name in [
            "hf_321g",
            "water_321g",
            "ne_ccpvdz",
            "synthetic_spherical",
            "synthetic_cartesian",
        ] {
            let case = Case::load(name);
            let basis = BasisSet::from_setup(&case.context()).expect("basis");
            let charges = basis.nuclei.point_charges();
            let s = matrix(&basis, OneElectron::Overlap, 0);
            assert!(max_diff(&s, &case.reals("S")) < 1e-13, "{name} S");
            let t = matrix(&basis, OneElectron::Kinetic, 0);
            let v = matrix(&basis, OneElectron::Nuclear(&charges), 0);
            let h: Vec<f64> = t.iter().zip(&v).map(|(a, b)| a + b).collect();
            let e = max_diff(&h, &case.reals("H"));
            assert!(e < 1e-11, "{name} H off by {e}");
            for (k, d) in ["DX", "DY", "DZ"].iter().enumerate() {
                let m = matrix(&basis, OneElectron::Dipole, k);
                assert!(max_diff(&m, &case.reals(d)) < 1e-13, "{name} {d}");
            }
        }
    }

    /// The batch of `q` as [`quartet`] lays it out, written by `source`.
    fn dense(source: &mut Quartets<'_>, basis: &BasisSet, q: [usize; 4], out: &mut Vec<f64>) {
        let l = q.map(|s| basis.shells[s].len());
        out.clear();
        out.resize(l.iter().product(), f64::NAN);
        source.write(q, out, 0, [l[0], l[0] * l[1], l[0] * l[1] * l[2]]);
    }

    #[test]
    fn workers_and_programs_share_the_cache_of_one_basis() {
        // Other tests build other basis sets in parallel, which replace the process's cache:
        // these descriptions are this test's own, and the checks hold whoever came between.
        let a = QuartetCache::for_basis("sharing test A".into());
        a.keep_block(&[(0, 1); 4], &[1.0]);
        let again = QuartetCache::for_basis("sharing test A".into());
        if Arc::ptr_eq(&a, &again) {
            assert!(again.block(&[(0, 1); 4]).is_some());
        }
        let b = QuartetCache::for_basis("sharing test B".into());
        assert!(!Arc::ptr_eq(&a, &b), "another basis gets another cache");
        assert!(b.block(&[(0, 1); 4]).is_none());
    }

    /// The 8 orderings of a quartet of positions under the permutational symmetry.
    const ORDERINGS: [[usize; 4]; 8] = [
        [0, 1, 2, 3],
        [1, 0, 2, 3],
        [0, 1, 3, 2],
        [1, 0, 3, 2],
        [2, 3, 0, 1],
        [3, 2, 0, 1],
        [2, 3, 1, 0],
        [3, 2, 1, 0],
    ];

    #[test]
    fn every_ordering_of_a_quartet_reads_the_same_values() {
        let case = Case::load("synthetic_spherical");
        let basis = BasisSet::from_setup(&case.context()).expect("basis");
        assert_eq!(canonical([1, 3, 2, 0]), ([3, 1, 2, 0], [1, 0, 2, 3]));
        assert_eq!(canonical([0, 2, 3, 1]), ([3, 1, 2, 0], [3, 2, 0, 1]));
        assert_eq!(canonical([3, 1, 2, 0]), ([3, 1, 2, 0], [0, 1, 2, 3]));
        let all = 0..basis.shells.len();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        // Quartets with coinciding shells (computed more than once per integral) and without.
        for q in [
            [4, 2, 1, 2],
            [2, 2, 2, 2],
            [2, 1, 2, 1],
            [3, 3, 1, 0],
            [0, 2, 2, 4],
        ] {
            assert!(q.iter().all(|s| all.contains(s)));
            dense(&mut Quartets::new(&basis), &basis, q, &mut want);
            quartet(&basis, q.map(|s| &basis.shells[s]), &mut got);
            assert!(max_diff(&got, &want) < 1e-13, "{q:?} against the engine");
            let l = q.map(|s| basis.shells[s].len());
            for order in ORDERINGS {
                let p = order.map(|d| q[d]);
                dense(&mut Quartets::new(&basis), &basis, p, &mut got);
                let mut back = vec![0.0; got.len()];
                // Element (a, b, c, d) of q is the element of p at the same AOs.
                permute4(&mut back, &got, order.map(|d| l[d]), inverse(order));
                assert_eq!(back, want, "{q:?} read as {p:?}");
            }
        }
    }

    /// How many blocks `cache` keeps.
    fn kept(cache: &QuartetCache) -> usize {
        match &cache.store {
            Store::Process { kept, .. } => kept.read().map(|k| k.map.len()).unwrap_or(0),
            Store::Node { table, .. } => table.ready(),
        }
    }

    #[test]
    fn a_kept_block_serves_every_ordering_of_its_spans() {
        let file = TempFile::new("orderings", 1 << 20);
        let caches = [
            QuartetCache::with_budget(1 << 30),
            QuartetCache {
                store: Store::Node {
                    table: Arc::new(file.open()),
                    basis: 3,
                },
            },
        ];
        for cache in caches {
            serves_every_ordering(cache);
        }
        // Without room nothing is kept.
        let case = Case::load("synthetic_spherical");
        let basis = BasisSet::from_setup(&case.context()).expect("basis");
        let span = |s: usize| (basis.shells[s].first, basis.shells[s].len());
        let spans: SpanQuartet = [span(1), span(3), span(3), span(2)];
        let none = QuartetCache::with_budget(8);
        none.keep_block(&spans, &vec![1.0; spans.iter().map(|s| s.1).product()]);
        assert!(none.block(&spans).is_none());
    }

    #[test]
    fn processes_sharing_a_node_table_serve_each_other_s_blocks() {
        let file = TempFile::new("processes", 1 << 20);
        let [a, b] = [0, 1].map(|_| QuartetCache {
            store: Store::Node {
                table: Arc::new(file.open()),
                basis: 9,
            },
        });
        let spans: SpanQuartet = [(0, 2), (2, 3), (0, 2), (5, 1)];
        let data: Vec<f64> = (0..12).map(f64::from).collect();
        assert!(b.block(&spans).is_none());
        a.keep_block(&spans, &data);
        let kept = b.block(&spans).expect("kept by the other process");
        let mut got = vec![0.0; 12];
        kept.copy_to(&mut got);
        assert_eq!(got, data);
        // Another basis set in the same table does not see it.
        let other = QuartetCache {
            store: Store::Node {
                table: Arc::new(file.open()),
                basis: 10,
            },
        };
        assert!(other.block(&spans).is_none());
    }

    fn serves_every_ordering(cache: QuartetCache) {
        let case = Case::load("synthetic_spherical");
        let basis = BasisSet::from_setup(&case.context()).expect("basis");
        let basis = BasisSet {
            cache: Arc::new(cache),
            ..basis
        };
        // Spans of whole shells: (first AO, extent).
        let span = |s: usize| (basis.shells[s].first, basis.shells[s].len());
        let spans: SpanQuartet = [span(1), span(3), span(3), span(2)];
        let block = |spans: SpanQuartet| {
            let shells = spans.map(|(first, _)| {
                basis
                    .shells
                    .iter()
                    .position(|s| s.first == first)
                    .expect("shell")
            });
            let mut out = Vec::new();
            dense(&mut Quartets::new(&basis), &basis, shells, &mut out);
            out
        };
        let count = || kept(&basis.cache);
        assert!(basis.cache.block(&spans).is_none());
        basis.cache.keep_block(&spans, &block(spans));
        assert_eq!(count(), 1);
        for order in ORDERINGS {
            let asked = order.map(|d| spans[d]);
            let kept = basis.cache.block(&asked).expect("kept");
            let mut got = vec![f64::NAN; kept.data.len()];
            kept.copy_to(&mut got);
            assert_eq!(got, block(asked), "{asked:?}");
            // Keeping another ordering adds nothing.
            basis.cache.keep_block(&asked, &got);
            assert_eq!(count(), 1);
        }
    }

    #[test]
    fn eri_samples_match_pyscf() {
        for name in [
            "hf_321g",
            "water_321g",
            "ne_ccpvdz",
            "synthetic_spherical",
            "synthetic_cartesian",
        ] {
            let case = Case::load(name);
            let basis = BasisSet::from_setup(&case.context()).expect("basis");
            let shell_of = |ao: usize| {
                basis
                    .shells
                    .iter()
                    .find(|s| s.first <= ao && ao < s.end())
                    .expect("shell")
            };
            let mut batches = std::collections::HashMap::new();
            let mut worst: f64 = 0.0;
            for (ijkl, want) in case.eri_samples() {
                let q = ijkl.map(shell_of);
                let batch = batches.entry(q.map(|s| s.first)).or_insert_with(|| {
                    let mut batch = Vec::new();
                    quartet(&basis, q, &mut batch);
                    batch
                });
                let l = q.map(Shell::len);
                let x = ijkl[0] - q[0].first
                    + l[0]
                        * (ijkl[1] - q[1].first
                            + l[1] * (ijkl[2] - q[2].first + l[2] * (ijkl[3] - q[3].first)));
                worst = worst.max((batch[x] - want).abs());
            }
            assert!(worst < 1e-12, "{name}: ERIs off by {worst}");
        }
    }
}
