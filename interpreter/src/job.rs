//! A job: programs run in order, one process, sharing only what was made persistent.

use crate::error::Result;
use crate::persist::Persisted;
use crate::setup::Setup;
use crate::specials::Registry;
use crate::worker::{Env, FinalState, Worker};
use sial_compiler::bytecode::Program;
use std::io::Write;
use std::path::PathBuf;

/// Runs every program of a job; `done` sees each program's final state (for dumps and tests).
pub fn run(
    programs: &[Program],
    setup: &Setup,
    registry: &Registry,
    out: &mut dyn Write,
    work_dir: PathBuf,
    mut done: impl FnMut(&FinalState<'_>),
) -> Result<()> {
    let mut persisted = Persisted::default();
    for program in programs {
        let env = Env {
            setup,
            registry,
            out: &mut *out,
            persisted: &mut persisted,
            work_dir: work_dir.clone(),
        };
        let mut worker = Worker::new(program, env).map_err(|e| e.at(&program.name, 0))?;
        worker.run()?;
        done(&worker.state());
    }
    Ok(())
}
