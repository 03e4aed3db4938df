//! Non-blocking sends with their buffers (see the transport's documentation).

use super::*;

/// Buffers of sends still in flight; MPI reads them until the send completes.
pub(super) enum Held {
    Bytes(Vec<u8>),
    Data(Vec<f64>),
    Block(Arc<Block>),
}

/// Non-blocking sends on one communicator, with their buffers, oldest first.
pub(super) struct Outbox {
    comm: ffi::MPI_Comm,
    pending: VecDeque<(ffi::MPI_Request, Held)>,
    /// Bytes of the pending sends.
    bytes: usize,
    /// Past this many pending bytes, `post` waits for the oldest sends (None: never waits).
    limit: Option<usize>,
}

/// Bytes a worker may have in flight before its puts wait for the servers (its memory).
pub(super) const WORKER_IN_FLIGHT: usize = 256 << 20;

impl Held {
    pub(super) fn bytes(&self) -> usize {
        match self {
            Held::Bytes(b) => b.len(),
            Held::Data(d) => d.len() * 8,
            Held::Block(b) => b.data.len() * 8,
        }
    }
}

impl Outbox {
    pub(super) fn new(comm: &SimpleCommunicator, limit: Option<usize>) -> Outbox {
        Outbox {
            comm: comm.as_raw(),
            pending: VecDeque::new(),
            bytes: 0,
            limit,
        }
    }

    pub(super) fn post(&mut self, dest: i32, tag: i32, held: Held) -> Result<()> {
        let (ptr, count, datatype) = match &held {
            Held::Bytes(b) => (
                b.as_ptr().cast::<std::ffi::c_void>(),
                b.len(),
                u8::equivalent_datatype().as_raw(),
            ),
            Held::Data(d) => (
                d.as_ptr().cast(),
                d.len(),
                f64::equivalent_datatype().as_raw(),
            ),
            Held::Block(b) => (
                b.data.as_ptr().cast(),
                b.data.len(),
                f64::equivalent_datatype().as_raw(),
            ),
        };
        let count = i32::try_from(count).map_err(|_| {
            RuntimeError::new(format!(
                "a message of {count} elements is too large for one MPI message"
            ))
        })?;
        // SAFETY: the buffer lives in `held`, which stays in `pending` (its heap storage does
        // not move, and an `Arc<Block>` shared here cannot be mutated) until MPI reports the
        // send complete in `reap` or `wait_oldest`. MPI's default error handler aborts on
        // failure, so the return codes need no check.
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        unsafe {
            ffi::MPI_Isend(ptr, count, datatype, dest, tag, self.comm, &mut request);
        }
        self.bytes += held.bytes();
        self.pending.push_back((request, held));
        // Only a worker waits here: a server must always come back to receiving, or a worker
        // waiting for its put to be received and the server waiting for its reply to be
        // received would wait for each other.
        if let Some(limit) = self.limit {
            while self.bytes > limit && self.pending.len() > 1 {
                self.wait_oldest();
            }
        }
        Ok(())
    }

    /// Frees the buffers of the completed sends at the front (sends complete mostly in order;
    /// testing only the front keeps this cheap with many sends in flight).
    pub(super) fn reap(&mut self) {
        while let Some((request, _)) = self.pending.front_mut() {
            let mut done: i32 = 0;
            // SAFETY: `request` is an active request from `MPI_Isend`; MPI sets it to null
            // when it completes.
            unsafe {
                ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE);
            }
            if done == 0 {
                break;
            }
            self.pop();
        }
    }

    pub(super) fn wait_oldest(&mut self) {
        if let Some((request, _)) = self.pending.front_mut() {
            // SAFETY: as in `reap`.
            unsafe {
                ffi::MPI_Wait(request, ffi::RSMPI_STATUS_IGNORE);
            }
            self.pop();
        }
    }

    pub(super) fn pop(&mut self) {
        if let Some((_, held)) = self.pending.pop_front() {
            self.bytes -= held.bytes();
            // The buffers of data sent, and of blocks no one else holds, serve the next
            // blocks (`crate::spare`).
            match held {
                Held::Data(data) => crate::spare::give(data),
                Held::Block(block) => {
                    if let Ok(block) = Arc::try_unwrap(block) {
                        crate::spare::give(block.data);
                    }
                }
                Held::Bytes(_) => {}
            }
        }
    }

    /// Waits until every send is complete.
    pub(super) fn drain(&mut self) {
        while !self.pending.is_empty() {
            self.wait_oldest();
        }
    }
}
