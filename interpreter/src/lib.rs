//! Runs SIAL bytecode.
//!
//! Layers: [`setup`] (job input: programs, predefined values, segment tables, arrays),
//! [`specials`] (the registry of named super instructions), [`print`] (the production print
//! formats of SIAL-SPEC §7.12) and the worker that executes a program.

pub mod checkpoint;
pub mod cluster;
pub mod device;
pub mod dump;
pub mod error;
pub mod extents;
pub mod job;
pub mod layout;
pub mod options;
pub mod persist;
pub mod print;
pub mod report;
pub mod server;
pub mod setup;
mod spare;
pub mod specials;
pub mod store;
mod sum;
pub mod trace;
pub mod worker;

#[cfg(test)]
mod testutil;
