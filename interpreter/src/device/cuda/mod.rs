//! [`CudaDevice`]: the [`Device`] trait on an NVIDIA GPU through `cudarc`.
//!
//! The driver, cuBLAS and NVRTC are loaded at run time (cudarc's `dynamic-loading`), so the
//! binary runs where no CUDA is installed: [`discover`] then finds no device. cudarc panics
//! when it calls into a library that is missing, so every entry point first checks that the
//! libraries can be loaded and runs the opening under `catch_unwind`.
//!
//! Streams: kernels and cuBLAS run on one compute stream, in order; copies run on their own
//! streams (default 2: one per copy-engine direction). The ordering between them is explicit,
//! with events (cudarc's own per-buffer event tracking is switched off so there is one
//! mechanism, not two):
//! - a copy waits (on the GPU) for the compute stream's work queued so far, the last copy on
//!   its device buffer and the last copy on its pinned buffer;
//! - a kernel waits (on the GPU) for the last copy on each of its buffers;
//! - freeing a buffer waits for its last copy, then frees on the compute stream.
//!
//! Kernels: cuBLAS `dgemm`, and NVRTC-compiled grid-stride kernels (source in [`KERNELS`]) for
//! fill, scale, add_scalar, copy, axpy, add, sub and permute / permute-add of rank ≤ 6.
//! Permutations that move the source's contiguous dimension go through 32 × 32 tiles in shared
//! memory, so that both the reads and the writes are coalesced (`sial_permute_tiled`); the
//! others are a plain gather, one thread per destination element (`sial_permute`).

mod pinned;

use super::pinned::{PinnedMem, lock};
use super::{
    DevBuf, Device, DeviceCounters, DeviceError, Event, F64_BYTES, GemmSpec, PinnedAlloc,
    PinnedBuf, Result,
};
use cudarc::cublas::{CudaBlas, result as blas, sys as blas_sys};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    DriverError, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
pub use pinned::CudaPinned;
use pinned::CudaPinnedAlloc;
use sial_superinstructions::{MAX_RANK, Shape};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

/// The element-wise and permute kernels, compiled by NVRTC when a device is opened.
pub const KERNELS: &str = r#"
typedef unsigned long long u64;
#define GRID_LOOP(i, n) \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (u64)blockDim.x * gridDim.x)

extern "C" __global__ void sial_fill(double* d, double v, u64 n) {
    GRID_LOOP(i, n) d[i] = v;
}
extern "C" __global__ void sial_scale(double* d, double v, u64 n) {
    GRID_LOOP(i, n) d[i] *= v;
}
extern "C" __global__ void sial_add_scalar(double* d, double v, u64 n) {
    GRID_LOOP(i, n) d[i] += v;
}
extern "C" __global__ void sial_copy(double* d, const double* s, u64 n) {
    GRID_LOOP(i, n) d[i] = s[i];
}
extern "C" __global__ void sial_axpy(double* d, double a, const double* s, u64 n) {
    GRID_LOOP(i, n) d[i] += a * s[i];
}
extern "C" __global__ void sial_add(double* d, const double* l, const double* r, u64 n) {
    GRID_LOOP(i, n) d[i] = l[i] + r[i];
}
extern "C" __global__ void sial_sub(double* d, const double* l, const double* r, u64 n) {
    GRID_LOOP(i, n) d[i] = l[i] - r[i];
}

/* ext: destination extents (first fastest); sstride[k]: the source stride of destination
   dimension k (the stride of source dimension perm[k]). */
struct PermArgs {
    u64 ext[6];
    u64 sstride[6];
    int rank;
};

extern "C" __global__ void sial_permute(double* d, const double* s, PermArgs p, double alpha,
                                        int accumulate, u64 n) {
    GRID_LOOP(i, n) {
        u64 rem = i, off = 0;
        for (int k = 0; k < p.rank; ++k) {
            u64 e = p.ext[k];
            off += (rem % e) * p.sstride[k];
            rem /= e;
        }
        if (accumulate) d[i] += alpha * s[off]; else d[i] = s[off];
    }
}

/* Destination dimensions 0 and q (the source's contiguous one) in 32 x 32 tiles: a block of
   32 x 8 threads reads a tile along q, writes it along 0. The other dimensions, and the
   tiles, are a grid-stride loop over tile numbers; the padding column keeps the transposed
   reads of the tile free of bank conflicts. */
#define TILE 32
#define TILE_ROWS 8
extern "C" __global__ void sial_permute_tiled(double* d, const double* s, PermArgs p, int q,
                                              double alpha, int accumulate, u64 tiles) {
    __shared__ double tile[TILE][TILE + 1];
    u64 e0 = p.ext[0], eq = p.ext[q];
    u64 across = (e0 + TILE - 1) / TILE, down = (eq + TILE - 1) / TILE;
    u64 dstride[6];
    u64 len = 1;
    for (int k = 0; k < p.rank; ++k) {
        dstride[k] = len;
        len *= p.ext[k];
    }
    for (u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        u64 rem = t;
        u64 i0 = (rem % across) * TILE;
        rem /= across;
        u64 iq = (rem % down) * TILE;
        rem /= down;
        u64 dbase = 0, sbase = 0;
        for (int k = 1; k < p.rank; ++k) {
            if (k == q) continue;
            u64 x = rem % p.ext[k];
            rem /= p.ext[k];
            dbase += x * dstride[k];
            sbase += x * p.sstride[k];
        }
        for (unsigned r = threadIdx.y; r < TILE; r += TILE_ROWS) {
            u64 a = i0 + r, b = iq + threadIdx.x;
            if (a < e0 && b < eq) tile[r][threadIdx.x] = s[sbase + a * p.sstride[0] + b * p.sstride[q]];
        }
        __syncthreads();
        for (unsigned r = threadIdx.y; r < TILE; r += TILE_ROWS) {
            u64 a = i0 + threadIdx.x, b = iq + r;
            if (a < e0 && b < eq) {
                u64 o = dbase + a + b * dstride[q];
                double v = tile[threadIdx.x][r];
                if (accumulate) d[o] += alpha * v; else d[o] = v;
            }
        }
        __syncthreads();
    }
}
"#;

/// Edge of the shared-memory tile of `sial_permute_tiled`, and its rows of threads.
const TILE: usize = 32;
const TILE_ROWS: u32 = 8;
/// The tiled permute pays where both tiled dimensions fill most of a tile's warp.
const TILED_MIN_EXTENT: usize = 16;

/// The argument block of `sial_permute` (same layout as the C struct).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct PermArgs {
    ext: [u64; MAX_RANK],
    sstride: [u64; MAX_RANK],
    rank: i32,
}

// SAFETY: plain-old-data with the layout of the kernel's `PermArgs` (#[repr(C)], u64 and int
// fields, padded to 8 bytes like the C struct).
unsafe impl DeviceRepr for PermArgs {}

fn driver(e: DriverError) -> DeviceError {
    DeviceError::Cuda {
        api: "driver",
        reason: e.to_string(),
    }
}

fn cublas_err(e: blas::CublasError) -> DeviceError {
    DeviceError::Cuda {
        api: "cuBLAS",
        reason: e.to_string(),
    }
}

/// The CUDA driver, as [`missing_libraries`] names it.
pub const DRIVER: &str = "the CUDA driver (libcuda.so.1)";

/// The CUDA libraries sial needs and could not load, in words; empty when all load.
///
/// The loader looks for `libcuda.so`, `libcublas.so` and `libnvrtc.so`, or their `.so.12`
/// (and older) names. CUDA 13 installs only `.so.13` names outside its development files:
/// linking them under the plain names, in a directory on `LD_LIBRARY_PATH`, is enough
/// (`benches/gpu/check.sh` does so; measured on CUDA 13.0).
pub fn missing_libraries() -> Vec<&'static str> {
    /// A library in words, and whether it loads.
    type Probe = (&'static str, fn() -> bool);
    // SAFETY (each probe): it only tries to dlopen a library by its candidate names.
    let probes: [Probe; 3] = [
        (DRIVER, || unsafe {
            cudarc::driver::sys::is_culib_present()
        }),
        ("cuBLAS (libcublas.so or libcublas.so.12)", || unsafe {
            cudarc::cublas::sys::is_culib_present()
        }),
        ("NVRTC (libnvrtc.so or libnvrtc.so.12)", || unsafe {
            cudarc::nvrtc::sys::is_culib_present()
        }),
    ];
    probes
        .into_iter()
        .filter(|(_, present)| !catch_unwind(present).unwrap_or(false))
        .map(|(name, _)| name)
        .collect()
}

/// True if the driver, cuBLAS and NVRTC libraries can all be loaded.
pub fn libraries_present() -> bool {
    missing_libraries().is_empty()
}

/// Number of GPUs; 0 when CUDA is not installed or no GPU is visible.
pub fn device_count() -> usize {
    if !libraries_present() {
        return 0;
    }
    catch_unwind(|| {
        cudarc::driver::result::init()
            .and_then(|()| CudaContext::device_count())
            .map_or(0, |n| usize::try_from(n).unwrap_or(0))
    })
    .unwrap_or(0)
}

/// Opens every GPU with `streams` copy streams; none (and no error) where CUDA is missing.
pub fn discover(streams: usize) -> Result<Vec<CudaDevice>> {
    let mut found = Vec::new();
    for ordinal in 0..device_count() {
        if let Some(d) = CudaDevice::open_with(ordinal, streams)? {
            found.push(d);
        }
    }
    Ok(found)
}

/// The kernels loaded from [`KERNELS`].
struct Kernels {
    fill: CudaFunction,
    scale: CudaFunction,
    add_scalar: CudaFunction,
    copy: CudaFunction,
    axpy: CudaFunction,
    add: CudaFunction,
    sub: CudaFunction,
    permute: CudaFunction,
    permute_tiled: CudaFunction,
}

/// A device buffer (`None` for an empty one: CUDA has no zero-byte allocations).
struct Buf {
    slice: Option<CudaSlice<f64>>,
    len: usize,
    /// Id of the last copy's event, until a kernel has waited for it.
    pending: Option<u64>,
}

/// One NVIDIA GPU.
pub struct CudaDevice {
    name: String,
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    copy_streams: Vec<Arc<CudaStream>>,
    blas: CudaBlas,
    kernels: Kernels,
    bufs: HashMap<u64, Buf>,
    next_id: u64,
    /// Events of copies not yet waited for, by id (the `seq` of an [`Event`]).
    events: HashMap<u64, (usize, Arc<CudaEvent>)>,
    next_event: u64,
    capacity: usize,
    in_use: usize,
    counters: DeviceCounters,
}

impl CudaDevice {
    /// Opens GPU `ordinal` with 2 copy streams; `Ok(None)` if CUDA is not installed or there
    /// is no such GPU.
    pub fn open(ordinal: usize) -> Result<Option<CudaDevice>> {
        Self::open_with(ordinal, 2)
    }

    /// Opens GPU `ordinal` with `streams` copy streams (at least 1).
    pub fn open_with(ordinal: usize, streams: usize) -> Result<Option<CudaDevice>> {
        if ordinal >= device_count() {
            return Ok(None);
        }
        match catch_unwind(AssertUnwindSafe(|| Self::open_now(ordinal, streams.max(1)))) {
            Ok(r) => r.map(Some),
            Err(_) => Err(DeviceError::Cuda {
                api: "driver",
                reason: format!(
                    "opening GPU {ordinal} panicked (a CUDA library or symbol is missing)"
                ),
            }),
        }
    }

    fn open_now(ordinal: usize, streams: usize) -> Result<CudaDevice> {
        let ctx = CudaContext::new(ordinal).map_err(driver)?;
        // SAFETY: called before this device allocates anything; ordering between streams is
        // done with explicit events (module documentation).
        unsafe { ctx.disable_event_tracking() };
        let name = format!("{} (GPU {ordinal})", ctx.name().map_err(driver)?);
        let capacity = ctx.total_mem().map_err(driver)?;
        let compute = ctx.new_stream().map_err(driver)?;
        let copy_streams = (0..streams)
            .map(|_| ctx.new_stream().map_err(driver))
            .collect::<Result<Vec<_>>>()?;
        let blas = CudaBlas::new(compute.clone()).map_err(cublas_err)?;
        let ptx = cudarc::nvrtc::compile_ptx(KERNELS).map_err(|e| DeviceError::Cuda {
            api: "NVRTC",
            reason: e.to_string(),
        })?;
        let module = ctx.load_module(ptx).map_err(driver)?;
        let f = |name: &str| module.load_function(name).map_err(driver);
        let kernels = Kernels {
            fill: f("sial_fill")?,
            scale: f("sial_scale")?,
            add_scalar: f("sial_add_scalar")?,
            copy: f("sial_copy")?,
            axpy: f("sial_axpy")?,
            add: f("sial_add")?,
            sub: f("sial_sub")?,
            permute: f("sial_permute")?,
            permute_tiled: f("sial_permute_tiled")?,
        };
        Ok(CudaDevice {
            name,
            ctx,
            compute,
            copy_streams,
            blas,
            kernels,
            bufs: HashMap::new(),
            next_id: 1,
            events: HashMap::new(),
            next_event: 1,
            capacity,
            in_use: 0,
            counters: DeviceCounters::default(),
        })
    }

    fn unknown(&self, b: &DevBuf) -> DeviceError {
        DeviceError::UnknownBuffer {
            device: self.name.clone(),
            id: b.id(),
        }
    }

    fn buf(&self, b: &DevBuf) -> Result<&Buf> {
        self.bufs
            .get(&b.id())
            .filter(|x| x.len == b.len())
            .ok_or_else(|| self.unknown(b))
    }

    /// The device address of `b` (0 for an empty buffer).
    fn ptr(&self, b: &DevBuf) -> Result<u64> {
        Ok(match &self.buf(b)?.slice {
            Some(s) => s.device_ptr(&self.compute).0,
            None => 0,
        })
    }

    fn stream(&self, stream: usize) -> Result<&Arc<CudaStream>> {
        self.copy_streams
            .get(stream)
            .ok_or(DeviceError::NoSuchStream {
                stream,
                streams: self.copy_streams.len(),
            })
    }

    /// Makes the compute stream wait for the last copy on each buffer; returns their
    /// addresses.
    fn for_kernel<const N: usize>(&mut self, bufs: [&DevBuf; N]) -> Result<[u64; N]> {
        self.ctx.bind_to_thread().map_err(driver)?;
        let mut ptrs = [0u64; N];
        for (p, b) in ptrs.iter_mut().zip(bufs) {
            let pending = self.buf(b)?.pending;
            if let Some(id) = pending {
                if let Some((_, e)) = self.events.get(&id) {
                    self.compute.wait(e).map_err(driver)?;
                }
                if let Some(x) = self.bufs.get_mut(&b.id()) {
                    x.pending = None;
                }
            }
            *p = self.ptr(b)?;
        }
        Ok(ptrs)
    }

    /// Orders a copy on `stream` after the compute stream's work, the last copy on `dev` and
    /// the last copy on `pinned`; queues it with `run`; records its event.
    fn queue_copy(
        &mut self,
        stream: usize,
        dev: &DevBuf,
        pinned: &CudaPinned,
        run: impl FnOnce(&CudaStream, u64) -> std::result::Result<(), DriverError>,
    ) -> Result<Event> {
        self.ctx.bind_to_thread().map_err(driver)?;
        let s = self.stream(stream)?.clone();
        let after_compute = self.compute.record_event(None).map_err(driver)?;
        s.wait(&after_compute).map_err(driver)?;
        if let Some(id) = self.buf(dev)?.pending
            && let Some((_, e)) = self.events.get(&id)
        {
            s.wait(e).map_err(driver)?;
        }
        if let Some(e) = pinned.last_copy()? {
            s.wait(&e).map_err(driver)?;
        }
        let ptr = self.ptr(dev)?;
        if !dev.is_empty() {
            run(&s, ptr).map_err(driver)?;
        }
        let event = Arc::new(s.record_event(None).map_err(driver)?);
        pinned.set_last_copy(event.clone())?;
        let id = self.next_event;
        self.next_event += 1;
        self.events.insert(id, (stream, event));
        if let Some(b) = self.bufs.get_mut(&dev.id()) {
            b.pending = Some(id);
        }
        Ok(Event { stream, seq: id })
    }

    fn unary(&mut self, which: fn(&Kernels) -> &CudaFunction, dst: &DevBuf, v: f64) -> Result<()> {
        let [d] = self.for_kernel([dst])?;
        let n = dst.len() as u64;
        let f = which(&self.kernels).clone();
        let compute = self.compute.clone();
        let launched = launch(&compute, &f, dst.len(), |b| {
            b.arg(&d).arg(&v).arg(&n);
        })?;
        self.counters.kernel_launches += u64::from(launched);
        Ok(())
    }

    fn binary(
        &mut self,
        which: fn(&Kernels) -> &CudaFunction,
        dst: &DevBuf,
        l: &DevBuf,
        r: &DevBuf,
    ) -> Result<()> {
        super::check_len("left operand", dst.len(), l.len())?;
        super::check_len("right operand", dst.len(), r.len())?;
        let [d, lp, rp] = self.for_kernel([dst, l, r])?;
        let n = dst.len() as u64;
        let f = which(&self.kernels).clone();
        let compute = self.compute.clone();
        let launched = launch(&compute, &f, dst.len(), |b| {
            b.arg(&d).arg(&lp).arg(&rp).arg(&n);
        })?;
        self.counters.kernel_launches += u64::from(launched);
        Ok(())
    }

    /// `dst = perm(src)`, or with `add = Some(alpha)`, `dst += alpha * perm(src)`.
    fn permute_kernel(
        &mut self,
        dst: &DevBuf,
        dst_shape: &Shape,
        add: Option<f64>,
        src: &DevBuf,
        src_shape: &Shape,
        perm: &[usize],
    ) -> Result<()> {
        if dst.id() == src.id() {
            return Err(DeviceError::Aliased { kernel: "permute" });
        }
        // The CPU kernel's checks: a permutation, matching extents, buffer lengths.
        if src_shape.permuted(perm)? != *dst_shape {
            return Err(sial_superinstructions::KernelError::PermutedShapeMismatch {
                dst: dst_shape.extents().to_vec(),
                src: src_shape.extents().to_vec(),
                perm: perm.to_vec(),
            }
            .into());
        }
        super::check_len("permute dst", dst_shape.len(), dst.len())?;
        super::check_len("permute src", src_shape.len(), src.len())?;
        let p = perm_args(dst_shape, src_shape, perm);
        let [d, s] = self.for_kernel([dst, src])?;
        let n = dst.len() as u64;
        let acc = i32::from(add.is_some());
        let alpha = add.unwrap_or(1.0);
        let compute = self.compute.clone();
        let launched = match tiled_dimension(&p) {
            Some(q) => {
                let f = self.kernels.permute_tiled.clone();
                let tiles = tiles_of(&p, q);
                let q = q as i32;
                let cfg = LaunchConfig {
                    grid_dim: (tiles.min(65_535) as u32, 1, 1),
                    block_dim: (TILE as u32, TILE_ROWS, 1),
                    shared_mem_bytes: 0,
                };
                let tiles = tiles as u64;
                let mut b = compute.launch_builder(&f);
                b.arg(&d)
                    .arg(&s)
                    .arg(&p)
                    .arg(&q)
                    .arg(&alpha)
                    .arg(&acc)
                    .arg(&tiles);
                // SAFETY: the arguments are those of `sial_permute_tiled`; the extents and
                // strides describe buffers of the checked lengths, and q < rank.
                unsafe { b.launch(cfg) }.map_err(driver)?;
                true
            }
            None => {
                let f = self.kernels.permute.clone();
                launch(&compute, &f, dst.len(), |b| {
                    b.arg(&d).arg(&s).arg(&p).arg(&alpha).arg(&acc).arg(&n);
                })?
            }
        };
        self.counters.kernel_launches += u64::from(launched);
        Ok(())
    }
}

/// The kernels' description of `dst = perm(src)`: the destination's extents and, for each,
/// the source's stride.
fn perm_args(dst_shape: &Shape, src_shape: &Shape, perm: &[usize]) -> PermArgs {
    let strides = src_shape.strides();
    let mut p = PermArgs {
        rank: dst_shape.rank() as i32,
        ..PermArgs::default()
    };
    for (k, (&e, &q)) in dst_shape.extents().iter().zip(perm).enumerate() {
        p.ext[k] = e as u64;
        p.sstride[k] = strides[q] as u64;
    }
    p
}

/// The destination dimension that is contiguous in the source, where the permutation moves it
/// away from the front and both it and the destination's first dimension are long enough for
/// tiles: the dimensions `sial_permute_tiled` transposes.
fn tiled_dimension(p: &PermArgs) -> Option<usize> {
    let rank = usize::try_from(p.rank).ok()?;
    let q = (1..rank).find(|&k| p.sstride[k] == 1 && p.ext[k] > 1)?;
    let long = |k: usize| p.ext[k] as usize >= TILED_MIN_EXTENT;
    (long(0) && long(q)).then_some(q)
}

/// Tiles of `sial_permute_tiled`: those of dimensions 0 and q, times the other extents.
fn tiles_of(p: &PermArgs, q: usize) -> usize {
    let rank = usize::try_from(p.rank).unwrap_or(0);
    (0..rank)
        .map(|k| {
            let e = p.ext[k] as usize;
            if k == 0 || k == q {
                e.div_ceil(TILE)
            } else {
                e
            }
        })
        .product()
}

/// Launches `f` on `stream` over `n` elements with the arguments pushed by `args`; false if
/// there was nothing to do.
fn launch<'a>(
    stream: &'a CudaStream,
    f: &'a CudaFunction,
    n: usize,
    args: impl FnOnce(&mut cudarc::driver::LaunchArgs<'a>),
) -> Result<bool> {
    if n == 0 {
        return Ok(false);
    }
    const THREADS: u32 = 256;
    // Grid-stride loops: a bounded grid covers any n.
    let blocks = n.div_ceil(THREADS as usize).min(65_535) as u32;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(f);
    args(&mut b);
    // SAFETY: every kernel of KERNELS takes exactly the arguments its caller pushes: device
    // pointers of buffers of at least `n` elements (lengths checked by the callers), scalars.
    unsafe { b.launch(cfg) }.map_err(driver)?;
    Ok(true)
}

fn not_cuda_pinned() -> DeviceError {
    DeviceError::Protocol(
        "an ordinary host buffer was given to a CUDA device (use its pinned allocator)".into(),
    )
}

fn cuda_pinned(p: &PinnedBuf) -> Result<&CudaPinned> {
    match p.mem() {
        PinnedMem::Cuda(c) => Ok(c),
        PinnedMem::Host(_) => Err(not_cuda_pinned()),
    }
}

fn to_int(what: &'static str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| DeviceError::LengthMismatch {
        what,
        expected: i32::MAX as usize,
        got: v,
    })
}

impl Device for CudaDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn streams(&self) -> usize {
        self.copy_streams.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn bytes_in_use(&self) -> usize {
        self.in_use
    }

    fn alloc(&mut self, len: usize) -> Result<DevBuf> {
        let bytes = len * F64_BYTES;
        if self.in_use + bytes > self.capacity {
            return Err(DeviceError::OutOfMemory {
                device: self.name.clone(),
                requested: bytes,
                in_use: self.in_use,
                capacity: self.capacity,
            });
        }
        self.ctx.bind_to_thread().map_err(driver)?;
        let slice = if len == 0 {
            None
        } else {
            // SAFETY: the contents are unspecified by the trait; every use writes before reading
            // (an upload or a kernel writing dst).
            Some(unsafe { self.compute.alloc::<f64>(len) }.map_err(driver)?)
        };
        let id = self.next_id;
        self.next_id += 1;
        self.bufs.insert(
            id,
            Buf {
                slice,
                len,
                pending: None,
            },
        );
        self.in_use += bytes;
        Ok(DevBuf::new(id, len))
    }

    fn free(&mut self, buf: DevBuf) -> Result<()> {
        // Wait (on the GPU) for its last copy; the slice is then freed on the compute stream.
        self.for_kernel([&buf])?;
        if self.bufs.remove(&buf.id()).is_some() {
            self.in_use -= buf.bytes();
        }
        Ok(())
    }

    fn pinned_allocator(&self) -> Box<dyn PinnedAlloc> {
        Box::new(CudaPinnedAlloc {
            ctx: self.ctx.clone(),
        })
    }

    fn upload(&mut self, dst: &DevBuf, src: &PinnedBuf, stream: usize) -> Result<Event> {
        let p = cuda_pinned(src)?;
        let host = p.as_slice()?;
        let Some(host) = host.get(..dst.len()) else {
            return Err(DeviceError::LengthMismatch {
                what: "upload source",
                expected: dst.len(),
                got: p.len(),
            });
        };
        let e = self.queue_copy(stream, dst, p, |s, ptr| {
            // SAFETY: `host` is page-locked memory that outlives the copy (CudaPinned waits for
            // its last copy before any host access or drop); `ptr` has `host.len()` elements.
            unsafe { cudarc::driver::result::memcpy_htod_async(ptr, host, s.cu_stream()) }
        })?;
        self.counters.uploads += 1;
        self.counters.upload_bytes += dst.bytes() as u64;
        Ok(e)
    }

    fn download(&mut self, dst: &mut PinnedBuf, src: &DevBuf, stream: usize) -> Result<Event> {
        let p = match dst.mem_mut() {
            PinnedMem::Cuda(c) => c,
            PinnedMem::Host(_) => return Err(not_cuda_pinned()),
        };
        let cap = p.len();
        if cap < src.len() {
            return Err(DeviceError::LengthMismatch {
                what: "download destination",
                expected: src.len(),
                got: cap,
            });
        }
        // Any earlier copy on the pinned buffer has finished once the pointer is taken.
        let host_ptr = p.as_mut_ptr()?;
        let p: &CudaPinned = p;
        let len = src.len();
        let e = self.queue_copy(stream, src, p, |s, ptr| {
            // SAFETY: the caller holds `dst` mutably and may not touch it before waiting for
            // the returned event (the Device contract); it has at least `len` elements.
            let host = unsafe { std::slice::from_raw_parts_mut(host_ptr, len) };
            unsafe { cudarc::driver::result::memcpy_dtoh_async(host, ptr, s.cu_stream()) }
        })?;
        self.counters.downloads += 1;
        self.counters.download_bytes += src.bytes() as u64;
        Ok(e)
    }

    fn is_complete(&mut self, event: Event) -> Result<bool> {
        let Some((_, e)) = self.events.get(&event.seq) else {
            return Ok(true);
        };
        let done = e.try_is_complete().map_err(driver)?;
        if done {
            self.events.remove(&event.seq);
        }
        Ok(done)
    }

    fn wait(&mut self, event: Event) -> Result<()> {
        if let Some((_, e)) = self.events.remove(&event.seq) {
            e.synchronize().map_err(driver)?;
        }
        Ok(())
    }

    fn synchronize(&mut self) -> Result<()> {
        self.ctx.synchronize().map_err(driver)?;
        self.events.clear();
        for b in self.bufs.values_mut() {
            b.pending = None;
        }
        Ok(())
    }

    fn counters(&self) -> DeviceCounters {
        self.counters
    }

    fn fill(&mut self, dst: &DevBuf, v: f64) -> Result<()> {
        self.unary(|k| &k.fill, dst, v)
    }

    fn scale(&mut self, dst: &DevBuf, v: f64) -> Result<()> {
        self.unary(|k| &k.scale, dst, v)
    }

    fn add_scalar(&mut self, dst: &DevBuf, v: f64) -> Result<()> {
        self.unary(|k| &k.add_scalar, dst, v)
    }

    fn copy(&mut self, dst: &DevBuf, src: &DevBuf) -> Result<()> {
        super::check_len("copy source", dst.len(), src.len())?;
        let [d, s] = self.for_kernel([dst, src])?;
        let n = dst.len() as u64;
        let f = self.kernels.copy.clone();
        let compute = self.compute.clone();
        let launched = launch(&compute, &f, dst.len(), |b| {
            b.arg(&d).arg(&s).arg(&n);
        })?;
        self.counters.kernel_launches += u64::from(launched);
        Ok(())
    }

    fn axpy(&mut self, dst: &DevBuf, alpha: f64, src: &DevBuf) -> Result<()> {
        super::check_len("axpy source", dst.len(), src.len())?;
        let [d, s] = self.for_kernel([dst, src])?;
        let n = dst.len() as u64;
        let f = self.kernels.axpy.clone();
        let compute = self.compute.clone();
        let launched = launch(&compute, &f, dst.len(), |b| {
            b.arg(&d).arg(&alpha).arg(&s).arg(&n);
        })?;
        self.counters.kernel_launches += u64::from(launched);
        Ok(())
    }

    fn add(&mut self, dst: &DevBuf, l: &DevBuf, r: &DevBuf) -> Result<()> {
        self.binary(|k| &k.add, dst, l, r)
    }

    fn sub(&mut self, dst: &DevBuf, l: &DevBuf, r: &DevBuf) -> Result<()> {
        self.binary(|k| &k.sub, dst, l, r)
    }

    fn permute(
        &mut self,
        dst: &DevBuf,
        dst_shape: &Shape,
        src: &DevBuf,
        src_shape: &Shape,
        perm: &[usize],
    ) -> Result<()> {
        self.permute_kernel(dst, dst_shape, None, src, src_shape, perm)
    }

    fn permute_add(
        &mut self,
        dst: &DevBuf,
        dst_shape: &Shape,
        alpha: f64,
        src: &DevBuf,
        src_shape: &Shape,
        perm: &[usize],
    ) -> Result<()> {
        self.permute_kernel(dst, dst_shape, Some(alpha), src, src_shape, perm)
    }

    fn gemm(&mut self, spec: &GemmSpec, a: &DevBuf, b: &DevBuf, c: &DevBuf) -> Result<()> {
        if c.id() == a.id() || c.id() == b.id() {
            return Err(DeviceError::Aliased { kernel: "gemm" });
        }
        spec.check(a.len(), b.len(), c.len())?;
        if spec.m == 0 || spec.n == 0 {
            return Ok(());
        }
        let [ap, bp, cp] = self.for_kernel([a, b, c])?;
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let m = to_int("gemm m", spec.m)?;
        let n = to_int("gemm n", spec.n)?;
        let k = to_int("gemm k", spec.k)?;
        // Leading dimensions of the packed stored matrices (at least 1, as cuBLAS requires).
        let lda = to_int("gemm lda", if spec.transa { spec.k } else { spec.m }.max(1))?;
        let ldb = to_int("gemm ldb", if spec.transb { spec.n } else { spec.k }.max(1))?;
        let (alpha, beta) = (spec.alpha, spec.beta);
        // SAFETY: the pointers are device buffers of the checked lengths (m·k, k·n, m·n) in
        // this context; alpha and beta are host scalars (the handle's default pointer mode).
        unsafe {
            blas::dgemm(
                *self.blas.handle(),
                op(spec.transa),
                op(spec.transb),
                m,
                n,
                k,
                &alpha,
                ap as *const f64,
                lda,
                bp as *const f64,
                ldb,
                &beta,
                cp as *mut f64,
                m,
            )
        }
        .map_err(cublas_err)?;
        self.counters.kernel_launches += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiled dimensions and tile counts of permutations, by `(source extents, perm)`.
    #[test]
    fn permutations_that_move_the_contiguous_dimension_are_tiled() -> Result<()> {
        type Case = (&'static [usize], &'static [usize], Option<(usize, usize)>);
        let cases: [Case; 6] = [
            // A reversal: source dimension 0 lands last; 2 x 2 tiles of 40 x 40, 40 x 40 times.
            (&[40, 40, 40, 40], &[3, 2, 1, 0], Some((3, 2 * 2 * 40 * 40))),
            // Extent 16 is one tile, 64 two.
            (&[64, 16, 40], &[1, 0, 2], Some((1, 2 * 40))),
            // The contiguous dimension stays first: the gather.
            (&[40, 40, 40, 40], &[0, 2, 1, 3], None),
            // Too short for tiles.
            (&[8, 40, 40], &[1, 0, 2], None),
            (&[40, 8, 40], &[1, 0, 2], None),
            // Behind a leading extent of 1, source dimension 1 is the contiguous one.
            (&[1, 40, 40], &[2, 1, 0], Some((1, 2 * 2))),
        ];
        for (extents, perm, want) in cases {
            let src = Shape::new(extents)?;
            let p = perm_args(&src.permuted(perm)?, &src, perm);
            let got = tiled_dimension(&p).map(|q| (q, tiles_of(&p, q)));
            assert_eq!(got, want, "{extents:?} {perm:?}");
        }
        Ok(())
    }

    #[test]
    fn discovery_never_panics() -> Result<()> {
        // Without CUDA (CI) there is simply no device; with a GPU each one opens.
        let found = discover(2)?;
        assert_eq!(found.len(), device_count());
        if device_count() == 0 {
            assert!(CudaDevice::open(0)?.is_none());
        }
        Ok(())
    }
}
