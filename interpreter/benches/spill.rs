//! Spill throughput of a server's block store against plain sequential file I/O of the same
//! bytes in the same folder (results: docs/benchmarks.md, "Server spill to disk").
//!
//! Run: `cargo bench -p sial-interpreter --bench spill` (optionally `-- DIR` for the folder;
//! default: the system temp folder).
//!
//! Write: N blocks are stored with a budget of one block, so every store after the first
//! evicts (writes) the previous block: N - 1 writes, scaled to N. Reload: every block is read
//! back in the same order, so every read evicts a clean block (no write) and reads one. Best of
//! 3 passes. Baseline: the same bytes written with `write_all` to one file and read back with
//! `read_exact`, in blocks of the same size.

use sial_interpreter::server::blocks::{BlockStore, Spill};
use sial_interpreter::store::{Block, BlockKey};
use std::io::{Read, Write};
use std::time::Instant;

fn key(b: i32) -> BlockKey {
    BlockKey {
        segments: [b, 1, 1, 1, 1, 1],
        parents: [0; 6],
    }
}

fn main() {
    let dir = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("sial-spill-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench folder");
    println!("folder {}", dir.display());
    println!(
        "{:>9} {:>6} {:>12} {:>12} {:>7} {:>12} {:>12} {:>7}",
        "block",
        "count",
        "spill w MB/s",
        "plain w MB/s",
        "ratio",
        "reload MB/s",
        "plain r MB/s",
        "ratio"
    );
    for kib in [64usize, 256, 1024, 4096, 16384] {
        let n = kib * 1024 / 8;
        let count = ((256usize << 20) / (kib * 1024)).max(8) as i32;
        let total = (count as usize * n * 8) as f64 / 1e6;
        let blocks: Vec<Block> = (0..count)
            .map(|b| Block {
                shape: [n].into(),
                data: (0..n).map(|i| (i as f64) * 0.5 + f64::from(b)).collect(),
            })
            .collect();
        let (mut best_sw, mut best_sr, mut best_pw, mut best_pr) =
            (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..3 {
            let spill = Spill {
                budget: n * 8,
                dir: dir.join("store"),
                disk_limit: None,
            };
            let mut store = BlockStore::new(0, vec![("a".into(), 1)], spill);
            // The store takes the blocks by value (as a put's buffer becomes the block). Every
            // store but the first writes the previous block out: count - 1 blocks written; the
            // time is scaled to `count` blocks.
            let owned = blocks.clone();
            let t = Instant::now();
            for (b, block) in owned.into_iter().enumerate() {
                store
                    .replace(0, key(b as i32), block, 0, &mut |_| Ok(()))
                    .expect("store");
            }
            let spill_w = t.elapsed().as_secs_f64() * f64::from(count) / f64::from(count - 1);
            let t = Instant::now();
            for b in 0..count {
                let got = store.read(0, &key(b)).expect("reload");
                assert_eq!(got.data[1], blocks[b as usize].data[1]);
            }
            let spill_r = t.elapsed().as_secs_f64();
            drop(store);

            let path = dir.join("plain.bin");
            let bytes: Vec<Vec<u8>> = blocks
                .iter()
                .map(|b| b.data.iter().flat_map(|v| v.to_le_bytes()).collect())
                .collect();
            let t = Instant::now();
            let mut f = std::fs::File::create(&path).expect("plain file");
            for b in &bytes {
                f.write_all(b).expect("write");
            }
            drop(f);
            let plain_w = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let mut f = std::fs::File::open(&path).expect("plain file");
            let mut buf = vec![0u8; n * 8];
            for _ in 0..count {
                f.read_exact(&mut buf).expect("read");
            }
            let plain_r = t.elapsed().as_secs_f64();
            let _ = std::fs::remove_file(&path);
            best_sw = best_sw.min(spill_w);
            best_sr = best_sr.min(spill_r);
            best_pw = best_pw.min(plain_w);
            best_pr = best_pr.min(plain_r);
        }
        let (spill_w, spill_r, plain_w, plain_r) = (best_sw, best_sr, best_pw, best_pr);
        println!(
            "{:>6}KiB {:>6} {:>12.0} {:>12.0} {:>7.2} {:>12.0} {:>12.0} {:>7.2}",
            kib,
            count,
            total / spill_w,
            total / plain_w,
            plain_w / spill_w,
            total / spill_r,
            total / plain_r,
            plain_r / spill_r
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
