//! The SIAL compiler: source text -> AST -> resolved and checked program -> bytecode.
//!
//! Layers, each knowing only those before it: [`syntax`] (pest grammar, AST with spans),
//! [`load`] (imports), [`check`] (names, types, loop rules; emits bytecode), [`bytecode`]
//! (the instruction set shared with the interpreter, its file format and listing).

// pest_derive without its `std` feature (see Cargo.toml) names the `alloc` crate in its output.
extern crate alloc;

pub use sial_bytecode as bytecode;
pub mod check;
pub mod diag;
pub mod load;
pub mod source;
pub mod syntax;

pub use diag::{Diagnostic, Diagnostics, Severity};
pub use source::SourceMap;

use std::path::{Path, PathBuf};

/// Options of one compilation.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `-I DIR` import directories, searched after the importing file's directory.
    pub include_dirs: Vec<PathBuf>,
    /// Directories from the `SIALPATH` environment variable, searched last.
    pub sialpath: Vec<PathBuf>,
}

impl Options {
    /// Options with `SIALPATH` taken from the environment.
    pub fn from_env(include_dirs: Vec<PathBuf>) -> Options {
        let sialpath = std::env::var_os("SIALPATH")
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Options {
            include_dirs,
            sialpath,
        }
    }
}

/// The result of compiling one program: the sources (for rendering diagnostics), the
/// diagnostics, and the bytecode when there were no errors.
pub struct Compilation {
    pub sources: SourceMap,
    pub diagnostics: Diagnostics,
    pub program: Option<bytecode::Program>,
}

/// Compiles the program in `path` and everything it imports.
pub fn compile_file(path: &Path, options: &Options) -> std::io::Result<Compilation> {
    let text = std::fs::read_to_string(path)?;
    Ok(compile_source(path, text, options))
}

/// Compiles `text` as if read from `path` (imports are resolved relative to `path`).
pub fn compile_source(path: &Path, text: String, options: &Options) -> Compilation {
    let mut sources = SourceMap::default();
    let mut diagnostics = Diagnostics::default();
    let unit = load::load(path, text, options, &mut sources, &mut diagnostics);
    let program = match unit {
        Some(unit) if !diagnostics.has_errors() => check::check(&unit, &sources, &mut diagnostics),
        _ => None,
    };
    let program = if diagnostics.has_errors() {
        None
    } else {
        program
    };
    Compilation {
        sources,
        diagnostics,
        program,
    }
}
