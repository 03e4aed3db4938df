//! Job input (SIAL-SPEC §9): the programs of a job, predefined ints and scalars, segment tables
//! per index kind, predefined arrays and per-program configuration.
//!
//! Two file formats are read, chosen by extension:
//! * `.toml` — this project's own format (see `programs/README.md`), readable and writable by hand,
//!   with large arrays kept in numpy `.npy` files beside it (module `toml_format`);
//! * `.json` — ACES4's JSON setup format (SIAL-SPEC §9.3), so existing ACES4 jobs run unchanged
//!   (module `json_format`);
//! * `.dat` — ACES4's binary setup format (SIAL-SPEC §9.2), the form of ACES4's own test jobs
//!   (module `dat_format`).
//!
//! Command-line overrides (`--set name=value`, `--segments kind=e1,e2,...`) are applied on top with
//! [`Setup::set`] and [`Setup::set_segments`], so a parameter study does not need a new file per run.
//!
//! Every error names the file (and the key, with line and column where the format allows) and says
//! how to fix it: setup files are written by people, and the runtime's own "missing predefined
//! int" failure would come much later and without the file's name.

mod dat_format;
mod json_format;
mod npy;
mod toml_format;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

pub use dat_format::encode as encode_dat;
pub use npy::{read_npy_array, read_npy_int_array};

/// A predefined array: shape and column-major data (first index fastest).
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayData {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

/// A predefined int array (available to super instructions only).
#[derive(Clone, Debug, PartialEq)]
pub struct IntArrayData {
    pub shape: Vec<usize>,
    pub data: Vec<i64>,
}

/// Everything a job needs besides the programs' code.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Setup {
    /// The programs of the job, in order: paths of `.sial`/`.sialx` sources or bytecode files.
    pub programs: Vec<PathBuf>,
    pub ints: BTreeMap<String, i32>,
    pub scalars: BTreeMap<String, f64>,
    /// Segment extents per index kind name (`aoindex`, `moindex`, `moaindex`, `mobindex`,
    /// `laindex`); segment 1 first.
    pub segments: BTreeMap<String, Vec<usize>>,
    pub arrays: BTreeMap<String, ArrayData>,
    pub int_arrays: BTreeMap<String, IntArrayData>,
    /// Per-program configuration: program file stem -> key -> value.
    pub config: BTreeMap<String, BTreeMap<String, String>>,
}

/// The index kinds that take their segment extents from the setup (SIAL-SPEC §3.1). `index`
/// (simple) and `subindex` have computed extents and no table.
pub const SEGMENT_KINDS: [&str; 5] = ["aoindex", "moindex", "moaindex", "mobindex", "laindex"];

/// Where in the input an error was found: a file, optionally with a 1-based line and column, or a
/// command-line option. Displayed as `path:line:column`, the form editors and terminals link to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    File {
        path: PathBuf,
        /// 1-based line and column, when the format reports them.
        line_col: Option<(usize, usize)>,
    },
    /// A command-line option, e.g. `--set norb=x`.
    CommandLine(String),
}

impl Location {
    fn file(path: &Path) -> Location {
        Location::File {
            path: path.to_path_buf(),
            line_col: None,
        }
    }

    /// The location of byte offset `offset` of `text` (the contents of `path`).
    fn at_offset(path: &Path, text: &str, offset: usize) -> Location {
        let (line, column) = line_col(text, offset);
        Location::File {
            path: path.to_path_buf(),
            line_col: Some((line, column)),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File {
                path,
                line_col: None,
            } => write!(f, "{}", path.display()),
            Location::File {
                path,
                line_col: Some((line, column)),
            } => write!(f, "{}:{line}:{column}", path.display()),
            Location::CommandLine(option) => write!(f, "{option}"),
        }
    }
}

/// 1-based line and column (in characters) of byte offset `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Why job input could not be loaded. Each message names the file or option (and the key) and
/// says what to change.
#[derive(Debug, Error)]
pub enum SetupError {
    /// The setup file (or a file it references) could not be read.
    #[error("cannot read {}: {source}; check that the path is right", .file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    /// The setup file's extension names no known format.
    #[error(
        "{}: unknown setup file format; use NAME.toml (sial's format), NAME.json or NAME.dat (ACES4's JSON and binary formats)",
        .path.display()
    )]
    UnknownFormat { path: PathBuf },
    /// Malformed TOML or JSON, or a value of the wrong type, as reported by the parser.
    #[error("{at}: {message}")]
    Syntax { at: Location, message: String },
    /// Well-formed input whose content is wrong (bad kind, wrong data length, ...).
    #[error("{at}: {message}")]
    Invalid { at: Location, message: String },
    /// A `.npy` file that cannot be used (bad header, unsupported dtype, truncated data).
    #[error("{}: {message}", .file.display())]
    Npy { file: PathBuf, message: String },
    /// An entry of a setup file whose referenced file failed to load (`inner` says why).
    #[error("{at}: {key}: {inner}")]
    Entry {
        at: Location,
        key: String,
        inner: Box<SetupError>,
    },
    /// A program of the job's program list was not found in any directory searched.
    #[error(
        "{at}: program {name} not found (looked for {}); put it beside the setup file or add its directory to the include path",
        .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    ProgramNotFound {
        at: Location,
        name: String,
        searched: Vec<PathBuf>,
    },
}

impl SetupError {
    fn invalid(at: Location, message: impl Into<String>) -> SetupError {
        SetupError::Invalid {
            at,
            message: message.into(),
        }
    }
}

/// Loads the job input in `path`; the format is chosen by the extension (`.toml` or `.json`).
/// `include_dirs` are searched, in order, for programs not found beside the setup file (the same
/// search path as for imports, so a job can name library programs by file name only).
pub fn load(path: &Path, include_dirs: &[PathBuf]) -> Result<Setup, SetupError> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let read_error = |source| SetupError::Read {
        file: path.to_path_buf(),
        source,
    };
    let parse: fn(&Path, &str, &[PathBuf]) -> Result<Setup, SetupError> = match extension.as_deref()
    {
        Some("toml") => toml_format::parse,
        Some("json") => json_format::parse,
        Some("dat") => {
            let bytes = std::fs::read(path).map_err(read_error)?;
            return dat_format::parse(path, &bytes, include_dirs);
        }
        _ => {
            return Err(SetupError::UnknownFormat {
                path: path.to_path_buf(),
            });
        }
    };
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    parse(path, &text, include_dirs)
}

/// The setup file `NAME.toml` beside the program `NAME.sial` (or `NAME.sialx` / `NAME.siox`), if
/// it exists: the convention that lets `sial run prog.sial` find its data without an option.
pub fn beside(program: &Path) -> Option<PathBuf> {
    let extension = program.extension()?.to_str()?.to_ascii_lowercase();
    if !matches!(extension.as_str(), "sial" | "sialx" | "siox") {
        return None;
    }
    let candidate = program.with_extension("toml");
    candidate.is_file().then_some(candidate)
}

impl Setup {
    /// Applies `--set name=value`. An integer value is stored both as an int and as a scalar, since
    /// the option cannot know whether the program declares `predefined int name` or `predefined
    /// scalar name`; a floating-point value (plain or with exponent) is stored as a scalar and
    /// removes an int of the same name, so that a stale int from the setup file is not used
    /// silently.
    pub fn set(&mut self, assignment: &str) -> Result<(), SetupError> {
        let at = Location::CommandLine(format!("--set {assignment}"));
        let Some((name, value)) = assignment.split_once('=') else {
            return Err(SetupError::invalid(
                at,
                "expected name=value, e.g. --set norb=3 or --set damp=0.5",
            ));
        };
        let name = checked_name(name.trim(), &at, "--set")?;
        let value = value.trim();
        if let Ok(int) = value.parse::<i64>() {
            let Ok(int32) = i32::try_from(int) else {
                return Err(SetupError::invalid(
                    at,
                    format!(
                        "{value} does not fit a 32-bit int; to set a scalar, write it with a decimal point ({value}.0)"
                    ),
                ));
            };
            self.ints.insert(name.clone(), int32);
            self.scalars.insert(name, f64::from(int32));
            return Ok(());
        }
        match parse_float(value) {
            Some(x) => {
                self.ints.remove(&name);
                self.scalars.insert(name, x);
                Ok(())
            }
            None => Err(SetupError::invalid(
                at,
                format!("{value:?} is not a number; give an int (3) or a scalar (0.5, 1e-6)"),
            )),
        }
    }

    /// Applies `--segments kind=e1,e2,...`: replaces the segment table of one index kind, with
    /// the same checks as the `[segments]` section of a setup file.
    pub fn set_segments(&mut self, spec: &str) -> Result<(), SetupError> {
        let at = Location::CommandLine(format!("--segments {spec}"));
        let Some((kind, list)) = spec.split_once('=') else {
            return Err(SetupError::invalid(
                at,
                "expected kind=e1,e2,..., e.g. --segments aoindex=2,3,2",
            ));
        };
        let kind = checked_kind(kind.trim(), &at)?;
        let mut extents = Vec::new();
        for item in list.split(',') {
            let item = item.trim();
            let Ok(extent) = item.parse::<i64>() else {
                return Err(SetupError::invalid(
                    at,
                    format!(
                        "segment extent {item:?} is not an integer; give positive integers separated by commas"
                    ),
                ));
            };
            extents.push(extent);
        }
        let extents = checked_extents(&kind, &extents, &at)?;
        self.segments.insert(kind, extents);
        Ok(())
    }
}

/// Parses a floating-point number written the way people write them (`0.5`, `.5`, `-2`, `1e-6`,
/// `2.5E+3`). Rust's parser would also take `inf`, `nan` and `infinity`, which are never meant
/// as setup values, so only digits, sign, point and exponent are allowed.
fn parse_float(text: &str) -> Option<f64> {
    let plausible = text.bytes().any(|b| b.is_ascii_digit())
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !plausible {
        return None;
    }
    text.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// Lower-cases `name` (SIAL folds names to lower case, §1.3) and checks that it is a SIAL
/// identifier (§1.4: a letter, then letters, digits, `_` or `.`), which catches names that could
/// never match a declaration, such as `eri-mo`.
fn checked_name(name: &str, at: &Location, section: &str) -> Result<String, SetupError> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !valid {
        return Err(SetupError::invalid(
            at.clone(),
            format!(
                "{section}: {name:?} is not a SIAL name (a letter followed by letters, digits, '_' or '.'); use the name declared in the program"
            ),
        ));
    }
    Ok(name.to_ascii_lowercase())
}

/// Inserts `value` under the lower-cased `name`, rejecting a second spelling of a name already
/// present (e.g. `Norb` and `norb`): after case folding they are the same SIAL name and one would
/// silently win.
fn insert_name<V>(
    map: &mut BTreeMap<String, V>,
    name: &str,
    value: V,
    at: &Location,
    section: &str,
) -> Result<(), SetupError> {
    let key = checked_name(name, at, section)?;
    if map.contains_key(&key) {
        return Err(SetupError::invalid(
            at.clone(),
            format!(
                "{section}: {name:?} is given twice (SIAL names are case-insensitive, so it is the same name as {key:?}); keep one"
            ),
        ));
    }
    map.insert(key, value);
    Ok(())
}

/// Checks a segment-table kind name and returns it lower-cased.
fn checked_kind(kind: &str, at: &Location) -> Result<String, SetupError> {
    let lower = kind.to_ascii_lowercase();
    if SEGMENT_KINDS.contains(&lower.as_str()) {
        Ok(lower)
    } else {
        Err(SetupError::invalid(
            at.clone(),
            format!(
                "unknown index kind {kind:?} for a segment table; valid kinds: {}",
                SEGMENT_KINDS.join(", ")
            ),
        ))
    }
}

/// Checks segment extents: a segment table needs at least one segment and every extent must be
/// positive (a zero extent would make empty blocks that the runtime cannot address).
fn checked_extents(kind: &str, extents: &[i64], at: &Location) -> Result<Vec<usize>, SetupError> {
    if extents.is_empty() {
        return Err(SetupError::invalid(
            at.clone(),
            format!(
                "segment table {kind} is empty; give the extent of each segment, segment 1 first"
            ),
        ));
    }
    extents
        .iter()
        .enumerate()
        .map(|(i, &extent)| {
            usize::try_from(extent).ok().filter(|&e| e > 0).ok_or_else(|| {
                SetupError::invalid(
                    at.clone(),
                    format!(
                        "segment {} of {kind} has extent {extent}; segment extents must be positive integers",
                        i + 1
                    ),
                )
            })
        })
        .collect()
}

/// Checks an array shape read from a setup file: no negative extents, and the element count must
/// be representable.
fn checked_shape(shape: &[i64], at: &Location, key: &str) -> Result<Vec<usize>, SetupError> {
    let shape = shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|_| {
            SetupError::invalid(
                at.clone(),
                format!("{key}: shape {shape:?} has a negative extent; extents must be >= 0"),
            )
        })?;
    if shape.is_empty() {
        return Err(SetupError::invalid(
            at.clone(),
            format!(
                "{key}: shape is empty; give the full extent of each dimension, e.g. shape = [7, 7]"
            ),
        ));
    }
    element_count(&shape).ok_or_else(|| {
        SetupError::invalid(
            at.clone(),
            format!("{key}: shape {shape:?} has too many elements"),
        )
    })?;
    Ok(shape)
}

/// The number of elements of `shape`, or `None` on overflow.
fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Checks that `len` data values fill `shape` exactly.
fn check_data_len(shape: &[usize], len: usize, at: &Location, key: &str) -> Result<(), SetupError> {
    let expected = element_count(shape).unwrap_or(usize::MAX);
    if expected == len {
        Ok(())
    } else {
        Err(SetupError::invalid(
            at.clone(),
            format!(
                "{key}: data has {len} values but shape {shape:?} needs {expected}; data lists all elements in column-major order (first index fastest)"
            ),
        ))
    }
}

/// The configuration key of a program: its file stem, so `foo.siox`, `foo.sial`, `dir/foo.sial`
/// and `foo` all name the configuration of program file `foo`.
fn program_stem(name: &str) -> String {
    let file_name = Path::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(name);
    let file = Path::new(file_name);
    match file.extension().and_then(|e| e.to_str()) {
        Some(ext) if matches!(ext.to_ascii_lowercase().as_str(), "siox" | "sial" | "sialx") => file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(file_name)
            .to_string(),
        _ => file_name.to_string(),
    }
}

/// Finds program `name` of a job's program list in the setup file's directory, then in
/// `include_dirs` in order. ACES4's JSON lists compiled files (`foo.siox`), but sial compiles
/// sources itself, so with `from_siox` a `.siox` name is looked up as `foo.sialx`, then
/// `foo.sial`, then `foo.siox` in each directory; any other name is looked up as written.
fn resolve_program(
    name: &str,
    setup_dir: &Path,
    include_dirs: &[PathBuf],
    from_siox: bool,
    at: &Location,
) -> Result<PathBuf, SetupError> {
    let file = Path::new(name);
    let is_siox = file
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("siox"));
    let names: Vec<PathBuf> = if from_siox && is_siox {
        vec![
            file.with_extension("sialx"),
            file.with_extension("sial"),
            file.to_path_buf(),
        ]
    } else {
        vec![file.to_path_buf()]
    };
    let mut searched = Vec::new();
    for dir in std::iter::once(setup_dir).chain(include_dirs.iter().map(PathBuf::as_path)) {
        for candidate in &names {
            let path = dir.join(candidate);
            if path.is_file() {
                return Ok(path);
            }
            searched.push(path);
        }
        if file.is_absolute() {
            break;
        }
    }
    Err(SetupError::ProgramNotFound {
        at: at.clone(),
        name: name.to_string(),
        searched,
    })
}

/// The directory that relative paths in the setup file `path` are relative to.
fn base_dir(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}
