//! Progress of long pardo loops on stderr (worker 0; off with `sial run -q`): after a loop has
//! run for a while (2 s), a line with the iterations done of all, the rate and the time left,
//! redrawn in place on a terminal and printed every [`EVERY`] otherwise (a log file, mpirun's
//! forwarded output). Worker 0's place in the loop's iteration space stands for the whole
//! job's: every pardo manager hands out iterations in the same order to all workers.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Time between redrawings of the line on a terminal.
const REDRAW: Duration = Duration::from_millis(250);
/// Time between printed lines when stderr is not a terminal.
const EVERY: Duration = Duration::from_secs(10);
/// Iterations between looks at the clock.
const LOOK_EVERY: u64 = 16;

pub(crate) struct Progress {
    /// Loops that ran shorter than this print nothing; `None`: no progress at all.
    after: Option<Duration>,
    /// The pardo being run by this worker (pardo loops do not nest).
    pardo: Option<Pardo>,
}

struct Pardo {
    after: Duration,
    /// The loop's start pc, its program and source line.
    pc: usize,
    label: String,
    total: u64,
    started: Instant,
    steps: u64,
    shown: Shown,
}

enum Shown {
    Nothing,
    /// The bar, last updated then.
    Bar(ProgressBar, Instant),
    /// Lines, the last one printed then.
    Lines(Instant),
}

impl Progress {
    /// Progress of loops that run longer than `after` (`None`: none).
    pub(crate) fn new(after: Option<Duration>) -> Progress {
        Progress { after, pardo: None }
    }

    /// A pardo at `pc` starts with `total` iterations (before where clauses).
    pub(crate) fn start(&mut self, pc: usize, label: impl FnOnce() -> String, total: u64) {
        if let Some(after) = self.after
            && self.pardo.is_none()
        {
            self.pardo = Some(Pardo {
                after,
                pc,
                label: label(),
                total,
                started: Instant::now(),
                steps: 0,
                shown: Shown::Nothing,
            });
        }
    }

    /// The pardo at `pc` is at iteration `done()` of its iteration space (asked only when shown).
    pub(crate) fn step(&mut self, pc: usize, done: impl FnOnce() -> u64) {
        let Some(p) = self.pardo.as_mut().filter(|p| p.pc == pc) else {
            return;
        };
        p.steps += 1;
        if p.steps % LOOK_EVERY == 0 {
            p.show(done());
        }
    }

    /// The pardo at `pc` ended.
    pub(crate) fn end(&mut self, pc: usize) {
        if self.pardo.as_ref().is_some_and(|p| p.pc == pc)
            && let Some(p) = self.pardo.take()
        {
            match p.shown {
                Shown::Nothing => {}
                Shown::Bar(bar, _) => bar.finish_and_clear(),
                Shown::Lines(_) => eprintln!(
                    "{}: done, {} iterations in {:.1} s",
                    p.label,
                    p.total,
                    p.started.elapsed().as_secs_f64()
                ),
            }
        }
    }
}

impl Pardo {
    fn show(&mut self, done: u64) {
        let elapsed = self.started.elapsed();
        if elapsed < self.after {
            return;
        }
        match &mut self.shown {
            Shown::Nothing if std::io::stderr().is_terminal() => {
                // Set up while hidden, so that the first drawing is complete.
                let bar =
                    ProgressBar::with_draw_target(Some(self.total), ProgressDrawTarget::hidden());
                let style = ProgressStyle::with_template(
                    "{prefix}: {pos}/{len} iterations, {msg} {wide_bar}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar());
                bar.set_style(style);
                bar.set_prefix(self.label.clone());
                bar.set_position(done);
                bar.set_message(pace(self.total, done, elapsed));
                bar.set_draw_target(ProgressDrawTarget::stderr());
                self.shown = Shown::Bar(bar, Instant::now());
            }
            Shown::Bar(bar, last) => {
                if last.elapsed() >= REDRAW {
                    *last = Instant::now();
                    bar.set_position(done);
                    bar.set_message(pace(self.total, done, elapsed));
                }
            }
            Shown::Nothing => {
                self.line(done, elapsed);
                self.shown = Shown::Lines(Instant::now());
            }
            Shown::Lines(last) => {
                if last.elapsed() >= EVERY {
                    *last = Instant::now();
                    self.line(done, elapsed);
                }
            }
        }
    }

    fn line(&self, done: u64, elapsed: Duration) {
        eprintln!(
            "{}: {done}/{} iterations ({:.0}%), {}",
            self.label,
            self.total,
            100.0 * done as f64 / self.total.max(1) as f64,
            pace(self.total, done, elapsed)
        );
    }
}

/// The rate since the loop started and the time left at that rate.
fn pace(total: u64, done: u64, elapsed: Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-9);
    let left = total.saturating_sub(done) as f64 / rate.max(1e-9);
    format!("{rate:.1}/s, about {} left", human(left))
}

/// Seconds as "42 s", "3 min 20 s", "2 h 5 min".
fn human(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_a_person_says_them() {
        assert_eq!(human(42.4), "42 s");
        assert_eq!(human(200.0), "3 min 20 s");
        assert_eq!(human(7500.0), "2 h 5 min");
    }
}
