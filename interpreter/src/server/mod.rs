//! A server (SIAL-SPEC §7.4–§7.9): holds the blocks of distributed and served arrays that it
//! owns, applies puts in arrival order, answers gets, checks consistency per section, and keeps
//! persistent arrays between the programs of a job.

pub mod blocks;
pub mod gate;
pub mod race;

use crate::cluster::message::{Origin, Payload, ServerStats, ToServer, ToWorker};
use crate::error::{Result, RuntimeError};
use crate::store::{Block, BlockKey, Extents, block_text};
use blocks::Addend;
use blocks::{BlockStore, Slot, Spill};
use race::{Access, Mode};
use sial_bytecode::{ArrayKind, Program, PutOp};
use sial_superinstructions as k;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arrays a server saved with `set_persistent`, by label: the blocks it owns. Lives for the
/// whole job.
pub type Saved = HashMap<String, HashMap<BlockKey, Arc<Block>>>;

/// What the server loop does after a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The program ended (after `EndProgram`).
    End,
}

pub struct Server<'p> {
    program: &'p Program,
    rank: usize,
    store: BlockStore,
    section: u32,
    marks: Vec<(u32, String)>,
    /// The labels whose arrays the program's end changed ([`Server::changed_saved`]).
    changed_saved: BTreeSet<String>,
    once: OncePerStep,
    gate: gate::Gate,
    stats: ServerStats,
}

/// Requests that every worker sends at the same step of the program (`delete`,
/// `restore_persistent`) take effect once, at the first worker's: a worker that is already
/// past the step may have put new blocks into the array, which a later copy of the request
/// must not remove. Counted per worker, so that a step repeated in a loop acts again.
#[derive(Default)]
struct OncePerStep {
    applied: HashMap<(Step, u32), u32>,
    seen: HashMap<(Step, u32, u32), u32>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Step {
    Delete,
    Restore,
}

impl OncePerStep {
    /// Whether this request of `worker` on `array` is the first of its step.
    fn first(&mut self, step: Step, array: u32, worker: u32) -> bool {
        let seen = self.seen.entry((step, array, worker)).or_insert(0);
        *seen += 1;
        let applied = self.applied.entry((step, array)).or_insert(0);
        if *seen > *applied {
            *applied = *seen;
            true
        } else {
            false
        }
    }
}

impl<'p> Server<'p> {
    pub fn new(program: &'p Program, rank: usize, spill: Spill) -> Server<'p> {
        let arrays = program
            .arrays
            .iter()
            .map(|a| (a.name.clone(), a.dims.len()))
            .collect();
        Server {
            program,
            rank,
            store: BlockStore::new(rank, arrays, spill),
            section: 0,
            marks: Vec::new(),
            changed_saved: BTreeSet::new(),
            once: OncePerStep::default(),
            gate: gate::Gate::default(),
            stats: ServerStats::default(),
        }
    }

    /// The server of `servers` that holds its share of arrays of `blocks[a]` blocks (from
    /// [`crate::layout::block_counts`]): their tables are made that large at their first block.
    pub fn expecting(mut self, blocks: &[u64], servers: usize) -> Server<'p> {
        self.store.expect(blocks, servers);
        self
    }

    /// Time spent on requests in this program so far (the figures' `busy_seconds`), as the
    /// link measures it.
    pub fn set_busy(&mut self, busy: Duration) {
        self.stats.busy_seconds = busy.as_secs_f64();
    }

    /// The labels under which the program's end changed the saved arrays: new labels, and old
    /// ones saved again with other blocks or values (ACES4's programs save the arrays they
    /// restored again, most of them unchanged).
    pub fn changed_saved(&self) -> &BTreeSet<String> {
        &self.changed_saved
    }

    /// The figures so far, disk included.
    pub fn stats(&self) -> ServerStats {
        let mut s = self.stats;
        s.disk = self.store.stats;
        s.bytes_held_peak = s.disk.peak_memory;
        s
    }

    /// Applies one request, or holds it until the sections before its own are over
    /// ([`gate`]), and then the held requests that this one lets go; `reply(worker, message)`
    /// sends the answers.
    pub fn handle(
        &mut self,
        msg: ToServer,
        saved: &mut Saved,
        reply: &mut dyn FnMut(usize, ToWorker) -> Result<()>,
    ) -> Result<Flow> {
        let Some(msg) = self.gate.admit(msg) else {
            return Ok(Flow::Continue);
        };
        let mut flow = self.apply(msg, saved, reply)?;
        while let Some(msg) = self.gate.released() {
            if self.apply(msg, saved, reply)? == Flow::End {
                flow = Flow::End;
            }
        }
        if flow == Flow::End && self.gate.holds_any() {
            return Err(RuntimeError::new(
                "internal: the program ended at a server that still holds requests of a later section",
            ));
        }
        Ok(flow)
    }

    fn apply(
        &mut self,
        msg: ToServer,
        saved: &mut Saved,
        reply: &mut dyn FnMut(usize, ToWorker) -> Result<()>,
    ) -> Result<Flow> {
        if let ToServer::Expect { from, syncs } = msg {
            // Order between sections, not a request of one.
            self.gate.expect(from.worker, syncs);
            return Ok(Flow::Continue);
        }
        // The clock only for the timeline: two readings a request were a twentieth of a
        // server's time in a loop of small puts.
        let started = crate::trace::on().then(Instant::now);
        let from = msg.origin();
        let kind = msg.name();
        self.stats.messages += 1;
        self.stats.bytes_in += msg.payload_bytes() as u64;
        if from.section < self.section {
            return Err(self.error(
                from,
                "Section number invariant violated. Received request from an older section !"
                    .into(),
            ));
        }
        self.section = from.section;
        let mut flow = Flow::Continue;
        match msg {
            ToServer::Get {
                from,
                array,
                key,
                prefetch,
            } => {
                let m = if prefetch && !self.store.contains(array, &key) {
                    ToWorker::Missing {
                        array,
                        key,
                        section: from.section,
                    }
                } else {
                    ToWorker::Block {
                        array,
                        key,
                        section: from.section,
                        block: self.get(from, array, &key, !prefetch)?,
                    }
                };
                self.stats.bytes_out += m.payload_bytes() as u64;
                reply(from.worker as usize, m)?;
            }
            ToServer::Claims { from, blocks } => {
                for c in blocks {
                    let at = Origin {
                        line: c.line,
                        ..from
                    };
                    self.touch(at, c.array, &c.key, Access::Read)?;
                }
            }
            ToServer::Put {
                from,
                array,
                key,
                shape,
                op,
                payload,
            } => self.put(from, array, key, shape, op, payload)?,
            ToServer::Delete { from, array } => {
                if self.once.first(Step::Delete, array, from.worker) {
                    self.store.remove_array(array)
                }
            }
            ToServer::Sync { from } => {
                // Every worker is past the barrier that ended every earlier section.
                self.store.end_sections_before(from.section);
                self.gate.synced();
            }
            // Taken by the gate before the section checks (`apply`'s first lines).
            ToServer::Expect { .. } => {}
            ToServer::SetPersistent { array, label, .. } => self.marks.push((array, label)),
            ToServer::RestorePersistent {
                from, array, label, ..
            } => {
                if self.once.first(Step::Restore, array, from.worker) {
                    self.restore(from, array, &label, saved)?
                }
            }
            ToServer::SnapshotKeys { from, array } => {
                let mut keys = self.store.keys(array);
                keys.sort();
                let m = ToWorker::SnapshotKeys {
                    server: self.rank as u32,
                    array,
                    keys,
                };
                reply(from.worker as usize, m)?;
            }
            ToServer::Snapshot { from, array, keys } => {
                let mut blocks = Vec::with_capacity(keys.len());
                for key in keys {
                    blocks.push((key, self.store.peek(array, &key)?));
                }
                let m = ToWorker::Snapshot {
                    server: self.rank as u32,
                    array,
                    blocks,
                };
                self.stats.bytes_out += m.payload_bytes() as u64;
                reply(from.worker as usize, m)?;
            }
            ToServer::EndProgram { from } => {
                // A label saved again replaces the earlier array silently, as in ACES4: its
                // chemistry programs pass amplitudes and integrals on under the same labels.
                for (array, label) in std::mem::take(&mut self.marks) {
                    let blocks = self.all_blocks(array)?.into_iter().collect();
                    if saved
                        .get(&label)
                        .is_none_or(|old| !same_blocks(old, &blocks))
                    {
                        self.changed_saved.insert(label.clone());
                    }
                    saved.insert(label, blocks);
                }
                self.store.clear();
                reply(
                    from.worker as usize,
                    ToWorker::Ended {
                        server: self.rank as u32,
                        stats: self.stats(),
                    },
                )?;
                flow = Flow::End;
            }
        }
        if let Some(started) = started {
            let worker = serde_json::json!(from.worker);
            crate::trace::span(
                "server",
                || kind.into(),
                started,
                false,
                &[("worker", worker)],
            );
            if kind == "sync" {
                let held = self.stats().bytes_held_peak;
                let blocks = self.store.len() as f64;
                crate::trace::counter(
                    "server memory",
                    &[("blocks", blocks), ("peak MiB", held as f64 / 1048576.0)],
                );
            }
        }
        Ok(flow)
    }

    /// Every block of an array (spilled ones read back without being kept in memory).
    fn all_blocks(&mut self, array: u32) -> Result<Vec<(BlockKey, Arc<Block>)>> {
        let mut out = Vec::new();
        for key in self.store.keys(array) {
            out.push((key, self.store.peek(array, &key)?));
        }
        Ok(out)
    }

    fn error(&self, from: Origin, message: String) -> RuntimeError {
        RuntimeError::program(message).at(&self.program.name, from.line)
    }

    fn text(&self, array: u32, key: &BlockKey) -> String {
        block_text(self.program, array as usize, key)
    }

    /// Moves a block's consistency state; a race is an error naming both workers.
    fn touch(&mut self, from: Origin, array: u32, key: &BlockKey, access: Access) -> Result<()> {
        let program = self.program;
        match self.store.slot_mut(array, key) {
            Some(h) => step(program, h, from, array, key, access),
            None => Ok(()),
        }
    }

    /// A block for a get; `checked` records the read for consistency checking (a prefetch
    /// is recorded later, by its claim).
    fn get(
        &mut self,
        from: Origin,
        array: u32,
        key: &BlockKey,
        checked: bool,
    ) -> Result<Arc<Block>> {
        if !self.store.contains(array, key) {
            let text = self.text(array, key);
            return Err(self.error(
                from,
                format!("Asking for block {text}. It has not been put/prepared before !"),
            ));
        }
        if checked {
            self.touch(from, array, key, Access::Read)?;
        }
        self.store
            .read(array, key)
            .map_err(|e| e.at(&self.program.name, from.line))
    }

    fn put(
        &mut self,
        from: Origin,
        array: u32,
        key: BlockKey,
        shape: Extents,
        op: PutOp,
        payload: Payload,
    ) -> Result<()> {
        let access = Access::of_put(op);
        let size: usize = shape.iter().product();
        if let Payload::Block(d) = &payload
            && d.len() != size
        {
            return Err(self.error(
                from,
                format!(
                    "put to {}: {} values sent for a block of {size}",
                    self.text(array, &key),
                    d.len()
                ),
            ));
        }
        if op == PutOp::Scale && !self.store.contains(array, &key) {
            let served = self.program.arrays[array as usize].kind == ArrayKind::Served;
            let (stmt, done) = if served {
                ("prepare", "prepared")
            } else {
                ("put", "put")
            };
            let text = self.text(array, &key);
            return Err(self.error(
                from,
                format!("Attempting to update non-existent block {text} ({stmt} *= needs a block that was {done} before)"),
            ));
        }
        match (op, payload) {
            (PutOp::Replace, Payload::Block(data)) => {
                // The incoming buffer becomes the block.
                self.replace(from, array, key, Block { shape, data }, access)?;
            }
            (PutOp::Replace, Payload::Scalar(v)) => {
                let mut b = Block::zeros(shape)?;
                k::fill(&mut b.data, v);
                self.replace(from, array, key, b, access)?;
            }
            (op, payload) => self.update_in_place(from, array, key, &shape, op, payload)?,
        }
        self.stats.blocks_held_peak = self.stats.blocks_held_peak.max(self.store.len() as u64);
        Ok(())
    }

    /// `put =`: the block becomes the new value. One lookup finds or makes its slot, whose
    /// state moves (or starts, for a new block) before the value changes.
    fn replace(
        &mut self,
        from: Origin,
        array: u32,
        key: BlockKey,
        block: Block,
        access: Access,
    ) -> Result<()> {
        let program = self.program;
        self.store
            .replace(array, key, block, from.section, &mut |slot| {
                step(program, slot, from, array, &key, access)
            })
            .map_err(|e| e.at(&program.name, from.line))
    }

    /// `put +=` and `put *=`: the block changes where it is (made zero-filled by a first
    /// `put +=`).
    fn update_in_place(
        &mut self,
        from: Origin,
        array: u32,
        key: BlockKey,
        shape: &[usize],
        op: PutOp,
        payload: Payload,
    ) -> Result<()> {
        let access = Access::of_put(op);
        let new = !self.store.contains(array, &key);
        if !new {
            self.touch(from, array, &key, access)?;
        }
        let section = from.section;
        let program = &self.program.name;
        let at = |e: RuntimeError| e.at(program, from.line);
        // Named only in an error: not formatted for every put.
        let whole = self.program;
        let text = || block_text(whole, array as usize, &key);
        match (op, payload) {
            (PutOp::Accumulate, Payload::Block(data)) => {
                let bytes = data.len() * 8;
                self.store.receive(bytes, &text).map_err(at)?;
                let r = self
                    .store
                    .accumulate(array, key, shape, section, Addend::Block(&data));
                crate::spare::give(data);
                self.store.received(bytes);
                r.map_err(at)?;
            }
            (PutOp::Accumulate, Payload::Scalar(v)) => {
                self.store
                    .accumulate(array, key, shape, section, Addend::Scalar(v))
                    .map_err(at)?;
            }
            (PutOp::Scale, Payload::Scalar(v)) => {
                self.store.forget_residual(array, &key);
                self.store
                    .update(array, key, shape, section, |b| {
                        k::scale(&mut b.data, v);
                        Ok(())
                    })
                    .map_err(at)?;
            }
            (PutOp::Scale, Payload::Block(_)) | (PutOp::Replace, _) => {
                return Err(RuntimeError::new(
                    "internal: put *= with a block, or put = in place",
                ));
            }
        }
        if new {
            // The block's first access, in the state it was made with.
            self.touch(from, array, &key, access)?;
        }
        Ok(())
    }

    fn restore(&mut self, from: Origin, array: u32, label: &str, saved: &Saved) -> Result<()> {
        let Some(blocks) = saved.get(label) else {
            return Err(self.error(
                from,
                format!("no persistent object \"{label}\": nothing was saved under this label by an earlier program of the job"),
            ));
        };
        self.store.remove_array(array);
        let at = |e: RuntimeError| e.at(&self.program.name, from.line);
        for (key, block) in blocks {
            self.store
                .replace(array, *key, Block::clone(block), from.section, &mut |_| {
                    Ok(())
                })
                .map_err(at)?;
        }
        self.stats.blocks_held_peak = self.stats.blocks_held_peak.max(self.store.len() as u64);
        Ok(())
    }
}

/// Whether two saved arrays hold the same blocks, bit for bit.
fn same_blocks(a: &HashMap<BlockKey, Arc<Block>>, b: &HashMap<BlockKey, Arc<Block>>) -> bool {
    a.len() == b.len()
        && a.iter().all(|(key, x)| {
            b.get(key).is_some_and(|y| {
                x.shape == y.shape
                    && x.data.len() == y.data.len()
                    && x.data
                        .iter()
                        .zip(&y.data)
                        .all(|(p, q)| p.to_bits() == q.to_bits())
            })
        })
}

/// Moves a block's consistency state for an access of `from` (a block of an earlier section
/// starts afresh); a race is an error naming both workers.
fn step(
    program: &Program,
    h: &mut Slot,
    from: Origin,
    array: u32,
    key: &BlockKey,
    access: Access,
) -> Result<()> {
    let section = from.section;
    let mode = if h.section == section {
        h.mode
    } else {
        Mode::None
    };
    match mode.next(access, from.worker) {
        Ok(m) => {
            h.mode = m;
            h.section = section;
            Ok(())
        }
        Err(other) => {
            let others = match other {
                Some(w) => format!("worker {w}"),
                None => "several workers".to_string(),
            };
            let text = block_text(program, array as usize, key);
            let w = from.worker;
            let message = match access {
                Access::Read => format!(
                    "Data race at server for block {text} from worker {w} (read; {others} wrote or accumulated it in this section).  Probably a missing sip_barrier"
                ),
                Access::Write => format!(
                    "Incorrect PUT block semantics (data race) for {text} from worker {w} ({others} also used it in this section).  Probably a missing sip_barrier"
                ),
                Access::Accumulate => format!(
                    "Incorrect PUT_ACCUMULATE block semantics (data race) for {text} from worker {w} ({others} read or replaced it in this section).  Probably a missing sip_barrier"
                ),
            };
            Err(RuntimeError::program(message).at(&program.name, from.line))
        }
    }
}

/// Runs a server for one program, whose arrays have `blocks[a]` blocks (see
/// [`Server::expecting`]): requests until `EndProgram`. `at_end` sees the saved arrays, and
/// the labels whose arrays this program changed ([`Server::changed_saved`]), before the end is
/// acknowledged (checkpoints are written there).
pub fn serve(
    program: &Program,
    blocks: &[u64],
    link: &mut dyn crate::cluster::ServerLink,
    saved: &mut Saved,
    spill: &Spill,
    at_end: &mut dyn FnMut(&Saved, &BTreeSet<String>) -> Result<()>,
) -> Result<ServerStats> {
    let mut server =
        Server::new(program, link.rank(), spill.clone()).expecting(blocks, link.servers());
    crate::spare::limit(spill.budget);
    // Busy is the program's time less the link's waits for requests: measured a request at
    // a time, the clock cost a loop of small puts a twentieth of the server's time.
    let started = Instant::now();
    let idle = link.idle();
    loop {
        let msg = link.recv()?;
        if matches!(msg, ToServer::EndProgram { .. }) {
            server.set_busy(started.elapsed().saturating_sub(link.idle() - idle));
        }
        let mut replies = Vec::new();
        let flow = server.handle(msg, saved, &mut |w, m| {
            replies.push((w, m));
            Ok(())
        })?;
        if flow == Flow::End {
            at_end(saved, server.changed_saved())?;
        }
        for (w, m) in replies {
            link.send(w, m)?;
        }
        if flow == Flow::End {
            return Ok(server.stats());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::message::Payload;

    fn key() -> BlockKey {
        BlockKey {
            segments: [1, 1, 1, 1, 1, 1],
            parents: [0; 6],
        }
    }

    /// A program with one distributed array of two blocks, for requests from two workers.
    fn one_distributed_array() -> Program {
        crate::testutil::program("sial p\nindex i = 1:2\ndistributed a[i]\nendsial p\n")
    }

    fn held(server: &mut Server, saved: &mut Saved) -> Option<Vec<f64>> {
        let mut got = None;
        let get = ToServer::Get {
            from: Origin {
                worker: 0,
                section: 0,
                line: 9,
            },
            array: 0,
            key: key(),
            prefetch: true,
        };
        server
            .handle(get, saved, &mut |_, m| {
                if let ToWorker::Block { block, .. } = m {
                    got = Some(block.data.clone());
                }
                Ok(())
            })
            .expect("get");
        got
    }

    /// Worker 0 is past a barrier and asks for a block before worker 1's put of the section
    /// before, and its `Sync`, have arrived: the get waits for them and sees the put.
    #[test]
    fn a_get_after_a_barrier_waits_for_the_other_workers_section() {
        let program = one_distributed_array();
        let mut server = Server::new(&program, 0, blocks::Spill::default());
        let mut saved = Saved::new();
        let from = |worker, section| Origin {
            worker,
            section,
            line: 1,
        };
        let mut send = |server: &mut Server, m: ToServer| {
            let mut replies = Vec::new();
            server
                .handle(m, &mut saved, &mut |w, m| {
                    if let ToWorker::Block { block, .. } = m {
                        replies.push((w, block.data.clone()));
                    }
                    Ok(())
                })
                .expect("request");
            replies
        };
        let put = |worker, v| ToServer::Put {
            from: from(worker, 0),
            array: 0,
            key: key(),
            shape: [2].into(),
            op: PutOp::Replace,
            payload: Payload::Block(vec![v, v]),
        };
        // Both workers sent requests in section 0, so the server must apply two Syncs first;
        // applied early, the get would find no block.
        assert!(send(&mut server, ToServer::Sync { from: from(0, 0) }).is_empty());
        let expect = ToServer::Expect {
            from: from(0, 1),
            syncs: 2,
        };
        assert!(send(&mut server, expect).is_empty());
        let get = ToServer::Get {
            from: from(0, 1),
            array: 0,
            key: key(),
            prefetch: false,
        };
        assert!(
            send(&mut server, get).is_empty(),
            "the get was answered before worker 1's section ended"
        );
        assert!(send(&mut server, put(1, 2.0)).is_empty());
        let replies = send(&mut server, ToServer::Sync { from: from(1, 0) });
        assert_eq!(replies, vec![(0, vec![2.0, 2.0])]);
    }

    /// A program's end changes the saved arrays where it saves a new label, or other values
    /// under an old one; an array restored and saved again unchanged leaves them as they were
    /// (its checkpoint need not be written again).
    #[test]
    fn saving_a_restored_array_unchanged_changes_nothing() {
        let program = one_distributed_array();
        let mut saved = Saved::new();
        let from = Origin {
            worker: 0,
            section: 0,
            line: 1,
        };
        let label = || "t2".to_string();
        // One program: `restore` (where `restore_from` is set), a put of `value` (where set),
        // `set_persistent` and the end; whether the end changed the saved arrays.
        let mut run = |restore_from: bool, value: Option<f64>| {
            let mut server = Server::new(&program, 0, blocks::Spill::default());
            let mut messages = Vec::new();
            if restore_from {
                messages.push(ToServer::RestorePersistent {
                    from,
                    array: 0,
                    label: label(),
                });
            }
            if let Some(v) = value {
                messages.push(ToServer::Put {
                    from,
                    array: 0,
                    key: key(),
                    shape: [2].into(),
                    op: PutOp::Replace,
                    payload: Payload::Block(vec![v, -0.0]),
                });
            }
            messages.push(ToServer::SetPersistent {
                from,
                array: 0,
                label: label(),
            });
            messages.push(ToServer::EndProgram { from });
            for m in messages {
                server
                    .handle(m, &mut saved, &mut |_, _| Ok(()))
                    .expect("request");
            }
            server.changed_saved().iter().cloned().collect::<Vec<_>>()
        };
        let changed = vec![label()];
        assert_eq!(run(false, Some(1.0)), changed, "a new label");
        assert!(run(true, None).is_empty(), "restored and saved again");
        assert!(
            run(false, Some(1.0)).is_empty(),
            "the same values put again"
        );
        assert_eq!(run(true, Some(2.0)), changed, "other values");
        assert_eq!(run(false, None), changed, "no blocks where there were some");
    }

    /// A worker that is past a `delete` puts into the array before a slower worker's copy of
    /// the same `delete` arrives: the late copy removes nothing; the next `delete` acts again.
    #[test]
    fn a_late_copy_of_a_delete_keeps_newer_puts() {
        let program = one_distributed_array();
        let mut server = Server::new(&program, 0, blocks::Spill::default());
        let mut saved = Saved::new();
        let from = |worker| Origin {
            worker,
            section: 0,
            line: 1,
        };
        let send = |server: &mut Server, m: ToServer, saved: &mut Saved| {
            server
                .handle(m, saved, &mut |_, _| Ok(()))
                .expect("request");
        };
        let put = |worker| ToServer::Put {
            from: from(worker),
            array: 0,
            key: key(),
            shape: [2].into(),
            op: PutOp::Accumulate,
            payload: Payload::Block(vec![1.0, 2.0]),
        };
        let delete = |worker| ToServer::Delete {
            from: from(worker),
            array: 0,
        };
        send(&mut server, put(0), &mut saved);
        send(&mut server, delete(1), &mut saved);
        assert_eq!(held(&mut server, &mut saved), None);
        send(&mut server, put(1), &mut saved);
        send(&mut server, delete(0), &mut saved);
        assert_eq!(held(&mut server, &mut saved), Some(vec![1.0, 2.0]));
        send(&mut server, delete(0), &mut saved);
        assert_eq!(held(&mut server, &mut saved), None);
        send(&mut server, delete(1), &mut saved);
    }
}
