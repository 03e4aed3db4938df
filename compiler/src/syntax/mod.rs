//! Syntax: text -> AST. Knows nothing of names or types.

pub mod ast;
mod errors;
mod lexical;
mod parse;
mod structure;

pub use parse::parse_file;
