//! The one error type of the kernels.
//!
//! Every kernel validates what the caller hands it (buffer lengths, shapes, permutations, index
//! labels) and reports a [`KernelError`] instead of panicking: the interpreter turns these into a
//! runtime error that names the SIAL line, so the message says *what* disagreed and the numbers.

use crate::shape::MAX_RANK;
use std::fmt;

/// Which argument of a kernel an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The block written by the kernel.
    Dst,
    /// The only source block (copy, permute, axpy, ...).
    Src,
    /// The left operand of a binary operation.
    Left,
    /// The right operand of a binary operation.
    Right,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Dst => "destination",
            Role::Src => "source",
            Role::Left => "left operand",
            Role::Right => "right operand",
        })
    }
}

/// Why a kernel refused its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A shape with more than [`MAX_RANK`] dimensions.
    #[error("rank {rank} exceeds the maximum block rank {MAX_RANK}")]
    RankTooLarge { rank: usize },

    /// The product of the extents does not fit in `usize`.
    #[error("a block with extents {extents:?} has more elements than can be addressed")]
    SizeOverflow { extents: Vec<usize> },

    /// A buffer does not hold exactly as many elements as its shape (or its partner) requires.
    #[error("{role}: buffer has {actual} elements, expected {expected}")]
    LengthMismatch {
        role: Role,
        expected: usize,
        actual: usize,
    },

    /// `perm` is not a permutation of `0..rank`.
    #[error("{perm:?} is not a permutation of 0..{rank}")]
    InvalidPermutation { perm: Vec<usize>, rank: usize },

    /// The destination shape is not the source shape permuted by `perm`.
    #[error("destination extents {dst:?} are not source extents {src:?} permuted by {perm:?}")]
    PermutedShapeMismatch {
        dst: Vec<usize>,
        src: Vec<usize>,
        perm: Vec<usize>,
    },

    /// The number of labels of an operand differs from its rank.
    #[error("{role}: {labels} index labels for a block of rank {rank}")]
    LabelRankMismatch {
        role: Role,
        labels: usize,
        rank: usize,
    },

    /// A label occurs twice in one operand (a trace, which SIAL does not allow).
    #[error("{role}: index label {label} occurs more than once")]
    RepeatedLabel { role: Role, label: u32 },

    /// A label occurs in the destination and in both operands (Hadamard-style product).
    #[error("index label {label} occurs in the destination and in both operands")]
    LabelInAllThree { label: u32 },

    /// A label occurs in only one of destination, left and right.
    #[error("index label {label} occurs only in the {role}")]
    UnpairedLabel { role: Role, label: u32 },

    /// The same label has different extents in two places.
    #[error(
        "index label {label} has extent {first} in the {first_role} but {second} in the {second_role}"
    )]
    ExtentMismatch {
        label: u32,
        first_role: Role,
        first: usize,
        second_role: Role,
        second: usize,
    },

    /// The destination labels are not a rearrangement of the source labels.
    #[error("destination labels {dst:?} are not a permutation of source labels {src:?}")]
    LabelSetMismatch { dst: Vec<u32>, src: Vec<u32> },

    /// The operands of a tensor (outer) product share a label.
    #[error("tensor product operands share index label {label}")]
    SharedLabelInTensor { label: u32 },

    /// A full contraction (`dot`) whose operands do not have the same label set.
    #[error("full contraction needs both operands to carry the same labels")]
    NotAFullContraction,

    /// A contraction plan's offsets reach past a block it is executed on (a bug in the plan,
    /// caught before any unchecked access).
    #[error("internal: the {form} plan of a contraction does not fit its blocks")]
    PlanMismatch { form: &'static str },
}
