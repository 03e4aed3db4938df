//! Block kernels for SIAL super instructions.
//!
//! SIAL programs compute on *blocks*: dense, column-major (first index fastest) arrays of `f64`
//! of rank 0 to 6 (SIAL-SPEC §7.3.1). Every block statement of a SIAL program (§4.7, §5.5) ends
//! up in one of the kernels here:
//!
//! | SIAL | kernel |
//! |------|--------|
//! | `a = s`, `a *= s`, `a += s` | [`fill`], [`scale`], [`add_scalar`] |
//! | `a[i,j] = b[i,j]`, `a = b * s` | [`copy`], [`scale_copy`] |
//! | `a[i,j] += b[i,j]`, `a += b * s` | [`axpy`] |
//! | `a = b + c`, `a = b - c` | [`add`], [`sub`] |
//! | `a[i,j] = b[j,i]` | [`permute`] / [`permute_labeled`] |
//! | `a[k,i] += b[i,k]` | [`permute_add`] / [`permute_add_labeled`] |
//! | `d = l * r`, `d += l * r` | [`contract`] / [`ContractionPlan`] |
//! | `d = l ^ r` | [`tensor`] |
//! | `s = a[i,j] * b[j,i]` | [`dot`] |
//!
//! Elements of different blocks correspond by index *name* (§5.5.1); the kernels take names as
//! small integer [`Label`]s. Nothing here knows about the compiler or the interpreter: the
//! interpreter maps SIAL index variables to labels and blocks to slices.
//!
//! Every kernel validates its arguments and returns a [`KernelError`] instead of panicking.

mod batched;
mod broadcast;
mod contract;
mod dot;
mod elementwise;
mod error;
mod gemm;
mod labels;
pub mod line_aligned;
mod packed;
mod permute;
pub mod permute_cases;
mod shape;
mod sliced;
pub mod special;
mod specials;
#[cfg(test)]
mod testutil;

/// Bytes of L2 per core that the kernels' block sizes are fractions of: 1 MiB, as on the
/// machine they were measured on (AMD Zen 4).
const L2_BYTES: usize = 1 << 20;

pub use contract::{
    ContractionPlan, Permutes, check_full_contraction, contract, dot, dot_in_order, tensor,
};
pub use elementwise::{add, add_scalar, axpy, copy, fill, scale, scale_copy, sub};
pub use error::{KernelError, Role};
pub use gemm::{Parallelism, column_major_gemm};
pub use labels::{Label, Operand, OperandMut, Perm, permutation_from_labels};
pub use permute::{
    PermLoop, permute, permute_add, permute_add_labeled, permute_labeled, permute_loops,
};
pub use shape::{MAX_RANK, Shape};
pub use specials::{fill_cyclic, fill_sequential, swap_blocks};
