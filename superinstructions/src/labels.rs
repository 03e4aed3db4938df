//! Index labels: how SIAL matches elements of different blocks by index *name*.
//!
//! In `a[i,j] = b[j,i]` or `d[i,j] = l[i,k] * r[k,j]` elements correspond through the identity of
//! the index variables (SIAL-SPEC §5.5.1), not through their positions. The kernels receive those
//! variables as small integers ([`Label`]; the interpreter can use the index-table slot) and the
//! data, shape and labels of a block travel together as an [`Operand`].

use crate::error::{KernelError, Role};
use crate::shape::{MAX_RANK, Shape};
use std::ops::Deref;

/// Identifies one index variable. Only equality matters.
pub type Label = u32;

/// A read-only block with the index labels used to reference it.
#[derive(Debug, Clone, Copy)]
pub struct Operand<'a> {
    /// Elements, column-major.
    pub data: &'a [f64],
    /// Extents.
    pub shape: Shape,
    /// One label per dimension.
    pub labels: &'a [Label],
}

impl<'a> Operand<'a> {
    /// Bundles a block's data, shape and labels (validated when a kernel uses them).
    pub fn new(data: &'a [f64], shape: Shape, labels: &'a [Label]) -> Self {
        Operand {
            data,
            shape,
            labels,
        }
    }
}

/// A writable block with the index labels used to reference it.
#[derive(Debug)]
pub struct OperandMut<'a> {
    /// Elements, column-major.
    pub data: &'a mut [f64],
    /// Extents.
    pub shape: Shape,
    /// One label per dimension.
    pub labels: &'a [Label],
}

impl<'a> OperandMut<'a> {
    /// Bundles a block's data, shape and labels (validated when a kernel uses them).
    pub fn new(data: &'a mut [f64], shape: Shape, labels: &'a [Label]) -> Self {
        OperandMut {
            data,
            shape,
            labels,
        }
    }
}

/// Checks one label per dimension and no label repeated.
pub(crate) fn check_labels(role: Role, shape: &Shape, labels: &[Label]) -> Result<(), KernelError> {
    if labels.len() != shape.rank() {
        return Err(KernelError::LabelRankMismatch {
            role,
            labels: labels.len(),
            rank: shape.rank(),
        });
    }
    for (i, l) in labels.iter().enumerate() {
        if labels[..i].contains(l) {
            return Err(KernelError::RepeatedLabel { role, label: *l });
        }
    }
    Ok(())
}

/// A permutation of at most [`MAX_RANK`] dimensions, stored inline.
///
/// `perm[d]` is the source dimension that becomes destination dimension `d` — the convention of
/// [`crate::permute`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Perm {
    p: [usize; MAX_RANK],
    rank: usize,
}

impl Perm {
    /// The permutation as a slice.
    pub fn as_slice(&self) -> &[usize] {
        &self.p[..self.rank]
    }

    /// True if the permutation leaves every dimension in place.
    pub fn is_identity(&self) -> bool {
        self.as_slice().iter().enumerate().all(|(d, &p)| d == p)
    }
}

impl Deref for Perm {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        self.as_slice()
    }
}

/// The permutation that takes a block labelled `src_labels` to the order `dst_labels`
/// (`perm[d]` = position in `src_labels` of `dst_labels[d]`).
///
/// Fails unless both lists hold the same labels, each once, at most [`MAX_RANK`] of them.
pub fn permutation_from_labels(
    dst_labels: &[Label],
    src_labels: &[Label],
) -> Result<Perm, KernelError> {
    let mismatch = || KernelError::LabelSetMismatch {
        dst: dst_labels.to_vec(),
        src: src_labels.to_vec(),
    };
    let rank = dst_labels.len();
    if rank > MAX_RANK {
        return Err(KernelError::RankTooLarge { rank });
    }
    if src_labels.len() != rank {
        return Err(mismatch());
    }
    for (i, l) in src_labels.iter().enumerate() {
        if src_labels[..i].contains(l) {
            return Err(KernelError::RepeatedLabel {
                role: Role::Src,
                label: *l,
            });
        }
    }
    let mut p = [0usize; MAX_RANK];
    for (d, l) in dst_labels.iter().enumerate() {
        if dst_labels[..d].contains(l) {
            return Err(KernelError::RepeatedLabel {
                role: Role::Dst,
                label: *l,
            });
        }
        p[d] = src_labels
            .iter()
            .position(|s| s == l)
            .ok_or_else(mismatch)?;
    }
    Ok(Perm { p, rank })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_by_name() -> Result<(), KernelError> {
        // a[i,j,k] = b[k,i,j]: dst dim 0 (i) is src dim 1, ...
        let p = permutation_from_labels(&[1, 2, 3], &[3, 1, 2])?;
        assert_eq!(p.as_slice(), &[1, 2, 0]);
        assert!(!p.is_identity());
        assert!(permutation_from_labels(&[4, 5], &[4, 5])?.is_identity());
        assert!(permutation_from_labels(&[], &[])?.is_identity());
        Ok(())
    }

    #[test]
    fn permutation_errors() {
        assert!(matches!(
            permutation_from_labels(&[1, 2], &[1, 3]),
            Err(KernelError::LabelSetMismatch { .. })
        ));
        assert!(matches!(
            permutation_from_labels(&[1, 2], &[1, 2, 3]),
            Err(KernelError::LabelSetMismatch { .. })
        ));
        assert!(matches!(
            permutation_from_labels(&[1, 1], &[1, 2]),
            Err(KernelError::RepeatedLabel {
                role: Role::Dst,
                label: 1
            })
        ));
        assert!(matches!(
            permutation_from_labels(&[1, 2], &[2, 2]),
            Err(KernelError::RepeatedLabel {
                role: Role::Src,
                label: 2
            })
        ));
        assert!(matches!(
            permutation_from_labels(&[0; 7], &[0; 7]),
            Err(KernelError::RankTooLarge { rank: 7 })
        ));
    }
}
