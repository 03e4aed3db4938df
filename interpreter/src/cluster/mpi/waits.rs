//! How a rank waits for a message or a collective. MPI's own blocking calls spin on the core,
//! which starves the other ranks when a node runs more ranks than it has cores (a laptop, a CI
//! machine): there a waiting rank spins briefly, yields the core, then sleeps for a few
//! microseconds at a time. Where every rank of the node has a core of its own, a sleep only
//! delays the answer (a 20 µs nap takes 80–100 µs on a VM, and a server idle for a while naps
//! longer), so there a rank polls, yielding the core between looks, and never sleeps
//! (docs/benchmarks.md, "MPI ranks with a core each poll without sleeping").

use super::all_gather;
use crate::error::{Result, RuntimeError};
use ::mpi::topology::{Communicator, SimpleCommunicator};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether a long wait sleeps: true until [`Places::choose_waits`] finds a core for every rank
/// of the node.
static NAPS: AtomicBool = AtomicBool::new(true);

/// Words of a CPU mask (1,024 CPUs, as glibc's `cpu_set_t`).
const MASK_WORDS: usize = 16;

/// Where a rank runs: its host, the CPUs it may run on, and how many of them it may use at
/// once (fewer than the mask where a container's CPU quota is lower).
#[derive(Clone, Debug, PartialEq)]
struct Placement {
    host: Vec<u8>,
    mask: [u64; MASK_WORDS],
    usable: u32,
}

impl Placement {
    fn here() -> Placement {
        let host = ::mpi::environment::processor_name().unwrap_or_default();
        let usable = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        Placement {
            host: host.into_bytes(),
            mask: affinity(),
            usable,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(4 + 8 * MASK_WORDS + self.host.len());
        bytes.extend_from_slice(&self.usable.to_le_bytes());
        for w in &self.mask {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        bytes.extend_from_slice(&self.host);
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<Placement> {
        let usable = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
        let mut mask = [0u64; MASK_WORDS];
        for (i, w) in mask.iter_mut().enumerate() {
            let at = 4 + 8 * i;
            *w = u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?);
        }
        let host = bytes.get(4 + 8 * MASK_WORDS..)?.to_vec();
        Some(Placement { host, mask, usable })
    }

    fn cpus(&self) -> u32 {
        self.mask.iter().map(|w| w.count_ones()).sum()
    }
}

/// The CPUs this process may run on; none where they cannot be read.
#[cfg(target_os = "linux")]
fn affinity() -> [u64; MASK_WORDS] {
    let mut words = [0u64; MASK_WORDS];
    // SAFETY: `cpu_set_t` is plain bits; sched_getaffinity writes at most its size.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return words;
        }
        set
    };
    for cpu in 0..MASK_WORDS * 64 {
        // SAFETY: `cpu` is below CPU_SETSIZE (1,024).
        if unsafe { libc::CPU_ISSET(cpu, &set) } {
            words[cpu / 64] |= 1 << (cpu % 64);
        }
    }
    words
}

#[cfg(not(target_os = "linux"))]
fn affinity() -> [u64; MASK_WORDS] {
    [0; MASK_WORDS]
}

/// Whether the ranks on `mine`'s host fit its cores: no more of them than the CPUs their masks
/// cover together, nor than a container's quota (seen as a rank that may use fewer CPUs than
/// its mask). Where a rank's mask is unknown, the fewest CPUs any rank there may use counts.
fn ranks_fit_cores(mine: &Placement, all: &[Placement]) -> bool {
    let node: Vec<&Placement> = all.iter().filter(|p| p.host == mine.host).collect();
    let mut union = [0u64; MASK_WORDS];
    for p in &node {
        for (u, w) in union.iter_mut().zip(&p.mask) {
            *u |= w;
        }
    }
    let covered: u32 = union.iter().map(|w| w.count_ones()).sum();
    let known = node.iter().all(|p| p.cpus() > 0);
    let quota = node
        .iter()
        .filter(|p| !known || p.usable < p.cpus())
        .map(|p| p.usable)
        .min();
    let cores = match (known, quota) {
        (true, Some(q)) => covered.min(q),
        (true, None) => covered,
        (false, Some(q)) => q,
        (false, None) => 0,
    };
    node.len() <= cores as usize
}

/// Where every rank of the world runs, gathered once at the start.
pub struct Places {
    all: Vec<Placement>,
    me: usize,
}

impl Places {
    /// Every rank's host, CPU mask and usable CPUs (collective: one all-gather).
    pub fn gather(world: &SimpleCommunicator) -> Result<Places> {
        let mine = Placement::here();
        let all = all_gather(world, &mine.encode())?
            .iter()
            .map(|b| Placement::decode(b))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| RuntimeError::new("internal: a rank's placement did not decode"))?;
        let me = world.rank() as usize;
        Ok(Places { all, me })
    }

    /// The ranks on this process's node, in order: those on a host of the same name. A rank
    /// whose host has no name is alone on its node.
    pub fn node_ranks(&self) -> Vec<usize> {
        let host = self.all.get(self.me).map_or(&[][..], |p| &p.host[..]);
        (0..self.all.len())
            .filter(|&r| r == self.me || (!host.is_empty() && self.all[r].host == host))
            .collect()
    }

    /// Chooses how this process waits: without naps where the ranks on its node fit its
    /// cores ([`ranks_fit_cores`]).
    pub fn choose_waits(&self) {
        if let Some(mine) = self.all.get(self.me) {
            NAPS.store(!ranks_fit_cores(mine, &self.all), Ordering::Relaxed);
        }
    }
}

/// Polls `probe` until it finds a message: a short spin, then yields of the core, then (where
/// the node has more ranks than cores) naps.
pub(super) fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    let naps = NAPS.load(Ordering::Relaxed);
    let mut idle = 0u32;
    let mut napping: Option<Instant> = None;
    loop {
        if let Some(found) = probe() {
            return found;
        }
        idle = idle.saturating_add(1);
        if idle < 64 {
            std::hint::spin_loop();
        } else if idle < 256 || !naps {
            std::thread::yield_now();
        } else {
            let since = *napping.get_or_insert_with(Instant::now);
            std::thread::sleep(nap(since.elapsed()));
        }
    }
}

/// How long a rank that has waited `waited` sleeps before it looks again: 20 µs for the first
/// millisecond (a reply, a short barrier), then a sixteenth of the wait so far, at most 500 µs.
/// A long wait (a worker at a barrier that another worker reaches much later, an idle server)
/// then wakes hundreds of times a second, not tens of thousands, each time taking a core from
/// a rank that computes when there are more ranks than cores, at the cost of answering at most
/// a sixteenth of its wait later.
fn nap(waited: Duration) -> Duration {
    const FIRST: Duration = Duration::from_micros(20);
    const LONGEST: Duration = Duration::from_micros(500);
    if waited < Duration::from_millis(1) {
        return FIRST;
    }
    (waited / 16).clamp(FIRST, LONGEST)
}

/// Waits for a non-blocking collective with the polling of [`wait_for`].
pub(super) fn wait_request<'a, D: ?Sized, S: ::mpi::request::Scope<'a>>(
    request: ::mpi::request::Request<'a, D, S>,
) {
    let mut pending = Some(request);
    wait_for(|| match pending.take()?.test() {
        Ok(_) => Some(()),
        Err(still) => {
            pending = Some(still);
            None
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: &str, cpus: &[usize], usable: u32) -> Placement {
        let mut mask = [0u64; MASK_WORDS];
        for &c in cpus {
            mask[c / 64] |= 1 << (c % 64);
        }
        Placement {
            host: host.as_bytes().to_vec(),
            mask,
            usable,
        }
    }

    #[test]
    fn naps_grow_with_the_wait_after_a_millisecond_to_at_most_500_us() {
        let us = Duration::from_micros;
        assert_eq!(nap(us(0)), us(20));
        assert_eq!(nap(us(999)), us(20));
        assert_eq!(nap(us(1000)), Duration::from_nanos(62_500));
        assert_eq!(nap(us(4000)), us(250));
        assert_eq!(nap(us(8000)), us(500));
        assert_eq!(nap(Duration::from_secs(60)), us(500));
    }

    #[test]
    fn ranks_fit_the_cores_their_masks_cover_together() {
        let two = |h| at(h, &[0, 1], 2);
        // Two ranks free to run on two CPUs fit; three do not.
        assert!(ranks_fit_cores(&two("a"), &[two("a"), two("a")]));
        assert!(!ranks_fit_cores(&two("a"), &[two("a"), two("a"), two("a")]));
        // Ranks of other hosts do not count.
        assert!(ranks_fit_cores(
            &two("a"),
            &[two("a"), two("b"), two("a"), two("b")]
        ));
        // Pinned to a core each (mpirun --bind-to core) they fit; pinned to one core they don't.
        let pinned = [at("a", &[0], 1), at("a", &[1], 1), at("a", &[2], 1)];
        assert!(ranks_fit_cores(&pinned[0], &pinned));
        let crowded = [at("a", &[0], 1), at("a", &[0], 1)];
        assert!(!ranks_fit_cores(&crowded[0], &crowded));
    }

    #[test]
    fn a_quota_below_the_mask_limits_the_cores() {
        // A container that sees 16 CPUs but may use 2.
        let all: Vec<_> = (0..3)
            .map(|_| at("a", &(0..16).collect::<Vec<_>>(), 2))
            .collect();
        assert!(!ranks_fit_cores(&all[0], &all));
        assert!(ranks_fit_cores(&all[0], &all[..2]));
        // Masks that cannot be read: the fewest usable CPUs decide.
        let unknown = [at("a", &[], 4), at("a", &[], 4), at("a", &[], 4)];
        assert!(ranks_fit_cores(&unknown[0], &unknown));
        assert!(!ranks_fit_cores(
            &unknown[0],
            &[unknown[0].clone(), at("a", &[], 1)]
        ));
    }

    #[test]
    fn a_node_is_the_ranks_of_one_host_name() {
        let all = vec![
            at("a", &[0], 1),
            at("b", &[0], 1),
            at("a", &[1], 1),
            at("", &[0], 1),
        ];
        let places = |me| Places {
            all: all.clone(),
            me,
        };
        assert_eq!(places(0).node_ranks(), vec![0, 2]);
        assert_eq!(places(1).node_ranks(), vec![1]);
        // A rank whose host has no name is alone.
        assert_eq!(places(3).node_ranks(), vec![3]);
    }

    #[test]
    fn placements_travel_whole() {
        let p = at("node-7", &[0, 5, 70, 1023], 3);
        assert_eq!(Placement::decode(&p.encode()), Some(p));
        assert_eq!(Placement::decode(&[1, 2, 3]), None);
    }
}
