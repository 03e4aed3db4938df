//! The bytecode file: `MAGIC`, format version (u32 LE), payload length (u64 LE), CRC-32 of the
//! payload (u32 LE), then the [`Program`] encoded with postcard. A decoded program is validated
//! ([`Program::validate`]) before it is returned.

use crate::Program;
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
    #[error("{0}")]
    Invalid(#[from] crate::Invalid),
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
    let program: Program =
        postcard::from_bytes(payload).map_err(|e| LoadError::Decode(e.to_string()))?;
    program.validate()?;
    Ok(program)
}
