//! Contraction plans kept by labels and shapes. A SIAL program runs the same contraction on
//! blocks of the same shapes over and over (every iteration of its loops), and planning one
//! (choosing group orders, and batch labels where copies would be needed) costs about 17 µs:
//! more than a whole contraction of small blocks (5 µs for `aibj = acbj * ci` at 9 and 5).
//! Both the host's contraction (`ops`) and the device form of an instruction (`gpu::form`,
//! built for the instruction and the next three when placing it) take their plans here.

use crate::error::Result;
use crate::store::KeyMap;
use sial_bytecode::MAX_RANK;
use sial_superinstructions as k;
use std::sync::Arc;

/// Plans made so far; cleared when it holds `LIMIT` (a program has a few hundred contractions,
/// each on a few shapes of blocks, so this is only reached by pathological programs).
#[derive(Default)]
pub(super) struct Plans {
    made: KeyMap<Vec<u32>, Arc<k::ContractionPlan>>,
}

const LIMIT: usize = 4096;

/// Labels and extents of one operand.
pub(super) type Side<'s> = (&'s [u32], &'s [usize]);

impl Plans {
    /// The plan for `dst = left * right`, made on first use.
    pub(super) fn plan(
        &mut self,
        dst: Side<'_>,
        left: Side<'_>,
        right: Side<'_>,
    ) -> Result<Arc<k::ContractionPlan>> {
        let key = key_of([dst, left, right]);
        if let Some(plan) = key.as_ref().and_then(|k| self.made.get(k.as_slice())) {
            return Ok(Arc::clone(plan));
        }
        let shape = |s: Side<'_>| k::Shape::new(s.1);
        let (ds, ls, rs) = (shape(dst)?, shape(left)?, shape(right)?);
        let plan = Arc::new(k::ContractionPlan::new(
            (dst.0, &ds),
            (left.0, &ls),
            (right.0, &rs),
        )?);
        if self.made.len() >= LIMIT {
            self.made.clear();
        }
        if let Some(key) = key {
            self.made.insert(key.as_slice().to_vec(), Arc::clone(&plan));
        }
        Ok(plan)
    }
}

/// Rank, labels and extents of each operand in one key (extents fit in u32: a block of 2³²
/// elements along one dimension is far beyond any memory), on the stack: a plan is looked up
/// at every contraction, and allocating the key, or pushing its parts one at a time, cost as
/// much as finding it.
struct Key {
    parts: [u32; 3 * (1 + 2 * MAX_RANK)],
    len: usize,
}

impl Key {
    fn as_slice(&self) -> &[u32] {
        &self.parts[..self.len]
    }
}

/// `None` where an operand has more than `MAX_RANK` labels (the bytecode's check refuses them)
/// or not one extent per label: such a plan is not kept.
fn key_of(sides: [Side<'_>; 3]) -> Option<Key> {
    if sides
        .iter()
        .any(|(l, e)| l.len() > MAX_RANK || e.len() != l.len())
    {
        return None;
    }
    let mut key = Key {
        parts: [0; 3 * (1 + 2 * MAX_RANK)],
        len: 0,
    };
    for (labels, extents) in sides {
        let (rank, at) = (labels.len(), key.len);
        key.parts[at] = rank as u32;
        key.parts[at + 1..at + 1 + rank].copy_from_slice(&labels[..rank]);
        for (k, &e) in key.parts[at + 1 + rank..at + 1 + 2 * rank]
            .iter_mut()
            .zip(extents)
        {
            *k = u32::try_from(e).unwrap_or(u32::MAX);
        }
        key.len = at + 1 + 2 * rank;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_made_once_per_labels_and_shapes() -> Result<()> {
        let mut plans = Plans::default();
        let d = (&[1u32, 2][..], &[3usize, 4][..]);
        let l = (&[1u32, 5][..], &[3usize, 6][..]);
        let r = (&[5u32, 2][..], &[6usize, 4][..]);
        let a = plans.plan(d, l, r)?;
        let b = plans.plan(d, l, r)?;
        assert!(Arc::ptr_eq(&a, &b));
        // Other extents: another plan, with its own flops.
        let c = plans.plan((d.0, &[3, 5]), l, (r.0, &[6, 5]))?;
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.flops(), 2.0 * 3.0 * 5.0 * 6.0);
        // Same extents, labels in another order: another plan.
        let e = plans.plan((&[2, 1], &[4, 3]), l, r)?;
        assert!(!Arc::ptr_eq(&a, &e));
        Ok(())
    }

    #[test]
    fn keys_tell_operands_apart() {
        // [1,2] + [3] and [1] + [2,3] must not collide.
        let a = key_of([(&[1, 2], &[4, 4]), (&[3], &[4]), (&[], &[])]);
        let b = key_of([(&[1], &[4]), (&[2, 3], &[4, 4]), (&[], &[])]);
        let (a, b) = (a.as_ref().map(Key::as_slice), b.as_ref().map(Key::as_slice));
        assert!(a.is_some() && b.is_some());
        assert_ne!(a, b);
    }
}
