//! Block statements: assignment forms of SIAL-SPEC §4.7 (fill, copy, permute, sums,
//! contractions, scaled copies, slices, inserts, region copies), with the plan each operation
//! carries. `put`/`prepare` are in `put.rs`.

use super::Checker;
use super::body::Body;
use super::expr::{Block, Node, Typed, Types, has_duplicates};
use crate::bytecode::{
    self as bc, ArrayKind, ContractPlan, IndexSlot, Layout, Op, Operand, ScalarAssign,
    ScalarUpdate, Sign, ValueType,
};
use crate::source::Span;
use crate::syntax::ast::{AssignOp, BinOp, Expr, Reference};

/// `dst assign left operator right`: a block statement whose right-hand side combines two
/// blocks (a sum, a contraction or a tensor product).
#[derive(Clone, Copy)]
struct BlockBinary<'a> {
    dst: &'a Block,
    assign: AssignOp,
    operator: BinOp,
    left: &'a Block,
    right: &'a Block,
}

impl Checker<'_> {
    /// `target op value` where target is a variable, a block or a region.
    pub(super) fn assign(
        &mut self,
        b: &mut Body,
        target: &Reference,
        op: AssignOp,
        value: &Expr,
        span: Span,
    ) {
        let Some(lhs) = self.reference(b, target) else {
            let _ = self.typed(b, value);
            return;
        };
        let Some(rhs) = self.typed(b, value) else {
            return;
        };
        match &lhs.node {
            Node::IntVar(slot) => {
                if !rhs.types.has(Types::INT) {
                    self.incompatible_assignment(&lhs, &rhs, span);
                    return;
                }
                let value = self.lower(&rhs, ValueType::Int);
                self.emit(
                    b,
                    Op::AssignInt {
                        target: *slot,
                        op: scalar_assign(op),
                        value,
                    },
                    span,
                );
            }
            Node::ScalarVar(slot) => {
                if !rhs.types.has(Types::SCALAR) {
                    self.incompatible_assignment(&lhs, &rhs, span);
                    return;
                }
                if let Some(value) = self.scalar_from(&rhs, "the right-hand side") {
                    self.emit(
                        b,
                        Op::AssignScalar {
                            target: *slot,
                            op: scalar_assign(op),
                            value,
                        },
                        span,
                    );
                }
            }
            Node::Index(_) => self.diags.error(
                target.span,
                format!(
                    "index {} cannot be assigned; only loops give indices values",
                    target.name.text
                ),
            ),
            Node::Array(_) => self.diags.error(
                target.span,
                format!(
                    "array {} needs a block selector on the left-hand side, e.g. {}[i, j]",
                    target.name.text, target.name.text
                ),
            ),
            Node::Block(dst) => self.block_assign(b, dst, op, &rhs, span),
            Node::Region(region) => self.region_assign(b, region, op, &rhs, span),
            _ => {}
        }
    }

    fn incompatible_assignment(&mut self, lhs: &Typed, rhs: &Typed, span: Span) {
        let hint = if lhs.types.has(Types::SCALAR) && rhs.types.has(Types::INT) {
            "; convert with (scalar)"
        } else if lhs.types.has(Types::INT) && rhs.types.has(Types::SCALAR) {
            "; convert with (int)"
        } else {
            ""
        };
        self.diags.error(
            span,
            format!(
                "incompatible types in assignment statement: cannot assign {} to {}{hint}",
                rhs.types.describe(),
                lhs.types.describe()
            ),
        );
    }

    /// Distributed and served blocks change only through put/prepare, but ACES4 also accepts a
    /// plain `=` into one: the worker writes its own copy, which is never sent anywhere and is
    /// gone at the next barrier. Production programs (scf_rhf, scf_uhf, rlambda_rhf) rely on
    /// it, so it compiles with a warning (SIAL-SPEC §4.7); updates (`+=`, `-=`, `*=`) fail in
    /// ACES4 at run time and are errors here.
    fn writable(&mut self, dst: &Block, op: AssignOp) -> bool {
        if !dst.kind.is_remote() {
            return true;
        }
        let how = if dst.kind == ArrayKind::Served {
            "prepare"
        } else {
            "put"
        };
        if op == AssignOp::Assign {
            self.diags.warning(
                dst.span,
                format!(
                    "{} is a {} array: this writes only this worker's copy of the block, which is discarded at the next barrier (use `{how} {}[...] = ...` to store it)",
                    dst.name,
                    dst.kind.name(),
                    dst.name
                ),
            );
            return true;
        }
        self.diags.error(
            dst.span,
            format!(
                "{} is a {} array: its blocks are written only with `{how} {}[...] = ...`",
                dst.name,
                dst.kind.name(),
                dst.name
            ),
        );
        false
    }

    fn block_assign(&mut self, b: &mut Body, dst: &Block, op: AssignOp, rhs: &Typed, span: Span) {
        if !self.writable(dst, op) {
            return;
        }
        // A product of blocks that contracts every index is a scalar, but assigned to a block
        // that shares those indices it is almost surely meant as an element-wise product,
        // which SIAL does not have (ACES4 silently drops it).
        if let Node::Binary(BinOp::Mul, l, r) = &rhs.node
            && let (Some(lb), Some(rb)) = (l.block(), r.block())
            && rhs.types.has(Types::SCALAR)
            && !(lb.scalar_valued && rb.scalar_valued && dst.scalar_valued)
            && dst.r.indices.iter().any(|i| lb.r.indices.contains(i))
        {
            self.diags.error(
                span,
                format!(
                    "{} * {} contracts every index to a scalar; SIAL has no element-wise block product (to fill {} with that scalar, assign it to a scalar variable first)",
                    lb.name, rb.name, dst.name
                ),
            );
            return;
        }
        if dst.sub_block && !matches!(rhs.node, Node::Block(_)) {
            self.sub_block_misuse(dst.span, &dst.name);
            return;
        }
        if rhs.types.has(Types::SCALAR) {
            let update = match op {
                AssignOp::Assign => ScalarUpdate::Fill,
                AssignOp::Add | AssignOp::Sub => ScalarUpdate::Add,
                AssignOp::Mul => ScalarUpdate::Scale,
            };
            let Some(mut value) = self.scalar_from(rhs, "the right-hand side") else {
                return;
            };
            if op == AssignOp::Sub {
                value = self.negated(value);
            }
            self.emit(
                b,
                Op::BlockScalar {
                    dst: Operand::Block(dst.r.clone()),
                    update,
                    value,
                },
                span,
            );
            return;
        }
        match &rhs.node {
            Node::Block(src) => self.block_copy(b, dst, op, src, span),
            Node::Region(region) => {
                if op != AssignOp::Assign {
                    self.diags.error(span, "only plain assignment supported with contiguous locals");
                    return;
                }
                if !self.same_declared_kinds(&dst.r, region.array, span) {
                    return;
                }
                let layout = identity(dst.r.indices.len());
                self.emit(b, Op::BlockCopy { dst: Operand::Block(dst.r.clone()), src: Operand::Region(region.clone()), layout }, span);
            }
            Node::Binary(bop, l, r) => match (l.block(), r.block()) {
                (Some(lb), Some(rb)) => {
                    let binary = BlockBinary {
                        dst,
                        assign: op,
                        operator: *bop,
                        left: lb,
                        right: rb,
                    };
                    self.block_binary(b, &binary, span)
                }
                (Some(blk), None) | (None, Some(blk)) if *bop == BinOp::Mul && (l.types.has(Types::SCALAR) || r.types.has(Types::SCALAR)) => {
                    let factor_tree = if l.block().is_some() { r } else { l };
                    self.scale_copy(b, dst, op, blk, factor_tree, span)
                }
                _ => self.diags.error(span, "only simple binary expression involving blocks allowed: one operator between two block references (or a block and a scalar)"),
            },
            _ => {
                if rhs.types.has(Types::BLOCK) {
                    self.diags.error(span, "only simple binary expression involving blocks allowed");
                } else {
                    self.diags.error(span, format!("incompatible types in assignment statement: cannot assign {} to a block", rhs.types.describe()));
                }
            }
        }
    }

    fn sub_block_misuse(&mut self, span: Span, name: &str) {
        self.diags.error(
            span,
            format!("{name}[...] selects a sub-block through a subindex: it can only be copied to or from a block declared over the subindex (slice or insert)"),
        );
    }

    /// A scalar expression negated (for `a -= s`).
    fn negated(&mut self, value: bc::ExprId) -> bc::ExprId {
        let mut e = self.program.exprs[value.index()].clone();
        e.ops.push(bc::ExprOp::ScalarNeg);
        self.add_expr(e)
    }

    /// `a = b`, `a += b`, `a -= b` with a single block on the right.
    fn block_copy(&mut self, b: &mut Body, dst: &Block, op: AssignOp, src: &Block, span: Span) {
        if src.sub_block || dst.sub_block {
            if op != AssignOp::Assign
                || (src.sub_block && dst.sub_block)
                || dst.r.indices != src.r.indices
            {
                self.sub_block_misuse(
                    if src.sub_block { src.span } else { dst.span },
                    if src.sub_block { &src.name } else { &dst.name },
                );
                return;
            }
            let op = if src.sub_block {
                Op::Slice {
                    dst: dst.r.clone(),
                    src: src.r.clone(),
                }
            } else {
                Op::Insert {
                    dst: dst.r.clone(),
                    src: src.r.clone(),
                }
            };
            self.emit(b, op, span);
            return;
        }
        let layout = match op {
            AssignOp::Mul => {
                self.diags.error(span, format!("{} *= {}: a block cannot be multiplied by a block; SIAL has no element-wise block product", dst.name, src.name));
                return;
            }
            AssignOp::Assign => self.copy_layout(&dst.r.indices, &src.r.indices, true),
            AssignOp::Add | AssignOp::Sub => self.copy_layout(&dst.r.indices, &src.r.indices, true),
        };
        let Some(layout) = layout else {
            if let Some(extra) = self.non_simple_extra(&dst.r.indices, &src.r.indices) {
                let side = if dst.r.indices.len() > src.r.indices.len() {
                    "left"
                } else {
                    "right"
                };
                let x = &self.program.indices[extra.index()];
                let msg = format!(
                    "extra indices on the {side} side must be simple indices: {} is {}",
                    x.name,
                    article(x.kind.name())
                );
                self.diags.error(span, msg);
                return;
            }
            if op == AssignOp::Assign && aces4_plain_copy(&dst.r.indices, &src.r.indices) {
                // ACES4 compiles this to its element copy in memory order (scf_rhf:2147,
                // `T2xx[nu,nu] = T1xx[mu,nu]`); production programs depend on it.
                self.diags.warning(span, format!("{} = {}: the indices differ, so this copies the elements in memory order, as ACES4 does; the blocks must have the same size", self.show(dst), self.show(src)));
                let layout = identity(dst.r.indices.len());
                self.emit(
                    b,
                    Op::BlockCopy {
                        dst: Operand::Block(dst.r.clone()),
                        src: Operand::Block(src.r.clone()),
                        layout,
                    },
                    span,
                );
                return;
            }
            self.diags.error(span, format!("incompatible index lists: {} cannot be {} {} (the indices must be the same, in any order)", self.show(dst), if op == AssignOp::Assign { "assigned from" } else { "updated with" }, self.show(src)));
            return;
        };
        let op = match op {
            AssignOp::Assign => Op::BlockCopy {
                dst: Operand::Block(dst.r.clone()),
                src: Operand::Block(src.r.clone()),
                layout,
            },
            AssignOp::Add => Op::BlockAccumulate {
                dst: dst.r.clone(),
                src: src.r.clone(),
                sign: Sign::Plus,
                layout,
            },
            _ => Op::BlockAccumulate {
                dst: dst.r.clone(),
                src: src.r.clone(),
                sign: Sign::Minus,
                layout,
            },
        };
        self.emit(b, op, span);
    }

    /// When two index lists share their common prefix but the longer one has a non-simple
    /// extra index, that index.
    fn non_simple_extra(&self, a: &[IndexSlot], b: &[IndexSlot]) -> Option<IndexSlot> {
        let common = a.len().min(b.len());
        if a[..common] != b[..common] || a.len() == b.len() {
            return None;
        }
        let longer = if a.len() > b.len() { a } else { b };
        longer[common..]
            .iter()
            .copied()
            .find(|i| self.program.indices[i.index()].kind != bc::IndexKind::Simple)
    }

    /// Text of a block reference as written.
    pub(super) fn show(&self, blk: &Block) -> String {
        let names: Vec<&str> = blk
            .r
            .indices
            .iter()
            .map(|i| self.program.indices[i.index()].name.as_str())
            .collect();
        format!("{}[{}]", blk.name, names.join(","))
    }

    /// How `src` maps onto `dst` by index name: a permutation of the same indices (when
    /// `permute`), or a common prefix with extra trailing simple indices on one side.
    pub(super) fn copy_layout(
        &self,
        dst: &[IndexSlot],
        src: &[IndexSlot],
        permute: bool,
    ) -> Option<Layout> {
        if dst == src {
            return Some(identity(dst.len()));
        }
        let common = dst.len().min(src.len());
        let extra_simple = |list: &[IndexSlot]| {
            list[common..]
                .iter()
                .all(|i| self.program.indices[i.index()].kind == bc::IndexKind::Simple)
        };
        if dst.len() != src.len()
            && dst[..common] == src[..common]
            && extra_simple(dst)
            && extra_simple(src)
        {
            let perm = (0..dst.len())
                .map(|d| (d < src.len()).then_some(d as u8))
                .collect();
            return Some(Layout { perm });
        }
        if !permute || dst.len() != src.len() || has_duplicates(dst) || has_duplicates(src) {
            return None;
        }
        let perm: Option<Vec<Option<u8>>> = dst
            .iter()
            .map(|i| src.iter().position(|x| x == i).map(|p| Some(p as u8)))
            .collect();
        perm.map(|perm| Layout { perm })
    }

    /// `d = l op r` / `d += l op r` with two blocks.
    fn block_binary(&mut self, b: &mut Body, s: &BlockBinary, span: Span) {
        let (l, r) = (s.left, s.right);
        if l.sub_block || r.sub_block {
            self.sub_block_misuse(
                if l.sub_block { l.span } else { r.span },
                if l.sub_block { &l.name } else { &r.name },
            );
            return;
        }
        match s.operator {
            BinOp::Add | BinOp::Sub => self.block_sum(b, s, span),
            BinOp::Mul | BinOp::Tensor => self.block_product(b, s, span),
            _ => self.diags.error(
                span,
                format!("operator {} is not defined on blocks", s.operator.text()),
            ),
        }
    }

    /// `d = l + r` / `d = l - r`.
    fn block_sum(&mut self, b: &mut Body, s: &BlockBinary, span: Span) {
        let BlockBinary {
            dst,
            assign: op,
            operator: bop,
            left: l,
            right: r,
        } = *s;
        if op != AssignOp::Assign {
            self.diags.error(
                span,
                {
                    let second = match (op, bop) {
                        (AssignOp::Sub, BinOp::Add) | (AssignOp::Add, BinOp::Sub) => "-=",
                        _ => "+=",
                    };
                    let first = if op == AssignOp::Sub { "-=" } else { "+=" };
                    if op == AssignOp::Mul {
                        format!("{} *= {} {} {}: a block cannot be multiplied by a block sum", self.show(dst), self.show(l), bop.text(), self.show(r))
                    } else {
                        format!(
                            "{} {} {} {} {}: only `=` may assign a block sum; write it as two statements: {} {first} {} then {} {second} {}",
                            self.show(dst), op.text(), self.show(l), bop.text(), self.show(r), self.show(dst), self.show(l), self.show(dst), self.show(r)
                        )
                    }
                },
            );
            return;
        }
        if dst.r.indices != l.r.indices || dst.r.indices != r.r.indices {
            self.diags.error(span, format!("indices do not match: {} = {} {} {} needs the same indices in the same order on all three blocks", self.show(dst), self.show(l), bop.text(), self.show(r)));
            return;
        }
        let sign = if bop == BinOp::Add {
            Sign::Plus
        } else {
            Sign::Minus
        };
        self.emit(
            b,
            Op::BlockSum {
                dst: dst.r.clone(),
                left: l.r.clone(),
                right: r.r.clone(),
                sign,
            },
            span,
        );
    }

    /// `d = l * r` / `d += l * r`, and the tensor product `^`.
    fn block_product(&mut self, b: &mut Body, s: &BlockBinary, span: Span) {
        let BlockBinary {
            dst,
            assign: op,
            operator: bop,
            left: l,
            right: r,
        } = *s;
        let accumulate = match op {
            AssignOp::Assign => false,
            AssignOp::Add => true,
            _ => {
                let hint = if op == AssignOp::Sub {
                    " (to subtract, compute the product into a temp block and use -=)"
                } else {
                    " (SIAL has no element-wise block product)"
                };
                self.diags.error(
                    span,
                    format!(
                        "`{}` with a block product is not supported; only `=` and `+=`{hint}",
                        op.text()
                    ),
                );
                return;
            }
        };
        if dst.r.array == l.r.array || dst.r.array == r.r.array {
            self.diags.error(span, format!("{} is both the result and an operand of this product; compute into a temp block first", dst.name));
            return;
        }
        if bop == BinOp::Tensor && l.r.indices.iter().any(|i| r.r.indices.contains(i)) {
            self.diags.error(
                span,
                "arguments to ^ must be data blocks with disjoint index sets",
            );
            return;
        }
        match self.contract_plan(&dst.r.indices, &l.r.indices, &r.r.indices) {
            Ok(plan) => {
                self.emit(
                    b,
                    Op::BlockContract {
                        dst: dst.r.clone(),
                        left: l.r.clone(),
                        right: r.r.clone(),
                        plan,
                        accumulate,
                    },
                    span,
                );
            }
            Err(why) => self.diags.error(
                span,
                format!(
                    "indices do not match for {} = {} {} {}: {why}",
                    self.show(dst),
                    self.show(l),
                    bop.text(),
                    self.show(r)
                ),
            ),
        }
    }

    /// The contraction pattern of `d = l * r` (SIAL-SPEC §5.5.3).
    fn contract_plan(
        &self,
        d: &[IndexSlot],
        l: &[IndexSlot],
        r: &[IndexSlot],
    ) -> Result<ContractPlan, String> {
        let name = |i: &IndexSlot| self.program.indices[i.index()].name.clone();
        for list in [d, l, r] {
            if let Some((k, i)) = list
                .iter()
                .enumerate()
                .find(|(k, i)| list[..*k].contains(i))
            {
                let _ = k;
                return Err(format!("index {} appears twice in one block", name(i)));
            }
        }
        let mut plan = ContractPlan {
            contracted: Vec::new(),
            left_free: Vec::new(),
            right_free: Vec::new(),
        };
        for (ld, i) in l.iter().enumerate() {
            match (r.iter().position(|x| x == i), d.iter().position(|x| x == i)) {
                (Some(rd), None) => plan.contracted.push((ld as u8, rd as u8)),
                (None, Some(dd)) => plan.left_free.push((ld as u8, dd as u8)),
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "index {} is in both operands and in the result",
                        name(i)
                    ));
                }
                (None, None) => {
                    return Err(format!(
                        "index {} of the left operand is neither summed nor in the result",
                        name(i)
                    ));
                }
            }
        }
        for (rd, i) in r.iter().enumerate() {
            if l.contains(i) {
                continue;
            }
            match d.iter().position(|x| x == i) {
                Some(dd) => plan.right_free.push((rd as u8, dd as u8)),
                None => {
                    return Err(format!(
                        "index {} of the right operand is neither summed nor in the result",
                        name(i)
                    ));
                }
            }
        }
        if let Some(i) = d.iter().find(|i| !l.contains(i) && !r.contains(i)) {
            return Err(format!(
                "index {} of the result is in neither operand",
                name(i)
            ));
        }
        Ok(plan)
    }

    /// `d = b * s`, `d = s * b`, `d += b * s`.
    fn scale_copy(
        &mut self,
        b: &mut Body,
        dst: &Block,
        op: AssignOp,
        src: &Block,
        factor: &Typed,
        span: Span,
    ) {
        let accumulate = match op {
            AssignOp::Assign => false,
            AssignOp::Add => true,
            _ => {
                self.diags.error(span, format!("`{}` with a scaled block is not supported; only `=` and `+=` (for -=, scale by a negated factor)", op.text()));
                return;
            }
        };
        if src.sub_block {
            self.sub_block_misuse(src.span, &src.name);
            return;
        }
        if dst.r.indices != src.r.indices {
            self.diags.error(span, format!("indices do not match: {} = {} * scalar needs the same indices in the same order", self.show(dst), self.show(src)));
            return;
        }
        let Some(factor) = self.scalar_from(factor, "the factor") else {
            return;
        };
        self.emit(
            b,
            Op::BlockScaleCopy {
                dst: dst.r.clone(),
                src: src.r.clone(),
                factor,
                accumulate,
            },
            span,
        );
    }

    /// Every dimension of the block and of the region array declared with the same index kind.
    fn same_declared_kinds(
        &mut self,
        blk: &bc::BlockRef,
        region_array: bc::ArraySlot,
        span: Span,
    ) -> bool {
        let a = &self.program.arrays[blk.array.index()];
        let c = &self.program.arrays[region_array.index()];
        let kinds = |dims: &[IndexSlot]| {
            dims.iter()
                .map(|d| self.program.indices[d.index()].kind)
                .collect::<Vec<_>>()
        };
        if kinds(&a.dims) != kinds(&c.dims) {
            let msg = format!(
                "incompatible declared indices on left and right side: {} and {} are declared over different index kinds",
                a.name, c.name
            );
            self.diags.error(span, msg);
            return false;
        }
        true
    }

    fn region_assign(
        &mut self,
        b: &mut Body,
        region: &bc::RegionRef,
        op: AssignOp,
        rhs: &Typed,
        span: Span,
    ) {
        if op != AssignOp::Assign {
            self.diags.error(
                span,
                "only plain assignment supported with contiguous locals",
            );
            return;
        }
        if rhs.types.has(Types::SCALAR) {
            if let Some(value) = self.scalar_from(rhs, "the right-hand side") {
                self.emit(
                    b,
                    Op::BlockScalar {
                        dst: Operand::Region(region.clone()),
                        update: ScalarUpdate::Fill,
                        value,
                    },
                    span,
                );
            }
            return;
        }
        match &rhs.node {
            Node::Block(src) if !src.sub_block => {
                if self.same_declared_kinds(&src.r, region.array, span) {
                    let layout = identity(src.r.indices.len());
                    self.emit(
                        b,
                        Op::BlockCopy {
                            dst: Operand::Region(region.clone()),
                            src: Operand::Block(src.r.clone()),
                            layout,
                        },
                        span,
                    );
                }
            }
            _ => self.diags.error(
                span,
                "a contiguous local region can only be assigned a scalar or a single block",
            ),
        }
    }
}

fn identity(rank: usize) -> Layout {
    Layout {
        perm: (0..rank).map(|d| Some(d as u8)).collect(),
    }
}

/// Whether ACES4 compiles `dst = src` (same rank, index lists that are not a permutation of
/// each other) to a plain element copy: its permutation, found by looking up each destination
/// index among the source's (the first match; positions never matched stay 0), is the
/// identity. Otherwise ACES4 emits a transpose its runtime rejects.
fn aces4_plain_copy(dst: &[IndexSlot], src: &[IndexSlot]) -> bool {
    if dst.len() != src.len() {
        return false;
    }
    let rank = dst.len();
    let mut perm = vec![0usize; rank + 1];
    for (d, i) in dst.iter().enumerate() {
        let j = src.iter().position(|x| x == i).unwrap_or(rank);
        perm[j] = d;
    }
    perm[..rank].iter().enumerate().all(|(d, &p)| p == d)
}

fn scalar_assign(op: AssignOp) -> ScalarAssign {
    match op {
        AssignOp::Assign => ScalarAssign::Set,
        AssignOp::Add => ScalarAssign::Add,
        AssignOp::Sub => ScalarAssign::Sub,
        AssignOp::Mul => ScalarAssign::Mul,
    }
}

/// "an aoindex", "a moindex".
pub(super) fn article(word: &str) -> String {
    let an = word.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {word}", if an { "an" } else { "a" })
}
