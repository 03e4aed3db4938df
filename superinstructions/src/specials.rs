//! Numeric cores of the general-purpose super instructions of SIAL-SPEC §8.4.
//!
//! Only the block arithmetic lives here; argument checking against SIAL ranks (`ierr`),
//! printing and files belong to the interpreter's special-instruction registry.

use crate::error::{KernelError, Role};
use crate::shape::check_len;

/// `fill_block_sequential`: `start, start+1, start+2, …` in memory order.
///
/// ACES4 counts in single precision (a Fortran REAL) and stores the counter as a double; we do
/// the same so that results (e.g. for a non-integral start, or past 2²⁴) compare bit for bit.
pub fn fill_sequential(dst: &mut [f64], start: f64) {
    // Deliberate narrowing: this is the single-precision counter of the reference.
    let mut v = start as f32;
    for d in dst {
        *d = f64::from(v);
        v += 1.0;
    }
}

/// `fill_block_cyclic`: like [`fill_sequential`] but after the counter passes 20 it restarts
/// at 1 (`v, v+1, …, 20, 1, 2, …`), also counting in single precision.
pub fn fill_cyclic(dst: &mut [f64], start: f64) {
    let mut v = start as f32;
    for d in dst {
        *d = f64::from(v);
        v += 1.0;
        if v > 20.0 {
            v = 1.0;
        }
    }
}

/// `swap_blocks`: exchanges the contents of two equally sized blocks (ACES4 sets `ierr = 1`
/// when the sizes differ; here that is a [`KernelError::LengthMismatch`]).
pub fn swap_blocks(a: &mut [f64], b: &mut [f64]) -> Result<(), KernelError> {
    check_len(Role::Right, a.len(), b.len())?;
    a.swap_with_slice(b);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_counts_in_single_precision() {
        let mut d = [0.0; 4];
        fill_sequential(&mut d, 1.0);
        assert_eq!(d, [1.0, 2.0, 3.0, 4.0]);
        fill_sequential(&mut d, 0.1);
        assert_eq!(d[0], f64::from(0.1f32));
        assert_ne!(d[0], 0.1);
        // Past 2^24 a float counter stops advancing.
        fill_sequential(&mut d, 16_777_216.0);
        assert_eq!(d, [16_777_216.0; 4]);
    }

    #[test]
    fn cyclic_wraps_after_twenty() {
        let mut d = [0.0; 25];
        fill_cyclic(&mut d, 1.0);
        let want: Vec<f64> = (0..25).map(|i| f64::from(i % 20 + 1)).collect();
        assert_eq!(d.to_vec(), want);
        let mut d = [0.0; 4];
        fill_cyclic(&mut d, 19.0);
        assert_eq!(d, [19.0, 20.0, 1.0, 2.0]);
    }

    #[test]
    fn swap_checks_sizes() {
        let mut a = [1.0, 2.0];
        let mut b = [3.0, 4.0];
        assert_eq!(swap_blocks(&mut a, &mut b), Ok(()));
        assert_eq!((a, b), ([3.0, 4.0], [1.0, 2.0]));
        let mut c = [0.0; 3];
        assert!(swap_blocks(&mut a, &mut c).is_err());
        assert_eq!(a, [3.0, 4.0]);
    }
}
