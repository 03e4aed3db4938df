//! How the MPI tests start `sial`.

use std::process::Command;

/// `mpirun -n N <sial>`, with what Open MPI needs to run as root and on fewer cores.
pub fn mpirun(n: usize) -> Vec<String> {
    let program = std::env::var("SIAL_MPIRUN").unwrap_or_else(|_| "mpirun".into());
    let version = Command::new(&program)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut launcher = vec![program, "-n".into(), n.to_string()];
    if version.contains("Open MPI") {
        launcher.push("--allow-run-as-root".into());
        launcher.push("--oversubscribe".into());
    }
    launcher.push(env!("CARGO_BIN_EXE_sial").into());
    launcher
}
