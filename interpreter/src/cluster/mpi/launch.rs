//! This process's part of a job started by `mpirun`: its role, its programs, its failure.

use super::*;

/// This process's part of a job started by `mpirun`: worker or server by its rank's place in
/// `layout(options.workers, options.servers)`, which must account for every process. Returns
/// the report on global rank 0 (worker 0, which alone gets `out` and `done`) and `None` on the
/// other ranks. A failure on any rank prints `FATAL ERROR: ...` and aborts every process with
/// status 1 (`MPI_Abort`): it does not return.
pub fn run(
    programs: &[Program],
    setup: &Setup,
    registry: &Registry,
    out: &mut (dyn Write + Send),
    options: &Options,
    mut done: impl FnMut(&FinalState<'_>),
) -> Result<Option<Report>> {
    let started = Instant::now();
    let Some((universe, _)) = ::mpi::initialize_with_threading(Threading::Funneled) else {
        return Err(RuntimeError::new("MPI cannot be initialised twice"));
    };
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
    let who = match &link {
        Ok(Link::Server(s)) => format!("server {}", s.rank),
        Ok(Link::Worker(w)) => format!("worker {}", w.rank),
        Err(_) => format!("rank {}", world.rank()),
    };
    let body = catch_unwind(AssertUnwindSafe(|| -> Result<Option<Report>> {
        options.check_scratch()?;
        let resume = job::resume_point(programs, options)?;
        let todo = &programs[resume.completed.min(programs.len())..];
        match link? {
            Link::Server(mut link) => {
                let rank = link.rank;
                serve_all(todo, &mut link, options, rank)?;
                link.outbox.drain();
                Ok(None)
            }
            Link::Worker(mut link) => {
                let job = job::JobInputs {
                    setup,
                    registry,
                    options,
                };
                let mut report = work_all(todo, &resume, job, out, &mut link, &mut done)?;
                link.outbox.drain();
                if let Some(r) = &mut report {
                    r.programs = programs.iter().map(|p| p.name.clone()).collect();
                }
                Ok(report)
            }
        }
    }));
    let failure = match body {
        Ok(Ok(report)) => {
            let report = report.map(|mut r| {
                r.wall = started.elapsed();
                r
            });
            if !options.keep_scratch {
                let _ = std::fs::remove_dir_all(options.scratch());
            }
            // Dropping the universe finalises MPI: every rank waits for the others here.
            drop(world);
            drop(universe);
            return Ok(report);
        }
        Ok(Err(e)) => e,
        Err(p) => RuntimeError::new(format!(
            "{who} died: {} (the job was stopped)",
            job::panic_text(p.as_ref())
        )),
    };
    let _ = out.flush();
    eprintln!("{failure}");
    if world.rank() == 0
        && let Some(dir) = &options.checkpoints
        && let Ok(c) = dir.read_worker()
    {
        eprintln!(
            "sial: {} of {} programs completed; restart the job from there with --restart {} (checkpoints in {})",
            c.completed,
            programs.len(),
            dir.id,
            dir.path().display()
        );
    }
    if !options.keep_scratch {
        let _ = std::fs::remove_dir_all(options.scratch());
    }
    // The launcher forwards a rank's output through a pipe; an abort (this rank's or another
    // failing rank's) can tear the pipe down before the message is through. Every failing
    // rank prints first, then waits a moment before aborting; the other ranks wait longer, so
    // that rank 0, which says how to restart the job, is not stopped before it has.
    let wait = if world.rank() == 0 { 200 } else { 600 };
    std::thread::sleep(std::time::Duration::from_millis(wait));
    world.abort(1)
}

/// Every rank writes its checkpoints under the name rank 0 chose (the default name contains
/// the process id, which differs between ranks).
pub(super) fn agree_on_checkpoints(world: &SimpleCommunicator, options: &Options) -> Options {
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

pub(super) fn serve_all(
    todo: &[Program],
    link: &mut MpiServer,
    options: &Options,
    rank: usize,
) -> Result<()> {
    if options.fault == Some(Fault::ServerPanic(rank)) {
        let _ = link.recv();
        // A testing aid: die as a killed process would, without a word.
        std::process::abort();
    }
    job::serve_job(todo, link, options, rank)
}

pub(super) fn work_all(
    todo: &[Program],
    resume: &crate::checkpoint::WorkerCheckpoint,
    job: job::JobInputs<'_>,
    out: &mut (dyn Write + Send),
    link: &mut MpiWorker,
    done: &mut dyn FnMut(&FinalState<'_>),
) -> Result<Option<Report>> {
    let options = job.options;
    let rank = link.rank;
    if !todo.is_empty() && options.fault == Some(Fault::WorkerPanic(rank)) {
        // A testing aid: die as a killed process would, without a word.
        std::process::abort();
    }
    let mut stdout = std::io::stdout();
    let (mine, mut servers) = if rank == 0 {
        job::work_job(todo, resume, job, out, link, done)?
    } else {
        job::work_job(todo, resume, job, &mut stdout, link, &mut |_| {})?
    };
    // Every worker's figures to worker 0 for the summary.
    let all = link.all_gather(stats_out(&mine))?;
    if rank != 0 {
        return Ok(None);
    }
    if let Some(dir) = &options.checkpoints {
        dir.remove();
    }
    servers.resize(options.servers, ServerStats::default());
    let mut workers: Vec<WorkerStats> = all.iter().map(|v| stats_in(v)).collect();
    // Worker 0's device keeps its name.
    if let (Some(w), Some(g)) = (workers.first_mut(), &mine.gpu) {
        w.gpu = Some(g.clone());
    }
    Ok(Some(Report {
        workers,
        servers,
        devices: crate::worker::gpu::describe(&options.gpu),
        ..Report::default()
    }))
}
