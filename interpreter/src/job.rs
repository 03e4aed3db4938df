//! A job: programs run in order on W workers and S servers, sharing only what was made
//! persistent. `servers == 0` is the single-process mode (one worker holding its server);
//! otherwise every rank is a thread of this process (the `local` transport).

use crate::checkpoint::{JobDir, WorkerCheckpoint};
use crate::cluster::message::ServerStats;
use crate::cluster::{Abort, WorkerLink, local, solo::Solo};
use crate::error::{Result, RuntimeError};
use crate::options::{Fault, Options};
use crate::persist::Persisted;
use crate::server::{Saved, serve};
use crate::setup::Setup;
use crate::specials::Registry;
use crate::worker::{Env, FinalState, Worker, WorkerStats};
use sial_bytecode::Program;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct ScratchGuard(pub(crate) Option<PathBuf>);

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

/// Runs every program of a job; `done` sees each program's final state on worker 0.
pub fn run(
    programs: &[Program],
    setup: &Setup,
    registry: &Registry,
    out: &mut (dyn Write + Send),
    options: &Options,
    mut done: impl FnMut(&FinalState<'_>),
) -> Result<Report> {
    let started = Instant::now();
    options.check_scratch()?;
    // Spill files are scratch: gone when the job ends, however it ends, unless kept.
    let _scratch = ScratchGuard(if options.keep_scratch {
        None
    } else {
        Some(options.scratch())
    });
    let resume = resume_point(programs, options)?;
    let resume = &resume;
    let job = JobInputs {
        setup,
        registry,
        options,
    };
    let mut report = if options.servers == 0 {
        if options.workers != 1 {
            return Err(RuntimeError::input(format!(
                "{} workers need at least one server (--servers 0 runs one worker holding the arrays itself)",
                options.workers
            )));
        }
        solo(programs, job, out, resume, &mut done)?
    } else if options.workers == 0 {
        return Err(RuntimeError::input("a job needs at least one worker"));
    } else {
        threads(programs, job, out, resume, &mut done)?
    };
    if let Some(dir) = &options.checkpoints {
        dir.remove();
    }

    report.wall = started.elapsed();
    report.programs = programs.iter().map(|p| p.name.clone()).collect();
    report.devices = crate::worker::gpu::describe(&options.gpu);
    Ok(report)
}

/// Where the job starts: the checkpoint of an earlier run (`--restart`), or the beginning.
pub(crate) fn resume_point(programs: &[Program], options: &Options) -> Result<WorkerCheckpoint> {
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

fn solo(
    programs: &[Program],
    job: JobInputs<'_>,
    out: &mut (dyn Write + Send),
    resume: &WorkerCheckpoint,
    done: &mut dyn FnMut(&FinalState<'_>),
) -> Result<Report> {
    let options = job.options;
    let mut persisted = resume.persisted.clone();
    let mut saved = saved_at_start(options, 0)?;
    let mut report = Report {
        workers: vec![WorkerStats::default()],
        servers: vec![ServerStats::default()],
        single_process: true,
        ..Report::default()
    };
    for (i, program) in programs.iter().enumerate().skip(resume.completed) {
        let mut link = Solo::new(program, &mut saved, options.spill(0));
        let stats = run_program(program, i, job, out, &mut persisted, &mut link, done)?;
        report.workers[0].add(&stats.0);
        add_servers(&mut report.servers, &stats.1);
        if let Some(dir) = &options.checkpoints {
            dir.write_server(0, &saved)?;
            checkpoint_worker(dir, i + 1, options.servers, resume.job, &persisted)?;
        }
    }
    Ok(report)
}

/// One program on one worker; returns the worker's figures and (worker 0) the servers'.
fn run_program(
    program: &Program,
    index: usize,
    job: JobInputs<'_>,
    out: &mut dyn Write,
    persisted: &mut Persisted,
    link: &mut dyn WorkerLink,
    done: &mut dyn FnMut(&FinalState<'_>),
) -> Result<(WorkerStats, Vec<ServerStats>)> {
    let env = Env {
        setup: job.setup,
        registry: job.registry,
        options: job.options,
        out,
        persisted,
        program_index: index as u32,
    };
    let mut worker = Worker::new(program, env, link).map_err(|e| e.at(&program.name, 0))?;
    worker.run()?;
    if worker.rank == 0 {
        done(&worker.state());
    }
    Ok((worker.stats(), std::mem::take(&mut worker.server_stats)))
}

/// The arrays server `rank` starts the job with: those of the checkpoint when restarting.
fn saved_at_start(options: &Options, rank: usize) -> Result<Saved> {
    match &options.restart {
        Some(dir) => dir.read_server(rank),
        None => Ok(Saved::new()),
    }
}

/// Server `rank` serves every program of `todo`, writing its checkpoint at the end of each.
pub(crate) fn serve_job(
    todo: &[Program],
    link: &mut dyn crate::cluster::ServerLink,
    options: &Options,
    rank: usize,
) -> Result<()> {
    let mut saved = saved_at_start(options, rank)?;
    let spill = options.spill(rank);
    let mut at_end = |saved: &Saved| match &options.checkpoints {
        Some(dir) => dir.write_server(rank, saved),
        None => Ok(()),
    };
    for program in todo {
        serve(program, link, &mut saved, &spill, &mut at_end)?;
    }
    Ok(())
}

/// A worker runs every program of `todo`; worker 0 also collects the servers' figures and
/// writes the worker checkpoint after each program (the servers wrote theirs before
/// acknowledging the end). Returns this worker's figures and (worker 0) the servers'.
pub(crate) fn work_job(
    todo: &[Program],
    resume: &WorkerCheckpoint,
    job: JobInputs<'_>,
    out: &mut dyn Write,
    link: &mut dyn WorkerLink,
    done: &mut dyn FnMut(&FinalState<'_>),
) -> Result<(WorkerStats, Vec<ServerStats>)> {
    let options = job.options;
    let first = link.rank() == 0;
    let mut persisted = resume.persisted.clone();
    let mut mine = WorkerStats::default();
    let mut servers = Vec::new();
    for (i, program) in todo.iter().enumerate() {
        let s = run_program(
            program,
            resume.completed + i,
            job,
            out,
            &mut persisted,
            link,
            done,
        )?;
        mine.add(&s.0);
        add_servers(&mut servers, &s.1);
        if first && let Some(dir) = &options.checkpoints {
            checkpoint_worker(
                dir,
                resume.completed + i + 1,
                options.servers,
                resume.job,
                &persisted,
            )?;
        }
    }
    Ok((mine, servers))
}

fn checkpoint_worker(
    dir: &JobDir,
    completed: usize,
    servers: usize,
    job: u32,
    persisted: &Persisted,
) -> Result<()> {
    dir.write_worker(&WorkerCheckpoint {
        completed,
        servers,
        job,
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
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".into())
}

/// Runs `body` as rank `who`; any failure (error or panic) stops the whole job.
fn guarded<T>(abort: &Abort, who: &str, body: impl FnOnce() -> Result<T>) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            abort.fail(e);
            None
        }
        Err(p) => {
            abort.fail(RuntimeError::new(format!(
                "{who} died: {} (the job was stopped)",
                panic_text(p.as_ref())
            )));
            None
        }
    }
}

fn threads(
    programs: &[Program],
    job: JobInputs<'_>,
    out: &mut (dyn Write + Send),
    resume: &WorkerCheckpoint,
    done: &mut dyn FnMut(&FinalState<'_>),
) -> Result<Report> {
    let options = job.options;
    let abort = Arc::new(Abort::default());
    let todo = &programs[resume.completed.min(programs.len())..];
    let (mut worker_links, server_links) = local::fabric(
        options.workers,
        options.servers,
        Arc::clone(&abort),
        options.simulated_latency,
    );
    let mut report = Report {
        workers: vec![WorkerStats::default(); options.workers],
        servers: vec![ServerStats::default(); options.servers],
        ..Report::default()
    };
    let mut link0 = worker_links.remove(0);
    let abort = &abort;
    std::thread::scope(|scope| {
        let mut servers = Vec::new();
        for mut link in server_links {
            let rank = crate::cluster::ServerLink::rank(&link);
            let who = format!("server {rank}");
            servers.push(spawn(scope, move || {
                guarded(abort, &who, || {
                    if options.fault == Some(Fault::ServerPanic(rank)) {
                        let _ = crate::cluster::ServerLink::recv(&mut link);
                        panic!("injected fault");
                    }
                    serve_job(todo, &mut link, options, rank)
                })
            }));
        }
        let mut workers = Vec::new();
        for mut link in worker_links {
            let rank = link.rank();
            let who = format!("worker {rank}");
            workers.push(spawn(scope, move || {
                guarded(abort, &who, || {
                    if !todo.is_empty() && options.fault == Some(Fault::WorkerPanic(rank)) {
                        panic!("injected fault");
                    }
                    let mut out = std::io::stdout();
                    let (stats, _) = work_job(todo, resume, job, &mut out, &mut link, &mut |_| {})?;
                    Ok(stats)
                })
            }));
        }
        let first = guarded(abort, "worker 0", || {
            if !todo.is_empty() && options.fault == Some(Fault::WorkerPanic(0)) {
                panic!("injected fault");
            }
            let (stats, servers) = work_job(todo, resume, job, out, &mut link0, done)?;
            report.workers[0] = stats;
            add_servers(&mut report.servers, &servers);
            Ok(())
        });
        for (i, w) in workers.into_iter().enumerate() {
            if let Ok(Some(s)) = w.join() {
                report.workers[i + 1] = s;
            }
        }
        for s in servers {
            let _ = s.join();
        }
        first
    });
    match abort.error() {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

fn spawn<'s, T: Send + 's>(
    scope: &'s std::thread::Scope<'s, '_>,
    body: impl FnOnce() -> T + Send + 's,
) -> std::thread::ScopedJoinHandle<'s, T> {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn_scoped(scope, body)
        .unwrap_or_else(|e| panic!("cannot start a rank thread: {e}"))
}
