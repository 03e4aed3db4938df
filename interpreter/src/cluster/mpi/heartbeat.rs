//! Noticing a rank that stops answering under MPI: a process stopped (SIGSTOP, a debugger),
//! hung in the kernel, or cut off with its node, without dying. `mpirun` notices only dead
//! processes; the others would wait for it forever.
//!
//! The ranks form a ring: a thread on each rank sends a beat to the next rank every second
//! and listens for the beats of the previous one, on a communicator of its own. Beats come
//! from a thread, not from the rank's work, so a rank busy computing for hours still beats;
//! only a process whose threads all stand still falls silent. When the watched rank has been
//! silent for the timeout, the watcher names it and ends the job (`MPI_Abort`). A rank that
//! finishes says so with its last beat, so its watcher stops expecting more, and waits for
//! the last beat of the rank it watches, so that no beat is left unreceived.

use ::mpi::point_to_point::{Destination, Source};
use ::mpi::topology::{Communicator, SimpleCommunicator};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BEAT: i32 = 7;
const ALIVE: u8 = 0;
const DONE: u8 = 1;
/// Time between beats.
const PERIOD: Duration = Duration::from_secs(1);
/// How often the thread wakes to listen and to look at the stop flag.
const TICK: Duration = Duration::from_millis(100);
/// How often it looks for the watched rank's last beat once this rank is done.
const LAST_TICK: Duration = Duration::from_millis(1);

pub struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The communicator the beats travel on. Only the heartbeat thread uses it once it starts;
/// MPI runs with `MPI_THREAD_MULTIPLE` when a heartbeat is on.
struct Ring(SimpleCommunicator);

// SAFETY: the communicator handle moves to the heartbeat thread, which alone uses it from
// then on, and MPI was initialised with MPI_THREAD_MULTIPLE (see `Heartbeat::start`).
unsafe impl Send for Ring {}

impl Heartbeat {
    /// Starts this rank's heartbeat on a duplicate of `world` (collective: every rank calls
    /// it). `name(rank)` says what a global rank is ("worker 2", "server 0") for the message.
    pub fn start(
        world: &SimpleCommunicator,
        timeout: Duration,
        name: impl Fn(usize) -> String,
    ) -> Heartbeat {
        let ring = Ring(world.duplicate());
        let size = world.size() as usize;
        let me = world.rank() as usize;
        let watched = (me + size - 1) % size;
        let watched_name = name(watched);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("sial-heartbeat".into())
            .spawn(move || {
                beat(
                    ring,
                    (me + 1) % size,
                    (watched, watched_name),
                    timeout,
                    &flag,
                )
            })
            .ok();
        Heartbeat { stop, thread }
    }

    /// This rank is done: its last beat tells the watcher so; returns once the watched rank
    /// has said the same (every beat received), or ends the job if it falls silent first.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn beat(
    ring: Ring,
    next: usize,
    (watched, watched_name): (usize, String),
    timeout: Duration,
    stop: &AtomicBool,
) {
    let comm = ring.0;
    let to = comm.process_at_rank(next as i32);
    let from = comm.process_at_rank(watched as i32);
    let mut sent = Instant::now() - PERIOD;
    let mut heard = Instant::now();
    let mut watching = comm.size() > 1;
    let mut said_done = comm.size() <= 1;
    loop {
        if stop.load(Ordering::Relaxed) && !said_done {
            // Small messages are sent eagerly: this returns even if `next` has stopped.
            to.send_with_tag(&DONE, BEAT);
            said_done = true;
        }
        // Done when this rank has said so and has heard the watched rank's last beat, so that
        // no beat is left unreceived when MPI is finalised.
        if said_done && !watching {
            return;
        }
        if !said_done && sent.elapsed() >= PERIOD {
            to.send_with_tag(&ALIVE, BEAT);
            sent = Instant::now();
        }
        while watching && let Some((msg, _)) = from.immediate_matched_probe_with_tag(BEAT) {
            let (what, _) = msg.matched_receive::<u8>();
            heard = Instant::now();
            if what == DONE {
                watching = false;
            }
        }
        if watching && heard.elapsed() > timeout {
            crate::report::say(&format!(
                "FATAL ERROR: {watched_name} (MPI rank {watched}) has not answered for {} s: its process is stopped or hung (the job was stopped; --heartbeat sets how long to wait, 0 never)",
                timeout.as_secs_f64()
            ));
            // Let the message through the launcher's pipe before the abort tears it down.
            std::thread::sleep(Duration::from_millis(300));
            comm.abort(1);
        }
        // Woken early by `stop`; at the end the last beat is looked for more often.
        std::thread::park_timeout(if said_done { LAST_TICK } else { TICK });
    }
}
