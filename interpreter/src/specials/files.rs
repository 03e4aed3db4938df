//! Block files (§8.4): `write_block_to_file`, `read_block_from_file` (binary `.blk`) and
//! `read_block_from_text_file` (`.txt`), all in [`Context::work_dir`].
//!
//! A block's file is named `NAME[v1.v2…].EXT` after the array and its segment numbers (a whole
//! array uses 1 for every segment, a scalar has empty brackets), so each block of an array has its
//! own file and a later program can read back what an earlier one wrote.
//!
//! Binary layout (ACES4's setup-style encoding, little-endian, no padding):
//! ```text
//! i32 rank
//! i32 rank, rank × i32 extents        (an int array: its length, then the values)
//! i32 n,    n × f64 elements          (a double array, column-major; n = product of extents)
//! ```

use std::path::Path;

use super::{Arg, Context, expect_args};

/// Extension of binary block files.
pub const BLOCK_FILE_EXTENSION: &str = "blk";
/// Extension of text block files.
pub const TEXT_FILE_EXTENSION: &str = "txt";

/// `NAME[v1.v2…].EXT` for a block argument.
pub fn block_file_name(arg: &Arg, extension: &str) -> String {
    let segs: Vec<String> = arg.index_values().iter().map(i32::to_string).collect();
    format!("{}[{}].{extension}", arg.name, segs.join("."))
}

/// The bytes of a `.blk` file holding a block of this shape and data.
pub fn encode_block_file(shape: &[usize], data: &[f64]) -> Result<Vec<u8>, String> {
    let int = |v: usize, what: &str| {
        i32::try_from(v).map_err(|_| format!("{what} {v} does not fit a 32-bit int"))
    };
    let mut out = Vec::with_capacity(12 + 4 * shape.len() + 8 * data.len());
    let rank = int(shape.len(), "rank")?;
    out.extend_from_slice(&rank.to_le_bytes());
    out.extend_from_slice(&rank.to_le_bytes());
    for &e in shape {
        out.extend_from_slice(&int(e, "extent")?.to_le_bytes());
    }
    out.extend_from_slice(&int(data.len(), "element count")?.to_le_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

/// Shape and data of a `.blk` file; every count is checked against the bytes present before
/// anything is allocated, so a damaged file gives an error, not a huge allocation.
pub fn decode_block_file(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f64>), String> {
    let mut r = Reader { bytes, pos: 0 };
    let rank = r.count("rank")?;
    let n_ext = r.count("extent count")?;
    if n_ext != rank {
        return Err(format!("rank {rank} but {n_ext} extents"));
    }
    r.need(rank.saturating_mul(4), "extents")?;
    let shape = (0..rank)
        .map(|_| r.count("extent"))
        .collect::<Result<Vec<_>, _>>()?;
    let n = r.count("element count")?;
    let expected = shape.iter().try_fold(1usize, |acc, &e| acc.checked_mul(e));
    if expected != Some(n) {
        return Err(format!("{n} elements for extents {shape:?}"));
    }
    r.need(n.saturating_mul(8), "elements")?;
    let data = (0..n).map(|_| r.f64()).collect::<Result<Vec<_>, _>>()?;
    if r.pos != bytes.len() {
        return Err(format!(
            "{} unexpected bytes after the data",
            bytes.len() - r.pos
        ));
    }
    Ok((shape, data))
}

/// Sequential little-endian reader over a file's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn need(&self, n: usize, what: &str) -> Result<(), String> {
        if self.bytes.len() - self.pos < n {
            Err(format!("file ends inside the {what}"))
        } else {
            Ok(())
        }
    }

    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        self.need(N, what)?;
        let mut b = [0u8; N];
        b.copy_from_slice(&self.bytes[self.pos..self.pos + N]);
        self.pos += N;
        Ok(b)
    }

    /// A non-negative i32.
    fn count(&mut self, what: &str) -> Result<usize, String> {
        let v = i32::from_le_bytes(self.take(what)?);
        usize::try_from(v).map_err(|_| format!("negative {what} {v}"))
    }

    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.take("elements")?))
    }
}

/// `write_block_to_file` (r): writes the block to `NAME[v1.v2…].blk`.
pub fn write_block_to_file(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    let a = &args[0];
    let path = ctx
        .work_dir()
        .join(block_file_name(a, BLOCK_FILE_EXTENSION));
    let bytes = encode_block_file(&a.shape, &a.data).map_err(|e| file_error(&path, &e))?;
    std::fs::write(&path, bytes).map_err(|e| file_error(&path, &e.to_string()))
}

/// `read_block_from_file` (w): reads `NAME[v1.v2…].blk` into the block; the file's shape must
/// equal the block's.
pub fn read_block_from_file(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    let a = &mut args[0];
    let path = ctx
        .work_dir()
        .join(block_file_name(a, BLOCK_FILE_EXTENSION));
    let bytes = std::fs::read(&path).map_err(|e| file_error(&path, &e.to_string()))?;
    let (shape, data) = decode_block_file(&bytes).map_err(|e| file_error(&path, &e))?;
    if shape != a.shape || data.len() != a.data.len() {
        return Err(format!(
            "block file {} holds a block of shape {shape:?}, but {} has shape {:?}",
            path.display(),
            a.describe(),
            a.shape
        ));
    }
    a.data = data.into();
    Ok(())
}

/// `read_block_from_text_file` (w): reads `NAME[v1.v2…].txt`, one element per non-blank line:
/// `rank` integer element indices, then the value.
///
/// As in ACES4, the element's position is column-major where the last index counts from 1 and
/// every other index counts from the index on the file's first line (so the first line must hold
/// the block's first element in those dimensions). An index that falls outside the block is an
/// error (ACES4 would write outside the block); the number of lines must equal the block size.
pub fn read_block_from_text_file(ctx: &mut dyn Context, args: &mut [Arg]) -> Result<(), String> {
    expect_args(args, 1)?;
    let a = &mut args[0];
    let path = ctx.work_dir().join(block_file_name(a, TEXT_FILE_EXTENSION));
    let text = std::fs::read_to_string(&path).map_err(|e| file_error(&path, &e.to_string()))?;
    let count = fill_from_text(&text, &a.shape, &mut a.data)
        .map_err(|e| format!("{e} in file {}", path.display()))?;
    if count != a.data.len() {
        return Err(format!(
            "Incorrect number of elements in file {}: {count} lines, block {} has {} elements",
            path.display(),
            a.describe(),
            a.data.len()
        ));
    }
    Ok(())
}

/// Stores the elements of a text block file into `data`; returns how many lines it read.
fn fill_from_text(text: &str, shape: &[usize], data: &mut [f64]) -> Result<usize, String> {
    let rank = shape.len();
    let mut first: Option<Vec<i64>> = None;
    let mut count = 0;
    for (lineno, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.is_empty() {
            continue;
        }
        if tokens.len() != rank + 1 {
            return Err(format!(
                "line {lineno} has {} fields, expected {rank} indices and a value",
                tokens.len()
            ));
        }
        let index = tokens[..rank]
            .iter()
            .map(|t| {
                t.parse::<i64>()
                    .map_err(|_| format!("bad index '{t}' at line {lineno}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let value: f64 = tokens[rank]
            .parse()
            .map_err(|_| format!("bad value '{}' at line {lineno}", tokens[rank]))?;
        let lower = first.get_or_insert_with(|| index.clone());
        let mut pos = 0usize;
        let mut stride = 1usize;
        for d in 0..rank {
            let origin = if d + 1 == rank { 1 } else { lower[d] };
            let rel = index[d] - origin;
            let rel = usize::try_from(rel)
                .ok()
                .filter(|&r| r < shape[d])
                .ok_or_else(|| {
                    format!("element {index:?} at line {lineno} is outside the block")
                })?;
            pos += rel * stride;
            stride *= shape[d];
        }
        let slot = data
            .get_mut(pos)
            .ok_or_else(|| format!("element {index:?} at line {lineno} is outside the block"))?;
        *slot = value;
        count += 1;
    }
    Ok(count)
}

fn file_error(path: &Path, e: &str) -> String {
    format!("block file {}: {e}", path.display())
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake;
    use super::*;

    #[test]
    fn file_names() {
        let b = Arg::block("a", vec![2, 10], vec![1, 1], vec![0.0]);
        assert_eq!(block_file_name(&b, "blk"), "a[2.10].blk");
        assert_eq!(block_file_name(&Arg::scalar("x", 0.0), "txt"), "x[].txt");
        let w = Arg::whole_array("s", vec![3, 3, 3], vec![0.0; 27]);
        assert_eq!(block_file_name(&w, "blk"), "s[1.1.1].blk");
    }

    #[test]
    fn encoding_is_setup_style_little_endian() {
        let bytes = encode_block_file(&[2], &[1.0, -2.0]).expect("encode");
        let mut want = Vec::new();
        for i in [1i32, 1, 2, 2] {
            want.extend_from_slice(&i.to_le_bytes());
        }
        want.extend_from_slice(&1.0f64.to_le_bytes());
        want.extend_from_slice(&(-2.0f64).to_le_bytes());
        assert_eq!(bytes, want);
        assert_eq!(decode_block_file(&bytes), Ok((vec![2], vec![1.0, -2.0])));
        // Damaged files.
        assert!(decode_block_file(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_block_file(&[bytes.clone(), vec![0]].concat()).is_err());
        assert!(decode_block_file(&[]).is_err());
        let mut huge = Vec::new();
        for i in [1i32, 1, i32::MAX, i32::MAX] {
            huge.extend_from_slice(&i.to_le_bytes());
        }
        assert_eq!(
            decode_block_file(&huge),
            Err("file ends inside the elements".into())
        );
        let mut neg = Vec::new();
        neg.extend_from_slice(&(-1i32).to_le_bytes());
        assert_eq!(decode_block_file(&neg), Err("negative rank -1".into()));
        let bad = encode_block_file(&[2, 2], &[0.0; 3]).expect("encode");
        assert!(decode_block_file(&bad).is_err());
    }

    #[test]
    fn write_then_read_round_trip() {
        let mut ctx = Fake::with_dir();
        let a = Arg::block(
            "a",
            vec![1, 2],
            vec![2, 3],
            (1..=6).map(f64::from).collect(),
        );
        write_block_to_file(&mut ctx, &mut [a.clone()]).expect("write");
        assert!(ctx.dir.join("a[1.2].blk").is_file());
        let mut back = [Arg {
            data: vec![0.0; 6].into(),
            ..a.clone()
        }];
        read_block_from_file(&mut ctx, &mut back).expect("read");
        assert_eq!(back[0].data, a.data);

        // Same block id, different shape.
        let mut other = [Arg::block("a", vec![1, 2], vec![3, 2], vec![0.0; 6])];
        let err = read_block_from_file(&mut ctx, &mut other).expect_err("shape");
        assert!(
            err.contains("a[1.2].blk") && err.contains("shape [2, 3]"),
            "{err}"
        );

        // Missing file.
        let mut missing = [Arg::block("a", vec![9, 9], vec![2, 3], vec![0.0; 6])];
        let err = read_block_from_file(&mut ctx, &mut missing).expect_err("missing");
        assert!(err.contains("a[9.9].blk"), "{err}");
    }

    #[test]
    fn text_file_positions() {
        let mut ctx = Fake::with_dir();
        // Block b[2,1] of a 2x2 shape covering rows 3..4: the first index counts from the first
        // line's 3, the last from 1.
        let text = "3 1 1.5\n4 1 2.5\n\n3 2 3.5\n4 2 -4.5\n";
        std::fs::write(ctx.dir.join("b[2.1].txt"), text).expect("write");
        let mut args = [Arg::block("b", vec![2, 1], vec![2, 2], vec![0.0; 4])];
        read_block_from_text_file(&mut ctx, &mut args).expect("read");
        assert_eq!(args[0].data, vec![1.5, 2.5, 3.5, -4.5]);

        // Rank 0: a value per line.
        std::fs::write(ctx.dir.join("x[].txt"), "  2.25 \n").expect("write");
        let mut args = [Arg::scalar("x", 0.0)];
        read_block_from_text_file(&mut ctx, &mut args).expect("read");
        assert_eq!(args[0].data, vec![2.25]);
    }

    #[test]
    fn text_file_errors() {
        let mut ctx = Fake::with_dir();
        let mut args = [Arg::block("c", vec![1], vec![3], vec![0.0; 3])];
        let err = read_block_from_text_file(&mut ctx, &mut args).expect_err("missing");
        assert!(err.contains("c[1].txt"), "{err}");

        std::fs::write(ctx.dir.join("c[1].txt"), "1 1.0\n2 2.0\n").expect("write");
        let err = read_block_from_text_file(&mut ctx, &mut args).expect_err("count");
        assert!(
            err.starts_with("Incorrect number of elements in file "),
            "{err}"
        );

        std::fs::write(ctx.dir.join("c[1].txt"), "1 1.0\n2 2.0\n4 3.0\n").expect("write");
        let err = read_block_from_text_file(&mut ctx, &mut args).expect_err("outside");
        assert!(err.contains("[4] at line 3 is outside the block"), "{err}");

        std::fs::write(ctx.dir.join("c[1].txt"), "1 1.0\n2 x\n3 3.0\n").expect("write");
        let err = read_block_from_text_file(&mut ctx, &mut args).expect_err("bad value");
        assert!(err.contains("bad value 'x' at line 2"), "{err}");

        std::fs::write(ctx.dir.join("c[1].txt"), "1 1 1.0\n").expect("write");
        let err = read_block_from_text_file(&mut ctx, &mut args).expect_err("fields");
        assert!(err.contains("line 1 has 3 fields"), "{err}");
    }
}
