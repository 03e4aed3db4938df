//! `sial`: the command line of the SIAL compiler and runtime.

use clap::{Parser, Subcommand};
use sial_compiler::bytecode;
use sial_compiler::{Compilation, Options};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    /// Print a readable listing of a program's bytecode (from a bytecode file or a source).
    Disasm {
        file: PathBuf,
        #[arg(short = 'I', value_name = "DIR")]
        include: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The compiler recurses over nested expressions and blocks; their depth is bounded by the
    // compiler's input limits, and a generous stack keeps that bound far from overflow.
    let worker = std::thread::Builder::new()
        .stack_size(256 << 20)
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
    match sial_compiler::compile_file(path, options) {
        Ok(c) => {
            let text = c.diagnostics.render(&c.sources);
            let _ = std::io::stderr().write_all(text.as_bytes());
            Some(c)
        }
        Err(e) => {
            eprintln!("{}: error: cannot read file: {e}", path.display());
            None
        }
    }
}

/// A program from a bytecode file, or compiled from source.
fn load_program(path: &Path, options: &Options) -> Result<bytecode::Program, ExitCode> {
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("{}: error: cannot read file: {e}", path.display());
        ExitCode::from(1)
    })?;
    if bytes.starts_with(bytecode::MAGIC) {
        return bytecode::decode(&bytes).map_err(|e| {
            eprintln!("{}: error: {e}", path.display());
            ExitCode::from(1)
        });
    }
    compile(path, options)
        .and_then(|c| c.program)
        .ok_or(ExitCode::from(1))
}
