//! `--dump-arrays DIR`: every array of every program as a numpy `.npy` file, for the tools
//! that read numpy (docs/dump-format.md, "Arrays as .npy files").
//!
//! Program `NAME` gets the folder `DIR/NAME` (`NAME.2`, `NAME.3`, … when a job runs it
//! again) with `ARRAY.npy` per array (Fortran order: SIAL's column-major data, numpy's axes
//! in SIAL's dimension order, `<f8`) and `values.json` with the scalars and ints. A static
//! array is written whole; the blocks of the other kinds are placed into the whole array on
//! disk one at a time (elements no block covers are 0), so memory holds one block, or a batch
//! of the servers' blocks, whatever the array's size. An array over a subindex has no single
//! whole form here: its blocks go to `ARRAY/` one file each (`s1-2-3.npy` for segments 1, 2,
//! 3), and `values.json` lists it under `"split"`.

use crate::error::{Result, RuntimeError};
use crate::layout::Layout;
use crate::store::{Block, BlockKey, Storage, block_bytes};
use crate::worker::FinalState;
use sial_bytecode::{IndexKind, IndexSlot, Program};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The folder of a job's arrays.
pub struct ArrayDir {
    dir: PathBuf,
    /// Programs written so far, by name (a program run twice gets a second folder).
    seen: BTreeMap<String, usize>,
}

impl ArrayDir {
    /// Creates the folder (and its parents) if needed.
    pub fn create(dir: &Path) -> Result<ArrayDir> {
        std::fs::create_dir_all(dir).map_err(|e| cannot(dir, e))?;
        Ok(ArrayDir {
            dir: dir.to_path_buf(),
            seen: BTreeMap::new(),
        })
    }

    /// Writes one finished program's arrays and values.
    pub fn program(&mut self, state: &FinalState<'_>) -> Result<()> {
        let p = state.program;
        let n = self.seen.entry(p.name.clone()).or_insert(0);
        *n += 1;
        let folder = match *n {
            1 => self.dir.join(&p.name),
            k => self.dir.join(format!("{}.{k}", p.name)),
        };
        std::fs::create_dir_all(&folder).map_err(|e| cannot(&folder, e))?;
        let mut split = Vec::new();
        for (a, storage) in state.storage.iter().enumerate() {
            let name = &p.arrays[a].name;
            let whole = folder.join(format!("{name}.npy"));
            match storage {
                Storage::Unused => {}
                Storage::Whole(b) => write_npy(&whole, &b.shape, &b.data)?,
                _ if !assembled(state.layout, p, a) => {
                    split.push(name.clone());
                    write_split(&folder.join(name), state, a)?;
                }
                _ => write_whole(&whole, state, a)?,
            }
        }
        let values = serde_json::json!({
            "program": p.name,
            "scalars": p.scalars.iter().zip(state.scalars)
                .map(|(s, v)| (s.name.clone(), serde_json::json!(v)))
                .collect::<serde_json::Map<_, _>>(),
            "ints": p.ints.iter().zip(state.ints)
                .map(|(s, v)| (s.name.clone(), serde_json::json!(v)))
                .collect::<serde_json::Map<_, _>>(),
            "split": split,
        });
        let path = folder.join("values.json");
        let text = serde_json::to_string_pretty(&values).unwrap_or_default() + "\n";
        let partial = super::partial_name(&path);
        std::fs::write(&partial, text).map_err(|e| cannot(&path, e))?;
        std::fs::rename(&partial, &path).map_err(|e| cannot(&path, e))
    }
}

fn cannot(path: &Path, e: std::io::Error) -> RuntimeError {
    RuntimeError::new(format!("cannot write {}: {e}", path.display()))
}

/// Whether array `a`'s blocks have places in one whole array: no dimension is a subindex.
fn assembled(layout: &Layout, p: &Program, a: usize) -> bool {
    p.arrays[a]
        .dims
        .iter()
        .all(|&d| layout.range(d).kind != IndexKind::Sub)
}

/// A block's place in the whole array: where it starts in each dimension.
type Origin = Vec<usize>;

/// Every block (or contiguous region) of array `a` with where it starts, given to `each`.
fn for_each_block(
    state: &FinalState<'_>,
    a: usize,
    each: &mut dyn FnMut(&BlockKey, Origin, &Block) -> Result<()>,
) -> Result<()> {
    let dims = &state.program.arrays[a].dims;
    let origin = |segments: &[i32]| -> Origin {
        dims.iter()
            .zip(segments)
            .map(|(&d, &s)| start(state.layout, d, s))
            .collect()
    };
    match &state.storage[a] {
        Storage::Unused | Storage::Whole(_) => Ok(()),
        Storage::Blocks(map) => {
            let mut keys: Vec<_> = map.keys().collect();
            keys.sort();
            for k in keys {
                if let Some(b) = map.get(k) {
                    each(k, origin(&k.segments[..dims.len()]), b)?;
                }
            }
            Ok(())
        }
        Storage::Remote => {
            state.remote_blocks(a, &mut |k, b| each(k, origin(&k.segments[..dims.len()]), b))
        }
        Storage::Regions(regions) => {
            for g in regions {
                let key = BlockKey {
                    segments: std::array::from_fn(|i| g.lower.get(i).copied().unwrap_or(0)),
                    parents: [0; 6],
                };
                each(&key, origin(&g.lower), &g.block)?;
            }
            Ok(())
        }
    }
}

/// Where segment `s` of index `d` starts in its declared range.
fn start(layout: &Layout, d: IndexSlot, s: i32) -> usize {
    layout.offset(d, layout.range(d).lo, s)
}

/// Array `a` assembled on disk from its blocks.
fn write_whole(path: &Path, state: &FinalState<'_>, a: usize) -> Result<()> {
    let shape: Vec<usize> = state.program.arrays[a]
        .dims
        .iter()
        .map(|&d| state.layout.full_extent(d))
        .collect();
    let bytes = block_bytes(&shape).ok_or_else(|| {
        RuntimeError::new(format!(
            "{}: the array is too large for one file",
            path.display()
        ))
    })?;
    let fail = |e: std::io::Error| cannot(path, e);
    let partial = super::partial_name(path);
    let mut file = File::create(&partial).map_err(fail)?;
    let head = header(&shape);
    file.write_all(&head).map_err(fail)?;
    // The elements no block covers read as zeros (a sparse file until written).
    file.set_len((head.len() + bytes) as u64).map_err(fail)?;
    let base = head.len() as u64;
    for_each_block(state, a, &mut |_, origin, b| {
        place(&file, base, &shape, &origin, b).map_err(fail)
    })?;
    std::fs::rename(&partial, path).map_err(fail)
}

/// Writes block `b` at `origin` of a column-major array of `shape` stored from `base`: one
/// positioned write per run of its first dimension.
fn place(
    file: &File,
    base: u64,
    shape: &[usize],
    origin: &[usize],
    b: &Block,
) -> std::io::Result<()> {
    let run = b.shape.first().copied().unwrap_or(1).max(1);
    let mut bytes = Vec::with_capacity(run * 8);
    for (c, column) in b.data.chunks(run).enumerate() {
        // The column's position: block index c spread over dimensions 1.., plus the origin.
        let mut rest = c;
        let mut at = origin.first().copied().unwrap_or(0);
        let mut stride = shape.first().copied().unwrap_or(1);
        for d in 1..shape.len() {
            let extent = b.shape.get(d).copied().unwrap_or(1).max(1);
            at += (origin[d] + rest % extent) * stride;
            rest /= extent;
            stride *= shape[d];
        }
        bytes.clear();
        bytes.extend(column.iter().flat_map(|v| v.to_le_bytes()));
        file.write_all_at(&bytes, base + at as u64 * 8)?;
    }
    Ok(())
}

/// Array `a` as one file per block in `folder`.
fn write_split(folder: &Path, state: &FinalState<'_>, a: usize) -> Result<()> {
    std::fs::create_dir_all(folder).map_err(|e| cannot(folder, e))?;
    let rank = state.program.arrays[a].dims.len();
    for_each_block(state, a, &mut |key, _, b| {
        let name: Vec<String> = key
            .rank_segments(rank)
            .iter()
            .map(|s| s.to_string())
            .collect();
        write_npy(
            &folder.join(format!("s{}.npy", name.join("-"))),
            &b.shape,
            &b.data,
        )
    })
}

fn write_npy(path: &Path, shape: &[usize], data: &[f64]) -> Result<()> {
    let fail = |e: std::io::Error| cannot(path, e);
    let partial = super::partial_name(path);
    let mut out = std::io::BufWriter::new(File::create(&partial).map_err(fail)?);
    out.write_all(&header(shape)).map_err(fail)?;
    for chunk in data.chunks(1 << 16) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
        out.write_all(&bytes).map_err(fail)?;
    }
    out.flush().map_err(fail)?;
    drop(out);
    std::fs::rename(&partial, path).map_err(fail)
}

/// The `.npy` 1.0 header of a Fortran-order `<f8` array: magic, version, length, the dict,
/// padded with spaces to a multiple of 64 bytes and ended by a newline.
fn header(shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|e| e.to_string()).collect();
    let tuple = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '<f8', 'fortran_order': True, 'shape': {tuple}, }}");
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_numpy_1_0_and_aligned() {
        let h = header(&[3, 4]);
        assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(h.len() % 64, 0);
        let text = String::from_utf8_lossy(&h[10..]);
        assert!(text.starts_with("{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4), }"));
        assert!(text.ends_with('\n'));
        assert!(String::from_utf8_lossy(&header(&[5])).contains("(5,)"));
    }
}
