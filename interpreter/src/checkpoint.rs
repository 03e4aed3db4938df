//! Restart (SIAL-SPEC §7.11): after every program of a job of several programs, worker 0 writes
//! how many programs are complete with its saved scalars and static arrays, and each server
//! writes the arrays it saved (after the run's first program and wherever a later one changed
//! them, never after the job's last: `job::Ranks::server_checkpoint`). `sial run --restart JOBID` reads them back and starts at the
//! first program not completed. Files live in `<work dir>/sial-jobs/JOBID/`; a job that
//! completes removes its files. Each file is written to a temporary name and renamed, so a
//! crash never leaves a half-written checkpoint.
//!
//! A file is a magic number, a format version, the contents encoded with postcard and a CRC-32
//! of the contents: a damaged or foreign file is an error that names it, and is left in place.
//! The worker's file records a fingerprint of the job's programs, so a restart with other
//! programs is refused before anything runs. A job id is a name in the jobs folder of the form
//! sial writes, never a path, and only the files sial wrote there are ever removed.

use crate::error::{Result, RuntimeError};
use crate::persist::Persisted;
use crate::server::Saved;
use crate::store::{Block, BlockKey};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const WORKER_MAGIC: &[u8; 8] = b"SIALWCK\x02";
const SERVER_MAGIC: &[u8; 8] = b"SIALSCK\x02";
/// Bumped whenever the contents of a checkpoint file change.
const VERSION: u32 = 2;

/// A new job id: the start time and the process id.
pub fn new_job_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("job-{secs}-{}", std::process::id())
}

/// Whether `id` has the form of [`new_job_id`]: `job-SECONDS-PID`.
fn is_job_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("job-") else {
        return false;
    };
    let mut parts = rest.split('-');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next()) && parts.next().is_none()
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
    /// [`fingerprint`] of the job's programs.
    pub job: u32,
    pub persisted: Persisted,
}

/// A fingerprint of a job's programs (their bytecode, in order). The paths of the source files
/// are left out: the same job started from another folder is the same job.
pub fn fingerprint(programs: &[sial_bytecode::Program]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in programs {
        let mut code = p.clone();
        code.files.clear();
        h.update(&sial_bytecode::encode(&code));
    }
    h.finalize()
}

/// Worker 0's file. Written from borrowed names and blocks (`&str`, `&Block`), read into owned
/// ones: postcard encodes both alike.
#[derive(Serialize, Deserialize)]
struct WorkerFile<S, B> {
    completed: u64,
    servers: u64,
    job: u32,
    scalars: Vec<(S, f64)>,
    statics: Vec<(S, B)>,
}

/// A server's file, written and read as [`WorkerFile`] is.
#[derive(Serialize, Deserialize)]
struct ServerFile<S, B> {
    arrays: Vec<(S, Vec<(BlockKey, B)>)>,
}

/// The file under the buffer that encoding writes to: the CRC-32 of what reaches it, computed on
/// the buffer's large writes (the encoder writes one value at a time), and the first error of
/// the file system kept (postcard reports only that writing stopped).
struct Checksummed {
    file: std::fs::File,
    crc: crc32fast::Hasher,
    error: Option<std::io::Error>,
}

impl std::io::Write for Checksummed {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self.file.write(bytes) {
            Ok(n) => {
                self.crc.update(&bytes[..n]);
                Ok(n)
            }
            Err(e) => {
                let kept = std::io::Error::new(e.kind(), e.to_string());
                self.error.get_or_insert(e);
                Err(kept)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A checkpoint file: the magic, the format version, the contents encoded with postcard and
/// the CRC-32 of that encoding, written to `file` as they are encoded.
fn encode(
    mut file: std::fs::File,
    magic: &[u8; 8],
    contents: &impl Serialize,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut header = magic.to_vec();
    header.extend_from_slice(&VERSION.to_le_bytes());
    file.write_all(&header)?;
    let checksummed = Checksummed {
        file,
        crc: crc32fast::Hasher::new(),
        error: None,
    };
    let mut payload = std::io::BufWriter::with_capacity(1 << 20, checksummed);
    let encoded = postcard::to_io(contents, &mut payload).map(|_| ());
    let flushed = payload.flush();
    let (
        Checksummed {
            mut file,
            crc,
            error,
        },
        _,
    ) = payload.into_parts();
    if let Some(e) = error {
        return Err(e);
    }
    encoded.map_err(|e| std::io::Error::other(format!("internal: checkpoint encoding: {e}")))?;
    flushed?;
    file.write_all(&crc.finalize().to_le_bytes())
}

fn io_error(path: &Path, what: &str, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::input(format!("{what} {}: {e}", path.display()))
}

impl JobDir {
    /// The folder of a new job, under an id from [`new_job_id`].
    pub fn new(work_dir: &Path, id: &str) -> JobDir {
        JobDir {
            id: id.to_string(),
            path: work_dir.join("sial-jobs").join(id),
        }
    }

    /// The folder of job `id` to restart: an id of the form sial writes, whose folder holds a
    /// worker checkpoint.
    pub fn existing(work_dir: &Path, id: &str) -> Result<JobDir> {
        if !is_job_id(id) {
            return Err(RuntimeError::input(format!(
                "--restart {id:?}: not a job id (sial names jobs job-SECONDS-PID, printed when a job stops; they are folders of {})",
                work_dir.join("sial-jobs").display()
            )));
        }
        let dir = JobDir::new(work_dir, id);
        if !dir.path.join("worker").is_file() {
            return Err(RuntimeError::input(format!(
                "--restart {id}: no checkpoints of this job in {}",
                dir.path.display()
            )));
        }
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` under `name`, streamed to a temporary file (no copy of the blocks in
    /// memory), then renamed. A failure removes the temporary file and leaves an earlier
    /// checkpoint of that name as it was.
    fn write(&self, name: &str, magic: &[u8; 8], contents: &impl Serialize) -> Result<()> {
        std::fs::create_dir_all(&self.path)
            .map_err(|e| io_error(&self.path, "cannot create the checkpoint folder", e))?;
        let file = self.path.join(name);
        let tmp = self.path.join(format!("{name}.tmp"));
        if let Err(e) = std::fs::File::create(&tmp).and_then(|out| encode(out, magic, contents)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_error(&tmp, "cannot write checkpoint", e));
        }
        std::fs::rename(&tmp, &file).map_err(|e| io_error(&file, "cannot write checkpoint", e))
    }

    /// Reads the checkpoint `name` streamed from its file, in two passes: the checksum over
    /// the whole file first, then the decoding, so that a restart holds the contents once and
    /// never a copy of the file beside them.
    fn read<T: serde::de::DeserializeOwned>(&self, name: &str, magic: &[u8; 8]) -> Result<T> {
        use std::io::{Read, Seek};
        let file = self.path.join(name);
        let what = format!("cannot restart job {}: checkpoint", self.id);
        let unreadable = |e: std::io::Error| io_error(&file, &format!("{what} cannot be read:"), e);
        let damaged =
            |why: &str| io_error(&file, &what, format!("{why} (the file is left in place)"));
        let mut f = std::fs::File::open(&file).map_err(unreadable)?;
        let len = f.metadata().map_err(unreadable)?.len();
        let mut header = [0u8; 12];
        if len < 16 || f.read_exact(&mut header).is_err() || !header.starts_with(&magic[..7]) {
            return Err(damaged("not a sial checkpoint of this kind"));
        }
        let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if !header.starts_with(magic) || version != VERSION {
            return Err(damaged("written by another version of sial"));
        }
        let payload = len - 16;
        let mut crc = crc32fast::Hasher::new();
        let mut piece = vec![0u8; 1 << 20];
        let mut left = payload;
        while left > 0 {
            let n = usize::try_from(left).map_or(piece.len(), |l| l.min(piece.len()));
            f.read_exact(&mut piece[..n]).map_err(unreadable)?;
            crc.update(&piece[..n]);
            left -= n as u64;
        }
        let mut stored = [0u8; 4];
        f.read_exact(&mut stored).map_err(unreadable)?;
        if crc.finalize().to_le_bytes() != stored {
            return Err(damaged("damaged: its checksum does not match"));
        }
        f.seek(std::io::SeekFrom::Start(12)).map_err(unreadable)?;
        let reader = std::io::BufReader::with_capacity(1 << 20, f.take(payload));
        // Room for the longest string of the file (labels), decoded one at a time.
        let mut scratch = piece;
        postcard::from_io((reader, &mut scratch[..]))
            .map(|(contents, _)| contents)
            .map_err(|e| damaged(&format!("damaged: {e}")))
    }

    pub fn write_worker(&self, c: &WorkerCheckpoint) -> Result<()> {
        let mut scalars: Vec<_> = c
            .persisted
            .scalars
            .iter()
            .map(|(l, v)| (l.as_str(), *v))
            .collect();
        scalars.sort_by(|a, b| a.0.cmp(b.0));
        let mut statics: Vec<_> = c
            .persisted
            .statics
            .iter()
            .map(|(l, b)| (l.as_str(), b))
            .collect();
        statics.sort_by(|a, b| a.0.cmp(b.0));
        let file = WorkerFile {
            completed: c.completed as u64,
            servers: c.servers as u64,
            job: c.job,
            scalars,
            statics,
        };
        self.write("worker", WORKER_MAGIC, &file)
    }

    pub fn read_worker(&self) -> Result<WorkerCheckpoint> {
        let f: WorkerFile<String, Block> = self.read("worker", WORKER_MAGIC)?;
        Ok(WorkerCheckpoint {
            completed: usize::try_from(f.completed).unwrap_or(usize::MAX),
            servers: usize::try_from(f.servers).unwrap_or(usize::MAX),
            job: f.job,
            persisted: Persisted {
                scalars: f.scalars.into_iter().collect(),
                statics: f.statics.into_iter().collect(),
            },
        })
    }

    pub fn write_server(&self, rank: usize, saved: &Saved) -> Result<()> {
        let mut arrays: Vec<_> = saved
            .iter()
            .map(|(label, blocks)| {
                let mut blocks: Vec<_> = blocks.iter().map(|(k, b)| (*k, &**b)).collect();
                blocks.sort_by_key(|(k, _)| *k);
                (label.as_str(), blocks)
            })
            .collect();
        arrays.sort_by(|a, b| a.0.cmp(b.0));
        self.write(
            &format!("server-{rank}"),
            SERVER_MAGIC,
            &ServerFile { arrays },
        )
    }

    pub fn read_server(&self, rank: usize) -> Result<Saved> {
        let f: ServerFile<String, Block> = self.read(&format!("server-{rank}"), SERVER_MAGIC)?;
        Ok(f.arrays
            .into_iter()
            .map(|(label, blocks)| {
                (
                    label,
                    blocks.into_iter().map(|(k, b)| (k, Arc::new(b))).collect(),
                )
            })
            .collect())
    }

    /// The job completed: its checkpoints are no longer needed. Only the files sial writes are
    /// removed (`worker`, `server-N` and their temporaries), then the folders if that left
    /// them empty.
    pub fn remove(&self) {
        if let Ok(entries) = std::fs::read_dir(&self.path) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                let base = name.strip_suffix(".tmp").unwrap_or(&name);
                let ours = base == "worker"
                    || base
                        .strip_prefix("server-")
                        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()));
                if ours && e.file_type().is_ok_and(|t| t.is_file()) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(&self.path);
        if let Some(parent) = self.path.parent() {
            // Only when no other job left checkpoints there.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file is the contents encoded whole, as a restart reads them: streaming changes
    /// nothing of the format.
    #[test]
    fn a_streamed_checkpoint_is_its_contents_encoded_whole() {
        let dir = std::env::temp_dir().join(format!("sial-ckpt-format-{}", std::process::id()));
        let job = JobDir::new(&dir, "job-test");
        let key = |i| BlockKey {
            segments: [i, 1, 1, 1, 1, 1],
            parents: [0; 6],
        };
        let block = |n: usize| Block {
            shape: [n].into(),
            data: (0..n).map(|x| x as f64 * 0.25).collect(),
        };
        let mut saved = Saved::new();
        saved.insert(
            "b".into(),
            [
                (key(2), Arc::new(block(3))),
                (key(1), Arc::new(block(70_000))),
            ]
            .into(),
        );
        saved.insert("a".into(), [(key(1), Arc::new(block(1)))].into());
        job.write_server(0, &saved).expect("write");
        let whole = ServerFile {
            arrays: vec![
                ("a".to_string(), vec![(key(1), block(1))]),
                (
                    "b".to_string(),
                    vec![(key(1), block(70_000)), (key(2), block(3))],
                ),
            ],
        };
        let payload = postcard::to_stdvec(&whole).expect("encode");
        let mut expected = SERVER_MAGIC.to_vec();
        expected.extend_from_slice(&VERSION.to_le_bytes());
        expected.extend_from_slice(&payload);
        expected.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        let written = std::fs::read(job.path().join("server-0")).expect("file");
        assert!(
            written == expected,
            "the file differs from the whole encoding"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file system that fills while a checkpoint is written: the error is the file system's,
    /// not postcard's; a checkpoint that cannot be made names its file and leaves the earlier
    /// one in place, with no temporary file behind.
    #[test]
    fn a_checkpoint_that_cannot_be_written_says_why_and_keeps_the_last() {
        let full = std::fs::File::options().write(true).open("/dev/full");
        if let Ok(full) = full {
            let big = Block {
                shape: [1 << 18].into(),
                data: vec![1.5; 1 << 18],
            };
            let e = encode(full, SERVER_MAGIC, &big).expect_err("/dev/full takes nothing");
            assert_eq!(e.raw_os_error(), Some(28), "{e}");
        }
        let dir = std::env::temp_dir().join(format!("sial-ckpt-fail-{}", std::process::id()));
        let job = JobDir::new(&dir, "job-test");
        let saved = Saved::new();
        job.write_server(0, &saved).expect("write");
        let before = std::fs::read(job.path().join("server-0")).expect("file");
        // A folder where the temporary file goes.
        std::fs::create_dir_all(job.path().join("server-0.tmp")).expect("dir");
        let mut more = Saved::new();
        more.insert("t".into(), std::collections::HashMap::new());
        let e = job
            .write_server(0, &more)
            .expect_err("cannot write")
            .to_string();
        assert!(
            e.contains("cannot write checkpoint") && e.contains("server-0.tmp"),
            "{e}"
        );
        assert_eq!(
            std::fs::read(job.path().join("server-0")).expect("file"),
            before
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

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
                shape: [2, 3].into(),
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
            shape: [3].into(),
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
        assert!(err.to_string().contains("checksum does not match"), "{err}");
        for at in [0, 9, 20, bytes.len() - 1] {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            std::fs::write(&file, &b).expect("damage");
            let err = job.read_server(1).expect_err("damaged");
            assert!(err.to_string().contains("left in place"), "{err}");
            assert!(file.exists());
        }
        let err = job.read_server(7).expect_err("missing");
        assert!(
            err.to_string().contains("cannot restart job job-test"),
            "{err}"
        );
        job.remove();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_checkpoint_larger_than_the_read_pieces_round_trips_and_garbage_with_a_valid_checksum_is_damage()
     {
        let dir = std::env::temp_dir().join(format!("sial-ckpt-big-{}", std::process::id()));
        let job = JobDir::new(&dir, "job-test");
        let mut saved = Saved::new();
        let blocks: std::collections::HashMap<_, _> = (1..=3)
            .map(|s| {
                let key = BlockKey {
                    segments: [s, 1, 1, 1, 1, 1],
                    parents: [0; 6],
                };
                // 3 × 2.4 MB: several 1 MiB pieces for the checksum and the reader.
                let data = (0..300_000).map(|i| f64::from(i * s) * 0.5 - 1e3).collect();
                let block = Block {
                    shape: [600, 500].into(),
                    data,
                };
                (key, Arc::new(block))
            })
            .collect();
        let label = "l".repeat(5000);
        saved.insert(label.clone(), blocks.clone());
        job.write_server(0, &saved).expect("write");
        let back = job.read_server(0).expect("read");
        assert_eq!(back.len(), 1);
        for (k, b) in &blocks {
            assert_eq!(*back[&label][k], **b);
        }
        // The right header and checksum around a payload that does not decode.
        let file = job.path().join("server-0");
        let mut bytes = std::fs::read(&file).expect("read")[..12].to_vec();
        let payload = [0xffu8; 40];
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        std::fs::write(&file, &bytes).expect("write");
        let err = job.read_server(0).expect_err("garbage").to_string();
        assert!(
            err.contains("damaged:") && err.contains("left in place"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn job_ids_are_names_of_the_form_sial_writes() {
        assert!(is_job_id(&new_job_id()));
        for bad in [
            "",
            "job-",
            "job-1",
            "job-1-",
            "job-1-2-3",
            "../victim",
            "job-1-2/..",
            "job-x-2",
            "/tmp",
        ] {
            assert!(!is_job_id(bad), "{bad}");
            let e = JobDir::existing(Path::new("."), bad).expect_err(bad);
            assert!(e.to_string().contains("not a job id"), "{e}");
        }
        let e = JobDir::existing(Path::new("."), "job-1-2").expect_err("absent");
        assert!(e.to_string().contains("no checkpoints of this job"), "{e}");
    }

    #[test]
    fn removing_a_job_keeps_files_it_did_not_write() {
        let dir = std::env::temp_dir().join(format!("sial-ckpt-keep-{}", std::process::id()));
        let job = JobDir::new(&dir, "job-1-2");
        job.write_worker(&WorkerCheckpoint::default())
            .expect("write");
        job.write_server(0, &Saved::new()).expect("write");
        let mine = job.path().join("notes.txt");
        std::fs::write(&mine, "a user's file").expect("write");
        job.remove();
        assert!(mine.exists());
        assert!(!job.path().join("worker").exists());
        assert!(!job.path().join("server-0").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
