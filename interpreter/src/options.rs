//! Every option of a run, built once from the command line: ranks, memory budgets, scratch,
//! checkpoints and restart, prefetching, devices, testing aids. The drivers, the workers and
//! the servers read them; none of them is defined inside the worker or a transport.

use crate::checkpoint::JobDir;
use crate::device::DeviceMode;
use crate::error::{Result, RuntimeError};
use crate::server::blocks::Spill;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// Default bytes of fetched blocks per worker (ACES4's default worker memory).
pub const DEFAULT_WORKER_MEMORY: usize = 2 << 30;

/// A rank made to fail on purpose (`--inject-fault`, a testing aid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The worker of this rank panics when its first program starts.
    WorkerPanic(usize),
    /// The server of this rank panics at its first request.
    ServerPanic(usize),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub workers: usize,
    pub servers: usize,
    pub worker_memory: usize,
    /// Collect distributed/served arrays for `done` (dumps).
    pub snapshot: bool,
    pub work_dir: PathBuf,
    pub fault: Option<Fault>,
    /// Where checkpoints are written after each program (jobs of several programs).
    pub checkpoints: Option<JobDir>,
    /// The checkpoints of an earlier run of this job to restart from.
    pub restart: Option<JobDir>,
    /// Bytes of block data each server holds in memory (`--server-memory`).
    pub server_memory: usize,
    /// Folder under which the job's spill files go (`--scratch-dir`; default: the work dir).
    pub scratch_dir: Option<PathBuf>,
    /// Keep the spill files after the job (`--keep-scratch`).
    pub keep_scratch: bool,
    /// Testing aid: the scratch file system of each server holds only this many bytes.
    pub scratch_limit: Option<u64>,
    /// `--prefetch off|auto|N`.
    pub prefetch: PrefetchMode,
    /// Testing aid (thread transport): every server reply is delivered this much later.
    pub simulated_latency: Duration,
    /// `--profile`: time and instruction counts per source line.
    pub profile: bool,
    /// `--device`, `--gpu-memory`, `--pinned-memory` and the device backend.
    pub gpu: GpuOptions,
    /// Progress lines on stderr (worker 0; `sial run` unless `-q`): pardo loops and programs
    /// of a job that have run longer than this.
    pub progress: Option<Duration>,
    /// `--trace FILE.json`: a timeline of the run; events shorter than `trace_min` are left out.
    pub trace: Option<PathBuf>,
    pub trace_min: Duration,
    /// Under MPI: how long a rank may stay silent before the job is stopped (`--heartbeat`;
    /// `None`: never).
    pub heartbeat: Option<Duration>,
}

/// Default of `--trace-min`: instructions and requests shorter than this are not in the trace.
pub const DEFAULT_TRACE_MIN: Duration = Duration::from_micros(100);

/// Progress is shown for what runs longer than this (`--progress-after`, a testing aid).
pub const DEFAULT_PROGRESS_AFTER: Duration = Duration::from_secs(2);

/// Default of `--heartbeat`: long enough for a loaded machine, short enough that a stopped
/// rank does not hold a cluster allocation for long.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(60);

impl Options {
    /// This job's scratch folder.
    pub fn scratch(&self) -> PathBuf {
        self.scratch_dir
            .clone()
            .unwrap_or_else(|| self.work_dir.clone())
            .join(format!("sial-scratch-{}", std::process::id()))
    }

    /// Where server `rank` spills.
    pub fn spill(&self, rank: usize) -> Spill {
        Spill {
            budget: self.server_memory,
            dir: self.scratch().join(format!("server-{rank}")),
            disk_limit: self.scratch_limit,
        }
    }

    /// The scratch folder must exist and be writable before anything is spilled there.
    pub(crate) fn check_scratch(&self) -> Result<()> {
        let Some(dir) = &self.scratch_dir else {
            return Ok(());
        };
        if !dir.is_dir() {
            return Err(RuntimeError::input(format!(
                "scratch directory {} does not exist (create it, or choose another with --scratch-dir)",
                dir.display()
            )));
        }
        let probe = dir.join(format!(".sial-probe-{}", std::process::id()));
        std::fs::write(&probe, b"").map_err(|e| {
            RuntimeError::input(format!(
                "scratch directory {} is not writable: {e}",
                dir.display()
            ))
        })?;
        let _ = std::fs::remove_file(probe);
        Ok(())
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            workers: 1,
            servers: 0,
            worker_memory: DEFAULT_WORKER_MEMORY,
            snapshot: false,
            work_dir: PathBuf::from("."),
            fault: None,
            checkpoints: None,
            restart: None,
            server_memory: usize::MAX,
            scratch_dir: None,
            keep_scratch: false,
            scratch_limit: None,
            prefetch: PrefetchMode::default(),
            simulated_latency: Duration::ZERO,
            heartbeat: Some(DEFAULT_HEARTBEAT),
            progress: None,
            trace: None,
            trace_min: DEFAULT_TRACE_MIN,
            profile: false,
            gpu: GpuOptions::default(),
        }
    }
}

/// Which device implementation (`--gpu-backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// CUDA GPUs through the driver loaded at run time.
    #[default]
    Cuda,
    /// The host-memory device (testing aid: separate "device" memory, copies on threads).
    Host,
}

/// The device options of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOptions {
    pub mode: DeviceMode,
    pub backend: Backend,
    /// Bytes of device memory for block copies (`--gpu-memory`).
    pub memory: usize,
    /// Bytes of pinned host memory for transfers (`--pinned-memory`).
    pub pinned: usize,
    pub streams: usize,
}

impl Default for GpuOptions {
    fn default() -> GpuOptions {
        GpuOptions {
            mode: DeviceMode::Auto,
            backend: Backend::Cuda,
            memory: usize::MAX,
            pinned: 1 << 30,
            streams: 2,
        }
    }
}

/// `--prefetch off|auto|N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrefetchMode {
    Off,
    #[default]
    Auto,
    /// A fixed depth for every site.
    Depth(usize),
}

impl FromStr for PrefetchMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<PrefetchMode, String> {
        match s {
            "off" => Ok(PrefetchMode::Off),
            "auto" => Ok(PrefetchMode::Auto),
            n => match n.parse::<usize>() {
                Ok(0) => Ok(PrefetchMode::Off),
                Ok(d) if d <= MAX_DEPTH => Ok(PrefetchMode::Depth(d)),
                _ => Err(format!(
                    "prefetch must be off, auto or a depth from 0 to {MAX_DEPTH}, not \"{s}\""
                )),
            },
        }
    }
}

/// The deepest look-ahead (fixed or adapted).
pub const MAX_DEPTH: usize = 64;
