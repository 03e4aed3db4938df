//! Prefetch depth and figures per `get`/`request` site (docs/ARCHITECTURE.md "Prefetch"). A site is one `get` instruction of a program; at each execution it may also
//! request its blocks for the next `depth` iterations of its loops. With `--prefetch auto` the
//! depth adapts: when a read waits for a block that was prefetched, the block was asked for
//! too late, and the depth grows by the wait divided by the time between executions of the
//! site (then holds while the deeper requests take effect); it halves (down to 0, then
//! pauses before trying again) when prefetched blocks are wasted or the worker memory budget
//! has no room for them.

use crate::options::{MAX_DEPTH, PrefetchMode};
use std::time::{Duration, Instant};

/// Prefetch outcomes (used or wasted) `auto` looks at before judging the waste.
const WINDOW: u64 = 8;

/// Executions of a site between readings of the clock (`auto`): the interval between two is
/// the average over them. Read at every execution, the clock was 2–4% of a worker's time in a
/// loop of gets of one-element blocks.
const CLOCK_EVERY: u32 = 8;

/// Figures of one site (or, summed, of a worker).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SiteStats {
    /// Index of the program in the job, and the source line of the `get`.
    pub program: u32,
    pub line: u32,
    /// Executions of the `get`.
    pub gets: u64,
    /// First reads of fetched blocks after a `get`, and those that had to wait.
    pub reads: u64,
    pub waited: u64,
    pub wait: Duration,
    /// Prefetch requests sent, prefetched blocks a `get` then used, and those dropped unused.
    pub requested: u64,
    pub used: u64,
    pub wasted: u64,
    /// The deepest look-ahead the site used.
    pub max_depth: u64,
}

impl SiteStats {
    pub fn add(&mut self, o: &SiteStats) {
        self.gets += o.gets;
        self.reads += o.reads;
        self.waited += o.waited;
        self.wait += o.wait;
        self.requested += o.requested;
        self.used += o.used;
        self.wasted += o.wasted;
        self.max_depth = self.max_depth.max(o.max_depth);
    }

    /// Reads that did not wait / all reads of fetched blocks (1 when there were none).
    pub fn hit_ratio(&self) -> f64 {
        if self.reads == 0 {
            1.0
        } else {
            (self.reads - self.waited) as f64 / self.reads as f64
        }
    }
}

/// Adds `more` into `total`, matching sites by program and line.
pub fn merge_sites(total: &mut Vec<SiteStats>, more: &[SiteStats]) {
    for m in more {
        match total
            .iter_mut()
            .find(|t| t.program == m.program && t.line == m.line)
        {
            Some(t) => t.add(m),
            None => total.push(*m),
        }
    }
    total.sort_by_key(|s| (s.program, s.line));
}

/// What one window of a site's activity showed.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    used: u64,
    wasted: u64,
    /// Prefetches skipped for want of memory.
    no_room: u64,
}

/// One `get` site: its depth and figures.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    pub stats: SiteStats,
    depth: usize,
    window: Window,
    /// After the depth fell to 0 for waste, executions to wait before trying again; doubles
    /// each time it happens.
    pause: u64,
    backoff: u64,
    /// The longest wait for a prefetched block since the depth last grew.
    late: Duration,
    /// Executions before the depth may grow again (deeper requests need time to arrive).
    hold: usize,
    /// Seconds of work between executions, waits for blocks left out (moving average); the
    /// last reading of the clock and the worker's total wait then.
    interval: f64,
    last: Option<(Instant, Duration)>,
    /// Executions since `last`: the clock is read every [`CLOCK_EVERY`] of them.
    since: u32,
}

impl Site {
    pub fn new(program: u32, line: u32, mode: PrefetchMode) -> Site {
        Site {
            stats: SiteStats {
                program,
                line,
                ..SiteStats::default()
            },
            depth: match mode {
                PrefetchMode::Off => 0,
                PrefetchMode::Auto => 1,
                PrefetchMode::Depth(d) => d,
            },
            window: Window::default(),
            pause: 0,
            backoff: 32,
            late: Duration::ZERO,
            hold: 0,
            interval: 0.0,
            last: None,
            since: 0,
        }
    }

    /// The look-ahead for this execution of the site; `waited` is the worker's total wait
    /// for blocks so far.
    pub fn depth(&mut self, mode: PrefetchMode, waited: Duration) -> usize {
        self.stats.gets += 1;
        if mode == PrefetchMode::Auto {
            self.since += 1;
            if self.last.is_none() || self.since >= CLOCK_EVERY {
                self.time(waited);
            }
            self.adapt();
        }
        self.stats.max_depth = self.stats.max_depth.max(self.depth as u64);
        self.depth
    }

    /// Reads the clock: the work between executions since the last reading, averaged over
    /// them, joins the moving average.
    fn time(&mut self, waited: Duration) {
        let now = Instant::now();
        if let Some((last, waited_then)) = self.last {
            let dt = (now - last).saturating_sub(waited.saturating_sub(waited_then));
            let dt = (dt.as_secs_f64() / f64::from(self.since.max(1))).max(1e-7);
            self.interval = if self.interval == 0.0 {
                dt
            } else {
                0.8 * self.interval + 0.2 * dt
            };
        }
        self.last = Some((now, waited));
        self.since = 0;
    }

    /// `auto`: waste or a full budget lowers the depth; prefetched blocks that came late
    /// raise it.
    fn adapt(&mut self) {
        if self.depth == 0 {
            if self.pause > 0 {
                self.pause -= 1;
                return;
            }
            self.depth = 1;
            self.window = Window::default();
            return;
        }
        self.hold = self.hold.saturating_sub(1);
        let w = self.window;
        let judged = w.used + w.wasted >= WINDOW;
        if w.no_room > 0 || (judged && w.wasted * 4 > w.used + w.wasted) {
            self.window = Window::default();
            self.late = Duration::ZERO;
            self.depth /= 2;
            if self.depth == 0 {
                self.pause = self.backoff;
                self.backoff = (self.backoff * 2).min(1 << 16);
            }
            return;
        }
        if judged {
            self.window = Window::default();
        }
        if !self.late.is_zero() && self.hold == 0 {
            let extra = if self.interval > 0.0 {
                (self.late.as_secs_f64() / self.interval).ceil() as usize
            } else {
                self.depth
            };
            self.depth = (self.depth + extra.max(1)).min(MAX_DEPTH);
            self.hold = self.depth;
            self.late = Duration::ZERO;
        }
    }

    /// The first read after a `get` of a block this site fetched; `wait` if it waited,
    /// `prefetched` if the block was asked for ahead.
    pub fn read(&mut self, wait: Option<Duration>, prefetched: bool) {
        self.stats.reads += 1;
        if let Some(d) = wait {
            self.stats.waited += 1;
            self.stats.wait += d;
            if prefetched {
                self.late = self.late.max(d);
            }
        }
    }

    /// Iterations ahead that this site requests its blocks now.
    pub fn ahead(&self) -> usize {
        self.depth
    }

    pub fn requested(&mut self) {
        self.stats.requested += 1;
    }

    pub fn used(&mut self) {
        self.stats.used += 1;
        self.window.used += 1;
    }

    pub fn wasted(&mut self) {
        self.stats.wasted += 1;
        self.window.wasted += 1;
    }

    pub fn no_room(&mut self) {
        self.window.no_room += 1;
    }
}

/// No site yet at this instruction.
const NO_SITE: u32 = u32::MAX;

/// The `get` sites of one program, numbered in the order they first run.
pub(crate) struct Sites {
    sites: Vec<Site>,
    /// The site number of each instruction that has run a `get` (`NO_SITE` for the others):
    /// looked up at every `get`, so by index rather than hash.
    numbers: Vec<u32>,
    /// The program's index in the job.
    program: u32,
    mode: PrefetchMode,
}

impl Sites {
    pub(crate) fn new(program: u32, mode: PrefetchMode) -> Sites {
        Sites {
            sites: Vec::new(),
            numbers: Vec::new(),
            program,
            mode,
        }
    }

    pub(crate) fn mode(&self) -> PrefetchMode {
        self.mode
    }

    /// The number of the `get` site at `pc` (created at its first execution).
    pub(crate) fn number(&mut self, pc: usize, line: u32) -> u32 {
        if let Some(&n) = self.numbers.get(pc)
            && n != NO_SITE
        {
            return n;
        }
        if self.numbers.len() <= pc {
            self.numbers.resize(pc + 1, NO_SITE);
        }
        let n = self.sites.len() as u32;
        self.numbers[pc] = n;
        self.sites.push(Site::new(self.program, line, self.mode));
        n
    }

    /// How far site `site` looks ahead at this execution; `waited` is the worker's total
    /// wait for blocks so far.
    pub(crate) fn depth(&mut self, site: u32, waited: Duration) -> usize {
        let mode = self.mode;
        self.get(site).map_or(0, |s| s.depth(mode, waited))
    }

    pub(crate) fn get(&mut self, site: u32) -> Option<&mut Site> {
        self.sites.get_mut(site as usize)
    }

    /// Counts a prefetched block that leaves the cache unclaimed.
    pub(super) fn waste(&mut self, e: &mut super::cache::Entry) {
        if e.speculative {
            e.speculative = false;
            if let Some(s) = self.get(e.site) {
                s.wasted();
            }
        }
    }

    /// The figures of every site so far.
    pub(crate) fn stats(&self) -> Vec<SiteStats> {
        self.sites.iter().map(|s| s.stats).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        assert_eq!("off".parse(), Ok(PrefetchMode::Off));
        assert_eq!("auto".parse(), Ok(PrefetchMode::Auto));
        assert_eq!("0".parse(), Ok(PrefetchMode::Off));
        assert_eq!("8".parse(), Ok(PrefetchMode::Depth(8)));
        assert!("65".parse::<PrefetchMode>().is_err());
        assert!("fast".parse::<PrefetchMode>().is_err());
    }

    #[test]
    fn auto_deepens_by_how_late_prefetched_blocks_came() {
        let mut s = Site::new(0, 1, PrefetchMode::Auto);
        // 100 us between executions, without the clock's say.
        let at = |s: &mut Site| {
            s.last = None;
            s.interval = 100e-6;
            s.depth(PrefetchMode::Auto, Duration::ZERO)
        };
        assert_eq!(at(&mut s), 1);
        s.read(Some(Duration::from_micros(450)), true);
        // 450 us late at 100 us per execution: 5 more.
        assert_eq!(at(&mut s), 6);
        // Held while the deeper requests take effect.
        s.read(Some(Duration::from_micros(300)), true);
        for _ in 0..5 {
            assert_eq!(at(&mut s), 6);
        }
        assert_eq!(at(&mut s), 9);
        // Waits for blocks that were not prefetched do not count.
        for _ in 0..20 {
            s.read(Some(Duration::from_micros(300)), false);
            at(&mut s);
        }
        assert_eq!(s.depth, 9);
        assert_eq!(s.stats.waited, 22);
    }

    #[test]
    fn auto_reads_the_clock_every_few_executions_and_averages_over_them() {
        let mut s = Site::new(0, 1, PrefetchMode::Auto);
        s.depth(PrefetchMode::Auto, Duration::ZERO);
        let (first, _) = s.last.expect("the first execution reads the clock");
        for _ in 1..CLOCK_EVERY {
            s.depth(PrefetchMode::Auto, Duration::ZERO);
            assert_eq!(s.last.map(|l| l.0), Some(first), "not read again yet");
        }
        // Pretend the executions took 800 us, 300 of them waiting for blocks.
        s.last = Some((first - Duration::from_micros(800), Duration::ZERO));
        s.depth(PrefetchMode::Auto, Duration::from_micros(300));
        assert_eq!(s.since, 0);
        let per_execution = 500e-6 / f64::from(CLOCK_EVERY);
        assert!(
            s.interval >= per_execution && s.interval < per_execution + 50e-6,
            "{}",
            s.interval
        );
        assert_eq!(s.stats.gets, u64::from(CLOCK_EVERY) + 1);
    }

    #[test]
    fn auto_backs_off_on_waste_and_tries_again_later() {
        let mut s = Site::new(0, 1, PrefetchMode::Auto);
        s.depth(PrefetchMode::Auto, Duration::ZERO);
        for _ in 0..WINDOW {
            s.wasted();
        }
        assert_eq!(s.depth(PrefetchMode::Auto, Duration::ZERO), 0);
        for _ in 0..32 {
            assert_eq!(s.depth(PrefetchMode::Auto, Duration::ZERO), 0);
        }
        assert_eq!(s.depth(PrefetchMode::Auto, Duration::ZERO), 1);
        assert_eq!(s.stats.wasted, WINDOW);
    }

    #[test]
    fn a_full_budget_lowers_the_depth() {
        let mut s = Site::new(0, 1, PrefetchMode::Depth(4));
        s.depth = 4;
        for _ in 0..WINDOW {
            s.no_room();
        }
        s.adapt();
        assert_eq!(s.depth, 2);
    }

    #[test]
    fn fixed_depth_does_not_adapt() {
        let mut s = Site::new(0, 1, PrefetchMode::Depth(3));
        for _ in 0..100 {
            s.wasted();
            assert_eq!(s.depth(PrefetchMode::Depth(3), Duration::ZERO), 3);
        }
    }

    #[test]
    fn sites_merge_by_program_and_line() {
        let a = SiteStats {
            program: 0,
            line: 5,
            reads: 4,
            waited: 1,
            ..SiteStats::default()
        };
        let b = SiteStats {
            program: 0,
            line: 3,
            reads: 2,
            ..SiteStats::default()
        };
        let mut total = vec![a];
        merge_sites(&mut total, &[a, b]);
        assert_eq!(total.len(), 2);
        assert_eq!(total[0].line, 3);
        assert_eq!(total[1].reads, 8);
        assert_eq!(total[1].hit_ratio(), 0.75);
    }
}
