//! `put` (distributed) and `prepare` (served): a block with the target's indices in the same
//! positions, or a scalar (SIAL-SPEC §4.12).

use super::Checker;
use super::body::Body;
use super::expr::{Node, Types};
use super::symbols::Sym;
use crate::bytecode::{self as bc, ArrayKind, Op};
use crate::source::Span;
use crate::syntax::ast::{AssignOp, Expr, Reference};

impl Checker<'_> {
    /// `put d[...] op value` / `prepare v[...] op value`.
    pub(super) fn put(
        &mut self,
        b: &mut Body,
        target: &Reference,
        op: AssignOp,
        value: &Expr,
        served: bool,
        span: Span,
    ) {
        let (stmt, want) = if served {
            ("prepare", ArrayKind::Served)
        } else {
            ("put", ArrayKind::Distributed)
        };
        let dst = match self.lookup(b.file, &target.name) {
            Some(Sym::Array(a)) if self.program.arrays[a.index()].kind == want => {
                if target.selector.is_none() {
                    self.diags.error(
                        target.span,
                        format!("{stmt} needs a block: {}[...]", target.name.text),
                    );
                    return;
                }
                self.block(b, target, a)
            }
            Some(_) => {
                self.diags.error(
                    target.name.span,
                    format!(
                        "{} must be declared as a {} array to be the target of {stmt}",
                        target.name.text,
                        want.name()
                    ),
                );
                None
            }
            None => None,
        };
        let rhs = self.typed(b, value);
        let (Some(dst), Some(rhs)) = (dst, rhs) else {
            return;
        };
        if dst.sub_block {
            self.diags.error(dst.span, format!("improper indices on lhs of {stmt}: a subindex cannot select a block of a {} array", want.name()));
            return;
        }
        if let Node::Block(src) = &rhs.node
            && self
                .copy_layout(&dst.r.indices, &src.r.indices, false)
                .is_some()
            && !src.sub_block
        {
            let op = match op {
                AssignOp::Assign => bc::PutOp::Replace,
                AssignOp::Add => bc::PutOp::Accumulate,
                _ => {
                    self.diags.error(
                        span,
                        format!(
                            "illegal operator for {stmt} of a block: only = and += are supported"
                        ),
                    );
                    return;
                }
            };
            self.emit(
                b,
                Op::Put {
                    dst: dst.r,
                    op,
                    value: bc::PutValue::Block(src.r.clone()),
                },
                span,
            );
            return;
        }
        if rhs.types.has(Types::SCALAR) {
            let op = match op {
                AssignOp::Assign => bc::PutOp::Replace,
                AssignOp::Add => bc::PutOp::Accumulate,
                AssignOp::Mul => bc::PutOp::Scale,
                AssignOp::Sub => {
                    self.diags.error(span, format!("illegal operator for {stmt} of a scalar: only =, += and *= are supported"));
                    return;
                }
            };
            if let Some(value) = self.scalar_from(&rhs, "the right-hand side") {
                self.emit(
                    b,
                    Op::Put {
                        dst: dst.r,
                        op,
                        value: bc::PutValue::Scalar(value),
                    },
                    span,
                );
            }
            return;
        }
        match &rhs.node {
            Node::Block(src) => self.diags.error(
                span,
                format!("inconsistent index lists: {stmt} {} = {} needs the same indices in the same positions ({stmt} does not transpose; permute into a temp block first)", self.show(&dst), self.show(src)),
            ),
            _ => self.diags.error(span, format!("right hand side of {stmt} must be a single block or a scalar expression; compute other block expressions into a temp block first")),
        }
    }
}
