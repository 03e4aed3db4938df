//! `--dump FILE.json`: the final state of every program of a job, in the stable format
//! `sial-dump/1` (documented in docs/dump-format.md).

use crate::store::Storage;
use crate::worker::FinalState;
use serde_json::{Map, Value, json};
use sial_bytecode::ArrayKind;

/// The JSON object of one finished program.
pub fn program(state: &FinalState<'_>) -> Value {
    let p = state.program;
    let scalars: Map<String, Value> = p
        .scalars
        .iter()
        .zip(state.scalars)
        .map(|(s, v)| (s.name.clone(), json!(v)))
        .collect();
    let ints: Map<String, Value> = p
        .ints
        .iter()
        .zip(state.ints)
        .map(|(s, v)| (s.name.clone(), json!(v)))
        .collect();
    let mut arrays = Map::new();
    for (a, storage) in p.arrays.iter().zip(state.storage) {
        let kind = match a.kind {
            ArrayKind::Static => "static",
            ArrayKind::Temp => "temp",
            ArrayKind::Local => "local",
            ArrayKind::ContiguousLocal => "contiguous_local",
            ArrayKind::Distributed => "distributed",
            ArrayKind::Served => "served",
        };
        let entry = match storage {
            Storage::Unused | Storage::Remote => continue,
            Storage::Whole(b) => json!({ "kind": kind, "shape": b.shape, "data": b.data }),
            Storage::Blocks(map) => {
                let mut keys: Vec<_> = map.keys().collect();
                keys.sort();
                let rank = a.dims.len();
                let blocks: Vec<Value> = keys
                    .into_iter()
                    .filter_map(|k| {
                        let b = map.get(k)?;
                        Some(json!({ "segments": k.rank_segments(rank), "shape": b.shape, "data": b.data }))
                    })
                    .collect();
                json!({ "kind": kind, "blocks": blocks })
            }
            Storage::Regions(regions) => {
                let mut regions: Vec<_> = regions.iter().collect();
                regions.sort_by(|x, y| x.lower.cmp(&y.lower));
                let blocks: Vec<Value> = regions
                    .into_iter()
                    .map(|g| json!({ "lower": g.lower, "upper": g.upper, "shape": g.block.shape, "data": g.block.data }))
                    .collect();
                json!({ "kind": kind, "blocks": blocks })
            }
        };
        arrays.insert(a.name.clone(), entry);
    }
    json!({ "program": p.name, "scalars": scalars, "ints": ints, "arrays": arrays })
}

/// The whole dump of a job.
pub fn job(programs: Vec<Value>) -> Value {
    json!({ "format": "sial-dump/1", "programs": programs })
}
