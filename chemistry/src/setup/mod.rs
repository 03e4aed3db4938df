//! `sial setup`: a molecule and a basis-set name in, an ACES4 job out. The job (ACES4's JSON
//! setup format, SIAL-SPEC §9.3) lists ACES4's programs for the method, every predefined int
//! and scalar they read, the basis-set and geometry arrays exactly as ACES4's own job files hold
//! them, and segment tables sized for the molecule and the memory given. ACES4's job files were
//! written by ACES II's `joda`, which is gone; this replaces it for closed-shell RHF.

mod elements;
mod job;
mod library;
mod molecule;

pub use job::{Job, Method, Options, build};
pub use library::BasisSet;
pub use molecule::{Atom, BOHR_ANGSTROM, Molecule};

use thiserror::Error;

/// Why a job could not be made: each message names the file and line, or the option.
#[derive(Debug, Error, PartialEq)]
pub enum SetupError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{file}:{line}: {message}")]
    Line {
        file: String,
        line: usize,
        message: String,
    },
    #[error("{option}: {message}")]
    Option { option: String, message: String },
}
