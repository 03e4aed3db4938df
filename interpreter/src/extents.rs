//! A block's shape held inline: up to [`MAX_RANK`] extents and no allocation of its own. A
//! block of a few values (a scalar-like block, a short vector) then costs one allocation, its
//! data, instead of two; a server holding 10⁵ such blocks and a put or get of one of them
//! spend much of their time in the allocator otherwise (docs/benchmarks.md, "Blocks whose
//! shapes are inline").

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sial_bytecode::MAX_RANK;
use std::fmt;
use std::ops::{Deref, DerefMut};

/// Extents of a block, slowest last (column-major), as a slice through `Deref`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Extents {
    rank: u8,
    ext: [usize; MAX_RANK],
}

impl Extents {
    /// The extents of `ext`, or `None` for more than [`MAX_RANK`] (which validated bytecode
    /// never declares).
    pub fn new(ext: &[usize]) -> Option<Extents> {
        Extents::of(ext).ok()
    }

    /// [`Extents::new`], or an internal error naming the rank.
    #[inline]
    pub fn of(ext: &[usize]) -> crate::error::Result<Extents> {
        let mut out = Extents::zeroed(ext.len())?;
        out.copy_from_slice(ext);
        Ok(out)
    }

    /// `rank` extents of 0, to be set through `DerefMut`; an internal error naming the rank
    /// for more than [`MAX_RANK`]. Inlined: called from another unit of the crate, the result
    /// came back through memory and its read stalled on the stores just made (a quarter of
    /// `Worker::locate`'s time in a loop of one-element gets).
    #[inline]
    pub fn zeroed(rank: usize) -> crate::error::Result<Extents> {
        if rank > MAX_RANK {
            return Err(too_many(rank));
        }
        Ok(Extents {
            rank: rank as u8,
            ext: [0; MAX_RANK],
        })
    }

    #[inline]
    pub fn as_slice(&self) -> &[usize] {
        &self.ext[..usize::from(self.rank)]
    }
}

#[cold]
fn too_many(rank: usize) -> crate::error::RuntimeError {
    crate::error::RuntimeError::new(format!(
        "internal: a block of {rank} dimensions (at most {MAX_RANK})"
    ))
}

impl Deref for Extents {
    type Target = [usize];
    #[inline]
    fn deref(&self) -> &[usize] {
        self.as_slice()
    }
}

/// Extents written out (`[2, 3].into()`); more than [`MAX_RANK`] do not compile.
impl<const N: usize> From<[usize; N]> for Extents {
    fn from(ext: [usize; N]) -> Extents {
        const { assert!(N <= MAX_RANK) };
        let mut all = [0; MAX_RANK];
        all[..N].copy_from_slice(&ext);
        Extents {
            rank: N as u8,
            ext: all,
        }
    }
}

impl DerefMut for Extents {
    #[inline]
    fn deref_mut(&mut self) -> &mut [usize] {
        &mut self.ext[..usize::from(self.rank)]
    }
}

impl AsRef<[usize]> for Extents {
    fn as_ref(&self) -> &[usize] {
        self.as_slice()
    }
}

impl fmt::Debug for Extents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl PartialEq<[usize]> for Extents {
    fn eq(&self, other: &[usize]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Vec<usize>> for Extents {
    fn eq(&self, other: &Vec<usize>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

/// Serialised as a sequence, as a `Vec<usize>` is: files and messages written with vectors
/// read back the same.
impl Serialize for Extents {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.as_slice())
    }
}

impl<'de> Deserialize<'de> for Extents {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Extents, D::Error> {
        struct Seq;
        impl<'de> Visitor<'de> for Seq {
            type Value = Extents;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "at most {MAX_RANK} block extents")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Extents, A::Error> {
                let mut out = Extents::default();
                while let Some(e) = seq.next_element::<usize>()? {
                    let Some(slot) = out.ext.get_mut(usize::from(out.rank)) else {
                        return Err(de::Error::invalid_length(MAX_RANK + 1, &self));
                    };
                    *slot = e;
                    out.rank += 1;
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn more_than_six_extents_are_refused() {
        assert!(Extents::new(&[1; 7]).is_none());
        assert_eq!(Extents::new(&[2, 3]).map(|e| e.to_vec()), Some(vec![2, 3]));
        assert!(Extents::new(&[]).is_some_and(|e| e.is_empty()));
    }

    #[test]
    fn a_seventh_extent_in_a_message_is_an_error() {
        let bytes = postcard::to_allocvec(&vec![1usize; 7]).unwrap_or_default();
        assert!(postcard::from_bytes::<Extents>(&bytes).is_err());
    }

    proptest! {
        #[test]
        fn encodes_as_a_vector_does(ext in proptest::collection::vec(0usize..1 << 40, 0..=6)) {
            let Some(e) = Extents::new(&ext) else {
                return Err(TestCaseError::fail("six or fewer extents fit"));
            };
            let as_vec = postcard::to_allocvec(&ext).map_err(|x| TestCaseError::fail(x.to_string()))?;
            let as_ext = postcard::to_allocvec(&e).map_err(|x| TestCaseError::fail(x.to_string()))?;
            prop_assert_eq!(&as_vec, &as_ext);
            let back: Extents = postcard::from_bytes(&as_vec).map_err(|x| TestCaseError::fail(x.to_string()))?;
            prop_assert_eq!(back, e);
        }
    }
}
