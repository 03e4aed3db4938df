//! Expressions: the type sets of SIAL-SPEC §5.1, and lowering of int and scalar expressions to
//! stack programs.

use super::Checker;
use super::body::Body;
use super::symbols::Sym;
use crate::bytecode::{
    self as bc, ArrayKind, BlockRef, CmpOp, ExprId, ExprOp, IndexSlot, RegionRef, ValueType,
};
use crate::source::Span;
use crate::syntax::ast::{
    self, BinOp, CastKind, Expr, ExprKind, Reference, RelExpr, RelOp, SelItem,
};

/// A set of types (SIAL-SPEC §5.1); an expression may have several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) struct Types(u8);

impl Types {
    pub const INT: Types = Types(1);
    pub const INDEX: Types = Types(2);
    pub const SCALAR: Types = Types(4);
    pub const BLOCK: Types = Types(8);
    pub const CONTIG: Types = Types(16);
    pub const ARRAY: Types = Types(32);
    pub const STRING: Types = Types(64);

    pub fn has(self, t: Types) -> bool {
        self.0 & t.0 != 0
    }

    pub fn with(self, t: Types) -> Types {
        Types(self.0 | t.0)
    }

    /// Words for messages: the most specific type.
    pub fn describe(self) -> &'static str {
        if self.has(Types::STRING) {
            "a string"
        } else if self.has(Types::INDEX) {
            "an index"
        } else if self.has(Types::INT) {
            "an int"
        } else if self.has(Types::SCALAR) && self.has(Types::BLOCK) {
            "a scalar-valued block"
        } else if self.has(Types::SCALAR) {
            "a scalar"
        } else if self.has(Types::BLOCK) {
            "a block"
        } else if self.has(Types::CONTIG) {
            "a contiguous region"
        } else if self.has(Types::ARRAY) {
            "a whole array"
        } else {
            "nothing"
        }
    }
}

/// A block reference after checking.
#[derive(Clone, Debug)]
pub(super) struct Block {
    pub r: BlockRef,
    pub kind: ArrayKind,
    pub name: String,
    /// Every dimension is simple: the block has one element and is also a scalar.
    pub scalar_valued: bool,
    /// Some dimension declared with an index is selected by a subindex of it: a sub-block
    /// (only for slice and insert).
    pub sub_block: bool,
    pub span: Span,
}

/// A checked expression tree.
#[derive(Clone, Debug)]
pub(super) enum Node {
    Int(i32),
    Scalar(f64),
    Str(String),
    IntVar(bc::IntSlot),
    ScalarVar(bc::ScalarSlot),
    Index(IndexSlot),
    Block(Block),
    Region(RegionRef),
    Array(bc::ArraySlot),
    Neg(Box<Typed>),
    Sqrt(Box<Typed>),
    Cast(CastKind, Box<Typed>),
    Binary(BinOp, Box<Typed>, Box<Typed>),
    Paren(Box<Typed>),
}

#[derive(Clone, Debug)]
pub(super) struct Typed {
    pub node: Node,
    pub types: Types,
    pub span: Span,
}

impl Typed {
    pub fn block(&self) -> Option<&Block> {
        match &self.node {
            Node::Block(b) => Some(b),
            _ => None,
        }
    }
}

impl Checker<'_> {
    /// Types an expression. `None` means an error was reported.
    pub(super) fn typed(&mut self, b: &mut Body, e: &Expr) -> Option<Typed> {
        let span = e.span;
        let t = |node, types| Some(Typed { node, types, span });
        match &e.kind {
            ExprKind::Int(v) => t(Node::Int(*v as i32), Types::INT),
            ExprKind::Double(v) => t(Node::Scalar(*v), Types::SCALAR),
            ExprKind::Str(s) => t(Node::Str(s.clone()), Types::STRING),
            ExprKind::Ref(r) => self.reference(b, r),
            ExprKind::Paren(inner) => {
                let inner = self.typed(b, inner)?;
                let types = inner.types;
                t(Node::Paren(Box::new(inner)), types)
            }
            ExprKind::Neg(inner) => {
                let inner = self.typed(b, inner)?;
                let types = if inner.types.has(Types::SCALAR) {
                    Types::SCALAR
                } else if inner.types.has(Types::INT) {
                    Types::INT
                } else {
                    self.diags.error(
                        span,
                        format!(
                            "negation only supported for scalar and int expressions, not {}",
                            inner.types.describe()
                        ),
                    );
                    return None;
                };
                t(Node::Neg(Box::new(inner)), types)
            }
            ExprKind::Sqrt(inner) => {
                let inner = self.typed(b, inner)?;
                if !inner.types.has(Types::SCALAR) {
                    self.diags.error(
                        span,
                        format!(
                            "sqrt only supported for scalar expressions, not {}",
                            inner.types.describe()
                        ),
                    );
                    return None;
                }
                t(Node::Sqrt(Box::new(inner)), Types::SCALAR)
            }
            ExprKind::Cast(kind, inner) => {
                let inner = self.typed(b, inner)?;
                let (ok, types, msg) = match kind {
                    CastKind::Int => (
                        inner.types.has(Types::SCALAR),
                        Types::INT,
                        "cast to int only allowed from scalar",
                    ),
                    CastKind::Scalar => (
                        inner.types.has(Types::INT) || inner.types.has(Types::INDEX),
                        Types::SCALAR,
                        "cast to scalar only allowed from int or index",
                    ),
                    CastKind::Index => (
                        inner.types.has(Types::INDEX),
                        Types::INDEX.with(Types::INT),
                        "cast to index only allowed from an index",
                    ),
                };
                if !ok {
                    self.diags
                        .error(span, format!("{msg}, not {}", inner.types.describe()));
                    return None;
                }
                t(Node::Cast(*kind, Box::new(inner)), types)
            }
            ExprKind::Binary(op, l, r) => {
                let l = self.typed(b, l);
                let r = self.typed(b, r);
                let (l, r) = (l?, r?);
                let types = self.binary_types(*op, &l, &r, span)?;
                t(Node::Binary(*op, Box::new(l), Box::new(r)), types)
            }
        }
    }

    fn binary_types(&mut self, op: BinOp, l: &Typed, r: &Typed, span: Span) -> Option<Types> {
        let (lt, rt) = (l.types, r.types);
        let both = |t: Types| lt.has(t) && rt.has(t);
        if lt.has(Types::STRING) || rt.has(Types::STRING) {
            self.diags.error(
                span,
                "a string can only be printed, not used in an expression",
            );
            return None;
        }
        let nested = |t: &Typed| t.types.has(Types::BLOCK) && t.block().is_none();
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Div => {
                if both(Types::SCALAR) {
                    return Some(Types::SCALAR);
                }
                if both(Types::INT) {
                    return Some(Types::INT);
                }
                if op != BinOp::Div && l.block().is_some() && r.block().is_some() {
                    return Some(Types::BLOCK);
                }
                if nested(l) || nested(r) {
                    self.diags.error(
                        span,
                        "only nonnested binary expressions involving blocks allowed",
                    );
                    return None;
                }
            }
            BinOp::Mul => {
                if nested(l) || nested(r) {
                    self.diags.error(span, "only nonnested binary expressions involving blocks allowed: a block product cannot be an operand of another product");
                    return None;
                }
                if let (Some(lb), Some(rb)) = (l.block(), r.block()) {
                    let free = free_count(&lb.r.indices, &rb.r.indices);
                    return Some(if free == 0 {
                        Types::BLOCK.with(Types::SCALAR)
                    } else {
                        Types::BLOCK
                    });
                }
                if let Some(blk) = l
                    .block()
                    .filter(|_| rt.has(Types::SCALAR))
                    .or_else(|| r.block().filter(|_| lt.has(Types::SCALAR)))
                {
                    return Some(if blk.scalar_valued {
                        Types::BLOCK.with(Types::SCALAR)
                    } else {
                        Types::BLOCK
                    });
                }
                if both(Types::SCALAR) {
                    return Some(Types::SCALAR);
                }
                if both(Types::INT) {
                    return Some(Types::INT);
                }
            }
            BinOp::Pow => {
                if both(Types::SCALAR) {
                    return Some(Types::SCALAR);
                }
                self.diags.error(
                    span,
                    format!(
                        "both arguments to ** must be scalar (found {} and {})",
                        lt.describe(),
                        rt.describe()
                    ),
                );
                return None;
            }
            BinOp::Tensor => {
                if let (Some(lb), Some(rb)) = (l.block(), r.block())
                    && lb.r.indices.iter().all(|i| !rb.r.indices.contains(i))
                {
                    return Some(Types::BLOCK);
                }
                self.diags.error(
                    span,
                    "arguments to ^ must be data blocks with disjoint index sets",
                );
                return None;
            }
        }
        let hint = if (lt.has(Types::INT) && rt.has(Types::SCALAR))
            || (lt.has(Types::SCALAR) && rt.has(Types::INT))
        {
            "; ints and scalars do not mix: convert with (scalar) or (int)"
        } else {
            ""
        };
        self.diags.error(
            span,
            format!(
                "incompatible types in expression: {} {} {}{hint}",
                lt.describe(),
                op.text(),
                rt.describe()
            ),
        );
        None
    }

    /// A name or a block/region reference in an expression.
    pub(super) fn reference(&mut self, b: &mut Body, r: &Reference) -> Option<Typed> {
        let span = r.span;
        let sym = self.lookup(b.file, &r.name)?;
        let t = |node, types| Some(Typed { node, types, span });
        if r.selector.is_none() {
            return match sym {
                Sym::Int(s) => t(Node::IntVar(s), Types::INT),
                Sym::Scalar(s) => t(Node::ScalarVar(s), Types::SCALAR),
                Sym::Index(s) => {
                    self.use_index(b, s, span);
                    t(Node::Index(s), Types::INDEX.with(Types::INT))
                }
                Sym::Array(a) => {
                    self.program.arrays[a.index()].used = true;
                    t(Node::Array(a), Types::ARRAY)
                }
                Sym::Proc(_) | Sym::Special(_) | Sym::Program | Sym::Poisoned => {
                    self.diags
                        .error(span, format!("{} is not a variable", r.name.text));
                    None
                }
            };
        }
        let Sym::Array(a) = sym else {
            self.diags.error(
                r.name.span,
                format!(
                    "{} is not an array and cannot take an index list",
                    r.name.text
                ),
            );
            return None;
        };
        if self.program.arrays[a.index()].kind == ArrayKind::ContiguousLocal {
            let region = self.region(b, r, a)?;
            return t(Node::Region(region), Types::CONTIG);
        }
        let blk = self.block(b, r, a)?;
        let types = if blk.scalar_valued {
            Types::BLOCK.with(Types::SCALAR)
        } else {
            Types::BLOCK
        };
        t(Node::Block(blk), types)
    }

    /// Checks `a[i, j, ...]` against a's declaration.
    pub(super) fn block(&mut self, b: &mut Body, r: &Reference, a: bc::ArraySlot) -> Option<Block> {
        self.program.arrays[a.index()].used = true;
        let array = self.program.arrays[a.index()].clone();
        let items = r.selector.as_deref().unwrap_or(&[]);
        if items.len() != array.dims.len() {
            self.diags.error(
                r.span,
                format!(
                    "number of indices of {} does not match declaration: {} given, {} declared",
                    array.name,
                    items.len(),
                    array.dims.len()
                ),
            );
            return None;
        }
        let mut indices = Vec::new();
        let mut scalar_valued = true;
        let mut sub_block = false;
        let mut ok = true;
        for (d, item) in items.iter().enumerate() {
            let (name, cast) = match item {
                SelItem::Index { name, cast } => (name, *cast),
                SelItem::Range(range) => {
                    self.diags.error(range.span, format!("{} is not a contiguous local array: select its blocks with indices, not segment ranges", array.name));
                    return None;
                }
            };
            let slot = match self.lookup(b.file, name) {
                Some(Sym::Index(s)) => s,
                Some(_) => {
                    self.diags.error(
                        name.span,
                        format!("{} must be an index or subindex", name.text),
                    );
                    ok = false;
                    continue;
                }
                None => {
                    ok = false;
                    continue;
                }
            };
            self.use_index(b, slot, name.span);
            let declared = array.dims[d];
            let (used_kind, decl_kind) = (
                self.program.indices[slot.index()].kind,
                self.program.indices[declared.index()].kind,
            );
            let compatible = if cast {
                decl_kind == bc::IndexKind::Simple
            } else if decl_kind == bc::IndexKind::Sub {
                used_kind == bc::IndexKind::Sub && self.base_kind(slot) == self.base_kind(declared)
            } else {
                if used_kind == bc::IndexKind::Sub {
                    sub_block = true;
                }
                self.base_kind(slot) == self.base_kind(declared)
            };
            if !compatible {
                let dn = &self.program.indices[declared.index()];
                let un = &self.program.indices[slot.index()];
                let used_desc = if cast {
                    format!("(index) {}", un.name)
                } else {
                    format!("{} ({})", un.name, self.kind_desc(slot))
                };
                self.diags.error(
                    name.span,
                    format!(
                        "index {used_desc} not compatible with declaration: dimension {} of {} is declared with {} ({})",
                        d + 1,
                        array.name,
                        dn.name,
                        self.kind_desc(declared)
                    ),
                );
                ok = false;
            }
            if decl_kind != bc::IndexKind::Simple {
                scalar_valued = false;
            }
            indices.push(slot);
        }
        ok.then(|| Block {
            r: BlockRef { array: a, indices },
            kind: array.kind,
            name: array.name.clone(),
            scalar_valued: scalar_valued && !sub_block,
            sub_block,
            span: r.span,
        })
    }

    /// The index kind that decides compatibility: a subindex counts as its parent's kind.
    fn base_kind(&self, slot: IndexSlot) -> bc::IndexKind {
        let x = &self.program.indices[slot.index()];
        match (x.kind, x.parent) {
            (bc::IndexKind::Sub, Some(p)) => self.program.indices[p.index()].kind,
            (k, _) => k,
        }
    }

    pub(super) fn kind_desc(&self, slot: IndexSlot) -> String {
        let x = &self.program.indices[slot.index()];
        match (x.kind, x.parent) {
            (bc::IndexKind::Sub, Some(p)) => {
                format!("subindex of {}", self.program.indices[p.index()].name)
            }
            (k, _) => k.name().to_string(),
        }
    }

    /// Checks `c[l1:u1, ...]` of a contiguous local array.
    pub(super) fn region(
        &mut self,
        b: &mut Body,
        r: &Reference,
        a: bc::ArraySlot,
    ) -> Option<RegionRef> {
        self.program.arrays[a.index()].used = true;
        let array = self.program.arrays[a.index()].clone();
        let items = r.selector.as_deref().unwrap_or(&[]);
        let mut ranges = Vec::new();
        for item in items {
            match item {
                SelItem::Range(range) => ranges.push(range),
                SelItem::Index { name, .. } => {
                    self.diags.error(
                        name.span,
                        format!("contiguous local array {} is selected by segment ranges, e.g. {}[{}:{}, ...]", array.name, array.name, name.text, name.text),
                    );
                    return None;
                }
            }
        }
        self.region_ranges(b, a, &array.name, array.dims.len(), &ranges, r.span)
    }

    pub(super) fn region_ranges(
        &mut self,
        b: &mut Body,
        a: bc::ArraySlot,
        name: &str,
        rank: usize,
        ranges: &[&ast::SegRange],
        span: Span,
    ) -> Option<RegionRef> {
        if ranges.len() != rank {
            self.diags.error(span, format!("number of indices does not match declaration of array {name}: {} given, {rank} declared", count(ranges.len(), "range", "ranges")));
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for range in ranges {
            let lo = self.int_expr(b, &range.lower, "lower value of range must be int");
            let hi = self.int_expr(b, &range.upper, "upper value of range must be int");
            match (lo, hi) {
                (Some(l), Some(h)) => out.push((l, h)),
                _ => ok = false,
            }
        }
        ok.then_some(RegionRef {
            array: a,
            ranges: out,
        })
    }

    /// Types and lowers an expression that must be an int (or index).
    pub(super) fn int_expr(&mut self, b: &mut Body, e: &Expr, msg: &str) -> Option<ExprId> {
        let t = self.typed(b, e)?;
        if !t.types.has(Types::INT) {
            self.diags
                .error(e.span, format!("{msg} (found {})", t.types.describe()));
            return None;
        }
        Some(self.lower(&t, ValueType::Int))
    }

    /// Lowers a typed tree as a value of type `want` (the caller has checked the type set).
    pub(super) fn lower(&mut self, t: &Typed, want: ValueType) -> ExprId {
        let mut ops = Vec::new();
        self.emit_expr(t, want, &mut ops);
        self.add_expr(bc::Expr { ty: want, ops })
    }

    fn emit_expr(&mut self, t: &Typed, want: ValueType, ops: &mut Vec<ExprOp>) {
        let int = want == ValueType::Int;
        match &t.node {
            Node::Int(v) => ops.push(ExprOp::Int(*v)),
            Node::Scalar(v) => ops.push(ExprOp::Scalar(*v)),
            Node::IntVar(s) => ops.push(ExprOp::LoadInt(*s)),
            Node::ScalarVar(s) => ops.push(ExprOp::LoadScalar(*s)),
            Node::Index(s) => ops.push(ExprOp::LoadIndex(*s)),
            Node::Block(blk) => ops.push(ExprOp::LoadBlockScalar(blk.r.clone())),
            Node::Paren(inner) => self.emit_expr(inner, want, ops),
            Node::Neg(inner) => {
                self.emit_expr(inner, want, ops);
                ops.push(if int {
                    ExprOp::IntNeg
                } else {
                    ExprOp::ScalarNeg
                });
            }
            Node::Sqrt(inner) => {
                self.emit_expr(inner, ValueType::Scalar, ops);
                ops.push(ExprOp::ScalarSqrt);
            }
            Node::Cast(kind, inner) => match kind {
                CastKind::Int => {
                    self.emit_expr(inner, ValueType::Scalar, ops);
                    ops.push(ExprOp::ToInt);
                }
                CastKind::Scalar => {
                    self.emit_expr(inner, ValueType::Int, ops);
                    ops.push(ExprOp::ToScalar);
                }
                CastKind::Index => self.emit_expr(inner, ValueType::Int, ops),
            },
            Node::Binary(op, l, r) => {
                if let (BinOp::Mul, Some(lb), Some(rb)) = (op, l.block(), r.block()) {
                    let plan = full_contraction(&lb.r.indices, &rb.r.indices);
                    ops.push(ExprOp::Dot {
                        left: lb.r.clone(),
                        right: rb.r.clone(),
                        plan,
                    });
                    return;
                }
                self.emit_expr(l, want, ops);
                self.emit_expr(r, want, ops);
                ops.push(match (op, int) {
                    (BinOp::Add, true) => ExprOp::IntAdd,
                    (BinOp::Sub, true) => ExprOp::IntSub,
                    (BinOp::Mul, true) => ExprOp::IntMul,
                    (BinOp::Div, true) => ExprOp::IntDiv,
                    (BinOp::Add, false) => ExprOp::ScalarAdd,
                    (BinOp::Sub, false) => ExprOp::ScalarSub,
                    (BinOp::Mul, false) => ExprOp::ScalarMul,
                    (BinOp::Div, false) => ExprOp::ScalarDiv,
                    (_, _) => ExprOp::ScalarPow,
                });
            }
            // Strings, regions and arrays never reach lowering: their type sets hold neither
            // INT nor SCALAR, which every caller checks first.
            Node::Str(_) | Node::Region(_) | Node::Array(_) => {}
        }
    }

    /// Types and lowers a scalar expression; a full contraction with a free index is reported.
    pub(super) fn scalar_expr(&mut self, b: &mut Body, e: &Expr, what: &str) -> Option<ExprId> {
        let t = self.typed(b, e)?;
        self.scalar_from(&t, what)
    }

    pub(super) fn scalar_from(&mut self, t: &Typed, what: &str) -> Option<ExprId> {
        if !t.types.has(Types::SCALAR) {
            self.diags.error(
                t.span,
                format!(
                    "{what} must be a scalar expression, not {}",
                    t.types.describe()
                ),
            );
            return None;
        }
        self.check_full_contractions(t)?;
        Some(self.lower(t, ValueType::Scalar))
    }

    /// Every block product lowered as a scalar must contract all indices, each once per side.
    fn check_full_contractions(&mut self, t: &Typed) -> Option<()> {
        match &t.node {
            Node::Binary(BinOp::Mul, l, r) if l.block().is_some() && r.block().is_some() => {
                let (lb, rb) = (l.block()?, r.block()?);
                if has_duplicates(&lb.r.indices) || has_duplicates(&rb.r.indices) {
                    self.diags.error(
                        t.span,
                        "a block in a full contraction cannot repeat an index",
                    );
                    return None;
                }
                Some(())
            }
            Node::Binary(_, l, r) => {
                self.check_full_contractions(l)?;
                self.check_full_contractions(r)
            }
            Node::Paren(x) | Node::Neg(x) | Node::Sqrt(x) | Node::Cast(_, x) => {
                self.check_full_contractions(x)
            }
            _ => Some(()),
        }
    }

    /// A relational expression of `if` (both sides scalar, or both int/index) or of `where`
    /// (at least one side an index, compared as ints).
    pub(super) fn relational(
        &mut self,
        b: &mut Body,
        rel: &RelExpr,
        where_clause: bool,
    ) -> Option<ExprId> {
        let l = self.typed(b, &rel.left);
        let r = self.typed(b, &rel.right);
        let (l, r) = (l?, r?);
        let cmp = match rel.op {
            RelOp::Lt => CmpOp::Lt,
            RelOp::Le => CmpOp::Le,
            RelOp::Gt => CmpOp::Gt,
            RelOp::Ge => CmpOp::Ge,
            RelOp::Eq => CmpOp::Eq,
            RelOp::Ne => CmpOp::Ne,
        };
        if where_clause && !l.types.has(Types::INDEX) && !r.types.has(Types::INDEX) {
            self.diags.error(
                rel.span,
                "At least one argument in a where clause must be an index",
            );
            return None;
        }
        let scalar = l.types.has(Types::SCALAR) && r.types.has(Types::SCALAR);
        let int = l.types.has(Types::INT) && r.types.has(Types::INT);
        if !(int || scalar && !where_clause) {
            self.diags.error(
                rel.span,
                format!(
                    "Incompatible or illegal operands of relational expression: left side is {}, right side is {} (compare two scalars or two ints/indices)",
                    l.types.describe(),
                    r.types.describe()
                ),
            );
            return None;
        }
        let (want, op) = if scalar && !int {
            (ValueType::Scalar, ExprOp::ScalarCmp(cmp))
        } else {
            (ValueType::Int, ExprOp::IntCmp(cmp))
        };
        if want == ValueType::Scalar {
            self.check_full_contractions(&l)?;
            self.check_full_contractions(&r)?;
        }
        let mut ops = Vec::new();
        self.emit_expr(&l, want, &mut ops);
        self.emit_expr(&r, want, &mut ops);
        ops.push(op);
        Some(self.add_expr(bc::Expr {
            ty: ValueType::Bool,
            ops,
        }))
    }
}

/// Number of indices that occur in exactly one of the two lists.
pub(super) fn free_count(l: &[IndexSlot], r: &[IndexSlot]) -> usize {
    l.iter().filter(|i| !r.contains(i)).count() + r.iter().filter(|i| !l.contains(i)).count()
}

pub(super) fn has_duplicates(list: &[IndexSlot]) -> bool {
    list.iter().enumerate().any(|(k, i)| list[..k].contains(i))
}

/// The plan of a full contraction: every left dimension paired with the right one of the same
/// index.
pub(super) fn full_contraction(l: &[IndexSlot], r: &[IndexSlot]) -> bc::ContractPlan {
    let contracted = l
        .iter()
        .enumerate()
        .filter_map(|(ld, i)| r.iter().position(|x| x == i).map(|rd| (ld as u8, rd as u8)))
        .collect();
    bc::ContractPlan {
        contracted,
        left_free: Vec::new(),
        right_free: Vec::new(),
    }
}

/// "1 index", "2 indices".
pub(super) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
