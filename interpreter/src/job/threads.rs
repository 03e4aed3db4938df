//! The thread launcher: every rank is a thread of this process, linked by the `local`
//! transport (`--workers W --servers S`). A failing rank (an error or a panic) raises the
//! shared abort flag, which every waiting rank sees, and the job ends with its error.

use super::{Figures, Ranks, Transport, add_servers, panic_text};
use crate::cluster::message::ServerStats;
use crate::cluster::{Abort, ServerLink, WorkerLink, local};
use crate::error::{Result, RuntimeError};
use crate::worker::{Done, WorkerStats};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

pub(super) struct Threads;

impl Transport for Threads {
    fn launch(
        &mut self,
        ranks: &Ranks<'_>,
        out: &mut (dyn Write + Send),
        done: &mut Done<'_>,
    ) -> Result<Option<Figures>> {
        let options = ranks.options();
        let abort = Arc::new(Abort::default());
        let (mut worker_links, server_links) = local::fabric(
            options.workers,
            options.servers,
            Arc::clone(&abort),
            options.simulated_latency,
        );
        let mut figures = Figures {
            workers: vec![WorkerStats::default(); options.workers],
            servers: vec![ServerStats::default(); options.servers],
        };
        let mut link0 = worker_links.remove(0);
        let abort = &abort;
        std::thread::scope(|scope| {
            let mut servers = Vec::new();
            for mut link in server_links {
                let rank = link.rank();
                servers.push(spawn(scope, move || {
                    guarded(abort, &format!("server {rank}"), || {
                        if ranks.server_dies(rank) {
                            let _ = link.recv();
                            panic!("injected fault");
                        }
                        ranks.serve(&mut link)
                    })
                }));
            }
            let mut workers = Vec::new();
            for mut link in worker_links {
                let rank = link.rank();
                workers.push(spawn(scope, move || {
                    guarded(abort, &format!("worker {rank}"), || {
                        if ranks.worker_dies(rank) {
                            panic!("injected fault");
                        }
                        let mut out = std::io::stdout();
                        Ok(ranks.work(&mut link, &mut out, &mut |_| Ok(()))?.0)
                    })
                }));
            }
            guarded(abort, "worker 0", || {
                if ranks.worker_dies(0) {
                    panic!("injected fault");
                }
                let (stats, servers) = ranks.work(&mut link0, out, done)?;
                figures.workers[0] = stats;
                add_servers(&mut figures.servers, &servers);
                Ok(())
            });
            for (i, w) in workers.into_iter().enumerate() {
                if let Ok(Some(s)) = w.join() {
                    figures.workers[i + 1] = s;
                }
            }
            for s in servers {
                let _ = s.join();
            }
        });
        match abort.error() {
            Some(e) => Err(e),
            None => Ok(Some(figures)),
        }
    }
}

/// Runs `body` as rank `who`; any failure (error or panic) stops the whole job.
fn guarded<T>(abort: &Abort, who: &str, body: impl FnOnce() -> Result<T>) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            abort.fail(e);
            None
        }
        Err(p) => {
            abort.fail(RuntimeError::new(format!(
                "{who} died: {} (the job was stopped)",
                panic_text(p.as_ref())
            )));
            None
        }
    }
}

fn spawn<'s, T: Send + 's>(
    scope: &'s std::thread::Scope<'s, '_>,
    body: impl FnOnce() -> T + Send + 's,
) -> std::thread::ScopedJoinHandle<'s, T> {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn_scoped(scope, body)
        .unwrap_or_else(|e| panic!("cannot start a rank thread: {e}"))
}
