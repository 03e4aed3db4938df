//! `--trace FILE.json`: a timeline of the run in the Chrome trace event format, which
//! ui.perfetto.dev and chrome://tracing open (docs/trace.md).
//!
//! Every rank, device copy stream and disk spill thread is a track (a thread of the trace);
//! the events on a track are intervals that nest: instructions that ran longer than the
//! threshold, waits for blocks and barriers, server requests, spills and reloads, device
//! transfers; counters show memory and blocks held. Events are kept in memory, one list per
//! process, and written at the end of the job. Off, tracing costs a load of one flag per
//! instruction.

use serde::Serialize;
use std::cell::RefCell;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

static ON: AtomicBool = AtomicBool::new(false);
static TRACE: OnceLock<Trace> = OnceLock::new();

struct Trace {
    /// When the trace started, on this process's clock and on the wall clock (processes of
    /// an MPI job line up by the wall clock).
    epoch: Instant,
    epoch_unix_us: f64,
    threshold: Duration,
    tracks: Mutex<Vec<String>>,
    events: Mutex<Vec<Event>>,
}

#[derive(Serialize)]
struct Event {
    name: String,
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    args: serde_json::Map<String, serde_json::Value>,
}

thread_local! {
    /// This thread's track number.
    static TRACK: RefCell<Option<u32>> = const { RefCell::new(None) };
    /// When this thread last recorded a counter.
    static COUNTED: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Counters of one track are recorded at most this often.
const COUNTER_EVERY: Duration = Duration::from_millis(1);

/// Starts tracing for this process: events shorter than `threshold` (instructions, server
/// requests) are left out. Only the first call counts.
pub fn start(threshold: Duration) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let _ = TRACE.set(Trace {
        epoch: Instant::now(),
        epoch_unix_us: now.as_secs_f64() * 1e6,
        threshold,
        tracks: Mutex::new(Vec::new()),
        events: Mutex::new(Vec::new()),
    });
    ON.store(true, Ordering::Relaxed);
}

/// Whether the run is traced.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The shortest event kept.
pub fn threshold() -> Duration {
    TRACE.get().map_or(Duration::ZERO, |t| t.threshold)
}

/// Names this thread's track ("worker 0", "server 1", …).
pub fn track(name: &str) {
    if let Some(n) = TRACE.get().and_then(|t| t.track_id(name)) {
        TRACK.with(|k| *k.borrow_mut() = Some(n));
    }
}

impl Trace {
    /// The number of the track named `name`, made at its first use.
    fn track_id(&self, name: &str) -> Option<u32> {
        let mut tracks = self.tracks.lock().ok()?;
        let n = tracks.iter().position(|x| x == name).unwrap_or_else(|| {
            tracks.push(name.to_string());
            tracks.len() - 1
        });
        Some(n as u32)
    }

    /// This thread's track, followed by `beside` (" copy stream 1").
    fn track_beside(&self, beside: &str) -> Option<u32> {
        let mine = TRACK.with(|k| *k.borrow())?;
        let base = self.tracks.lock().ok()?.get(mine as usize)?.clone();
        self.track_id(&format!("{base}{beside}"))
    }

    fn record(&self, event: Event) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
        }
    }

    /// An interval event on track `tid` from `started` until now.
    fn interval(
        &self,
        tid: u32,
        (cat, name): (&'static str, String),
        started: Instant,
        args: &[(&str, serde_json::Value)],
    ) -> Event {
        Event {
            name,
            cat,
            ph: "X",
            ts: micros(self, started),
            dur: Some(started.elapsed().as_secs_f64() * 1e6),
            pid: 0,
            tid,
            args: args
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }
}

/// The trace and this thread's track, when tracing is on and the thread named its track.
fn this_track() -> Option<(&'static Trace, u32)> {
    let t = TRACE.get()?;
    Some((t, TRACK.with(|k| *k.borrow())?))
}

fn micros(t: &Trace, at: Instant) -> f64 {
    at.saturating_duration_since(t.epoch).as_secs_f64() * 1e6
}

/// An interval on this thread's track that began at `started` and ends now, if it lasted
/// at least the threshold (`always`: whatever its length). `args` are shown with it.
pub fn span(
    cat: &'static str,
    name: impl FnOnce() -> String,
    started: Instant,
    always: bool,
    args: &[(&str, serde_json::Value)],
) {
    if !on() || (!always && started.elapsed() < threshold()) {
        return;
    }
    if let Some((t, tid)) = this_track() {
        t.record(t.interval(tid, (cat, name()), started, args));
    }
}

/// An interval that began at `started` and ends now on a track beside this thread's (its
/// name followed by `beside`, e.g. "worker 0" + " copy stream 1"): device transfers, which
/// run beside the worker.
pub fn span_beside(
    beside: &str,
    name: &'static str,
    started: Instant,
    args: &[(&str, serde_json::Value)],
) {
    if !on() {
        return;
    }
    if let Some(t) = TRACE.get()
        && let Some(tid) = t.track_beside(beside)
    {
        t.record(t.interval(tid, ("device", name.to_string()), started, args));
    }
}

/// A counter's value now on this thread's track (memory, blocks held); at most one a
/// millisecond per track.
pub fn counter(name: &'static str, values: &[(&str, f64)]) {
    if !on() {
        return;
    }
    let now = Instant::now();
    if COUNTED.get().is_some_and(|last| now - last < COUNTER_EVERY) {
        return;
    }
    COUNTED.set(Some(now));
    if let Some((t, tid)) = this_track() {
        t.record(Event {
            name: name.to_string(),
            cat: "counter",
            ph: "C",
            ts: micros(t, now),
            dur: None,
            pid: 0,
            tid,
            args: values
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                .collect(),
        });
    }
}

/// Writes this process's events as the trace of process `pid` (`label`: what it is) to
/// `path`: a complete trace file.
pub fn write(path: &Path, pid: u32, label: &str) -> std::io::Result<()> {
    let Some(t) = TRACE.get() else {
        return Ok(());
    };
    let tracks = t.tracks.lock().map(|t| t.clone()).unwrap_or_default();
    let events = t
        .events
        .lock()
        .map(|mut e| std::mem::take(&mut *e))
        .unwrap_or_default();
    let partial = crate::dump::partial_name(path);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&partial)?);
    out.write_all(b"{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n")?;
    let meta = |name: &str, tid: u32, value: &str| serde_json::json!({"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": value}});
    serde_json::to_writer(&mut out, &meta("process_name", 0, label))?;
    for (tid, name) in tracks.iter().enumerate() {
        out.write_all(b",\n")?;
        serde_json::to_writer(&mut out, &meta("thread_name", tid as u32, name))?;
    }
    // Processes of one job line up on the wall clock.
    let shift = t.epoch_unix_us;
    for mut e in events {
        e.pid = pid;
        e.ts += shift;
        out.write_all(b",\n")?;
        serde_json::to_writer(&mut out, &e)?;
    }
    out.write_all(b"\n]}\n")?;
    out.flush()?;
    drop(out);
    std::fs::rename(&partial, path)
}

/// Joins the trace files of the processes of a job into one at `path` (their events are on
/// one clock already); the parts are removed.
pub fn merge(path: &Path, parts: &[std::path::PathBuf]) -> std::io::Result<()> {
    let partial = crate::dump::partial_name(path);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&partial)?);
    out.write_all(b"{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n")?;
    let mut first = true;
    for part in parts {
        let text = std::fs::read_to_string(part)?;
        let doc: serde_json::Value = serde_json::from_str(&text)?;
        for e in doc["traceEvents"].as_array().into_iter().flatten() {
            if !first {
                out.write_all(b",\n")?;
            }
            first = false;
            serde_json::to_writer(&mut out, e)?;
        }
        let _ = std::fs::remove_file(part);
    }
    out.write_all(b"\n]}\n")?;
    out.flush()?;
    drop(out);
    std::fs::rename(&partial, path)
}
