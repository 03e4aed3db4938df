//! The versioned copies of blocks on the host and on one device (DESIGN §3 "Devices").
//!
//! Every block has a host version and at most one device copy with its own version; a write
//! bumps the version of the copy written to one past the newest. Before a use on the device,
//! the copy is brought up to the newest version only if the instruction reads the block
//! (`Read`/`Update`): write-only use needs no transfer. Before a host use, a newer device
//! copy is downloaded only if the host reads. So a chain of device instructions on resident
//! blocks uploads its inputs once and downloads only what the host finally reads.
//!
//! Uploads are asynchronous: the host data is staged in a pinned buffer (from the
//! [`PinnedCache`]), the copy is queued, and the device copy remembers the copy's event and
//! buffer; the device makes kernels on that buffer wait for the copy, and the pinned buffer
//! goes back to the cache once the copy is complete. Downloads wait (the host needs the data).
//!
//! Device memory is bounded by a budget: when an allocation does not fit, the least recently
//! used device copies not used by the current instruction are dropped — a clean one (host as
//! new) is simply freed, a dirty one is first downloaded and handed to the caller, who stores
//! it as the block's host data (see [`DeviceCopies::for_device`]).
//!
//! One `DeviceCopies` serves one device; a worker with several GPUs would keep one per GPU
//! (SIAL's natural split is one worker per GPU).

use super::pinned::PinnedCache;
use super::{DevBuf, Device, DeviceError, Event, F64_BYTES, PinnedBuf, PinnedStats, Result};
use std::collections::HashMap;
use std::hash::Hash;

/// How an instruction uses a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Reads only.
    Read,
    /// Overwrites every element without reading.
    Write,
    /// Reads and writes (`+=`, `*=`).
    Update,
}

impl Intent {
    fn reads(self) -> bool {
        matches!(self, Intent::Read | Intent::Update)
    }

    fn writes(self) -> bool {
        matches!(self, Intent::Write | Intent::Update)
    }
}

/// Where the newest data of a block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// Only the host copy is current (also for a block never placed on the device).
    Host,
    /// Only the device copy is current.
    Device,
    /// Both copies are current.
    Both,
}

/// Figures of the device path, for the end-of-run summary and `--stats`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuStats {
    /// The device's name.
    pub device: String,
    /// Host-to-device transfers of block data and their bytes.
    pub uploads: u64,
    pub upload_bytes: u64,
    /// Device-to-host transfers (reads and write-backs) and their bytes.
    pub downloads: u64,
    pub download_bytes: u64,
    /// Instructions run on the device and, by the caller's count, on the host.
    pub device_instructions: u64,
    pub host_instructions: u64,
    /// Kernels the device ran.
    pub kernel_launches: u64,
    /// Device copies dropped to make room, and how many of them had to be written back.
    pub evictions: u64,
    pub write_backs: u64,
    /// The pinned-memory cache.
    pub pinned: PinnedStats,
    /// `pinned.hit_ratio()`, spelled out for the JSON.
    pub pinned_hit_ratio: f64,
}

impl GpuStats {
    /// Adds another run's (or worker's) figures; peaks take the larger.
    pub fn add(&mut self, o: &GpuStats) {
        if self.device.is_empty() {
            self.device = o.device.clone();
        }
        self.uploads += o.uploads;
        self.upload_bytes += o.upload_bytes;
        self.downloads += o.downloads;
        self.download_bytes += o.download_bytes;
        self.device_instructions += o.device_instructions;
        self.host_instructions += o.host_instructions;
        self.kernel_launches += o.kernel_launches;
        self.evictions += o.evictions;
        self.write_backs += o.write_backs;
        let p = &mut self.pinned;
        p.hits += o.pinned.hits;
        p.misses += o.pinned.misses;
        p.alloc_seconds += o.pinned.alloc_seconds;
        p.bytes_pinned = p.bytes_pinned.max(o.pinned.bytes_pinned);
        p.peak_bytes = p.peak_bytes.max(o.pinned.peak_bytes);
        p.released += o.pinned.released;
        self.pinned_hit_ratio = p.hit_ratio();
    }
}

/// An upload in flight: its event and the staging buffer it reads.
struct Pending {
    event: Event,
    pinned: PinnedBuf,
    /// When the upload was issued (its span on the timeline ends when it is seen complete),
    /// and its size.
    issued: std::time::Instant,
    bytes: usize,
}

impl Pending {
    /// The upload is complete: on the timeline, from its issue until now.
    fn traced(&self) {
        let bytes = self.bytes.into();
        crate::trace::span_beside(" copy stream 0", "upload", self.issued, &[("bytes", bytes)]);
    }
}

/// The device copy of a block.
struct DevCopy {
    buf: DevBuf,
    version: u64,
    pending: Option<Pending>,
}

/// What is known of one block.
struct Entry {
    host: u64,
    dev: Option<DevCopy>,
    /// LRU clock of the last use on the device.
    last_use: u64,
    /// The instruction that last used the device copy (such copies are not evicted).
    instruction: u64,
}

impl Entry {
    fn newest(&self) -> u64 {
        self.dev
            .as_ref()
            .map_or(self.host, |d| d.version.max(self.host))
    }
}

/// Versioned block copies on one device; see the module documentation.
pub struct DeviceCopies<K> {
    dev: Box<dyn Device>,
    pinned: PinnedCache,
    budget: usize,
    entries: HashMap<K, Entry>,
    /// Keys whose device copy may have an upload in flight.
    in_flight: Vec<K>,
    clock: u64,
    instruction: u64,
    stats: GpuStats,
}

impl<K: Hash + Eq + Copy> DeviceCopies<K> {
    /// Copies on `dev`, using at most `budget` bytes of its memory (capped at its capacity)
    /// and at most `pinned_budget` bytes of pinned host memory (`--pinned-memory`).
    /// Bytes of device memory the copies may use.
    pub fn budget(&self) -> usize {
        self.budget
    }

    pub fn new(dev: Box<dyn Device>, budget: usize, pinned_budget: usize) -> Self {
        let pinned = PinnedCache::new(dev.pinned_allocator(), pinned_budget);
        let stats = GpuStats {
            device: dev.name().to_string(),
            ..GpuStats::default()
        };
        DeviceCopies {
            budget: budget.min(dev.capacity()),
            dev,
            pinned,
            entries: HashMap::new(),
            in_flight: Vec::new(),
            clock: 0,
            instruction: 0,
            stats,
        }
    }

    /// The device, to run kernels on the buffers [`Self::for_device`] returned.
    pub fn device(&mut self) -> &mut dyn Device {
        self.dev.as_mut()
    }

    /// Starts a device instruction: the copies it places are safe from eviction until the
    /// next call. Call once before the `for_device` calls of each device instruction.
    pub fn begin_instruction(&mut self) -> Result<()> {
        self.instruction += 1;
        self.stats.device_instructions += 1;
        self.reap()
    }

    /// Counts an instruction the caller ran on the host (for the statistics).
    pub fn note_host_instruction(&mut self) {
        self.stats.host_instructions += 1;
    }

    /// The device buffer of block `key` (`len` elements) for a device instruction using it
    /// with `intent`: allocated if absent, brought up to date from `host` (the host copy's data;
    /// may be empty unless the host copy is the newest and the intent reads) only if the
    /// intent reads and the device copy is stale; for `Write`/`Update` the device copy then
    /// becomes the newest version.
    ///
    /// Making room may evict other blocks' copies: a dirty one is downloaded and pushed to
    /// `written_back` as `(key, data)`; the caller must store that data as the block's host
    /// copy (its host version already says so).
    pub fn for_device(
        &mut self,
        key: K,
        len: usize,
        intent: Intent,
        host: &[f64],
        written_back: &mut Vec<(K, Vec<f64>)>,
    ) -> Result<DevBuf> {
        self.reap()?;
        self.clock += 1;
        // A stale device copy of another length (the block was re-created) is dropped.
        let replace = match self
            .entries
            .get(&key)
            .and_then(|e| e.dev.as_ref().map(|d| (e, d)))
        {
            Some((e, d)) if d.buf.len() != len => {
                if d.version > e.host {
                    return Err(DeviceError::Protocol(format!(
                        "the device copy has {} elements and is the newest, the block now has {len}",
                        d.buf.len()
                    )));
                }
                true
            }
            _ => false,
        };
        if replace {
            self.drop_device_copy(key)?;
        }
        let has_copy = self.entries.get(&key).is_some_and(|e| e.dev.is_some());
        if !has_copy {
            self.make_room(len * F64_BYTES, Some(key), written_back)?;
            let buf = self.dev.alloc(len)?;
            let entry = self.entries.entry(key).or_insert(Entry {
                host: 1,
                dev: None,
                last_use: 0,
                instruction: 0,
            });
            // Version 0 is older than any host version: a new copy holds nothing yet.
            entry.dev = Some(DevCopy {
                buf,
                version: 0,
                pending: None,
            });
        }
        let Some(entry) = self.entries.get_mut(&key) else {
            return Err(DeviceError::Protocol("block entry vanished".into()));
        };
        let Some(dc) = entry.dev.as_mut() else {
            return Err(DeviceError::Protocol("device copy vanished".into()));
        };
        if intent.reads() && dc.version < entry.host {
            if host.len() != len {
                return Err(DeviceError::LengthMismatch {
                    what: "host copy to upload",
                    expected: len,
                    got: host.len(),
                });
            }
            // An older upload still in flight must finish before its staging buffer is reused.
            if let Some(p) = dc.pending.take() {
                self.dev.wait(p.event)?;
                p.traced();
                self.pinned.release(p.pinned);
            }
            let mut staging = self.pinned.acquire(len)?;
            let staged = staging.write().map(|mut w| w[..len].copy_from_slice(host));
            if let Err(e) = staged {
                self.pinned.release(staging);
                return Err(e);
            }
            let event = match self.dev.upload(&dc.buf, &staging, 0) {
                Ok(e) => e,
                Err(e) => {
                    self.pinned.release(staging);
                    return Err(e);
                }
            };
            dc.pending = Some(Pending {
                event,
                pinned: staging,
                issued: std::time::Instant::now(),
                bytes: len * F64_BYTES,
            });
            self.in_flight.push(key);
            dc.version = entry.host;
            self.stats.uploads += 1;
            self.stats.upload_bytes += (len * F64_BYTES) as u64;
        }
        if intent.writes() {
            dc.version = dc.version.max(entry.host) + 1;
        }
        entry.last_use = self.clock;
        entry.instruction = self.instruction;
        Ok(dc.buf)
    }

    /// Prepares the host copy of `key` for a host use with `intent`: if the device copy is
    /// newer and the intent reads, it is downloaded into `host` (waiting for it); a write makes
    /// the host copy the newest. A block never placed on the device needs nothing.
    pub fn for_host(&mut self, key: K, intent: Intent, host: &mut [f64]) -> Result<()> {
        self.reap()?;
        let Some(entry) = self.entries.get_mut(&key) else {
            return Ok(());
        };
        if let Some(dc) = entry.dev.as_mut()
            && intent.reads()
            && dc.version > entry.host
        {
            let len = dc.buf.len();
            if host.len() != len {
                return Err(DeviceError::LengthMismatch {
                    what: "host copy to download into",
                    expected: len,
                    got: host.len(),
                });
            }
            download(
                self.dev.as_mut(),
                &mut self.pinned,
                &mut self.stats,
                &dc.buf,
                host,
            )?;
            entry.host = dc.version;
        }
        if intent.writes() {
            entry.host = entry.newest() + 1;
        }
        Ok(())
    }

    /// Where the newest data of `key` is.
    pub fn newest_on(&self, key: K) -> Location {
        match self
            .entries
            .get(&key)
            .and_then(|e| e.dev.as_ref().map(|d| (e, d)))
        {
            None => Location::Host,
            Some((e, d)) if d.version > e.host => Location::Device,
            Some((e, d)) if d.version == e.host => Location::Both,
            Some(_) => Location::Host,
        }
    }

    /// True if `key` has a device copy (current or not).
    pub fn is_resident(&self, key: K) -> bool {
        self.entries.get(&key).is_some_and(|e| e.dev.is_some())
    }

    /// Blocks whose newest data is only on the device (to be read back before the host
    /// copies are needed, e.g. at a barrier or the end of a program).
    pub fn dirty(&self) -> Vec<K> {
        self.entries
            .iter()
            .filter(|(_, e)| e.dev.as_ref().is_some_and(|d| d.version > e.host))
            .map(|(k, _)| *k)
            .collect()
    }

    /// Forgets a block (deleted, or its scope closed): frees its device copy, whatever its
    /// version. Read it back first ([`Self::for_host`]) if its device data is still wanted.
    pub fn forget(&mut self, key: K) -> Result<()> {
        self.drop_device_copy(key)?;
        self.entries.remove(&key);
        Ok(())
    }

    /// Makes room for `bytes` of device memory outside the block copies (temporaries of a
    /// contraction), evicting as [`Self::for_device`] does.
    pub fn reserve(&mut self, bytes: usize, written_back: &mut Vec<(K, Vec<f64>)>) -> Result<()> {
        self.make_room(bytes, None, written_back)
    }

    /// Figures so far.
    pub fn stats(&self) -> GpuStats {
        let mut s = self.stats.clone();
        s.kernel_launches = self.dev.counters().kernel_launches;
        s.pinned = self.pinned.stats();
        s.pinned_hit_ratio = s.pinned.hit_ratio();
        s
    }

    /// Returns the staging buffers of completed uploads to the pinned cache.
    fn reap(&mut self) -> Result<()> {
        let keys = std::mem::take(&mut self.in_flight);
        for key in keys {
            let Some(dc) = self.entries.get_mut(&key).and_then(|e| e.dev.as_mut()) else {
                continue;
            };
            let done = match &dc.pending {
                Some(p) => self.dev.is_complete(p.event)?,
                None => continue,
            };
            if done {
                if let Some(p) = dc.pending.take() {
                    p.traced();
                    self.pinned.release(p.pinned);
                }
            } else {
                self.in_flight.push(key);
            }
        }
        Ok(())
    }

    /// Evicts least recently used copies (not of the current instruction, nor `keep`) until
    /// `bytes` more fit in the budget.
    fn make_room(
        &mut self,
        bytes: usize,
        keep: Option<K>,
        written_back: &mut Vec<(K, Vec<f64>)>,
    ) -> Result<()> {
        while self.dev.bytes_in_use() + bytes > self.budget {
            let victim = self
                .entries
                .iter()
                .filter(|(k, e)| {
                    e.dev.is_some() && e.instruction != self.instruction && Some(**k) != keep
                })
                .min_by_key(|(_, e)| e.last_use)
                .map(|(k, _)| *k);
            let Some(victim) = victim else {
                return Err(DeviceError::OutOfMemory {
                    device: self.dev.name().to_string(),
                    requested: bytes,
                    in_use: self.dev.bytes_in_use(),
                    capacity: self.budget,
                });
            };
            self.evict(victim, written_back)?;
        }
        Ok(())
    }

    /// Drops the device copy of `key`, writing it back first if it is the newest.
    fn evict(&mut self, key: K, written_back: &mut Vec<(K, Vec<f64>)>) -> Result<()> {
        let Some(entry) = self.entries.get_mut(&key) else {
            return Ok(());
        };
        if let Some(dc) = entry.dev.as_ref()
            && dc.version > entry.host
        {
            let mut data = vec![0.0; dc.buf.len()];
            download(
                self.dev.as_mut(),
                &mut self.pinned,
                &mut self.stats,
                &dc.buf,
                &mut data,
            )?;
            entry.host = dc.version;
            written_back.push((key, data));
            self.stats.write_backs += 1;
        }
        self.stats.evictions += 1;
        self.drop_device_copy(key)
    }

    /// Frees the device copy of `key` (after its upload, if one is in flight).
    fn drop_device_copy(&mut self, key: K) -> Result<()> {
        let Some(dc) = self.entries.get_mut(&key).and_then(|e| e.dev.take()) else {
            return Ok(());
        };
        if let Some(p) = dc.pending {
            self.dev.wait(p.event)?;
            p.traced();
            self.pinned.release(p.pinned);
        }
        self.dev.free(dc.buf)
    }
}

/// Downloads `buf` into `out` through a staging buffer, waiting for it, and counts it.
fn download(
    dev: &mut dyn Device,
    pinned: &mut PinnedCache,
    stats: &mut GpuStats,
    buf: &DevBuf,
    out: &mut [f64],
) -> Result<()> {
    let len = buf.len();
    let started = std::time::Instant::now();
    let mut staging = pinned.acquire(len)?;
    let copied = (|| -> Result<()> {
        let stream = 1 % dev.streams().max(1);
        let event = dev.download(&mut staging, buf, stream)?;
        dev.wait(event)?;
        let r = staging.read()?;
        out.copy_from_slice(&r[..len]);
        Ok(())
    })();
    pinned.release(staging);
    copied?;
    let bytes = len * F64_BYTES;
    crate::trace::span_beside(
        " copy stream 1",
        "download",
        started,
        &[("bytes", bytes.into())],
    );
    stats.downloads += 1;
    stats.download_bytes += (len * F64_BYTES) as u64;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{HostDevice, HostDeviceConfig};

    const N: usize = 1000;

    fn copies(capacity_blocks: usize) -> Result<DeviceCopies<u32>> {
        let dev = HostDevice::new(&HostDeviceConfig {
            capacity: capacity_blocks * N * F64_BYTES,
            ..HostDeviceConfig::default()
        })?;
        Ok(DeviceCopies::new(
            Box::new(dev),
            usize::MAX,
            64 * N * F64_BYTES,
        ))
    }

    fn block(v: f64) -> Vec<f64> {
        (0..N).map(|i| v + i as f64).collect()
    }

    /// (uploads, downloads) so far.
    fn transfers(c: &DeviceCopies<u32>) -> (u64, u64) {
        let s = c.stats();
        (s.uploads, s.downloads)
    }

    #[test]
    fn write_only_use_needs_no_upload() -> Result<()> {
        let mut c = copies(8)?;
        let mut wb = Vec::new();
        c.begin_instruction()?;
        let d = c.for_device(1, N, Intent::Write, &[], &mut wb)?;
        c.device().fill(&d, 3.0)?;
        assert_eq!(transfers(&c), (0, 0));
        assert_eq!(c.newest_on(1), Location::Device);
        let mut host = vec![0.0; N];
        c.for_host(1, Intent::Read, &mut host)?;
        assert_eq!(host, vec![3.0; N]);
        assert_eq!(transfers(&c), (0, 1));
        assert_eq!(c.newest_on(1), Location::Both);
        Ok(())
    }

    #[test]
    fn reads_upload_once() -> Result<()> {
        let mut c = copies(8)?;
        let mut wb = Vec::new();
        let a = block(1.0);
        c.begin_instruction()?;
        c.for_device(1, N, Intent::Read, &a, &mut wb)?;
        assert_eq!(transfers(&c), (1, 0));
        c.begin_instruction()?;
        c.for_device(1, N, Intent::Read, &a, &mut wb)?;
        assert_eq!(transfers(&c), (1, 0));
        assert_eq!(c.newest_on(1), Location::Both);
        // A host read of a block whose copies agree needs nothing.
        let mut h = a.clone();
        c.for_host(1, Intent::Read, &mut h)?;
        assert_eq!(transfers(&c), (1, 0));
        let s = c.stats();
        assert_eq!(s.upload_bytes, (N * F64_BYTES) as u64);
        assert_eq!(s.device_instructions, 2);
        Ok(())
    }

    #[test]
    fn update_on_device_then_host_read_downloads_once() -> Result<()> {
        let mut c = copies(8)?;
        let mut wb = Vec::new();
        let mut a = block(1.0);
        c.begin_instruction()?;
        let d = c.for_device(1, N, Intent::Update, &a, &mut wb)?;
        c.device().scale(&d, 2.0)?;
        assert_eq!(c.newest_on(1), Location::Device);
        assert_eq!(c.dirty(), vec![1]);
        c.for_host(1, Intent::Read, &mut a)?;
        assert_eq!(
            a,
            (0..N).map(|i| 2.0 * (1.0 + i as f64)).collect::<Vec<_>>()
        );
        c.for_host(1, Intent::Read, &mut a)?;
        assert_eq!(transfers(&c), (1, 1));
        assert!(c.dirty().is_empty());
        Ok(())
    }

    #[test]
    fn a_chain_on_resident_blocks_moves_only_inputs_and_the_result() -> Result<()> {
        let mut c = copies(8)?;
        let mut wb = Vec::new();
        let (a, b) = (block(1.0), block(2.0));
        // r = a + b, then 9 times r = r * 2 + a.
        c.begin_instruction()?;
        let da = c.for_device(1, N, Intent::Read, &a, &mut wb)?;
        let db = c.for_device(2, N, Intent::Read, &b, &mut wb)?;
        let dr = c.for_device(3, N, Intent::Write, &[], &mut wb)?;
        c.device().add(&dr, &da, &db)?;
        for _ in 0..9 {
            c.begin_instruction()?;
            let dr = c.for_device(3, N, Intent::Update, &[], &mut wb)?;
            let da = c.for_device(1, N, Intent::Read, &a, &mut wb)?;
            c.device().scale(&dr, 2.0)?;
            c.device().axpy(&dr, 1.0, &da)?;
        }
        let mut r = vec![0.0; N];
        c.for_host(3, Intent::Read, &mut r)?;
        assert_eq!(transfers(&c), (2, 1));
        assert!(wb.is_empty());
        let mut want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        for _ in 0..9 {
            want.iter_mut().zip(&a).for_each(|(w, x)| *w = 2.0 * *w + x);
        }
        assert_eq!(r, want);
        let s = c.stats();
        assert_eq!(s.device_instructions, 10);
        assert_eq!(s.kernel_launches, 19);
        // One staging buffer for each upload, reused by the download: hits after the first.
        assert!(s.pinned.hits >= 1 && s.pinned_hit_ratio > 0.0);
        Ok(())
    }

    #[test]
    fn a_host_write_makes_the_next_device_read_upload_again() -> Result<()> {
        let mut c = copies(8)?;
        let mut wb = Vec::new();
        let mut a = block(1.0);
        c.begin_instruction()?;
        c.for_device(1, N, Intent::Read, &a, &mut wb)?;
        c.for_host(1, Intent::Write, &mut a)?;
        a.fill(7.0);
        assert_eq!(c.newest_on(1), Location::Host);
        c.begin_instruction()?;
        let d = c.for_device(1, N, Intent::Read, &a, &mut wb)?;
        assert_eq!(transfers(&c), (2, 0));
        // The device sees the new data.
        let out = c.for_device(2, N, Intent::Write, &[], &mut wb)?;
        c.device().copy(&out, &d)?;
        let mut h = vec![0.0; N];
        c.for_host(2, Intent::Read, &mut h)?;
        assert_eq!(h, vec![7.0; N]);
        // An update on the host too (reads the host copy, which is current: no download).
        c.for_host(1, Intent::Update, &mut a)?;
        assert_eq!(transfers(&c), (2, 1));
        assert_eq!(c.newest_on(1), Location::Host);
        Ok(())
    }

    #[test]
    fn eviction_drops_clean_copies_and_writes_dirty_ones_back() -> Result<()> {
        // Room for three blocks.
        let mut c = copies(3)?;
        let mut wb = Vec::new();
        let (a, b) = (block(1.0), block(2.0));
        c.begin_instruction()?;
        c.for_device(1, N, Intent::Read, &a, &mut wb)?; // clean
        c.begin_instruction()?;
        let d = c.for_device(2, N, Intent::Update, &b, &mut wb)?; // dirty
        c.device().scale(&d, 10.0)?;
        c.begin_instruction()?;
        c.for_device(3, N, Intent::Write, &[], &mut wb)?;
        assert_eq!(transfers(&c), (2, 0));

        // A fourth block: the least recently used (1, clean) goes without a transfer.
        c.begin_instruction()?;
        c.for_device(4, N, Intent::Write, &[], &mut wb)?;
        assert!(!c.is_resident(1));
        assert_eq!(transfers(&c), (2, 0));
        assert!(wb.is_empty());
        assert_eq!(c.newest_on(1), Location::Host);

        // A fifth: block 2 (dirty) is written back and handed over.
        c.begin_instruction()?;
        c.for_device(5, N, Intent::Write, &[], &mut wb)?;
        assert!(!c.is_resident(2));
        assert_eq!(transfers(&c), (2, 1));
        assert_eq!(wb.len(), 1);
        assert_eq!(wb[0].0, 2);
        let want: Vec<f64> = b.iter().map(|x| 10.0 * x).collect();
        assert_eq!(wb[0].1, want);
        assert_eq!(c.newest_on(2), Location::Host);
        let s = c.stats();
        assert_eq!((s.evictions, s.write_backs), (2, 1));

        // Reading block 2 on the device again uploads the written-back data.
        let (_, data) = wb.remove(0);
        c.begin_instruction()?;
        let d2 = c.for_device(2, N, Intent::Read, &data, &mut wb)?;
        let d5 = c.for_device(5, N, Intent::Write, &[], &mut wb)?;
        c.device().copy(&d5, &d2)?;
        let mut h = vec![0.0; N];
        c.for_host(5, Intent::Read, &mut h)?;
        assert_eq!(h, want);

        // Copies used by the current instruction are never evicted.
        c.begin_instruction()?;
        c.for_device(1, N, Intent::Write, &[], &mut wb)?;
        c.for_device(2, N, Intent::Read, &data, &mut wb)?;
        c.for_device(3, N, Intent::Write, &[], &mut wb)?;
        assert!(matches!(
            c.for_device(6, N, Intent::Write, &[], &mut wb),
            Err(DeviceError::OutOfMemory { .. })
        ));
        Ok(())
    }

    #[test]
    fn forget_frees_the_device_copy() -> Result<()> {
        let mut c = copies(2)?;
        let mut wb = Vec::new();
        c.begin_instruction()?;
        c.for_device(1, N, Intent::Read, &block(0.0), &mut wb)?;
        c.forget(1)?;
        assert_eq!(c.device().bytes_in_use(), 0);
        assert_eq!(c.newest_on(1), Location::Host);
        assert!(matches!(
            c.for_device(2, N, Intent::Read, &[1.0], &mut wb),
            Err(DeviceError::LengthMismatch { .. })
        ));
        Ok(())
    }
}
