//! This process's MPI under `mpirun`: the interpreter's session in a build with the `mpi`
//! feature; without it there is none (`mpi_processes` is then always `None`).

#[cfg(feature = "mpi")]
pub use sial_interpreter::job::mpi::{Session, prepare_process};

#[cfg(not(feature = "mpi"))]
pub use without::Session;

#[cfg(not(feature = "mpi"))]
mod without {
    use sial_compiler::bytecode::Program;
    use sial_interpreter::error::{Result, RuntimeError};
    use sial_interpreter::job::Report;
    use sial_interpreter::options::Options;
    use sial_interpreter::setup::Setup;
    use sial_interpreter::specials::Registry;
    use sial_interpreter::worker::FinalState;

    /// No MPI in this build: a session cannot exist.
    pub enum Session {}

    impl Session {
        pub fn start(_: &Options) -> Result<Session> {
            Err(RuntimeError::new(
                "this sial was built without MPI (cargo build --features mpi)",
            ))
        }
        pub fn rank_and_size(&self) -> (usize, usize) {
            match *self {}
        }
        pub fn all_gather(&self, _: &[u8]) -> Result<Vec<Vec<u8>>> {
            match *self {}
        }
        pub fn node_ranks(&self) -> Vec<usize> {
            match *self {}
        }
        pub fn node_file(
            &self,
            _: &[usize],
            _: &std::path::Path,
            _: &str,
            _: u64,
        ) -> Result<Option<std::fs::File>> {
            match *self {}
        }
        pub fn run(
            self,
            _: &[Program],
            _: &Setup,
            _: &Registry,
            _: &mut (dyn std::io::Write + Send),
            _: &Options,
            _: impl FnMut(&FinalState<'_>) -> Result<()>,
        ) -> Result<Option<Report>> {
            match self {}
        }
    }
}
