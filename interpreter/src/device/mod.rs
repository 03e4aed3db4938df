//! Accelerators: device memory, asynchronous transfers and block kernels on device buffers
//! (DESIGN §3 "Devices" and "Placement").
//!
//! Layers, each knowing only the ones before it:
//!
//! | module | job |
//! |---|---|
//! | this file | the [`Device`] trait (one accelerator), its handles ([`DevBuf`], [`Event`]) and errors; [`Device::contract`] written once on top of permute + GEMM |
//! | [`pinned`] | page-locked host buffers for the host side of transfers, cached by size ([`PinnedCache`]) |
//! | [`host`] | [`HostDevice`]: the trait in host memory with copy threads, for CI and tests |
//! | [`cuda`] | [`CudaDevice`]: the trait through `cudarc` (driver, cuBLAS, NVRTC loaded at run time) |
//! | [`copies`] | [`DeviceCopies`]: the versioned copies of blocks on the host and one device, transfers only when needed, LRU eviction under a memory budget, [`GpuStats`] |
//! | [`placement`] | [`Placement`]: where an instruction runs (CPU or device), from a calibrated cost model |
//!
//! Blocks are dense `f64`, column-major (first index fastest), like the CPU kernels of
//! `sial_superinstructions`; the device kernels take the same shapes and permutation
//! convention (`perm[d]` is the source dimension that becomes destination dimension `d`).
//!
//! Handles are plain values: a [`DevBuf`] names a buffer inside its device (using a freed or
//! foreign handle is a [`DeviceError::UnknownBuffer`], never undefined behaviour), and an
//! [`Event`] names the completion of one asynchronous copy.

pub mod copies;
pub mod cuda;
pub mod host;
pub mod pinned;
pub mod placement;

pub use copies::{DeviceCopies, GpuStats, Intent, Location};
pub use cuda::{CudaDevice, discover};
pub use host::{HostDevice, HostDeviceConfig};
pub use pinned::{PinnedAlloc, PinnedBuf, PinnedCache, PinnedStats};
pub use placement::{Calibration, DeviceMode, OpKind, Placement, Target};

use sial_superinstructions::{ContractionPlan, KernelError, Perm, Shape};

/// Size of one block element in bytes.
pub const F64_BYTES: usize = std::mem::size_of::<f64>();

/// Why a device operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// An allocation does not fit in the device memory (or the budget given to it).
    #[error(
        "device memory exhausted on {device}: {requested} bytes requested, {in_use} of {capacity} bytes in use"
    )]
    OutOfMemory {
        device: String,
        requested: usize,
        in_use: usize,
        capacity: usize,
    },
    /// A handle that this device did not hand out, or that was freed.
    #[error("device buffer {id} does not exist on {device} (freed, or from another device)")]
    UnknownBuffer { device: String, id: u64 },
    /// A buffer has the wrong number of elements for the operation.
    #[error("{what} has {got} elements, the operation needs {expected}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A length or dimension past what the device's kernels index (32-bit on CUDA).
    #[error("{what} is {got}; the device's kernels take at most {max}")]
    TooLarge {
        what: &'static str,
        max: usize,
        got: usize,
    },
    /// A stream number beyond the device's streams.
    #[error("stream {stream} does not exist ({streams} streams)")]
    NoSuchStream { stream: usize, streams: usize },
    /// The destination of a kernel is also an input that the kernel reads out of order.
    #[error("{kernel}: the destination buffer is also an input")]
    Aliased { kernel: &'static str },
    /// Invalid shapes, permutation or contraction (the CPU kernels' checks).
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The pinned-memory budget cannot hold a buffer even after releasing every cached one.
    #[error(
        "pinned memory budget exceeded: {requested} bytes requested, {in_use} bytes in use, budget {budget} bytes"
    )]
    PinnedBudget {
        requested: usize,
        in_use: usize,
        budget: usize,
    },
    /// A copy thread of the host device failed or died.
    #[error("copy stream {stream} failed: {reason}")]
    CopyStream { stream: usize, reason: String },
    /// The CUDA driver, cuBLAS or NVRTC reported an error.
    #[error("CUDA {api}: {reason}")]
    Cuda { api: &'static str, reason: String },
    /// The device copy of a block was used in a way the version protocol does not allow.
    #[error("block copy: {0}")]
    Protocol(String),
}

/// Results of device operations.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;

/// A buffer of `len` `f64` in device memory, named by its device-unique id.
///
/// A handle, not an owner: [`Device::free`] releases the memory; a stale copy of the handle is
/// then rejected with [`DeviceError::UnknownBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevBuf {
    id: u64,
    len: usize,
}

impl DevBuf {
    /// A handle (for device implementations).
    pub fn new(id: u64, len: usize) -> Self {
        DevBuf { id, len }
    }

    /// The device-unique id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * F64_BYTES
    }
}

/// The completion of one asynchronous copy: the `seq`-th operation queued on `stream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    pub stream: usize,
    pub seq: u64,
}

/// What a device did, counted by the device itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceCounters {
    /// Host-to-device copies and their bytes.
    pub uploads: u64,
    pub upload_bytes: u64,
    /// Device-to-host copies and their bytes.
    pub downloads: u64,
    pub download_bytes: u64,
    /// Kernels run (a contraction counts its permutes and its GEMM).
    pub kernel_launches: u64,
}

/// A column-major GEMM `C = alpha·op(A)·op(B) + beta·C` on packed matrices: `C` is `m×n`,
/// `op(A)` is `m×k` and stored `k×m` if `transa` (else `m×k`), `op(B)` is `k×n` and stored
/// `n×k` if `transb`. `beta == 0` does not read `C` (so it may hold anything, even NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmSpec {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub transa: bool,
    pub transb: bool,
    pub alpha: f64,
    pub beta: f64,
}

impl GemmSpec {
    /// Checks the buffer lengths against the dimensions.
    pub fn check(&self, a: usize, b: usize, c: usize) -> Result<()> {
        check_len("gemm A", self.m * self.k, a)?;
        check_len("gemm B", self.k * self.n, b)?;
        check_len("gemm C", self.m * self.n, c)
    }
}

/// `Err(LengthMismatch)` unless `got == expected`.
pub fn check_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(DeviceError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

/// One accelerator: its memory, its copy streams and block kernels on its buffers.
///
/// Transfers are asynchronous: [`Device::upload`] and [`Device::download`] queue a copy on a
/// stream and return its [`Event`]. A device keeps, per buffer, the copy still in flight on it
/// and makes every kernel (and every later copy) touching that buffer wait for it, so a kernel
/// queued right after an upload sees the uploaded data. The host side of a copy (the
/// [`PinnedBuf`]) is the caller's: it must not be read (download) or changed (upload) before
/// [`Device::wait`] on the event returned; [`DeviceCopies`] does that.
///
/// Kernels validate their arguments like the CPU kernels and return errors; none panics.
pub trait Device: Send {
    /// A name for messages and statistics (e.g. "NVIDIA H100 80GB HBM3 (GPU 0)").
    fn name(&self) -> &str;

    /// Number of copy streams.
    fn streams(&self) -> usize;

    /// Bytes of device memory this device may use.
    fn capacity(&self) -> usize;

    /// Bytes allocated now.
    fn bytes_in_use(&self) -> usize;

    /// Allocates a buffer of `len` elements (contents unspecified). Fails with
    /// [`DeviceError::OutOfMemory`] beyond [`Device::capacity`].
    fn alloc(&mut self, len: usize) -> Result<DevBuf>;

    /// Releases a buffer, after any copy still in flight on it.
    fn free(&mut self, buf: DevBuf) -> Result<()>;

    /// The allocator of host buffers suited to this device's transfers (page-locked for a GPU).
    fn pinned_allocator(&self) -> Box<dyn PinnedAlloc>;

    /// Queues `dst = src[..dst.len()]` on `stream`.
    fn upload(&mut self, dst: &DevBuf, src: &PinnedBuf, stream: usize) -> Result<Event>;

    /// Queues `dst[..src.len()] = src` on `stream`.
    fn download(&mut self, dst: &mut PinnedBuf, src: &DevBuf, stream: usize) -> Result<Event>;

    /// True if the copy of `event` has completed (without blocking).
    fn is_complete(&mut self, event: Event) -> Result<bool>;

    /// Blocks until the copy of `event` has completed.
    fn wait(&mut self, event: Event) -> Result<()>;

    /// Blocks until every queued copy and kernel has completed.
    fn synchronize(&mut self) -> Result<()>;

    /// Transfers and kernel launches so far.
    fn counters(&self) -> DeviceCounters;

    /// `dst[e] = v`.
    fn fill(&mut self, dst: &DevBuf, v: f64) -> Result<()>;

    /// `dst[e] *= v`.
    fn scale(&mut self, dst: &DevBuf, v: f64) -> Result<()>;

    /// `dst[e] += v`.
    fn add_scalar(&mut self, dst: &DevBuf, v: f64) -> Result<()>;

    /// `dst = src` (equal lengths).
    fn copy(&mut self, dst: &DevBuf, src: &DevBuf) -> Result<()>;

    /// `dst += alpha * src` (equal lengths).
    fn axpy(&mut self, dst: &DevBuf, alpha: f64, src: &DevBuf) -> Result<()>;

    /// `dst = l + r` (equal lengths).
    fn add(&mut self, dst: &DevBuf, l: &DevBuf, r: &DevBuf) -> Result<()>;

    /// `dst = l - r` (equal lengths).
    fn sub(&mut self, dst: &DevBuf, l: &DevBuf, r: &DevBuf) -> Result<()>;

    /// `dst = src` permuted, as `sial_superinstructions::permute` (dst must not be src).
    fn permute(
        &mut self,
        dst: &DevBuf,
        dst_shape: &Shape,
        src: &DevBuf,
        src_shape: &Shape,
        perm: &[usize],
    ) -> Result<()>;

    /// `dst += alpha * (src permuted)`, as `sial_superinstructions::permute_add`.
    fn permute_add(
        &mut self,
        dst: &DevBuf,
        dst_shape: &Shape,
        alpha: f64,
        src: &DevBuf,
        src_shape: &Shape,
        perm: &[usize],
    ) -> Result<()>;

    /// `c = alpha·op(a)·op(b) + beta·c` (see [`GemmSpec`]; `c` must be neither `a` nor `b`).
    fn gemm(&mut self, spec: &GemmSpec, a: &DevBuf, b: &DevBuf, c: &DevBuf) -> Result<()>;

    /// `dst = beta * dst + Σ left * right` by the steps of `plan`, exactly as
    /// [`ContractionPlan::execute`] runs them on the CPU: permute the operands the plan
    /// permutes into temporaries, one GEMM, permute (or permute-add) the result if the plan
    /// says so. Temporaries are allocated on this device and freed before returning.
    fn contract(
        &mut self,
        plan: &ContractionPlan,
        dst: &DevBuf,
        left: &DevBuf,
        right: &DevBuf,
        beta: f64,
    ) -> Result<()> {
        contract_on(self, plan, dst, left, right, beta)
    }
}

/// [`Device::contract`] for any device (also usable through `dyn Device`).
pub fn contract_on(
    dev: &mut (impl Device + ?Sized),
    plan: &ContractionPlan,
    dst: &DevBuf,
    left: &DevBuf,
    right: &DevBuf,
    beta: f64,
) -> Result<()> {
    let [dl, ll, rl] = plan.lens();
    check_len("contraction dst", dl, dst.len())?;
    check_len("contraction left", ll, left.len())?;
    check_len("contraction right", rl, right.len())?;
    if dst.id() == left.id() || dst.id() == right.id() {
        return Err(DeviceError::Aliased { kernel: "contract" });
    }
    let mut temps = Vec::new();
    let result = contract_steps(dev, plan, dst, left, right, beta, &mut temps);
    // Temporaries are freed whatever happened; the first error wins.
    let mut freed = Ok(());
    for t in temps {
        let r = dev.free(t);
        if freed.is_ok() {
            freed = r;
        }
    }
    result.and(freed)
}

/// The steps of [`contract_on`]; every temporary allocated is pushed to `temps`.
fn contract_steps(
    dev: &mut (impl Device + ?Sized),
    plan: &ContractionPlan,
    dst: &DevBuf,
    left: &DevBuf,
    right: &DevBuf,
    beta: f64,
    temps: &mut Vec<DevBuf>,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let [m, n, k] = plan.gemm_dims();
    if k == 0 {
        // An empty sum: only the beta part remains.
        return if beta == 0.0 {
            dev.fill(dst, 0.0)
        } else {
            dev.scale(dst, beta)
        };
    }
    let (a, at) = prepare_operand(dev, plan.left_prep(), left, temps)?;
    let (b, bt) = prepare_operand(dev, plan.right_prep(), right, temps)?;
    match plan.dst_prep() {
        (false, None) => dev.gemm(
            &GemmSpec {
                m,
                n,
                k,
                transa: at,
                transb: bt,
                alpha: 1.0,
                beta,
            },
            &a,
            &b,
            dst,
        ),
        (true, None) => dev.gemm(
            &GemmSpec {
                m: n,
                n: m,
                k,
                transa: !bt,
                transb: !at,
                alpha: 1.0,
                beta,
            },
            &b,
            &a,
            dst,
        ),
        (_, Some((tmp, to, perm))) => {
            let t = dev.alloc(tmp.len())?;
            temps.push(t);
            dev.gemm(
                &GemmSpec {
                    m,
                    n,
                    k,
                    transa: at,
                    transb: bt,
                    alpha: 1.0,
                    beta: 0.0,
                },
                &a,
                &b,
                &t,
            )?;
            if beta == 0.0 {
                dev.permute(dst, &to, &t, &tmp, &perm)
            } else {
                if beta != 1.0 {
                    dev.scale(dst, beta)?;
                }
                dev.permute_add(dst, &to, 1.0, &t, &tmp, &perm)
            }
        }
    }
}

/// Brings an operand into matrix form on the device: in place, or permuted into a temporary
/// (pushed to `temps`). Returns the buffer and whether it is stored transposed.
fn prepare_operand(
    dev: &mut (impl Device + ?Sized),
    prep: (bool, Option<(Shape, Shape, Perm)>),
    buf: &DevBuf,
    temps: &mut Vec<DevBuf>,
) -> Result<(DevBuf, bool)> {
    match prep {
        (transposed, None) => Ok((*buf, transposed)),
        (transposed, Some((from, to, perm))) => {
            let t = dev.alloc(to.len())?;
            temps.push(t);
            dev.permute(&t, &to, buf, &from, &perm)?;
            Ok((t, transposed))
        }
    }
}
