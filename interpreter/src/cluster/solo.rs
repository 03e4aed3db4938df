//! One worker and no server processes (`--workers 1 --servers 0`, SIAL-SPEC §7.16): the worker
//! holds the one server itself and calls it directly, so the protocol, its checks and its
//! results are the same as with real servers. Like a server rank, the link serves the job's
//! programs in order, one server per program, and keeps the saved arrays between them.

use super::WorkerLink;
use super::message::{ToServer, ToWorker};
use crate::error::{Result, RuntimeError};
use crate::server::blocks::Spill;
use crate::server::{Flow, Saved, Server};
use crate::setup::Setup;
use sial_bytecode::Program;
use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

pub struct Solo<'p, 'e> {
    programs: &'p [Program],
    setup: &'p Setup,
    /// Programs whose end the server acknowledged.
    finished: usize,
    /// The server of the program being run, made at its first request.
    server: Option<Server<'p>>,
    /// Time the server of this program spent on requests.
    busy: Duration,
    saved: Saved,
    spill: Spill,
    /// Sees the saved arrays at the end of each program, and the labels whose arrays the
    /// program changed, before the end is acknowledged.
    at_end: &'e mut dyn FnMut(&Saved, &BTreeSet<String>) -> Result<()>,
    replies: VecDeque<ToWorker>,
}

impl<'p, 'e> Solo<'p, 'e> {
    pub fn new(
        programs: &'p [Program],
        setup: &'p Setup,
        saved: Saved,
        spill: Spill,
        at_end: &'e mut dyn FnMut(&Saved, &BTreeSet<String>) -> Result<()>,
    ) -> Solo<'p, 'e> {
        Solo {
            programs,
            setup,
            finished: 0,
            server: None,
            busy: Duration::ZERO,
            saved,
            spill,
            at_end,
            replies: VecDeque::new(),
        }
    }
}

impl WorkerLink for Solo<'_, '_> {
    fn rank(&self) -> usize {
        0
    }
    fn workers(&self) -> usize {
        1
    }
    fn servers(&self) -> usize {
        1
    }
    fn send(&mut self, _server: usize, msg: ToServer) -> Result<()> {
        let program = self
            .programs
            .get(self.finished)
            .ok_or_else(|| RuntimeError::new("internal: a request after the job's last program"))?;
        let (spill, setup) = (&self.spill, self.setup);
        let server = self.server.get_or_insert_with(|| {
            let blocks = crate::layout::block_counts(program, setup);
            Server::new(program, 0, spill.clone()).expecting(&blocks, 1)
        });
        let started = Instant::now();
        if matches!(msg, ToServer::EndProgram { .. }) {
            server.set_busy(self.busy);
        }
        let replies = &mut self.replies;
        let flow = server.handle(msg, &mut self.saved, &mut |_, m| {
            replies.push_back(m);
            Ok(())
        })?;
        self.busy += started.elapsed();
        if flow == Flow::End {
            self.busy = Duration::ZERO;
            (self.at_end)(&self.saved, server.changed_saved())?;
            self.server = None;
            self.finished += 1;
        }
        Ok(())
    }
    fn recv(&mut self) -> Result<ToWorker> {
        self.replies.pop_front().ok_or_else(|| {
            RuntimeError::new("internal: waiting for a reply that was never requested")
        })
    }
    fn try_recv(&mut self) -> Result<Option<ToWorker>> {
        Ok(self.replies.pop_front())
    }
    fn all_gather(&mut self, data: Vec<f64>) -> Result<Vec<Vec<f64>>> {
        Ok(vec![data])
    }
    fn broadcast(&mut self, _root: usize, data: Vec<f64>) -> Result<Vec<f64>> {
        Ok(data)
    }
    fn aborted(&self) -> bool {
        false
    }
    fn sums_puts(&self) -> bool {
        // The server is called in place: a put costs no message, and summing first would add
        // a pass over each block.
        false
    }
    fn shares_blocks(&self) -> bool {
        true
    }
}
