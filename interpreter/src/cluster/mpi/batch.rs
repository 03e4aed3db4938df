//! Several requests to one server, or replies to one worker, in one MPI message (the records of
//! [`codec`](super::codec)): held per destination until the batch is flushed, and decoded one
//! record at a time where they arrive.

use super::*;
use ::mpi::point_to_point::{Message, Status};

/// A batch goes out once it holds this many bytes: enough for a hundred small requests, and
/// within the size MPI sends eagerly, so that its first records are not held long.
pub(super) const BATCH_BYTES: usize = 8 << 10;

/// The records held for each destination, not sent yet.
pub(super) struct Batches {
    tag: i32,
    /// Global rank of each destination.
    ranks: Vec<i32>,
    held: Vec<Vec<u8>>,
}

impl Batches {
    pub(super) fn new(ranks: Vec<i32>, tag: i32) -> Batches {
        let held = vec![Vec::new(); ranks.len()];
        Batches { tag, ranks, held }
    }

    pub(super) fn len(&self) -> usize {
        self.ranks.len()
    }

    /// The global rank of destination `to`, and its batch to append records to.
    pub(super) fn of(&mut self, to: usize) -> Result<(i32, &mut Vec<u8>)> {
        match (self.ranks.get(to), self.held.get_mut(to)) {
            (Some(&rank), Some(batch)) => Ok((rank, batch)),
            _ => Err(RuntimeError::new(format!(
                "internal: no MPI destination {to}"
            ))),
        }
    }

    pub(super) fn full(&self, to: usize) -> bool {
        self.held.get(to).is_some_and(|b| b.len() >= BATCH_BYTES)
    }

    /// Sends what is held for `to`, if anything.
    pub(super) fn flush(&mut self, to: usize, outbox: &mut Outbox) -> Result<()> {
        let tag = self.tag;
        let (rank, batch) = self.of(to)?;
        if batch.is_empty() {
            return Ok(());
        }
        // The next batch starts with room for one like this: grown from empty, a batch was
        // reallocated at every doubling.
        let bytes = std::mem::replace(batch, Vec::with_capacity(batch.len()));
        outbox.post(rank, tag, Held::Bytes(bytes))
    }

    pub(super) fn flush_all(&mut self, outbox: &mut Outbox) -> Result<()> {
        (0..self.len()).try_for_each(|to| self.flush(to, outbox))
    }
}

/// The message in hand, decoded record by record, and its sender.
pub(super) struct Inbox {
    tag: i32,
    batch: Vec<u8>,
    /// Bytes of `batch` decoded so far.
    at: usize,
    from: i32,
}

impl Inbox {
    pub(super) fn new(tag: i32) -> Inbox {
        Inbox {
            tag,
            batch: Vec::new(),
            at: 0,
            from: 0,
        }
    }

    /// Whether records of the message in hand are still to be decoded.
    pub(super) fn in_hand(&self) -> bool {
        self.at < self.batch.len()
    }

    /// Whether a record is ready to decode: one left in the message in hand, or a new message
    /// that has arrived (taken in hand). Does not wait.
    pub(super) fn poll(&mut self, world: &SimpleCommunicator) -> bool {
        if self.in_hand() {
            return true;
        }
        match world
            .any_process()
            .immediate_matched_probe_with_tag(self.tag)
        {
            Some(probed) => {
                self.take(probed);
                true
            }
            None => false,
        }
    }

    /// Waits until a record is ready to decode (see [`wait_for`]).
    pub(super) fn wait(&mut self, world: &SimpleCommunicator) {
        if self.in_hand() {
            return;
        }
        let tag = self.tag;
        let probed = wait_for(|| world.any_process().immediate_matched_probe_with_tag(tag));
        self.take(probed);
    }

    /// Receives a probed message into the buffer of the last one: rsmpi's
    /// `matched_receive_vec` fills a new vector a byte at a time first, 6% of a server's time
    /// in a loop of small puts.
    fn take(&mut self, (message, status): (Message, Status)) {
        let bytes = usize::try_from(status.count(u8::equivalent_datatype())).unwrap_or(0);
        if self.batch.capacity() > 16 * BATCH_BYTES && bytes <= BATCH_BYTES {
            // A large message (a barrier's claims) does not keep its buffer.
            self.batch = Vec::new();
        }
        self.batch.clear();
        self.batch.resize(bytes, 0);
        message.matched_receive_into(&mut self.batch[..]);
        self.at = 0;
        self.from = status.source_rank();
    }

    /// Decodes the next record in hand, receiving the data messages that follow its batch from
    /// the same sender (an empty message is malformed).
    pub(super) fn next<T>(&mut self, world: &SimpleCommunicator, decode: Decode<T>) -> Result<T> {
        let from = world.process_at_rank(self.from);
        let tag = self.tag;
        let rest = self.batch.get(self.at..).unwrap_or_default();
        let (msg, after) = decode(rest, &mut |data| {
            from.receive_into_with_tag(data, tag);
        })?;
        self.at = self.batch.len() - after.len();
        Ok(msg)
    }
}
