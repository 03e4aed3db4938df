//! Everything that crosses ranks (SIAL-SPEC §7.2–§7.6; docs/ARCHITECTURE.md "Ranks and transports"): the messages
//! of the worker–server protocol, the rank layout, and the links a worker and a server talk
//! through. Transports implement the links: [`solo`] (one worker, the server inside it),
//! [`local`] (ranks are threads) and, with the `mpi` feature, `mpi` (ranks are processes).

pub mod abort;
pub mod local;
pub mod message;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod solo;

pub use abort::Abort;
pub use message::{Payload, ToServer, ToWorker};

use crate::error::Result;
use std::time::Duration;

/// A worker's connection to the servers and to the other workers.
pub trait WorkerLink {
    /// This worker's rank among the workers (0-based).
    fn rank(&self) -> usize;
    fn workers(&self) -> usize;
    fn servers(&self) -> usize;
    /// Sends a request to server `server` (0-based among the servers). A request may be held
    /// to go with later ones, but never past this worker's next wait (`recv`, `all_gather`,
    /// `broadcast`) or [`WorkerLink::send_held`]; requests to one server arrive in order.
    fn send(&mut self, server: usize, msg: ToServer) -> Result<()>;
    /// Sends the requests held (the worker turns to other work, which may take long).
    fn send_held(&mut self) -> Result<()> {
        Ok(())
    }
    /// The next reply from any server; waits for it. Fails when the job is aborted.
    fn recv(&mut self) -> Result<ToWorker>;
    /// A reply that has already arrived, if any; does not wait.
    fn try_recv(&mut self) -> Result<Option<ToWorker>>;
    /// Every worker contributes `data`; each receives all contributions in worker-rank order.
    fn all_gather(&mut self, data: Vec<f64>) -> Result<Vec<Vec<f64>>>;
    /// Waits until every worker has called it (sending what is held first, as a wait does).
    fn barrier(&mut self) -> Result<()> {
        self.all_gather(Vec::new()).map(|_| ())
    }
    /// A barrier that also leaves in `bits` the bitwise or of every worker's `bits`, and in
    /// `counts` the sum of every worker's `counts` (each of the same length on every worker).
    fn barrier_meet(&mut self, bits: &mut [u64], counts: &mut [u64]) -> Result<()> {
        if bits.is_empty() && counts.is_empty() {
            return self.barrier();
        }
        let workers = self.workers();
        let all = self.all_gather(meeting(bits, counts, workers))?;
        fold_meeting(&all, bits, counts, workers);
        Ok(())
    }
    /// Worker `root`'s `data` on every worker.
    fn broadcast(&mut self, root: usize, data: Vec<f64>) -> Result<Vec<f64>>;
    /// True when another rank has failed and this one should stop.
    fn aborted(&self) -> bool;
    /// Whether a request costs a message to another rank, so that a worker sums its
    /// `put +=` terms to a block before sending them (not where the server is called in place).
    fn sums_puts(&self) -> bool {
        true
    }
    /// Whether a fetched block is the server's own data rather than a copy (ranks that share
    /// memory). A worker keeps fetched copies past a barrier only where it is not: a shared
    /// block kept would make the server copy it at its next change.
    fn shares_blocks(&self) -> bool {
        false
    }
}

/// A worker's contribution to [`WorkerLink::barrier_meet`] through an all-gather: its
/// [`tally`], each word as the bits of an `f64`.
fn meeting(bits: &[u64], counts: &[u64], workers: usize) -> Vec<f64> {
    tally(bits, counts, workers)
        .into_iter()
        .map(f64::from_bits)
        .collect()
}

/// Every worker's contribution ([`meeting`]) summed word by word into `bits` (or) and
/// `counts` (sum), as a summing reduction would.
fn fold_meeting(all: &[Vec<f64>], bits: &mut [u64], counts: &mut [u64], workers: usize) {
    let mut summed = vec![0u64; all.first().map_or(0, Vec::len)];
    for theirs in all {
        for (s, t) in summed.iter_mut().zip(theirs) {
            *s = s.wrapping_add(t.to_bits());
        }
    }
    untally(&summed, bits, counts, workers);
}

/// Bits and counts as one vector of words whose element-wise sum over `workers`
/// contributions gives the or of the bits and the sum of the counts ([`untally`]), so that
/// one summing reduction does both: each bit gets a lane wide enough to count every worker.
pub fn tally(bits: &[u64], counts: &[u64], workers: usize) -> Vec<u64> {
    let (lane, per_word) = lanes(workers);
    let mut out = vec![0; (bits.len() * 64).div_ceil(per_word)];
    for (w, &word) in bits.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            let i = w * 64 + rest.trailing_zeros() as usize;
            out[i / per_word] |= 1 << ((i % per_word) as u32 * lane);
            rest &= rest - 1;
        }
    }
    out.extend_from_slice(counts);
    out
}

/// The or of the bits and the counts from a sum of [`tally`]s of the same lengths.
pub fn untally(summed: &[u64], bits: &mut [u64], counts: &mut [u64], workers: usize) {
    let (lane, per_word) = lanes(workers);
    let mask = (1u64 << lane) - 1;
    let words = (bits.len() * 64).div_ceil(per_word);
    let (lanes, sums) = summed.split_at(words.min(summed.len()));
    bits.fill(0);
    for i in 0..(lanes.len() * per_word).min(bits.len() * 64) {
        if (lanes[i / per_word] >> ((i % per_word) as u32 * lane)) & mask != 0 {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
    for (c, s) in counts.iter_mut().zip(sums) {
        *c = *s;
    }
}

/// Bits per lane (enough to hold `workers`) and lanes per word.
fn lanes(workers: usize) -> (u32, usize) {
    let lane = (usize::BITS - workers.max(1).leading_zeros()).min(64);
    (lane, (64 / lane) as usize)
}

/// A server's connection to the workers.
pub trait ServerLink {
    /// This server's rank among the servers (0-based).
    fn rank(&self) -> usize;
    fn servers(&self) -> usize;
    /// The next request from any worker; waits for it. Fails when the job is aborted.
    fn recv(&mut self) -> Result<ToServer>;
    /// Sends a reply; it may be held while requests that arrived with its own wait to be
    /// handled, but never past the server's next wait for a request.
    fn send(&mut self, worker: usize, msg: ToWorker) -> Result<()>;
    /// Time spent so far waiting for requests (a server's other time is its work).
    fn idle(&self) -> Duration;
}

/// Default split of P ranks (SIAL-SPEC §7.2): S = P/3 for P >= 3, else 1; W = P - S.
pub fn default_split(ranks: usize) -> (usize, usize) {
    let servers = if ranks >= 3 { ranks / 3 } else { 1 };
    (ranks.saturating_sub(servers), servers)
}

/// Role of each global rank (SIAL-SPEC §7.2): groups of workers followed by a server (W >= S),
/// or a worker followed by servers (S > W). `true` = server.
pub fn layout(workers: usize, servers: usize) -> Vec<bool> {
    let mut roles = Vec::with_capacity(workers + servers);
    if servers == 0 {
        roles.resize(workers, false);
        return roles;
    }
    if workers >= servers {
        for g in 0..servers {
            let n = workers / servers + usize::from(g < workers % servers);
            roles.extend(std::iter::repeat_n(false, n));
            roles.push(true);
        }
    } else {
        for g in 0..workers {
            roles.push(false);
            let n = servers / workers + usize::from(g < servers % workers);
            roles.extend(std::iter::repeat_n(true, n));
        }
    }
    roles
}

/// What global rank `global` of a `layout` is: a server or not, and its rank among its role.
pub fn role_of(roles: &[bool], global: usize) -> (bool, usize) {
    let server = roles.get(global).copied().unwrap_or(false);
    let before = &roles[..global.min(roles.len())];
    (server, before.iter().filter(|&&r| r == server).count())
}

/// Server owning a block: block number mod S (SIAL-SPEC §7.4).
pub fn owner(block_number: u64, servers: usize) -> usize {
    (block_number % servers.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_layout_follow_the_spec() {
        assert_eq!(default_split(1), (0, 1));
        assert_eq!(default_split(2), (1, 1));
        assert_eq!(default_split(9), (6, 3));
        let w = false;
        let s = true;
        assert_eq!(layout(6, 3), vec![w, w, s, w, w, s, w, w, s]);
        assert_eq!(layout(3, 2), vec![w, w, s, w, s]);
        assert_eq!(layout(1, 3), vec![w, s, s, s]);
        assert_eq!(layout(2, 3), vec![w, s, s, w, s]);
        assert_eq!(layout(2, 0), vec![w, w]);
        assert_eq!(role_of(&layout(3, 2), 3), (false, 2));
        assert_eq!(role_of(&layout(3, 2), 4), (true, 1));
    }

    #[test]
    fn a_sum_of_tallies_is_the_or_of_the_bits_and_the_sum_of_the_counts() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for workers in [1, 2, 3, 4, 7, 8, 64, 1000, 65535, 65536] {
            for words in [0, 1, 3] {
                let contributions: Vec<(Vec<u64>, Vec<u64>)> = (0..workers.min(40))
                    .map(|_| {
                        // Sparse bits, as changed arrays are.
                        let bits = (0..words).map(|_| next() & next() & next()).collect();
                        (bits, vec![next() % 2, next() % 2])
                    })
                    .collect();
                let mut summed = vec![0u64; 0];
                for (b, c) in &contributions {
                    let t = tally(b, c, workers);
                    summed.resize(t.len(), 0);
                    for (s, t) in summed.iter_mut().zip(t) {
                        *s += t;
                    }
                }
                let mut bits = vec![u64::MAX; words];
                let mut counts = vec![0; 2];
                untally(&summed, &mut bits, &mut counts, workers);
                let or = (0..words)
                    .map(|w| contributions.iter().fold(0, |a, (b, _)| a | b[w]))
                    .collect::<Vec<_>>();
                let sum = (0..2)
                    .map(|i| contributions.iter().map(|(_, c)| c[i]).sum::<u64>())
                    .collect::<Vec<_>>();
                assert_eq!(
                    (bits, counts),
                    (or, sum),
                    "{workers} workers, {words} words"
                );
            }
        }
    }

    #[test]
    fn owner_is_block_number_mod_servers() {
        assert_eq!(owner(7, 3), 1);
        assert_eq!(owner(7, 1), 0);
    }
}
