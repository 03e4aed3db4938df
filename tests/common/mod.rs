//! How the end-to-end tests start `sial` (`Sial`), the `--stats`/`--dump` run of the prefetch
//! and device tests (`sial`, `sial_via`), and the test files they look for.

// Every test file is its own crate and uses only part of this module.
#![allow(dead_code)]

#[cfg(feature = "mpi")]
pub mod launch;

use serde_json::Value;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The repository root, where the tests run `sial` unless told otherwise.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The device implementation the device tests use: the host-memory stand-in (separate
/// "device" memory, copies on threads, the protocol of a GPU), or CUDA where
/// `SIAL_TEST_GPU_BACKEND=cuda` asks for the real GPU of the machine.
pub fn backend() -> &'static str {
    match std::env::var("SIAL_TEST_GPU_BACKEND").as_deref() {
        Ok("cuda") => "cuda",
        _ => "host",
    }
}

/// One worker, no server, with the device forced on: how the device tests run a program in
/// one process.
pub fn device() -> Vec<&'static str> {
    vec![
        "--workers",
        "1",
        "--servers",
        "0",
        "--device",
        "gpu",
        "--gpu-backend",
        backend(),
    ]
}

/// One start of the `sial` binary built for the tests: a `Command` with what the tests add
/// (a launcher before it, a time limit, the output collected).
pub struct Sial {
    cmd: Command,
    timeout: Option<Duration>,
    discard_stdout: bool,
}

/// What a run gave back.
pub struct Outcome {
    pub ok: bool,
    /// The exit status; `None` when a signal ended the run.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The run passed its `timeout` and was killed.
    pub timed_out: bool,
    pub elapsed: Duration,
}

impl Sial {
    /// `sial`, from the repository root.
    pub fn new() -> Self {
        Self::via(&[])
    }

    /// `sial` started by `launcher` (e.g. `mpirun -n 3 <sial>`, which names the binary itself;
    /// empty: `sial` alone), from the repository root.
    pub fn via(launcher: &[String]) -> Self {
        let mut cmd = match launcher.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest);
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_sial")),
        };
        cmd.current_dir(root());
        Sial {
            cmd,
            timeout: None,
            discard_stdout: false,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.cmd.args(args);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.cmd.env_remove(key);
        self
    }

    /// Kills the run after `limit` (`Outcome::timed_out`): a hang must end the test. Only `sial`
    /// itself is killed, so this is for runs without a launcher.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Standard output is not kept: a damaged or endless program may print without end.
    pub fn discard_stdout(mut self) -> Self {
        self.discard_stdout = true;
        self
    }

    /// The command, for a test that starts, signals or waits for the process itself.
    pub fn command(self) -> Command {
        self.cmd
    }

    /// Runs to the end (or the timeout) and collects the output.
    pub fn run(mut self) -> Outcome {
        let stdout = if self.discard_stdout {
            Stdio::null()
        } else {
            Stdio::piped()
        };
        let start = Instant::now();
        let mut child = self
            .cmd
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sial");
        // Both pipes are read while the run goes on: a full pipe would stop it.
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let (status, timed_out) = wait(&mut child, self.timeout);
        let stdout = stdout.join().expect("read stdout");
        let stderr = stderr.join().expect("read stderr");
        Outcome {
            ok: status.success(),
            code: status.code(),
            stdout,
            stderr,
            timed_out,
            elapsed: start.elapsed(),
        }
    }
}

/// A thread reading `pipe` to its end (nothing to read: "").
fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Waits for `child`, killing it after `limit`; the status and whether it was killed.
fn wait(child: &mut Child, limit: Option<Duration>) -> (ExitStatus, bool) {
    let Some(limit) = limit else {
        return (child.wait().expect("wait for sial"), false);
    };
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for sial") {
            return (status, false);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            return (child.wait().expect("wait for sial"), true);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A JSON file `sial` wrote (`--dump`, `--stats`); `Null` when it is missing or not JSON.
pub fn read_json(path: &Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// A `sial run` with its `--stats` and `--dump`.
pub struct Run {
    pub ok: bool,
    pub stderr: String,
    pub stats: Value,
    pub dump: Value,
}

/// `sial run PROGRAM ARGS --stats …` (and `--dump …` when `dump`), from the repository root.
pub fn sial(program: &str, args: &[&str], dump: bool) -> Run {
    sial_via(&[], program, args, dump)
}

/// The same, started by `launcher` (e.g. `mpirun -n 3 <sial>`; empty: `sial` itself).
pub fn sial_via(launcher: &[String], program: &str, args: &[&str], dump: bool) -> Run {
    // One folder per run: tests run in parallel.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sial-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let stats = dir.join("stats.json");
    let dumped = dir.join("dump.json");
    let mut cmd = Sial::via(launcher)
        .arg("run")
        .arg(program)
        .args(args)
        .arg("--stats")
        .arg(&stats);
    if dump {
        cmd = cmd.arg("--dump").arg(&dumped);
    }
    let out = cmd.run();
    let run = Run {
        ok: out.ok,
        stderr: out.stderr,
        stats: read_json(&stats),
        dump: read_json(&dumped),
    };
    let _ = std::fs::remove_dir_all(&dir);
    run
}

/// A count in the stats.
pub fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// A fresh, empty folder `sial-NAME-PID` in the temporary folder, removed with everything in
/// it when the returned guard is dropped (at the end of the test, passed or failed).
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("sial-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    Scratch(dir)
}

/// A test's temporary folder (see [`scratch`]); reads as its path.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The files of `dir` (not of its subfolders) ending in `.EXT`, in name order.
pub fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

/// The `.sial` files of `dir` and of its subfolders, except the import-only `lib/`, in order.
pub fn sial_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "lib") {
            files.extend(sial_sources(&path));
        } else if path.extension().is_some_and(|x| x == "sial") {
            files.push(path);
        }
    }
    files.sort();
    files
}
