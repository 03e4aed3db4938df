//! `sial`: the command line of the SIAL compiler and runtime.

mod checks;
mod compile;
mod interrupt;
mod mpi;
mod run;

use clap::{Args, Parser, Subcommand};
use sial_compiler::bytecode;
use sial_compiler::{Compilation, Options};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Blocks start on cache lines (`sial_superinstructions::line_aligned`).
#[global_allocator]
static ALLOCATOR: sial_superinstructions::line_aligned::LineAligned =
    sial_superinstructions::line_aligned::LineAligned;

#[derive(Parser)]
#[command(
    name = "sial",
    version,
    about = "SIAL compiler and runtime (Super Instruction Architecture)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and check programs; print diagnostics (exit status 1 on errors).
    Check {
        /// SIAL source files (.sial or .sialx).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Directory searched for imports (after the importing file's directory).
        #[arg(short = 'I', value_name = "DIR")]
        include: Vec<PathBuf>,
    },
    /// Compile a program to bytecode.
    Compile {
        file: PathBuf,
        /// Output file (default: the source path with extension .siox).
        #[arg(short = 'o', value_name = "OUT")]
        output: Option<PathBuf>,
        #[arg(short = 'I', value_name = "DIR")]
        include: Vec<PathBuf>,
    },
    /// Run a job: programs (sources or bytecode) in order, or a setup file that lists them.
    Run(Box<RunArgs>),
    /// Print a readable listing of a program's bytecode (from a bytecode file or a source).
    Disasm {
        file: PathBuf,
        #[arg(short = 'I', value_name = "DIR")]
        include: Vec<PathBuf>,
    },
    /// Write a job for ACES4's programs from a molecule: closed-shell RHF with SCF, MP2, CCSD
    /// or CCSD(T); run it with `sial run JOB.json -I <ACES4 qm folders>`.
    Setup(SetupArgs),
}

/// The options of `sial setup`.
#[derive(Args)]
struct SetupArgs {
    /// The molecule: an XYZ file (atom count, comment, then `element x y z` in ångström).
    #[arg(long, value_name = "FILE.xyz")]
    molecule: PathBuf,
    /// Basis set: sto-3g, 3-21g, 6-31g, 6-31g*, cc-pvdz, cc-pvtz or aug-cc-pvdz (H to Ar).
    #[arg(long, value_name = "NAME")]
    basis: String,
    /// scf, mp2, ccsd or ccsd(t).
    #[arg(long, value_name = "METHOD", default_value = "scf")]
    method: String,
    /// Net charge of the molecule.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    charge: i64,
    /// Leave the core orbitals uncorrelated (MP2 and coupled cluster).
    #[arg(long)]
    frozen_core: bool,
    /// Memory per rank the segment sizes are chosen for (e.g. 512M, 2G).
    #[arg(long, value_name = "SIZE", default_value = "2G")]
    memory: String,
    /// The job file to write (default: the molecule's name with extension .json).
    #[arg(short = 'o', value_name = "JOB.json")]
    output: Option<PathBuf>,
    /// Run these programs instead of ACES4's for the method (comma separated, e.g. your own
    /// `scf.sial,mp2.sial`); they get the same predefined values and arrays.
    #[arg(long, value_name = "P1,P2,...", value_delimiter = ',')]
    programs: Vec<String>,
}

/// Reports a command-line error; exit status 1.
fn fail(msg: String) -> ExitCode {
    eprintln!("sial: error: {msg}");
    ExitCode::from(1)
}

/// `sial setup`: checks everything, then writes the job (never a job that fails later).
fn setup_job(args: SetupArgs) -> ExitCode {
    use sial_chemistry::setup::{BasisSet, Molecule, Options, build};
    let memory = match parse_size(&args.memory) {
        Ok(m) => m as u64,
        Err(e) => return fail(format!("--memory: {e}")),
    };
    let method = match args.method.parse() {
        Ok(m) => m,
        Err(e) => return fail(format!("{e}")),
    };
    let molecule = match Molecule::read(&args.molecule) {
        Ok(m) => m,
        Err(e) => return fail(e.to_string()),
    };
    let basis = match BasisSet::named(&args.basis) {
        Ok(b) => b,
        Err(e) => return fail(e.to_string()),
    };
    let options = Options {
        method,
        charge: args.charge,
        frozen_core: args.frozen_core,
        memory,
    };
    let mut job = match build(&molecule, &basis, &options) {
        Ok(j) => j,
        Err(e) => return fail(e.to_string()),
    };
    if !args.programs.is_empty() {
        job.programs = args.programs.clone();
    }
    let out = args
        .output
        .unwrap_or_else(|| args.molecule.with_extension("json"));
    if let Err(e) = std::fs::write(&out, job.to_json()) {
        return fail(format!("cannot write {}: {e}", out.display()));
    }
    eprintln!(
        "sial: wrote {} ({} atoms, {} basis functions, programs {})",
        out.display(),
        molecule.atoms.len(),
        job.ints.get("nbasis_funcs").copied().unwrap_or(0),
        job.programs.join(" ")
    );
    ExitCode::SUCCESS
}

/// The stack of a thread that compiles: the compiler recurses over nested expressions and
/// blocks, whose depth the compiler's input limits bound; a generous stack keeps that bound far
/// from overflow.
const COMPILER_STACK: usize = 256 << 20;

fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(feature = "mpi")]
    if let Some(processes) = mpi_processes() {
        // SAFETY: no other thread has started yet.
        unsafe { mpi::prepare_process(processes) };
    }
    let worker = std::thread::Builder::new()
        .stack_size(COMPILER_STACK)
        .spawn(move || run(cli));
    match worker.map(|w| w.join()) {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("sial: error: internal failure");
            ExitCode::from(70)
        }
    }
}

fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Check { files, include } => {
            let options = Options::from_env(include);
            let mut failed = false;
            for f in &files {
                match compile(f, &options) {
                    Some(c) if c.program.is_some() => {}
                    _ => failed = true,
                }
            }
            if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Command::Compile {
            file,
            output,
            include,
        } => {
            let options = Options::from_env(include);
            let Some(program) = compile(&file, &options).and_then(|c| c.program) else {
                return ExitCode::from(1);
            };
            let out = output.unwrap_or_else(|| file.with_extension("siox"));
            if let Err(e) = std::fs::write(&out, bytecode::encode(&program)) {
                eprintln!("sial: error: cannot write {}: {e}", out.display());
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Command::Run(args) => run::run_job(*args),
        Command::Setup(args) => setup_job(args),
        Command::Disasm { file, include } => {
            let program = match load_program(&file, &Options::from_env(include)) {
                Ok(p) => p,
                Err(code) => return code,
            };
            let files: Vec<Option<String>> = program
                .files
                .iter()
                .map(|f| std::fs::read_to_string(f).ok())
                .collect();
            let line = |f: usize, l: u32| -> Option<String> {
                let text = files.get(f)?.as_ref()?;
                text.split(['\n', '\r'])
                    .nth(l.checked_sub(1)? as usize)
                    .map(str::to_string)
            };
            let listing = bytecode::disassemble(&program, &line);
            let _ = std::io::stdout().write_all(listing.as_bytes());
            ExitCode::SUCCESS
        }
    }
}

/// Compiles one source file, printing its diagnostics to stderr.
fn compile(path: &Path, options: &Options) -> Option<Compilation> {
    compile_showing(path, options, true)
}

/// Compiles `path`, printing its diagnostics (warnings about unused declarations only counted
/// unless `show_unused`).
fn compile_showing(path: &Path, options: &Options, show_unused: bool) -> Option<Compilation> {
    match sial_compiler::compile_file(path, options) {
        Ok(c) => {
            let text = if show_unused {
                c.diagnostics.render(&c.sources)
            } else {
                c.diagnostics.render_for_run(&c.sources)
            };
            // Under mpirun every rank compiles the same sources: rank 0 speaks for all.
            if rank_zero() {
                let _ = std::io::stderr().write_all(text.as_bytes());
            }
            Some(c)
        }
        Err(e) => {
            eprintln!("{}: error: cannot read file: {e}", path.display());
            None
        }
    }
}

/// A program from a bytecode file, or compiled from source; the compiler's messages are
/// printed.
fn load_program(path: &Path, options: &Options) -> Result<bytecode::Program, ExitCode> {
    let said = |text: &str| {
        let _ = std::io::stderr().write_all(text.as_bytes());
    };
    match sial::load_program(path, options) {
        Ok((program, warnings)) => {
            said(&warnings);
            Ok(program)
        }
        Err(sial::Error::Diagnostics(text)) => {
            said(&text);
            Err(ExitCode::from(1))
        }
        Err(e) => {
            eprintln!("{e}");
            Err(ExitCode::from(1))
        }
    }
}

/// The options of `sial run`.
#[derive(Args)]
struct RunArgs {
    /// `.sial`/`.sialx` sources, bytecode files, or one setup file (`.toml`, ACES4 `.json` or `.dat`).
    #[arg(required = true)]
    job: Vec<PathBuf>,
    /// Setup data (default: NAME.toml beside the first program, if there is one).
    #[arg(long, value_name = "FILE")]
    setup: Option<PathBuf>,
    /// Set a predefined int or scalar.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Set the segment extents of an index kind.
    #[arg(long = "segments", value_name = "KIND=E1,E2,...")]
    segments: Vec<String>,
    /// Worker ranks (default: one per core; `--workers 1 --servers 0` is one process
    /// with no server ranks).
    #[arg(long)]
    workers: Option<usize>,
    /// Server ranks (default 1).
    #[arg(long)]
    servers: Option<usize>,
    /// Memory per worker for fetched distributed/served blocks, e.g. 512M, 2G, or bytes.
    #[arg(long, value_name = "SIZE")]
    worker_memory: Option<String>,
    /// Memory per server for blocks (past it, blocks spill to disk), e.g. 64M, 2G, or bytes.
    #[arg(long, value_name = "SIZE")]
    server_memory: Option<String>,
    /// Memory per process for two-electron integral blocks kept between iterations and
    /// programs (its worker threads share them; under mpirun the ranks of a node pool theirs
    /// in one table), e.g. 2G; 0 computes every block when asked (default: a quarter of the
    /// machine's memory, shared among the ranks on it).
    #[arg(long, value_name = "SIZE")]
    integral_cache: Option<String>,
    /// Folder for the spill files of the servers (default: the current directory); a
    /// folder per job is made there and removed at the end.
    #[arg(long, value_name = "DIR")]
    scratch_dir: Option<PathBuf>,
    /// Keep the spill files after the job.
    #[arg(long)]
    keep_scratch: bool,
    /// Testing aid: each server's scratch file system holds only SIZE bytes.
    #[arg(long, value_name = "SIZE", hide = true)]
    scratch_limit: Option<String>,
    /// Prefetch the blocks of coming loop iterations: off, auto (the depth adapts per get),
    /// or a fixed depth N.
    #[arg(long, value_name = "off|auto|N", default_value = "auto")]
    prefetch: String,
    /// Load specials from a shared library (C interface: include/sial_special.h; written in
    /// C, Fortran or Rust); may be given several times.
    #[arg(long, value_name = "LIB.so")]
    specials: Vec<PathBuf>,
    /// Write a timeline of the run (Chrome trace events: open it in ui.perfetto.dev or
    /// chrome://tracing): instructions, waits, barriers, server requests, spills.
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
    /// Leave instructions and server requests shorter than this out of the trace (default
    /// 100us).
    #[arg(long, value_name = "TIME")]
    trace_min: Option<String>,
    /// Testing aid: show progress for what runs longer than this (default 2s).
    #[arg(long, value_name = "TIME", hide = true)]
    progress_after: Option<String>,
    /// Under mpirun: stop the job when a rank has not answered for this long (a stopped or
    /// hung process), e.g. 30s, 10min; 0 never (default 60s).
    #[arg(long, value_name = "TIME")]
    heartbeat: Option<String>,
    /// Testing aid (threads only): deliver every server reply this much later, e.g. 200us,
    /// 1ms; measures how well prefetching hides latency on one machine.
    #[arg(long, value_name = "TIME")]
    simulated_latency: Option<String>,
    /// Where block instructions run: cpu, gpu (every one the GPU can run), or auto (a cost
    /// model chooses per instruction; the CPU alone when no GPU is found).
    #[arg(long, value_name = "cpu|gpu|auto", default_value = "auto")]
    device: String,
    /// Device memory for block copies per worker, e.g. 8G (default: the whole device).
    #[arg(long, value_name = "SIZE")]
    gpu_memory: Option<String>,
    /// Page-locked host memory for transfers per worker (default 1G).
    #[arg(long, value_name = "SIZE")]
    pinned_memory: Option<String>,
    /// Copy streams per device (default 2).
    #[arg(long, value_name = "N", default_value_t = 2)]
    gpu_streams: usize,
    /// Testing aid: `host` makes the "GPU" a host-memory device (separate memory, copies on
    /// threads), so that placement and transfers run where no GPU exists.
    #[arg(long, value_name = "cuda|host", default_value = "cuda")]
    gpu_backend: String,
    /// Print time and instruction counts per source line, and prefetch figures per get.
    #[arg(long)]
    profile: bool,
    /// Write the run's figures (per rank and totals) as JSON (format sial-stats/1).
    #[arg(long, value_name = "FILE.json")]
    stats: Option<PathBuf>,
    /// Do not print the end-of-run summary.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Restart job JOBID from its first program not completed (with the same programs,
    /// setup and number of servers).
    #[arg(long, value_name = "JOBID")]
    restart: Option<String>,
    /// Testing aid: make a rank fail (`worker:R` or `server:R` panics).
    #[arg(long, value_name = "ROLE:RANK", hide = true)]
    inject_fault: Option<String>,
    /// Write the final state of every program as JSON (format sial-dump/1).
    #[arg(long, value_name = "FILE.json")]
    dump: Option<PathBuf>,
    /// Write every array of every program as numpy .npy files into DIR/PROGRAM/ (with the
    /// scalars and ints in values.json); any size, one block in memory at a time.
    #[arg(long, value_name = "DIR")]
    dump_arrays: Option<PathBuf>,
    /// Write the energies the job computed under fixed names (format sial-results/1:
    /// scf_energy, mp2_correlation, ccsd_correlation, triples_correction, total_energy, ...).
    #[arg(long, value_name = "FILE.json")]
    results: Option<PathBuf>,
    #[arg(short = 'I', value_name = "DIR")]
    include: Vec<PathBuf>,
}

/// `512M`, `2G`, `64k` or plain bytes.
fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, ""),
    };
    let n: usize = digits.parse().map_err(|_| {
        format!("bad size {text:?}: write a number of bytes, or a number with K, M or G")
    })?;
    let scale: usize = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => return Err(format!("bad size {text:?}: the unit must be K, M, G or T")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("bad size {text:?}: too large"))
}

/// `--device`, `--gpu-backend`, `--gpu-memory`, `--pinned-memory`, `--gpu-streams`.
fn gpu_options(args: &RunArgs) -> Result<sial_interpreter::options::GpuOptions, String> {
    use sial_interpreter::device::DeviceMode;
    use sial_interpreter::options::{Backend, GpuOptions};
    let mode = match args.device.as_str() {
        "cpu" => DeviceMode::Cpu,
        "gpu" => DeviceMode::Gpu,
        "auto" => DeviceMode::Auto,
        d => return Err(format!("--device must be cpu, gpu or auto, not {d:?}")),
    };
    let backend = match args.gpu_backend.as_str() {
        "cuda" => Backend::Cuda,
        "host" => Backend::Host,
        b => return Err(format!("--gpu-backend must be cuda or host, not {b:?}")),
    };
    if args.gpu_streams == 0 || args.gpu_streams > 64 {
        return Err("--gpu-streams must be from 1 to 64".into());
    }
    let defaults = GpuOptions::default();
    let size = |v: &Option<String>, flag: &str, default: usize| {
        v.as_deref()
            .map(parse_size)
            .transpose()
            .map(|s| s.unwrap_or(default))
            .map_err(|e| format!("{flag}: {e}"))
    };
    Ok(GpuOptions {
        mode,
        backend,
        memory: size(&args.gpu_memory, "--gpu-memory", defaults.memory)?,
        pinned: size(&args.pinned_memory, "--pinned-memory", defaults.pinned)?,
        streams: args.gpu_streams,
    })
}

/// `200us`, `1ms`, `0.5s`, `0`.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let bad =
        || format!("bad time {text:?}: write a number with ns, us, ms, s or min (e.g. 200us)");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let v: f64 = number.parse().map_err(|_| bad())?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "min" => 60.0,
        "" if v == 0.0 => 0.0,
        _ => return Err(bad()),
    };
    std::time::Duration::try_from_secs_f64(v * scale).map_err(|_| bad())
}

/// `worker:R` / `server:R`.
fn parse_fault(text: &str) -> Result<sial_interpreter::options::Fault, String> {
    use sial_interpreter::options::Fault;
    let bad = || format!("bad fault {text:?}: write worker:RANK or server:RANK");
    let (role, rank) = text.split_once(':').ok_or_else(bad)?;
    let rank: usize = rank.parse().map_err(|_| bad())?;
    match role {
        "worker" => Ok(Fault::WorkerPanic(rank)),
        "server" => Ok(Fault::ServerPanic(rank)),
        _ => Err(bad()),
    }
}

/// Workers and servers from the options: `--servers 0` is one process; by default one worker
/// per core and one server.
fn ranks(workers: Option<usize>, servers: Option<usize>) -> Result<(usize, usize), String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (w, s) = match (workers, servers) {
        (Some(w), Some(s)) => (w, s),
        (Some(w), None) => (w, 1),
        (None, Some(0)) => (1, 0),
        (None, Some(s)) => (cores, s),
        (None, None) => (cores, 1),
    };
    if w == 0 {
        return Err("--workers must be at least 1".into());
    }
    if s == 0 && w != 1 {
        return Err(format!(
            "--workers {w} --servers 0: several workers need at least one server (--servers 0 runs one worker holding the arrays itself)"
        ));
    }
    Ok((w, s))
}

/// Under `mpirun` (in a build with the `mpi` feature): the number of processes, from the
/// launcher's environment (MPICH: PMI_SIZE, Open MPI: OMPI_COMM_WORLD_SIZE). A single process
/// runs as usual.
fn mpi_processes() -> Option<usize> {
    if !cfg!(feature = "mpi") {
        return None;
    }
    ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
        .filter(|&p| p > 1)
}

/// Whether this process reports what is said once per job: not under mpirun, or its rank 0.
fn rank_zero() -> bool {
    ["PMI_RANK", "OMPI_COMM_WORLD_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .is_none_or(|r| r.trim() == "0")
}

/// Workers and servers of an MPI job of `processes` ranks: SIAL-SPEC §7.2's default split, or
/// the options, which must account for every process.
fn mpi_ranks(
    processes: usize,
    workers: Option<usize>,
    servers: Option<usize>,
) -> Result<(usize, usize), String> {
    let (w, s) = match (workers, servers) {
        (None, None) => sial_interpreter::cluster::default_split(processes),
        (Some(w), Some(s)) => (w, s),
        (Some(w), None) => (w, processes.saturating_sub(w)),
        (None, Some(s)) => (processes.saturating_sub(s), s),
    };
    if w + s != processes || w == 0 || s == 0 {
        return Err(format!(
            "--workers {w} --servers {s} do not fit the {processes} MPI processes: under mpirun, workers + servers must equal the number of processes, with at least one of each"
        ));
    }
    Ok((w, s))
}
