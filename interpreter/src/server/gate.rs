//! The order of sections at a server (SIAL-SPEC §7.6). A worker does not wait at a barrier
//! for the servers: it sends each server it wrote to a `Sync` and goes on once the workers
//! have met. Its first request to a server after the barrier is preceded by an `Expect`
//! naming how many `Sync`s, of all workers and sections so far, the server must have applied
//! first. Until then the gate holds that worker's requests, in their order, so that every
//! request of a section is applied before any request of the next.

use crate::cluster::message::ToServer;
use std::collections::VecDeque;

#[derive(Default)]
pub struct Gate {
    /// `Sync`s applied so far.
    synced: u64,
    /// Per worker, where its requests wait: until `synced` reaches the count.
    held: Vec<Option<Held>>,
    holding: usize,
}

struct Held {
    until: u64,
    queue: VecDeque<ToServer>,
}

impl Gate {
    /// The request, unless its worker's requests are held (then it joins them).
    pub fn admit(&mut self, msg: ToServer) -> Option<ToServer> {
        if self.holding == 0 {
            return Some(msg);
        }
        match self.held.get_mut(msg.origin().worker as usize) {
            Some(Some(h)) => {
                h.queue.push_back(msg);
                None
            }
            _ => Some(msg),
        }
    }

    /// `Expect`: the worker's next requests wait until `syncs` `Sync`s have been applied.
    pub fn expect(&mut self, worker: u32, syncs: u64) {
        if syncs <= self.synced {
            return;
        }
        let w = worker as usize;
        if self.held.len() <= w {
            self.held.resize_with(w + 1, || None);
        }
        match &mut self.held[w] {
            Some(h) => h.until = syncs,
            slot => {
                *slot = Some(Held {
                    until: syncs,
                    queue: VecDeque::new(),
                });
                self.holding += 1;
            }
        }
    }

    /// A `Sync` was applied.
    pub fn synced(&mut self) {
        self.synced += 1;
    }

    /// The next held request that may now be applied, in its worker's order.
    pub fn released(&mut self) -> Option<ToServer> {
        if self.holding == 0 {
            return None;
        }
        let synced = self.synced;
        let slot = self
            .held
            .iter_mut()
            .find(|h| h.as_ref().is_some_and(|h| h.until <= synced))?;
        let msg = slot.as_mut().and_then(|h| h.queue.pop_front());
        if slot.as_ref().is_none_or(|h| h.queue.is_empty()) {
            // Taken out before its last request is applied: an `Expect` among them holds
            // the worker afresh.
            *slot = None;
            self.holding -= 1;
        }
        msg
    }

    /// Whether requests wait (at the end of a program none may).
    pub fn holds_any(&self) -> bool {
        self.holding > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::message::Origin;

    fn msg(worker: u32, section: u32, line: u32) -> ToServer {
        ToServer::Delete {
            from: Origin {
                worker,
                section,
                line,
            },
            array: 0,
        }
    }

    fn line(m: Option<ToServer>) -> Option<(u32, u32)> {
        m.map(|m| (m.origin().worker, m.origin().line))
    }

    #[test]
    fn requests_wait_for_the_syncs_they_expect_and_keep_their_order() {
        let mut g = Gate::default();
        assert_eq!(line(g.admit(msg(0, 0, 1))), Some((0, 1)));
        g.synced();
        // Worker 0 is past the barrier; worker 1's Sync is still on its way.
        g.expect(0, 2);
        assert!(g.holds_any());
        assert_eq!(line(g.admit(msg(0, 1, 2))), None);
        assert_eq!(line(g.admit(msg(0, 1, 3))), None);
        assert_eq!(line(g.released()), None);
        // Worker 1's requests of the section before go through.
        assert_eq!(line(g.admit(msg(1, 0, 4))), Some((1, 4)));
        g.synced();
        assert_eq!(line(g.released()), Some((0, 2)));
        assert_eq!(line(g.admit(msg(0, 1, 5))), None);
        assert_eq!(line(g.released()), Some((0, 3)));
        assert_eq!(line(g.released()), Some((0, 5)));
        assert_eq!(line(g.released()), None);
        assert!(!g.holds_any());
        assert_eq!(line(g.admit(msg(0, 1, 6))), Some((0, 6)));
    }

    #[test]
    fn an_expect_already_met_holds_nothing() {
        let mut g = Gate::default();
        g.synced();
        g.expect(3, 1);
        assert!(!g.holds_any());
        assert_eq!(line(g.admit(msg(3, 1, 1))), Some((3, 1)));
    }

    #[test]
    fn an_expect_among_held_requests_holds_the_rest_again() {
        let mut g = Gate::default();
        g.expect(0, 1);
        assert_eq!(line(g.admit(msg(0, 1, 1))), None);
        g.synced();
        assert_eq!(line(g.released()), Some((0, 1)));
        // The gate released worker 0; applying a later Expect holds it again.
        g.expect(0, 2);
        assert_eq!(line(g.admit(msg(0, 2, 2))), None);
        assert_eq!(line(g.released()), None);
        g.synced();
        assert_eq!(line(g.released()), Some((0, 2)));
    }
}
