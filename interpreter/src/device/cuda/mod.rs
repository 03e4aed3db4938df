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
//! Permutations run over the CPU's simplified loop nest ([`permute_loops`]). Those that move the
//! source's contiguous loop go through square tiles in shared memory, so that both the reads
//! and the writes are coalesced (`sial_permute_tiled32/16`, [`perm_launch`]); the others are a
//! plain gather, one thread per destination element (`sial_permute`).

#[cfg(test)]
mod emulated;
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
use sial_superinstructions::{MAX_RANK, PermLoop, Shape, permute_loops};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, OnceLock};

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

/* Division by a number fixed for the launch, as a multiply-high and a shift (exact for
   numerators below 2^31; the host sets mul and shr, `Div::new`). Index arithmetic in 32 bits:
   64-bit division is a long software routine on the GPU and bounded the permutes. */
typedef unsigned int u32;
struct Div {
    u32 d, mul, shr;
};
__device__ __forceinline__ u32 quot(u32 n, Div v) {
    return v.d == 1 ? n : __umulhi(n, v.mul) >> v.shr;
}

#define MAX_RANK 6
/* A gather, one thread per destination element: the destination's extents (first fastest)
   and, for each, the source's stride. */
struct PermArgs {
    Div ext[MAX_RANK];
    u32 sstride[MAX_RANK];
    u32 rank;
};

extern "C" __global__ void sial_permute(double* d, const double* s, PermArgs p, double alpha,
                                        int accumulate, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        u32 rem = i, off = 0;
#pragma unroll
        for (u32 k = 0; k < MAX_RANK; ++k) {
            if (k + 1 < p.rank) {
                u32 q = quot(rem, p.ext[k]);
                off += (rem - q * p.ext[k].d) * p.sstride[k];
                rem = q;
            } else if (k + 1 == p.rank) {
                off += rem * p.sstride[k];
            }
        }
        if (accumulate) d[i] += alpha * s[off]; else d[i] = s[off];
    }
}

/* Square tiles through shared memory, so that the reads run along b, the source's contiguous
   loop, and the writes along a, the destination's. Where such a loop is short, a side folds a
   second loop in so that the tiles still fill: a = a_hi * a_lo.d + a_lo, at source offset
   a_lo * sa_lo + a_hi * sa_hi and destination offset a_lo + a_hi * da_hi; b likewise, at
   source offset b_lo + b_hi * sb_hi and destination offset b_lo * db_lo + b_hi * db_hi. The
   other loops and the tiles are a grid-stride loop over tile numbers. */
struct TileArgs {
    Div across, down; /* tiles along a, along b */
    u32 ea, eb;       /* extents of a and b */
    Div a_lo;
    u32 sa_lo, sa_hi, da_hi;
    Div b_lo;
    u32 sb_hi, db_lo, db_hi;
    Div ext[MAX_RANK - 2];
    u32 dstride[MAX_RANK - 2], sstride[MAX_RANK - 2];
    u32 others, tiles;
};

__device__ __forceinline__ u32 split_offset(u32 x, Div lo, u32 s_lo, u32 s_hi) {
    u32 hi = quot(x, lo);
    return (x - hi * lo.d) * s_lo + hi * s_hi;
}

/* ROWS rows of TILE threads; the padding column keeps the transposed reads of the tile free
   of bank conflicts. */
template <u32 TILE, u32 ROWS>
__device__ void permute_tiled(double* d, const double* s, const TileArgs& p, double alpha,
                              int accumulate) {
    __shared__ double tile[TILE][TILE + 1];
    for (u32 t = blockIdx.x; t < p.tiles; t += gridDim.x) {
        u32 rest = quot(t, p.across);
        u32 a0 = (t - rest * p.across.d) * TILE;
        u32 next = quot(rest, p.down);
        u32 b0 = (rest - next * p.down.d) * TILE;
        rest = next;
        u32 dbase = 0, sbase = 0;
#pragma unroll
        for (u32 k = 0; k < MAX_RANK - 2; ++k) {
            if (k < p.others) {
                u32 x = rest;
                if (k + 1 < p.others) {
                    next = quot(rest, p.ext[k]);
                    x = rest - next * p.ext[k].d;
                    rest = next;
                }
                dbase += x * p.dstride[k];
                sbase += x * p.sstride[k];
            }
        }
        /* Each thread's b while reading, and its a while writing, is the same for the tile. */
        u32 sb = split_offset(b0 + threadIdx.x, p.b_lo, 1, p.sb_hi);
        u32 da = split_offset(a0 + threadIdx.x, p.a_lo, 1, p.da_hi);
        for (u32 r = threadIdx.y; r < TILE; r += ROWS) {
            u32 a = a0 + r, b = b0 + threadIdx.x;
            if (a < p.ea && b < p.eb)
                tile[r][threadIdx.x] = s[sbase + split_offset(a, p.a_lo, p.sa_lo, p.sa_hi) + sb];
        }
        __syncthreads();
        for (u32 r = threadIdx.y; r < TILE; r += ROWS) {
            u32 a = a0 + threadIdx.x, b = b0 + r;
            if (a < p.ea && b < p.eb) {
                u32 o = dbase + da + split_offset(b, p.b_lo, p.db_lo, p.db_hi);
                double v = tile[threadIdx.x][r];
                if (accumulate) d[o] += alpha * v; else d[o] = v;
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void sial_permute_tiled32(double* d, const double* s, TileArgs p,
                                                double alpha, int accumulate) {
    permute_tiled<32, 8>(d, s, p, alpha, accumulate);
}
extern "C" __global__ void sial_permute_tiled16(double* d, const double* s, TileArgs p,
                                                double alpha, int accumulate) {
    permute_tiled<16, 16>(d, s, p, alpha, accumulate);
}
"#;

/// The tiled permute pays where both sides of a tile fill half of a 16-wide tile's rows.
const TILED_MIN_EXTENT: usize = 8;
/// A side of a tile whose loop is shorter than this folds the next loop in (a 32-wide tile).
const FOLD_BELOW: usize = 32;
/// Threads per block of the element-wise kernels and the gather.
const THREADS: u32 = 256;

/// Division by `d` as the kernels' `quot` does it: `(n * mul) >> (32 + shr)`, exact for
/// `n < 2^31` (`d == 1` is taken apart). Same layout as the C struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Div {
    d: u32,
    mul: u32,
    shr: u32,
}

impl Div {
    /// The multiplier is `ceil(2^(31 + l) / d)` with `l = ceil(log2 d)`: below 2^32, and close
    /// enough to `2^(31 + l) / d` that the rounding never reaches the next quotient below 2^31.
    fn new(d: u32) -> Div {
        if d <= 1 {
            return Div {
                d: 1,
                mul: 0,
                shr: 0,
            };
        }
        let l = 32 - (d - 1).leading_zeros();
        let p = 31 + l;
        let mul = (1u64 << p).div_ceil(u64::from(d));
        Div {
            d,
            mul: u32::try_from(mul).unwrap_or(u32::MAX),
            shr: l - 1,
        }
    }

    /// What the kernels' `quot` computes (for the tests).
    #[cfg(test)]
    fn quot(self, n: u32) -> u32 {
        if self.d == 1 {
            n
        } else {
            ((u64::from(n) * u64::from(self.mul)) >> 32) as u32 >> self.shr
        }
    }
}

/// The argument block of `sial_permute` (same layout as the C struct).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct PermArgs {
    ext: [Div; MAX_RANK],
    sstride: [u32; MAX_RANK],
    rank: u32,
}

/// The argument block of `sial_permute_tiled16/32` (same layout as the C struct).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct TileArgs {
    across: Div,
    down: Div,
    ea: u32,
    eb: u32,
    a_lo: Div,
    sa_lo: u32,
    sa_hi: u32,
    da_hi: u32,
    b_lo: Div,
    sb_hi: u32,
    db_lo: u32,
    db_hi: u32,
    ext: [Div; MAX_RANK - 2],
    dstride: [u32; MAX_RANK - 2],
    sstride: [u32; MAX_RANK - 2],
    others: u32,
    tiles: u32,
}

// SAFETY (both): plain-old-data of u32 fields with the layout of the kernels' structs
// (#[repr(C)], no padding).
unsafe impl DeviceRepr for PermArgs {}
unsafe impl DeviceRepr for TileArgs {}

/// How `dst = perm(src)` runs: a gather, or tiles of `edge` × `edge`.
#[derive(Debug)]
enum PermLaunch {
    Gather(PermArgs),
    Tiled { args: TileArgs, edge: u32 },
}

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

/// The CUDA libraries sial needs and could not load, in words; empty when all load. Where the
/// driver is missing it alone is named: the others are not looked for (each library is looked
/// for under a dozen names in every directory of the loader's path, some 200 failed opens).
///
/// The loader looks for `libcuda.so`, `libcublas.so` and `libnvrtc.so`, or their `.so.12`
/// (and older) names. CUDA 13 installs only `.so.13` names outside its development files:
/// linking them under the plain names, in a directory on `LD_LIBRARY_PATH`, is enough
/// (`benches/gpu/check.sh` does so; measured on CUDA 13.0). Looked for once per process.
pub fn missing_libraries() -> Vec<&'static str> {
    static MISSING: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    MISSING.get_or_init(look_for_libraries).clone()
}

fn look_for_libraries() -> Vec<&'static str> {
    /// A library in words, and whether it loads.
    type Probe = (&'static str, fn() -> bool);
    // SAFETY (each probe): it only tries to dlopen a library by its candidate names.
    let driver: Probe = (DRIVER, || unsafe {
        cudarc::driver::sys::is_culib_present()
    });
    let others: [Probe; 2] = [
        ("cuBLAS (libcublas.so or libcublas.so.12)", || unsafe {
            cudarc::cublas::sys::is_culib_present()
        }),
        ("NVRTC (libnvrtc.so or libnvrtc.so.12)", || unsafe {
            cudarc::nvrtc::sys::is_culib_present()
        }),
    ];
    let loads = |(_, present): &Probe| catch_unwind(present).unwrap_or(false);
    if !loads(&driver) {
        return vec![driver.0];
    }
    others
        .into_iter()
        .filter(|p| !loads(p))
        .map(|(name, _)| name)
        .collect()
}

/// True if the driver, cuBLAS and NVRTC libraries can all be loaded.
pub fn libraries_present() -> bool {
    missing_libraries().is_empty()
}

/// Number of GPUs; 0 when CUDA is not installed or no GPU is visible. Counted once per
/// process.
pub fn device_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| {
        if !libraries_present() {
            return 0;
        }
        catch_unwind(|| {
            cudarc::driver::result::init()
                .and_then(|()| CudaContext::device_count())
                .map_or(0, |n| usize::try_from(n).unwrap_or(0))
        })
        .unwrap_or(0)
    })
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
    permute_tiled16: CudaFunction,
    permute_tiled32: CudaFunction,
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
        if ctx.has_async_alloc() {
            keep_freed_memory(&ctx, capacity)?;
        }
        let compute = ctx.new_stream().map_err(driver)?;
        let copy_streams = (0..streams)
            .map(|_| ctx.new_stream().map_err(driver))
            .collect::<Result<Vec<_>>>()?;
        let blas = CudaBlas::new(compute.clone()).map_err(cublas_err)?;
        let module = ctx.load_module(kernels_ptx()?).map_err(driver)?;
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
            permute_tiled16: f("sial_permute_tiled16")?,
            permute_tiled32: f("sial_permute_tiled32")?,
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
        // The CPU kernel's checks (a permutation, matching extents) come with its loop nest.
        let loops = permute_loops(dst_shape, src_shape, perm)?;
        super::check_len("permute dst", dst_shape.len(), dst.len())?;
        super::check_len("permute src", src_shape.len(), src.len())?;
        let how = perm_launch(dst_shape.len(), &loops)?;
        let [d, s] = self.for_kernel([dst, src])?;
        let acc = i32::from(add.is_some());
        let alpha = add.unwrap_or(1.0);
        let compute = self.compute.clone();
        let launched = match how {
            _ if dst.is_empty() => false,
            PermLaunch::Tiled { args, edge } => {
                let f = if edge == 16 {
                    self.kernels.permute_tiled16.clone()
                } else {
                    self.kernels.permute_tiled32.clone()
                };
                let cfg = LaunchConfig {
                    grid_dim: (args.tiles.min(65_535), 1, 1),
                    block_dim: (edge, THREADS / edge, 1),
                    shared_mem_bytes: 0,
                };
                let mut b = compute.launch_builder(&f);
                b.arg(&d).arg(&s).arg(&args).arg(&alpha).arg(&acc);
                // SAFETY: the arguments are those of `sial_permute_tiled{edge}`, whose rows of
                // threads are THREADS / edge; the extents and strides describe buffers of the
                // checked lengths.
                unsafe { b.launch(cfg) }.map_err(driver)?;
                true
            }
            PermLaunch::Gather(args) => {
                let f = self.kernels.permute.clone();
                let n = dst.len() as u32;
                launch(&compute, &f, dst.len(), |b| {
                    b.arg(&d).arg(&s).arg(&args).arg(&alpha).arg(&acc).arg(&n);
                })?
            }
        };
        self.counters.kernel_launches += u64::from(launched);
        Ok(())
    }
}

/// [`KERNELS`] compiled once per process: every worker thread opens its own device, and
/// NVRTC takes 0.1–0.25 s of CPU per compilation.
fn kernels_ptx() -> Result<cudarc::nvrtc::Ptx> {
    static PTX: OnceLock<std::result::Result<cudarc::nvrtc::Ptx, String>> = OnceLock::new();
    PTX.get_or_init(|| cudarc::nvrtc::compile_ptx(KERNELS).map_err(|e| e.to_string()))
        .clone()
        .map_err(|reason| DeviceError::Cuda {
            api: "NVRTC",
            reason,
        })
}

/// Stream-ordered allocations (the temporaries of every permuted contraction) come from the
/// device's default pool, which by default hands freed memory back to the driver at each
/// synchronisation, so that the next temporaries were mapped afresh. The pool now keeps up
/// to 1 GiB (a sixteenth of a smaller device: several workers may share one) for reuse.
fn keep_freed_memory(ctx: &CudaContext, capacity: usize) -> Result<()> {
    use cudarc::driver::sys;
    let mut keep = (capacity / 16).min(1 << 30) as u64;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: the pool handle is written by the driver for this context's device; the
    // attribute's value is a u64 that outlives the call.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device())
            .result()
            .map_err(driver)?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        )
        .result()
        .map_err(driver)
    }
}

/// The launch of `dst = perm(src)`, a block of `len` elements, over the permutation's
/// simplified loop nest `loops` ([`permute_loops`]): tiles where the source's contiguous loop is not the destination's
/// first and both sides of a tile are at least [`TILED_MIN_EXTENT`] long (each side a loop,
/// or a loop shorter than [`FOLD_BELOW`] with the next loop of its layout that the other side
/// leaves folded in); 16-wide tiles where a side is at most 16 long; else the gather. Every index of a block below 2^31
/// elements fits the kernels' 32 bits.
fn perm_launch(len: usize, loops: &[PermLoop]) -> Result<PermLaunch> {
    to_int("permute length", len)?;
    // Every extent and stride is below the length, so below 2^31.
    let u = |x: usize| x as u32;
    let q = (1..loops.len()).find(|&k| loops[k].src_stride == 1);
    // Side a: loop 0, and where it is short the next loop in the destination that is not b's.
    let a_hi = q
        .filter(|_| loops[0].n < FOLD_BELOW)
        .and_then(|q| (1..loops.len()).find(|&k| k != q));
    // Side b: loop q, and where it is short the next loop in the source that is not a's.
    let b_hi = q.filter(|&q| loops[q].n < FOLD_BELOW).and_then(|q| {
        (1..loops.len())
            .filter(|&k| k != q && Some(k) != a_hi)
            .min_by_key(|&k| loops[k].src_stride)
    });
    let extent = |lo: usize, hi: Option<usize>| loops[lo].n * hi.map_or(1, |h| loops[h].n);
    let Some(q) =
        q.filter(|&q| extent(0, a_hi) >= TILED_MIN_EXTENT && extent(q, b_hi) >= TILED_MIN_EXTENT)
    else {
        let mut p = PermArgs {
            rank: u(loops.len()),
            ..PermArgs::default()
        };
        for (k, l) in loops.iter().enumerate() {
            p.ext[k] = Div::new(u(l.n));
            p.sstride[k] = u(l.src_stride);
        }
        return Ok(PermLaunch::Gather(p));
    };
    let (ea, eb) = (extent(0, a_hi), extent(q, b_hi));
    let edge = if ea.min(eb) <= 16 { 16 } else { 32 };
    let (across, down) = (ea.div_ceil(edge), eb.div_ceil(edge));
    let stride = |hi: Option<usize>, of: fn(&PermLoop) -> usize| hi.map_or(0, |h| of(&loops[h]));
    let mut p = TileArgs {
        across: Div::new(u(across)),
        down: Div::new(u(down)),
        ea: u(ea),
        eb: u(eb),
        a_lo: Div::new(u(if a_hi.is_some() { loops[0].n } else { ea })),
        sa_lo: u(loops[0].src_stride),
        sa_hi: u(stride(a_hi, |l| l.src_stride)),
        da_hi: u(stride(a_hi, |l| l.dst_stride)),
        b_lo: Div::new(u(if b_hi.is_some() { loops[q].n } else { eb })),
        sb_hi: u(stride(b_hi, |l| l.src_stride)),
        db_lo: u(loops[q].dst_stride),
        db_hi: u(stride(b_hi, |l| l.dst_stride)),
        ..TileArgs::default()
    };
    let mut tiles = across * down;
    let sides = [Some(0), a_hi, Some(q), b_hi];
    for (k, l) in loops.iter().enumerate() {
        if sides.contains(&Some(k)) {
            continue;
        }
        let o = p.others as usize;
        p.ext[o] = Div::new(u(l.n));
        p.dstride[o] = u(l.dst_stride);
        p.sstride[o] = u(l.src_stride);
        p.others += 1;
        tiles *= l.n;
    }
    p.tiles = u(tiles);
    Ok(PermLaunch::Tiled {
        args: p,
        edge: u(edge),
    })
}

/// [`perm_launch`] of `src` permuted by `perm` (for the tests).
#[cfg(test)]
fn perm_launch_of(src: &Shape, perm: &[usize]) -> Result<PermLaunch> {
    let dst = src.permuted(perm)?;
    perm_launch(dst.len(), &permute_loops(&dst, src, perm)?)
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
    i32::try_from(v).map_err(|_| DeviceError::TooLarge {
        what,
        max: i32::MAX as usize,
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

    /// The tile edges, tiled extents and tile counts of permutations, by `(source extents,
    /// perm)`; `None` for the gather.
    #[test]
    fn permutations_that_move_the_contiguous_dimension_are_tiled() -> Result<()> {
        type Case = (
            &'static [usize],
            &'static [usize],
            Option<(u32, u32, u32, u32)>,
        );
        let cases: [Case; 11] = [
            // A reversal: source dimension 0 lands last; 2 x 2 tiles of 40 x 40, 40 x 40 times.
            (
                &[40, 40, 40, 40],
                &[3, 2, 1, 0],
                Some((32, 40, 40, 2 * 2 * 40 * 40)),
            ),
            // The contiguous dimension stays first: the gather.
            (&[40, 40, 40, 40], &[0, 2, 1, 3], None),
            // A short side folds in the next loop of its layout that the other side leaves:
            // the destination's first loop (16) its third (40), 20 x 2 tiles of 640 x 64.
            (&[64, 16, 40], &[1, 0, 2], Some((32, 640, 64, 20 * 2))),
            // The source's contiguous loop (8, or 4) its third: 2 x 10 (or 5) tiles.
            (&[8, 40, 40], &[1, 0, 2], Some((32, 40, 320, 2 * 10))),
            (&[4, 40, 40], &[1, 0, 2], Some((32, 40, 160, 2 * 5))),
            // With nothing to fold, sides of at most 16 take 16-wide tiles; under 8, the gather.
            (&[16, 64], &[1, 0], Some((16, 64, 16, 4))),
            (&[4, 64], &[1, 0], None),
            // Behind a leading extent of 1, source dimension 1 is the contiguous one.
            (&[1, 40, 40], &[2, 1, 0], Some((32, 40, 40, 2 * 2))),
            // Six indices of 12: each side folds two loops, 144 long; 5 x 5 tiles, 12^2 times.
            (
                &[12; 6],
                &[5, 4, 3, 2, 1, 0],
                Some((32, 144, 144, 5 * 5 * 144)),
            ),
            // Dimensions that continue each other in both layouts merge: a 512^2 transpose.
            (&[8; 6], &[3, 4, 5, 0, 1, 2], Some((32, 512, 512, 16 * 16))),
            (&[16; 4], &[2, 3, 0, 1], Some((32, 256, 256, 8 * 8))),
        ];
        for (extents, perm, want) in cases {
            let src = Shape::new(extents)?;
            let got = match perm_launch_of(&src, perm)? {
                PermLaunch::Gather(_) => None,
                PermLaunch::Tiled { args, edge } => Some((edge, args.ea, args.eb, args.tiles)),
            };
            assert_eq!(got, want, "{extents:?} {perm:?}");
        }
        Ok(())
    }

    /// A block of 2^31 elements or more is refused with its length named (the kernels index
    /// in 32 bits), before anything is allocated or launched.
    #[test]
    fn permutations_of_blocks_past_32_bit_indices_are_refused() -> Result<()> {
        let src = Shape::new(&[1 << 16, 1 << 15])?;
        let err = perm_launch_of(&src, &[1, 0]).map(|_| ());
        match err {
            Err(DeviceError::TooLarge { what, got, .. }) => {
                assert_eq!((what, got), ("permute length", 1 << 31));
            }
            other => panic!("expected the length refused, got {other:?}"),
        }
        let below = Shape::new(&[(1 << 16) - 1, 1 << 15])?;
        assert!(perm_launch_of(&below, &[1, 0]).is_ok());
        Ok(())
    }

    /// The kernels' 32-bit division by a multiply and a shift is exact below 2^31: every
    /// divisor to 4,096 and then powers of two and their neighbours, against numerators at
    /// and around multiples of the divisor and up to 2^31 - 1.
    #[test]
    fn division_by_multiply_and_shift_is_exact() {
        let mut divisors: Vec<u32> = (1..=4096).collect();
        for s in 12..31 {
            divisors.extend([(1u32 << s) - 1, 1 << s, (1 << s) + 1, 3 << (s - 1)]);
        }
        divisors.push(i32::MAX as u32);
        let top = i32::MAX as u32;
        for d in divisors {
            let v = Div::new(d);
            let mut numerators: Vec<u32> = (0..64).chain(top - 64..=top).collect();
            for m in [1, 2, 3, 1000, top / d - 1, top / d] {
                let x = d.saturating_mul(m);
                numerators.extend([x.saturating_sub(1), x, x.saturating_add(1)]);
            }
            // A spread of numerators in between (a fixed multiplicative walk).
            let mut n = 1u32;
            for _ in 0..200 {
                n = n.wrapping_mul(2_654_435_761).wrapping_add(d) & top;
                numerators.push(n);
            }
            for n in numerators.into_iter().filter(|&n| n <= top) {
                assert_eq!(v.quot(n), n / d, "{n} / {d}");
            }
        }
    }

    /// The layouts the kernels' structs have (all 4-byte fields, no padding).
    #[test]
    fn argument_blocks_have_the_kernels_layout() {
        assert_eq!(std::mem::size_of::<Div>(), 12);
        assert_eq!(std::mem::size_of::<PermArgs>(), 12 * 6 + 4 * 6 + 4);
        let sides = 12 * 2 + 4 * 2 + 2 * (12 + 4 * 3);
        assert_eq!(
            std::mem::size_of::<TileArgs>(),
            sides + 12 * 4 + 4 * 8 + 4 * 2
        );
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
