//! Restart (SIAL-SPEC §7.11): after every program of a job of several programs, worker 0 writes
//! how many programs are complete with its saved scalars and static arrays, and each server
//! writes the arrays it saved: one file per label (`server-RANK.N`), written where the label
//! is new or the program changed its blocks, and a list of the labels' files (`server-RANK`),
//! never after the job's last program (`job::Ranks::server_checkpoint`). An array saved once
//! and restored unchanged by every later program, as integrals are, is written once.
//! `sial run --restart JOBID` reads them back and starts at the first program not completed.
//! Files live in `<work dir>/sial-jobs/JOBID/`; a job that completes removes its files. Each
//! file is written to a temporary name and renamed, a server's list after the files it names,
//! so a crash never leaves a half-written checkpoint.
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
const ARRAY_MAGIC: &[u8; 8] = b"SIALACK\x02";
/// Bumped whenever the contents of a checkpoint file change.
const VERSION: u32 = 3;

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

/// A server's list: each label it saved and the number of the file holding its blocks.
#[derive(Serialize, Deserialize)]
struct ServerFile<S> {
    arrays: Vec<(S, u64)>,
}

/// One saved array of a server, written and read as [`WorkerFile`] is.
#[derive(Serialize, Deserialize)]
struct ArrayFile<S, B> {
    label: S,
    blocks: Vec<(BlockKey, B)>,
}

/// What a server's checkpoint holds on disk: the file of each label, and the next file's
/// number. A restart starts from those of the run before, so that arrays it does not change
/// are not written again.
#[derive(Debug, Default)]
pub struct ServerFiles {
    files: std::collections::BTreeMap<String, u64>,
    next: u64,
    /// Whether the list is on disk (a job's first program may save nothing).
    listed: bool,
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

/// The name of server `rank`'s file number `n`, which holds one saved array.
fn array_file(rank: usize, n: u64) -> String {
    format!("server-{rank}.{n}")
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

    /// Server `rank`'s checkpoint of `saved`, where `changed` names the labels whose blocks
    /// the program just ended changed: the arrays not on disk yet or changed are written, each
    /// to a new file, then the list, then the replaced files are removed. Nothing is written
    /// where the list on disk holds every array as it is. A failure leaves the checkpoint on
    /// disk as it was.
    pub fn write_server(
        &self,
        rank: usize,
        on_disk: &mut ServerFiles,
        saved: &Saved,
        changed: &std::collections::BTreeSet<String>,
    ) -> Result<()> {
        let mut stale: Vec<&String> = saved
            .keys()
            .filter(|l| changed.contains(*l) || !on_disk.files.contains_key(*l))
            .collect();
        if stale.is_empty() && on_disk.listed {
            return Ok(());
        }
        stale.sort();
        let mut files = on_disk.files.clone();
        let mut replaced = Vec::new();
        for label in stale {
            let n = on_disk.next;
            on_disk.next += 1;
            let mut blocks: Vec<_> = saved[label].iter().map(|(k, b)| (*k, &**b)).collect();
            blocks.sort_by_key(|(k, _)| *k);
            let array = ArrayFile {
                label: label.as_str(),
                blocks,
            };
            self.write(&array_file(rank, n), ARRAY_MAGIC, &array)?;
            replaced.extend(files.insert(label.clone(), n));
        }
        let list = ServerFile {
            arrays: files.iter().map(|(l, n)| (l.as_str(), *n)).collect(),
        };
        self.write(&format!("server-{rank}"), SERVER_MAGIC, &list)?;
        on_disk.files = files;
        on_disk.listed = true;
        for n in replaced {
            let _ = std::fs::remove_file(self.path.join(array_file(rank, n)));
        }
        Ok(())
    }

    /// The arrays server `rank` saved, and the files that hold them.
    pub fn read_server(&self, rank: usize) -> Result<(Saved, ServerFiles)> {
        let list: ServerFile<String> = self.read(&format!("server-{rank}"), SERVER_MAGIC)?;
        let mut saved = Saved::new();
        let mut on_disk = ServerFiles {
            listed: true,
            ..ServerFiles::default()
        };
        for (label, n) in list.arrays {
            let name = array_file(rank, n);
            let array: ArrayFile<String, Block> = self.read(&name, ARRAY_MAGIC)?;
            if array.label != label {
                return Err(io_error(
                    &self.path.join(&name),
                    &format!("cannot restart job {}: checkpoint", self.id),
                    format!(
                        "holds array {:?} where the server's list names {label:?} (the file is left in place)",
                        array.label
                    ),
                ));
            }
            let blocks = array
                .blocks
                .into_iter()
                .map(|(k, b)| (k, Arc::new(b)))
                .collect();
            saved.insert(label.clone(), blocks);
            on_disk.next = on_disk.next.max(n + 1);
            on_disk.files.insert(label, n);
        }
        Ok((saved, on_disk))
    }

    /// The job completed: its checkpoints are no longer needed. Only the files sial writes are
    /// removed (`worker`, `server-N`, `server-N.M` and their temporaries), then the folders if
    /// that left them empty.
    pub fn remove(&self) {
        if let Ok(entries) = std::fs::read_dir(&self.path) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                let base = name.strip_suffix(".tmp").unwrap_or(&name);
                let number = |r: &str| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit());
                let ours = base == "worker"
                    || base.strip_prefix("server-").is_some_and(|r| {
                        let (rank, file) = r.split_once('.').unwrap_or((r, "0"));
                        number(rank) && number(file)
                    });
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
    use std::collections::BTreeSet;

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
        job.write_server(0, &mut ServerFiles::default(), &saved, &BTreeSet::new())
            .expect("write");
        let file = |magic: &[u8; 8], payload: Vec<u8>| {
            let mut expected = magic.to_vec();
            expected.extend_from_slice(&VERSION.to_le_bytes());
            expected.extend_from_slice(&payload);
            expected.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
            expected
        };
        let b = ArrayFile {
            label: "b",
            blocks: vec![(key(1), block(70_000)), (key(2), block(3))],
        };
        let list = ServerFile {
            arrays: vec![("a", 0), ("b", 1)],
        };
        for (name, expected) in [
            (
                "server-0.1",
                file(ARRAY_MAGIC, postcard::to_stdvec(&b).expect("encode")),
            ),
            (
                "server-0",
                file(SERVER_MAGIC, postcard::to_stdvec(&list).expect("encode")),
            ),
        ] {
            let written = std::fs::read(job.path().join(name)).expect("file");
            assert!(
                written == expected,
                "{name} differs from the whole encoding"
            );
        }
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
        let mut on_disk = ServerFiles::default();
        let none = BTreeSet::new();
        job.write_server(0, &mut on_disk, &Saved::new(), &none)
            .expect("write");
        let before = std::fs::read(job.path().join("server-0")).expect("file");
        // A folder where the list's temporary file goes.
        std::fs::create_dir_all(job.path().join("server-0.tmp")).expect("dir");
        let mut more = Saved::new();
        more.insert("t".into(), std::collections::HashMap::new());
        let e = job
            .write_server(0, &mut on_disk, &more, &none)
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
        // The array is still not on disk: the next checkpoint writes it.
        std::fs::remove_dir(job.path().join("server-0.tmp")).expect("dir");
        job.write_server(0, &mut on_disk, &more, &none)
            .expect("write");
        assert_eq!(job.read_server(0).expect("read").0.len(), 1);
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
        job.write_server(1, &mut ServerFiles::default(), &saved, &BTreeSet::new())
            .expect("write");
        let (back, _) = job.read_server(1).expect("read");
        assert_eq!(*back["t2"][&key], block);

        for name in ["server-1.0", "server-1"] {
            let file = job.path().join(name);
            let bytes = std::fs::read(&file).expect("read");
            std::fs::write(&file, &bytes[..bytes.len() - 3]).expect("truncate");
            let err = job.read_server(1).expect_err("truncated").to_string();
            assert!(
                err.contains("checksum does not match") && err.contains(name),
                "{err}"
            );
            for at in [0, 9, 20, bytes.len() - 1] {
                let mut b = bytes.clone();
                b[at] ^= 0x10;
                std::fs::write(&file, &b).expect("damage");
                let err = job.read_server(1).expect_err("damaged");
                assert!(err.to_string().contains("left in place"), "{err}");
                assert!(file.exists());
            }
            std::fs::write(&file, &bytes).expect("mend");
        }
        std::fs::remove_file(job.path().join("server-1.0")).expect("remove");
        let err = job.read_server(1).expect_err("missing array").to_string();
        assert!(err.contains("server-1.0"), "{err}");
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
        job.write_server(0, &mut ServerFiles::default(), &saved, &BTreeSet::new())
            .expect("write");
        let (back, _) = job.read_server(0).expect("read");
        assert_eq!(back.len(), 1);
        for (k, b) in &blocks {
            assert_eq!(*back[&label][k], **b);
        }
        // The right header and checksum around a payload that does not decode.
        let file = job.path().join("server-0.0");
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

    /// An array already on disk is written again only where a program changed it; the file it
    /// replaces goes; a restart goes on from the files on disk, numbering new ones after them.
    #[test]
    fn only_new_and_changed_arrays_are_written_again() {
        let dir = std::env::temp_dir().join(format!("sial-ckpt-labels-{}", std::process::id()));
        let job = JobDir::new(&dir, "job-test");
        let key = BlockKey {
            segments: [1; 6],
            parents: [0; 6],
        };
        let array = |v: f64| -> std::collections::HashMap<_, _> {
            [(
                key,
                Arc::new(Block {
                    shape: [2].into(),
                    data: vec![v, -v],
                }),
            )]
            .into()
        };
        let files = || {
            let mut names: Vec<String> = std::fs::read_dir(job.path())
                .expect("folder")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let changed = |labels: &[&str]| labels.iter().map(|l| l.to_string()).collect();
        let mut saved = Saved::new();
        saved.insert("integrals".into(), array(1.0));
        saved.insert("t2".into(), array(2.0));
        let mut on_disk = ServerFiles::default();
        job.write_server(0, &mut on_disk, &saved, &changed(&["integrals", "t2"]))
            .expect("write");
        assert_eq!(files(), ["server-0", "server-0.0", "server-0.1"]);
        let integrals = std::fs::read(job.path().join("server-0.0")).expect("file");

        saved.insert("t2".into(), array(3.0));
        job.write_server(0, &mut on_disk, &saved, &changed(&["t2"]))
            .expect("write");
        assert_eq!(files(), ["server-0", "server-0.0", "server-0.2"]);
        assert_eq!(
            std::fs::read(job.path().join("server-0.0")).expect("file"),
            integrals
        );
        // Nothing changed: nothing written.
        std::fs::remove_file(job.path().join("server-0")).expect("remove");
        job.write_server(0, &mut on_disk, &saved, &changed(&[]))
            .expect("write");
        assert_eq!(files(), ["server-0.0", "server-0.2"]);
        job.write_server(0, &mut on_disk, &saved, &changed(&["t2"]))
            .expect("write");

        let (back, mut on_disk) = job.read_server(0).expect("read");
        assert_eq!(back["t2"][&key].data, [3.0, -3.0]);
        assert_eq!(back["integrals"][&key].data, [1.0, -1.0]);
        saved.insert("t1".into(), array(4.0));
        job.write_server(0, &mut on_disk, &saved, &changed(&[]))
            .expect("write");
        assert_eq!(
            files(),
            ["server-0", "server-0.0", "server-0.3", "server-0.4"]
        );
        // A file that holds another array than the list names is damage.
        std::fs::copy(job.path().join("server-0.4"), job.path().join("server-0.0")).expect("copy");
        let err = job.read_server(0).expect_err("swapped").to_string();
        assert!(
            err.contains("server-0.0") && err.contains("holds array \"t1\""),
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
        let mut saved = Saved::new();
        saved.insert("t".into(), std::collections::HashMap::new());
        job.write_server(0, &mut ServerFiles::default(), &saved, &BTreeSet::new())
            .expect("write");
        let mine: Vec<_> = ["notes.txt", "server-0.notes", "server-.1", "server-0."]
            .iter()
            .map(|name| job.path().join(name))
            .collect();
        for file in &mine {
            std::fs::write(file, "a user's file").expect("write");
        }
        std::fs::write(job.path().join("server-0.7.tmp"), "a crash's").expect("write");
        job.remove();
        for file in &mine {
            assert!(file.exists(), "{}", file.display());
        }
        for ours in ["worker", "server-0", "server-0.0", "server-0.7.tmp"] {
            assert!(!job.path().join(ours).exists(), "{ours}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
