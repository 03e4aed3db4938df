//! Checks that a program read from a file is one the runtime can run: every table slot in
//! range, jumps and loops that pair up, expressions whose stacks balance, plans and layouts that
//! fit their blocks. The compiler's output always passes; a damaged or hand-made file gets an
//! error naming the place, never a panic at run time.

use crate::*;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
#[error("invalid bytecode in {place}: {what}")]
pub struct Invalid {
    /// "instruction 12 (line 5)", "expression 3", "array table", …
    pub place: String,
    pub what: String,
}

type Check = std::result::Result<(), String>;

impl Program {
    /// Checks every table, instruction and expression (see the module documentation).
    pub fn validate(&self) -> Result<(), Invalid> {
        let v = Validator { p: self };
        let at = |place: String| move |what: String| Invalid { place, what };
        v.tables().map_err(at("the tables".into()))?;
        for (i, e) in self.exprs.iter().enumerate() {
            v.expression(e).map_err(at(format!("expression {i}")))?;
        }
        if !self.code.iter().any(|i| i.op == Op::End) {
            return Err(Invalid {
                place: "the code".into(),
                what: "no End instruction".into(),
            });
        }
        for (pc, ins) in self.code.iter().enumerate() {
            v.instruction(pc, ins)
                .map_err(at(format!("instruction {pc} (line {})", ins.loc.line)))?;
        }
        Ok(())
    }
}

struct Validator<'p> {
    p: &'p Program,
}

fn slot(kind: &str, i: usize, len: usize) -> Check {
    if i < len {
        Ok(())
    } else {
        Err(format!(
            "{kind} slot {i} out of range (the table has {len})"
        ))
    }
}

impl Validator<'_> {
    fn tables(&self) -> Check {
        let p = self.p;
        if p.files.is_empty() {
            return Err("no source file".into());
        }
        for (i, x) in p.indices.iter().enumerate() {
            for b in [x.lo, x.hi] {
                if let Bound::Predefined(s) = b {
                    self.int(s)?;
                }
            }
            match (x.kind, x.parent) {
                (IndexKind::Sub, Some(parent)) => {
                    self.index(parent)?;
                    if p.indices[parent.index()].kind == IndexKind::Sub {
                        return Err(format!("subindex {i} has a subindex as parent"));
                    }
                }
                (IndexKind::Sub, None) => return Err(format!("subindex {i} has no parent")),
                (_, Some(_)) => {
                    return Err(format!("index {i} is not a subindex but has a parent"));
                }
                (_, None) => {}
            }
        }
        for (i, a) in p.arrays.iter().enumerate() {
            if a.dims.len() > MAX_RANK {
                return Err(format!("array {i} has {} dimensions", a.dims.len()));
            }
            for d in &a.dims {
                self.index(*d)?;
            }
        }
        for (i, s) in p.specials.iter().enumerate() {
            if s.intents.len() > 64 {
                return Err(format!("special {i} has {} arguments", s.intents.len()));
            }
        }
        for pr in &p.procs {
            slot("instruction", pr.entry as usize, p.code.len())?;
        }
        Ok(())
    }

    fn int(&self, s: IntSlot) -> Check {
        slot("int", s.index(), self.p.ints.len())
    }
    fn scalar(&self, s: ScalarSlot) -> Check {
        slot("scalar", s.index(), self.p.scalars.len())
    }
    fn index(&self, s: IndexSlot) -> Check {
        slot("index", s.index(), self.p.indices.len())
    }
    fn array(&self, s: ArraySlot) -> Check {
        slot("array", s.index(), self.p.arrays.len())
    }
    fn string(&self, s: StringSlot) -> Check {
        slot("string", s.index(), self.p.strings.len())
    }

    /// An expression slot whose value is an int or relation (`int`) or a scalar.
    fn expr(&self, id: ExprId, int: bool) -> Check {
        slot("expression", id.index(), self.p.exprs.len())?;
        let is_int = self.p.exprs[id.index()].ty != ValueType::Scalar;
        if is_int != int {
            let want = if int { "an int" } else { "a scalar" };
            return Err(format!("expression {} is not {want}", id.index()));
        }
        Ok(())
    }

    /// The rank of a block reference, whose indices select every dimension of its array.
    fn block(&self, r: &BlockRef) -> Result<usize, String> {
        self.array(r.array)?;
        for i in &r.indices {
            self.index(*i)?;
        }
        let rank = self.p.arrays[r.array.index()].dims.len();
        if r.indices.len() != rank {
            return Err(format!(
                "array {} has {rank} dimensions, selected with {} indices",
                self.p.arrays[r.array.index()].name,
                r.indices.len()
            ));
        }
        Ok(rank)
    }

    fn region(&self, r: &RegionRef) -> Result<usize, String> {
        self.array(r.array)?;
        let rank = self.p.arrays[r.array.index()].dims.len();
        if r.ranges.len() != rank {
            return Err(format!(
                "region of {} has {} ranges for {rank} dimensions",
                self.p.arrays[r.array.index()].name,
                r.ranges.len()
            ));
        }
        for (lo, hi) in &r.ranges {
            self.expr(*lo, true)?;
            self.expr(*hi, true)?;
        }
        Ok(rank)
    }

    fn operand(&self, o: &Operand) -> Result<usize, String> {
        match o {
            Operand::Block(b) => self.block(b),
            Operand::Region(r) => self.region(r),
        }
    }

    /// `perm[d]` names a distinct dimension of the source for each destination dimension.
    fn layout(&self, l: &Layout, dst: usize, src: usize) -> Check {
        if l.perm.len() != dst {
            return Err(format!(
                "layout has {} entries for {dst} dimensions",
                l.perm.len()
            ));
        }
        let mut seen = [false; MAX_RANK];
        for p in l.perm.iter().flatten() {
            let p = *p as usize;
            if p >= src || seen[p] {
                return Err(format!("layout {:?} does not fit {src} dimensions", l.perm));
            }
            seen[p] = true;
        }
        Ok(())
    }

    /// Every operand dimension is summed or free exactly once; free dimensions land on
    /// distinct destination dimensions.
    fn plan(&self, plan: &ContractPlan, left: usize, right: usize, dst: usize) -> Check {
        let bad =
            || format!("contraction plan {plan:?} does not fit ranks {left}, {right} -> {dst}");
        let mut l = [0u8; MAX_RANK];
        let mut r = [0u8; MAX_RANK];
        let mut d = [0u8; MAX_RANK];
        let mark = |seen: &mut [u8; MAX_RANK], i: u8, len: usize| -> Check {
            let i = i as usize;
            if i >= len {
                return Err(bad());
            }
            seen[i] += 1;
            Ok(())
        };
        for &(a, b) in &plan.contracted {
            mark(&mut l, a, left)?;
            mark(&mut r, b, right)?;
        }
        for &(a, x) in &plan.left_free {
            mark(&mut l, a, left)?;
            mark(&mut d, x, dst)?;
        }
        for &(b, x) in &plan.right_free {
            mark(&mut r, b, right)?;
            mark(&mut d, x, dst)?;
        }
        let once = |seen: &[u8], len: usize| seen[..len].iter().all(|&n| n == 1);
        if !once(&l, left) || !once(&r, right) || d.iter().any(|&n| n > 1) {
            return Err(bad());
        }
        Ok(())
    }

    fn expression(&self, e: &Expr) -> Check {
        // Heights of the int and the scalar stack.
        let (mut ni, mut nf) = (0usize, 0usize);
        let pop = |n: &mut usize, k: usize| -> Check {
            *n = n.checked_sub(k).ok_or("stack underflow")?;
            Ok(())
        };
        for op in &e.ops {
            match op {
                ExprOp::Int(_) => ni += 1,
                ExprOp::LoadInt(s) => {
                    self.int(*s)?;
                    ni += 1
                }
                ExprOp::LoadIndex(s) => {
                    self.index(*s)?;
                    ni += 1
                }
                ExprOp::Scalar(_) => nf += 1,
                ExprOp::LoadScalar(s) => {
                    self.scalar(*s)?;
                    nf += 1
                }
                ExprOp::LoadBlockScalar(b) => {
                    self.block(b)?;
                    nf += 1
                }
                ExprOp::Dot { left, right, plan } => {
                    let (l, r) = (self.block(left)?, self.block(right)?);
                    self.plan(plan, l, r, MAX_RANK)?;
                    nf += 1
                }
                ExprOp::IntNeg => pop(&mut ni, 1).map(|_| ni += 1)?,
                ExprOp::ScalarNeg | ExprOp::ScalarSqrt => pop(&mut nf, 1).map(|_| nf += 1)?,
                ExprOp::ToInt => {
                    pop(&mut nf, 1)?;
                    ni += 1
                }
                ExprOp::ToScalar => {
                    pop(&mut ni, 1)?;
                    nf += 1
                }
                ExprOp::IntAdd
                | ExprOp::IntSub
                | ExprOp::IntMul
                | ExprOp::IntDiv
                | ExprOp::IntCmp(_) => {
                    pop(&mut ni, 2)?;
                    ni += 1
                }
                ExprOp::ScalarCmp(_) => {
                    pop(&mut nf, 2)?;
                    ni += 1
                }
                ExprOp::ScalarAdd
                | ExprOp::ScalarSub
                | ExprOp::ScalarMul
                | ExprOp::ScalarDiv
                | ExprOp::ScalarPow => {
                    pop(&mut nf, 2)?;
                    nf += 1
                }
            }
        }
        let balanced = match e.ty {
            ValueType::Scalar => (ni, nf) == (0, 1),
            ValueType::Int | ValueType::Bool => (ni, nf) == (1, 0),
        };
        if !balanced {
            return Err(format!(
                "a {:?} expression leaves {ni} ints and {nf} scalars",
                e.ty
            ));
        }
        Ok(())
    }

    /// The loop start instruction at `start`, with its `end`.
    fn loop_end(&self, start: Pc) -> Option<Pc> {
        match &self.p.code.get(start as usize)?.op {
            Op::DoStart { end, .. } | Op::DoInStart { end, .. } | Op::PardoStart { end, .. } => {
                Some(*end)
            }
            _ => None,
        }
    }

    fn exec_arg(&self, a: &ExecArg) -> Check {
        match a {
            ExecArg::Block(b) => self.block(b).map(|_| ()),
            ExecArg::Region(r) => self.region(r).map(|_| ()),
            ExecArg::Scalar(s) => self.scalar(*s),
            ExecArg::Array(a) => self.array(*a),
            ExecArg::Literal(_) => Ok(()),
        }
    }

    fn persistent(&self, o: &Persistent, label: StringSlot) -> Check {
        self.string(label)?;
        match o {
            Persistent::Scalar(s) => self.scalar(*s),
            Persistent::Array(a) => self.array(*a),
        }
    }

    /// A loop start at `pc`: its where clauses are relations and its `end` is its `LoopEnd`.
    fn loop_start(&self, pc: usize, end: Pc, wheres: &[ExprId]) -> Check {
        for w in wheres {
            self.expr(*w, true)?;
        }
        let pairs = (end as usize) > pc
            && matches!(self.p.code.get(end as usize), Some(Instr { op: Op::LoopEnd { start }, .. }) if *start as usize == pc);
        if !pairs {
            return Err(format!("loop end {end} is not this loop's LoopEnd"));
        }
        Ok(())
    }

    /// The indices (one to [`MAX_RANK`]) and pragma of a pardo.
    fn pardo_head(&self, indices: &[IndexSlot], pragma: Option<StringSlot>) -> Check {
        if indices.is_empty() || indices.len() > MAX_RANK {
            return Err(format!("pardo over {} indices", indices.len()));
        }
        for i in indices {
            self.index(*i)?;
        }
        pragma.map_or(Ok(()), |s| self.string(s))
    }

    /// An allocation selector: one entry per dimension of its array.
    fn selector(&self, array: ArraySlot, selector: &[Option<IndexSlot>]) -> Check {
        self.array(array)?;
        let rank = self.p.arrays[array.index()].dims.len();
        if selector.len() != rank {
            return Err(format!(
                "selector of {} entries for {rank} dimensions",
                selector.len()
            ));
        }
        selector.iter().flatten().try_for_each(|i| self.index(*i))
    }

    fn print_item(&self, item: &PrintItem) -> Check {
        match item {
            PrintItem::Str(s) => self.string(*s),
            PrintItem::IntVar(s) => self.int(*s),
            PrintItem::Index(s) => self.index(*s),
            PrintItem::ScalarVar(s) => self.scalar(*s),
            PrintItem::IntExpr(e) => self.expr(*e, true),
            PrintItem::ScalarExpr(e) => self.expr(*e, false),
            PrintItem::Block(o) => self.operand(o).map(|_| ()),
            PrintItem::Array(a) => self.array(*a),
        }
    }

    fn instruction(&self, pc: usize, ins: &Instr) -> Check {
        let p = self.p;
        let len = p.code.len();
        slot("file", ins.loc.file.index(), p.files.len())?;
        match &ins.op {
            Op::Jump { target } => slot("instruction", *target as usize, len),
            Op::JumpUnless { cond, target } => {
                self.expr(*cond, true)?;
                slot("instruction", *target as usize, len)
            }
            Op::Call { proc } => slot("procedure", proc.index(), p.procs.len()),
            Op::Return | Op::End | Op::Stop => Ok(()),
            Op::DoStart { index, wheres, end } => {
                self.index(*index)?;
                self.loop_start(pc, *end, wheres)
            }
            Op::DoInStart {
                index,
                parent,
                wheres,
                end,
            } => {
                self.index(*index)?;
                self.index(*parent)?;
                self.loop_start(pc, *end, wheres)
            }
            Op::PardoStart {
                indices,
                wheres,
                pragma,
                end,
            } => {
                self.pardo_head(indices, *pragma)?;
                self.loop_start(pc, *end, wheres)
            }
            Op::LoopEnd { start } => match self.loop_end(*start) {
                Some(end) if end as usize == pc && (*start as usize) < pc => Ok(()),
                _ => Err(format!("LoopEnd names {start}, which is not its loop")),
            },
            Op::Exit { start } => match self.loop_end(*start) {
                Some(end) if (*start as usize) < pc && pc < end as usize => Ok(()),
                _ => Err(format!("exit from {start}, which is not an enclosing loop")),
            },
            Op::SectionStart | Op::SectionEnd | Op::Barrier { .. } | Op::GpuOn | Op::GpuOff => {
                Ok(())
            }
            Op::AssignInt { target, value, .. } => {
                self.int(*target)?;
                self.expr(*value, true)
            }
            Op::AssignScalar { target, value, .. } | Op::Collective { target, value } => {
                self.scalar(*target)?;
                self.expr(*value, false)
            }
            Op::AssertSame { target } => self.scalar(*target),
            Op::BroadcastFrom { root, array } => {
                self.expr(*root, true)?;
                self.array(*array)
            }
            Op::BlockScalar { dst, value, .. } => {
                self.operand(dst)?;
                self.expr(*value, false)
            }
            Op::BlockCopy { dst, src, layout } => {
                let (d, s) = (self.operand(dst)?, self.operand(src)?);
                self.layout(layout, d, s)
            }
            Op::BlockAccumulate {
                dst, src, layout, ..
            } => {
                let (d, s) = (self.block(dst)?, self.block(src)?);
                self.layout(layout, d, s)
            }
            Op::BlockSum {
                dst, left, right, ..
            } => {
                for b in [dst, left, right] {
                    self.block(b)?;
                }
                Ok(())
            }
            Op::BlockContract {
                dst,
                left,
                right,
                plan,
                ..
            } => {
                let (d, l, r) = (self.block(dst)?, self.block(left)?, self.block(right)?);
                self.plan(plan, l, r, d)
            }
            Op::BlockScaleCopy {
                dst, src, factor, ..
            } => {
                self.block(dst)?;
                self.block(src)?;
                self.expr(*factor, false)
            }
            Op::Slice { dst, src } | Op::Insert { dst, src } => {
                self.block(dst)?;
                self.block(src).map(|_| ())
            }
            Op::Execute { special, args } => {
                slot("special", special.index(), p.specials.len())?;
                args.iter().try_for_each(|a| self.exec_arg(a))
            }
            Op::Allocate { array, selector } | Op::Deallocate { array, selector } => {
                self.selector(*array, selector)
            }
            Op::AllocateRegion { region } | Op::DeallocateRegion { region } => {
                self.region(region).map(|_| ())
            }
            Op::Create { array } | Op::Delete { array } => self.array(*array),
            Op::Get { block } => self.block(block).map(|_| ()),
            Op::Put { dst, value, .. } => {
                self.block(dst)?;
                match value {
                    PutValue::Block(b) => self.block(b).map(|_| ()),
                    PutValue::Scalar(e) => self.expr(*e, false),
                }
            }
            Op::SetPersistent { object, label } | Op::RestorePersistent { object, label } => {
                self.persistent(object, *label)
            }
            Op::Print { item, .. } => self.print_item(item),
            Op::Gpu { arg, .. } => self.exec_arg(arg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(code: Vec<Op>, exprs: Vec<Expr>) -> Program {
        let loc = Loc {
            file: FileSlot(0),
            line: 1,
        };
        Program {
            name: "t".into(),
            files: vec!["t.sial".into()],
            indices: vec![Index {
                name: "i".into(),
                kind: IndexKind::Simple,
                lo: Bound::Literal(1),
                hi: Bound::Literal(3),
                parent: None,
            }],
            ints: vec![],
            scalars: vec![],
            arrays: vec![],
            specials: vec![],
            strings: vec![],
            exprs,
            procs: vec![],
            code: code.into_iter().map(|op| Instr { op, loc }).collect(),
        }
    }

    fn int_expr(ops: Vec<ExprOp>) -> Expr {
        Expr {
            ty: ValueType::Int,
            ops,
        }
    }

    #[test]
    fn a_well_formed_loop_passes() {
        let p = program(
            vec![
                Op::DoStart {
                    index: IndexSlot(0),
                    wheres: vec![ExprId(0)],
                    end: 1,
                },
                Op::LoopEnd { start: 0 },
                Op::End,
            ],
            vec![int_expr(vec![
                ExprOp::LoadIndex(IndexSlot(0)),
                ExprOp::Int(2),
                ExprOp::IntCmp(CmpOp::Lt),
            ])],
        );
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn damage_is_named() {
        let cases = [
            (
                vec![Op::Jump { target: 7 }, Op::End],
                vec![],
                "instruction slot 7",
            ),
            (
                vec![
                    Op::Print {
                        item: PrintItem::IntExpr(ExprId(0)),
                        newline: true,
                    },
                    Op::End,
                ],
                vec![int_expr(vec![ExprOp::IntAdd])],
                "stack underflow",
            ),
            (
                vec![
                    Op::DoStart {
                        index: IndexSlot(0),
                        wheres: vec![],
                        end: 2,
                    },
                    Op::LoopEnd { start: 0 },
                    Op::End,
                ],
                vec![],
                "is not this loop's LoopEnd",
            ),
            (
                vec![Op::Exit { start: 0 }, Op::End],
                vec![],
                "not an enclosing loop",
            ),
            (vec![Op::Return], vec![], "no End"),
            (
                vec![
                    Op::Print {
                        item: PrintItem::Index(IndexSlot(3)),
                        newline: true,
                    },
                    Op::End,
                ],
                vec![],
                "index slot 3",
            ),
        ];
        for (code, exprs, want) in cases {
            let e = program(code, exprs).validate().expect_err(want);
            assert!(e.to_string().contains(want), "{e} lacks {want}");
        }
    }
}
