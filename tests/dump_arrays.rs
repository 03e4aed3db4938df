//! `--dump-arrays DIR` writes every array as numpy `.npy` files with the values the JSON dump
//! (`--dump`) has: each block of the JSON is found at its place in the whole array, placed by
//! the extents the JSON's own blocks show for each segment; the elements no block covers are
//! zero; an array over a subindex is a folder of one file per block. Programs of `programs/`
//! with every kind of array, in one process and with 2 workers and a server.

mod common;

use common::{Sial, root, scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A `.npy` file as written: its shape and its column-major data.
fn read_npy(path: &Path) -> (Vec<usize>, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "{}", path.display());
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8_lossy(&bytes[10..10 + len]).into_owned();
    assert!(header.contains("'descr': '<f8'") && header.contains("'fortran_order': True"));
    let shape = header
        .split("'shape': (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_default()
        .split(',')
        .filter_map(|e| e.trim().parse().ok())
        .collect();
    let data = bytes[10 + len..]
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    (shape, data)
}

/// Exactly equal: the dump writes the shortest decimal that reads back as the same double, and
/// serde_json reads it back exactly (its `float_roundtrip` feature, which the runtime turns on).
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
}

fn same_all(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(*x, *y))
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect())
        .unwrap_or_default()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

/// Per dimension, the extent of every segment some block of the JSON shows.
fn extents(blocks: &[Value], rank: usize) -> Vec<BTreeMap<i64, usize>> {
    let mut seen = vec![BTreeMap::new(); rank];
    for b in blocks {
        let shape = ints(&b["shape"]);
        let (lower, upper) = match b.get("segments") {
            Some(s) => (ints(s), ints(s)),
            None => (ints(&b["lower"]), ints(&b["upper"])),
        };
        for d in 0..rank {
            if lower[d] == upper[d] {
                seen[d].insert(lower[d], shape[d] as usize);
            }
        }
    }
    seen
}

/// Checks one array's file against its JSON entry; false when the JSON does not show every
/// segment's extent (then only the totals are compared).
fn check_array(file: &Path, entry: &Value, what: &str) -> bool {
    let (shape, data) = read_npy(file);
    if entry["kind"] == "static" {
        assert_eq!(
            shape,
            ints(&entry["shape"])
                .iter()
                .map(|&e| e as usize)
                .collect::<Vec<_>>(),
            "{what}"
        );
        let json = numbers(&entry["data"]);
        let bad = data.iter().zip(&json).position(|(a, b)| !same(*a, *b));
        assert!(
            data.len() == json.len() && bad.is_none(),
            "{what}: {bad:?} {:?}",
            bad.map(|i| (data[i], json[i]))
        );
        return true;
    }
    let blocks = entry["blocks"].as_array().cloned().unwrap_or_default();
    let total: f64 = blocks.iter().flat_map(|b| numbers(&b["data"])).sum();
    let in_file: f64 = data.iter().sum();
    assert!(
        (total - in_file).abs() <= 1e-12 * total.abs().max(1.0),
        "{what}: {total} != {in_file}"
    );
    let rank = shape.len();
    let seen = extents(&blocks, rank);
    let complete = (0..rank).all(|d| {
        let first = seen[d].keys().next().copied().unwrap_or(1);
        seen[d].values().sum::<usize>() == shape[d]
            && seen[d]
                .keys()
                .copied()
                .eq(first..first + seen[d].len() as i64)
    });
    if !complete {
        return false;
    }
    let start = |d: usize, s: i64| -> usize { seen[d].range(..s).map(|(_, e)| e).sum() };
    let mut covered = vec![false; data.len()];
    for b in &blocks {
        let lower = ints(b.get("segments").unwrap_or(&b["lower"]));
        let bshape: Vec<usize> = ints(&b["shape"]).iter().map(|&e| e as usize).collect();
        let values = numbers(&b["data"]);
        for (i, v) in values.iter().enumerate() {
            // Column-major index i of the block to its element of the whole array.
            let (mut rest, mut at, mut stride) = (i, 0, 1);
            for d in 0..rank {
                at += (start(d, lower[d]) + rest % bshape[d]) * stride;
                rest /= bshape[d];
                stride *= shape[d];
            }
            assert!(same(data[at], *v), "{what}: block {lower:?} element {i}");
            covered[at] = true;
        }
    }
    for (at, c) in covered.iter().enumerate() {
        assert!(
            *c || data[at] == 0.0,
            "{what}: element {at} is in no block but not 0"
        );
    }
    true
}

#[test]
fn arrays_as_npy_hold_the_dump_values() {
    let programs = [
        "programs/static_arrays.sial",
        "programs/distributed_put_get.sial",
        "programs/served_prepare_request.sial",
        "programs/contiguous_local.sial",
        "programs/subindex_slice.sial",
        "programs/block_fill.sial",
        "programs/specials_general.sial",
        "programs/mp2_energy.sial",
    ];
    let mut placed = 0;
    for ranks in [
        ["--workers", "1", "--servers", "0"],
        ["--workers", "2", "--servers", "1"],
    ] {
        for program in programs {
            let dir = scratch(&format!("npy-{}", ranks[1]));
            let out = Sial::new()
                .args(["run", program, "-q"])
                .args(ranks)
                .arg("--dump")
                .arg(dir.join("d.json"))
                .arg("--dump-arrays")
                .arg(dir.join("arrays"))
                .current_dir(root())
                .run();
            assert!(out.ok, "{program}: {}", out.stderr);
            let dump = common::read_json(&dir.join("d.json"));
            for p in dump["programs"].as_array().cloned().unwrap_or_default() {
                let name = p["program"].as_str().unwrap_or_default().to_string();
                let folder = dir.join("arrays").join(&name);
                let values = common::read_json(&folder.join("values.json"));
                assert_eq!(values["scalars"], p["scalars"], "{program}");
                assert_eq!(values["ints"], p["ints"], "{program}");
                let split: Vec<String> = values["split"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                for (array, entry) in p["arrays"].as_object().cloned().unwrap_or_default() {
                    let what = format!("{program} {ranks:?} {array}");
                    if split.contains(&array) {
                        for b in entry["blocks"].as_array().cloned().unwrap_or_default() {
                            let segs: Vec<String> =
                                ints(&b["segments"]).iter().map(|s| s.to_string()).collect();
                            let file = folder.join(&array).join(format!("s{}.npy", segs.join("-")));
                            let (shape, data) = read_npy(&file);
                            assert_eq!(
                                shape,
                                ints(&b["shape"])
                                    .iter()
                                    .map(|&e| e as usize)
                                    .collect::<Vec<_>>(),
                                "{what}"
                            );
                            assert!(same_all(&data, &numbers(&b["data"])), "{what}");
                        }
                        continue;
                    }
                    if check_array(&folder.join(format!("{array}.npy")), &entry, &what) {
                        placed += 1;
                    }
                }
            }
        }
    }
    assert!(
        placed >= 20,
        "only {placed} arrays could be checked element by element"
    );
}

#[test]
fn an_arrays_folder_that_cannot_be_made_is_an_error_before_the_run() {
    let dir = scratch("npy-bad");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").expect("file");
    let out = Sial::new()
        .args(["run", "programs/static_arrays.sial", "--dump-arrays"])
        .arg(&file)
        .current_dir(root())
        .run();
    assert!(!out.ok);
    assert!(
        out.stderr.contains("--dump-arrays") && out.stderr.contains("is a file"),
        "{}",
        out.stderr
    );
}

/// A program folder that cannot be made (a file stands there): a clear error naming it, and
/// the JSON dump of the same run complete.
#[test]
fn an_array_folder_that_cannot_be_written_leaves_the_json_dump_whole() {
    let dir = scratch("npy-blocked");
    let arrays = dir.join("arrays");
    std::fs::create_dir_all(&arrays).expect("dir");
    std::fs::write(arrays.join("static_arrays"), "in the way").expect("file");
    let dump = dir.join("d.json");
    let out = Sial::new()
        .args(["run", "programs/static_arrays.sial", "--dump"])
        .arg(&dump)
        .arg("--dump-arrays")
        .arg(&arrays)
        .current_dir(root())
        .run();
    assert!(!out.ok);
    assert!(
        out.stderr.contains(&format!(
            "cannot write {}",
            arrays.join("static_arrays").display()
        )),
        "{}",
        out.stderr
    );
    let json = common::read_json(&dump);
    assert_eq!(json["programs"][0]["program"], "static_arrays", "{json}");
    let partial = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".partial"));
    assert!(!partial, "a .partial file was left");
}
