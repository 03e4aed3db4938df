//! sial as a library, for programs that embed the runtime: compile SIAL programs, give them
//! setup data and a registry of specials (your own Rust functions among the shipped ones),
//! run them on worker and server threads, and read the results.
//!
//! ```no_run
//! use sial::{Job, Registry};
//!
//! fn double_it(_: &mut dyn sial::Context, args: &mut [sial::Arg]) -> Result<(), String> {
//!     args[0].data.iter_mut().for_each(|x| *x *= 2.0);
//!     Ok(())
//! }
//!
//! let mut specials = Registry::shipped();
//! specials.register("double_it", double_it);
//! let done = Job::from_file("prog.sial")?
//!     .segments("aoindex", &[2, 3])
//!     .registry(specials)
//!     .ranks(2, 1)
//!     .run()?;
//! println!("e = {:?}", done.scalar("prog", "e"));
//! # Ok::<(), sial::Error>(())
//! ```

pub use sial_interpreter::specials::{Arg, ArgData, ArgKind, Context};

use sial_compiler::bytecode::Program;
use sial_interpreter::options::Options;
use sial_interpreter::setup::Setup;
use std::collections::BTreeMap;
use std::path::Path;

/// What can go wrong: a program file that cannot be read or decoded, a program that does not
/// compile (the compiler's messages), bad setup data, or a run that fails (`FATAL ERROR: … at
/// program:line`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {message}")]
    Compile { path: String, message: String },
    #[error("{0}")]
    Diagnostics(String),
    #[error("{0}")]
    Setup(String),
    #[error("{0}")]
    Run(#[from] sial_interpreter::error::RuntimeError),
}

/// The specials a run may execute.
pub struct Registry(sial_interpreter::specials::Registry);

impl Registry {
    /// The shipped specials: the general ones and ACES4's chemistry.
    pub fn shipped() -> Registry {
        let mut r = sial_interpreter::specials::general_registry();
        sial_chemistry::register(&mut r);
        Registry(r)
    }

    /// Adds (or replaces) a special under `name`.
    pub fn register(&mut self, name: &str, f: sial_interpreter::specials::SpecialFn) {
        self.0.register(name, f);
    }

    /// Adds the specials of a shared library (`include/sial_special.h`).
    pub fn load_library(&mut self, path: impl AsRef<Path>) -> Result<Vec<String>, Error> {
        Ok(sial_interpreter::specials::plugin::load(
            path.as_ref(),
            &mut self.0,
        )?)
    }
}

/// A job: programs, their setup data, the specials and the ranks, run with [`Job::run`].
pub struct Job {
    programs: Vec<Program>,
    setup: Setup,
    registry: Registry,
    options: Options,
}

impl Job {
    /// A job of the program in `path` (SIAL source or compiled `.siox`); setup data from
    /// `NAME.toml` beside it when there is one.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Job, Error> {
        let path = path.as_ref();
        let options = sial_compiler::Options::from_env(Vec::new());
        let (program, _warnings) = load_program(path, &options)?;
        let setup = match sial_interpreter::setup::beside(path) {
            Some(p) => {
                sial_interpreter::setup::load(&p, &[]).map_err(|e| Error::Setup(e.to_string()))?
            }
            None => Setup::default(),
        };
        Ok(Job::new(vec![program], setup))
    }

    /// A job of compiled programs with their setup data.
    pub fn new(programs: Vec<Program>, setup: Setup) -> Job {
        Job {
            programs,
            setup,
            registry: Registry::shipped(),
            options: Options::default(),
        }
    }

    /// Sets a predefined int or scalar (`name=value`, as `sial run --set`).
    pub fn set(mut self, name: &str, value: &str) -> Result<Job, Error> {
        self.setup
            .set(&format!("{name}={value}"))
            .map_err(|e| Error::Setup(e.to_string()))?;
        Ok(self)
    }

    /// The segment sizes of an index kind (as `sial run --segments aoindex=2,3`).
    pub fn segments(mut self, kind: &str, sizes: &[usize]) -> Job {
        self.setup.segments.insert(kind.to_string(), sizes.to_vec());
        self
    }

    /// The specials the programs may execute (default: the shipped ones).
    pub fn registry(mut self, registry: Registry) -> Job {
        self.registry = registry;
        self
    }

    /// Worker and server threads (`servers = 0`: one worker holding its server).
    pub fn ranks(mut self, workers: usize, servers: usize) -> Job {
        self.options.workers = workers;
        self.options.servers = servers;
        self
    }

    /// Every other run option (memory budgets, prefetching, devices, …).
    pub fn options(mut self, options: impl FnOnce(&mut Options)) -> Job {
        options(&mut self.options);
        self
    }

    /// Runs every program in order; program output goes to `out`.
    pub fn run_to(self, out: &mut (dyn std::io::Write + Send)) -> Result<Done, Error> {
        let mut done = Done::default();
        let mut options = self.options;
        options.snapshot = false;
        let report = sial_interpreter::job::run(
            &self.programs,
            &self.setup,
            &self.registry.0,
            out,
            &options,
            |state| {
                let p = state.program;
                let scalars = p.scalars.iter().zip(state.scalars);
                let ints = p.ints.iter().zip(state.ints);
                done.programs.push(Finished {
                    program: p.name.clone(),
                    scalars: scalars.map(|(s, v)| (s.name.clone(), *v)).collect(),
                    ints: ints.map(|(s, v)| (s.name.clone(), *v)).collect(),
                });
                Ok(())
            },
        )?;
        done.report = report;
        Ok(done)
    }

    /// Runs every program in order; program output goes to stdout.
    pub fn run(self) -> Result<Done, Error> {
        self.run_to(&mut std::io::stdout())
    }
}

/// A program's final values.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    pub program: String,
    pub scalars: BTreeMap<String, f64>,
    pub ints: BTreeMap<String, i32>,
}

/// What a job gave: every program's final scalars and ints, and the run's figures.
#[derive(Debug, Default)]
pub struct Done {
    pub programs: Vec<Finished>,
    pub report: sial_interpreter::job::Report,
}

impl Done {
    /// The final value of scalar `name` of the last run of `program`.
    pub fn scalar(&self, program: &str, name: &str) -> Option<f64> {
        let p = self.programs.iter().rev().find(|p| p.program == program)?;
        p.scalars.get(name).copied()
    }
}

/// A program from a `.siox` file or compiled from SIAL source (imports searched as `options`
/// say), with the compiler's warnings as text (empty for bytecode). A program that does not
/// compile is [`Error::Diagnostics`]; one the compiler made wrongly is an internal error.
pub fn load_program(
    path: &Path,
    options: &sial_compiler::Options,
) -> Result<(Program, String), Error> {
    let shown = path.display().to_string();
    let fail = |message: String| Error::Compile {
        path: shown.clone(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(format!("error: cannot read file: {e}")))?;
    if bytes.starts_with(sial_compiler::bytecode::MAGIC) {
        return sial_compiler::bytecode::decode(&bytes)
            .map(|p| (p, String::new()))
            .map_err(|e| fail(format!("error: {e}")));
    }
    let c = sial_compiler::compile_file(path, options)
        .map_err(|e| fail(format!("error: cannot read file: {e}")))?;
    let text = c.diagnostics.render_for_run(&c.sources);
    let Some(program) = c.program else {
        return Err(Error::Diagnostics(text));
    };
    program
        .validate()
        .map_err(|e| fail(format!("internal error: the compiler produced {e}")))?;
    Ok((program, text))
}
