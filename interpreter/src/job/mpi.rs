//! The MPI launcher (feature `mpi`): every rank is a process of `MPI_COMM_WORLD`, started by
//! `mpirun`, linked by the `cluster::mpi` transport. A failing rank prints its error and ends
//! every process with `MPI_Abort`.

use super::mpi_stats::{stats_in, stats_out};
use super::{Figures, JobInputs, Ranks, Report, Transport, drive, panic_text};
use crate::cluster::layout;
use crate::cluster::mpi::heartbeat::Heartbeat;
use crate::cluster::mpi::{Link, Places, connect};
use crate::cluster::{ServerLink, WorkerLink};
use crate::error::{Result, RuntimeError};
use crate::options::Options;
use crate::report::say;
use crate::setup::Setup;
use crate::specials::Registry;
use crate::worker::{Done, FinalState, WorkerStats};
use ::mpi::Threading;
use ::mpi::environment::Universe;
use ::mpi::topology::{Communicator, SimpleCommunicator};
use sial_bytecode::Program;
use std::fs::File;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// Settings a rank's process takes before MPI starts; `main` calls this first under mpirun.
///
/// * One malloc arena for the whole process. A rank computes in one thread, and glibc gives
///   a thread other than the main one an arena of its own, which it grows by an `mprotect`
///   call at every allocation past its top: a server storing new 4 KiB blocks made one call
///   per block. The main arena grows by `brk` with padding. (With ranks as threads the
///   arenas stay one per thread: there they spare the threads each other's locks.)
/// * Where all `processes` ranks of the job run on this node, MPI's topology library (hwloc)
///   skips its discovery of PCI and other I/O devices (`HWLOC_COMPONENTS=-pci,-linuxio`,
///   unless the environment sets it): it read the PCI configuration of every device at
///   `MPI_Init`, 14–15% of rank 0's time in an empty job, and on one node there is no network
///   card to choose.
///
/// # Safety
/// No other thread may be running: it changes the environment and the allocator's settings.
pub unsafe fn prepare_process(processes: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a parameter of glibc's allocator, which takes effect for
    // threads that have not allocated yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    const COMPONENTS: &str = "HWLOC_COMPONENTS";
    if local_processes() == Some(processes) && std::env::var_os(COMPONENTS).is_none() {
        // SAFETY: the caller runs no other thread.
        unsafe { std::env::set_var(COMPONENTS, "-pci,-linuxio") };
    }
}

/// The job's ranks on this node, from the launcher's environment (MPICH's hydra:
/// `MPI_LOCALNRANKS`; Open MPI: `OMPI_COMM_WORLD_LOCAL_SIZE`).
fn local_processes() -> Option<usize> {
    ["MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// This process's MPI, started before the job's programs are compiled so that the ranks can
/// share the compiling ([`Session::all_gather`]), then [`Session::run`].
pub struct Session {
    universe: Universe,
    threading: Threading,
    /// Where every rank runs: its node's ranks, and how the transport waits.
    places: Places,
}

impl Session {
    /// Initialises MPI: with `MPI_THREAD_MULTIPLE` where the heartbeat needs it.
    pub fn start(options: &Options) -> Result<Session> {
        // The heartbeat thread calls MPI beside the rank's own thread.
        let wanted = match options.heartbeat {
            Some(_) => Threading::Multiple,
            None => Threading::Funneled,
        };
        let (universe, threading) = ::mpi::initialize_with_threading(wanted)
            .ok_or_else(|| RuntimeError::new("MPI cannot be initialised twice"))?;
        let places = Places::gather(&universe.world())?;
        Ok(Session {
            universe,
            threading,
            places,
        })
    }

    /// This process's rank in `MPI_COMM_WORLD`, and the number of processes.
    pub fn rank_and_size(&self) -> (usize, usize) {
        let world = self.universe.world();
        (world.rank() as usize, world.size() as usize)
    }

    /// Every process's `bytes`, in rank order, on every process (collective).
    pub fn all_gather(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
        crate::cluster::mpi::all_gather(&self.universe.world(), bytes)
    }

    /// The ranks on this process's node, in order: those on a host of the same name (gathered
    /// at the start, one all-gather; `MPI_Comm_split_type` takes 60 ms in MPICH 4.0). A rank
    /// whose host has no name is alone on its node.
    pub fn node_ranks(&self) -> Vec<usize> {
        self.places.node_ranks()
    }

    /// One file that every rank of `node` (this node's ranks, [`Session::node_ranks`]) holds
    /// open, for memory they share (collective): made by the node's first rank in `dir`,
    /// `bytes_per_rank` × the node's ranks long and
    /// sparse (zeros), opened by the others, then removed, so that nothing is left behind when
    /// the job ends. `Ok(None)` where this node runs one rank alone; an error, the same on
    /// every rank of the node, where a rank could not make or open it.
    pub fn node_file(
        &self,
        node: &[usize],
        dir: &Path,
        name: &str,
        bytes_per_rank: u64,
    ) -> Result<Option<File>> {
        let (me, _) = self.rank_and_size();
        let alone = node.len() < 2;
        let first = node.first() == Some(&me);
        // Every rank takes part in the gathers below, also one alone on its node. The first
        // rank's path, or why it has none, reaches every rank of the node.
        let made = (first && !alone).then(|| {
            let path = dir.join(format!("sial-{name}-{}", std::process::id()));
            let len = bytes_per_rank.saturating_mul(node.len() as u64);
            let file = room(dir, len).and_then(|()| {
                File::options()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .and_then(|file| file.set_len(len).map(|()| file))
                    .map_err(|e| format!("{}: {e}", path.display()))
            });
            (path, file)
        });
        let said = match &made {
            Some((path, Ok(_))) => format!("+{}", path.display()),
            Some((_, Err(e))) => format!("-{e}"),
            None => String::new(),
        };
        let heard = self.all_gather(said.as_bytes())?;
        let said = node
            .first()
            .map(|&r| String::from_utf8_lossy(&heard[r]).into_owned())
            .unwrap_or_default();
        let (made, opened) = match (made, said.strip_prefix('+')) {
            _ if alone => (None, Ok(None)),
            (Some((path, file)), _) => (file.is_ok().then_some(path), file.map(Some)),
            (None, Some(path)) => (
                None,
                File::options()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map(Some)
                    .map_err(|e| format!("{path}: {e}")),
            ),
            (None, None) => (None, Err(said.trim_start_matches('-').to_string())),
        };
        // The name goes once every rank has the file open, or has failed to.
        let failed = opened.as_ref().err().cloned().unwrap_or_default();
        let heard = self.all_gather(failed.as_bytes())?;
        if let Some(path) = made {
            let _ = std::fs::remove_file(path);
        }
        match node.iter().map(|&r| &heard[r]).find(|e| !e.is_empty()) {
            None => opened.map_err(RuntimeError::new),
            Some(e) => Err(RuntimeError::new(String::from_utf8_lossy(e).into_owned())),
        }
    }

    /// This process's part of the job: worker or server by its rank's place in
    /// `layout(options.workers, options.servers)`, which must account for every process.
    /// Returns the report on global rank 0 (worker 0, which alone gets `out` and `done`) and
    /// `None` on the other ranks. A failure on any rank prints `FATAL ERROR: ...` and aborts
    /// every process with status 1 (`MPI_Abort`): it does not return.
    pub fn run(
        self,
        programs: &[Program],
        setup: &Setup,
        registry: &Registry,
        out: &mut (dyn Write + Send),
        options: &Options,
        done: impl FnMut(&FinalState<'_>) -> Result<()>,
    ) -> Result<Option<Report>> {
        let Session {
            universe,
            threading,
            places,
        } = self;
        places.choose_waits();
        let inputs = JobInputs {
            setup,
            registry,
            options,
        };
        run(universe, threading, programs, inputs, out, done)
    }
}

fn run(
    universe: Universe,
    threading: Threading,
    programs: &[Program],
    inputs: JobInputs<'_>,
    out: &mut (dyn Write + Send),
    done: impl FnMut(&FinalState<'_>) -> Result<()>,
) -> Result<Option<Report>> {
    let options = inputs.options;
    let world = universe.world();
    let size = world.size() as usize;
    let (workers, servers) = (options.workers, options.servers);
    if workers + servers != size || workers == 0 || servers == 0 {
        // Every rank sees the same numbers and stops the same way; only rank 0 says why.
        let error = RuntimeError::input(format!(
            "{workers} workers and {servers} servers do not fit {size} MPI processes (an MPI job needs at least one of each, and workers + servers = processes)"
        ));
        return if world.rank() == 0 {
            Err(error)
        } else {
            Ok(None)
        };
    }
    let link = connect(&universe, workers, servers);
    let options = &agree_on_checkpoints(&world, options);
    let heartbeat = match options.heartbeat {
        Some(timeout) if threading == Threading::Multiple => {
            let roles = layout(workers, servers);
            Some(Heartbeat::start(&world, timeout, |rank| {
                role_name(&roles, rank)
            }))
        }
        Some(_) => {
            if world.rank() == 0 {
                say(
                    "WARNING: this MPI library does not allow several threads to call it (MPI_THREAD_MULTIPLE): a rank that stops answering will not be noticed",
                );
            }
            None
        }
        None => None,
    };
    let who = match &link {
        Ok(Link::Server(s)) => format!("server {}", s.rank()),
        Ok(Link::Worker(w)) => format!("worker {}", w.rank()),
        Err(_) => format!("rank {}", world.rank()),
    };
    let inputs = JobInputs { options, ..inputs };
    let body = catch_unwind(AssertUnwindSafe(|| -> Result<Option<Report>> {
        drive(
            programs,
            inputs,
            out,
            done,
            &mut Processes(link?, world.rank() as usize),
        )
    }));
    let failure = match body {
        Ok(Ok(report)) => {
            if let Some(h) = heartbeat {
                h.stop();
            }
            let rank = world.rank() as usize;
            // Dropping the universe finalises MPI: every rank waits for the others here.
            drop(world);
            drop(universe);
            if rank == 0
                && let Some(path) = &options.trace
            {
                let parts: Vec<_> = (0..size).map(|r| super::trace_part(path, r)).collect();
                crate::trace::merge(path, &parts).map_err(|e| {
                    RuntimeError::new(format!("cannot write the trace {}: {e}", path.display()))
                })?;
            }
            return Ok(report);
        }
        Ok(Err(e)) => e,
        Err(p) => RuntimeError::new(format!(
            "{who} died: {} (the job was stopped)",
            panic_text(p.as_ref())
        )),
    };
    let _ = out.flush();
    say(&failure.to_string());
    if world.rank() == 0
        && let Some(dir) = &options.checkpoints
        && let Ok(c) = dir.read_worker()
    {
        say(&format!(
            "sial: {} of {} programs completed; restart the job from there with --restart {} (checkpoints in {})",
            c.completed,
            programs.len(),
            dir.id,
            dir.path().display()
        ));
    }
    // The launcher forwards a rank's output through a pipe; an abort (this rank's or another
    // failing rank's) can tear the pipe down before the message is through. Every failing
    // rank prints first, then waits a moment before aborting; the other ranks wait longer, so
    // that rank 0, which says how to restart the job, is not stopped before it has.
    let wait = if world.rank() == 0 { 200 } else { 600 };
    std::thread::sleep(std::time::Duration::from_millis(wait));
    world.abort(1)
}

/// Whether the file system of `dir` has `len` bytes free: a sparse file larger than that is
/// made without complaint, and fails only when its pages are written.
fn room(dir: &Path, len: u64) -> std::result::Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let Ok(name) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Err(format!("{}: not a usable folder name", dir.display()));
    };
    let mut fs = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a plain system call with a NUL-terminated name and room for its answer.
    if unsafe { libc::statvfs(name.as_ptr(), fs.as_mut_ptr()) } != 0 {
        return Err(format!(
            "{}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: statvfs succeeded, so it filled the structure.
    let fs = unsafe { fs.assume_init() };
    // Both are 32 bits on some targets.
    #[allow(clippy::useless_conversion)]
    let free = u64::from(fs.f_bavail).saturating_mul(u64::from(fs.f_frsize));
    if free < len {
        return Err(format!(
            "{} has {:.0} MiB free, the node's table needs {:.0} MiB",
            dir.display(),
            mib(free),
            mib(len)
        ));
    }
    Ok(())
}

/// What global rank `rank` is: "worker K" or "server K".
fn role_name(roles: &[bool], rank: usize) -> String {
    let (server, k) = crate::cluster::role_of(roles, rank);
    format!("{} {k}", if server { "server" } else { "worker" })
}

/// Every rank writes its checkpoints under the name rank 0 chose (the default name contains
/// the process id, which differs between ranks).
fn agree_on_checkpoints(world: &SimpleCommunicator, options: &Options) -> Options {
    use ::mpi::collective::Root;
    let mut options = options.clone();
    if let Some(dir) = &options.checkpoints {
        let root = world.process_at_rank(0);
        let mut id = dir.id.clone().into_bytes();
        let mut len = id.len() as u64;
        root.broadcast_into(&mut len);
        id.resize(len as usize, 0);
        root.broadcast_into(&mut id[..]);
        let id = String::from_utf8_lossy(&id).into_owned();
        options.checkpoints = Some(crate::checkpoint::JobDir::new(&options.work_dir, &id));
    }
    options
}

/// This process's rank of the job, and its MPI rank.
struct Processes(Link, usize);

impl Transport for Processes {
    fn process(&self) -> Option<usize> {
        Some(self.1)
    }

    fn launch(
        &mut self,
        ranks: &Ranks<'_>,
        out: &mut (dyn Write + Send),
        done: &mut Done<'_>,
    ) -> Result<Option<Figures>> {
        let figures = match &mut self.0 {
            Link::Server(link) => {
                if ranks.server_dies(link.rank()) {
                    let _ = link.recv();
                    // A testing aid: die as a killed process would, without a word.
                    std::process::abort();
                }
                ranks.serve(link)?;
                None
            }
            Link::Worker(link) => work(ranks, link, out, done)?,
        };
        self.0.flush()?;
        Ok(figures)
    }
}

/// This worker's programs; then every worker's figures go to worker 0 for the summary.
fn work(
    ranks: &Ranks<'_>,
    link: &mut crate::cluster::mpi::MpiWorker,
    out: &mut (dyn Write + Send),
    done: &mut Done<'_>,
) -> Result<Option<Figures>> {
    let rank = link.rank();
    if ranks.worker_dies(rank) {
        // A testing aid: die as a killed process would, without a word.
        std::process::abort();
    }
    let (mine, mut servers) = if rank == 0 {
        ranks.work(link, out, done)?
    } else {
        ranks.work(link, &mut std::io::stdout(), &mut |_| Ok(()))?
    };
    let all = link.all_gather(stats_out(&mine))?;
    if rank != 0 {
        return Ok(None);
    }
    servers.resize(ranks.options().servers, Default::default());
    let mut workers: Vec<WorkerStats> = all.iter().map(|v| stats_in(v)).collect();
    // Worker 0's device keeps its name.
    if let (Some(w), Some(g)) = (workers.first_mut(), &mine.gpu) {
        w.gpu = Some(g.clone());
    }
    Ok(Some(Figures { workers, servers }))
}
