//! Restart (SIAL-SPEC §7.11): after every program of a job of several programs, worker 0 writes
//! how many programs are complete with its saved scalars and static arrays, and each server
//! writes the arrays it saved. `sial run --restart JOBID` reads them back and starts at the
//! first program not completed. Files live in `<work dir>/sial-jobs/JOBID/`; a job that
//! completes removes its folder. Each file is written to a temporary name and renamed, so a
//! crash never leaves a half-written checkpoint.

use crate::error::{Result, RuntimeError};
use crate::persist::Persisted;
use crate::server::Saved;
use crate::store::{Block, BlockKey};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const WORKER_MAGIC: &[u8; 8] = b"SIALWCK1";
const SERVER_MAGIC: &[u8; 8] = b"SIALSCK1";

/// A new job id: the start time and the process id.
pub fn new_job_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("job-{secs}-{}", std::process::id())
}

/// The folder of one job's checkpoints.
#[derive(Debug, Clone)]
pub struct JobDir {
    pub id: String,
    path: PathBuf,
}

/// What worker 0 saved after a program.
#[derive(Debug, Default, Clone)]
pub struct WorkerCheckpoint {
    /// Programs of the job completed.
    pub completed: usize,
    pub servers: usize,
    pub persisted: Persisted,
}

fn io_error(path: &Path, what: &str, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::input(format!("{what} {}: {e}", path.display()))
}

impl JobDir {
    pub fn new(work_dir: &Path, id: &str) -> JobDir {
        JobDir {
            id: id.to_string(),
            path: work_dir.join("sial-jobs").join(id),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.path)
            .map_err(|e| io_error(&self.path, "cannot create the checkpoint folder", e))?;
        let file = self.path.join(name);
        let tmp = self.path.join(format!("{name}.tmp"));
        std::fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, "cannot write checkpoint", e))?;
        std::fs::rename(&tmp, &file).map_err(|e| io_error(&file, "cannot write checkpoint", e))
    }

    fn read(&self, name: &str) -> Result<Vec<u8>> {
        let file = self.path.join(name);
        std::fs::read(&file).map_err(|e| {
            io_error(
                &file,
                &format!("cannot restart job {}: cannot read checkpoint", self.id),
                e,
            )
        })
    }

    pub fn write_worker(&self, c: &WorkerCheckpoint) -> Result<()> {
        let mut w = Writer(WORKER_MAGIC.to_vec());
        w.u64(c.completed as u64);
        w.u64(c.servers as u64);
        let mut scalars: Vec<_> = c.persisted.scalars.iter().collect();
        scalars.sort_by(|a, b| a.0.cmp(b.0));
        w.u64(scalars.len() as u64);
        for (label, v) in scalars {
            w.str(label);
            w.f64(*v);
        }
        let mut statics: Vec<_> = c.persisted.statics.iter().collect();
        statics.sort_by(|a, b| a.0.cmp(b.0));
        w.u64(statics.len() as u64);
        for (label, b) in statics {
            w.str(label);
            w.block(b);
        }
        self.write("worker", &w.0)
    }

    pub fn read_worker(&self) -> Result<WorkerCheckpoint> {
        let bytes = self.read("worker")?;
        let file = self.path.join("worker");
        let mut r = Reader::new(&bytes, &file, WORKER_MAGIC)?;
        let mut c = WorkerCheckpoint {
            completed: r.u64()? as usize,
            servers: r.u64()? as usize,
            ..WorkerCheckpoint::default()
        };
        for _ in 0..r.u64()? {
            let label = r.str()?;
            c.persisted.scalars.insert(label, r.f64()?);
        }
        for _ in 0..r.u64()? {
            let label = r.str()?;
            c.persisted.statics.insert(label, r.block()?);
        }
        r.end()?;
        Ok(c)
    }

    pub fn write_server(&self, rank: usize, saved: &Saved) -> Result<()> {
        let mut w = Writer(SERVER_MAGIC.to_vec());
        let mut labels: Vec<_> = saved.iter().collect();
        labels.sort_by(|a, b| a.0.cmp(b.0));
        w.u64(labels.len() as u64);
        for (label, blocks) in labels {
            w.str(label);
            let mut keys: Vec<_> = blocks.keys().collect();
            keys.sort();
            w.u64(keys.len() as u64);
            for k in keys {
                for v in k.segments.iter().chain(&k.parents) {
                    w.0.extend_from_slice(&v.to_le_bytes());
                }
                w.block(&blocks[k]);
            }
        }
        self.write(&format!("server-{rank}"), &w.0)
    }

    pub fn read_server(&self, rank: usize) -> Result<Saved> {
        let name = format!("server-{rank}");
        let bytes = self.read(&name)?;
        let file = self.path.join(&name);
        let mut r = Reader::new(&bytes, &file, SERVER_MAGIC)?;
        let mut saved = Saved::new();
        for _ in 0..r.u64()? {
            let label = r.str()?;
            let mut blocks = std::collections::HashMap::new();
            for _ in 0..r.u64()? {
                let mut key = BlockKey {
                    segments: [0; 6],
                    parents: [0; 6],
                };
                for v in key.segments.iter_mut().chain(key.parents.iter_mut()) {
                    *v = r.i32()?;
                }
                blocks.insert(key, Arc::new(r.block()?));
            }
            saved.insert(label, blocks);
        }
        r.end()?;
        Ok(saved)
    }

    /// The job completed: its checkpoints are no longer needed.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.path);
        if let Some(parent) = self.path.parent() {
            // Only when no other job left checkpoints there.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn block(&mut self, b: &Block) {
        self.u64(b.shape.len() as u64);
        for &d in &b.shape {
            self.u64(d as u64);
        }
        for &v in &b.data {
            self.f64(v);
        }
    }
}

struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
    file: &'b Path,
}

impl<'b> Reader<'b> {
    fn new(bytes: &'b [u8], file: &'b Path, magic: &[u8; 8]) -> Result<Reader<'b>> {
        if !bytes.starts_with(magic) {
            return Err(io_error(file, "not a sial checkpoint", "wrong magic"));
        }
        Ok(Reader { bytes, at: 8, file })
    }
    fn take(&mut self, n: usize) -> Result<&'b [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(io_error(
                self.file,
                "checkpoint",
                "file is shorter than its contents say (truncated?)",
            ));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn i32(&mut self) -> Result<i32> {
        let mut a = [0; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(i32::from_le_bytes(a))
    }
    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }
    fn len(&mut self, each: usize) -> Result<usize> {
        let n = self.u64()?;
        let left = (self.bytes.len() - self.at) as u64;
        if n.saturating_mul(each as u64) > left {
            return Err(io_error(
                self.file,
                "checkpoint",
                "a length runs past the end of the file",
            ));
        }
        Ok(n as usize)
    }
    fn str(&mut self) -> Result<String> {
        let n = self.len(1)?;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| io_error(self.file, "checkpoint", "a label is not UTF-8"))
    }
    fn block(&mut self) -> Result<Block> {
        let rank = self.len(8)?;
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(self.u64()? as usize);
        }
        let size = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| io_error(self.file, "checkpoint", "a block shape overflows"))?;
        if size.saturating_mul(8) > self.bytes.len() - self.at {
            return Err(io_error(
                self.file,
                "checkpoint",
                "a block runs past the end of the file",
            ));
        }
        let mut data = Vec::with_capacity(size);
        for _ in 0..size {
            data.push(self.f64()?);
        }
        Ok(Block { shape, data })
    }
    fn end(&self) -> Result<()> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(io_error(self.file, "checkpoint", "trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_round_trip_and_reject_damage() {
        let dir = std::env::temp_dir().join(format!("sial-ckpt-{}", std::process::id()));
        let job = JobDir::new(&dir, "job-test");
        let mut c = WorkerCheckpoint {
            completed: 2,
            servers: 3,
            ..Default::default()
        };
        c.persisted.scalars.insert("e".into(), -1.25);
        c.persisted.statics.insert(
            "s".into(),
            Block {
                shape: vec![2, 3],
                data: (0..6).map(f64::from).collect(),
            },
        );
        job.write_worker(&c).expect("write");
        let back = job.read_worker().expect("read");
        assert_eq!(back.completed, 2);
        assert_eq!(back.servers, 3);
        assert_eq!(back.persisted.scalars["e"], -1.25);
        assert_eq!(back.persisted.statics["s"], c.persisted.statics["s"]);

        let mut saved = Saved::new();
        let key = BlockKey {
            segments: [2, 1, 1, 1, 1, 1],
            parents: [0; 6],
        };
        let block = Block {
            shape: vec![3],
            data: vec![1.0, 2.0, 3.0],
        };
        saved.insert("t2".into(), [(key, Arc::new(block.clone()))].into());
        job.write_server(1, &saved).expect("write");
        let back = job.read_server(1).expect("read");
        assert_eq!(*back["t2"][&key], block);

        let file = job.path().join("server-1");
        let bytes = std::fs::read(&file).expect("read");
        std::fs::write(&file, &bytes[..bytes.len() - 3]).expect("truncate");
        let err = job.read_server(1).expect_err("truncated");
        assert!(
            err.to_string().contains("past the end") || err.to_string().contains("shorter"),
            "{err}"
        );
        let err = job.read_server(7).expect_err("missing");
        assert!(
            err.to_string().contains("cannot restart job job-test"),
            "{err}"
        );
        job.remove();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
