//! ACES4's JSON setup format (SIAL-SPEC §9.3), read so that jobs prepared for ACES4 run unchanged:
//!
//! ```json
//! { "SialPrograms": ["scf.siox"],
//!   "PredefinedIntegers": {"norb": 3},
//!   "PredefinedScalars": {"enuc": 9.18},
//!   "SegmentSizeArrays": {"aoindex": [2, 3, 2]},
//!   "PredefinedScalarArrays": {"c": {"Rank": 2, "Dims": [2, 2], "Data": [1, 2, 3, 4]}},
//!   "PredefinedIntegerArrays": {"map": {"Rank": 1, "Dims": [3], "Data": [1, 2, 3]}},
//!   "SialConfiguration": {"scf.siox": {"mode": "fast"}} }
//! ```
//!
//! Programs are named by their compiled file (`scf.siox`); sial compiles sources itself, so each
//! name is looked up as `scf.sialx`, `scf.sial`, then `scf.siox` (see `resolve_program`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    ArrayData, IntArrayData, Location, SEGMENT_KINDS, Setup, SetupError, base_dir, check_data_len,
    checked_extents, checked_kind, checked_shape, insert_name, program_stem, resolve_program,
};

/// Kinds that ACES4 writes into `SegmentSizeArrays` but whose extents are computed, not looked up
/// (simple indices have extent 1, subindices derive theirs from the parent): accepted and ignored.
const IGNORED_KINDS: [&str; 2] = ["simple", "subindex"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSetup {
    #[serde(rename = "SialPrograms", default)]
    programs: Vec<String>,
    #[serde(rename = "PredefinedIntegers", default)]
    ints: BTreeMap<String, i32>,
    #[serde(rename = "PredefinedScalars", default)]
    scalars: BTreeMap<String, f64>,
    #[serde(rename = "SegmentSizeArrays", default)]
    segments: BTreeMap<String, Vec<i64>>,
    #[serde(rename = "PredefinedScalarArrays", default)]
    arrays: BTreeMap<String, RawArray<f64>>,
    #[serde(rename = "PredefinedIntegerArrays", default)]
    int_arrays: BTreeMap<String, RawArray<i64>>,
    #[serde(rename = "SialConfiguration", default)]
    config: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArray<T> {
    #[serde(rename = "Rank")]
    rank: Option<i64>,
    #[serde(rename = "Dims")]
    dims: Vec<i64>,
    #[serde(rename = "Data")]
    data: Vec<T>,
}

/// Parses the JSON setup `text` read from `path`.
pub(super) fn parse(
    path: &Path,
    text: &str,
    include_dirs: &[PathBuf],
) -> Result<Setup, SetupError> {
    let raw: RawSetup = serde_json::from_str(text).map_err(|e| SetupError::Syntax {
        at: Location::File {
            path: path.to_path_buf(),
            line_col: (e.line() > 0).then(|| (e.line(), e.column().max(1))),
        },
        message: format!(
            "{}; fix the setup file (ACES4 JSON format, SIAL-SPEC §9.3)",
            strip_position(&e.to_string())
        ),
    })?;
    let at = Location::file(path);
    let dir = base_dir(path);
    let mut setup = Setup::default();

    for program in &raw.programs {
        setup
            .programs
            .push(resolve_program(program, dir, include_dirs, true, &at)?);
    }
    for (name, value) in raw.ints {
        insert_name(&mut setup.ints, &name, value, &at, "PredefinedIntegers")?;
    }
    for (name, value) in raw.scalars {
        insert_name(&mut setup.scalars, &name, value, &at, "PredefinedScalars")?;
    }
    for (kind, extents) in raw.segments {
        if IGNORED_KINDS.contains(&kind.to_ascii_lowercase().as_str()) {
            continue;
        }
        let lower = checked_kind(&kind, &at).map_err(|_| {
            SetupError::invalid(
                at.clone(),
                format!(
                    "SegmentSizeArrays: unknown index kind {kind:?}; valid kinds: {} (simple and subindex are ignored)",
                    SEGMENT_KINDS.join(", ")
                ),
            )
        })?;
        if setup.segments.contains_key(&lower) {
            return Err(SetupError::invalid(
                at.clone(),
                format!("SegmentSizeArrays: {kind} is given twice; keep one"),
            ));
        }
        let table = checked_extents(&lower, &extents, &at)?;
        setup.segments.insert(lower, table);
    }
    for (name, raw_array) in raw.arrays {
        let key = format!("PredefinedScalarArrays.{name}");
        let (shape, data) = array(&key, &at, raw_array)?;
        let value = ArrayData { shape, data };
        insert_name(
            &mut setup.arrays,
            &name,
            value,
            &at,
            "PredefinedScalarArrays",
        )?;
    }
    for (name, raw_array) in raw.int_arrays {
        let key = format!("PredefinedIntegerArrays.{name}");
        let (shape, data) = array(&key, &at, raw_array)?;
        let value = IntArrayData { shape, data };
        insert_name(
            &mut setup.int_arrays,
            &name,
            value,
            &at,
            "PredefinedIntegerArrays",
        )?;
    }
    for (program, entries) in raw.config {
        let stem = program_stem(&program);
        if setup.config.contains_key(&stem) {
            return Err(SetupError::invalid(
                at.clone(),
                format!(
                    "SialConfiguration: program {stem} is configured twice ({program}); merge the entries"
                ),
            ));
        }
        setup.config.insert(stem, entries);
    }
    Ok(setup)
}

/// Checks one `{"Rank", "Dims", "Data"}` entry: `Rank`, when given, must equal the number of
/// `Dims`, and `Data` (column-major) must fill the shape exactly.
fn array<T>(
    key: &str,
    at: &Location,
    raw: RawArray<T>,
) -> Result<(Vec<usize>, Vec<T>), SetupError> {
    let shape = checked_shape(&raw.dims, at, key)?;
    if let Some(rank) = raw.rank
        && usize::try_from(rank).ok() != Some(shape.len())
    {
        return Err(SetupError::invalid(
            at.clone(),
            format!(
                "{key}: Rank is {rank} but Dims {:?} has {} entries; make them agree",
                raw.dims,
                shape.len()
            ),
        ));
    }
    check_data_len(&shape, raw.data.len(), at, key)?;
    Ok((shape, raw.data))
}

/// serde_json appends " at line L column C" to its messages; the location is already part of the
/// error's [`Location`], so it is dropped from the text.
fn strip_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}
