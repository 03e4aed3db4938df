//! A worker's `put +=` and `prepare +=` terms to each block in the current section, summed here
//! and sent once per block: before the barrier, before any other request about the same array,
//! or when the worker memory budget has no room for them. A pardo that adds to the same blocks
//! in every iteration (the CCSD's AO ladder adds to its whole result array once per
//! iteration) then sends each block once per section instead of once per iteration.
//!
//! The sum is double-double ([`crate::sum`]); its high and low parts go to the server as two
//! terms, so the server's sum is the one the terms sent one by one would give.

use crate::cluster::message::{Origin, Payload, ToServer};
use crate::store::{BlockKey, BlockKeyMap, Extents};
use crate::sum::{compensated_add_block, compensated_start_block};
use sial_bytecode::PutOp;

/// The terms of one block summed so far.
struct Pending {
    server: usize,
    /// The first term's origin (the section is the same for all).
    from: Origin,
    array: u32,
    key: BlockKey,
    shape: Extents,
    hi: Vec<f64>,
    /// The low part, from the second term on.
    lo: Option<Vec<f64>>,
}

#[derive(Default)]
pub(super) struct Sums {
    /// Per array (by number): its blocks' sums.
    arrays: Vec<ArraySums>,
    /// Arrays with sums held.
    holding: usize,
    bytes: usize,
}

/// What became of a term offered to the sums held.
enum Added {
    Yes,
    /// No sum of the block is held.
    NotHeld,
    /// Another shape, or no memory for the low part.
    No,
}

/// The sums to blocks of one array, in the order of their first terms (the order they are sent
/// in).
#[derive(Default)]
struct ArraySums {
    pending: Vec<Pending>,
    index: BlockKeyMap<BlockKey, usize>,
}

impl Sums {
    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn is_empty(&self) -> bool {
        self.holding == 0
    }

    /// Whether terms to a block of `array` are held.
    pub(super) fn holds(&self, array: u32) -> bool {
        self.arrays
            .get(array as usize)
            .is_some_and(|a| !a.pending.is_empty())
    }

    fn held(&self, array: u32, key: &BlockKey) -> Option<&Pending> {
        let a = self.arrays.get(array as usize)?;
        a.index.get(key).map(|&i| &a.pending[i])
    }

    /// The bytes that adding the term `msg` (a `put +=` of a block) would take.
    pub(super) fn growth(&self, msg: &ToServer) -> usize {
        let ToServer::Put {
            array,
            key,
            payload: Payload::Block(data),
            ..
        } = msg
        else {
            return 0;
        };
        self.term_growth(*array, key, data.len())
    }

    /// The bytes that adding a term of `len` values to the block would take.
    pub(super) fn term_growth(&self, array: u32, key: &BlockKey, len: usize) -> usize {
        match self.held(array, key) {
            Some(p) if p.hi.len() == len && p.lo.is_some() => 0,
            _ => len * 8,
        }
    }

    /// Adds the term `msg`; returns it when it cannot be summed with the terms held (not a
    /// `put +=` of a block, another shape for the same block, a malformed request the server
    /// will report): it goes as it is.
    pub(super) fn add(&mut self, server: usize, msg: ToServer) -> Option<ToServer> {
        let (from, array, key, shape, data) = match msg {
            ToServer::Put {
                from,
                array,
                key,
                shape,
                op: PutOp::Accumulate,
                payload: Payload::Block(data),
            } => (from, array, key, shape, data),
            other => return Some(other),
        };
        match self.add_to_held(array, &key, &shape, &data) {
            Added::Yes => {
                crate::spare::give(data);
                None
            }
            Added::NotHeld => {
                self.hold(Pending {
                    server,
                    from,
                    array,
                    key,
                    shape,
                    hi: data,
                    lo: None,
                });
                None
            }
            // Where the shape differs or the allocator refuses, the term goes as it is.
            Added::No => Some(accumulate(from, array, key, shape, data)),
        }
    }

    /// Adds a term to a block whose sum is held, without the caller copying it first; whether
    /// it was added (else it goes through [`Sums::add`]).
    pub(super) fn add_to_sum(
        &mut self,
        array: u32,
        key: &BlockKey,
        shape: &[usize],
        data: &[f64],
    ) -> bool {
        matches!(self.add_to_held(array, key, shape, data), Added::Yes)
    }

    fn add_to_held(&mut self, array: u32, key: &BlockKey, shape: &[usize], data: &[f64]) -> Added {
        let Some(sums) = self.arrays.get_mut(array as usize) else {
            return Added::NotHeld;
        };
        let Some(&i) = sums.index.get(key) else {
            return Added::NotHeld;
        };
        let p = &mut sums.pending[i];
        if p.shape.as_slice() != shape || p.hi.len() != data.len() {
            return Added::No;
        }
        match p.lo.as_mut() {
            Some(lo) => compensated_add_block(&mut p.hi, lo, data),
            None => {
                let Some(mut lo) = crate::spare::overwritable(data.len()) else {
                    return Added::No;
                };
                compensated_start_block(&mut p.hi, &mut lo, data);
                self.bytes += data.len() * 8;
                p.lo = Some(lo);
            }
        }
        Added::Yes
    }

    /// Starts the sum of a block with its first term.
    fn hold(&mut self, p: Pending) {
        let array = p.array as usize;
        if self.arrays.len() <= array {
            self.arrays.resize_with(array + 1, ArraySums::default);
        }
        let sums = &mut self.arrays[array];
        if sums.pending.is_empty() {
            self.holding += 1;
        }
        self.bytes += p.hi.len() * 8;
        sums.index.insert(p.key, sums.pending.len());
        sums.pending.push(p);
    }

    /// Every sum held, as the requests that send it (server, request): array by array, each
    /// in the order of first terms.
    pub(super) fn take_all(&mut self) -> Vec<(usize, ToServer)> {
        let mut out = Vec::new();
        for array in 0..self.arrays.len() as u32 {
            out.extend(self.take_array(array));
        }
        out
    }

    /// The sums held for blocks of `array`, as [`Sums::take_all`]; the others stay.
    pub(super) fn take_array(&mut self, array: u32) -> Vec<(usize, ToServer)> {
        let Some(sums) = self.arrays.get_mut(array as usize) else {
            return Vec::new();
        };
        if sums.pending.is_empty() {
            return Vec::new();
        }
        self.holding -= 1;
        sums.index.clear();
        let taken = std::mem::take(&mut sums.pending);
        self.bytes -= taken.iter().map(bytes_of).sum::<usize>();
        taken.into_iter().flat_map(requests).collect()
    }
}

fn bytes_of(p: &Pending) -> usize {
    (p.hi.len() + p.lo.as_ref().map_or(0, Vec::len)) * 8
}

/// A `put +=` of `data` to the block.
fn accumulate(from: Origin, array: u32, key: BlockKey, shape: Extents, data: Vec<f64>) -> ToServer {
    ToServer::Put {
        from,
        array,
        key,
        shape,
        op: PutOp::Accumulate,
        payload: Payload::Block(data),
    }
}

/// The high part, then the low part unless it is all zeros (a single term).
fn requests(p: Pending) -> Vec<(usize, ToServer)> {
    let Pending {
        server,
        from,
        array,
        key,
        shape,
        hi,
        lo,
    } = p;
    let lo = lo.filter(|lo| lo.iter().any(|&x| x != 0.0));
    let mut out = Vec::with_capacity(2);
    if let Some(lo) = lo {
        out.push((server, accumulate(from, array, key, shape, hi)));
        out.push((server, accumulate(from, array, key, shape, lo)));
    } else {
        out.push((server, accumulate(from, array, key, shape, hi)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: i32) -> BlockKey {
        BlockKey {
            segments: [i, 0, 0, 0, 0, 0],
            parents: [0; 6],
        }
    }

    fn from(line: u32) -> Origin {
        Origin {
            worker: 0,
            section: 0,
            line,
        }
    }

    fn data(msg: &ToServer) -> (u32, BlockKey, u32, Vec<f64>) {
        match msg {
            ToServer::Put {
                from,
                array,
                key,
                op: PutOp::Accumulate,
                payload: Payload::Block(d),
                ..
            } => (*array, *key, from.line, d.clone()),
            other => panic!("not an accumulate: {other:?}"),
        }
    }

    #[test]
    fn terms_to_one_block_go_as_one_sum_in_order_of_first_terms() {
        let mut s = Sums::default();
        assert!(
            s.add(
                1,
                accumulate(from(10), 3, key(1), [2].into(), vec![1.0, 2.0])
            )
            .is_none()
        );
        assert!(
            s.add(0, accumulate(from(11), 3, key(2), [1].into(), vec![5.0]))
                .is_none()
        );
        assert!(
            s.add(
                1,
                accumulate(from(12), 3, key(1), [2].into(), vec![1e16, 1.0])
            )
            .is_none()
        );
        assert!(
            s.add(
                1,
                accumulate(from(12), 3, key(1), [2].into(), vec![-1e16, 4.0])
            )
            .is_none()
        );
        assert_eq!(s.bytes(), 5 * 8);
        assert!(s.holds(3) && !s.holds(2) && !s.holds(40));
        let sent = s.take_all();
        // Block 1: high part, then a low part of zeros is left out: 1 + 1e16 - 1e16 = 1 exactly.
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].0, 1);
        assert_eq!(data(&sent[0].1), (3, key(1), 10, vec![1.0, 7.0]));
        assert_eq!(sent[1].0, 0);
        assert_eq!(data(&sent[1].1), (3, key(2), 11, vec![5.0]));
        assert!(s.is_empty() && s.bytes() == 0 && !s.holds(3));
    }

    #[test]
    fn all_sums_go_array_by_array() {
        let mut s = Sums::default();
        s.add(0, accumulate(from(1), 5, key(0), [1].into(), vec![1.0]));
        s.add(0, accumulate(from(2), 2, key(1), [1].into(), vec![2.0]));
        s.add(0, accumulate(from(3), 5, key(2), [1].into(), vec![3.0]));
        let sent: Vec<_> = s.take_all().iter().map(|m| data(&m.1).2).collect();
        assert_eq!(sent, [2, 1, 3]);
        assert!(s.is_empty() && s.bytes() == 0);
    }

    #[test]
    fn a_low_part_goes_after_its_high_part() {
        let mut s = Sums::default();
        s.add(0, accumulate(from(1), 0, key(0), [1].into(), vec![1.0]));
        s.add(0, accumulate(from(1), 0, key(0), [1].into(), vec![1e-20]));
        let sent = s.take_all();
        assert_eq!(sent.len(), 2);
        assert_eq!(data(&sent[0].1).3, vec![1.0]);
        assert_eq!(data(&sent[1].1).3, vec![1e-20]);
    }

    #[test]
    fn one_array_is_taken_and_the_others_stay() {
        let mut s = Sums::default();
        s.add(0, accumulate(from(1), 0, key(0), [1].into(), vec![1.0]));
        s.add(0, accumulate(from(1), 1, key(0), [1].into(), vec![2.0]));
        s.add(0, accumulate(from(1), 0, key(1), [1].into(), vec![3.0]));
        let sent = s.take_array(0);
        assert_eq!(sent.len(), 2);
        assert!(!s.holds(0) && s.holds(1));
        assert_eq!(s.bytes(), 8);
        assert_eq!(
            s.growth(&accumulate(from(1), 1, key(0), [1].into(), vec![0.0])),
            8,
            "a second term adds a low part"
        );
        assert_eq!(
            s.growth(&accumulate(from(1), 0, key(0), [1].into(), vec![0.0])),
            8,
            "a new block"
        );
        s.add(0, accumulate(from(1), 1, key(0), [1].into(), vec![2.0]));
        assert_eq!(
            s.growth(&accumulate(from(1), 1, key(0), [1].into(), vec![0.0])),
            0
        );
        assert_eq!(data(&s.take_all()[0].1).3, vec![4.0]);
    }

    #[test]
    fn a_term_added_in_place_sums_as_one_sent_whole() {
        let terms = [vec![1.0, 2.0], vec![1e16, 1.0], vec![-1e16, 4.0]];
        let mut whole = Sums::default();
        let mut in_place = Sums::default();
        for t in &terms {
            whole.add(0, accumulate(from(1), 0, key(0), [2].into(), t.clone()));
        }
        // Only a block whose sum is held takes a term in place.
        assert!(!in_place.add_to_sum(0, &key(0), &[2], &terms[0]));
        in_place.add(
            0,
            accumulate(from(1), 0, key(0), [2].into(), terms[0].clone()),
        );
        for t in &terms[1..] {
            assert!(in_place.add_to_sum(0, &key(0), &[2], t));
        }
        assert!(
            !in_place.add_to_sum(0, &key(0), &[1, 2], &terms[0]),
            "another shape"
        );
        assert!(
            !in_place.add_to_sum(0, &key(0), &[2], &[1.0]),
            "another length"
        );
        assert_eq!(in_place.bytes(), whole.bytes());
        let sent = |s: &mut Sums| -> Vec<_> { s.take_all().iter().map(|m| data(&m.1)).collect() };
        assert_eq!(sent(&mut in_place), sent(&mut whole));
    }

    #[test]
    fn a_term_of_another_shape_is_not_summed() {
        let mut s = Sums::default();
        s.add(0, accumulate(from(1), 0, key(0), [1].into(), vec![1.0]));
        let back = s.add(
            0,
            accumulate(from(2), 0, key(0), [2].into(), vec![1.0, 2.0]),
        );
        assert_eq!(back.map(|m| data(&m).3), Some(vec![1.0, 2.0]));
        assert_eq!(s.bytes(), 8);
    }
}
