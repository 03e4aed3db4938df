//! `--dump FILE.json`: the final state of every program of a job, in the stable format
//! `sial-dump/1` (documented in docs/dump-format.md).
//!
//! Streamed: each block is written as it is read (the servers' blocks a bounded batch at a
//! time), so the memory a dump needs is that of a batch of blocks, whatever the arrays' sizes.
//! After each program the file is a complete document: the closing brackets are written, and
//! the next program is written over them. While a program is being written the file has a
//! temporary name (`FILE.partial`), so a file under the dump's name is always complete.

pub mod arrays;

use crate::error::{Result, RuntimeError};
use crate::store::{Block, BlockKey, Storage};
use crate::worker::FinalState;
use serde::Serialize;
use sial_bytecode::ArrayKind;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// What closes the document after the last program.
const TRAILER: &[u8] = b"\n]}\n";

/// A dump being written, one program at a time.
pub struct DumpFile {
    file: File,
    path: PathBuf,
    /// The name while a program is being written.
    partial: PathBuf,
    /// Where the trailer starts: the next program is written from here.
    end: u64,
    programs: usize,
}

impl DumpFile {
    /// Creates (or empties) the file and writes an empty dump into it.
    pub fn create(path: &Path) -> Result<DumpFile> {
        let fail = |e: std::io::Error| cannot_write(path, e);
        let partial = partial_name(path);
        let mut file = File::create(&partial).map_err(fail)?;
        let head = b"{\"format\": \"sial-dump/1\", \"programs\": [";
        file.write_all(head).map_err(fail)?;
        file.write_all(TRAILER).map_err(fail)?;
        std::fs::rename(&partial, path).map_err(fail)?;
        Ok(DumpFile {
            file,
            path: path.to_path_buf(),
            partial,
            end: head.len() as u64,
            programs: 0,
        })
    }

    /// Appends one finished program; the file is a complete dump again when this returns.
    pub fn program(&mut self, state: &FinalState<'_>) -> Result<()> {
        let written = self.write_program(state);
        written.map_err(|e| match e {
            Failure::Io(e) => cannot_write(&self.path, e),
            Failure::Runtime(e) => e,
        })
    }

    fn write_program(&mut self, state: &FinalState<'_>) -> std::result::Result<(), Failure> {
        std::fs::rename(&self.path, &self.partial)?;
        self.file.seek(SeekFrom::Start(self.end))?;
        let mut out = BufWriter::with_capacity(1 << 20, &mut self.file);
        if self.programs > 0 {
            out.write_all(b",")?;
        }
        program(&mut out, state)?;
        out.flush()?;
        drop(out);
        self.end = self.file.stream_position()?;
        self.file.write_all(TRAILER)?;
        self.file.set_len(self.end + TRAILER.len() as u64)?;
        self.file.flush()?;
        std::fs::rename(&self.partial, &self.path)?;
        self.programs += 1;
        Ok(())
    }
}

/// `FILE.partial`: where an output is written before it is complete.
pub(crate) fn partial_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".partial");
    PathBuf::from(name)
}

fn cannot_write(path: &Path, e: std::io::Error) -> RuntimeError {
    RuntimeError::new(format!("cannot write the dump {}: {e}", path.display()))
}

/// Why writing a program stopped: the file, or reading the servers' blocks.
enum Failure {
    Io(std::io::Error),
    Runtime(RuntimeError),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::Io(e)
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Failure {
        Failure::Io(e.into())
    }
}

type Written = std::result::Result<(), Failure>;

fn json(out: &mut dyn Write, value: &impl Serialize) -> Written {
    serde_json::to_writer(out, value)?;
    Ok(())
}

/// One program's object.
fn program(out: &mut dyn Write, state: &FinalState<'_>) -> Written {
    let p = state.program;
    write!(out, "\n{{\"program\": ")?;
    json(out, &p.name)?;
    out.write_all(b", \"scalars\": {")?;
    for (i, (s, v)) in p.scalars.iter().zip(state.scalars).enumerate() {
        named(out, i, &s.name)?;
        json(out, v)?;
    }
    out.write_all(b"}, \"ints\": {")?;
    for (i, (s, v)) in p.ints.iter().zip(state.ints).enumerate() {
        named(out, i, &s.name)?;
        json(out, v)?;
    }
    out.write_all(b"}, \"arrays\": {")?;
    let mut n = 0;
    for (a, (array, storage)) in p.arrays.iter().zip(state.storage).enumerate() {
        if matches!(storage, Storage::Unused) {
            continue;
        }
        out.write_all(if n == 0 { b"\n" } else { b",\n" })?;
        n += 1;
        json(out, &array.name)?;
        write!(out, ": {{\"kind\": \"{}\"", kind(array.kind))?;
        let rank = array.dims.len();
        match storage {
            Storage::Unused => {}
            Storage::Whole(b) => {
                out.write_all(b", \"shape\": ")?;
                json(out, &b.shape)?;
                out.write_all(b", \"data\": ")?;
                json(out, &b.data)?;
            }
            Storage::Blocks(map) => {
                let mut keys: Vec<_> = map.keys().collect();
                keys.sort();
                out.write_all(b", \"blocks\": [")?;
                for (i, k) in keys.into_iter().enumerate() {
                    if let Some(b) = map.get(k) {
                        block(out, i, k, rank, b)?;
                    }
                }
                out.write_all(b"]")?;
            }
            Storage::Remote => {
                out.write_all(b", \"blocks\": [")?;
                let mut i = 0;
                let mut failed = None;
                state
                    .remote_blocks(a, &mut |k, b| {
                        if let Err(e) = block(out, i, k, rank, b) {
                            failed = Some(e);
                            return Err(RuntimeError::new("the dump could not be written"));
                        }
                        i += 1;
                        Ok(())
                    })
                    .map_err(|e| failed.take().unwrap_or(Failure::Runtime(e)))?;
                out.write_all(b"]")?;
            }
            Storage::Regions(regions) => {
                let mut regions: Vec<_> = regions.iter().collect();
                regions.sort_by(|x, y| x.lower.cmp(&y.lower));
                out.write_all(b", \"blocks\": [")?;
                for (i, g) in regions.into_iter().enumerate() {
                    out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
                    out.write_all(b"{\"lower\": ")?;
                    json(out, &g.lower)?;
                    out.write_all(b", \"upper\": ")?;
                    json(out, &g.upper)?;
                    out.write_all(b", \"shape\": ")?;
                    json(out, &g.block.shape)?;
                    out.write_all(b", \"data\": ")?;
                    json(out, &g.block.data)?;
                    out.write_all(b"}")?;
                }
                out.write_all(b"]")?;
            }
        }
        out.write_all(b"}")?;
    }
    out.write_all(b"}}")?;
    Ok(())
}

/// `"name": ` of the `i`-th member of an object.
fn named(out: &mut dyn Write, i: usize, name: &str) -> Written {
    if i > 0 {
        out.write_all(b", ")?;
    }
    json(out, &name)?;
    out.write_all(b": ")?;
    Ok(())
}

/// The `i`-th block of a list.
fn block(out: &mut dyn Write, i: usize, key: &BlockKey, rank: usize, b: &Block) -> Written {
    out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
    out.write_all(b"{\"segments\": ")?;
    json(out, &key.rank_segments(rank))?;
    out.write_all(b", \"shape\": ")?;
    json(out, &b.shape)?;
    out.write_all(b", \"data\": ")?;
    json(out, &b.data)?;
    out.write_all(b"}")?;
    Ok(())
}

fn kind(kind: ArrayKind) -> &'static str {
    match kind {
        ArrayKind::Static => "static",
        ArrayKind::Temp => "temp",
        ArrayKind::Local => "local",
        ArrayKind::ContiguousLocal => "contiguous_local",
        ArrayKind::Distributed => "distributed",
        ArrayKind::Served => "served",
    }
}
