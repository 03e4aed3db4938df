//! The bytecode: the one definition of a compiled SIAL program, shared by the compiler (which
//! writes it) and the interpreter (which runs it).
//!
//! Design: every name is resolved to a slot in a typed table; scalar and int expressions are
//! small stack programs in [`Program::exprs`] that can be evaluated without touching the
//! interpreter's control state (a pardo manager or a prefetcher evaluates where clauses with
//! them); block operations carry their plan (permutation, contraction pattern) computed by the
//! compiler; loops and procedures are explicit; every instruction has a source location.

mod disasm;
mod effects;
mod file;
mod validate;

pub use disasm::disassemble;
pub use effects::{Access, Class, Effects, Target};
pub use file::{FORMAT_VERSION, LoadError, MAGIC, decode, encode};
pub use validate::Invalid;

use serde::{Deserialize, Serialize};

macro_rules! slot {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

slot!(/// Slot in [`Program::indices`].
    IndexSlot);
slot!(/// Slot in [`Program::ints`].
    IntSlot);
slot!(/// Slot in [`Program::scalars`].
    ScalarSlot);
slot!(/// Slot in [`Program::arrays`].
    ArraySlot);
slot!(/// Slot in [`Program::specials`].
    SpecialSlot);
slot!(/// Slot in [`Program::strings`].
    StringSlot);
slot!(/// Slot in [`Program::exprs`].
    ExprId);
slot!(/// Slot in [`Program::procs`].
    ProcId);
slot!(/// Slot in [`Program::files`].
    FileSlot);

/// An instruction address (index into [`Program::code`]).
pub type Pc = u32;

/// Maximum rank of an array, block selector or execute argument list.
pub const MAX_RANK: usize = 6;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// The program name (after `sial`), lower case.
    pub name: String,
    /// Source files: the main file first, then imported files.
    pub files: Vec<String>,
    pub indices: Vec<Index>,
    pub ints: Vec<IntVar>,
    pub scalars: Vec<ScalarVar>,
    pub arrays: Vec<Array>,
    pub specials: Vec<Special>,
    pub strings: Vec<String>,
    pub exprs: Vec<Expr>,
    pub procs: Vec<Proc>,
    /// Main program from pc 0 up to its `End`, then the code of every called procedure.
    pub code: Vec<Instr>,
}

impl Program {
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.index()]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IndexKind {
    Ao,
    Mo,
    MoA,
    MoB,
    Simple,
    La,
    Sub,
}

impl IndexKind {
    /// The keyword of the kind, which is also the name of its setup segment table.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Ao => "aoindex",
            IndexKind::Mo => "moindex",
            IndexKind::MoA => "moaindex",
            IndexKind::MoB => "mobindex",
            IndexKind::Simple => "index",
            IndexKind::La => "laindex",
            IndexKind::Sub => "subindex",
        }
    }
}

/// A bound of an index range: a literal segment number or a predefined int.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bound {
    Literal(i32),
    Predefined(IntSlot),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Index {
    pub name: String,
    pub kind: IndexKind,
    /// Segment range `lo..=hi`; for a subindex both are `Literal(1)`..`Literal(4)`-style
    /// placeholders and `parent` is set.
    pub lo: Bound,
    pub hi: Bound,
    pub parent: Option<IndexSlot>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntVar {
    pub name: String,
    pub init: i32,
    pub predefined: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalarVar {
    pub name: String,
    pub init: f64,
    pub predefined: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArrayKind {
    Static,
    Temp,
    Local,
    ContiguousLocal,
    Distributed,
    Served,
}

impl ArrayKind {
    pub fn name(self) -> &'static str {
        match self {
            ArrayKind::Static => "static",
            ArrayKind::Temp => "temp",
            ArrayKind::Local => "local",
            ArrayKind::ContiguousLocal => "contiguous local",
            ArrayKind::Distributed => "distributed",
            ArrayKind::Served => "served",
        }
    }

    /// Blocks stored on servers (reached by get/put or request/prepare).
    pub fn is_remote(self) -> bool {
        matches!(self, ArrayKind::Distributed | ArrayKind::Served)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Array {
    pub name: String,
    pub kind: ArrayKind,
    /// The declared index of each dimension.
    pub dims: Vec<IndexSlot>,
    /// `predefined static`: contents come from setup data.
    pub predefined: bool,
    /// False when no statement refers to the array: it needs no storage and no setup data.
    pub used: bool,
}

/// Argument intents of a special (SIAL-SPEC §2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Intent {
    Read,
    Write,
    Update,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Special {
    pub name: String,
    pub intents: Vec<Intent>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Proc {
    pub name: String,
    /// First instruction; the body ends with a `Return`.
    pub entry: Pc,
}

/// Source location of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loc {
    pub file: FileSlot,
    pub line: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instr {
    pub op: Op,
    pub loc: Loc,
}

/// `a[i,j]`: an array and the index whose current value selects each dimension.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockRef {
    pub array: ArraySlot,
    pub indices: Vec<IndexSlot>,
}

/// `c[l1:u1, ...]`: a region of a contiguous local array, bounds in segment numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionRef {
    pub array: ArraySlot,
    pub ranges: Vec<(ExprId, ExprId)>,
}

/// A block operand: a block, or a contiguous-local region treated as one block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Operand {
    Block(BlockRef),
    Region(RegionRef),
}

/// How a fill/scale-type statement combines a scalar with a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScalarUpdate {
    /// `a = s`
    Fill,
    /// `a += s` (and `a -= s` with the value negated)
    Add,
    /// `a *= s`
    Scale,
}

/// `+` or `-` in block sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sign {
    Plus,
    Minus,
}

/// How the elements of a block operand map onto the destination: `perm[d]` is the operand
/// dimension that runs along destination dimension `d`. Trailing destination dimensions of
/// extent 1 (simple indices) that the operand lacks map to `None`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub perm: Vec<Option<u8>>,
}

impl Layout {
    /// True when the operand's elements are already in destination order.
    pub fn is_identity(&self) -> bool {
        self.perm
            .iter()
            .enumerate()
            .all(|(d, p)| p.is_none_or(|p| p as usize == d))
    }
}

/// The index pattern of a contraction `d = l * r`, by dimension position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractPlan {
    /// Pairs (left dim, right dim) summed over.
    pub contracted: Vec<(u8, u8)>,
    /// Free left dims: (left dim, destination dim).
    pub left_free: Vec<(u8, u8)>,
    /// Free right dims: (right dim, destination dim).
    pub right_free: Vec<(u8, u8)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BarrierKind {
    Sip,
    Server,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GpuOp {
    Allocate,
    Free,
    Put,
    Get,
}

/// An argument of `execute`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExecArg {
    Block(BlockRef),
    Region(RegionRef),
    /// A scalar variable, passed as a one-element block aliasing it (writes return).
    Scalar(ScalarSlot),
    /// A whole static or contiguous local array, or any array for the specials that take one.
    Array(ArraySlot),
    /// A double literal, passed read-only.
    Literal(f64),
}

/// What `print`/`println` prints (formats: SIAL-SPEC §7.12).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PrintItem {
    Str(StringSlot),
    /// A named int variable: `L:  name = value`.
    IntVar(IntSlot),
    /// A named index: `L:  name = value`.
    Index(IndexSlot),
    /// A named scalar variable: `L:  name = value`.
    ScalarVar(ScalarSlot),
    /// An int expression: the value without a line end.
    IntExpr(ExprId),
    /// A scalar expression: the value and a line end.
    ScalarExpr(ExprId),
    Block(Operand),
    /// A whole static array.
    Array(ArraySlot),
}

/// Something that can be made persistent between the programs of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Persistent {
    Scalar(ScalarSlot),
    Array(ArraySlot),
}

/// The source of a `put`/`prepare`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PutValue {
    /// A block with the destination's index names in the same positions (trailing simple
    /// indices may differ).
    Block(BlockRef),
    Scalar(ExprId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PutOp {
    /// `=`: replace (block) or fill (scalar).
    Replace,
    /// `+=`: accumulate (block) or add to every element (scalar).
    Accumulate,
    /// `*=`: scale every element (scalar only; the block must exist).
    Scale,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    // ---- control ------------------------------------------------------------------------
    Jump {
        target: Pc,
    },
    /// Evaluates a relational expression; jumps when it is false.
    JumpUnless {
        cond: ExprId,
        target: Pc,
    },
    Call {
        proc: ProcId,
    },
    Return,
    /// The end of the main program.
    End,
    /// `stop`: aborts the job.
    Stop,
    /// Starts a `do` loop: iterations run `body_start..end`; where clauses filter iterations.
    /// When there is no (further) iteration execution continues at `end + 1`.
    DoStart {
        index: IndexSlot,
        wheres: Vec<ExprId>,
        end: Pc,
    },
    /// `do sub in parent`.
    DoInStart {
        index: IndexSlot,
        parent: IndexSlot,
        wheres: Vec<ExprId>,
        end: Pc,
    },
    /// Starts a pardo over the product of the indices (first fastest).
    PardoStart {
        indices: Vec<IndexSlot>,
        wheres: Vec<ExprId>,
        pragma: Option<StringSlot>,
        end: Pc,
    },
    /// End of a loop body: next iteration or leave. `start` is the loop's start instruction.
    LoopEnd {
        start: Pc,
    },
    /// `exit`: leaves the loop whose start instruction is `start`.
    Exit {
        start: Pc,
    },
    /// Start and end of a `section`: its pardos may be scheduled together; the end is a barrier.
    SectionStart,
    SectionEnd,
    Barrier {
        kind: BarrierKind,
    },
    // ---- ints and scalars ---------------------------------------------------------------
    AssignInt {
        target: IntSlot,
        op: ScalarAssign,
        value: ExprId,
    },
    AssignScalar {
        target: ScalarSlot,
        op: ScalarAssign,
        value: ExprId,
    },
    Collective {
        target: ScalarSlot,
        value: ExprId,
    },
    AssertSame {
        target: ScalarSlot,
    },
    BroadcastFrom {
        root: ExprId,
        array: ArraySlot,
    },
    // ---- block computation --------------------------------------------------------------
    /// `a = s`, `a += s`, `a -= s` (value negated), `a *= s`.
    BlockScalar {
        dst: Operand,
        update: ScalarUpdate,
        value: ExprId,
    },
    /// `a = b` (with permutation by index name, extra simple indices, or region copies).
    BlockCopy {
        dst: Operand,
        src: Operand,
        layout: Layout,
    },
    /// `a += b`, `a -= b`: b permuted to a's order and added.
    BlockAccumulate {
        dst: BlockRef,
        src: BlockRef,
        sign: Sign,
        layout: Layout,
    },
    /// `d = l + r`, `d = l - r` (identical index lists).
    BlockSum {
        dst: BlockRef,
        left: BlockRef,
        right: BlockRef,
        sign: Sign,
    },
    /// `d = l * r`, `d += l * r` (also `^`).
    BlockContract {
        dst: BlockRef,
        left: BlockRef,
        right: BlockRef,
        plan: ContractPlan,
        accumulate: bool,
    },
    /// `d = b * s`, `d += b * s` (identical index lists).
    BlockScaleCopy {
        dst: BlockRef,
        src: BlockRef,
        factor: ExprId,
        accumulate: bool,
    },
    /// `sub = a[ii, j]`: the sub-block of `a` selected by subindices, copied into `dst`.
    Slice {
        dst: BlockRef,
        src: BlockRef,
    },
    /// `a[ii, j] = sub`: `src` written into the sub-block of `dst`.
    Insert {
        dst: BlockRef,
        src: BlockRef,
    },
    Execute {
        special: SpecialSlot,
        args: Vec<ExecArg>,
    },
    // ---- local storage ------------------------------------------------------------------
    /// `allocate a[i, *]`: `None` is a wildcard over the declared range.
    Allocate {
        array: ArraySlot,
        selector: Vec<Option<IndexSlot>>,
    },
    Deallocate {
        array: ArraySlot,
        selector: Vec<Option<IndexSlot>>,
    },
    AllocateRegion {
        region: RegionRef,
    },
    DeallocateRegion {
        region: RegionRef,
    },
    // ---- distributed and served arrays --------------------------------------------------
    Create {
        array: ArraySlot,
    },
    /// `delete` (distributed) and `destroy` (served).
    Delete {
        array: ArraySlot,
    },
    /// `get` (distributed) and `request` (served).
    Get {
        block: BlockRef,
    },
    /// `put` (distributed) and `prepare` (served).
    Put {
        dst: BlockRef,
        op: PutOp,
        value: PutValue,
    },
    // ---- persistence, output, hints ------------------------------------------------------
    SetPersistent {
        object: Persistent,
        label: StringSlot,
    },
    RestorePersistent {
        object: Persistent,
        label: StringSlot,
    },
    Print {
        item: PrintItem,
        newline: bool,
    },
    GpuOn,
    GpuOff,
    Gpu {
        op: GpuOp,
        arg: ExecArg,
    },
}

impl Op {
    /// A short name of the instruction's kind (timelines, figures).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Jump { .. } => "jump",
            Op::JumpUnless { .. } => "jump_unless",
            Op::Call { .. } => "call",
            Op::Return => "return",
            Op::End => "end",
            Op::Stop => "stop",
            Op::DoStart { .. } => "do",
            Op::DoInStart { .. } => "do_in",
            Op::PardoStart { .. } => "pardo",
            Op::LoopEnd { .. } => "loop_end",
            Op::Exit { .. } => "exit",
            Op::SectionStart => "section",
            Op::SectionEnd => "end_section",
            Op::Barrier { .. } => "barrier",
            Op::AssignInt { .. } => "assign_int",
            Op::AssignScalar { .. } => "assign_scalar",
            Op::Collective { .. } => "collective",
            Op::AssertSame { .. } => "assert_same",
            Op::BroadcastFrom { .. } => "broadcast_from",
            Op::BlockScalar { .. } => "block_scalar",
            Op::BlockCopy { .. } => "block_copy",
            Op::BlockAccumulate { .. } => "block_accumulate",
            Op::BlockSum { .. } => "block_sum",
            Op::BlockContract { .. } => "contract",
            Op::BlockScaleCopy { .. } => "scale_copy",
            Op::Slice { .. } => "slice",
            Op::Insert { .. } => "insert",
            Op::Execute { .. } => "execute",
            Op::Allocate { .. } => "allocate",
            Op::Deallocate { .. } => "deallocate",
            Op::AllocateRegion { .. } => "allocate_region",
            Op::DeallocateRegion { .. } => "deallocate_region",
            Op::Create { .. } => "create",
            Op::Delete { .. } => "delete",
            Op::Get { .. } => "get",
            Op::Put { .. } => "put",
            Op::SetPersistent { .. } => "set_persistent",
            Op::RestorePersistent { .. } => "restore_persistent",
            Op::Print { .. } => "print",
            Op::GpuOn => "gpu_on",
            Op::GpuOff => "gpu_off",
            Op::Gpu { .. } => "gpu",
        }
    }
}

/// `=`, `+=`, `-=`, `*=` on an int or scalar variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScalarAssign {
    Set,
    Add,
    Sub,
    Mul,
}

/// A typed expression: a stack program producing one value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr {
    pub ty: ValueType,
    pub ops: Vec<ExprOp>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValueType {
    Int,
    Scalar,
    /// A relational expression (1 or 0), used by `if` and `where`.
    Bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// One step of an expression's stack program. Int steps work on a stack of i32, scalar steps on
/// a stack of f64; comparisons pop two values of their type and push a Bool (kept as an int).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprOp {
    Int(i32),
    Scalar(f64),
    LoadInt(IntSlot),
    LoadIndex(IndexSlot),
    LoadScalar(ScalarSlot),
    /// The single element of a scalar-valued block (all dimensions simple).
    LoadBlockScalar(BlockRef),
    /// Full contraction of two blocks to a scalar (elements matched by index).
    Dot {
        left: BlockRef,
        right: BlockRef,
        plan: ContractPlan,
    },
    IntAdd,
    IntSub,
    IntMul,
    /// Truncating division; division by zero is a runtime error.
    IntDiv,
    IntNeg,
    ScalarAdd,
    ScalarSub,
    ScalarMul,
    ScalarDiv,
    /// `a ** b` = pow(a, b).
    ScalarPow,
    ScalarNeg,
    ScalarSqrt,
    /// `(int) x`: round half to even.
    ToInt,
    /// `(scalar) n`.
    ToScalar,
    IntCmp(CmpOp),
    ScalarCmp(CmpOp),
}
