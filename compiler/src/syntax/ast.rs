//! The abstract syntax tree of one SIAL file. Names are folded to lower case; every node keeps
//! its span. Nothing here is checked beyond what the grammar enforces.

use crate::source::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    /// Lower-cased text.
    pub text: String,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct File {
    pub imports: Vec<Import>,
    pub program: Program,
}

#[derive(Clone, Debug)]
pub struct Import {
    pub path: String,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Program {
    pub name: Name,
    pub end_name: Name,
    pub body: Vec<Item>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum Item {
    Decl(Decl),
    Stmt(Stmt),
}

impl Item {
    pub fn span(&self) -> Span {
        match self {
            Item::Decl(d) => d.span,
            Item::Stmt(s) => s.span,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modifier {
    Predefined,
    Contiguous,
    Sparse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexKind {
    Ao,
    Mo,
    MoA,
    MoB,
    Simple,
    La,
}

impl IndexKind {
    pub fn keyword(self) -> &'static str {
        match self {
            IndexKind::Ao => "aoindex",
            IndexKind::Mo => "moindex",
            IndexKind::MoA => "moaindex",
            IndexKind::MoB => "mobindex",
            IndexKind::Simple => "index",
            IndexKind::La => "laindex",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayKind {
    Static,
    Temp,
    Local,
    Distributed,
    Served,
}

impl ArrayKind {
    pub fn keyword(self) -> &'static str {
        match self {
            ArrayKind::Static => "static",
            ArrayKind::Temp => "temp",
            ArrayKind::Local => "local",
            ArrayKind::Distributed => "distributed",
            ArrayKind::Served => "served",
        }
    }
}

#[derive(Clone, Debug)]
pub enum RangeBound {
    Int(i64, Span),
    Name(Name),
}

impl RangeBound {
    pub fn span(&self) -> Span {
        match self {
            RangeBound::Int(_, s) => *s,
            RangeBound::Name(n) => n.span,
        }
    }
}

/// An initialiser literal as written (`= 1.5`, `= 3`, possibly signed, which the checker
/// rejects).
#[derive(Clone, Debug)]
pub struct InitLiteral {
    pub negative: bool,
    pub value: Literal,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum Literal {
    Int(i64),
    Double(f64),
}

#[derive(Clone, Debug)]
pub struct Decl {
    pub modifiers: Vec<(Modifier, Span)>,
    pub name: Name,
    pub kind: DeclKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum DeclKind {
    Index {
        kind: IndexKind,
        lo: RangeBound,
        hi: RangeBound,
    },
    Subindex {
        parent: Name,
    },
    Scalar {
        init: Option<InitLiteral>,
    },
    Int {
        init: Option<InitLiteral>,
    },
    Array {
        kind: ArrayKind,
        dims: Vec<Name>,
    },
    Proc {
        body: Vec<Item>,
        end_name: Name,
    },
    Special {
        signature: Option<Name>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignOp {
    Assign,
    Add,
    Sub,
    Mul,
}

impl AssignOp {
    pub fn text(self) -> &'static str {
        match self {
            AssignOp::Assign => "=",
            AssignOp::Add => "+=",
            AssignOp::Sub => "-=",
            AssignOp::Mul => "*=",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuOp {
    Allocate,
    Free,
    Put,
    Get,
}

#[derive(Clone, Debug)]
pub struct StrLit {
    pub text: String,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    Call(Name),
    Return,
    Stop,
    Exit,
    SipBarrier,
    ServerBarrier,
    Do {
        index: Name,
        parent: Option<Name>,
        body: Vec<Item>,
        end_index: Name,
        end_parent: Option<Name>,
        end_span: Span,
    },
    Pardo {
        indices: Vec<Name>,
        pragma: Option<StrLit>,
        body: Vec<Item>,
        end_indices: Vec<Name>,
        end_span: Span,
    },
    Section {
        body: Vec<Item>,
    },
    If {
        cond: RelExpr,
        then_body: Vec<Item>,
        else_body: Option<Vec<Item>>,
    },
    Where(RelExpr),
    GpuRegion {
        body: Vec<Item>,
    },
    Allocate {
        array: Name,
        selector: Option<Vec<AllocIndex>>,
    },
    Deallocate {
        array: Name,
        selector: Option<Vec<AllocIndex>>,
    },
    AllocateContiguous {
        array: Name,
        ranges: Vec<SegRange>,
    },
    DeallocateContiguous {
        array: Name,
        ranges: Vec<SegRange>,
    },
    Create(Name),
    Delete(Name),
    Destroy(Name),
    Put {
        target: Reference,
        op: AssignOp,
        value: Expr,
    },
    Prepare {
        target: Reference,
        op: AssignOp,
        value: Expr,
    },
    Get(Reference),
    Request(Reference),
    Collective {
        target: Name,
        op: AssignOp,
        value: Expr,
        op_span: Span,
    },
    Execute {
        name: Name,
        args: Vec<Arg>,
    },
    Print {
        value: Expr,
        newline: bool,
    },
    Gpu {
        op: GpuOp,
        arg: Arg,
    },
    SetPersistent {
        name: Name,
        label: StrLit,
    },
    RestorePersistent {
        name: Name,
        label: StrLit,
    },
    AssertSame(Name),
    BroadcastFrom {
        root: Expr,
        array: Name,
    },
    Assign {
        target: Reference,
        op: AssignOp,
        value: Expr,
        op_span: Span,
    },
}

#[derive(Clone, Debug)]
pub enum AllocIndex {
    Wildcard(Span),
    Index(Name),
}

#[derive(Clone, Debug)]
pub struct SegRange {
    pub lower: Expr,
    pub upper: Expr,
    pub span: Span,
}

/// `name` or `name[...]` as written.
#[derive(Clone, Debug)]
pub struct Reference {
    pub name: Name,
    pub selector: Option<Vec<SelItem>>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum SelItem {
    /// An index, optionally written `(index) i`.
    Index { name: Name, cast: bool },
    /// A segment range `lower:upper` of a contiguous local array.
    Range(SegRange),
}

#[derive(Clone, Debug)]
pub enum Arg {
    Ref(Reference),
    Int(i64, Span),
    Double(f64, Span),
    /// Never valid; parsed so that the message can say why.
    Str(String, Span),
}

impl Arg {
    pub fn span(&self) -> Span {
        match self {
            Arg::Ref(r) => r.span,
            Arg::Int(_, s) | Arg::Double(_, s) | Arg::Str(_, s) => *s,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Clone, Debug)]
pub struct RelExpr {
    pub op: RelOp,
    pub left: Expr,
    pub right: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Tensor,
}

impl BinOp {
    pub fn text(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Pow => "**",
            BinOp::Tensor => "^",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastKind {
    Int,
    Scalar,
    Index,
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Int(i64),
    Double(f64),
    Str(String),
    Ref(Reference),
    Paren(Box<Expr>),
    Neg(Box<Expr>),
    Sqrt(Box<Expr>),
    Cast(CastKind, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}
