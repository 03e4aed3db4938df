//! The job's programs compiled side by side: on threads of this process, or shared among the
//! ranks of an MPI job, where each rank compiles its share and every rank receives them all.
//! What the compiler says is printed in program order by one process, as if the programs were
//! compiled one after another, and the first program that fails ends the job.

use crate::mpi::Session;
use sial_compiler::Options;
use sial_compiler::bytecode::{self, Program};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A program with the compiler's warnings, or why it has none.
type Outcome = Result<(Program, String), sial::Error>;

/// Every program of `paths`, compiled or read: on threads, or under mpirun shared among the
/// ranks. The compiler's messages go to stderr (under mpirun from rank 0 alone). Every rank
/// gets the same outcome, so all go on or all stop.
pub fn programs(
    paths: &[PathBuf],
    options: &Options,
    mpi: Option<&Session>,
) -> Result<Vec<Program>, ExitCode> {
    let (outcomes, speak) = match mpi {
        Some(session) => (
            shared(paths, options, session),
            session.rank_and_size().0 == 0,
        ),
        None => (on_threads(paths, options), true),
    };
    let mut programs = Vec::with_capacity(paths.len());
    let mut stderr = std::io::stderr();
    for outcome in outcomes {
        let said = match outcome {
            Ok((program, warnings)) => {
                programs.push(program);
                if speak {
                    let _ = stderr.write_all(warnings.as_bytes());
                }
                continue;
            }
            Err(sial::Error::Diagnostics(text)) => text,
            Err(e) => format!("{e}\n"),
        };
        if speak {
            let _ = stderr.write_all(said.as_bytes());
        }
        return Err(ExitCode::from(1));
    }
    Ok(programs)
}

/// The programs, largest source first, by as many threads as there are cores.
fn on_threads(paths: &[PathBuf], options: &Options) -> Vec<Outcome> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let order = largest_first(&sizes(paths));
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<Outcome>> = paths.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let compile = || {
            let mut done = Vec::new();
            while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                done.push((i, sial::load_program(&paths[i], options)));
            }
            done
        };
        let threads: Vec<_> = (0..cores.min(paths.len()))
            .filter_map(|_| {
                std::thread::Builder::new()
                    .stack_size(crate::COMPILER_STACK)
                    .spawn_scoped(scope, compile)
                    .ok()
            })
            .collect();
        for thread in threads {
            match thread.join() {
                Ok(done) => done.into_iter().for_each(|(i, o)| slots[i] = Some(o)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    finish(slots, paths, options)
}

/// Each rank compiles the programs [`shares`] gives it; every rank receives every outcome.
/// (Compiling before MPI starts, to overlap its start-up, measured no faster.)
fn shared(paths: &[PathBuf], options: &Options, session: &Session) -> Vec<Outcome> {
    let (rank, size) = session.rank_and_size();
    let owner = shares(&sizes(paths), size);
    let mut mine = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        if owner[i] == rank {
            let bytes = encode(&sial::load_program(path, options));
            mine.extend_from_slice(&(i as u64).to_le_bytes());
            mine.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            mine.extend_from_slice(&bytes);
        }
    }
    let mut slots: Vec<Option<Outcome>> = paths.iter().map(|_| None).collect();
    // A failed exchange leaves every slot empty: each rank then compiles everything itself.
    for theirs in session.all_gather(&mine).unwrap_or_default() {
        let mut rest = &theirs[..];
        while let Some((i, bytes, tail)) = record(rest) {
            if let Some(slot) = slots.get_mut(i) {
                *slot = decode(bytes);
            }
            rest = tail;
        }
    }
    finish(slots, paths, options)
}

/// The outcomes in program order; a program that nobody compiled (a thread that could not
/// start, a record that did not arrive whole) is compiled here.
fn finish(slots: Vec<Option<Outcome>>, paths: &[PathBuf], options: &Options) -> Vec<Outcome> {
    slots
        .into_iter()
        .zip(paths)
        .map(|(slot, path)| slot.unwrap_or_else(|| sial::load_program(path, options)))
        .collect()
}

/// The size of each program's file (a missing file counts as empty), read once.
fn sizes(paths: &[PathBuf]) -> Vec<u64> {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .collect()
}

/// Program indices, largest file first.
fn largest_first(sizes: &[u64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    order
}

/// The rank that compiles each program: largest first, each to the rank with the fewest bytes
/// so far (ties to the lower rank).
fn shares(sizes: &[u64], ranks: usize) -> Vec<usize> {
    let mut load = vec![0u64; ranks.max(1)];
    let mut owner = vec![0; sizes.len()];
    for i in largest_first(sizes) {
        let (rank, _) = load
            .iter()
            .enumerate()
            .min_by_key(|&(r, &l)| (l, r))
            .unwrap_or((0, &0));
        owner[i] = rank;
        load[rank] += sizes[i].max(1);
    }
    owner
}

const COMPILED: u8 = 0;
const DIAGNOSTICS: u8 = 1;
const FAILED: u8 = 2;

/// An outcome as bytes for the other ranks.
fn encode(outcome: &Outcome) -> Vec<u8> {
    let mut out = Vec::new();
    let mut text = |tag: u8, parts: &[&str]| {
        out.push(tag);
        for part in parts {
            out.extend_from_slice(&(part.len() as u64).to_le_bytes());
            out.extend_from_slice(part.as_bytes());
        }
    };
    match outcome {
        Ok((program, warnings)) => {
            text(COMPILED, &[warnings]);
            out.extend_from_slice(&bytecode::encode(program));
        }
        Err(sial::Error::Diagnostics(said)) => text(DIAGNOSTICS, &[said]),
        Err(sial::Error::Compile { path, message }) => text(FAILED, &[path, message]),
        Err(e) => text(FAILED, &["", &e.to_string()]),
    }
    out
}

/// An outcome from [`encode`]'s bytes; `None` where they are not whole.
fn decode(bytes: &[u8]) -> Option<Outcome> {
    let (&tag, rest) = bytes.split_first()?;
    let (first, rest) = text(rest)?;
    Some(match tag {
        COMPILED => Ok((bytecode::decode(rest).ok()?, first)),
        DIAGNOSTICS => Err(sial::Error::Diagnostics(first)),
        FAILED => {
            let (message, _) = text(rest)?;
            if first.is_empty() {
                Err(sial::Error::Setup(message))
            } else {
                Err(sial::Error::Compile {
                    path: first,
                    message,
                })
            }
        }
        _ => return None,
    })
}

/// A length-prefixed string and the bytes after it.
fn text(bytes: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = split_len(bytes)?;
    let (s, rest) = (rest.get(..len)?, rest.get(len..)?);
    Some((String::from_utf8(s.to_vec()).ok()?, rest))
}

/// One record of a rank's share: program index, outcome bytes, the bytes after it.
fn record(bytes: &[u8]) -> Option<(usize, &[u8], &[u8])> {
    let (index, rest) = split_len(bytes)?;
    let (len, rest) = split_len(rest)?;
    Some((index, rest.get(..len)?, rest.get(len..)?))
}

fn split_len(bytes: &[u8]) -> Option<(usize, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<8>()?;
    Some((usize::try_from(u64::from_le_bytes(*head)).ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder of this test process, removed when dropped.
    struct Folder(PathBuf);
    impl Folder {
        fn new(name: &str) -> Folder {
            let p =
                std::env::temp_dir().join(format!("sial-compile-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            Folder(p)
        }
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn outcomes_travel_whole() {
        let dir = Folder::new("travel");
        let good = dir.path().join("good.sial");
        std::fs::write(
            &good,
            "sial good\nscalar e\nint n\nint unused\ne = 2.0\nendsial good\n",
        )
        .unwrap();
        let bad = dir.path().join("bad.sial");
        std::fs::write(&bad, "sial bad\ne = 1.0\nendsial bad\n").unwrap();
        let missing = dir.path().join("missing.sial");
        let options = Options::from_env(Vec::new());
        for path in [&good, &bad, &missing] {
            let outcome = sial::load_program(path, &options);
            let back = decode(&encode(&outcome)).unwrap();
            match (&outcome, &back) {
                (Ok((p, w)), Ok((q, v))) => {
                    assert_eq!(bytecode::encode(p), bytecode::encode(q));
                    assert_eq!(w, v);
                }
                (Err(e), Err(f)) => assert_eq!(e.to_string(), f.to_string()),
                _ => panic!("{path:?}: the outcome changed on the way"),
            }
        }
        let bytes = encode(&sial::load_program(&good, &options));
        assert!(decode(&bytes[..bytes.len() - 1]).is_none());
    }

    #[test]
    fn shares_balance_by_size() {
        let dir = Folder::new("shares");
        let paths: Vec<PathBuf> = [50usize, 10, 40, 30, 20]
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let p = dir.path().join(format!("p{i}.sial"));
                std::fs::write(&p, "x".repeat(n)).unwrap();
                p
            })
            .collect();
        // 50 → rank 0; 40, 30 → rank 1 (40, then 70); 20 → rank 0 (50 < 70); 10 → rank 0
        // (70 = 70: the lower rank).
        let sizes = sizes(&paths);
        assert_eq!(sizes, [50, 10, 40, 30, 20]);
        assert_eq!(shares(&sizes, 2), vec![0, 0, 1, 1, 0]);
        assert_eq!(shares(&sizes, 1), vec![0; 5]);
        assert_eq!(largest_first(&sizes), vec![0, 2, 3, 4, 1]);
    }

    #[test]
    fn threads_keep_the_order() {
        let dir = Folder::new("order");
        let paths: Vec<PathBuf> = (0..5)
            .map(|i| {
                let p = dir.path().join(format!("p{i}.sial"));
                let body = "x = 1.0\n".repeat(i * 20);
                std::fs::write(&p, format!("sial p{i}\nscalar x\n{body}endsial p{i}\n")).unwrap();
                p
            })
            .collect();
        let outcomes = on_threads(&paths, &Options::from_env(Vec::new()));
        let names: Vec<String> = outcomes
            .into_iter()
            .map(|o| o.map(|(p, _)| p.name).unwrap_or_default())
            .collect();
        assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    }
}
