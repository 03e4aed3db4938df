//! Ctrl-C and `kill`: SIGINT or SIGTERM ends a run promptly and cleanly. The scratch folder of
//! the run is removed (unless `--keep-scratch`), the checkpoints of the programs that completed
//! are kept and the `--restart` that continues the job is printed, and sial exits with 130
//! (SIGINT) or 143 (SIGTERM), as a shell expects. A second signal exits at once. Under mpirun
//! every rank gets the signal from the launcher and cleans up its own part.

use sial_interpreter::checkpoint::JobDir;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::path::PathBuf;

/// What an interrupted run leaves behind, and what it removes.
pub struct Cleanup {
    pub scratch: Option<PathBuf>,
    pub checkpoints: Option<JobDir>,
    pub programs: usize,
}

/// Watches for SIGINT and SIGTERM for the rest of the process.
pub fn install(cleanup: Cleanup) -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| format!("cannot watch for Ctrl-C: {e}"))?;
    let cleanup = std::sync::Arc::new(cleanup);
    std::thread::spawn(move || {
        let mut first = true;
        for signal in signals.forever() {
            let code = 128 + signal;
            if !first {
                std::process::exit(code);
            }
            first = false;
            let cleanup = std::sync::Arc::clone(&cleanup);
            std::thread::spawn(move || {
                finish(&cleanup, signal);
                // A server may have spilled into the folder again meanwhile.
                if let Some(dir) = &cleanup.scratch {
                    let _ = std::fs::remove_dir_all(dir);
                }
                std::process::exit(code);
            });
        }
    });
    Ok(())
}

fn finish(cleanup: &Cleanup, signal: i32) {
    let name = if signal == SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    let mut lines = vec![format!("sial: stopped by {name}")];
    if let Some(dir) = &cleanup.scratch
        && dir.exists()
    {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => lines.push(format!("sial: scratch folder {} removed", dir.display())),
            Err(e) => lines.push(format!(
                "sial: could not remove the scratch folder {}: {e}",
                dir.display()
            )),
        }
    }
    if let Some(job) = &cleanup.checkpoints
        && let Ok(c) = job.read_worker()
        && c.completed > 0
    {
        lines.push(format!(
            "sial: {} of {} programs completed; restart the job from there with --restart {} (checkpoints in {})",
            c.completed,
            cleanup.programs,
            job.id,
            job.path().display()
        ));
    }
    eprintln!("{}", lines.join("\n"));
}

/// Scratch folders that runs which no longer run left in `root` (killed with SIGKILL, or a
/// machine that went down): each is reported with its size, once per run. A folder's name holds
/// the process id of its run; a run that is alive is left alone.
pub fn report_leftovers(root: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("sial-scratch-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = pid == std::process::id()
            || !std::path::Path::new("/proc/self").exists()
            || std::path::Path::new(&format!("/proc/{pid}")).exists();
        if alive {
            continue;
        }
        let bytes = size(&e.path());
        eprintln!(
            "sial: warning: {} is the scratch folder of a run that no longer runs ({:.1} MiB); remove it with rm -r {}",
            e.path().display(),
            bytes as f64 / (1 << 20) as f64,
            e.path().display()
        );
    }
}

fn size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
