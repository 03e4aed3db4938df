//! Tests of setup loading: every file format on small files written to a temporary directory,
//! `.npy` layout conversion, every error path, command-line overrides, and the repository's own
//! setup files and reference data.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A fresh directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("sial-setup-test-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bytes of a version 1.0 `.npy` file, as numpy writes them: header padded with spaces and a
/// newline so that the data starts at a multiple of 64 bytes.
fn npy_bytes(descr: &str, fortran_order: bool, shape: &[usize], body: &[u8]) -> Vec<u8> {
    let dims = match shape {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let order = if fortran_order { "True" } else { "False" };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {dims}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    assert_eq!(bytes.len() % 64, 0);
    bytes.extend_from_slice(body);
    bytes
}

fn f8_body(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn load_err(path: &Path) -> String {
    match load(path, &[]) {
        Ok(setup) => panic!("{} loaded but should fail: {setup:?}", path.display()),
        Err(e) => e.to_string(),
    }
}

/// Asserts that `message` contains every one of `parts`.
fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "message {message:?} does not mention {part:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// TOML format

#[test]
fn toml_loads_every_section() {
    let dir = TempDir::new("toml-all");
    dir.write("a.sial", "sial a\nendsial a\n");
    dir.write("sub/b.sial", "sial b\nendsial b\n");
    let path = dir.write(
        "job.toml",
        r#"# a job
programs = ["a.sial", "sub/b.sial"]
[ints]
NORB = 3
neg = -4
[scalars]
enuc = 9.25
whole = 2
tiny = 1e-6
[segments]
aoindex = [2, 3, 2]
MOindex = [5]
[arrays.Pa]
shape = [2, 3]
data = [1, 2.5, 3, 4, 5, 6]
[int_arrays.map]
shape = [3]
data = [7, -8, 9]
[config.a]
mode = "fast"
[config."sub/b.sial"]
x = "1"
"#,
    );
    let setup = load(&path, &[]).unwrap();
    assert_eq!(
        setup.programs,
        vec![dir.path().join("a.sial"), dir.path().join("sub/b.sial")]
    );
    assert_eq!(setup.ints.get("norb"), Some(&3));
    assert_eq!(setup.ints.get("neg"), Some(&-4));
    assert_eq!(setup.scalars.get("enuc"), Some(&9.25));
    assert_eq!(setup.scalars.get("whole"), Some(&2.0));
    assert_eq!(setup.scalars.get("tiny"), Some(&1e-6));
    assert_eq!(setup.segments.get("aoindex"), Some(&vec![2, 3, 2]));
    assert_eq!(setup.segments.get("moindex"), Some(&vec![5]));
    assert_eq!(
        setup.arrays.get("pa"),
        Some(&ArrayData {
            shape: vec![2, 3],
            data: vec![1.0, 2.5, 3.0, 4.0, 5.0, 6.0]
        })
    );
    assert_eq!(
        setup.int_arrays.get("map"),
        Some(&IntArrayData {
            shape: vec![3],
            data: vec![7, -8, 9]
        })
    );
    assert_eq!(setup.config["a"]["mode"], "fast");
    // The configuration key is the file stem, whatever the table was called.
    assert_eq!(setup.config["b"]["x"], "1");
}

#[test]
fn toml_empty_file_is_an_empty_setup() {
    let dir = TempDir::new("toml-empty");
    let path = dir.write("empty.toml", "# nothing\n");
    assert_eq!(load(&path, &[]).unwrap(), Setup::default());
}

#[test]
fn toml_programs_fall_back_to_include_dirs() {
    let dir = TempDir::new("toml-include");
    let lib = dir.path().join("lib");
    dir.write("lib/shared.sial", "sial shared\nendsial shared\n");
    let path = dir.write("job.toml", "programs = [\"shared.sial\"]\n");
    let setup = load(&path, std::slice::from_ref(&lib)).unwrap();
    assert_eq!(setup.programs, vec![lib.join("shared.sial")]);
    let message = load_err(&path);
    assert_mentions(
        &message,
        &["job.toml:1:", "shared.sial not found", "include path"],
    );
}

#[test]
fn npy_c_order_is_transposed_and_fortran_order_kept() {
    // Logical 2x3 array a[i][j] = 10*i + j (numpy indices).
    let logical = |i: usize, j: usize| (10 * i + j) as f64;
    let c_order: Vec<f64> = (0..2)
        .flat_map(|i| (0..3).map(move |j| logical(i, j)))
        .collect();
    let f_order: Vec<f64> = (0..3)
        .flat_map(|j| (0..2).map(move |i| logical(i, j)))
        .collect();
    assert_ne!(c_order, f_order);
    let dir = TempDir::new("npy-order");
    dir.write(
        "c.npy",
        npy_bytes("<f8", false, &[2, 3], &f8_body(&c_order)),
    );
    dir.write("f.npy", npy_bytes("<f8", true, &[2, 3], &f8_body(&f_order)));
    let path = dir.write(
        "s.toml",
        "[arrays.c]\nfile = \"c.npy\"\n[arrays.f]\nfile = \"f.npy\"\nshape = [2, 3]\n",
    );
    let setup = load(&path, &[]).unwrap();
    for name in ["c", "f"] {
        let array = &setup.arrays[name];
        assert_eq!(array.shape, vec![2, 3], "{name}");
        for j in 0..3 {
            for i in 0..2 {
                // Column-major: SIAL element (i+1, j+1) is at i + 2*j.
                assert_eq!(array.data[i + 2 * j], logical(i, j), "{name}[{i},{j}]");
            }
        }
    }
}

#[test]
fn npy_other_dtypes_and_ranks() {
    let dir = TempDir::new("npy-dtypes");
    // float32, 1-D.
    let f4: Vec<u8> = [1.5f32, -2.0, 0.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    dir.write("f4.npy", npy_bytes("<f4", false, &[3], &f4));
    // int32 C-order 2x2 [[1,2],[3,4]] -> column-major 1,3,2,4.
    let i4: Vec<u8> = [1i32, 2, 3, 4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    dir.write("i4.npy", npy_bytes("<i4", false, &[2, 2], &i4));
    // int64 C-order 2x3x2: element (i,j,k) = 100i + 10j + k.
    let i8_values: Vec<i64> = (0..2)
        .flat_map(|i| (0..3).flat_map(move |j| (0..2).map(move |k| 100 * i + 10 * j + k)))
        .collect();
    let i8: Vec<u8> = i8_values.iter().flat_map(|v| v.to_le_bytes()).collect();
    dir.write("i8.npy", npy_bytes("<i8", false, &[2, 3, 2], &i8));
    let path = dir.write(
        "s.toml",
        "[arrays.v]\nfile = \"f4.npy\"\n[int_arrays.m]\nfile = \"i4.npy\"\n[int_arrays.t]\nfile = \"i8.npy\"\n",
    );
    let setup = load(&path, &[]).unwrap();
    assert_eq!(setup.arrays["v"].data, vec![1.5, -2.0, 0.25]);
    assert_eq!(setup.int_arrays["m"].data, vec![1, 3, 2, 4]);
    let t = &setup.int_arrays["t"];
    assert_eq!(t.shape, vec![2, 3, 2]);
    for k in 0..2 {
        for j in 0..3 {
            for i in 0..2 {
                assert_eq!(
                    t.data[i + 2 * j + 6 * k],
                    (100 * i + 10 * j + k) as i64,
                    "t[{i},{j},{k}]"
                );
            }
        }
    }
}

#[test]
fn toml_syntax_error_names_file_line_and_column() {
    let dir = TempDir::new("toml-syntax");
    let path = dir.write("bad.toml", "[ints]\nnorb = 3\nnocc = = 4\n");
    let message = load_err(&path);
    assert_mentions(&message, &["bad.toml:3:"]);
}

#[test]
fn toml_unknown_keys_are_reported() {
    let dir = TempDir::new("toml-unknown");
    let path = dir.write("top.toml", "[ints]\nn = 1\n[segmnets]\naoindex = [1]\n");
    assert_mentions(&load_err(&path), &["top.toml:3:", "segmnets"]);
    let path = dir.write("arr.toml", "[arrays.a]\nshape = [1]\ndta = [1.0]\n");
    assert_mentions(&load_err(&path), &["arr.toml:3:", "dta"]);
    let path = dir.write("prog.toml", "program = [\"a.sial\"]\n");
    assert_mentions(&load_err(&path), &["prog.toml:1:", "program"]);
}

#[test]
fn toml_wrong_value_types_are_reported_with_position() {
    let dir = TempDir::new("toml-types");
    let path = dir.write("big.toml", "[ints]\nn = 3000000000\n");
    assert_mentions(&load_err(&path), &["big.toml:2:"]);
    let path = dir.write("float.toml", "[ints]\nn = 1.5\n");
    assert_mentions(&load_err(&path), &["float.toml:2:"]);
    let path = dir.write("cfg.toml", "[config.p]\nkey = 3\n");
    assert_mentions(&load_err(&path), &["cfg.toml:2:"]);
    let path = dir.write("ia.toml", "[int_arrays.m]\nshape = [1]\ndata = [1.5]\n");
    assert_mentions(&load_err(&path), &["ia.toml:3:"]);
}

#[test]
fn toml_wrong_data_length() {
    let dir = TempDir::new("toml-len");
    let path = dir.write(
        "len.toml",
        "[arrays.a]\nshape = [2, 2]\ndata = [1.0, 2.0, 3.0]\n",
    );
    assert_mentions(
        &load_err(&path),
        &["len.toml:3:", "arrays.a", "3 values", "needs 4"],
    );
    let path = dir.write("ilen.toml", "[int_arrays.m]\nshape = [3]\ndata = [1]\n");
    assert_mentions(&load_err(&path), &["ilen.toml:3:", "int_arrays.m"]);
}

#[test]
fn toml_array_entry_shape_errors() {
    let dir = TempDir::new("toml-arr");
    let path = dir.write("noshape.toml", "[arrays.a]\ndata = [1.0]\n");
    assert_mentions(&load_err(&path), &["noshape.toml:1:", "needs a `shape`"]);
    let path = dir.write("none.toml", "[arrays.a]\nshape = [1]\n");
    assert_mentions(&load_err(&path), &["none.toml:1:", "arrays.a", "no values"]);
    dir.write("one.npy", npy_bytes("<f8", false, &[1], &f8_body(&[1.0])));
    let path = dir.write(
        "both.toml",
        "[arrays.a]\nshape = [1]\ndata = [1.0]\nfile = \"one.npy\"\n",
    );
    assert_mentions(&load_err(&path), &["both.toml:1:", "not both"]);
    let path = dir.write("neg.toml", "[arrays.a]\nshape = [-1]\ndata = []\n");
    assert_mentions(&load_err(&path), &["neg.toml:2:", "negative"]);
    let path = dir.write(
        "mismatch.toml",
        "[arrays.a]\nshape = [2]\nfile = \"one.npy\"\n",
    );
    assert_mentions(
        &load_err(&path),
        &["mismatch.toml:2:", "[2]", "[1]", "one.npy"],
    );
}

#[test]
fn toml_bad_segment_kind_and_extents() {
    let dir = TempDir::new("toml-seg");
    let path = dir.write("kind.toml", "[segments]\naoindx = [1, 2]\n");
    assert_mentions(
        &load_err(&path),
        &[
            "kind.toml:2:",
            "aoindx",
            "aoindex, moindex, moaindex, mobindex, laindex",
        ],
    );
    let path = dir.write("zero.toml", "[segments]\naoindex = [1, 0]\n");
    assert_mentions(
        &load_err(&path),
        &["zero.toml:2:", "segment 2 of aoindex", "positive"],
    );
    let path = dir.write("neg.toml", "[segments]\nmoindex = [-3]\n");
    assert_mentions(&load_err(&path), &["neg.toml:2:", "-3"]);
    let path = dir.write("empty.toml", "[segments]\nmoindex = []\n");
    assert_mentions(&load_err(&path), &["empty.toml:2:", "empty"]);
    let path = dir.write("twice.toml", "[segments]\nmoindex = [1]\nMOINDEX = [2]\n");
    assert_mentions(&load_err(&path), &["twice.toml:", "twice"]);
}

#[test]
fn toml_names_fold_case_and_must_be_identifiers() {
    let dir = TempDir::new("toml-names");
    let path = dir.write("dup.toml", "[ints]\nNorb = 1\nnorb = 2\n");
    assert_mentions(&load_err(&path), &["dup.toml:", "case-insensitive"]);
    let path = dir.write("bad.toml", "[arrays.eri-mo]\nshape = [1]\ndata = [1.0]\n");
    assert_mentions(
        &load_err(&path),
        &["bad.toml:1:", "\"eri-mo\"", "SIAL name"],
    );
    let path = dir.write("digit.toml", "[scalars]\n1x = 1.0\n");
    assert_mentions(&load_err(&path), &["digit.toml:2:", "\"1x\""]);
}

#[test]
fn npy_bad_dtypes_are_reported() {
    let dir = TempDir::new("npy-dtype");
    dir.write("c16.npy", npy_bytes("<c16", false, &[1], &[0u8; 16]));
    dir.write("be.npy", npy_bytes(">f8", false, &[1], &[0u8; 8]));
    dir.write("i4.npy", npy_bytes("<i4", false, &[1], &[0u8; 4]));
    dir.write("f8.npy", npy_bytes("<f8", false, &[1], &[0u8; 8]));
    for (table, file, dtype) in [
        ("arrays", "c16.npy", "<c16"),
        ("arrays", "be.npy", ">f8"),
        ("arrays", "i4.npy", "<i4"),
        ("int_arrays", "f8.npy", "<f8"),
    ] {
        let path = dir.write("s.toml", format!("[{table}.a]\nfile = \"{file}\"\n"));
        assert_mentions(
            &load_err(&path),
            &[
                "s.toml:2:",
                &format!("{table}.a"),
                file,
                dtype,
                "not supported",
            ],
        );
    }
}

#[test]
fn npy_malformed_files_are_reported() {
    let dir = TempDir::new("npy-bad");
    dir.write("text.npy", "not numpy");
    let mut short = npy_bytes("<f8", false, &[3], &f8_body(&[1.0, 2.0, 3.0]));
    short.truncate(short.len() - 4);
    dir.write("short.npy", short);
    dir.write(
        "long.npy",
        npy_bytes("<f8", false, &[1], &f8_body(&[1.0, 2.0])),
    );
    let mut v9 = npy_bytes("<f8", false, &[1], &f8_body(&[1.0]));
    v9[6] = 9;
    dir.write("v9.npy", v9);
    dir.write("scalar.npy", npy_bytes("<f8", false, &[], &f8_body(&[1.0])));
    for (file, what) in [
        ("text.npy", "not a .npy file"),
        ("short.npy", "truncated or corrupt"),
        ("long.npy", "truncated or corrupt"),
        ("v9.npy", "version 9.0"),
        ("scalar.npy", "0-dimensional"),
    ] {
        let path = dir.write("s.toml", format!("[arrays.a]\nfile = \"{file}\"\n"));
        assert_mentions(&load_err(&path), &["s.toml:2:", file, what]);
    }
}

#[test]
fn missing_npy_file_names_both_files() {
    let dir = TempDir::new("npy-missing");
    let path = dir.write("s.toml", "[arrays.eri]\nfile = \"data/eri.npy\"\n");
    let message = load_err(&path);
    assert_mentions(
        &message,
        &["s.toml:2:", "arrays.eri", "cannot read", "data/eri.npy"],
    );
}

#[test]
fn unknown_extension_and_missing_file() {
    let dir = TempDir::new("ext");
    let path = dir.write("setup.txt", "x");
    assert_mentions(&load_err(&path), &["setup.txt", ".toml", ".json", ".dat"]);
    let missing = dir.path().join("absent.toml");
    assert_mentions(&load_err(&missing), &["absent.toml", "cannot read"]);
}

#[test]
fn truncated_toml_never_panics() {
    let text = "programs = []\n[ints]\nn = 3\n[segments]\naoindex = [2, 3]\n[arrays.a]\nshape = [2]\ndata = [1.0, 2.0]\n[config.p]\nk = \"v\"\n";
    let dir = TempDir::new("toml-prefix");
    for end in 0..=text.len() {
        let path = dir.write("p.toml", &text[..end]);
        let _ = load(&path, &[]);
    }
    let path = dir.write("p.toml", text);
    assert!(load(&path, &[]).is_ok());
}

// ---------------------------------------------------------------------------------------------
// ACES4 binary format (.dat)

/// A setup with every section, as a `.dat` job would hold it.
fn full_dat_setup(dir: &TempDir) -> Setup {
    dir.write("scf.sialx", "");
    dir.write("tran.sial", "");
    let mut s = Setup {
        programs: vec![dir.path().join("scf.sialx"), dir.path().join("tran.sial")],
        ..Setup::default()
    };
    s.ints.insert("norb".into(), 3);
    s.ints.insert("nshells".into(), 2);
    s.scalars.insert("scf_conv".into(), 1e-10);
    s.scalars.insert("damp".into(), 0.19999998807907104);
    s.segments.insert("aoindex".into(), vec![11]);
    s.segments.insert("moaindex".into(), vec![5, 6]);
    s.arrays.insert(
        "coords".into(),
        ArrayData {
            shape: vec![3, 2],
            data: vec![0.0, -0.0, 1.6455, 0.0, 0.0, -0.0873],
        },
    );
    s.arrays.insert(
        "clp".into(),
        ArrayData {
            shape: vec![0],
            data: vec![],
        },
    );
    s.int_arrays.insert(
        "end_nfps".into(),
        IntArrayData {
            shape: vec![3],
            data: vec![2, 5, 11],
        },
    );
    let mut conf = BTreeMap::new();
    conf.insert("no_servers".to_string(), "f".to_string());
    s.config.insert("scf".into(), conf);
    s
}

#[test]
fn dat_round_trip_keeps_every_section() {
    let dir = TempDir::new("dat");
    let setup = full_dat_setup(&dir);
    let path = dir.write("job.dat", encode_dat(&setup));
    let loaded = load(&path, &[]).unwrap();
    assert_eq!(loaded, setup);
}

#[test]
fn dat_every_truncation_is_an_error_naming_the_file() {
    let dir = TempDir::new("dat-cut");
    let bytes = encode_dat(&full_dat_setup(&dir));
    for end in 0..bytes.len() {
        let path = dir.write("cut.dat", &bytes[..end]);
        let e = load_err(&path);
        assert!(e.contains("cut.dat"), "{end}: {e}");
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0, 0, 0, 0]);
    let path = dir.write("long.dat", &longer);
    assert_mentions(
        &load_err(&path),
        &["long.dat", "4 bytes follow the last entry"],
    );
}

#[test]
fn dat_foreign_and_damaged_files() {
    let dir = TempDir::new("dat-bad");
    let path = dir.write("foreign.dat", "this is not an ACES4 setup file");
    assert_mentions(&load_err(&path), &["foreign.dat", "incorrect magic number"]);
    let mut bytes = encode_dat(&full_dat_setup(&dir));
    bytes[4] = 2;
    let path = dir.write("version.dat", &bytes);
    assert_mentions(&load_err(&path), &["version.dat", "incorrect version 2"]);
    // A huge program count cannot ask for memory: it does not fit in the file.
    let mut bytes = encode_dat(&full_dat_setup(&dir));
    bytes[8..12].copy_from_slice(&i32::MAX.to_le_bytes());
    let path = dir.write("count.dat", &bytes);
    assert_mentions(
        &load_err(&path),
        &["count.dat", "number of programs", "does not fit"],
    );
    // A negative array dimension.
    let mut setup = full_dat_setup(&dir);
    setup.arrays.clear();
    let mut bytes = encode_dat(&setup);
    let at = bytes.windows(9).position(|w| w == b"end_nfps\0").unwrap() + 9;
    bytes[at + 8..at + 12].copy_from_slice(&(-3i32).to_le_bytes());
    let path = dir.write("dims.dat", &bytes);
    assert_mentions(&load_err(&path), &["dims.dat", "end_nfps"]);
    // Every single-byte change is an error or a valid setup, never a panic.
    let bytes = encode_dat(&full_dat_setup(&dir));
    for i in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[i] ^= 0x5a;
        let path = dir.write("flip.dat", &damaged);
        let _ = load(&path, &[]);
    }
}

#[test]
fn dat_programs_are_found_as_sources_on_the_search_path() {
    let dir = TempDir::new("dat-programs");
    let inc = dir.path().join("qm");
    let mut setup = Setup::default();
    setup.programs.push(PathBuf::from("rccsd_rhf.siox"));
    let path = dir.write("job.dat", encode_dat(&setup));
    assert_mentions(
        &load_err(&path),
        &["rccsd_rhf.siox", "not found", "rccsd_rhf.sialx"],
    );
    dir.write("qm/rccsd_rhf.sialx", "");
    let loaded = load(&path, std::slice::from_ref(&inc)).unwrap();
    assert_eq!(loaded.programs, vec![inc.join("rccsd_rhf.sialx")]);
}

// ---------------------------------------------------------------------------------------------
// JSON format

#[test]
fn json_loads_every_key() {
    let dir = TempDir::new("json-all");
    dir.write("scf.sial", "");
    let path = dir.write(
        "job.json",
        r#"{
  "SialPrograms": ["scf.siox"],
  "PredefinedIntegers": {"NORB": 3, "eocc": 5},
  "PredefinedScalars": {"enuc": 9.5, "damp": 1},
  "SegmentSizeArrays": {"aoindex": [2, 3, 2], "simple": [1], "subindex": [4], "moaindex": [1]},
  "PredefinedScalarArrays": {"c": {"Rank": 2, "Dims": [2, 2], "Data": [1, 2, 3.5, 4]}},
  "PredefinedIntegerArrays": {"map": {"Rank": 1, "Dims": [3], "Data": [1, 2, 3]}},
  "SialConfiguration": {"scf.siox": {"mode": "fast"}}
}"#,
    );
    let setup = load(&path, &[]).unwrap();
    assert_eq!(setup.programs, vec![dir.path().join("scf.sial")]);
    assert_eq!(setup.ints.get("norb"), Some(&3));
    assert_eq!(setup.ints.get("eocc"), Some(&5));
    assert_eq!(setup.scalars.get("damp"), Some(&1.0));
    assert_eq!(setup.scalars.get("enuc"), Some(&9.5));
    assert_eq!(
        setup.segments.keys().collect::<Vec<_>>(),
        vec!["aoindex", "moaindex"]
    );
    assert_eq!(
        setup.arrays["c"],
        ArrayData {
            shape: vec![2, 2],
            data: vec![1.0, 2.0, 3.5, 4.0]
        }
    );
    assert_eq!(setup.int_arrays["map"].data, vec![1, 2, 3]);
    assert_eq!(setup.config["scf"]["mode"], "fast");
}

#[test]
fn json_program_resolution_order() {
    let dir = TempDir::new("json-programs");
    let inc1 = dir.path().join("inc1");
    let inc2 = dir.path().join("inc2");
    let includes = vec![inc1.clone(), inc2.clone()];
    // Beside the setup file: .sialx beats .sial.
    dir.write("a.sialx", "");
    dir.write("a.sial", "");
    // Only in the second include dir.
    dir.write("inc2/b.sial", "");
    // A compiled file used as is when no source exists; the first include dir wins.
    dir.write("inc1/c.siox", "");
    dir.write("inc2/c.sial", "");
    let path = dir.write(
        "job.json",
        r#"{"SialPrograms": ["a.siox", "b.siox", "c.siox"]}"#,
    );
    let setup = load(&path, &includes).unwrap();
    assert_eq!(
        setup.programs,
        vec![
            dir.path().join("a.sialx"),
            inc2.join("b.sial"),
            inc1.join("c.siox")
        ]
    );

    let path = dir.write("missing.json", r#"{"SialPrograms": ["zz.siox"]}"#);
    let message = match load(&path, &includes) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("zz.siox should not be found"),
    };
    let beside = dir.path().join("zz.sialx");
    let last = inc2.join("zz.siox");
    assert_mentions(
        &message,
        &[
            "missing.json",
            "zz.siox not found",
            &beside.display().to_string(),
            &last.display().to_string(),
        ],
    );
}

#[test]
fn json_errors() {
    let dir = TempDir::new("json-errors");
    let path = dir.write("syntax.json", "{\n  \"PredefinedIntegers\": {\"n\": 1,}\n}");
    assert_mentions(&load_err(&path), &["syntax.json:2:"]);
    let path = dir.write("unknown.json", "{\"PredefinedIntegerz\": {}}");
    assert_mentions(&load_err(&path), &["unknown.json:1:", "PredefinedIntegerz"]);
    let path = dir.write("kind.json", r#"{"SegmentSizeArrays": {"ao": [1]}}"#);
    assert_mentions(
        &load_err(&path),
        &["kind.json", "\"ao\"", "aoindex, moindex"],
    );
    let path = dir.write("zero.json", r#"{"SegmentSizeArrays": {"aoindex": [0]}}"#);
    assert_mentions(&load_err(&path), &["zero.json", "positive"]);
    let path = dir.write(
        "rank.json",
        r#"{"PredefinedScalarArrays": {"c": {"Rank": 3, "Dims": [2, 2], "Data": [1, 2, 3, 4]}}}"#,
    );
    assert_mentions(
        &load_err(&path),
        &["rank.json", "PredefinedScalarArrays.c", "Rank"],
    );
    let path = dir.write(
        "len.json",
        r#"{"PredefinedIntegerArrays": {"m": {"Rank": 1, "Dims": [2], "Data": [1]}}}"#,
    );
    assert_mentions(
        &load_err(&path),
        &["len.json", "PredefinedIntegerArrays.m", "needs 2"],
    );
    let path = dir.write("big.json", r#"{"PredefinedIntegers": {"n": 1e3}}"#);
    assert_mentions(&load_err(&path), &["big.json:1:"]);
}

// ---------------------------------------------------------------------------------------------
// Command-line overrides and setup discovery

#[test]
fn set_assignments() {
    let mut setup = Setup::default();
    setup.set("NORB=4").unwrap();
    assert_eq!(setup.ints.get("norb"), Some(&4));
    assert_eq!(setup.scalars.get("norb"), Some(&4.0));
    setup.set(" damp = 0.5 ").unwrap();
    assert_eq!(setup.scalars.get("damp"), Some(&0.5));
    assert!(!setup.ints.contains_key("damp"));
    setup.set("tol=1e-6").unwrap();
    assert_eq!(setup.scalars.get("tol"), Some(&1e-6));
    setup.set("neg=-2.5E+1").unwrap();
    assert_eq!(setup.scalars.get("neg"), Some(&-25.0));
    // A float replaces an int of the same name.
    setup.set("norb=4.5").unwrap();
    assert!(!setup.ints.contains_key("norb"));
    assert_eq!(setup.scalars.get("norb"), Some(&4.5));

    for (bad, what) in [
        ("norb", "name=value"),
        ("norb=abc", "not a number"),
        ("x=inf", "not a number"),
        ("x=nan", "not a number"),
        ("x=", "not a number"),
        ("=3", "SIAL name"),
        ("n=3000000000", "32-bit"),
    ] {
        let message = setup.set(bad).unwrap_err().to_string();
        assert_mentions(&message, &[&format!("--set {bad}"), what]);
    }
}

#[test]
fn set_segments_overrides() {
    let mut setup = Setup::default();
    setup.set_segments("aoindex=2,3,2").unwrap();
    setup.set_segments("MOINDEX = 5, 10").unwrap();
    assert_eq!(setup.segments["aoindex"], vec![2, 3, 2]);
    assert_eq!(setup.segments["moindex"], vec![5, 10]);
    setup.set_segments("aoindex=7").unwrap();
    assert_eq!(setup.segments["aoindex"], vec![7]);
    for (bad, what) in [
        ("aoindex", "kind=e1,e2"),
        ("simple=1", "valid kinds"),
        ("aoindex=1,0", "positive"),
        ("aoindex=1,-2", "positive"),
        ("aoindex=1,x", "not an integer"),
        ("aoindex=", "not an integer"),
    ] {
        let message = setup.set_segments(bad).unwrap_err().to_string();
        assert_mentions(&message, &[&format!("--segments {bad}"), what]);
    }
}

#[test]
fn beside_finds_the_toml_next_to_a_program() {
    let dir = TempDir::new("beside");
    let toml = dir.write("prog.toml", "");
    for program in ["prog.sial", "prog.sialx", "prog.siox"] {
        assert_eq!(beside(&dir.path().join(program)), Some(toml.clone()));
    }
    assert_eq!(beside(&dir.path().join("other.sial")), None);
    assert_eq!(beside(&dir.path().join("prog.txt")), None);
    assert_eq!(beside(&dir.path().join("prog")), None);
}

// ---------------------------------------------------------------------------------------------
// The repository's files

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the water / 6-31G reference data kept with the programs (13 AOs and MOs).
fn water_data(file: &str) -> PathBuf {
    manifest_dir()
        .join("../programs/data/water-631g")
        .join(file)
}

const N: usize = 13;

#[test]
fn real_matrices_load_in_both_orders() {
    let ovl = read_npy_array(&water_data("overlap_ao.npy")).unwrap();
    assert_eq!(ovl.shape, vec![N, N]);
    for q in 0..N {
        assert!((ovl.data[q + N * q] - 1.0).abs() < 1e-12, "S[{q},{q}]");
        for p in 0..N {
            let (a, b) = (ovl.data[p + N * q], ovl.data[q + N * p]);
            assert!((a - b).abs() <= 1e-12, "S[{p},{q}]");
        }
    }
    // The MO coefficients are not symmetric: the first index is the AO.
    let c = read_npy_array(&water_data("mo_coeff.npy")).unwrap();
    assert_eq!(c.shape, vec![N, N]);
    assert!((c.data[1] - c.data[N]).abs() > 1e-6);
}

#[test]
fn real_eri_mo_is_converted_to_column_major() {
    let toml = manifest_dir().join("../programs/mp2_energy.toml");
    let setup = load(&toml, &[]).unwrap();
    let eri = &setup.arrays["eri_mo"];
    assert_eq!(eri.shape, vec![N, N, N, N]);
    assert_eq!(setup.arrays["eps"].shape, vec![N]);
    // Read the C-order elements straight from the file.
    let bytes = std::fs::read(water_data("eri_mo.npy")).unwrap();
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let body = &bytes[10 + header_len..];
    let c_element = |p: usize, q: usize, r: usize, s: usize| {
        let i = ((p * N + q) * N + r) * N + s;
        f64::from_le_bytes(body[8 * i..8 * i + 8].try_into().unwrap())
    };
    for s in 0..N {
        for r in 0..N {
            for q in 0..N {
                for p in 0..N {
                    let column_major = eri.data[p + N * (q + N * (r + N * s))];
                    assert_eq!(column_major, c_element(p, q, r, s), "({p},{q},{r},{s})");
                }
            }
        }
    }
}

#[test]
fn every_repository_setup_file_loads() {
    let programs = manifest_dir().join("../programs");
    let Ok(entries) = std::fs::read_dir(&programs) else {
        eprintln!("skipped: {} not found", programs.display());
        return;
    };
    let mut count = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let setup = load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
        for program in &setup.programs {
            assert!(program.is_file(), "{}", program.display());
        }
        count += 1;
    }
    assert!(count > 0, "no setup files in {}", programs.display());
    let job = load(&programs.join("persistence_job.toml"), &[]).unwrap();
    assert_eq!(job.programs.len(), 3);
    assert!(job.programs[0].ends_with("persist_write.sial"));
}
