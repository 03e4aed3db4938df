//! Element-wise block operations (SIAL-SPEC §5.5.2, §5.5.4, §5.5.6).
//!
//! These work on flat buffers: when two SIAL block references carry the same index list in the
//! same order, their elements correspond one to one in memory, so no shape is needed — only the
//! lengths must agree. (When the orders differ the interpreter uses [`crate::permute`] instead.)
//! All loops are simple zips the compiler vectorises, compiled for each vector width the CPU
//! may have (chosen at run time) with the same arithmetic in every version (no fused
//! multiply-add): the same bits everywhere. Built for SSE2 alone, `a += b` on blocks in L1 or L2
//! ran at half the speed of the AVX-512 version (docs/benchmarks.md, "Element-wise block
//! operations for each vector width").

use crate::error::{KernelError, Role};
use crate::shape::check_len;

/// `dst[e] = v` for every element (`a[...] = s`).
pub fn fill(dst: &mut [f64], v: f64) {
    dst.fill(v);
}

/// `dst[e] *= v` (`a[...] *= s`).
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
pub fn scale(dst: &mut [f64], v: f64) {
    dst.iter_mut().for_each(|d| *d *= v);
}

/// `dst[e] += v` (`a[...] += s`; `-= s` is `add_scalar(dst, -s)`).
#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
pub fn add_scalar(dst: &mut [f64], v: f64) {
    dst.iter_mut().for_each(|d| *d += v);
}

/// `dst = src` (plain copy; also the copy between blocks whose ranks differ only by trailing
/// simple indices, whose sizes are equal).
pub fn copy(dst: &mut [f64], src: &[f64]) -> Result<(), KernelError> {
    check_len(Role::Src, dst.len(), src.len())?;
    dst.copy_from_slice(src);
    Ok(())
}

/// `dst = alpha * src` (`a = b * s`).
pub fn scale_copy(dst: &mut [f64], alpha: f64, src: &[f64]) -> Result<(), KernelError> {
    check_len(Role::Src, dst.len(), src.len())?;
    scaled(dst, alpha, src);
    Ok(())
}

#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn scaled(dst: &mut [f64], alpha: f64, src: &[f64]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d = alpha * s);
}

/// `dst += alpha * src` (`a += b`, `a -= b`, `a += b * s`).
pub fn axpy(dst: &mut [f64], alpha: f64, src: &[f64]) -> Result<(), KernelError> {
    check_len(Role::Src, dst.len(), src.len())?;
    add_scaled(dst, alpha, src);
    Ok(())
}

#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn add_scaled(dst: &mut [f64], alpha: f64, src: &[f64]) {
    dst.iter_mut().zip(src).for_each(|(d, &s)| *d += alpha * s);
}

/// `dst = l + r` (`a = b + c`, identical index lists).
pub fn add(dst: &mut [f64], l: &[f64], r: &[f64]) -> Result<(), KernelError> {
    check_lens(dst, l, r)?;
    sum(dst, l, r);
    Ok(())
}

/// `dst = l - r` (`a = b - c`, identical index lists).
pub fn sub(dst: &mut [f64], l: &[f64], r: &[f64]) -> Result<(), KernelError> {
    check_lens(dst, l, r)?;
    difference(dst, l, r);
    Ok(())
}

fn check_lens(dst: &[f64], l: &[f64], r: &[f64]) -> Result<(), KernelError> {
    check_len(Role::Left, dst.len(), l.len())?;
    check_len(Role::Right, dst.len(), r.len())
}

#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn sum(dst: &mut [f64], l: &[f64], r: &[f64]) {
    dst.iter_mut()
        .zip(l.iter().zip(r))
        .for_each(|(d, (&a, &b))| *d = a + b);
}

#[multiversion::multiversion(targets("x86_64+avx512f", "x86_64+avx2"))]
fn difference(dst: &mut [f64], l: &[f64], r: &[f64]) {
    dst.iter_mut()
        .zip(l.iter().zip(r))
        .for_each(|(d, (&a, &b))| *d = a - b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::random_vec;

    /// Lengths that leave every tail of a vector loop of 2, 4 or 8 lanes, unrolled: the
    /// version this CPU runs gives the naive loop's bits.
    const LENS: [usize; 9] = [0, 1, 2, 7, 37, 64, 127, 1001, 2025];

    #[test]
    fn scalar_ops_match_naive() {
        for (seed, &n) in LENS.iter().enumerate() {
            let x = random_vec(n, seed as u64);
            let mut d = x.clone();
            fill(&mut d, 2.5);
            assert!(d.iter().all(|&v| v == 2.5));
            let mut d = x.clone();
            scale(&mut d, -3.0);
            for (a, b) in d.iter().zip(&x) {
                assert_eq!(*a, -3.0 * b);
            }
            let mut d = x.clone();
            add_scalar(&mut d, 0.25);
            for (a, b) in d.iter().zip(&x) {
                assert_eq!(*a, b + 0.25);
            }
        }
    }

    #[test]
    fn block_ops_match_naive() -> Result<(), KernelError> {
        for (seed, &n) in LENS.iter().enumerate() {
            let l = random_vec(n, 10 + seed as u64);
            let r = random_vec(n, 20 + seed as u64);
            let d0 = random_vec(n, 30 + seed as u64);

            let mut d = d0.clone();
            copy(&mut d, &l)?;
            assert_eq!(d, l);

            let mut d = d0.clone();
            scale_copy(&mut d, 1.5, &l)?;
            for i in 0..n {
                assert_eq!(d[i], 1.5 * l[i]);
            }

            let mut d = d0.clone();
            axpy(&mut d, -0.5, &l)?;
            for i in 0..n {
                assert_eq!(d[i], d0[i] + -0.5 * l[i]);
            }

            let mut d = d0.clone();
            add(&mut d, &l, &r)?;
            for i in 0..n {
                assert_eq!(d[i], l[i] + r[i]);
            }

            let mut d = d0.clone();
            sub(&mut d, &l, &r)?;
            for i in 0..n {
                assert_eq!(d[i], l[i] - r[i]);
            }
        }
        Ok(())
    }

    #[test]
    fn length_mismatch_is_an_error() {
        let mut d = vec![0.0; 4];
        let short = vec![1.0; 3];
        let ok = vec![1.0; 4];
        let err = KernelError::LengthMismatch {
            role: Role::Src,
            expected: 4,
            actual: 3,
        };
        assert_eq!(copy(&mut d, &short), Err(err.clone()));
        assert_eq!(scale_copy(&mut d, 2.0, &short), Err(err.clone()));
        assert_eq!(axpy(&mut d, 2.0, &short), Err(err));
        assert!(matches!(
            add(&mut d, &short, &ok),
            Err(KernelError::LengthMismatch {
                role: Role::Left,
                ..
            })
        ));
        assert!(matches!(
            sub(&mut d, &ok, &short),
            Err(KernelError::LengthMismatch {
                role: Role::Right,
                ..
            })
        ));
        // Nothing was written on error.
        assert_eq!(d, vec![0.0; 4]);
    }
}
