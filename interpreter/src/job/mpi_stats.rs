//! A worker's figures for the gather to worker 0 at the end of a job: encoded with postcard,
//! carried in the `f64` vectors the workers' gather moves (8 bytes each, after the length).

use crate::worker::WorkerStats;

/// A worker's figures as numbers for the gather to worker 0.
pub(super) fn stats_out(s: &WorkerStats) -> Vec<f64> {
    // Encoding plain figures into a Vec cannot fail.
    let bytes = postcard::to_stdvec(s).unwrap_or_default();
    let mut out = Vec::with_capacity(1 + bytes.len().div_ceil(8));
    out.push(f64::from_bits(bytes.len() as u64));
    out.extend(bytes.chunks(8).map(|c| {
        let mut word = [0u8; 8];
        word[..c.len()].copy_from_slice(c);
        f64::from_bits(u64::from_le_bytes(word))
    }));
    out
}

/// The figures [`stats_out`] sent, or none where the numbers are not such figures.
pub(super) fn stats_in(v: &[f64]) -> WorkerStats {
    let Some((len, words)) = v.split_first() else {
        return WorkerStats::default();
    };
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|w| w.to_bits().to_le_bytes())
        .collect();
    let len = usize::try_from(len.to_bits()).unwrap_or(usize::MAX);
    bytes
        .get(..len)
        .and_then(|b| postcard::from_bytes(b).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::LineProfile;
    use crate::worker::prefetch::SiteStats;
    use std::time::Duration;

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
