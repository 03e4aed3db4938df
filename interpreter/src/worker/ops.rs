//! Block operations (SIAL-SPEC §4.7–§4.12, §5.5): each instruction reads its operands, computes
//! with the kernels of `sial-superinstructions`, and stores the result.

use super::Worker;
use super::access::Labels;
use super::through::{Move, Product, Step};
use crate::cluster::message::{Payload, ToServer};
use crate::error::{Result, RuntimeError};
use crate::store::{Block, BlockKey, Extents, Storage};
use sial_bytecode::{BlockRef, Intent, Layout, Op, Operand, PutOp, PutValue, ScalarUpdate, Sign};
use sial_superinstructions as k;
use std::sync::Arc;

impl Worker<'_> {
    pub(super) fn block_op(&mut self, op: &Op) -> Result<()> {
        match op {
            Op::BlockScalar { dst, update, value } => {
                let v = self.eval_scalar(*value)?;
                // A block that exists is filled where it lies: no new buffer, no second
                // lookup to store it.
                if let (ScalarUpdate::Fill, Operand::Block(r)) = (update, dst) {
                    let (key, shape) = self.locate(r)?;
                    if let Some(data) = self.held_data_mut(r.array, &key) {
                        k::fill(data, v);
                        return Ok(());
                    }
                    let mut b = Block::overwritable(shape)?;
                    k::fill(&mut b.data, v);
                    return self.write_located(r, key, &shape, b);
                }
                // A block updated in place is taken from its array and put back, not copied.
                let taken = match (update, dst) {
                    (ScalarUpdate::Fill, _) | (_, Operand::Region(_)) => None,
                    (_, Operand::Block(r)) => Some(r),
                };
                let mut b = match (update, taken) {
                    (_, Some(r)) => self.take_block(r)?,
                    (ScalarUpdate::Fill, None) => Block::overwritable(self.operand_shape(dst)?)?,
                    (_, None) => self.update_operand(dst)?,
                };
                match update {
                    ScalarUpdate::Fill => k::fill(&mut b.data, v),
                    ScalarUpdate::Add => k::add_scalar(&mut b.data, v),
                    ScalarUpdate::Scale => k::scale(&mut b.data, v),
                }
                match taken {
                    Some(r) => self.put_back(r, b),
                    None => self.write_operand(dst, b),
                }
            }
            Op::BlockCopy { dst, src, layout } => {
                let s = self.read_operand(src)?;
                let mut d = Block::overwritable(self.operand_shape(dst)?)?;
                arrange(&mut d, &s, layout, None)?;
                self.write_operand(dst, d)
            }
            Op::BlockAccumulate {
                dst,
                src,
                sign,
                layout,
            } => self.accumulate(dst, src, *sign, layout),
            Op::BlockSum {
                dst,
                left,
                right,
                sign,
            } => {
                let (key, shape) = self.locate(dst)?;
                let mut d = Block::overwritable(shape)?;
                let (l, r) = (self.read_block(left)?, self.read_block(right)?);
                match sign {
                    Sign::Plus => k::add(&mut d.data, &l.data, &r.data)?,
                    Sign::Minus => k::sub(&mut d.data, &l.data, &r.data)?,
                }
                drop((l, r));
                self.write_located(dst, key, &shape, d)
            }
            // The compiler guarantees that the result is not an operand's array.
            Op::BlockContract {
                dst,
                left,
                right,
                accumulate,
                ..
            } => self.contract(dst, left, right, *accumulate),
            Op::BlockScaleCopy {
                dst,
                src,
                factor,
                accumulate,
            } => {
                let f = self.eval_scalar(*factor)?;
                let mut d = match (*accumulate, dst.array == src.array) {
                    (false, _) => Block::overwritable(self.shape_of(dst)?)?,
                    (true, true) => self.update_block(dst)?,
                    (true, false) => self.take_block(dst)?,
                };
                let s = self.read_block(src)?;
                if *accumulate {
                    k::axpy(&mut d.data, f, &s.data)?;
                } else {
                    k::scale_copy(&mut d.data, f, &s.data)?;
                }
                drop(s);
                if *accumulate {
                    self.put_back(dst, d)
                } else {
                    self.write_block(dst, d)
                }
            }
            Op::Slice { dst, src } => {
                let sub = self.sub_block(src)?;
                let whole = self.block_by_key(src, &sub.key, &sub.super_shape)?;
                let part = super::access::extract(&whole, &sub.origin, &sub.shape)?;
                if part.shape != self.shape_of(dst)? {
                    return Err(RuntimeError::program(
                        "slice: the sub-block and the destination block differ in shape",
                    ));
                }
                self.write_block(dst, part)
            }
            Op::Insert { dst, src } => {
                let part = self.read_block(src)?.into_owned()?;
                let sub = self.sub_block(dst)?;
                if part.shape != sub.shape {
                    return Err(RuntimeError::program(
                        "insert: the block and the destination sub-block differ in shape",
                    ));
                }
                let mut whole = match self.block_by_key(dst, &sub.key, &sub.super_shape) {
                    Ok(b) => b,
                    Err(_) => Block::zeros(sub.super_shape.clone())?,
                };
                super::access::paste(&mut whole, &sub.origin, &part);
                self.store_by_key(dst, sub.key, whole)
            }
            Op::Allocate { array, selector } | Op::Deallocate { array, selector } => {
                let allocate = matches!(op, Op::Allocate { .. });
                self.allocate(*array, selector, allocate)
            }
            Op::AllocateRegion { region } => self.allocate_region(region),
            Op::DeallocateRegion { region } => self.deallocate_region(region),
            Op::Delete { array } => {
                self.net.get_mut().forget(array.0);
                let array = array.0;
                self.tell_servers_from_every_worker(|from| ToServer::Delete { from, array })
            }
            Op::Put { dst, op, value } => self.put(dst, *op, value, None),
            Op::Print { item, newline } => self.print(item, *newline),
            Op::Execute { special, args } => self.execute(*special, args),
            Op::SetPersistent { object, label } => self.set_persistent(object, *label),
            Op::RestorePersistent { object, label } => self.restore_persistent(object, *label),
            // Carried out by `Worker::step` itself, never placed.
            Op::Jump { .. }
            | Op::JumpUnless { .. }
            | Op::Call { .. }
            | Op::Return
            | Op::End
            | Op::Stop
            | Op::DoStart { .. }
            | Op::DoInStart { .. }
            | Op::PardoStart { .. }
            | Op::LoopEnd { .. }
            | Op::Exit { .. }
            | Op::SectionStart
            | Op::SectionEnd
            | Op::Barrier { .. }
            | Op::AssignInt { .. }
            | Op::AssignScalar { .. }
            | Op::Collective { .. }
            | Op::AssertSame { .. }
            | Op::BroadcastFrom { .. }
            | Op::Create { .. }
            | Op::Get { .. }
            | Op::GpuOn
            | Op::GpuOff
            | Op::Gpu { .. } => Err(RuntimeError::new(format!(
                "internal: {op:?} is not a block instruction"
            ))),
        }
    }

    /// `d = l * r` and `d += l * r`: the contraction the index names define.
    fn contract(
        &mut self,
        dst: &BlockRef,
        left: &BlockRef,
        right: &BlockRef,
        accumulate: bool,
    ) -> Result<()> {
        if accumulate {
            let mut d = self.take_block(dst)?;
            let computed = self.contract_into(dst, &mut d, (left, right), accumulate, false);
            // Back where it was, also after an error.
            self.put_back(dst, d)?;
            return computed.map(drop);
        }
        let (key, shape) = self.locate(dst)?;
        // Overwritten: the kernels never read dst when beta is 0.
        let mut d = Block::overwritable(shape)?;
        self.contract_into(dst, &mut d, (left, right), accumulate, false)?;
        self.write_located(dst, key, &shape, d)
    }

    /// `d = l * r` (or `d += l * r`) into the buffer `d`, laid out as the block `dst` (the
    /// plan is found by `dst`'s labels and `d`'s shape). With `exact`, only where the plan adds
    /// each sum to its element once ([`k::ContractionPlan::adds_each_sum_in_place`]); whether it
    /// ran.
    fn contract_into(
        &mut self,
        dst: &BlockRef,
        d: &mut Block,
        (left, right): (&BlockRef, &BlockRef),
        accumulate: bool,
        exact: bool,
    ) -> Result<bool> {
        let (l, r) = (self.read_block(left)?, self.read_block(right)?);
        let (dl, ll, rl) = (Labels::of(dst), Labels::of(left), Labels::of(right));
        let plan =
            self.plans
                .borrow_mut()
                .plan((&dl, &d.shape), (&ll, &l.shape), (&rl, &r.shape))?;
        if exact && !plan.adds_each_sum_in_place() {
            return Ok(false);
        }
        plan.execute(
            &mut d.data,
            &l.data,
            &r.data,
            if accumulate { 1.0 } else { 0.0 },
        )?;
        Ok(true)
    }

    /// The contraction `t = l * r` and the `x += t` (or `u = t`, `x += u`) after it (`product`,
    /// marked by [`super::through::Through`]) as `x += l * r`, where `t`'s (and `u`'s) block
    /// is new, `x`'s is held in its array's map with as many elements, and the contraction's
    /// plan adds each sum to its element once (so `x` gets the same bits); `false`, with
    /// nothing done, where not (the instructions then run one by one and report what is wrong
    /// at their lines).
    #[inline(never)]
    pub(super) fn contract_through(&mut self, product: &Product<'_>) -> Result<bool> {
        let len = |shape: &Extents| shape.iter().product::<usize>();
        let (shape, held) = self.locate_held(product.result)?;
        // A copy or a sum that cannot be located reports it at its own line, unfused.
        let copy_fits = match product.copy {
            Some(u) => self
                .locate_held(u)
                .is_ok_and(|(s, held)| !held && len(&s) == len(&shape)),
            None => true,
        };
        let sum_fits = self
            .locate_held(product.dst)
            .is_ok_and(|(s, held)| held && len(&s) == len(&shape));
        if held || !copy_fits || !sum_fits {
            return Ok(false);
        }
        let mut x = self.take_block(product.dst)?;
        // The contraction sees x's elements laid out as t's.
        let x_shape = std::mem::replace(&mut x.shape, shape);
        let operands = (product.left, product.right);
        let computed = self.contract_into(product.result, &mut x, operands, true, true);
        x.shape = x_shape;
        self.put_back(product.dst, x)?;
        computed
    }

    /// `set_persistent`: marks the object to be saved under the label at the end of the program.
    fn set_persistent(
        &mut self,
        object: &sial_bytecode::Persistent,
        label: sial_bytecode::StringSlot,
    ) -> Result<()> {
        let label = self.program.strings[label.index()].clone();
        if let sial_bytecode::Persistent::Array(a) = object
            && let Some((_, first)) = self.marks.iter().find(|(o, _)| o == object)
        {
            // ACES4's servers refuse a second mark; its workers keep the first label
            // (rlambda_rhf marks its static `dipole` twice).
            if let Storage::Remote = self.memory[a.index()] {
                return Err(RuntimeError::program(format!(
                    "duplicate save of array {} in same sial program (set_persistent marks it once)",
                    self.array_name(*a)
                )));
            }
            self.warn(&format!(
                "{} is already marked persistent with label \"{first}\"; it is saved with that label, not \"{label}\"",
                self.array_name(*a)
            ));
            return Ok(());
        }
        self.marks.push((*object, label.clone()));
        if let sial_bytecode::Persistent::Array(a) = object
            && let Storage::Remote = self.memory[a.index()]
        {
            let array = a.0;
            self.tell_servers(|from| ToServer::SetPersistent {
                from,
                array,
                label: label.clone(),
            })?;
        }
        Ok(())
    }

    /// `restore_persistent`: the object saved under the label by an earlier program.
    fn restore_persistent(
        &mut self,
        object: &sial_bytecode::Persistent,
        label: sial_bytecode::StringSlot,
    ) -> Result<()> {
        let label = self.program.strings[label.index()].clone();
        if let sial_bytecode::Persistent::Array(a) = object
            && let Storage::Remote = self.memory[a.index()]
        {
            let array = a.0;
            return self.tell_servers_from_every_worker(|from| ToServer::RestorePersistent {
                from,
                array,
                label: label.clone(),
            });
        }
        self.restore(*object, &label)
    }

    /// A block of a block-map array by key (for the super block of a slice or insert).
    fn block_by_key(&self, r: &BlockRef, key: &BlockKey, shape: &[usize]) -> Result<Block> {
        match &self.memory[r.array.index()] {
            Storage::Remote => Ok(Arc::unwrap_or_clone(
                self.read_remote(r.array, *key, shape)?,
            )),
            Storage::Blocks(map) => map
                .get(key)
                .cloned()
                .ok_or_else(|| self.missing_block(r.array, key, Intent::Read)),
            Storage::Whole(whole) => {
                let dims = &self.program.arrays[r.array.index()].dims;
                let origin: Vec<usize> = dims
                    .iter()
                    .enumerate()
                    .map(|(d, &x)| {
                        self.layout
                            .offset(x, self.layout.range(x).lo, key.segments[d])
                    })
                    .collect();
                super::access::extract(whole, &origin, shape)
            }
            _ => Err(RuntimeError::new("internal: no blocks")),
        }
    }

    fn store_by_key(&mut self, r: &BlockRef, key: BlockKey, block: Block) -> Result<()> {
        if let Storage::Remote = self.memory[r.array.index()] {
            return Err(self.remote_write_error(r));
        }
        let dims = self.program.arrays[r.array.index()].dims.clone();
        let origin: Vec<usize> = dims
            .iter()
            .enumerate()
            .map(|(d, &x)| {
                self.layout
                    .offset(x, self.layout.range(x).lo, key.segments[d])
            })
            .collect();
        let temp = self.program.arrays[r.array.index()].kind == sial_bytecode::ArrayKind::Temp;
        match &mut self.memory[r.array.index()] {
            Storage::Blocks(map) => {
                if map.insert(key, block).is_none() && temp {
                    self.scopes.hold(r.array, key);
                }
                Ok(())
            }
            Storage::Whole(whole) => {
                super::access::paste(whole, &origin, &block);
                Ok(())
            }
            _ => Err(RuntimeError::new("internal: no blocks")),
        }
    }

    /// `allocate a[i, *]` / `deallocate a[i, *]`: wildcards range over the declared range.
    fn allocate(
        &mut self,
        array: sial_bytecode::ArraySlot,
        selector: &[Option<sial_bytecode::IndexSlot>],
        allocate: bool,
    ) -> Result<()> {
        let dims = self.program.arrays[array.index()].dims.clone();
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        for (d, sel) in selector.iter().enumerate() {
            match sel {
                Some(i) => {
                    let v = self.index_value(*i)?;
                    lo.push(v);
                    hi.push(v);
                }
                None => {
                    let r = self.layout.range(dims[d]);
                    lo.push(r.lo);
                    hi.push(r.hi);
                }
            }
        }
        let mut current = lo.clone();
        if hi.iter().zip(&lo).any(|(h, l)| h < l) {
            return Ok(());
        }
        if allocate && let Storage::Blocks(map) = &mut self.memory[array.index()] {
            // Room for every block at once (up to a million): the map does not grow, moving
            // its entries, each time it doubles on the way. Beyond that it grows as it goes,
            // so that an array too large for memory fails on its blocks, with the budget's
            // message, not on its map.
            let count = lo.iter().zip(&hi).try_fold(1usize, |n, (l, h)| {
                n.checked_mul((i64::from(*h) - i64::from(*l)) as usize + 1)
            });
            map.reserve(count.unwrap_or(usize::MAX).min(1 << 20));
        }
        loop {
            let mut key = BlockKey {
                segments: [1; 6],
                parents: [0; 6],
            };
            key.segments[..current.len()].copy_from_slice(&current);
            let shape: Vec<usize> = dims
                .iter()
                .enumerate()
                .map(|(d, &x)| self.layout.extent(x, current[d], 0))
                .collect();
            if let Storage::Blocks(map) = &mut self.memory[array.index()] {
                let gone = if allocate {
                    map.insert(key, Block::zeros(shape)?)
                } else {
                    Some(map.remove(&key).ok_or_else(|| {
                        RuntimeError::program(format!(
                            "attempting to remove a non-existent block {}",
                            self.block_text(array, &key)
                        ))
                    })?)
                };
                if let Some(b) = gone {
                    crate::spare::give(b.data);
                }
            }
            let mut advanced = false;
            for d in 0..current.len() {
                if current[d] < hi[d] {
                    current[d] += 1;
                    advanced = true;
                    break;
                }
                current[d] = lo[d];
            }
            if !advanced {
                return Ok(());
            }
        }
    }

    /// `dst += src` or `dst -= src`, `src` laid out onto `dst` by index name.
    fn accumulate(
        &mut self,
        dst: &BlockRef,
        src: &BlockRef,
        sign: Sign,
        layout: &Layout,
    ) -> Result<()> {
        let alpha = if sign == Sign::Plus { 1.0 } else { -1.0 };
        let mut d = if dst.array == src.array {
            self.update_block(dst)?
        } else {
            self.take_block(dst)?
        };
        let s = self.read_block(src)?;
        arrange(&mut d, &s, layout, Some(alpha))?;
        drop(s);
        self.put_back(dst, d)
    }

    /// The copy `t = s` at `pc` and the `x += t` after it (`step`, marked by
    /// [`super::through::Through`]) as `x += s`, where `t`'s block is new (it would die unread
    /// at the end of its scope); `false`, with nothing done, where the block exists or the copy
    /// would fail (blocks of different sizes: the copy reports it).
    #[inline(never)]
    pub(super) fn add_through(&mut self, pc: usize, step: Step<'_>) -> Result<bool> {
        let (shape, held) = self.locate_held(step.temp)?;
        if held {
            return Ok(false);
        }
        let (_, src_shape) = self.locate(step.src)?;
        if shape.iter().product::<usize>() != src_shape.iter().product::<usize>() {
            return Ok(false);
        }
        // Errors of the `+=` name its line, as they would unfused.
        let line = self
            .program
            .code
            .get(pc + 1)
            .map_or(self.line, |i| i.loc.line);
        self.accumulate(step.dst, step.src, step.sign, step.layout)
            .map_err(|e| e.at(&self.program.name, line))?;
        Ok(true)
    }

    /// A copy or `put` (marked by [`super::through::Through`]) taking the data of its source,
    /// a temp block nothing reads afterwards, where the block dies with the innermost scope;
    /// `false`, with nothing done, where it does not (it was made in an outer scope) or the
    /// copy would fail (blocks of different sizes: the copy reports it).
    #[inline(never)]
    pub(super) fn move_through(&mut self, m: &Move<'_>) -> Result<bool> {
        let src = m.src();
        let (key, src_shape) = self.locate(src)?;
        if !self.scopes.innermost_holds(src.array, key) {
            return Ok(false);
        }
        match *m {
            Move::Copy { dst, .. } => {
                let shape = self.shape_of(dst)?;
                let len = |s: &Extents| s.iter().product::<usize>();
                if len(&shape) != len(&src_shape) {
                    return Ok(false);
                }
                let Some(mut block) = self.take_dying(src, &key) else {
                    return Ok(false);
                };
                block.shape = shape;
                self.write_block(dst, block)?;
            }
            Move::Put { dst, op, value, .. } => self.put(dst, op, value, Some(key))?,
        }
        Ok(true)
    }

    /// A temp block of the innermost scope, out of its array (its scope finds it gone).
    fn take_dying(&mut self, src: &BlockRef, key: &BlockKey) -> Option<Block> {
        match &mut self.memory[src.array.index()] {
            Storage::Blocks(map) => map.remove(key),
            _ => None,
        }
    }

    /// `put`/`prepare`: the value goes to the block's server; the source may change right
    /// after. With `dying` (its key), a block source is a temp block of the innermost scope
    /// that nothing reads afterwards (`move_through`): its data goes, not a copy.
    fn put(
        &mut self,
        dst: &BlockRef,
        op: PutOp,
        value: &PutValue,
        dying: Option<BlockKey>,
    ) -> Result<()> {
        let (key, shape) = self.locate(dst)?;
        let (owner, array) = {
            let text = || self.block_text(dst.array, &key);
            let wanted = self.wanted(dst.array, key, &shape, &text);
            (wanted.owner, wanted.array)
        };
        let payload = match value {
            PutValue::Block(src) => {
                if op == PutOp::Accumulate {
                    let term = self.read_block(src)?;
                    if self
                        .net
                        .borrow_mut()
                        .put_to_sum(array, key, &shape, &term.data)
                    {
                        return Ok(());
                    }
                }
                match dying.and_then(|src_key| self.take_dying(src, &src_key)) {
                    Some(b) => Payload::Block(b.data),
                    None => Payload::Block(self.read_block(src)?.into_owned()?.data),
                }
            }
            PutValue::Scalar(e) => Payload::Scalar(self.eval_scalar(*e)?),
        };
        let from = self.net.borrow().origin(self.line);
        let msg = ToServer::Put {
            from,
            array,
            key,
            shape,
            op,
            payload,
        };
        self.net.get_mut().put(owner, msg, array, key)
    }
}

/// `d = s` or `d += alpha * s` with `s` laid out onto `d` by index name.
fn arrange(d: &mut Block, s: &Block, layout: &Layout, alpha: Option<f64>) -> Result<()> {
    if d.data.len() != s.data.len() {
        return Err(RuntimeError::program(format!(
            "blocks of shapes {:?} and {:?} have different sizes and cannot be copied onto each other",
            s.shape, d.shape
        )));
    }
    if layout.is_identity() {
        match alpha {
            None => k::copy(&mut d.data, &s.data)?,
            Some(a) => k::axpy(&mut d.data, a, &s.data)?,
        }
        return Ok(());
    }
    let perm: Vec<usize> = layout
        .perm
        .iter()
        .enumerate()
        .map(|(dd, p)| p.map_or(dd, usize::from))
        .collect();
    let (ds, ss) = (k::Shape::new(&d.shape)?, k::Shape::new(&s.shape)?);
    match alpha {
        None => k::permute(&mut d.data, &ds, &s.data, &ss, &perm)?,
        Some(a) => k::permute_add(&mut d.data, &ds, a, &s.data, &ss, &perm)?,
    }
    Ok(())
}
