//! Runtime errors. Every error ends the run with `FATAL ERROR: message at program:line`
//! (SIAL-SPEC §7.15); `line` is the source line of the instruction that failed.

use thiserror::Error;

/// A runtime error. Boxed so that `Result`s on the interpreter's hot paths stay small.
#[derive(Debug, Clone, Error, PartialEq)]
#[error("{0}")]
pub struct RuntimeError(Box<Details>);

#[derive(Debug, Clone, Error, PartialEq)]
#[error("FATAL ERROR: {message}{}", at(.program, *.line))]
pub struct Details {
    pub message: String,
    /// The program (name after `sial`), when known.
    pub program: String,
    /// SIAL source line; 0 when the error is not tied to an instruction (loading).
    pub line: u32,
}

fn at(program: &str, line: u32) -> String {
    match (program.is_empty(), line) {
        (true, _) => String::new(),
        (false, 0) => format!(" in {program}"),
        (false, l) => format!(" at {program}:{l}"),
    }
}

impl RuntimeError {
    pub fn new(message: impl Into<String>) -> RuntimeError {
        RuntimeError(Box::new(Details {
            message: message.into(),
            program: String::new(),
            line: 0,
        }))
    }

    /// A program error (ACES4's "LIKELY ERRONEOUS SIAL PROGRAM" category).
    pub fn program(message: impl Into<String>) -> RuntimeError {
        RuntimeError::new(format!("LIKELY ERRONEOUS SIAL PROGRAM. {}", message.into()))
    }

    /// An input error (setup data that does not fit the program).
    pub fn input(message: impl Into<String>) -> RuntimeError {
        RuntimeError::new(format!(
            "INVALID SETUP OR SIAL PROGRAM:  {}",
            message.into()
        ))
    }

    /// Where the error happened, unless already known.
    pub fn at(mut self, program: &str, line: u32) -> RuntimeError {
        if self.0.program.is_empty() {
            self.0.program = program.to_string();
            self.0.line = line;
        }
        self
    }

    pub fn details(&self) -> &Details {
        &self.0
    }
}

pub type Result<T> = std::result::Result<T, RuntimeError>;

impl From<sial_superinstructions::KernelError> for RuntimeError {
    fn from(e: sial_superinstructions::KernelError) -> RuntimeError {
        RuntimeError::new(format!("block operation failed: {e}"))
    }
}
