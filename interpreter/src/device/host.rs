//! [`HostDevice`]: the [`Device`] trait in host memory, so CI (which has no GPU) runs the whole
//! device path — versioned copies, asynchronous transfers, eviction, placement — for real.
//!
//! Its "device memory" is separate storage (one `Vec<f64>` per buffer) addressed by
//! [`DevBuf`] handles. Copies run asynchronously on background threads, one per stream, in the
//! order queued; each completes its [`Event`]. Kernels run on the calling thread with the CPU
//! kernels of `sial_superinstructions`, after waiting for any copy still in flight on their
//! buffers. Memory safety never depends on that ordering (every buffer sits behind a mutex);
//! the waits are what make the results right.

use super::pinned::{HostAlloc, PinnedMem, lock};
use super::{
    DevBuf, Device, DeviceCounters, DeviceError, Event, F64_BYTES, GemmSpec, PinnedAlloc,
    PinnedBuf, Result,
};
use crossbeam_channel::{Sender, unbounded};
use sial_superinstructions as k;
use sial_superinstructions::Shape;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Settings of a [`HostDevice`].
#[derive(Clone, Debug)]
pub struct HostDeviceConfig {
    /// Copy streams (threads); at least 1.
    pub streams: usize,
    /// "Device memory" in bytes.
    pub capacity: usize,
    /// Extra time each copy takes, to make copies observably asynchronous in tests.
    pub copy_delay: Duration,
}

impl Default for HostDeviceConfig {
    fn default() -> Self {
        HostDeviceConfig {
            streams: 2,
            capacity: 1 << 30,
            copy_delay: Duration::ZERO,
        }
    }
}

type Storage = Arc<Mutex<Vec<f64>>>;

/// One buffer of "device memory".
struct Buf {
    data: Storage,
    len: usize,
    /// The last copy queued on this buffer, until a kernel or copy has waited for it.
    pending: Option<Event>,
}

/// A copy for a stream thread: `len` elements from `src` to `dst`.
struct Job {
    seq: u64,
    src: Storage,
    dst: Storage,
    len: usize,
}

/// What a stream thread has done.
#[derive(Default)]
struct Progress {
    done: u64,
    error: Option<String>,
}

/// One copy stream: a thread and its progress.
struct Stream {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    progress: Arc<(Mutex<Progress>, Condvar)>,
    queued: u64,
}

/// A [`Device`] in host memory with asynchronous copy threads.
pub struct HostDevice {
    name: String,
    capacity: usize,
    in_use: usize,
    next_id: u64,
    bufs: HashMap<u64, Buf>,
    streams: Vec<Stream>,
    counters: DeviceCounters,
}

impl HostDevice {
    /// A device with the given settings; starts one copy thread per stream.
    pub fn new(config: &HostDeviceConfig) -> Result<Self> {
        let mut streams = Vec::new();
        for s in 0..config.streams.max(1) {
            let (tx, rx) = unbounded::<Job>();
            let progress = Arc::new((Mutex::new(Progress::default()), Condvar::new()));
            let p = progress.clone();
            let delay = config.copy_delay;
            let thread = std::thread::Builder::new()
                .name(format!("host-device-copy-{s}"))
                .spawn(move || {
                    for job in rx {
                        if !delay.is_zero() {
                            std::thread::sleep(delay);
                        }
                        let result = copy_job(&job);
                        let (m, cv) = &*p;
                        let mut g = match m.lock() {
                            Ok(g) => g,
                            Err(poisoned) => poisoned.into_inner(),
                        };
                        if let Err(e) = result
                            && g.error.is_none()
                        {
                            g.error = Some(e);
                        }
                        g.done = job.seq;
                        cv.notify_all();
                    }
                })
                .map_err(|e| DeviceError::CopyStream {
                    stream: s,
                    reason: format!("cannot start the copy thread: {e}"),
                })?;
            streams.push(Stream {
                tx: Some(tx),
                thread: Some(thread),
                progress,
                queued: 0,
            });
        }
        Ok(HostDevice {
            name: "host device".into(),
            capacity: config.capacity,
            in_use: 0,
            next_id: 1,
            bufs: HashMap::new(),
            streams,
            counters: DeviceCounters::default(),
        })
    }

    /// Two streams and 1 GiB of "device memory".
    pub fn with_defaults() -> Result<Self> {
        Self::new(&HostDeviceConfig::default())
    }

    fn buf(&self, b: &DevBuf) -> Result<&Buf> {
        self.bufs
            .get(&b.id())
            .filter(|x| x.len == b.len())
            .ok_or_else(|| DeviceError::UnknownBuffer {
                device: self.name.clone(),
                id: b.id(),
            })
    }

    /// Waits for the copy in flight on `b`, if any; returns its storage.
    fn settle(&mut self, b: &DevBuf) -> Result<Storage> {
        let pending = self.buf(b)?.pending;
        if let Some(e) = pending {
            self.wait(e)?;
        }
        let buf = self
            .bufs
            .get_mut(&b.id())
            .ok_or_else(|| DeviceError::UnknownBuffer {
                device: self.name.clone(),
                id: b.id(),
            })?;
        buf.pending = None;
        Ok(buf.data.clone())
    }

    /// Queues a copy on `stream` and records it as pending on the device buffer `dev`.
    fn queue(&mut self, stream: usize, dev: u64, job: (Storage, Storage, usize)) -> Result<Event> {
        let streams = self.streams.len();
        let s = self
            .streams
            .get_mut(stream)
            .ok_or(DeviceError::NoSuchStream { stream, streams })?;
        s.queued += 1;
        let seq = s.queued;
        let (src, dst, len) = job;
        let sent =
            s.tx.as_ref()
                .map(|tx| tx.send(Job { seq, src, dst, len }).is_ok())
                .unwrap_or(false);
        if !sent {
            return Err(DeviceError::CopyStream {
                stream,
                reason: "the copy thread has stopped".into(),
            });
        }
        let event = Event { stream, seq };
        if let Some(b) = self.bufs.get_mut(&dev) {
            b.pending = Some(event);
        }
        Ok(event)
    }

    /// Runs `f(dst, inputs)` on the calling thread after the copies in flight on every buffer
    /// involved; an input that is the destination itself is read from a snapshot.
    fn kernel<const N: usize>(
        &mut self,
        dst: &DevBuf,
        inputs: [&DevBuf; N],
        f: impl FnOnce(&mut [f64], [&[f64]; N]) -> Result<()>,
    ) -> Result<()> {
        let d = self.settle(dst)?;
        let mut srcs = Vec::with_capacity(N);
        for i in inputs {
            srcs.push((i.id() == dst.id(), self.settle(i)?));
        }
        self.counters.kernel_launches += 1;
        let mut dg = lock(&d)?;
        // A snapshot for inputs that are the destination; one guard per other distinct input
        // (an input given twice is locked once: a mutex cannot be locked twice).
        let snapshot: Vec<f64> = if srcs.iter().any(|(alias, _)| *alias) {
            dg.clone()
        } else {
            Vec::new()
        };
        let ids = inputs.map(|b| b.id());
        let first = |i: usize| ids.iter().position(|&x| x == ids[i]).unwrap_or(i);
        let mut guards: Vec<Option<MutexGuard<'_, Vec<f64>>>> = Vec::with_capacity(N);
        for (i, (alias, s)) in srcs.iter().enumerate() {
            let locked = !*alias && first(i) == i;
            guards.push(if locked { Some(lock(s)?) } else { None });
        }
        let slices: [&[f64]; N] = std::array::from_fn(|i| {
            if srcs[i].0 {
                snapshot.as_slice()
            } else {
                guards[first(i)]
                    .as_deref()
                    .map_or(&[][..], |g| g.as_slice())
            }
        });
        f(&mut dg, slices)
    }
}

impl Drop for HostDevice {
    fn drop(&mut self) {
        for s in &mut self.streams {
            s.tx = None;
            if let Some(t) = s.thread.take() {
                // A copy thread that panicked has nothing left to clean up.
                let _ = t.join();
            }
        }
    }
}

/// One copy; the two buffers are locked in address order so that two streams copying between
/// the same pair in opposite directions cannot deadlock.
fn copy_job(job: &Job) -> std::result::Result<(), String> {
    if Arc::ptr_eq(&job.src, &job.dst) {
        return Ok(());
    }
    let poisoned = |_| "a buffer lock is poisoned".to_string();
    let src_first = Arc::as_ptr(&job.src) < Arc::as_ptr(&job.dst);
    let (src, mut dst) = if src_first {
        let s = job.src.lock().map_err(poisoned)?;
        let d = job.dst.lock().map_err(poisoned)?;
        (s, d)
    } else {
        let d = job.dst.lock().map_err(poisoned)?;
        let s = job.src.lock().map_err(poisoned)?;
        (s, d)
    };
    match (src.get(..job.len), dst.get_mut(..job.len)) {
        (Some(s), Some(d)) => {
            d.copy_from_slice(s);
            Ok(())
        }
        _ => Err(format!(
            "copy of {} elements between buffers of {} and {}",
            job.len,
            src.len(),
            dst.len()
        )),
    }
}

fn lock_len(m: &Mutex<Vec<f64>>) -> usize {
    match m.lock() {
        Ok(v) => v.len(),
        Err(poisoned) => poisoned.into_inner().len(),
    }
}

fn host_storage(p: &PinnedBuf) -> Result<Storage> {
    match p.mem() {
        PinnedMem::Host(m) => Ok(m.clone()),
        PinnedMem::Cuda(_) => Err(DeviceError::Protocol(
            "a CUDA pinned buffer was given to the host device".into(),
        )),
    }
}

impl Device for HostDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn streams(&self) -> usize {
        self.streams.len()
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
        let id = self.next_id;
        self.next_id += 1;
        self.bufs.insert(
            id,
            Buf {
                data: Arc::new(Mutex::new(vec![0.0; len])),
                len,
                pending: None,
            },
        );
        self.in_use += bytes;
        Ok(DevBuf::new(id, len))
    }

    fn free(&mut self, buf: DevBuf) -> Result<()> {
        self.settle(&buf)?;
        if self.bufs.remove(&buf.id()).is_some() {
            self.in_use -= buf.bytes();
        }
        Ok(())
    }

    fn pinned_allocator(&self) -> Box<dyn PinnedAlloc> {
        Box::new(HostAlloc)
    }

    fn upload(&mut self, dst: &DevBuf, src: &PinnedBuf, stream: usize) -> Result<Event> {
        let d = self.settle(dst)?;
        let s = host_storage(src)?;
        let cap = lock_len(&s);
        if cap < dst.len() {
            return Err(DeviceError::LengthMismatch {
                what: "upload source",
                expected: dst.len(),
                got: cap,
            });
        }
        let e = self.queue(stream, dst.id(), (s, d, dst.len()))?;
        self.counters.uploads += 1;
        self.counters.upload_bytes += dst.bytes() as u64;
        Ok(e)
    }

    fn download(&mut self, dst: &mut PinnedBuf, src: &DevBuf, stream: usize) -> Result<Event> {
        let s = self.settle(src)?;
        let d = host_storage(dst)?;
        let cap = lock_len(&d);
        if cap < src.len() {
            return Err(DeviceError::LengthMismatch {
                what: "download destination",
                expected: src.len(),
                got: cap,
            });
        }
        let e = self.queue(stream, src.id(), (s, d, src.len()))?;
        self.counters.downloads += 1;
        self.counters.download_bytes += src.bytes() as u64;
        Ok(e)
    }

    fn is_complete(&mut self, event: Event) -> Result<bool> {
        let streams = self.streams.len();
        let s = self
            .streams
            .get(event.stream)
            .ok_or(DeviceError::NoSuchStream {
                stream: event.stream,
                streams,
            })?;
        let g = lock(&s.progress.0)?;
        if let Some(e) = &g.error {
            return Err(DeviceError::CopyStream {
                stream: event.stream,
                reason: e.clone(),
            });
        }
        Ok(g.done >= event.seq)
    }

    fn wait(&mut self, event: Event) -> Result<()> {
        let streams = self.streams.len();
        let s = self
            .streams
            .get(event.stream)
            .ok_or(DeviceError::NoSuchStream {
                stream: event.stream,
                streams,
            })?;
        let (m, cv) = &*s.progress;
        let mut g = lock(m)?;
        while g.done < event.seq && g.error.is_none() {
            g = cv.wait(g).map_err(|_| DeviceError::CopyStream {
                stream: event.stream,
                reason: "progress lock poisoned".into(),
            })?;
        }
        match &g.error {
            Some(e) => Err(DeviceError::CopyStream {
                stream: event.stream,
                reason: e.clone(),
            }),
            None => Ok(()),
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        for stream in 0..self.streams.len() {
            let seq = self.streams[stream].queued;
            self.wait(Event { stream, seq })?;
        }
        for b in self.bufs.values_mut() {
            b.pending = None;
        }
        Ok(())
    }

    fn counters(&self) -> DeviceCounters {
        self.counters
    }

    fn fill(&mut self, dst: &DevBuf, v: f64) -> Result<()> {
        self.kernel(dst, [], |d, []| {
            k::fill(d, v);
            Ok(())
        })
    }

    fn scale(&mut self, dst: &DevBuf, v: f64) -> Result<()> {
        self.kernel(dst, [], |d, []| {
            k::scale(d, v);
            Ok(())
        })
    }

    fn add_scalar(&mut self, dst: &DevBuf, v: f64) -> Result<()> {
        self.kernel(dst, [], |d, []| {
            k::add_scalar(d, v);
            Ok(())
        })
    }

    fn copy(&mut self, dst: &DevBuf, src: &DevBuf) -> Result<()> {
        self.kernel(dst, [src], |d, [s]| Ok(k::copy(d, s)?))
    }

    fn axpy(&mut self, dst: &DevBuf, alpha: f64, src: &DevBuf) -> Result<()> {
        self.kernel(dst, [src], |d, [s]| Ok(k::axpy(d, alpha, s)?))
    }

    fn add(&mut self, dst: &DevBuf, l: &DevBuf, r: &DevBuf) -> Result<()> {
        self.kernel(dst, [l, r], |d, [l, r]| Ok(k::add(d, l, r)?))
    }

    fn sub(&mut self, dst: &DevBuf, l: &DevBuf, r: &DevBuf) -> Result<()> {
        self.kernel(dst, [l, r], |d, [l, r]| Ok(k::sub(d, l, r)?))
    }

    fn permute(
        &mut self,
        dst: &DevBuf,
        dst_shape: &Shape,
        src: &DevBuf,
        src_shape: &Shape,
        perm: &[usize],
    ) -> Result<()> {
        if dst.id() == src.id() {
            return Err(DeviceError::Aliased { kernel: "permute" });
        }
        self.kernel(dst, [src], |d, [s]| {
            Ok(k::permute(d, dst_shape, s, src_shape, perm)?)
        })
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
        if dst.id() == src.id() {
            return Err(DeviceError::Aliased {
                kernel: "permute_add",
            });
        }
        self.kernel(dst, [src], |d, [s]| {
            Ok(k::permute_add(d, dst_shape, alpha, s, src_shape, perm)?)
        })
    }

    fn gemm(&mut self, spec: &GemmSpec, a: &DevBuf, b: &DevBuf, c: &DevBuf) -> Result<()> {
        if c.id() == a.id() || c.id() == b.id() {
            return Err(DeviceError::Aliased { kernel: "gemm" });
        }
        spec.check(a.len(), b.len(), c.len())?;
        self.kernel(c, [a, b], |c, [a, b]| {
            gemm_ref(spec, a, b, c);
            Ok(())
        })
    }
}

/// A plain column-major GEMM (lengths checked by the caller). Not fast: the host device exists
/// to test the device path, not to compute.
fn gemm_ref(s: &GemmSpec, a: &[f64], b: &[f64], c: &mut [f64]) {
    let (m, n, kk) = (s.m, s.n, s.k);
    for j in 0..n {
        let col = &mut c[j * m..(j + 1) * m];
        if s.beta == 0.0 {
            col.fill(0.0);
        } else if s.beta != 1.0 {
            col.iter_mut().for_each(|x| *x *= s.beta);
        }
        for p in 0..kk {
            let bv = s.alpha
                * if s.transb {
                    b[j + p * n]
                } else {
                    b[p + j * kk]
                };
            if s.transa {
                // A stored k×m: element (i, p) at p + i*k.
                for (i, x) in col.iter_mut().enumerate() {
                    *x += a[p + i * kk] * bv;
                }
            } else {
                for (x, &av) in col.iter_mut().zip(&a[p * m..(p + 1) * m]) {
                    *x += av * bv;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::contract_on;
    use sial_superinstructions::{ContractionPlan, Label};

    /// Deterministic values in [-1, 1).
    fn data(len: usize, seed: u64) -> Vec<f64> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    fn put(dev: &mut HostDevice, v: &[f64]) -> Result<DevBuf> {
        let b = dev.alloc(v.len())?;
        let mut p = HostAlloc.alloc(v.len())?;
        p.write()?.copy_from_slice(v);
        let e = dev.upload(&b, &p, 0)?;
        dev.wait(e)?;
        Ok(b)
    }

    fn get(dev: &mut HostDevice, b: &DevBuf) -> Result<Vec<f64>> {
        let mut p = HostAlloc.alloc(b.len())?;
        let e = dev.download(&mut p, b, 1)?;
        dev.wait(e)?;
        Ok(p.read()?.to_vec())
    }

    fn close(got: &[f64], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
                "{what}: element {i} is {g}, expected {w}"
            );
        }
    }

    #[test]
    fn elementwise_and_permute_kernels_match_the_cpu() -> Result<()> {
        let mut dev = HostDevice::with_defaults()?;
        let n = 3 * 4 * 5 * 2;
        let (a, b) = (data(n, 1), data(n, 2));
        let (da, db, dd) = (put(&mut dev, &a)?, put(&mut dev, &b)?, dev.alloc(n)?);

        dev.fill(&dd, 2.5)?;
        assert_eq!(get(&mut dev, &dd)?, vec![2.5; n]);

        let mut want = a.clone();
        k::scale(&mut want, -0.5);
        dev.copy(&dd, &da)?;
        dev.scale(&dd, -0.5)?;
        assert_eq!(get(&mut dev, &dd)?, want);

        k::add_scalar(&mut want, 3.0);
        dev.add_scalar(&dd, 3.0)?;
        assert_eq!(get(&mut dev, &dd)?, want);

        k::axpy(&mut want, 0.75, &b)?;
        dev.axpy(&dd, 0.75, &db)?;
        assert_eq!(get(&mut dev, &dd)?, want);

        // dst += 2 * dst: an input that is the destination reads the old values.
        let before = want.clone();
        k::axpy(&mut want, 2.0, &before)?;
        dev.axpy(&dd, 2.0, &dd)?;
        assert_eq!(get(&mut dev, &dd)?, want);

        // An input given twice.
        k::add(&mut want, &b, &b)?;
        dev.add(&dd, &db, &db)?;
        assert_eq!(get(&mut dev, &dd)?, want);

        k::add(&mut want, &a, &b)?;
        dev.add(&dd, &da, &db)?;
        assert_eq!(get(&mut dev, &dd)?, want);
        k::sub(&mut want, &a, &b)?;
        dev.sub(&dd, &da, &db)?;
        assert_eq!(get(&mut dev, &dd)?, want);

        let src = Shape::new(&[3, 4, 5, 2])?;
        for perm in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]] {
            let dst = src.permuted(&perm)?;
            let mut want = vec![0.0; n];
            k::permute(&mut want, &dst, &a, &src, &perm)?;
            dev.permute(&dd, &dst, &da, &src, &perm)?;
            assert_eq!(get(&mut dev, &dd)?, want, "permute {perm:?}");
            k::permute_add(&mut want, &dst, -1.5, &b, &src, &perm)?;
            dev.permute_add(&dd, &dst, -1.5, &db, &src, &perm)?;
            assert_eq!(get(&mut dev, &dd)?, want, "permute_add {perm:?}");
        }
        assert_eq!(dev.counters().uploads, 2);
        Ok(())
    }

    #[test]
    fn gemm_matches_a_naive_product() -> Result<()> {
        let mut dev = HostDevice::with_defaults()?;
        let (m, n, kk) = (5, 4, 3);
        let (a, b, c0) = (data(m * kk, 3), data(kk * n, 4), data(m * n, 5));
        let (da, db, dc) = (put(&mut dev, &a)?, put(&mut dev, &b)?, dev.alloc(m * n)?);
        for (transa, transb) in [(false, false), (true, false), (false, true), (true, true)] {
            for (alpha, beta) in [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.25)] {
                let spec = GemmSpec {
                    m,
                    n,
                    k: kk,
                    transa,
                    transb,
                    alpha,
                    beta,
                };
                let mut want = c0.clone();
                for j in 0..n {
                    for i in 0..m {
                        let mut s = 0.0;
                        for p in 0..kk {
                            let av = if transa { a[p + i * kk] } else { a[i + p * m] };
                            let bv = if transb { b[j + p * n] } else { b[p + j * kk] };
                            s += av * bv;
                        }
                        want[i + j * m] = alpha * s + beta * c0[i + j * m];
                    }
                }
                // beta 0 must not read C: start from NaN.
                let start = if beta == 0.0 {
                    vec![f64::NAN; m * n]
                } else {
                    c0.clone()
                };
                let mut p = HostAlloc.alloc(m * n)?;
                p.write()?.copy_from_slice(&start);
                let e = dev.upload(&dc, &p, 0)?;
                dev.wait(e)?;
                dev.gemm(&spec, &da, &db, &dc)?;
                close(&get(&mut dev, &dc)?, &want, &format!("{spec:?}"));
            }
        }
        assert!(matches!(
            dev.gemm(
                &GemmSpec {
                    m: 2,
                    n,
                    k: kk,
                    transa: false,
                    transb: false,
                    alpha: 1.0,
                    beta: 0.0
                },
                &da,
                &db,
                &dc
            ),
            Err(DeviceError::LengthMismatch { .. })
        ));
        Ok(())
    }

    const I: Label = 1;
    const J: Label = 2;
    const K: Label = 3;
    const L: Label = 4;
    const A: Label = 5;
    const B: Label = 6;

    fn extent(l: Label) -> usize {
        match l {
            A => 3,
            B => 4,
            I => 2,
            J => 5,
            K => 6,
            L => 7,
            _ => 1,
        }
    }

    /// Runs `d = l * r` on the device for beta 0, 1 and 0.5 and compares with the CPU plan.
    fn check_contract(
        dl: &[Label],
        ll: &[Label],
        rl: &[Label],
        seed: u64,
    ) -> Result<sial_superinstructions::Permutes> {
        let shape = |ls: &[Label]| Shape::new(&ls.iter().map(|&l| extent(l)).collect::<Vec<_>>());
        let (ds, ls, rs) = (shape(dl)?, shape(ll)?, shape(rl)?);
        let plan = ContractionPlan::new((dl, &ds), (ll, &ls), (rl, &rs))?;
        let (l, r, d0) = (
            data(ls.len(), seed),
            data(rs.len(), seed + 1),
            data(ds.len(), seed + 2),
        );
        let mut dev = HostDevice::with_defaults()?;
        let (dlb, drb) = (put(&mut dev, &l)?, put(&mut dev, &r)?);
        for beta in [0.0, 1.0, 0.5] {
            let start = if beta == 0.0 {
                vec![f64::NAN; ds.len()]
            } else {
                d0.clone()
            };
            let mut want = start.clone();
            plan.execute(&mut want, &l, &r, beta)?;
            let dd = put(&mut dev, &start)?;
            let in_use = dev.bytes_in_use();
            contract_on(&mut dev, &plan, &dd, &dlb, &drb, beta)?;
            // Every temporary was freed.
            assert_eq!(dev.bytes_in_use(), in_use);
            close(
                &get(&mut dev, &dd)?,
                &want,
                &format!(
                    "d{dl:?} = l{ll:?} * r{rl:?}, beta {beta}, {:?}",
                    plan.permutes()
                ),
            );
            dev.free(dd)?;
        }
        Ok(plan.permutes())
    }

    #[test]
    fn contractions_match_the_cpu_plan() -> Result<()> {
        let mut seed = 10;
        let mut seen = Vec::new();
        // Matrix products in every layout (no permutes; transposed and swapped GEMMs).
        for dl in [[I, J], [J, I]] {
            for ll in [[I, K], [K, I]] {
                for rl in [[K, J], [J, K]] {
                    seed += 3;
                    seen.push(check_contract(&dl, &ll, &rl, seed)?);
                }
            }
        }
        // Four-index: in place, left permuted, right permuted, result permuted, everything.
        seen.push(check_contract(
            &[A, B, I, J],
            &[A, B, K, L],
            &[K, L, I, J],
            40,
        )?);
        seen.push(check_contract(
            &[A, B, I, J],
            &[K, A, L, B],
            &[K, L, I, J],
            41,
        )?);
        seen.push(check_contract(
            &[A, B, I, J],
            &[A, B, K, L],
            &[I, L, J, K],
            42,
        )?);
        seen.push(check_contract(
            &[A, I, B, J],
            &[A, B, K, L],
            &[K, L, I, J],
            43,
        )?);
        seen.push(check_contract(
            &[J, A, I, B],
            &[L, B, K, A],
            &[I, K, J, L],
            44,
        )?);
        // Outer product, matrix-vector, full contraction, empty sum.
        seen.push(check_contract(&[I, K, J, L], &[I, J], &[K, L], 45)?);
        seen.push(check_contract(&[I], &[K, I], &[K], 46)?);
        seen.push(check_contract(&[], &[I, J], &[J, I], 47)?);
        // A simple index of extent 1 (label 9) on both sides.
        seen.push(check_contract(&[I, 9, J], &[I, K, 9], &[K, J], 48)?);
        // Every step of a plan was exercised on the device.
        assert!(seen.iter().any(|p| p.left) && seen.iter().any(|p| p.right));
        assert!(seen.iter().any(|p| p.dst));
        Ok(())
    }

    #[test]
    fn contraction_with_a_zero_extent_is_the_beta_part() -> Result<()> {
        let (ds, ls, rs) = (
            Shape::new(&[2, 2])?,
            Shape::new(&[2, 0])?,
            Shape::new(&[0, 2])?,
        );
        let plan = ContractionPlan::new((&[I, J], &ds), (&[I, K], &ls), (&[K, J], &rs))?;
        let mut dev = HostDevice::with_defaults()?;
        let d = put(&mut dev, &[1.0; 4])?;
        let (l, r) = (dev.alloc(0)?, dev.alloc(0)?);
        dev.contract(&plan, &d, &l, &r, 0.5)?;
        assert_eq!(get(&mut dev, &d)?, vec![0.5; 4]);
        Ok(())
    }

    #[test]
    fn a_kernel_after_an_async_upload_sees_the_data() -> Result<()> {
        let mut dev = HostDevice::new(&HostDeviceConfig {
            copy_delay: Duration::from_millis(50),
            ..HostDeviceConfig::default()
        })?;
        let n = 1 << 21;
        let v = data(n, 7);
        let b = dev.alloc(n)?;
        let mut p = HostAlloc.alloc(n)?;
        p.write()?.copy_from_slice(&v);
        let e = dev.upload(&b, &p, 0)?;
        // The copy is still in flight (it sleeps first) ...
        assert!(!dev.is_complete(e)?);
        // ... and the kernel waits for it.
        dev.scale(&b, 2.0)?;
        assert!(dev.is_complete(e)?);
        let got = get(&mut dev, &b)?;
        assert!(got.iter().zip(&v).all(|(g, x)| *g == 2.0 * x));
        // Copies on two streams to two buffers run side by side; synchronize waits for both.
        let c = dev.alloc(n)?;
        dev.upload(&b, &p, 0)?;
        dev.upload(&c, &p, 1)?;
        dev.synchronize()?;
        assert_eq!(get(&mut dev, &c)?, v);
        assert_eq!(dev.counters().uploads, 3);
        assert_eq!(dev.counters().download_bytes, 2 * (n * F64_BYTES) as u64);
        Ok(())
    }

    #[test]
    fn misuse_is_an_error_not_a_panic() -> Result<()> {
        let mut dev = HostDevice::new(&HostDeviceConfig {
            capacity: 100 * F64_BYTES,
            ..HostDeviceConfig::default()
        })?;
        let a = dev.alloc(60)?;
        assert!(matches!(
            dev.alloc(41),
            Err(DeviceError::OutOfMemory { .. })
        ));
        let b = dev.alloc(40)?;
        assert!(matches!(dev.copy(&a, &b), Err(DeviceError::Kernel(_))));
        let s = Shape::new(&[6, 10])?;
        assert!(matches!(
            dev.permute(&a, &s, &a, &s, &[1, 0]),
            Err(DeviceError::Aliased { .. })
        ));
        assert!(matches!(
            dev.permute(&b, &Shape::new(&[4, 10])?, &a, &s, &[1, 0]),
            Err(DeviceError::Kernel(_))
        ));
        let p = HostAlloc.alloc(10)?;
        assert!(matches!(
            dev.upload(&a, &p, 0),
            Err(DeviceError::LengthMismatch { .. })
        ));
        assert!(matches!(
            dev.upload(&b, &HostAlloc.alloc(40)?, 5),
            Err(DeviceError::NoSuchStream { .. })
        ));
        dev.free(a)?;
        assert!(matches!(
            dev.fill(&a, 1.0),
            Err(DeviceError::UnknownBuffer { .. })
        ));
        assert_eq!(dev.bytes_in_use(), 40 * F64_BYTES);
        Ok(())
    }
}
