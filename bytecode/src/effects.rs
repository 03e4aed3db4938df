//! What an instruction touches: the one place that knows which blocks, arrays and variables
//! each instruction reads, writes or updates, which expressions it evaluates, and which part of
//! the runtime carries it out. The worker's dispatch, the device placement and the listing ask
//! here instead of keeping lists of their own.

use crate::*;

/// How an instruction uses what it touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Overwrites without reading.
    Write,
    /// Reads and writes (`+=`, `*=`, an intent `u`).
    Update,
}

impl Access {
    pub fn writes(self) -> bool {
        self != Access::Read
    }
}

/// Something an instruction touches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target<'a> {
    Block(&'a BlockRef),
    Region(&'a RegionRef),
    /// A whole array (or the blocks a selector names).
    Array(ArraySlot),
    Scalar(ScalarSlot),
    Int(IntSlot),
    Index(IndexSlot),
}

impl Target<'_> {
    /// The array of a block, region or array target.
    pub fn array(&self) -> Option<ArraySlot> {
        match self {
            Target::Block(b) => Some(b.array),
            Target::Region(r) => Some(r.array),
            Target::Array(a) => Some(*a),
            Target::Scalar(_) | Target::Int(_) | Target::Index(_) => None,
        }
    }
}

/// Which part of the runtime carries out an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Jumps, calls, loops, the end.
    Control,
    /// Barriers and section ends: every worker and server takes part.
    Synchronise,
    /// Int and scalar variables.
    Variables,
    /// Among the workers: collective sums, checks and broadcasts.
    Collective,
    /// Blocks of the worker's own storage (computation, specials, allocation).
    Blocks,
    /// Blocks held by servers: create, delete, get, put.
    Remote,
    /// Marks and restores between the programs of a job.
    Persistence,
    Output,
    /// Scheduling hints (sections, GPU statements) that change no value.
    Hint,
}

/// What one instruction touches (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Effects<'a> {
    pub class: Class,
    pub uses: Vec<(Target<'a>, Access)>,
    /// Expressions evaluated (which may read blocks themselves: [`Program::expr_blocks`]).
    pub exprs: Vec<ExprId>,
}

impl Effects<'_> {
    /// The first array the instruction writes or updates, for messages.
    pub fn written_array(&self) -> Option<ArraySlot> {
        self.uses
            .iter()
            .find(|(t, a)| a.writes() && t.array().is_some())
            .and_then(|(t, _)| t.array())
    }
}

impl Program {
    /// What `op` touches.
    pub fn effects<'a>(&self, op: &'a Op) -> Effects<'a> {
        let mut uses = Vec::new();
        let mut exprs = Vec::new();
        self.touches(op, &mut uses, &mut exprs);
        Effects {
            class: class(op),
            uses,
            exprs,
        }
    }

    /// The targets `op` reads and writes, and the expressions it evaluates, in operand order.
    fn touches<'a>(
        &self,
        op: &'a Op,
        uses: &mut Vec<(Target<'a>, Access)>,
        exprs: &mut Vec<ExprId>,
    ) {
        use Access::{Read, Update, Write};
        let assign = |op: ScalarAssign| match op {
            ScalarAssign::Set => Write,
            ScalarAssign::Add | ScalarAssign::Sub | ScalarAssign::Mul => Update,
        };
        // A contraction or scaled copy overwrites its destination unless it accumulates.
        let result = |accumulate: bool| if accumulate { Update } else { Write };
        match op {
            Op::Jump { .. }
            | Op::Call { .. }
            | Op::Return
            | Op::End
            | Op::Stop
            | Op::LoopEnd { .. }
            | Op::Exit { .. }
            | Op::SectionStart
            | Op::SectionEnd
            | Op::Barrier { .. }
            | Op::GpuOn
            | Op::GpuOff => {}
            Op::JumpUnless { cond, .. } => exprs.push(*cond),
            Op::DoStart { index, wheres, .. } => {
                uses.push((Target::Index(*index), Write));
                exprs.extend(wheres);
            }
            Op::DoInStart {
                index,
                parent,
                wheres,
                ..
            } => {
                uses.push((Target::Index(*parent), Read));
                uses.push((Target::Index(*index), Write));
                exprs.extend(wheres);
            }
            Op::PardoStart {
                indices, wheres, ..
            } => {
                uses.extend(indices.iter().map(|i| (Target::Index(*i), Write)));
                exprs.extend(wheres);
            }
            Op::Gpu { arg, .. } => uses.extend(exec_arg(arg, exprs).map(|t| (t, Read))),
            Op::AssignInt { target, op, value } => {
                uses.push((Target::Int(*target), assign(*op)));
                exprs.push(*value);
            }
            Op::AssignScalar { target, op, value } => {
                uses.push((Target::Scalar(*target), assign(*op)));
                exprs.push(*value);
            }
            Op::Collective { target, value } => {
                uses.push((Target::Scalar(*target), Update));
                exprs.push(*value);
            }
            Op::AssertSame { target } => uses.push((Target::Scalar(*target), Read)),
            Op::BroadcastFrom { root, array } => {
                uses.push((Target::Array(*array), Update));
                exprs.push(*root);
            }
            Op::BlockScalar { dst, update, value } => {
                let access = match update {
                    ScalarUpdate::Fill => Write,
                    ScalarUpdate::Add | ScalarUpdate::Scale => Update,
                };
                uses.push((operand(dst, exprs), access));
                exprs.push(*value);
            }
            Op::BlockCopy { dst, src, .. } => {
                uses.push((operand(dst, exprs), Write));
                uses.push((operand(src, exprs), Read));
            }
            Op::BlockAccumulate { dst, src, .. } | Op::Insert { dst, src } => {
                uses.extend([(Target::Block(dst), Update), (Target::Block(src), Read)]);
            }
            Op::Slice { dst, src } => {
                uses.extend([(Target::Block(dst), Write), (Target::Block(src), Read)]);
            }
            Op::BlockSum {
                dst, left, right, ..
            } => uses.extend([
                (Target::Block(dst), Write),
                (Target::Block(left), Read),
                (Target::Block(right), Read),
            ]),
            Op::BlockContract {
                dst,
                left,
                right,
                accumulate,
                ..
            } => uses.extend([
                (Target::Block(dst), result(*accumulate)),
                (Target::Block(left), Read),
                (Target::Block(right), Read),
            ]),
            Op::BlockScaleCopy {
                dst,
                src,
                factor,
                accumulate,
            } => {
                uses.push((Target::Block(dst), result(*accumulate)));
                uses.push((Target::Block(src), Read));
                exprs.push(*factor);
            }
            Op::Execute { special, args } => self.execute_uses(*special, args, uses, exprs),
            Op::Allocate { array, .. }
            | Op::Deallocate { array, .. }
            | Op::Create { array }
            | Op::Delete { array } => uses.push((Target::Array(*array), Write)),
            Op::AllocateRegion { region } | Op::DeallocateRegion { region } => {
                uses.push((Target::Region(region), Write));
                region_bounds(region, exprs);
            }
            Op::Get { block } => uses.push((Target::Block(block), Read)),
            Op::Put { dst, op, value } => {
                let access = match op {
                    PutOp::Replace => Write,
                    PutOp::Accumulate | PutOp::Scale => Update,
                };
                uses.push((Target::Block(dst), access));
                match value {
                    PutValue::Block(b) => uses.push((Target::Block(b), Read)),
                    PutValue::Scalar(e) => exprs.push(*e),
                }
            }
            Op::SetPersistent { object, .. } => uses.push((persistent(*object), Read)),
            Op::RestorePersistent { object, .. } => uses.push((persistent(*object), Write)),
            Op::Print { item, .. } => print_uses(item, uses, exprs),
        }
    }

    /// The arguments of `execute`, as their special's intents say (an argument past the
    /// declared intents may be read and written).
    fn execute_uses<'a>(
        &self,
        special: SpecialSlot,
        args: &'a [ExecArg],
        uses: &mut Vec<(Target<'a>, Access)>,
        exprs: &mut Vec<ExprId>,
    ) {
        let intents = self
            .specials
            .get(special.index())
            .map_or(&[][..], |s| &s.intents[..]);
        for (i, a) in args.iter().enumerate() {
            let access = match intents.get(i) {
                Some(Intent::Read) => Access::Read,
                Some(Intent::Write) => Access::Write,
                Some(Intent::Update) | None => Access::Update,
            };
            uses.extend(exec_arg(a, exprs).map(|t| (t, access)));
        }
    }

    /// The blocks an expression reads (element loads and dot products).
    pub fn expr_blocks(&self, id: ExprId) -> impl Iterator<Item = &BlockRef> {
        self.exprs
            .get(id.index())
            .into_iter()
            .flat_map(|e| &e.ops)
            .flat_map(|op| match op {
                ExprOp::LoadBlockScalar(b) => [Some(b), None],
                ExprOp::Dot { left, right, .. } => [Some(left), Some(right)],
                ExprOp::Int(_)
                | ExprOp::Scalar(_)
                | ExprOp::LoadInt(_)
                | ExprOp::LoadIndex(_)
                | ExprOp::LoadScalar(_)
                | ExprOp::IntAdd
                | ExprOp::IntSub
                | ExprOp::IntMul
                | ExprOp::IntDiv
                | ExprOp::IntNeg
                | ExprOp::ScalarAdd
                | ExprOp::ScalarSub
                | ExprOp::ScalarMul
                | ExprOp::ScalarDiv
                | ExprOp::ScalarPow
                | ExprOp::ScalarNeg
                | ExprOp::ScalarSqrt
                | ExprOp::ToInt
                | ExprOp::ToScalar
                | ExprOp::IntCmp(_)
                | ExprOp::ScalarCmp(_) => [None, None],
            })
            .flatten()
    }
}

impl Op {
    /// Which part of the runtime carries out the instruction.
    pub fn class(&self) -> Class {
        class(self)
    }
}

/// Which part of the runtime carries out `op`.
fn class(op: &Op) -> Class {
    match op {
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
        | Op::Exit { .. } => Class::Control,
        Op::SectionEnd | Op::Barrier { .. } => Class::Synchronise,
        Op::SectionStart | Op::GpuOn | Op::GpuOff | Op::Gpu { .. } => Class::Hint,
        Op::AssignInt { .. } | Op::AssignScalar { .. } => Class::Variables,
        Op::Collective { .. } | Op::AssertSame { .. } | Op::BroadcastFrom { .. } => {
            Class::Collective
        }
        Op::BlockScalar { .. }
        | Op::BlockCopy { .. }
        | Op::BlockAccumulate { .. }
        | Op::BlockSum { .. }
        | Op::BlockContract { .. }
        | Op::BlockScaleCopy { .. }
        | Op::Slice { .. }
        | Op::Insert { .. }
        | Op::Execute { .. }
        | Op::Allocate { .. }
        | Op::Deallocate { .. }
        | Op::AllocateRegion { .. }
        | Op::DeallocateRegion { .. } => Class::Blocks,
        Op::Create { .. } | Op::Delete { .. } | Op::Get { .. } | Op::Put { .. } => Class::Remote,
        Op::SetPersistent { .. } | Op::RestorePersistent { .. } => Class::Persistence,
        Op::Print { .. } => Class::Output,
    }
}

/// A persistent object as a target.
fn persistent<'a>(object: Persistent) -> Target<'a> {
    match object {
        Persistent::Scalar(s) => Target::Scalar(s),
        Persistent::Array(a) => Target::Array(a),
    }
}

/// What `print` reads.
fn print_uses<'a>(
    item: &'a PrintItem,
    uses: &mut Vec<(Target<'a>, Access)>,
    exprs: &mut Vec<ExprId>,
) {
    match item {
        PrintItem::Str(_) => {}
        PrintItem::IntVar(s) => uses.push((Target::Int(*s), Access::Read)),
        PrintItem::Index(i) => uses.push((Target::Index(*i), Access::Read)),
        PrintItem::ScalarVar(s) => uses.push((Target::Scalar(*s), Access::Read)),
        PrintItem::IntExpr(e) | PrintItem::ScalarExpr(e) => exprs.push(*e),
        PrintItem::Block(o) => uses.push((operand(o, exprs), Access::Read)),
        PrintItem::Array(a) => uses.push((Target::Array(*a), Access::Read)),
    }
}

/// A block or region operand; a region's bounds are expressions evaluated.
fn operand<'a>(o: &'a Operand, exprs: &mut Vec<ExprId>) -> Target<'a> {
    match o {
        Operand::Block(b) => Target::Block(b),
        Operand::Region(r) => {
            region_bounds(r, exprs);
            Target::Region(r)
        }
    }
}

fn exec_arg<'a>(a: &'a ExecArg, exprs: &mut Vec<ExprId>) -> Option<Target<'a>> {
    match a {
        ExecArg::Block(b) => Some(Target::Block(b)),
        ExecArg::Region(r) => {
            region_bounds(r, exprs);
            Some(Target::Region(r))
        }
        ExecArg::Scalar(s) => Some(Target::Scalar(*s)),
        ExecArg::Array(a) => Some(Target::Array(*a)),
        ExecArg::Literal(_) => None,
    }
}

fn region_bounds(r: &RegionRef, exprs: &mut Vec<ExprId>) {
    for (lo, hi) in &r.ranges {
        exprs.extend([*lo, *hi]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program() -> Program {
        let array = |name: &str, kind| Array {
            name: name.into(),
            kind,
            dims: vec![IndexSlot(0)],
            predefined: false,
            used: true,
        };
        Program {
            name: "t".into(),
            files: vec!["t.sial".into()],
            indices: vec![],
            ints: vec![],
            scalars: vec![],
            arrays: vec![
                array("t", ArrayKind::Temp),
                array("d", ArrayKind::Distributed),
            ],
            specials: vec![Special {
                name: "s".into(),
                intents: vec![Intent::Read, Intent::Write],
            }],
            strings: vec![],
            exprs: vec![Expr {
                ty: ValueType::Scalar,
                ops: vec![ExprOp::LoadBlockScalar(block(0))],
            }],
            procs: vec![],
            code: vec![],
        }
    }

    fn block(array: u32) -> BlockRef {
        BlockRef {
            array: ArraySlot(array),
            indices: vec![IndexSlot(0)],
        }
    }

    #[test]
    fn puts_update_remote_blocks_and_read_local_ones() {
        let p = program();
        let op = Op::Put {
            dst: block(1),
            op: PutOp::Accumulate,
            value: PutValue::Block(block(0)),
        };
        let e = p.effects(&op);
        assert_eq!(e.class, Class::Remote);
        let (t, d) = (block(0), block(1));
        assert_eq!(
            e.uses,
            vec![
                (Target::Block(&d), Access::Update),
                (Target::Block(&t), Access::Read)
            ]
        );
        assert_eq!(e.written_array(), Some(ArraySlot(1)));
    }

    #[test]
    fn specials_follow_their_intents_and_expressions_name_their_blocks() {
        let p = program();
        let op = Op::Execute {
            special: SpecialSlot(0),
            args: vec![ExecArg::Block(block(0)), ExecArg::Scalar(ScalarSlot(0))],
        };
        let e = p.effects(&op);
        assert_eq!(e.class, Class::Blocks);
        assert_eq!(e.uses[0].1, Access::Read);
        assert_eq!(e.uses[1], (Target::Scalar(ScalarSlot(0)), Access::Write));
        let fill = Op::BlockScalar {
            dst: Operand::Block(block(0)),
            update: ScalarUpdate::Fill,
            value: ExprId(0),
        };
        let e = p.effects(&fill);
        assert_eq!(e.exprs, vec![ExprId(0)]);
        assert_eq!(
            p.expr_blocks(ExprId(0)).collect::<Vec<_>>(),
            vec![&block(0)]
        );
    }
}
