//! The thread transport: every rank is a thread of one process; requests and replies travel
//! over crossbeam channels, block data is shared (`Arc`) rather than copied. The embedded
//! default of `sial run --workers W --servers S`. A testing aid (`--simulated-latency`) holds
//! every server reply back for a fixed time, to measure latency hiding on one machine.

use super::message::{ToServer, ToWorker};
use super::{Abort, ServerLink, WorkerLink};
use crate::error::Result;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting rank looks at the abort flag.
const POLL: Duration = Duration::from_millis(20);

/// A reply and the moment it may be delivered (with a simulated latency).
type Reply = (ToWorker, Option<Instant>);

struct Fabric {
    to_servers: Vec<Sender<ToServer>>,
    to_workers: Vec<Sender<Reply>>,
    latency: Option<Duration>,
    gather: Rendezvous,
    abort: Arc<Abort>,
}

pub struct LocalWorker {
    rank: usize,
    fabric: Arc<Fabric>,
    inbox: Receiver<Reply>,
    /// A reply taken from the inbox before its (simulated) arrival.
    early: Option<Reply>,
}

pub struct LocalServer {
    rank: usize,
    fabric: Arc<Fabric>,
    inbox: Receiver<ToServer>,
    /// Time spent waiting for requests.
    idle: Duration,
}

/// Links for `workers` worker threads and `servers` server threads sharing `abort`; every
/// server reply arrives `latency` after it was sent.
pub fn fabric(
    workers: usize,
    servers: usize,
    abort: Arc<Abort>,
    latency: Duration,
) -> (Vec<LocalWorker>, Vec<LocalServer>) {
    let (ws, wr): (Vec<_>, Vec<_>) = (0..workers).map(|_| unbounded()).unzip();
    let (ss, sr): (Vec<_>, Vec<_>) = (0..servers).map(|_| unbounded()).unzip();
    let fabric = Arc::new(Fabric {
        to_servers: ss,
        to_workers: ws,
        latency: (!latency.is_zero()).then_some(latency),
        gather: Rendezvous::new(workers),
        abort,
    });
    let w = wr
        .into_iter()
        .enumerate()
        .map(|(rank, inbox)| LocalWorker {
            rank,
            fabric: Arc::clone(&fabric),
            inbox,
            early: None,
        })
        .collect();
    let s = sr
        .into_iter()
        .enumerate()
        .map(|(rank, inbox)| LocalServer {
            rank,
            fabric: Arc::clone(&fabric),
            inbox,
            idle: Duration::ZERO,
        })
        .collect();
    (w, s)
}

/// The next message of `inbox`. It watches the inbox for [`WATCH`] before it sleeps: a reply
/// or request that comes within microseconds (a get's reply, the next request of a busy
/// worker) then costs no wake-up, which takes tens of microseconds.
fn receive<T>(inbox: &Receiver<T>, abort: &Abort) -> Result<T> {
    if let Some(m) = watch(|| inbox.try_recv().ok()) {
        return Ok(m);
    }
    loop {
        match inbox.recv_timeout(POLL) {
            Ok(m) => return Ok(m),
            Err(RecvTimeoutError::Timeout) if !abort.raised() => {}
            Err(_) => return Err(Abort::stopped()),
        }
    }
}

impl WorkerLink for LocalWorker {
    fn rank(&self) -> usize {
        self.rank
    }
    fn workers(&self) -> usize {
        self.fabric.to_workers.len()
    }
    fn servers(&self) -> usize {
        self.fabric.to_servers.len()
    }
    fn send(&mut self, server: usize, msg: ToServer) -> Result<()> {
        self.fabric.to_servers[server]
            .send(msg)
            .map_err(|_| Abort::stopped())
    }
    fn recv(&mut self) -> Result<ToWorker> {
        let (msg, due) = match self.early.take() {
            Some(r) => r,
            None => receive(&self.inbox, &self.fabric.abort)?,
        };
        if let Some(due) = due {
            wait_until(due);
        }
        Ok(msg)
    }
    fn try_recv(&mut self) -> Result<Option<ToWorker>> {
        let reply = match self.early.take() {
            Some(r) => r,
            None => match self.inbox.try_recv() {
                Ok(r) => r,
                Err(_) if self.fabric.abort.raised() => return Err(Abort::stopped()),
                Err(_) => return Ok(None),
            },
        };
        match reply {
            (msg, Some(due)) if due > Instant::now() => {
                self.early = Some((msg, Some(due)));
                Ok(None)
            }
            (msg, _) => Ok(Some(msg)),
        }
    }
    fn all_gather(&mut self, data: Vec<f64>) -> Result<Vec<Vec<f64>>> {
        let all = self
            .fabric
            .gather
            .meet(self.rank, data, &self.fabric.abort)?;
        Ok(all.as_ref().clone())
    }
    fn barrier_meet(&mut self, bits: &mut [u64], counts: &mut [u64]) -> Result<()> {
        if bits.is_empty() && counts.is_empty() {
            return self.barrier();
        }
        // Folded from the shared round, not from a copy of it.
        let workers = self.workers();
        let mine = super::meeting(bits, counts, workers);
        let all = self
            .fabric
            .gather
            .meet(self.rank, mine, &self.fabric.abort)?;
        super::fold_meeting(&all, bits, counts, workers);
        Ok(())
    }
    fn broadcast(&mut self, root: usize, data: Vec<f64>) -> Result<Vec<f64>> {
        let mine = if self.rank == root { data } else { Vec::new() };
        let all = self
            .fabric
            .gather
            .meet(self.rank, mine, &self.fabric.abort)?;
        Ok(all.get(root).cloned().unwrap_or_default())
    }
    fn aborted(&self) -> bool {
        self.fabric.abort.raised()
    }
    fn shares_blocks(&self) -> bool {
        // A reply hands over the server's `Arc`.
        true
    }
}

impl ServerLink for LocalServer {
    fn rank(&self) -> usize {
        self.rank
    }
    fn servers(&self) -> usize {
        self.fabric.to_servers.len()
    }
    fn recv(&mut self) -> Result<ToServer> {
        if let Ok(m) = self.inbox.try_recv() {
            return Ok(m);
        }
        let waiting = Instant::now();
        let m = receive(&self.inbox, &self.fabric.abort);
        self.idle += waiting.elapsed();
        m
    }
    fn send(&mut self, worker: usize, msg: ToWorker) -> Result<()> {
        let due = self.fabric.latency.map(|l| Instant::now() + l);
        self.fabric.to_workers[worker]
            .send((msg, due))
            .map_err(|_| Abort::stopped())
    }
    fn idle(&self) -> Duration {
        self.idle
    }
}

/// Sleeps until `due`; the last stretch yields instead, since a sleep may overshoot by tens
/// of microseconds.
fn wait_until(due: Instant) {
    const SLACK: Duration = Duration::from_micros(80);
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SLACK {
            std::thread::sleep(left - SLACK);
        } else {
            std::thread::yield_now();
        }
    }
}

/// All workers meet, each with a contribution; each leaves with all of them.
struct Rendezvous {
    state: Mutex<Round>,
    turned: Condvar,
    /// `Round::generation`, readable without the lock: a waiter watches it for a few
    /// microseconds before it sleeps, since being woken costs tens of microseconds and
    /// programs with many short sections meet thousands of times.
    generation: AtomicU64,
}

/// How long a waiting rank watches for a message, or a worker for the last arrival at a
/// barrier, before it sleeps.
const WATCH: Duration = Duration::from_micros(30);

/// Tries `poll` until it gives something or [`WATCH`] has passed, yielding the core between
/// tries.
fn watch<T>(mut poll: impl FnMut() -> Option<T>) -> Option<T> {
    // A busy rank finds something at once: no clock for it.
    if let Some(found) = poll() {
        return Some(found);
    }
    let watching = Instant::now();
    while watching.elapsed() < WATCH {
        if let Some(found) = poll() {
            return Some(found);
        }
        std::thread::yield_now();
    }
    None
}

struct Round {
    generation: u64,
    arrived: usize,
    slots: Vec<Vec<f64>>,
    last: Arc<Vec<Vec<f64>>>,
}

impl Rendezvous {
    fn new(workers: usize) -> Rendezvous {
        Rendezvous {
            state: Mutex::new(Round {
                generation: 0,
                arrived: 0,
                slots: vec![Vec::new(); workers],
                last: Arc::new(Vec::new()),
            }),
            turned: Condvar::new(),
            generation: AtomicU64::new(0),
        }
    }

    fn meet(&self, rank: usize, data: Vec<f64>, abort: &Abort) -> Result<Arc<Vec<Vec<f64>>>> {
        let mut round = self.state.lock().map_err(|_| Abort::stopped())?;
        let generation = round.generation;
        round.slots[rank] = data;
        round.arrived += 1;
        if round.arrived == round.slots.len() {
            let n = round.slots.len();
            let all = std::mem::replace(&mut round.slots, vec![Vec::new(); n]);
            round.last = Arc::new(all);
            round.arrived = 0;
            round.generation += 1;
            self.generation.store(round.generation, Ordering::Release);
            self.turned.notify_all();
            return Ok(Arc::clone(&round.last));
        }
        drop(round);
        watch(|| (self.generation.load(Ordering::Acquire) != generation).then_some(()));
        let mut round = self.state.lock().map_err(|_| Abort::stopped())?;
        while round.generation == generation {
            if abort.raised() {
                return Err(Abort::stopped());
            }
            round = self
                .turned
                .wait_timeout(round, POLL)
                .map_err(|_| Abort::stopped())?
                .0;
        }
        Ok(Arc::clone(&round.last))
    }
}
