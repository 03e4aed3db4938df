//! Fixed layouts for the records a program sends by the hundred thousand: a get, a put, a
//! block in reply, and a barrier's claims of prefetched blocks (one per get). Their fields go
//! little-endian at fixed places, written and read by plain copies; postcard's varints cost
//! 120–170 ns a put here, an eighth of the worker's and of the server's time in a loop of
//! small puts (docs/benchmarks.md, "Gets and puts in fixed layouts"). Every other record is
//! postcard after its tag ([`Tag::Postcard`]).

use super::*;
use crate::cluster::message::{Claim, Origin};
use crate::store::{BlockKey, Extents};
use sial_bytecode::{MAX_RANK, PutOp};

/// The first byte of every record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Tag {
    Postcard = 0,
    Get = 1,
    Put = 2,
    Block = 3,
    Claims = 4,
}

impl Tag {
    pub(super) fn of(byte: u8) -> Result<Tag> {
        Ok(match byte {
            0 => Tag::Postcard,
            1 => Tag::Get,
            2 => Tag::Put,
            3 => Tag::Block,
            4 => Tag::Claims,
            _ => return Err(malformed()),
        })
    }
}

/// Bytes of a block's key: its six segments, then its six parents.
const KEY_BYTES: usize = 48;
/// Bytes of one claim: array, key, line.
const CLAIM_BYTES: usize = 4 + KEY_BYTES + 4;

/// Appends fields to a batch.
pub(super) struct Writer<'a>(pub(super) &'a mut Vec<u8>);

impl Writer<'_> {
    pub(super) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(super) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn origin(&mut self, o: &Origin) -> &mut Self {
        self.u32(o.worker).u32(o.section).u32(o.line)
    }
    pub(super) fn key(&mut self, key: &BlockKey) -> &mut Self {
        let mut bytes = [0u8; KEY_BYTES];
        for i in 0..6 {
            bytes[4 * i..4 * i + 4].copy_from_slice(&key.segments[i].to_le_bytes());
            bytes[24 + 4 * i..28 + 4 * i].copy_from_slice(&key.parents[i].to_le_bytes());
        }
        self.0.extend_from_slice(&bytes);
        self
    }
    pub(super) fn put_op(&mut self, op: PutOp) -> &mut Self {
        self.u8(match op {
            PutOp::Replace => 0,
            PutOp::Accumulate => 1,
            PutOp::Scale => 2,
        })
    }
    /// The number of claims, then each one's array, key and line.
    pub(super) fn claims(&mut self, claims: &[Claim]) -> &mut Self {
        self.u64(claims.len() as u64);
        self.0.reserve(claims.len() * CLAIM_BYTES);
        for c in claims {
            self.u32(c.array).key(&c.key).u32(c.line);
        }
        self
    }
    /// The rank, then each extent.
    pub(super) fn extents(&mut self, shape: &[usize]) -> &mut Self {
        self.u8(shape.len() as u8);
        for &e in shape {
            self.u64(e as u64);
        }
        self
    }
}

/// Reads fields from a record; every read past the end is a malformed message.
pub(super) struct Reader<'b>(pub(super) &'b [u8]);

impl<'b> Reader<'b> {
    /// The record's tag, its first byte.
    pub(super) fn tag(&mut self) -> Result<Tag> {
        Tag::of(self.u8()?)
    }
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(malformed)?;
        self.0 = rest;
        Ok(*head)
    }
    pub(super) fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    pub(super) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    pub(super) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    pub(super) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take()?))
    }
    pub(super) fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed()),
        }
    }
    pub(super) fn origin(&mut self) -> Result<Origin> {
        Ok(Origin {
            worker: self.u32()?,
            section: self.u32()?,
            line: self.u32()?,
        })
    }
    pub(super) fn key(&mut self) -> Result<BlockKey> {
        let b = self.take::<KEY_BYTES>()?;
        let word = |at: usize| i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        Ok(BlockKey {
            segments: std::array::from_fn(|i| word(4 * i)),
            parents: std::array::from_fn(|i| word(24 + 4 * i)),
        })
    }
    pub(super) fn claims(&mut self) -> Result<Vec<Claim>> {
        let n = usize::try_from(self.u64()?).map_err(|_| malformed())?;
        // A count the record cannot hold is malformed, not an allocation to try.
        if n > self.0.len() / CLAIM_BYTES {
            return Err(malformed());
        }
        let mut claims = Vec::with_capacity(n);
        for _ in 0..n {
            claims.push(Claim {
                array: self.u32()?,
                key: self.key()?,
                line: self.u32()?,
            });
        }
        Ok(claims)
    }
    pub(super) fn extents(&mut self) -> Result<Extents> {
        let rank = usize::from(self.u8()?);
        if rank > MAX_RANK {
            return Err(malformed());
        }
        let mut shape = Extents::zeroed(rank)?;
        for e in shape.iter_mut() {
            *e = usize::try_from(self.u64()?).map_err(|_| malformed())?;
        }
        Ok(shape)
    }
    pub(super) fn put_op(&mut self) -> Result<PutOp> {
        Ok(match self.u8()? {
            0 => PutOp::Replace,
            1 => PutOp::Accumulate,
            2 => PutOp::Scale,
            _ => return Err(malformed()),
        })
    }
    /// A buffer for `n` values of block data, each to be overwritten.
    pub(super) fn buffer(&mut self) -> Result<Vec<f64>> {
        let n = self.u64()?;
        crate::cluster::message::data_buffer(n).map_err(RuntimeError::new)
    }
    /// The bytes not read yet.
    pub(super) fn rest(&self) -> &'b [u8] {
        self.0
    }
}
