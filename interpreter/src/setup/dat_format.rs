//! ACES4's binary setup format (`.dat`, SIAL-SPEC §9.2), read so that ACES4's own job files run
//! unchanged. Native byte order (little endian on every machine ACES4 ran on):
//!
//! ```text
//! int magic = 23121991, int version = 1
//! int nprog;  nprog × string                         program file names (NAME.siox)
//! int nint;   nint × (string name, int value)
//! int nscal;  nscal × (string name, double value)
//! int nseg;   nseg × (int kind, int n, n × int extent)
//! int narr;   narr × (string name, int rank, int ndims, ndims × int dim, int count, count × double)
//! int niarr;  the same with count × int
//! int nconf;  nconf × (string program, int nkv, nkv × (string key, string value))
//! string = int length (counting a trailing NUL), then the bytes
//! ```
//!
//! Every error names the file, the byte offset and the entry being read, so a truncated or
//! foreign file is told apart from a damaged one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    ArrayData, IntArrayData, Location, Setup, SetupError, base_dir, check_data_len,
    checked_extents, checked_shape, insert_name, program_stem, resolve_program,
};

/// The first int of every ACES4 setup file.
pub const MAGIC: i32 = 23_121_991;
/// The only version ACES4 writes.
pub const VERSION: i32 = 1;

/// Index kinds by ACES4's code (SIAL-SPEC §6.3.2); simple (1005) and subindex (1007) have no
/// table and are skipped.
fn kind_name(code: i32) -> Option<&'static str> {
    match code {
        1001 => Some("aoindex"),
        1002 => Some("moindex"),
        1003 => Some("moaindex"),
        1004 => Some("mobindex"),
        1006 => Some("laindex"),
        _ => None,
    }
}

/// Upper bound on any count in the file: no real job comes near it, and it keeps a damaged
/// count from asking for gigabytes before the data runs out.
const MAX_COUNT: i64 = 1 << 31;

struct Reader<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str, message: impl std::fmt::Display) -> SetupError {
        SetupError::invalid(
            Location::file(self.path),
            format!(
                "{what} (byte {}): {message}; this is not a complete ACES4 setup file (.dat, SIAL-SPEC §9.2)",
                self.pos
            ),
        )
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], SetupError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.error(
                what,
                format!(
                    "the file ends after {} bytes, {} more were needed",
                    self.bytes.len(),
                    n - (self.bytes.len() - self.pos.min(self.bytes.len()))
                ),
            ));
        };
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn int(&mut self, what: &str) -> Result<i32, SetupError> {
        let b = self.take(4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn double(&mut self, what: &str) -> Result<f64, SetupError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_le_bytes(a))
    }

    /// A count that must be non-negative and fit in the rest of the file at `unit` bytes each.
    fn count(&mut self, what: &str, unit: usize) -> Result<usize, SetupError> {
        let n = i64::from(self.int(what)?);
        let left = (self.bytes.len() - self.pos) as i64;
        if !(0..MAX_COUNT).contains(&n) || n * unit as i64 > left {
            self.pos -= 4;
            return Err(self.error(
                what,
                format!("count {n} does not fit in the {left} bytes that follow"),
            ));
        }
        Ok(n as usize)
    }

    /// A string: its length counts a trailing NUL; ACES4 trims trailing blanks when writing.
    fn string(&mut self, what: &str) -> Result<String, SetupError> {
        let n = self.count(what, 1)?;
        let start = self.pos;
        let b = self.take(n, what)?;
        let text = b.split(|&c| c == 0).next().unwrap_or(&[]);
        match std::str::from_utf8(text) {
            Ok(s) => Ok(s.trim_end().to_string()),
            Err(_) => {
                self.pos = start;
                Err(self.error(what, "the name is not text"))
            }
        }
    }

    fn shape(&mut self, what: &str) -> Result<Vec<i64>, SetupError> {
        let rank = self.int(what)?;
        let ndims = self.count(what, 4)?;
        if usize::try_from(rank).ok() != Some(ndims) {
            return Err(self.error(
                what,
                format!("rank {rank} but {ndims} dimensions are listed"),
            ));
        }
        (0..ndims).map(|_| self.int(what).map(i64::from)).collect()
    }
}

/// Parses the ACES4 binary setup `bytes` read from `path`.
pub(super) fn parse(
    path: &Path,
    bytes: &[u8],
    include_dirs: &[PathBuf],
) -> Result<Setup, SetupError> {
    let at = Location::file(path);
    let mut r = Reader {
        path,
        bytes,
        pos: 0,
    };
    let magic = r.int("magic number")?;
    if magic != MAGIC {
        return Err(SetupError::invalid(
            at,
            format!(
                "setup data file has incorrect magic number {magic} (ACES4's .dat files start with {MAGIC}); is this an ACES4 setup file?"
            ),
        ));
    }
    let version = r.int("version")?;
    if version != VERSION {
        return Err(SetupError::invalid(
            at,
            format!(
                "setup data file has incorrect version {version}; sial reads version {VERSION}"
            ),
        ));
    }
    let dir = base_dir(path);
    let mut setup = Setup::default();

    let n = r.count("number of programs", 4)?;
    for k in 0..n {
        let name = r.string(&format!("program {}", k + 1))?;
        setup
            .programs
            .push(resolve_program(&name, dir, include_dirs, true, &at)?);
    }
    let n = r.count("number of predefined ints", 8)?;
    for _ in 0..n {
        let name = r.string("predefined int name")?;
        let value = r.int(&format!("predefined int {name}"))?;
        insert_name(&mut setup.ints, &name, value, &at, "predefined ints")?;
    }
    let n = r.count("number of predefined scalars", 12)?;
    for _ in 0..n {
        let name = r.string("predefined scalar name")?;
        let value = r.double(&format!("predefined scalar {name}"))?;
        insert_name(&mut setup.scalars, &name, value, &at, "predefined scalars")?;
    }
    let n = r.count("number of segment tables", 8)?;
    for _ in 0..n {
        let code = r.int("index kind of a segment table")?;
        let what = format!("segment table of kind {code}");
        let m = r.count(&what, 4)?;
        let extents: Vec<i64> = (0..m)
            .map(|_| r.int(&what).map(i64::from))
            .collect::<Result<_, _>>()?;
        let Some(kind) = kind_name(code) else {
            if code == 1005 || code == 1007 {
                continue;
            }
            return Err(r.error(
                &what,
                "unknown index kind code (1001 aoindex, 1002 moindex, 1003 moaindex, 1004 mobindex, 1006 laindex)",
            ));
        };
        if setup.segments.contains_key(kind) {
            return Err(r.error(&what, format!("{kind} is given twice")));
        }
        let table = checked_extents(kind, &extents, &at)?;
        setup.segments.insert(kind.to_string(), table);
    }
    let n = r.count("number of predefined arrays", 16)?;
    for _ in 0..n {
        let name = r.string("predefined array name")?;
        let what = format!("predefined array {name}");
        let dims = r.shape(&what)?;
        let shape = checked_shape(&dims, &at, &what)?;
        let count = r.count(&what, 8)?;
        check_data_len(&shape, count, &at, &what)?;
        let data = (0..count)
            .map(|_| r.double(&what))
            .collect::<Result<Vec<_>, _>>()?;
        insert_name(
            &mut setup.arrays,
            &name,
            ArrayData { shape, data },
            &at,
            "predefined arrays",
        )?;
    }
    let n = r.count("number of predefined int arrays", 16)?;
    for _ in 0..n {
        let name = r.string("predefined int array name")?;
        let what = format!("predefined int array {name}");
        let dims = r.shape(&what)?;
        let shape = checked_shape(&dims, &at, &what)?;
        let count = r.count(&what, 4)?;
        check_data_len(&shape, count, &at, &what)?;
        let data = (0..count)
            .map(|_| r.int(&what).map(i64::from))
            .collect::<Result<Vec<_>, _>>()?;
        insert_name(
            &mut setup.int_arrays,
            &name,
            IntArrayData { shape, data },
            &at,
            "predefined int arrays",
        )?;
    }
    let n = r.count("number of configured programs", 8)?;
    for _ in 0..n {
        let program = r.string("configured program name")?;
        let what = format!("configuration of {program}");
        let m = r.count(&what, 8)?;
        let mut entries = BTreeMap::new();
        for _ in 0..m {
            let key = r.string(&what)?;
            let value = r.string(&what)?;
            entries.insert(key, value);
        }
        let stem = program_stem(&program);
        if setup.config.contains_key(&stem) {
            return Err(r.error(&what, format!("program {stem} is configured twice")));
        }
        setup.config.insert(stem, entries);
    }
    if r.pos != bytes.len() {
        return Err(r.error(
            "end of the setup",
            format!("{} bytes follow the last entry", bytes.len() - r.pos),
        ));
    }
    Ok(setup)
}

/// Writes `setup` in the same format (programs by file name `STEM.siox`), so tests can make
/// job files and damage them.
pub fn encode(setup: &Setup) -> Vec<u8> {
    fn int(out: &mut Vec<u8>, v: i32) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    fn string(out: &mut Vec<u8>, s: &str) {
        int(out, s.len() as i32 + 1);
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    }
    fn len(n: usize) -> i32 {
        i32::try_from(n).unwrap_or(i32::MAX)
    }
    let mut out = Vec::new();
    int(&mut out, MAGIC);
    int(&mut out, VERSION);
    int(&mut out, len(setup.programs.len()));
    for p in &setup.programs {
        let stem = p
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default();
        string(&mut out, &format!("{stem}.siox"));
    }
    int(&mut out, len(setup.ints.len()));
    for (k, v) in &setup.ints {
        string(&mut out, k);
        int(&mut out, *v);
    }
    int(&mut out, len(setup.scalars.len()));
    for (k, v) in &setup.scalars {
        string(&mut out, k);
        out.extend_from_slice(&v.to_le_bytes());
    }
    int(&mut out, len(setup.segments.len()));
    for (kind, extents) in &setup.segments {
        let code = (1001..=1006).find(|&c| kind_name(c) == Some(kind.as_str()));
        int(&mut out, code.unwrap_or(0));
        int(&mut out, len(extents.len()));
        for e in extents {
            int(&mut out, i32::try_from(*e).unwrap_or(i32::MAX));
        }
    }
    let shape = |out: &mut Vec<u8>, shape: &[usize]| {
        int(out, len(shape.len()));
        int(out, len(shape.len()));
        for d in shape {
            int(out, len(*d));
        }
    };
    int(&mut out, len(setup.arrays.len()));
    for (name, a) in &setup.arrays {
        string(&mut out, name);
        shape(&mut out, &a.shape);
        int(&mut out, len(a.data.len()));
        for v in &a.data {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    int(&mut out, len(setup.int_arrays.len()));
    for (name, a) in &setup.int_arrays {
        string(&mut out, name);
        shape(&mut out, &a.shape);
        int(&mut out, len(a.data.len()));
        for v in &a.data {
            int(&mut out, i32::try_from(*v).unwrap_or(i32::MAX));
        }
    }
    int(&mut out, len(setup.config.len()));
    for (program, entries) in &setup.config {
        string(&mut out, &format!("{program}.siox"));
        int(&mut out, len(entries.len()));
        for (k, v) in entries {
            string(&mut out, k);
            string(&mut out, v);
        }
    }
    out
}
