//! Reader for numpy `.npy` files (format versions 1.0–3.0), the form in which large predefined
//! arrays (integrals, orbital coefficients) are produced by the Python tools that prepare a job.
//!
//! The format is small enough to read directly: the magic `\x93NUMPY`, a version, a header length
//! and a Python dict literal `{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }`,
//! followed by the raw elements. The numpy axis order is taken as the SIAL dimension order
//! (numpy `a[i0, i1, ...]` is SIAL element `(i0+1, i1+1, ...)`), so a C-order (row-major) file
//! is transposed into SIAL's column-major layout; a Fortran-order file already is column-major.

use std::path::Path;

use super::{ArrayData, IntArrayData, SetupError, element_count};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Element types accepted: little-endian only, because numpy writes the machine's byte order and
/// every platform sial runs on is little-endian; a big-endian file is reported, not guessed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    F8,
    F4,
    I4,
    I8,
}

impl Dtype {
    fn size(self) -> usize {
        match self {
            Dtype::F8 | Dtype::I8 => 8,
            Dtype::F4 | Dtype::I4 => 4,
        }
    }
}

/// The parsed header and the element bytes of a `.npy` file.
struct Npy<'a> {
    descr: String,
    dtype: Option<Dtype>,
    fortran_order: bool,
    shape: Vec<usize>,
    body: &'a [u8],
}

/// Reads a float `.npy` file (`<f8` or `<f4`) into column-major [`ArrayData`].
pub fn read_npy_array(path: &Path) -> Result<ArrayData, SetupError> {
    let bytes = read(path)?;
    let npy = parse(&bytes).map_err(|message| npy_error(path, message))?;
    let values: Vec<f64> = match npy.dtype {
        Some(Dtype::F8) => npy
            .body
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(le_bytes(c)))
            .collect(),
        Some(Dtype::F4) => npy
            .body
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(le_bytes(c))))
            .collect(),
        _ => {
            return Err(npy_error(
                path,
                format!(
                    "dtype {:?} is not supported for a predefined array; save it as little-endian float64 ('<f8') or float32 ('<f4'), e.g. np.save(path, a.astype('<f8'))",
                    npy.descr
                ),
            ));
        }
    };
    Ok(ArrayData {
        data: column_major(values, &npy.shape, npy.fortran_order),
        shape: npy.shape,
    })
}

/// Reads an integer `.npy` file (`<i4` or `<i8`) into column-major [`IntArrayData`].
pub fn read_npy_int_array(path: &Path) -> Result<IntArrayData, SetupError> {
    let bytes = read(path)?;
    let npy = parse(&bytes).map_err(|message| npy_error(path, message))?;
    let values: Vec<i64> = match npy.dtype {
        Some(Dtype::I8) => npy
            .body
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(le_bytes(c)))
            .collect(),
        Some(Dtype::I4) => npy
            .body
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes(le_bytes(c))))
            .collect(),
        _ => {
            return Err(npy_error(
                path,
                format!(
                    "dtype {:?} is not supported for a predefined int array; save it as little-endian int32 ('<i4') or int64 ('<i8'), e.g. np.save(path, a.astype('<i8'))",
                    npy.descr
                ),
            ));
        }
    };
    Ok(IntArrayData {
        data: column_major(values, &npy.shape, npy.fortran_order),
        shape: npy.shape,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, SetupError> {
    std::fs::read(path).map_err(|source| SetupError::Read {
        file: path.to_path_buf(),
        source,
    })
}

fn npy_error(path: &Path, message: String) -> SetupError {
    SetupError::Npy {
        file: path.to_path_buf(),
        message,
    }
}

/// Copies a chunk (whose length `chunks_exact` guarantees) into a fixed-size array.
fn le_bytes<const N: usize>(chunk: &[u8]) -> [u8; N] {
    let mut bytes = [0u8; N];
    bytes.copy_from_slice(chunk);
    bytes
}

/// Splits a `.npy` file into header fields and element bytes, checking that the body holds
/// exactly the elements the header announces.
fn parse(bytes: &[u8]) -> Result<Npy<'_>, String> {
    if !bytes.starts_with(MAGIC) {
        return Err(
            "not a .npy file (it does not start with \\x93NUMPY); write it with numpy.save".into(),
        );
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(&[major, minor]) => (major, minor),
        _ => return Err("truncated .npy header".into()),
    };
    let (header_len, header_start): (usize, usize) = match major {
        1 => match bytes.get(8..10) {
            Some(&[a, b]) => (usize::from(u16::from_le_bytes([a, b])), 10),
            _ => return Err("truncated .npy header".into()),
        },
        2 | 3 => match bytes.get(8..12) {
            Some(&[a, b, c, d]) => (
                usize::try_from(u32::from_le_bytes([a, b, c, d])).unwrap_or(usize::MAX),
                12,
            ),
            _ => return Err("truncated .npy header".into()),
        },
        _ => {
            return Err(format!(
                ".npy format version {major}.{minor} is not supported (1.0, 2.0 and 3.0 are)"
            ));
        }
    };
    let header_end = header_start
        .checked_add(header_len)
        .filter(|&end| end <= bytes.len())
        .ok_or("truncated .npy header")?;
    let header = std::str::from_utf8(&bytes[header_start..header_end])
        .map_err(|_| "the .npy header is not text".to_string())?;
    let dict = header_dict(header)?;

    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    for (key, value) in dict {
        match (key.as_str(), value) {
            ("descr", Py::Str(s)) => descr = Some(s),
            ("descr", _) => {
                return Err(
                    "structured dtypes are not supported; save a plain numeric array".into(),
                );
            }
            ("fortran_order", Py::Bool(b)) => fortran_order = Some(b),
            ("shape", Py::Seq(items)) => {
                let dims = items
                    .into_iter()
                    .map(|item| match item {
                        Py::Int(d) => usize::try_from(d).map_err(|_| "shape too large".to_string()),
                        _ => Err("the .npy shape is not a tuple of integers".to_string()),
                    })
                    .collect::<Result<Vec<usize>, String>>()?;
                shape = Some(dims);
            }
            (other, _) => {
                return Err(format!("unexpected .npy header entry {other:?}"));
            }
        }
    }
    let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran_order, shape) else {
        return Err(
            "the .npy header lacks 'descr', 'fortran_order' or 'shape'; write the file with numpy.save"
                .into(),
        );
    };
    if shape.is_empty() {
        return Err(
            "the array is 0-dimensional; a predefined array needs at least one dimension".into(),
        );
    }
    let dtype = match descr.as_str() {
        "<f8" => Some(Dtype::F8),
        "<f4" => Some(Dtype::F4),
        "<i4" => Some(Dtype::I4),
        "<i8" => Some(Dtype::I8),
        _ => None,
    };
    let body = &bytes[header_end..];
    if let Some(dtype) = dtype {
        let expected = element_count(&shape).and_then(|n| n.checked_mul(dtype.size()));
        if expected != Some(body.len()) {
            return Err(format!(
                "the file holds {} data bytes but shape {shape:?} of {descr} needs {}; the file is truncated or corrupt, write it again with numpy.save",
                body.len(),
                expected.map_or_else(
                    || "more than can be addressed".to_string(),
                    |n| n.to_string()
                )
            ));
        }
    }
    Ok(Npy {
        descr,
        dtype,
        fortran_order,
        shape,
        body,
    })
}

/// Reorders the elements of a `.npy` file into column-major order (first index fastest).
/// `values` are in file order: row-major (last index fastest) unless `fortran_order`.
fn column_major<T: Copy>(values: Vec<T>, shape: &[usize], fortran_order: bool) -> Vec<T> {
    if fortran_order || shape.len() < 2 {
        return values;
    }
    // Row-major strides: the last dimension is contiguous.
    let rank = shape.len();
    let mut strides = vec![1usize; rank];
    for k in (0..rank - 1).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    let mut out = Vec::with_capacity(values.len());
    let mut index = vec![0usize; rank];
    let mut offset = 0usize;
    for _ in 0..values.len() {
        // `offset` < values.len(): the header check made values.len() the product of `shape`.
        out.push(values[offset]);
        // Advance the column-major odometer: dimension 0 fastest.
        for k in 0..rank {
            index[k] += 1;
            offset += strides[k];
            if index[k] < shape[k] {
                break;
            }
            offset -= strides[k] * shape[k];
            index[k] = 0;
        }
    }
    out
}

/// A value of the Python literal subset used by `.npy` headers.
#[derive(Debug, PartialEq)]
enum Py {
    Str(String),
    Bool(bool),
    None,
    Int(u64),
    /// A tuple or list.
    Seq(Vec<Py>),
    Dict(Vec<(String, Py)>),
}

/// Parses the header text: a dict literal followed by blank padding and a newline.
fn header_dict(text: &str) -> Result<Vec<(String, Py)>, String> {
    let mut parser = PyParser {
        s: text.as_bytes(),
        i: 0,
    };
    let value = parser.value()?;
    parser.skip_ws();
    if parser.i != parser.s.len() {
        return Err("unexpected text after the .npy header dict".into());
    }
    match value {
        Py::Dict(entries) => Ok(entries),
        _ => Err("the .npy header is not a dict".into()),
    }
}

struct PyParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl PyParser<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!(
                "malformed .npy header: expected '{}' at offset {}",
                byte as char, self.i
            ))
        }
    }

    fn value(&mut self) -> Result<Py, String> {
        match self.peek() {
            Some(b'{') => self.dict(),
            Some(b'(') => self.seq(b')'),
            Some(b'[') => self.seq(b']'),
            Some(q @ (b'\'' | b'"')) => self.string(q).map(Py::Str),
            Some(b) if b.is_ascii_digit() => self.int(),
            Some(b) if b.is_ascii_alphabetic() => self.word(),
            _ => Err(format!(
                "malformed .npy header: unexpected text at offset {}",
                self.i
            )),
        }
    }

    fn dict(&mut self) -> Result<Py, String> {
        self.expect(b'{')?;
        let mut entries = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.i += 1;
                return Ok(Py::Dict(entries));
            }
            let key = match self.peek() {
                Some(q @ (b'\'' | b'"')) => self.string(q)?,
                _ => return Err("malformed .npy header: dict key is not a string".into()),
            };
            self.expect(b':')?;
            let value = self.value()?;
            entries.push((key, value));
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {}
                _ => return Err("malformed .npy header: expected ',' or '}' in dict".into()),
            }
        }
    }

    fn seq(&mut self, close: u8) -> Result<Py, String> {
        self.i += 1; // the opening bracket, seen by `value`
        let mut items = Vec::new();
        loop {
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok(Py::Seq(items));
            }
            items.push(self.value()?);
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b) if b == close => {}
                _ => return Err("malformed .npy header: expected ',' in tuple".into()),
            }
        }
    }

    fn string(&mut self, quote: u8) -> Result<String, String> {
        self.i += 1;
        let start = self.i;
        while let Some(&b) = self.s.get(self.i) {
            if b == quote {
                let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                return Ok(text);
            }
            self.i += 1;
        }
        Err("malformed .npy header: unterminated string".into())
    }

    fn int(&mut self) -> Result<Py, String> {
        let start = self.i;
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
        // Python 2 era numpy wrote long shapes as `24L`.
        if self.s.get(self.i) == Some(&b'L') {
            self.i += 1;
        }
        let digits = String::from_utf8_lossy(&self.s[start..self.i]);
        digits
            .trim_end_matches('L')
            .parse::<u64>()
            .map(Py::Int)
            .map_err(|_| format!("malformed .npy header: bad integer {digits}"))
    }

    fn word(&mut self) -> Result<Py, String> {
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|b| b.is_ascii_alphanumeric())
        {
            self.i += 1;
        }
        match &self.s[start..self.i] {
            b"True" => Ok(Py::Bool(true)),
            b"False" => Ok(Py::Bool(false)),
            b"None" => Ok(Py::None),
            other => Err(format!(
                "malformed .npy header: unexpected word {:?}",
                String::from_utf8_lossy(other)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_dict_parses_numpy_headers() {
        let dict =
            header_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (24, 24), }   \n")
                .unwrap();
        assert_eq!(
            dict,
            vec![
                ("descr".to_string(), Py::Str("<f8".into())),
                ("fortran_order".to_string(), Py::Bool(false)),
                ("shape".to_string(), Py::Seq(vec![Py::Int(24), Py::Int(24)])),
            ]
        );
        let dict = header_dict("{'descr': '<i8', 'fortran_order': True, 'shape': (5,), }").unwrap();
        assert_eq!(dict[2].1, Py::Seq(vec![Py::Int(5)]));
        assert!(header_dict("{'descr': '<f8', ").is_err());
        assert!(header_dict("{'descr' '<f8'}").is_err());
        assert!(header_dict("['descr']").is_err());
        assert!(header_dict("{'a': 1} extra").is_err());
        assert!(header_dict("{'a': (1, 2L), 'b': None, 'c': [1]}").is_ok());
    }

    #[test]
    fn column_major_transposes_row_major_data() {
        // Row-major 2x3: [[1,2,3],[4,5,6]] -> column-major 1,4,2,5,3,6.
        assert_eq!(
            column_major(vec![1, 2, 3, 4, 5, 6], &[2, 3], false),
            vec![1, 4, 2, 5, 3, 6]
        );
        assert_eq!(
            column_major(vec![1, 2, 3, 4, 5, 6], &[2, 3], true),
            vec![1, 2, 3, 4, 5, 6]
        );
        // 3-D: element (i,j,k) of shape (2,3,4) has row-major offset 12i+4j+k.
        let shape = [2, 3, 4];
        let row_major: Vec<usize> = (0..24).collect();
        let out = column_major(row_major, &shape, false);
        for k in 0..4 {
            for j in 0..3 {
                for i in 0..2 {
                    assert_eq!(out[i + 2 * j + 6 * k], 12 * i + 4 * j + k);
                }
            }
        }
        assert!(column_major(Vec::<f64>::new(), &[0, 3], false).is_empty());
    }

    #[test]
    fn parse_never_panics_on_prefixes_of_a_valid_file() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[1, 0]);
        let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n";
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&1.0f64.to_le_bytes());
        bytes.extend_from_slice(&2.0f64.to_le_bytes());
        assert!(parse(&bytes).is_ok());
        for len in 0..bytes.len() {
            assert!(parse(&bytes[..len]).is_err(), "prefix of length {len}");
        }
    }
}
