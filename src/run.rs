//! `sial run`: the run options from the command line (checked before anything runs), the job
//! (setup and programs), the run on threads or under mpirun, and what it writes.

use super::*;
use sial_interpreter::checkpoint::JobDir;
use sial_interpreter::dump::DumpFile;
use sial_interpreter::dump::arrays::ArrayDir;
use sial_interpreter::job::Report;
use sial_interpreter::options::Options as RunOptions;
use sial_interpreter::report::say;
use sial_interpreter::setup::Setup;
use sial_interpreter::worker::FinalState;

/// `sial run`: resolves the programs and the setup, compiles, runs, dumps.
pub fn run_job(args: RunArgs) -> ExitCode {
    let mpi = mpi_processes();
    let mut options = match run_options(&args, mpi) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let cache = match integral_cache(&args) {
        Ok(bytes) => bytes,
        Err(e) => return fail(e),
    };
    let job = match load_job(&args) {
        Ok(job) => job,
        Err(code) => return code,
    };
    options.work_dir = std::env::current_dir().unwrap_or_default();
    match job_dirs(
        &options.work_dir,
        args.restart.as_deref(),
        job.programs.len(),
    ) {
        Ok((checkpoints, restart)) => {
            options.checkpoints = checkpoints;
            options.restart = restart;
        }
        Err(e) => return fail(e.to_string()),
    }
    let cleanup = interrupt::Cleanup {
        scratch: (!options.keep_scratch).then(|| options.scratch()),
        checkpoints: options.checkpoints.clone(),
        programs: job.programs.len(),
    };
    if let Err(e) = interrupt::install(cleanup) {
        return fail(e);
    }
    if let Some(root) = options.scratch().parent()
        && rank_zero()
    {
        interrupt::report_leftovers(root);
    }
    let mut registry = sial_interpreter::specials::general_registry();
    sial_chemistry::register(&mut registry);
    for library in &args.specials {
        if let Err(e) = sial_interpreter::specials::plugin::load(library, &mut registry) {
            return fail(e.to_string());
        }
    }
    // Under mpirun, MPI starts before the compiling, which the ranks share. Everything that
    // can fail on one rank alone has been checked above: from here on every rank meets the
    // same outcome.
    let session = match mpi.map(|_| mpi::Session::start(&options)).transpose() {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    let node = session.as_ref().map(mpi::Session::node_ranks);
    let cache = cache.unwrap_or_else(|| default_integral_cache(node.as_ref().map_or(1, Vec::len)));
    sial_chemistry::integrals::set_cache_budget(cache);
    let integrals = session
        .as_ref()
        .zip(node.as_deref())
        .and_then(|(s, node)| share_integrals(s, node, cache));
    let compiled = match compile::programs(&job.programs, &job.compiler, session.as_ref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = checks::sets(&args.set, &job.known, &compiled) {
        return fail(e);
    }
    let ranks = Ranks { session, integrals };
    execute(&args, ranks, &compiled, &job.setup, &registry, &options)
}

/// The integral cache's budget for this process (its worker threads share one cache), where
/// `--integral-cache` gives it; else [`default_integral_cache`] once the node's ranks are known.
fn integral_cache(args: &RunArgs) -> Result<Option<usize>, String> {
    args.integral_cache
        .as_deref()
        .map(|text| parse_size(text).map_err(|e| format!("--integral-cache: {e}")))
        .transpose()
}

/// The default budget of the integral cache: a quarter of the machine's memory shared among
/// the `on_node` processes on it (under mpirun, the node's ranks as the shared table counts
/// them), and never less than the library's default.
fn default_integral_cache(on_node: usize) -> usize {
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
        .unwrap_or(0);
    (memory / 4 / on_node.max(1)).max(sial_chemistry::integrals::DEFAULT_CACHE_BUDGET)
}

/// Under mpirun, the ranks of each node keep the integral blocks they compute in one table,
/// in a file in `/dev/shm` (else the temporary folder) of the per-rank budget times the node's
/// ranks: a block is computed once per node, not once per rank. Where that cannot be set up
/// each rank keeps its own, as in a run on threads, and rank 0 says why. Returns, where a table
/// is shared, what the summary says of it.
fn share_integrals(session: &mpi::Session, node: &[usize], budget: usize) -> Option<String> {
    if budget == 0 {
        return None;
    }
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let shared = session
        .node_file(node, &dir, "integrals", budget as u64)
        .map_err(|e| e.details().message.clone())
        .and_then(|file| match file {
            Some(file) => {
                let bytes = file.metadata().map_or(0, |m| m.len());
                sial_chemistry::integrals::share_among_processes(file)
                    .map(|()| Some(bytes))
                    .map_err(|e| e.to_string())
            }
            None => Ok(None),
        });
    match shared {
        Ok(bytes) => bytes.map(|bytes| {
            format!(
                "one table for the {} ranks of this node, up to {} MiB in {}",
                bytes / budget as u64,
                bytes >> 20,
                dir.display()
            )
        }),
        Err(e) => {
            if rank_zero() {
                eprintln!(
                    "sial: warning: each rank keeps its own integral blocks (none shared on the \
                     node): {e} (--integral-cache sets the size per rank)"
                );
            }
            None
        }
    }
}

/// Every run option, parsed and checked: rank counts, sizes, output paths, devices,
/// prefetching. Nothing has run yet when one is wrong.
fn run_options(args: &RunArgs, mpi: Option<usize>) -> Result<RunOptions, String> {
    let (workers, servers) = match mpi {
        Some(p) => mpi_ranks(p, args.workers, args.servers)?,
        None => {
            let (w, s) = ranks(args.workers, args.servers)?;
            checks::thread_ranks(w, s)?;
            (w, s)
        }
    };
    for (option, path) in [
        ("--dump", &args.dump),
        ("--stats", &args.stats),
        ("--trace", &args.trace),
    ] {
        if let Some(path) = path {
            checks::output_file(option, path)?;
        }
    }
    if let Some(dir) = &args.dump_arrays {
        checks::output_dir("--dump-arrays", dir)?;
    }
    let size = |option: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(parse_size)
            .transpose()
            .map_err(|e| format!("{option}: {e}"))
    };
    let simulated_latency = match args.simulated_latency.as_deref().map(parse_duration) {
        None => std::time::Duration::ZERO,
        Some(Ok(d)) if (mpi.is_some() || servers == 0) && !d.is_zero() => {
            return Err("--simulated-latency works with the thread transport only (server ranks as threads, not under mpirun and not with --servers 0)".into());
        }
        Some(Ok(d)) => d,
        Some(Err(e)) => return Err(format!("--simulated-latency: {e}")),
    };
    Ok(RunOptions {
        workers,
        servers,
        worker_memory: size("--worker-memory", &args.worker_memory)?
            .unwrap_or(sial_interpreter::options::DEFAULT_WORKER_MEMORY),
        server_memory: size("--server-memory", &args.server_memory)?.unwrap_or(usize::MAX),
        scratch_limit: size("--scratch-limit", &args.scratch_limit)?.map(|m| m as u64),
        snapshot: args.dump.is_some() || args.dump_arrays.is_some(),
        fault: args.inject_fault.as_deref().map(parse_fault).transpose()?,
        scratch_dir: args.scratch_dir.clone(),
        keep_scratch: args.keep_scratch,
        prefetch: args
            .prefetch
            .parse()
            .map_err(|e| format!("--prefetch: {e}"))?,
        simulated_latency,
        heartbeat: match args.heartbeat.as_deref().map(parse_duration) {
            None => Some(sial_interpreter::options::DEFAULT_HEARTBEAT),
            Some(Ok(d)) => (!d.is_zero()).then_some(d),
            Some(Err(e)) => return Err(format!("--heartbeat: {e}")),
        },
        profile: args.profile,
        trace: args.trace.clone(),
        trace_min: match args.trace_min.as_deref().map(parse_duration) {
            None => sial_interpreter::options::DEFAULT_TRACE_MIN,
            Some(Ok(d)) => d,
            Some(Err(e)) => return Err(format!("--trace-min: {e}")),
        },
        progress: match args.progress_after.as_deref().map(parse_duration) {
            _ if args.quiet => None,
            None => Some(sial_interpreter::options::DEFAULT_PROGRESS_AFTER),
            Some(Ok(d)) => Some(d),
            Some(Err(e)) => return Err(format!("--progress-after: {e}")),
        },
        gpu: gpu_options(args)?,
        ..RunOptions::default()
    })
}

/// A job before its programs are compiled: the setup (a setup file, `--set`, `--segments`),
/// the programs' files and how to compile them, and the names the setup knew before `--set`.
struct Job {
    setup: Setup,
    programs: Vec<PathBuf>,
    compiler: Options,
    known: std::collections::BTreeSet<String>,
}

/// The job of the command line.
fn load_job(args: &RunArgs) -> Result<Job, ExitCode> {
    let (setup_files, mut programs): (Vec<PathBuf>, Vec<PathBuf>) =
        args.job.iter().cloned().partition(|p| is_setup_file(p));
    let job_file = setup_files.first().cloned();
    let setup_path = match (setup_files.len(), &args.setup) {
        (0, given) => given.clone(),
        (1, None) => job_file.clone(),
        _ => {
            return Err(fail(
                "give one setup file (as a job or with --setup)".into(),
            ));
        }
    };
    let setup_path = setup_path.or_else(|| {
        programs
            .first()
            .and_then(|p| sial_interpreter::setup::beside(p))
    });
    let options = Options::from_env(args.include.clone());
    // A job's programs are searched like imports: `-I` directories, then SIALPATH.
    let search: Vec<PathBuf> = options
        .include_dirs
        .iter()
        .chain(&options.sialpath)
        .cloned()
        .collect();
    let mut setup = match &setup_path {
        Some(p) => sial_interpreter::setup::load(p, &search).map_err(|e| fail(e.to_string()))?,
        None => Setup::default(),
    };
    if let Some(job) = &job_file
        && !programs.is_empty()
        && !setup.programs.is_empty()
    {
        return Err(fail(format!(
            "{} lists the job's programs; run it alone, or give programs with --setup {} for its data",
            job.display(),
            job.display()
        )));
    }
    let known: std::collections::BTreeSet<String> = setup
        .ints
        .keys()
        .chain(setup.scalars.keys())
        .cloned()
        .collect();
    for a in &args.set {
        setup.set(a).map_err(|e| fail(e.to_string()))?;
    }
    for a in &args.segments {
        setup.set_segments(a).map_err(|e| fail(e.to_string()))?;
    }
    if programs.is_empty() {
        programs = setup.programs.clone();
    }
    if programs.is_empty() {
        return Err(fail(
            "no program to run: name a .sial file or a setup file that lists programs".into(),
        ));
    }
    Ok(Job {
        setup,
        programs,
        compiler: options,
        known,
    })
}

/// Under mpirun, this process's MPI and what the summary says of the node's integral table.
struct Ranks {
    session: Option<mpi::Session>,
    integrals: Option<String>,
}

/// Runs the job on threads or under mpirun, then writes what was asked for.
fn execute(
    args: &RunArgs,
    ranks: Ranks,
    compiled: &[bytecode::Program],
    setup: &Setup,
    registry: &sial_interpreter::specials::Registry,
    options: &RunOptions,
) -> ExitCode {
    let mut out = std::io::BufWriter::new(std::io::stdout());
    // Written after every program: a job that fails later (under mpirun, where a failing
    // rank stops every process) keeps the dump of what completed. Only the process of worker
    // 0 writes it.
    let mut dump = None;
    let mut arrays = None;
    let mut finished = Vec::new();
    let mut collect = |state: &FinalState<'_>| {
        if let Some(path) = &args.dump {
            if dump.is_none() {
                dump = Some(DumpFile::create(path)?);
            }
            if let Some(d) = &mut dump {
                d.program(state)?;
            }
        }
        if let Some(dir) = &args.dump_arrays {
            if arrays.is_none() {
                arrays = Some(ArrayDir::create(dir)?);
            }
            if let Some(a) = &mut arrays {
                a.program(state)?;
            }
        }
        finished.push(sial_chemistry::results::ProgramScalars {
            program: state.program.name.clone(),
            scalars: state
                .program
                .scalars
                .iter()
                .zip(state.scalars)
                .map(|(s, v)| (s.name.clone(), *v))
                .collect(),
        });
        Ok(())
    };
    let result = if let Some(session) = ranks.session {
        match session.run(compiled, setup, registry, &mut out, options, &mut collect) {
            // Another rank than 0: rank 0 reports and writes the files.
            Ok(None) => return ExitCode::SUCCESS,
            Ok(Some(report)) => Ok(report),
            Err(e) => Err(e),
        }
    } else {
        sial_interpreter::job::run(compiled, setup, registry, &mut out, options, collect)
    };
    let _ = out.flush();
    drop(out);
    // A job that failed in its first program still leaves a (program-less) dump.
    if let (Some(path), None) = (&args.dump, &dump)
        && let Err(e) = DumpFile::create(path)
    {
        return fail(e.to_string());
    }
    let energies = sial_chemistry::results::energies(&finished);
    if let Some(path) = &args.results {
        let text = serde_json::to_string_pretty(&sial_chemistry::results::to_json(&energies))
            .unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            return fail(format!("cannot write {}: {e}", path.display()));
        }
    }
    match result {
        Ok(report) => report_success(args, &report, &energies, ranks.integrals.as_deref()),
        Err(e) => {
            say(&e.to_string());
            if let Some(dir) = &options.checkpoints
                && let Ok(c) = dir.read_worker()
            {
                say(&format!(
                    "sial: {} of {} programs completed; restart the job from there with --restart {} (checkpoints in {})",
                    c.completed,
                    compiled.len(),
                    dir.id,
                    dir.path().display()
                ));
            }
            ExitCode::from(1)
        }
    }
}

/// The summary, the energies, the profile and `--stats` of a run that completed.
fn report_success(
    args: &RunArgs,
    report: &Report,
    energies: &[sial_chemistry::results::Energy],
    integrals: Option<&str>,
) -> ExitCode {
    if !args.quiet {
        eprint!("{}", sial_interpreter::report::summary(report));
        if let Some(integrals) = integrals {
            eprintln!("  integral blocks: {integrals}");
        }
        if !energies.is_empty() {
            eprint!("{}", sial_chemistry::results::table(energies));
        }
    }
    if args.profile {
        eprint!("{}", sial_interpreter::report::profile(report));
    }
    if let Some(path) = &args.stats {
        let text = serde_json::to_string_pretty(&sial_interpreter::report::stats_json(report))
            .unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            return fail(format!("cannot write {}: {e}", path.display()));
        }
    }
    ExitCode::SUCCESS
}

/// `--dump`: the final state of every program that completed.
fn is_setup_file(p: &Path) -> bool {
    p.extension()
        .is_some_and(|e| e == "toml" || e == "json" || e == "dat")
}

/// Checkpoint folders: a job of several programs writes checkpoints (under a new id, or the id
/// it restarts, so that it can be restarted again). The id to restart must name an existing
/// job of the jobs folder.
fn job_dirs(
    work_dir: &Path,
    restart: Option<&str>,
    programs: usize,
) -> Result<(Option<JobDir>, Option<JobDir>), sial_interpreter::error::RuntimeError> {
    let restart = restart
        .map(|id| JobDir::existing(work_dir, id))
        .transpose()?;
    let checkpoints = match &restart {
        Some(r) => Some(r.clone()),
        None if programs > 1 => Some(JobDir::new(
            work_dir,
            &sial_interpreter::checkpoint::new_job_id(),
        )),
        None => None,
    };
    Ok((checkpoints, restart))
}
