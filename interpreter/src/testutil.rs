//! What the crate's unit tests share.

/// The program compiled from SIAL `source` (which must compile).
pub(crate) fn program(source: &str) -> sial_bytecode::Program {
    let c = sial_compiler::compile_source(
        std::path::Path::new("p.sial"),
        source.to_string(),
        &sial_compiler::Options::default(),
    );
    c.program.expect("the test program compiles")
}
