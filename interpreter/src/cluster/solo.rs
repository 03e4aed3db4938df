//! One worker and no server processes (`--workers 1 --servers 0`, SIAL-SPEC §7.16): the worker
//! holds the one server itself and calls it directly, so the protocol, its checks and its
//! results are the same as with real servers.

use super::WorkerLink;
use super::message::{ToServer, ToWorker};
use crate::error::{Result, RuntimeError};
use crate::server::blocks::Spill;
use crate::server::{Saved, Server};
use sial_bytecode::Program;
use std::collections::VecDeque;

pub struct Solo<'p, 's> {
    server: Server<'p>,
    saved: &'s mut Saved,
    replies: VecDeque<ToWorker>,
}

impl<'p, 's> Solo<'p, 's> {
    pub fn new(program: &'p Program, saved: &'s mut Saved, spill: Spill) -> Solo<'p, 's> {
        Solo {
            server: Server::new(program, 0, spill),
            saved,
            replies: VecDeque::new(),
        }
    }
}

impl Solo<'_, '_> {
    /// The server's figures.
    pub fn server_stats(&self) -> crate::cluster::message::ServerStats {
        self.server.stats()
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
        let replies = &mut self.replies;
        self.server.handle(msg, self.saved, &mut |_, m| {
            replies.push_back(m);
            Ok(())
        })?;
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
}
