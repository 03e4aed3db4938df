//! A worker's figures as numbers, for the gather to worker 0 at the end of a job.

use super::*;

/// A worker's figures as numbers for the gather to worker 0.
pub(super) fn stats_out(s: &WorkerStats) -> Vec<f64> {
    let WorkerStats {
        wait_blocks,
        barrier,
        messages_sent,
        messages_received,
        bytes_sent,
        bytes_received,
        gets,
        get_hits,
        puts,
        blocks_fetched,
        blocks_evicted,
        refetched,
        cache_peak_bytes,
        barriers,
        ref sites,
        ref lines,
        ref gpu,
    } = *s;
    let mut v = vec![wait_blocks.as_secs_f64(), barrier.as_secs_f64()];
    // Counts stay exact as f64 below 2^53.
    v.extend(
        [
            messages_sent,
            messages_received,
            bytes_sent,
            bytes_received,
            gets,
            get_hits,
            puts,
            blocks_fetched,
            blocks_evicted,
            refetched,
            cache_peak_bytes,
            barriers,
        ]
        .map(|x| x as f64),
    );
    v.push(sites.len() as f64);
    for t in sites {
        v.extend([
            t.program as f64,
            t.line as f64,
            t.gets as f64,
            t.reads as f64,
            t.waited as f64,
            t.wait.as_secs_f64(),
            t.requested as f64,
            t.used as f64,
            t.wasted as f64,
            t.max_depth as f64,
        ]);
    }
    v.push(lines.len() as f64);
    for l in lines {
        v.extend([
            l.program as f64,
            l.line as f64,
            l.instructions as f64,
            l.time.as_secs_f64(),
        ]);
    }
    // The device figures (the device's name stays with its worker).
    match gpu {
        None => v.push(0.0),
        Some(g) => {
            v.push(1.0);
            v.extend(
                [
                    g.uploads,
                    g.upload_bytes,
                    g.downloads,
                    g.download_bytes,
                    g.device_instructions,
                    g.host_instructions,
                    g.kernel_launches,
                    g.evictions,
                    g.write_backs,
                    g.pinned.hits,
                    g.pinned.misses,
                    g.pinned.peak_bytes as u64,
                ]
                .map(|x| x as f64),
            );
            v.push(g.pinned.alloc_seconds);
        }
    }
    v
}

pub(super) fn stats_in(v: &[f64]) -> WorkerStats {
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    let n = |i: usize| at(i) as u64;
    let secs = |i: usize| Duration::try_from_secs_f64(at(i)).unwrap_or_default();
    let at_lines = 15 + 10 * n(14) as usize;
    let at_gpu = at_lines + 1 + 4 * n(at_lines) as usize;
    WorkerStats {
        wait_blocks: secs(0),
        barrier: secs(1),
        messages_sent: n(2),
        messages_received: n(3),
        bytes_sent: n(4),
        bytes_received: n(5),
        gets: n(6),
        get_hits: n(7),
        puts: n(8),
        blocks_fetched: n(9),
        blocks_evicted: n(10),
        refetched: n(11),
        cache_peak_bytes: n(12),
        barriers: n(13),
        sites: (0..n(14) as usize)
            .map(|k| {
                let b = 15 + 10 * k;
                SiteStats {
                    program: n(b) as u32,
                    line: n(b + 1) as u32,
                    gets: n(b + 2),
                    reads: n(b + 3),
                    waited: n(b + 4),
                    wait: secs(b + 5),
                    requested: n(b + 6),
                    used: n(b + 7),
                    wasted: n(b + 8),
                    max_depth: n(b + 9),
                }
            })
            .collect(),
        lines: {
            (0..n(at_lines) as usize)
                .map(|k| {
                    let b = at_lines + 1 + 4 * k;
                    LineProfile {
                        program: n(b) as u32,
                        line: n(b + 1) as u32,
                        instructions: n(b + 2),
                        time: secs(b + 3),
                    }
                })
                .collect()
        },
        gpu: {
            (n(at_gpu) == 1).then(|| {
                let g = |k: usize| n(at_gpu + 1 + k);
                let mut s = crate::device::GpuStats {
                    device: "GPU".into(),
                    uploads: g(0),
                    upload_bytes: g(1),
                    downloads: g(2),
                    download_bytes: g(3),
                    device_instructions: g(4),
                    host_instructions: g(5),
                    kernel_launches: g(6),
                    evictions: g(7),
                    write_backs: g(8),
                    ..Default::default()
                };
                s.pinned.hits = g(9);
                s.pinned.misses = g(10);
                s.pinned.peak_bytes = g(11) as usize;
                s.pinned.alloc_seconds = at(at_gpu + 13);
                s.pinned_hit_ratio = s.pinned.hit_ratio();
                s
            })
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_figures_survive_the_gather() {
        let s = WorkerStats {
            wait_blocks: Duration::from_millis(1500),
            gets: 7,
            barriers: 3,
            cache_peak_bytes: 1 << 40,
            sites: vec![SiteStats {
                program: 1,
                line: 17,
                gets: 9,
                reads: 8,
                waited: 2,
                wait: Duration::from_millis(250),
                requested: 7,
                used: 6,
                wasted: 1,
                max_depth: 4,
            }],
            lines: vec![LineProfile {
                program: 0,
                line: 3,
                instructions: 40,
                time: Duration::from_millis(125),
            }],
            gpu: Some(crate::device::GpuStats {
                device: "GPU".into(),
                uploads: 3,
                upload_bytes: 24,
                downloads: 1,
                download_bytes: 8,
                device_instructions: 10,
                host_instructions: 2,
                kernel_launches: 11,
                evictions: 1,
                write_backs: 1,
                pinned: crate::device::PinnedStats {
                    hits: 9,
                    misses: 1,
                    alloc_seconds: 0.5,
                    peak_bytes: 4096,
                    ..Default::default()
                },
                pinned_hit_ratio: 0.9,
            }),
            ..WorkerStats::default()
        };
        let back = stats_in(&stats_out(&s));
        assert_eq!(format!("{back:?}"), format!("{s:?}"));
    }
}
