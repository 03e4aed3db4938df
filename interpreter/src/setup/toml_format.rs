//! sial's own setup format (TOML). Layout, all sections optional:
//!
//! ```toml
//! programs = ["a.sial", "b.sial"]     # a job: run in order (paths relative to this file)
//! [ints]
//! norb = 3
//! [scalars]
//! enuc = 9.18                         # integers are accepted too
//! [segments]
//! aoindex = [2, 3, 2]                 # extents of segments 1, 2, 3
//! [arrays.pa]
//! shape = [2, 2]
//! data = [1.0, 2.0, 3.0, 4.0]         # column-major (first index fastest)
//! [arrays.eri]
//! file = "eri.npy"                    # relative to this file; numpy axis order = SIAL order
//! [int_arrays.map]
//! shape = [3]
//! data = [1, 2, 3]
//! [config.a]                          # program file stem -> key -> string
//! mode = "fast"
//! ```
//!
//! Parsing goes through serde with `deny_unknown_fields`, so a misspelt section or key is reported
//! with its line and column instead of being ignored, and keys and values carry their spans so
//! that later content checks can point at the offending entry too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::{
    ArrayData, IntArrayData, Location, Setup, SetupError, base_dir, check_data_len,
    checked_extents, checked_kind, checked_shape, insert_name, program_stem, read_npy_array,
    read_npy_int_array, resolve_program,
};

type Map<V> = BTreeMap<Spanned<String>, V>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSetup {
    #[serde(default)]
    programs: Vec<Spanned<String>>,
    #[serde(default)]
    ints: Map<i32>,
    #[serde(default)]
    scalars: Map<f64>,
    #[serde(default)]
    segments: Map<Spanned<Vec<i64>>>,
    #[serde(default)]
    arrays: Map<RawArray<f64>>,
    #[serde(default)]
    int_arrays: Map<RawArray<i64>>,
    #[serde(default)]
    config: Map<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArray<T> {
    shape: Option<Spanned<Vec<i64>>>,
    data: Option<Spanned<Vec<T>>>,
    file: Option<Spanned<String>>,
}

/// Parses the TOML setup `text` read from `path`.
pub(super) fn parse(
    path: &Path,
    text: &str,
    include_dirs: &[PathBuf],
) -> Result<Setup, SetupError> {
    let raw: RawSetup = toml::from_str(text).map_err(|e| SetupError::Syntax {
        at: match e.span() {
            Some(span) => Location::at_offset(path, text, span.start),
            None => Location::file(path),
        },
        message: format!(
            "{}; fix the setup file (TOML, see programs/README.md)",
            e.message().trim_end()
        ),
    })?;
    let at = |span: std::ops::Range<usize>| Location::at_offset(path, text, span.start);
    let dir = base_dir(path);
    let mut setup = Setup::default();

    for program in &raw.programs {
        setup.programs.push(resolve_program(
            program.get_ref(),
            dir,
            include_dirs,
            false,
            &at(program.span()),
        )?);
    }
    for (name, value) in raw.ints {
        insert_name(
            &mut setup.ints,
            name.get_ref(),
            value,
            &at(name.span()),
            "[ints]",
        )?;
    }
    for (name, value) in raw.scalars {
        insert_name(
            &mut setup.scalars,
            name.get_ref(),
            value,
            &at(name.span()),
            "[scalars]",
        )?;
    }
    for (kind, extents) in raw.segments {
        let kind_at = at(kind.span());
        let lower = checked_kind(kind.get_ref(), &kind_at)?;
        if setup.segments.contains_key(&lower) {
            return Err(SetupError::invalid(
                kind_at,
                format!("[segments]: {} is given twice; keep one", kind.get_ref()),
            ));
        }
        let table = checked_extents(&lower, extents.get_ref(), &at(extents.span()))?;
        setup.segments.insert(lower, table);
    }
    for (name, raw_array) in raw.arrays {
        let key = format!("arrays.{}", name.get_ref());
        let (shape, data) = array(path, text, &key, &at(name.span()), raw_array, |file| {
            read_npy_array(file).map(|a| (a.shape, a.data))
        })?;
        insert_name(
            &mut setup.arrays,
            name.get_ref(),
            ArrayData { shape, data },
            &at(name.span()),
            "[arrays]",
        )?;
    }
    for (name, raw_array) in raw.int_arrays {
        let key = format!("int_arrays.{}", name.get_ref());
        let (shape, data) = array(path, text, &key, &at(name.span()), raw_array, |file| {
            read_npy_int_array(file).map(|a| (a.shape, a.data))
        })?;
        insert_name(
            &mut setup.int_arrays,
            name.get_ref(),
            IntArrayData { shape, data },
            &at(name.span()),
            "[int_arrays]",
        )?;
    }
    for (program, entries) in raw.config {
        let stem = program_stem(program.get_ref());
        if setup.config.contains_key(&stem) {
            return Err(SetupError::invalid(
                at(program.span()),
                format!(
                    "[config]: program {stem} is configured twice ({}); merge the tables",
                    program.get_ref()
                ),
            ));
        }
        setup.config.insert(stem, entries);
    }
    Ok(setup)
}

/// Builds one `[arrays.NAME]` / `[int_arrays.NAME]` entry: inline `shape` + `data`, or `file`
/// (a `.npy` file read by `read_file`) with an optional `shape` that must agree with the file.
fn array<T>(
    path: &Path,
    text: &str,
    key: &str,
    name_at: &Location,
    raw: RawArray<T>,
    read_file: impl Fn(&Path) -> Result<(Vec<usize>, Vec<T>), SetupError>,
) -> Result<(Vec<usize>, Vec<T>), SetupError> {
    let at = |span: std::ops::Range<usize>| Location::at_offset(path, text, span.start);
    let shape = match &raw.shape {
        Some(shape) => Some(checked_shape(shape.get_ref(), &at(shape.span()), key)?),
        None => None,
    };
    match (raw.data, raw.file) {
        (Some(data), None) => {
            let Some(shape) = shape else {
                return Err(SetupError::invalid(
                    name_at.clone(),
                    format!(
                        "{key}: `data` needs a `shape` (the full extent of each dimension), e.g. shape = [7, 7]"
                    ),
                ));
            };
            let data_at = at(data.span());
            let data = data.into_inner();
            check_data_len(&shape, data.len(), &data_at, key)?;
            Ok((shape, data))
        }
        (None, Some(file)) => {
            let file_at = at(file.span());
            let npy_path = base_dir(path).join(file.get_ref());
            let (file_shape, data) = read_file(&npy_path).map_err(|inner| SetupError::Entry {
                at: file_at.clone(),
                key: key.to_string(),
                inner: Box::new(inner),
            })?;
            if let (Some(shape), Some(raw_shape)) = (shape, &raw.shape)
                && shape != file_shape
            {
                return Err(SetupError::invalid(
                    at(raw_shape.span()),
                    format!(
                        "{key}: shape {shape:?} does not match the shape {file_shape:?} of {}; remove `shape` or fix it",
                        npy_path.display()
                    ),
                ));
            }
            Ok((file_shape, data))
        }
        (Some(_), Some(_)) => Err(SetupError::invalid(
            name_at.clone(),
            format!("{key}: give either `data` (with `shape`) or `file`, not both"),
        )),
        (None, None) => Err(SetupError::invalid(
            name_at.clone(),
            format!(
                "{key}: no values; give `shape` and `data` (column-major), or `file` = \"NAME.npy\""
            ),
        )),
    }
}
