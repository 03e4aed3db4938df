//! A job: programs run in order on W workers and S servers, sharing only what was made
//! persistent. One driver for every transport ([`drive`]); a transport is the links between
//! the ranks plus a launcher that hosts them, and that is all that differs between one
//! process ([`solo`]: one worker holding its server), threads ([`threads`]) and MPI processes
//! (`mpi`, feature `mpi`).
//!
//! Dependencies point one way: the job uses the transports' links (`cluster`), the workers
//! and the servers; none of those knows about jobs.

#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "mpi")]
mod mpi_stats;
mod solo;
mod threads;

use crate::checkpoint::{JobDir, ServerFiles, WorkerCheckpoint};
use crate::cluster::message::ServerStats;
use crate::cluster::{ServerLink, WorkerLink};
use crate::error::{Result, RuntimeError};
use crate::options::{Fault, Options};
use crate::persist::Persisted;
use crate::server::{Saved, serve};
use crate::setup::Setup;
use crate::specials::Registry;
use crate::worker::{Done, Env, FinalState, Worker, WorkerStats};
use sial_bytecode::Program;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Removes the job's spill folder when dropped: however the job ends, unless it is kept.
struct ScratchGuard(Option<PathBuf>);

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// What a finished job measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub wall: Duration,
    /// Per worker, over all programs.
    pub workers: Vec<WorkerStats>,
    /// Per server, over all programs (in one process: the server the worker holds).
    pub servers: Vec<ServerStats>,
    /// One process, no server ranks (`--workers 1 --servers 0`).
    pub single_process: bool,
    /// The job's program names (prefetch sites and profile lines name their program).
    pub programs: Vec<String>,
    /// The devices the job could use, in words.
    pub devices: String,
}

/// What every rank of a job is given: its setup data, the specials, the run options.
#[derive(Clone, Copy)]
pub(crate) struct JobInputs<'a> {
    pub(crate) setup: &'a Setup,
    pub(crate) registry: &'a Registry,
    pub(crate) options: &'a Options,
}

/// The figures of every rank, gathered where worker 0 runs.
#[derive(Default)]
struct Figures {
    workers: Vec<WorkerStats>,
    servers: Vec<ServerStats>,
}

/// How the ranks of a job are hosted and linked.
trait Transport {
    /// The MPI rank of this process, when the job's ranks are processes.
    fn process(&self) -> Option<usize> {
        None
    }

    /// Runs the ranks this process hosts, each through `ranks`; worker 0 alone gets `out` and
    /// `done`. Returns every rank's figures where worker 0 ran, `None` in other processes.
    fn launch(
        &mut self,
        ranks: &Ranks<'_>,
        out: &mut (dyn Write + Send),
        done: &mut Done<'_>,
    ) -> Result<Option<Figures>>;
}

/// Runs every program of a job in this process (one worker, or threads); `done` sees each
/// program's final state on worker 0.
pub fn run(
    programs: &[Program],
    setup: &Setup,
    registry: &Registry,
    out: &mut (dyn Write + Send),
    options: &Options,
    done: impl FnMut(&FinalState<'_>) -> Result<()>,
) -> Result<Report> {
    if options.servers == 0 && options.workers != 1 {
        return Err(RuntimeError::input(format!(
            "{} workers need at least one server (--servers 0 runs one worker holding the arrays itself)",
            options.workers
        )));
    }
    if options.workers == 0 {
        return Err(RuntimeError::input("a job needs at least one worker"));
    }
    let inputs = JobInputs {
        setup,
        registry,
        options,
    };
    let report = if options.servers == 0 {
        drive(programs, inputs, out, done, &mut solo::Solo)?
    } else {
        drive(programs, inputs, out, done, &mut threads::Threads)?
    };
    report.ok_or_else(|| RuntimeError::new("internal: worker 0 gave no figures"))
}

/// The one job driver: checks, the restart point, the transport's ranks, the report, and the
/// clean-up of spill files and (when the job completed) checkpoints. `None` in the processes
/// where worker 0 did not run.
fn drive(
    programs: &[Program],
    inputs: JobInputs<'_>,
    out: &mut (dyn Write + Send),
    mut done: impl FnMut(&FinalState<'_>) -> Result<()>,
    transport: &mut dyn Transport,
) -> Result<Option<Report>> {
    let started = Instant::now();
    let options = inputs.options;
    options.check_scratch()?;
    let _scratch = ScratchGuard((!options.keep_scratch).then(|| options.scratch()));
    let resume = resume_point(programs, options)?;
    let ranks = Ranks {
        todo: &programs[resume.completed.min(programs.len())..],
        resume: &resume,
        inputs,
    };
    if options.trace.is_some() {
        crate::trace::start(options.trace_min);
    }
    let launched = transport.launch(&ranks, out, &mut done);
    if let Some(path) = &options.trace {
        write_trace(path, transport.process())?;
    }
    let Some(figures) = launched? else {
        return Ok(None);
    };
    if let Some(dir) = &options.checkpoints {
        dir.remove();
    }
    Ok(Some(Report {
        wall: started.elapsed(),
        workers: figures.workers,
        servers: figures.servers,
        single_process: options.servers == 0,
        programs: programs.iter().map(|p| p.name.clone()).collect(),
        devices: crate::worker::gpu::describe(&options.gpu),
    }))
}

/// This process's timeline: the trace file itself, or under MPI this rank's part of it
/// ([`trace_part`]), which rank 0 joins when every process is done.
fn write_trace(path: &std::path::Path, rank: Option<usize>) -> Result<()> {
    let (file, pid, label) = match rank {
        None => (path.to_path_buf(), 0, "sial".to_string()),
        Some(r) => (trace_part(path, r), r as u32, format!("sial, MPI rank {r}")),
    };
    crate::trace::write(&file, pid, &label)
        .map_err(|e| RuntimeError::new(format!("cannot write the trace {}: {e}", file.display())))
}

/// The part of the trace that MPI rank `rank` writes.
fn trace_part(path: &std::path::Path, rank: usize) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".rank-{rank}"));
    PathBuf::from(name)
}

/// Where the job starts: the checkpoint of an earlier run (`--restart`), or the beginning.
fn resume_point(programs: &[Program], options: &Options) -> Result<WorkerCheckpoint> {
    Ok(match &options.restart {
        Some(dir) => {
            let c = dir.read_worker()?;
            if c.servers != options.servers {
                return Err(RuntimeError::input(format!(
                    "job {} ran with {} server(s); restart it with --servers {} (the saved arrays are split among that many servers)",
                    dir.id, c.servers, c.servers
                )));
            }
            if c.job != crate::checkpoint::fingerprint(programs) {
                return Err(RuntimeError::input(format!(
                    "job {} ran other programs (or other versions of them): restart it with the same programs, or start it anew without --restart",
                    dir.id
                )));
            }
            if c.completed > programs.len() {
                return Err(RuntimeError::input(format!(
                    "job {} completed {} programs but this job has only {}: restart it with the same programs",
                    dir.id,
                    c.completed,
                    programs.len()
                )));
            }
            c
        }
        None => WorkerCheckpoint {
            servers: options.servers,
            job: crate::checkpoint::fingerprint(programs),
            ..WorkerCheckpoint::default()
        },
    })
}

/// What each rank of a job runs: the programs still to do, from the restart point. The same
/// for every transport.
struct Ranks<'a> {
    todo: &'a [Program],
    resume: &'a WorkerCheckpoint,
    inputs: JobInputs<'a>,
}

impl Ranks<'_> {
    fn options(&self) -> &Options {
        self.inputs.options
    }

    /// Whether a test asked worker `rank` to die (only where it has programs to run).
    fn worker_dies(&self, rank: usize) -> bool {
        !self.todo.is_empty() && self.options().fault == Some(Fault::WorkerPanic(rank))
    }

    /// Whether a test asked server `rank` to die at its first request.
    fn server_dies(&self, rank: usize) -> bool {
        self.options().fault == Some(Fault::ServerPanic(rank))
    }

    /// The arrays server `rank` starts the job with, and where they are on disk: those of the
    /// checkpoint when restarting.
    fn saved_at_start(&self, rank: usize) -> Result<(Saved, ServerFiles)> {
        match &self.options().restart {
            Some(dir) => dir.read_server(rank),
            None => Ok((Saved::new(), ServerFiles::default())),
        }
    }

    /// What server `rank` does at the end of each program, before acknowledging it: write
    /// its checkpoint, given the arrays saved so far, the labels whose arrays the program
    /// changed, and the files already on disk (`on_disk`): the arrays new or changed, each in
    /// its own file (water/cc-pVTZ's CCSD wrote its 14.4 MB of integrals again with its
    /// 1.1 MB of amplitudes when a server's saved arrays were one file). None after the job's
    /// last program, which leaves nothing to restart (the job removes its files as it
    /// completes).
    fn server_checkpoint(
        &self,
        rank: usize,
        mut on_disk: ServerFiles,
    ) -> impl FnMut(&Saved, &BTreeSet<String>) -> Result<()> + '_ {
        let mut ended = 0;
        move |saved, changed| {
            ended += 1;
            let Some(dir) = &self.options().checkpoints else {
                return Ok(());
            };
            if ended == self.todo.len() {
                return Ok(());
            }
            dir.write_server(rank, &mut on_disk, saved, changed)
        }
    }

    /// Server `rank` serves every program, writing its checkpoint at the end of each.
    fn serve(&self, link: &mut dyn ServerLink) -> Result<()> {
        let rank = link.rank();
        crate::trace::track(&format!("server {rank}"));
        let (mut saved, on_disk) = self.saved_at_start(rank)?;
        let spill = self.options().spill(rank);
        let mut at_end = self.server_checkpoint(rank, on_disk);
        for program in self.todo {
            let blocks = crate::layout::block_counts(program, self.inputs.setup);
            serve(program, &blocks, link, &mut saved, &spill, &mut at_end)?;
        }
        Ok(())
    }

    /// A worker runs every program; worker 0 also collects the servers' figures and writes
    /// the worker checkpoint after each program (the servers wrote theirs before
    /// acknowledging the end). Returns this worker's figures and (worker 0) the servers'.
    fn work(
        &self,
        link: &mut dyn WorkerLink,
        out: &mut dyn Write,
        done: &mut Done<'_>,
    ) -> Result<(WorkerStats, Vec<ServerStats>)> {
        let options = self.options();
        crate::spare::limit(options.worker_memory);
        let first = link.rank() == 0;
        crate::trace::track(&format!("worker {}", link.rank()));
        let mut persisted = self.resume.persisted.clone();
        let mut mine = WorkerStats::default();
        let mut servers = Vec::new();
        let started = Instant::now();
        let count = self.resume.completed + self.todo.len();
        for (i, program) in self.todo.iter().enumerate() {
            let index = self.resume.completed + i;
            // Progress of a long job of several programs (worker 0, unless quiet).
            if first
                && count > 1
                && let Some(after) = options.progress
                && started.elapsed() >= after
            {
                eprintln!(
                    "sial: program {} of {count}, {}, starts after {:.1} s",
                    index + 1,
                    program.name,
                    started.elapsed().as_secs_f64()
                );
            }
            let env = Env {
                setup: self.inputs.setup,
                registry: self.inputs.registry,
                options,
                out: &mut *out,
                persisted: &mut persisted,
                program_index: index as u32,
            };
            let (stats, server_stats) = run_program(program, env, link, &mut *done)?;
            mine.add(&stats);
            add_servers(&mut servers, &server_stats);
            if first && let Some(dir) = &options.checkpoints {
                checkpoint_worker(dir, index + 1, self.resume, &persisted)?;
            }
        }
        Ok((mine, servers))
    }
}

/// One program on one worker; returns the worker's figures and (worker 0) the servers'.
fn run_program<'a>(
    program: &'a Program,
    env: Env<'a>,
    link: &'a mut dyn WorkerLink,
    done: &mut Done<'_>,
) -> Result<(WorkerStats, Vec<ServerStats>)> {
    let mut worker = Worker::new(program, env, link).map_err(|e| e.at(&program.name, 0))?;
    worker.run(done)?;
    Ok((worker.stats(), worker.take_server_stats()))
}

fn checkpoint_worker(
    dir: &JobDir,
    completed: usize,
    resume: &WorkerCheckpoint,
    persisted: &Persisted,
) -> Result<()> {
    dir.write_worker(&WorkerCheckpoint {
        completed,
        servers: resume.servers,
        job: resume.job,
        persisted: persisted.clone(),
    })
}

fn add_servers(total: &mut Vec<ServerStats>, more: &[ServerStats]) {
    if total.len() < more.len() {
        total.resize(more.len(), ServerStats::default());
    }
    for (t, m) in total.iter_mut().zip(more) {
        t.messages += m.messages;
        t.bytes_in += m.bytes_in;
        t.bytes_out += m.bytes_out;
        t.blocks_held_peak = t.blocks_held_peak.max(m.blocks_held_peak);
        t.bytes_held_peak = t.bytes_held_peak.max(m.bytes_held_peak);
        t.busy_seconds += m.busy_seconds;
        t.disk.peak_memory = t.disk.peak_memory.max(m.disk.peak_memory);
        t.disk.bytes_written += m.disk.bytes_written;
        t.disk.bytes_read += m.disk.bytes_read;
        t.disk.blocks_spilled += m.disk.blocks_spilled;
        t.disk.blocks_reloaded += m.disk.blocks_reloaded;
    }
}

/// Text of a panic payload.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".into())
}
