//! Runs SIAL bytecode. The single-process interpreter arrives with the interpreter issue.
