//! Runtime errors. Every error ends the run with `FATAL ERROR: message at program:line`
//! (SIAL-SPEC §7.15); `line` is the source line of the instruction that failed.

use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
#[error("FATAL ERROR: {message}{}", at(.program, *.line))]
pub struct RuntimeError {
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
        RuntimeError {
            message: message.into(),
            program: String::new(),
            line: 0,
        }
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

    pub fn at(mut self, program: &str, line: u32) -> RuntimeError {
        if self.program.is_empty() {
            self.program = program.to_string();
            self.line = line;
        }
        self
    }
}

pub type Result<T> = std::result::Result<T, RuntimeError>;

impl From<sial_superinstructions::KernelError> for RuntimeError {
    fn from(e: sial_superinstructions::KernelError) -> RuntimeError {
        RuntimeError::new(format!("block operation failed: {e}"))
    }
}
