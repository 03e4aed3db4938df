//! The end-of-run summary (stderr, one screen) and the `--stats` JSON (format `sial-stats/1`,
//! documented in docs/stats-format.md).

use crate::job::Report;
use crate::worker::prefetch::{SiteStats, merge_sites};
use crate::worker::{LineProfile, remote::merge_lines};
use serde_json::{Value, json};

/// Writes `text` and a newline to stderr in one write. Under mpirun the stderr of every rank
/// reaches the user through the launcher, and `eprintln!` writes each formatted piece on its own,
/// so a line of one rank could be cut by a line of another.
pub fn say(text: &str) {
    use std::io::Write;
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The summary printed at the end of a run.
pub fn summary(r: &Report) -> String {
    let wall = r.wall.as_secs_f64();
    let servers = if r.single_process {
        "no server ranks (the worker holds the arrays)".to_string()
    } else {
        format!(
            "{} server{}",
            r.servers.len(),
            if r.servers.len() == 1 { "" } else { "s" }
        )
    };
    let mut s = format!(
        "sial: {:.3} s wall, {} worker{}, {servers}\n",
        wall,
        r.workers.len(),
        if r.workers.len() == 1 { "" } else { "s" },
    );
    s.push_str("  worker  compute s  wait-blocks s  barrier s   msgs out    MiB out    MiB in  fetched  cached-hits  evicted\n");
    for (i, w) in r.workers.iter().enumerate() {
        let wait = w.wait_blocks.as_secs_f64();
        let barrier = w.barrier.as_secs_f64();
        s.push_str(&format!(
            "  {:>6}  {:>9.3}  {:>13.3}  {:>9.3}  {:>9}  {:>9.2}  {:>8.2}  {:>7}  {:>11}  {:>7}\n",
            i,
            (wall - wait - barrier).max(0.0),
            wait,
            barrier,
            w.messages_sent,
            mib(w.bytes_sent),
            mib(w.bytes_received),
            w.blocks_fetched,
            w.get_hits,
            w.blocks_evicted,
        ));
    }
    if !r.devices.is_empty() {
        s.push_str(&format!("  devices: {}\n", r.devices));
    }
    if let Some(g) = gpu_figures(r) {
        s.push_str(&format!(
            "  gpu ({}): {} instructions on the device, {} on the CPU; {} uploads ({:.2} MiB), {} downloads ({:.2} MiB); pinned cache hit ratio {:.3}\n",
            g.device,
            g.device_instructions,
            g.host_instructions,
            g.uploads,
            mib(g.upload_bytes),
            g.downloads,
            mib(g.download_bytes),
            g.pinned.hit_ratio(),
        ));
    }
    let (t, _) = prefetch_figures(r);
    if t.reads > 0 || t.requested > 0 {
        s.push_str(&format!(
            "  prefetch: {} requested, {} used, {} wasted; {} reads of fetched blocks, hit ratio {:.3}, waited {:.6} s ({:.1} us per read)\n",
            t.requested,
            t.used,
            t.wasted,
            t.reads,
            t.hit_ratio(),
            t.wait.as_secs_f64(),
            mean_wait(&t) * 1e6,
        ));
    }
    if !r.servers.is_empty() {
        s.push_str("  server     busy s   requests     MiB in    MiB out  peak blocks  peak MiB  disk MiB w/r    spilled/reloaded\n");
        for (i, v) in r.servers.iter().enumerate() {
            s.push_str(&format!(
                "  {:>6}  {:>9.3}  {:>9}  {:>9.2}  {:>9.2}  {:>11}  {:>8.2}  {:>6.1}/{:<6.1}  {:>8}/{:<8}\n",
                i,
                v.busy_seconds,
                v.messages,
                mib(v.bytes_in),
                mib(v.bytes_out),
                v.blocks_held_peak,
                mib(v.bytes_held_peak),
                mib(v.disk.bytes_written),
                mib(v.disk.bytes_read),
                v.disk.blocks_spilled,
                v.disk.blocks_reloaded,
            ));
        }
    }
    s
}

/// Device figures summed over the workers that had a device.
fn gpu_figures(r: &Report) -> Option<crate::device::GpuStats> {
    let mut total: Option<crate::device::GpuStats> = None;
    for g in r.workers.iter().filter_map(|w| w.gpu.as_ref()) {
        match &mut total {
            Some(t) => t.add(g),
            None => total = Some(g.clone()),
        }
    }
    total
}

/// Prefetch figures summed over workers: totals and per site.
fn prefetch_figures(r: &Report) -> (SiteStats, Vec<SiteStats>) {
    let mut sites = Vec::new();
    for w in &r.workers {
        merge_sites(&mut sites, &w.sites);
    }
    let mut total = SiteStats::default();
    for s in &sites {
        total.add(s);
    }
    (total, sites)
}

fn mean_wait(s: &SiteStats) -> f64 {
    if s.reads == 0 {
        0.0
    } else {
        s.wait.as_secs_f64() / s.reads as f64
    }
}

fn program_name(r: &Report, program: u32) -> &str {
    r.programs.get(program as usize).map_or("?", |s| s.as_str())
}

fn site_json(r: &Report, s: &SiteStats) -> Value {
    json!({
        "program": program_name(r, s.program),
        "line": s.line,
        "gets": s.gets,
        "reads": s.reads,
        "waited_reads": s.waited,
        "hit_ratio": s.hit_ratio(),
        "wait_seconds": s.wait.as_secs_f64(),
        "mean_wait_seconds": mean_wait(s),
        "requested": s.requested,
        "used": s.used,
        "wasted": s.wasted,
        "max_depth": s.max_depth,
    })
}

/// `--profile`: per source line, instructions and time summed over workers, with the
/// prefetch figures of the `get` on that line.
pub fn profile(r: &Report) -> String {
    let mut lines: Vec<LineProfile> = Vec::new();
    for w in &r.workers {
        merge_lines(&mut lines, &w.lines);
    }
    let (_, sites) = prefetch_figures(r);
    let total: f64 = lines.iter().map(|l| l.time.as_secs_f64()).sum();
    let mut s = String::from(
        "profile (all workers):\n  program:line        instructions     seconds       %  | get reads  hit ratio  wait s    prefetched  wasted  depth\n",
    );
    for l in &lines {
        let secs = l.time.as_secs_f64();
        let place = format!("{}:{}", program_name(r, l.program), l.line);
        s.push_str(&format!(
            "  {place:<18} {:>13} {:>11.6} {:>7.2}",
            l.instructions,
            secs,
            if total > 0.0 {
                100.0 * secs / total
            } else {
                0.0
            },
        ));
        if let Some(g) = sites
            .iter()
            .find(|g| g.program == l.program && g.line == l.line)
        {
            s.push_str(&format!(
                "  | {:>9}  {:>9.3}  {:>8.6}  {:>10}  {:>6}  {:>5}",
                g.reads,
                g.hit_ratio(),
                g.wait.as_secs_f64(),
                g.requested,
                g.wasted,
                g.max_depth
            ));
        }
        s.push('\n');
    }
    s
}

/// The `--stats` document: per rank and totals.
pub fn stats_json(r: &Report) -> Value {
    let wall = r.wall.as_secs_f64();
    let workers: Vec<Value> = r
        .workers
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let wait = w.wait_blocks.as_secs_f64();
            let barrier = w.barrier.as_secs_f64();
            let t = w.prefetch_totals();
            json!({
                "rank": i,
                "compute_seconds": (wall - wait - barrier).max(0.0),
                "wait_seconds": wait,
                "barrier_seconds": barrier,
                "barriers": w.barriers,
                "messages_sent": w.messages_sent,
                "messages_received": w.messages_received,
                "bytes_sent": w.bytes_sent,
                "bytes_received": w.bytes_received,
                "gets": w.gets,
                "get_hits": w.get_hits,
                "puts": w.puts,
                "put_messages": w.put_messages,
                "blocks_fetched": w.blocks_fetched,
                "blocks_evicted": w.blocks_evicted,
                "blocks_refetched": w.refetched,
                "blocks_kept": w.kept_hits,
                "cache_peak_bytes": w.cache_peak_bytes,
                "prefetch": {
                    "hit_ratio": t.hit_ratio(),
                    "wait_seconds": t.wait.as_secs_f64(),
                    "requested": t.requested,
                    "used": t.used,
                    "wasted": t.wasted,
                },
            })
        })
        .collect();
    let servers: Vec<Value> = r
        .servers
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({
                "rank": i,
                "busy_seconds": v.busy_seconds,
                "requests": v.messages,
                "bytes_received": v.bytes_in,
                "bytes_sent": v.bytes_out,
                "peak_blocks": v.blocks_held_peak,
                "peak_bytes": v.bytes_held_peak,
                "disk": {
                    "peak_memory_bytes": v.disk.peak_memory,
                    "bytes_written": v.disk.bytes_written,
                    "bytes_read": v.disk.bytes_read,
                    "blocks_spilled": v.disk.blocks_spilled,
                    "blocks_reloaded": v.disk.blocks_reloaded,
                },
            })
        })
        .collect();
    let sum =
        |f: &dyn Fn(&crate::worker::WorkerStats) -> u64| -> u64 { r.workers.iter().map(f).sum() };
    let (t, sites) = prefetch_figures(r);
    let gpu = gpu_figures(r).map(|g| {
        json!({
            "device": g.device,
            "devices": r.devices,
            "uploads": g.uploads,
            "upload_bytes": g.upload_bytes,
            "downloads": g.downloads,
            "download_bytes": g.download_bytes,
            "device_instructions": g.device_instructions,
            "host_instructions": g.host_instructions,
            "kernel_launches": g.kernel_launches,
            "evictions": g.evictions,
            "write_backs": g.write_backs,
            "pinned_hits": g.pinned.hits,
            "pinned_misses": g.pinned.misses,
            "pinned_hit_ratio": g.pinned.hit_ratio(),
            "pinned_alloc_seconds": g.pinned.alloc_seconds,
            "pinned_peak_bytes": g.pinned.peak_bytes,
        })
    });
    json!({
        "format": "sial-stats/1",
        "wall_seconds": wall,
        "devices": r.devices,
        "gpu": gpu,
        "workers": workers,
        "servers": servers,
        "prefetch": {
            "hit_ratio": t.hit_ratio(),
            "wait_seconds": t.wait.as_secs_f64(),
            "mean_wait_seconds": mean_wait(&t),
            "gets": t.gets,
            "reads": t.reads,
            "waited_reads": t.waited,
            "requested": t.requested,
            "used": t.used,
            "wasted": t.wasted,
            "sites": sites.iter().map(|s| site_json(r, s)).collect::<Vec<_>>(),
        },
        "totals": {
            "workers": r.workers.len(),
            "servers": r.servers.len(),
            "wait_seconds": r.workers.iter().map(|w| w.wait_blocks.as_secs_f64()).sum::<f64>(),
            "barrier_seconds": r.workers.iter().map(|w| w.barrier.as_secs_f64()).sum::<f64>(),
            "messages": sum(&|w| w.messages_sent + w.messages_received),
            "bytes": sum(&|w| w.bytes_sent + w.bytes_received),
            "blocks_fetched": sum(&|w| w.blocks_fetched),
            "blocks_evicted": sum(&|w| w.blocks_evicted),
        }
    })
}
