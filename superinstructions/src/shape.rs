//! Block shapes: up to [`MAX_RANK`] extents, column-major layout.
//!
//! SIAL blocks (SIAL-SPEC §7.3.1) are dense arrays of `f64` whose first index varies fastest.
//! A [`Shape`] is a small `Copy` value (no allocation) so kernels can build, compare and permute
//! shapes freely on every instruction.

use crate::error::KernelError;
use std::fmt;

/// Largest block rank SIAL allows.
pub const MAX_RANK: usize = 6;

/// The extents of a block, column-major (first dimension fastest).
///
/// Rank 0 is a single element (a scalar-valued block). Extents may be zero; such a block has no
/// elements and every kernel treats it as a no-op.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Extents; entries at and beyond `rank` are 1 so products over all entries are the size.
    extents: [usize; MAX_RANK],
    rank: u8,
    len: usize,
}

impl Shape {
    /// A shape with the given extents.
    ///
    /// Fails if there are more than [`MAX_RANK`] extents or the element count overflows `usize`.
    pub fn new(extents: &[usize]) -> Result<Self, KernelError> {
        let rank = extents.len();
        if rank > MAX_RANK {
            return Err(KernelError::RankTooLarge { rank });
        }
        let len = extents
            .iter()
            .try_fold(1usize, |acc, &e| acc.checked_mul(e))
            .ok_or_else(|| KernelError::SizeOverflow {
                extents: extents.to_vec(),
            })?;
        let mut all = [1usize; MAX_RANK];
        all[..rank].copy_from_slice(extents);
        Ok(Shape {
            extents: all,
            // rank <= MAX_RANK = 6 was checked above, so it fits in a u8.
            rank: rank as u8,
            len,
        })
    }

    /// The rank-0 shape: one element.
    pub const fn scalar() -> Self {
        Shape {
            extents: [1; MAX_RANK],
            rank: 0,
            len: 1,
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        usize::from(self.rank)
    }

    /// The extents, one per dimension.
    pub fn extents(&self) -> &[usize] {
        &self.extents[..self.rank()]
    }

    /// Number of elements (product of the extents; 1 for rank 0).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the block has no elements (some extent is zero).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Column-major strides: `strides[0] = 1`, `strides[d+1] = strides[d] * extent[d]`.
    ///
    /// Only the first `rank()` entries are meaningful.
    pub fn strides(&self) -> [usize; MAX_RANK] {
        let mut strides = [0usize; MAX_RANK];
        let mut s = 1usize;
        for (stride, &e) in strides.iter_mut().zip(&self.extents) {
            *stride = s;
            // Cannot overflow: the product of all extents (`len`) fits in usize; when an extent
            // is zero the later strides are never used to address memory.
            s = s.saturating_mul(e);
        }
        strides
    }

    /// Linear (column-major) offset of a multi-index, or `None` if it is out of bounds or has
    /// the wrong number of entries.
    pub fn offset(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.rank() {
            return None;
        }
        let strides = self.strides();
        index
            .iter()
            .zip(self.extents())
            .zip(&strides)
            .try_fold(0usize, |acc, ((&i, &e), &s)| (i < e).then_some(acc + i * s))
    }

    /// The shape of this block permuted by `perm`: dimension `d` of the result is dimension
    /// `perm[d]` of `self`.
    pub fn permuted(&self, perm: &[usize]) -> Result<Shape, KernelError> {
        check_permutation(perm, self.rank())?;
        let mut out = [1usize; MAX_RANK];
        for (o, &p) in out.iter_mut().zip(perm) {
            *o = self.extents[p];
        }
        Shape::new(&out[..self.rank()])
    }
}

impl Default for Shape {
    fn default() -> Self {
        Shape::scalar()
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Shape{:?}", self.extents())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(")?;
        for (i, e) in self.extents().iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{e}")?;
        }
        write!(f, ")")
    }
}

/// Checks that `perm` is a permutation of `0..rank`.
pub(crate) fn check_permutation(perm: &[usize], rank: usize) -> Result<(), KernelError> {
    let invalid = || KernelError::InvalidPermutation {
        perm: perm.to_vec(),
        rank,
    };
    if perm.len() != rank || rank > MAX_RANK {
        return Err(invalid());
    }
    let mut seen = [false; MAX_RANK];
    for &p in perm {
        match seen.get_mut(p) {
            Some(s) if p < rank && !*s => *s = true,
            _ => return Err(invalid()),
        }
    }
    Ok(())
}

/// Checks that a buffer holds exactly `expected` elements.
pub(crate) fn check_len(
    role: crate::error::Role,
    expected: usize,
    actual: usize,
) -> Result<(), KernelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(KernelError::LengthMismatch {
            role,
            expected,
            actual,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_column_major() -> Result<(), KernelError> {
        let s = Shape::new(&[3, 4, 5])?;
        assert_eq!(s.rank(), 3);
        assert_eq!(s.len(), 60);
        assert_eq!(&s.strides()[..3], &[1, 3, 12]);
        assert_eq!(s.offset(&[2, 3, 4]), Some(2 + 3 * 3 + 4 * 12));
        assert_eq!(s.offset(&[3, 0, 0]), None);
        assert_eq!(s.offset(&[0, 0]), None);
        assert_eq!(s.to_string(), "(3,4,5)");
        Ok(())
    }

    #[test]
    fn scalar_has_one_element() {
        let s = Shape::scalar();
        assert_eq!(s.rank(), 0);
        assert_eq!(s.len(), 1);
        assert_eq!(s.offset(&[]), Some(0));
        assert_eq!(Shape::new(&[]), Ok(s));
    }

    #[test]
    fn zero_extent_is_empty() -> Result<(), KernelError> {
        let s = Shape::new(&[3, 0, 2])?;
        assert!(s.is_empty());
        assert_eq!(s.len(), 0);
        Ok(())
    }

    #[test]
    fn rejects_rank_seven_and_overflow() {
        assert_eq!(
            Shape::new(&[1; 7]),
            Err(KernelError::RankTooLarge { rank: 7 })
        );
        assert!(matches!(
            Shape::new(&[usize::MAX, 2]),
            Err(KernelError::SizeOverflow { .. })
        ));
    }

    #[test]
    fn permuted_shape() -> Result<(), KernelError> {
        let s = Shape::new(&[2, 3, 4])?;
        assert_eq!(s.permuted(&[2, 0, 1])?, Shape::new(&[4, 2, 3])?);
        assert!(s.permuted(&[0, 0, 1]).is_err());
        assert!(s.permuted(&[0, 1]).is_err());
        assert!(s.permuted(&[0, 1, 3]).is_err());
        Ok(())
    }
}
