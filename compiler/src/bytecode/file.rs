//! The bytecode file: `MAGIC`, format version (u32 LE), payload length (u64 LE), CRC-32 of the
//! payload (u32 LE), then the [`Program`] encoded with postcard.

use super::Program;
use thiserror::Error;

/// First bytes of every bytecode file.
pub const MAGIC: &[u8; 8] = b"SIALBC\r\n";
/// Bumped whenever the encoding of [`Program`] changes.
pub const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

#[derive(Debug, Error, PartialEq)]
pub enum LoadError {
    #[error("not a sial bytecode file (wrong magic number)")]
    NotBytecode,
    #[error(
        "bytecode format version {found} is not supported (this sial reads version {expected}); recompile the program"
    )]
    Version { found: u32, expected: u32 },
    #[error("bytecode file is truncated: {found} bytes, expected {expected}")]
    Truncated { found: usize, expected: usize },
    #[error("bytecode file is corrupt (checksum mismatch)")]
    Checksum,
    #[error("bytecode file is corrupt: {0}")]
    Decode(String),
}

pub fn encode(program: &Program) -> Vec<u8> {
    // Encoding a plain data structure into a Vec cannot fail.
    let payload = postcard::to_stdvec(program).unwrap_or_default();
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

pub fn decode(bytes: &[u8]) -> Result<Program, LoadError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(LoadError::NotBytecode);
    }
    if bytes.len() < HEADER_LEN {
        return Err(LoadError::Truncated {
            found: bytes.len(),
            expected: HEADER_LEN,
        });
    }
    let word =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let version = word(8);
    if version != FORMAT_VERSION {
        return Err(LoadError::Version {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[12..20]);
    let len = u64::from_le_bytes(len);
    let checksum = word(20);
    let expected = (HEADER_LEN as u64).saturating_add(len);
    if (bytes.len() as u64) < expected {
        return Err(LoadError::Truncated {
            found: bytes.len(),
            expected: usize::try_from(expected).unwrap_or(usize::MAX),
        });
    }
    if (bytes.len() as u64) > expected {
        return Err(LoadError::Decode(format!(
            "{} bytes after the end of the program",
            bytes.len() as u64 - expected
        )));
    }
    let payload = &bytes[HEADER_LEN..HEADER_LEN + len as usize];
    if crc32fast::hash(payload) != checksum {
        return Err(LoadError::Checksum);
    }
    postcard::from_bytes(payload).map_err(|e| LoadError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, compile_source};

    fn program() -> Program {
        let src = "sial t\nindex i = 1:3\nstatic s[i]\nscalar x = 0.5\ndo i\ns[i] = x\nx += s[i] * 2.0\nenddo i\nendsial t\n";
        let c = compile_source(
            std::path::Path::new("t.sial"),
            src.to_string(),
            &Options::default(),
        );
        c.program.expect("compiles")
    }

    #[test]
    fn round_trip() {
        let p = program();
        assert_eq!(decode(&encode(&p)), Ok(p));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode(&program());
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes accepted");
        }
    }

    #[test]
    fn every_flipped_payload_byte_is_detected() {
        let bytes = encode(&program());
        for i in HEADER_LEN..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x01;
            assert_eq!(decode(&b), Err(LoadError::Checksum), "byte {i}");
        }
    }

    #[test]
    fn foreign_and_future_files() {
        assert_eq!(
            decode(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
            Err(LoadError::NotBytecode)
        );
        let mut b = encode(&program());
        b[8] = 2;
        assert_eq!(
            decode(&b),
            Err(LoadError::Version {
                found: 2,
                expected: FORMAT_VERSION
            })
        );
    }
}
