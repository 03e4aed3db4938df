//! Test helpers: deterministic random data and naive reference kernels.
//!
//! The references loop over every multi-index explicitly — slow, obviously correct, and
//! independent of the strides, tiling and GEMM tricks of the real kernels.

use crate::batched::{Blocks, Dim};
use crate::labels::Label;
use crate::shape::Shape;

/// Deterministic pseudo-random values in [-1, 1) (splitmix64), so failures reproduce.
pub fn random_vec(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// Calls `f` with every multi-index of `ext` (first index fastest).
pub fn for_each_index(ext: &[usize], mut f: impl FnMut(&[usize])) {
    if ext.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; ext.len()];
    loop {
        f(&idx);
        let mut d = 0;
        loop {
            if d == ext.len() {
                return;
            }
            idx[d] += 1;
            if idx[d] < ext[d] {
                break;
            }
            idx[d] = 0;
            d += 1;
        }
    }
}

fn offset(shape: &Shape, idx: &[usize]) -> usize {
    let mut off = 0;
    let mut stride = 1;
    for (&i, &e) in idx.iter().zip(shape.extents()) {
        off += i * stride;
        stride *= e;
    }
    off
}

/// `dst[i] = src[j]` with `j[perm[d]] = i[d]`.
pub fn naive_permute(src: &[f64], src_shape: &Shape, perm: &[usize]) -> Vec<f64> {
    let dst_ext: Vec<usize> = perm.iter().map(|&p| src_shape.extents()[p]).collect();
    let dst_shape = Shape::new(&dst_ext).unwrap_or_default();
    let mut dst = vec![0.0; dst_shape.len()];
    for_each_index(&dst_ext, |i| {
        let mut j = vec![0; i.len()];
        for (d, &p) in perm.iter().enumerate() {
            j[p] = i[d];
        }
        dst[offset(&dst_shape, i)] = src[offset(src_shape, &j)];
    });
    dst
}

/// `d = Σ l * r` over every label value combination (elements matched by label).
pub fn naive_contract(
    (dl, ds): (&[Label], &Shape),
    (l, ll, ls): (&[f64], &[Label], &Shape),
    (r, rl, rs): (&[f64], &[Label], &Shape),
) -> Vec<f64> {
    let mut labels: Vec<Label> = Vec::new();
    let mut ext: Vec<usize> = Vec::new();
    for (lab, sh) in [(dl, ds), (ll, ls), (rl, rs)] {
        for (x, &e) in lab.iter().zip(sh.extents()) {
            if !labels.contains(x) {
                labels.push(*x);
                ext.push(e);
            }
        }
    }
    let pos = |lab: &[Label], all: &[usize]| -> Vec<usize> {
        lab.iter()
            .map(|x| all[labels.iter().position(|y| y == x).unwrap_or(0)])
            .collect()
    };
    let mut d = vec![0.0; ds.len()];
    for_each_index(&ext, |all| {
        d[offset(ds, &pos(dl, all))] += l[offset(ls, &pos(ll, all))] * r[offset(rs, &pos(rl, all))];
    });
    d
}

/// Labels of (dst, left, right) and the extent of each label.
pub type ContractionPattern = (Vec<Label>, Vec<Label>, Vec<Label>, Vec<usize>);

/// A random contraction: each of at most 6 labels is free in left, free in right or
/// contracted, with an extent below `max_extent`, and each block lists its labels in a random
/// order (so no operand exceeds rank 6, and some patterns reach it).
pub fn contraction_pattern(
    max_extent: usize,
) -> impl proptest::strategy::Strategy<Value = ContractionPattern> {
    use proptest::prelude::*;
    proptest::collection::vec((0..3u8, 1..max_extent), 0..=6).prop_flat_map(|v| {
        let pick = |a: u8, b: u8| -> Vec<Label> {
            (0..v.len())
                .filter(|&i| v[i].0 == a || v[i].0 == b)
                .map(|i| i as Label)
                .collect()
        };
        (
            Just(pick(0, 1)).prop_shuffle(),
            Just(pick(0, 2)).prop_shuffle(),
            Just(pick(1, 2)).prop_shuffle(),
            Just(v.iter().map(|x| x.1).collect::<Vec<_>>()),
        )
    })
}

/// A contraction written with one letter per label (`"ai=cadm*dicm"`), each letter's extent
/// given by `ext`: the three blocks' labels and extents as the plans take them, random
/// operands and the naive result, for the tests of the contraction forms.
pub struct Letters {
    pub dst: Vec<Dim>,
    pub left: Vec<Dim>,
    pub right: Vec<Dim>,
}

impl Letters {
    pub fn new(pattern: &str, ext: &dyn Fn(char) -> usize) -> Letters {
        let dims =
            |labels: &str| -> Vec<Dim> { labels.chars().map(|c| (c as Label, ext(c))).collect() };
        let (d, lr) = pattern.split_once('=').unwrap_or_default();
        let (l, r) = lr.split_once('*').unwrap_or_default();
        Letters {
            dst: dims(d),
            left: dims(l),
            right: dims(r),
        }
    }

    pub fn blocks(&self) -> Blocks<'_> {
        Blocks {
            dst: &self.dst,
            left: &self.left,
            right: &self.right,
        }
    }

    /// The free labels of left, of right, and the summed labels.
    pub fn groups(&self) -> [Vec<Dim>; 3] {
        let only = |v: &[Dim], other: &[Dim]| -> Vec<Dim> {
            v.iter()
                .copied()
                .filter(|x| other.iter().any(|y| y.0 == x.0))
                .collect()
        };
        [
            only(&self.left, &self.dst),
            only(&self.right, &self.dst),
            only(&self.left, &self.right),
        ]
    }

    /// Random left and right blocks.
    pub fn operands(&self) -> (Vec<f64>, Vec<f64>) {
        (
            random_vec(len(&self.left), 1),
            random_vec(len(&self.right), 2),
        )
    }

    /// A random dst to start from.
    pub fn start(&self) -> Vec<f64> {
        random_vec(len(&self.dst), 3)
    }

    /// `beta * start + Σ left * right` by the naive loop.
    pub fn expected(&self, (l, r): (&[f64], &[f64]), start: &[f64], beta: f64) -> Vec<f64> {
        let shape = |v: &[Dim]| Shape::new(&v.iter().map(|x| x.1).collect::<Vec<_>>());
        let labels = |v: &[Dim]| v.iter().map(|x| x.0).collect::<Vec<_>>();
        let (ds, ls, rs) = match (shape(&self.dst), shape(&self.left), shape(&self.right)) {
            (Ok(d), Ok(l), Ok(r)) => (d, l, r),
            _ => panic!("test blocks of invalid extents"),
        };
        let sum = naive_contract(
            (&labels(&self.dst), &ds),
            (l, &labels(&self.left), &ls),
            (r, &labels(&self.right), &rs),
        );
        sum.iter().zip(start).map(|(s, d)| beta * d + s).collect()
    }
}

fn len(v: &[Dim]) -> usize {
    v.iter().map(|x| x.1).product()
}
