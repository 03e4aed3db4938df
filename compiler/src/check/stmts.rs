//! The remaining statements: allocation, distributed-array operations, collectives, execute,
//! print, persistence and GPU hints.

use super::Checker;
use super::body::Body;
use super::expr::{Node, Types, count};
use super::symbols::Sym;
use crate::bytecode::{
    self as bc, ArrayKind, ArraySlot, ExecArg, Intent, Op, Operand, PrintItem, ValueType,
};
use crate::source::Span;
use crate::syntax::ast::{self, AllocIndex, Arg, AssignOp, Stmt, StmtKind};

/// Specials that may take any array by its bare name (SIAL-SPEC §4.16).
const WHOLE_ARRAY_SPECIALS: &[&str] = &["blocks_to_list", "list_to_blocks", "array_copy"];

impl Checker<'_> {
    pub(super) fn data_stmt(&mut self, b: &mut Body, s: &Stmt) {
        let span = s.span;
        match &s.kind {
            StmtKind::Assign {
                target, op, value, ..
            } => self.assign(b, target, *op, value, span),
            StmtKind::Put { target, op, value } => self.put(b, target, *op, value, false, span),
            StmtKind::Prepare { target, op, value } => self.put(b, target, *op, value, true, span),
            StmtKind::Get(r) | StmtKind::Request(r) => {
                let (stmt, want) = if matches!(s.kind, StmtKind::Get(_)) {
                    ("get", ArrayKind::Distributed)
                } else {
                    ("request", ArrayKind::Served)
                };
                if let Some(a) = self.array_of_kind(b, &r.name, &[want], stmt) {
                    if r.selector.is_none() {
                        self.diags.error(
                            r.span,
                            format!("{stmt} needs a block: {}[...]", r.name.text),
                        );
                        return;
                    }
                    if let Some(blk) = self.block(b, r, a) {
                        if blk.sub_block {
                            self.diags.error(
                                r.span,
                                format!(
                                    "a subindex cannot select a block of a {} array",
                                    want.name()
                                ),
                            );
                            return;
                        }
                        self.emit(b, Op::Get { block: blk.r }, span);
                    }
                }
            }
            StmtKind::Allocate { array, selector } | StmtKind::Deallocate { array, selector } => {
                let allocate = matches!(s.kind, StmtKind::Allocate { .. });
                self.allocate(b, array, selector.as_deref(), allocate, span);
            }
            StmtKind::AllocateContiguous { array, ranges }
            | StmtKind::DeallocateContiguous { array, ranges } => {
                let stmt = if matches!(s.kind, StmtKind::AllocateContiguous { .. }) {
                    "allocate contiguous"
                } else {
                    "deallocate contiguous"
                };
                let Some(a) = self.array_of_kind(b, array, &[ArrayKind::ContiguousLocal], stmt)
                else {
                    return;
                };
                let rank = self.program.arrays[a.index()].dims.len();
                let refs: Vec<&ast::SegRange> = ranges.iter().collect();
                if let Some(region) = self.region_ranges(b, a, &array.text, rank, &refs, span) {
                    let op = if stmt == "allocate contiguous" {
                        Op::AllocateRegion { region }
                    } else {
                        Op::DeallocateRegion { region }
                    };
                    self.emit(b, op, span);
                }
            }
            StmtKind::Create(name) => {
                if let Some(array) =
                    self.array_of_kind(b, name, &[ArrayKind::Distributed], "create")
                {
                    let line = self.sources.line(span);
                    if let Some(p) = b.pardo {
                        self.diags.error(
                            span,
                            format!(
                                "create {} is inside pardo at line {p}; create it before the pardo",
                                name.text
                            ),
                        );
                    }
                    b.create_seen.get_or_insert((name.text.clone(), line));
                    self.emit(b, Op::Create { array }, span);
                }
            }
            StmtKind::Delete(name) | StmtKind::Destroy(name) => {
                let (stmt, want) = if matches!(s.kind, StmtKind::Delete(_)) {
                    ("delete", ArrayKind::Distributed)
                } else {
                    ("destroy", ArrayKind::Served)
                };
                if let Some(array) = self.array_of_kind(b, name, &[want], stmt) {
                    if let Some(p) = b.pardo {
                        self.diags.error(span, format!("{stmt} {} is inside pardo at line {p}; every worker must execute it, so place it outside the pardo", name.text));
                    }
                    self.emit(b, Op::Delete { array }, span);
                }
            }
            StmtKind::Collective {
                target,
                op,
                value,
                op_span,
            } => {
                let slot = self.scalar_var(b, target, "Collective requires scalar arguments");
                if *op != AssignOp::Add {
                    self.diags.error(*op_span, "Collective operator must be +=");
                }
                let value = self.scalar_expr(b, value, "rhs of collective sum");
                if let (Some(target), Some(value), AssignOp::Add) = (slot, value, op) {
                    self.emit(b, Op::Collective { target, value }, span);
                }
            }
            StmtKind::AssertSame(name) => {
                if let Some(target) =
                    self.scalar_var(b, name, "argument to assert_same must be scalar")
                {
                    self.emit(b, Op::AssertSame { target }, span);
                }
            }
            StmtKind::BroadcastFrom { root, array } => {
                let root = self.int_expr(
                    b,
                    root,
                    "the root of broadcast_from must be an int expression (a worker rank)",
                );
                let array = self.array_of_kind(b, array, &[ArrayKind::Static], "broadcast_from");
                if let (Some(root), Some(array)) = (root, array) {
                    self.emit(b, Op::BroadcastFrom { root, array }, span);
                }
            }
            StmtKind::Execute { name, args } => self.execute(b, name, args, span),
            StmtKind::Print { value, newline } => self.print(b, value, *newline, span),
            StmtKind::Gpu { op, arg } => self.gpu(b, *op, arg, span),
            StmtKind::SetPersistent { name, label }
            | StmtKind::RestorePersistent { name, label } => {
                let set = matches!(s.kind, StmtKind::SetPersistent { .. });
                self.persistence(b, name, label, set, span);
            }
            // Control statements are handled in body.rs.
            _ => {}
        }
    }

    /// Resolves `name` as an array of one of the `kinds`; reports otherwise.
    fn array_of_kind(
        &mut self,
        b: &mut Body,
        name: &ast::Name,
        kinds: &[ArrayKind],
        stmt: &str,
    ) -> Option<ArraySlot> {
        match self.lookup(b.file, name)? {
            Sym::Array(a) if kinds.contains(&self.program.arrays[a.index()].kind) => {
                self.program.arrays[a.index()].used = true;
                Some(a)
            }
            _ => {
                let want: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                self.diags.error(
                    name.span,
                    format!(
                        "{} must be declared as {} array ({stmt})",
                        name.text,
                        want.join(" or ")
                    ),
                );
                None
            }
        }
    }

    fn scalar_var(&mut self, b: &mut Body, name: &ast::Name, msg: &str) -> Option<bc::ScalarSlot> {
        match self.lookup(b.file, name)? {
            Sym::Scalar(s) => Some(s),
            _ => {
                self.diags
                    .error(name.span, format!("{msg}: {} is not a scalar", name.text));
                None
            }
        }
    }

    fn allocate(
        &mut self,
        b: &mut Body,
        array: &ast::Name,
        selector: Option<&[AllocIndex]>,
        allocate: bool,
        span: Span,
    ) {
        let stmt = if allocate { "allocate" } else { "deallocate" };
        let a = match self.lookup(b.file, array) {
            Some(Sym::Array(a)) if self.program.arrays[a.index()].kind == ArrayKind::Local => a,
            Some(Sym::Array(a))
                if self.program.arrays[a.index()].kind == ArrayKind::ContiguousLocal =>
            {
                self.diags.error(
                    array.span,
                    format!(
                        "{0} is a contiguous local array: use `{stmt} contiguous {0}[l:u, ...]`",
                        array.text
                    ),
                );
                return;
            }
            Some(_) => {
                self.diags.error(
                    array.span,
                    format!("{} must be declared as local array ({stmt})", array.text),
                );
                return;
            }
            None => return,
        };
        self.program.arrays[a.index()].used = true;
        let dims = self.program.arrays[a.index()].dims.clone();
        let mut sel = Vec::new();
        match selector {
            None => sel = vec![None; dims.len()],
            Some(items) => {
                if items.len() != dims.len() {
                    self.diags.error(span, format!("index list in {stmt} statement incompatible with array {}: {} given, {} declared", array.text, count(items.len(), "index", "indices"), dims.len()));
                    return;
                }
                for (d, item) in items.iter().enumerate() {
                    match item {
                        AllocIndex::Wildcard(_) => sel.push(None),
                        AllocIndex::Index(name) => {
                            let Some(Sym::Index(slot)) = self.lookup(b.file, name) else {
                                self.diags.error(
                                    name.span,
                                    format!("{} must be an index or subindex", name.text),
                                );
                                return;
                            };
                            self.use_index(b, slot, name.span);
                            let declared = dims[d];
                            let (u, dk) = (
                                &self.program.indices[slot.index()],
                                &self.program.indices[declared.index()],
                            );
                            let ok = u.kind == dk.kind
                                && (u.kind != bc::IndexKind::Sub || u.parent == dk.parent);
                            if !ok {
                                let msg = format!(
                                    "index in {stmt} statement incompatible with declaration of array {}: {} is {}, dimension {} is declared with {} ({})",
                                    array.text,
                                    u.name,
                                    super::blocks::article(&self.kind_desc(slot)),
                                    d + 1,
                                    dk.name,
                                    self.kind_desc(declared)
                                );
                                self.diags.error(name.span, msg);
                                return;
                            }
                            sel.push(Some(slot));
                        }
                    }
                }
            }
        }
        let op = if allocate {
            Op::Allocate {
                array: a,
                selector: sel,
            }
        } else {
            Op::Deallocate {
                array: a,
                selector: sel,
            }
        };
        self.emit(b, op, span);
    }

    fn execute(&mut self, b: &mut Body, name: &ast::Name, args: &[Arg], span: Span) {
        let special = match self.lookup(b.file, name) {
            Some(Sym::Special(s)) => Some(s),
            Some(_) => {
                self.diags.error(name.span, format!("{} is not declared as a special instruction (declare it with `special {} SIG`)", name.text, name.text));
                None
            }
            None => None,
        };
        let intents = special
            .map(|s| self.program.specials[s.index()].intents.clone())
            .unwrap_or_default();
        if let Some(_s) = special
            && args.len() != intents.len()
        {
            self.diags.error(
                span,
                format!(
                    "execute {} has {} arguments but expects {}",
                    name.text,
                    args.len(),
                    intents.len()
                ),
            );
        }
        if args.len() > bc::MAX_RANK {
            self.diags.error(
                span,
                format!(
                    "execute {} has {} arguments; at most {} are supported",
                    name.text,
                    args.len(),
                    bc::MAX_RANK
                ),
            );
        }
        let whole_arrays = WHOLE_ARRAY_SPECIALS.contains(&name.text.as_str());
        let mut out = Vec::new();
        for (k, arg) in args.iter().enumerate() {
            let intent = intents.get(k).copied().unwrap_or(Intent::Read);
            if let Some(a) = self.exec_arg(b, arg, whole_arrays, &name.text) {
                if intent != Intent::Read {
                    let remote = match &a {
                        ExecArg::Block(r)
                            if self.program.arrays[r.array.index()].kind.is_remote() =>
                        {
                            let array = &self.program.arrays[r.array.index()];
                            Some(format!(
                                "a block of {} array {}",
                                array.kind.name(),
                                array.name
                            ))
                        }
                        _ => None,
                    };
                    let what = match (&a, remote) {
                        (ExecArg::Literal(_), _) => Some("a literal".to_string()),
                        // ACES4 runs a `w` argument on the worker's own copy of the block, which
                        // is discarded at the next barrier (SIAL-SPEC §4.7): a warning.
                        (_, Some(what)) if intent == Intent::Write => {
                            self.diags.warning(
                                arg.span(),
                                format!(
                                    "argument {} of {} is written (intent w) but is {what}: only this worker's copy changes, and it is discarded at the next barrier",
                                    k + 1,
                                    name.text
                                ),
                            );
                            None
                        }
                        (_, remote) => remote,
                    };
                    if let Some(what) = what {
                        self.diags.error(
                            arg.span(),
                            format!(
                                "argument {} of {} is written (intent {}) but is {what}",
                                k + 1,
                                name.text,
                                if intent == Intent::Write { "w" } else { "u" }
                            ),
                        );
                    }
                }
                out.push(a);
            }
        }
        if let Some(special) = special
            && out.len() == args.len()
        {
            self.emit(b, Op::Execute { special, args: out }, span);
        }
    }

    fn exec_arg(
        &mut self,
        b: &mut Body,
        arg: &Arg,
        whole_arrays: bool,
        special: &str,
    ) -> Option<ExecArg> {
        match arg {
            Arg::Double(v, _) => Some(ExecArg::Literal(*v)),
            Arg::Str(_, span) => {
                self.diags.error(
                    *span,
                    "illegal argument type for execute statement: a string cannot be passed",
                );
                None
            }
            Arg::Int(v, span) => {
                self.diags.error(*span, format!("illegal argument type for execute statement: the int literal {v} cannot be passed; write {v}.0 to pass a scalar"));
                None
            }
            Arg::Ref(r) => {
                let t = self.reference(b, r)?;
                match t.node {
                    Node::Block(blk) if !blk.sub_block => Some(ExecArg::Block(blk.r)),
                    Node::Region(region) => Some(ExecArg::Region(region)),
                    Node::ScalarVar(s) => Some(ExecArg::Scalar(s)),
                    Node::Array(a) => {
                        let kind = self.program.arrays[a.index()].kind;
                        if matches!(kind, ArrayKind::Static | ArrayKind::ContiguousLocal)
                            || whole_arrays
                        {
                            Some(ExecArg::Array(a))
                        } else {
                            self.diags.error(r.span, format!("a {} array requires a block selector as an argument of {special}: {}[...]", kind.name(), r.name.text));
                            None
                        }
                    }
                    _ => {
                        self.diags.error(
                            r.span,
                            format!(
                                "illegal argument type for execute statement: {} is {}",
                                r.name.text,
                                t.types.describe()
                            ),
                        );
                        None
                    }
                }
            }
        }
    }

    fn print(&mut self, b: &mut Body, value: &ast::Expr, newline: bool, span: Span) {
        let Some(t) = self.typed(b, value) else {
            return;
        };
        let item = match &t.node {
            Node::Str(s) => PrintItem::Str(self.string(s)),
            Node::ScalarVar(s) => PrintItem::ScalarVar(*s),
            Node::IntVar(s) => PrintItem::IntVar(*s),
            Node::Index(s) => PrintItem::Index(*s),
            Node::Array(a) if self.program.arrays[a.index()].kind == ArrayKind::Static => {
                PrintItem::Array(*a)
            }
            Node::Region(region) => PrintItem::Block(Operand::Region(region.clone())),
            _ if t.types.has(Types::SCALAR) => match self.scalar_from(&t, "the printed value") {
                Some(e) => PrintItem::ScalarExpr(e),
                None => return,
            },
            _ if t.types.has(Types::INT) => PrintItem::IntExpr(self.lower(&t, ValueType::Int)),
            Node::Block(blk) if !blk.sub_block => PrintItem::Block(Operand::Block(blk.r.clone())),
            Node::Array(a) => {
                let msg = format!(
                    "unexpected argument for print statement: {}; print its blocks, {}[...]",
                    self.array_desc(*a),
                    self.program.arrays[a.index()].name
                );
                self.diags.error(value.span, msg);
                return;
            }
            _ => {
                let what = if t.types.has(Types::BLOCK) {
                    "a block expression cannot be printed; assign it to a temp block and print that"
                        .to_string()
                } else {
                    format!("{} cannot be printed", t.types.describe())
                };
                self.diags.error(
                    value.span,
                    format!("unexpected argument for print statement: {what}"),
                );
                return;
            }
        };
        self.emit(b, Op::Print { item, newline }, span);
    }

    fn gpu(&mut self, b: &mut Body, op: ast::GpuOp, arg: &Arg, span: Span) {
        let op = match op {
            ast::GpuOp::Allocate => bc::GpuOp::Allocate,
            ast::GpuOp::Free => bc::GpuOp::Free,
            ast::GpuOp::Put => bc::GpuOp::Put,
            ast::GpuOp::Get => bc::GpuOp::Get,
        };
        let Arg::Ref(r) = arg else {
            let what = if matches!(arg, Arg::Str(..)) {
                "a string"
            } else {
                "a literal"
            };
            self.diags.error(arg.span(), format!("incorrect argument for a gpu statement: {what}; give a block, or the name of a scalar, int or static array"));
            return;
        };
        let Some(t) = self.reference(b, r) else {
            return;
        };
        let arg = match t.node {
            Node::Block(blk) if !blk.sub_block => ExecArg::Block(blk.r),
            Node::ScalarVar(s) => ExecArg::Scalar(s),
            Node::Array(a) if self.program.arrays[a.index()].kind == ArrayKind::Static => {
                ExecArg::Array(a)
            }
            // An int lives on the host; moving it is a no-op hint, so nothing is emitted.
            Node::IntVar(_) => return,
            Node::Array(a) => {
                let msg = format!(
                    "Illegal argument for a gpu statement: {}; pass a block, {}[...]",
                    self.array_desc(a),
                    self.program.arrays[a.index()].name
                );
                self.diags.error(r.span, msg);
                return;
            }
            _ => {
                self.diags.error(
                    r.span,
                    format!(
                        "Illegal argument for a gpu statement: {} is {}",
                        r.name.text,
                        t.types.describe()
                    ),
                );
                return;
            }
        };
        self.emit(b, Op::Gpu { op, arg }, span);
    }

    fn persistence(
        &mut self,
        b: &mut Body,
        name: &ast::Name,
        label: &ast::StrLit,
        set: bool,
        span: Span,
    ) {
        let stmt = if set {
            "set_persistent"
        } else {
            "restore_persistent"
        };
        let object = match self.lookup(b.file, name) {
            Some(Sym::Scalar(s)) => {
                if self.program.scalars[s.index()].predefined {
                    self.predefined_persistent(name, set);
                    return;
                }
                bc::Persistent::Scalar(s)
            }
            Some(Sym::Array(a)) => {
                let array = &self.program.arrays[a.index()];
                if array.predefined {
                    self.predefined_persistent(name, set);
                    return;
                }
                if !matches!(
                    array.kind,
                    ArrayKind::Static | ArrayKind::Distributed | ArrayKind::Served
                ) {
                    let kind = array.kind.name();
                    self.diags.error(name.span, format!("{stmt} array argument {} must be a static, served, or distributed array (it is {kind})", name.text));
                    return;
                }
                self.program.arrays[a.index()].used = true;
                bc::Persistent::Array(a)
            }
            Some(_) => {
                self.diags.error(
                    name.span,
                    format!("{stmt} argument {} must be an array or scalar", name.text),
                );
                return;
            }
            None => return,
        };
        let label = self.string(&label.text);
        let op = if set {
            Op::SetPersistent { object, label }
        } else {
            Op::RestorePersistent { object, label }
        };
        self.emit(b, op, span);
    }

    /// "a is a local array".
    fn array_desc(&self, a: ArraySlot) -> String {
        let array = &self.program.arrays[a.index()];
        format!(
            "{} is {} array",
            array.name,
            super::blocks::article(array.kind.name())
        )
    }

    fn predefined_persistent(&mut self, name: &ast::Name, set: bool) {
        let msg = if set {
            format!("predefined object {} cannot be persistent", name.text)
        } else {
            format!(
                "predefined object {} cannot be target of restore_persistent",
                name.text
            )
        };
        self.diags.error(name.span, msg);
    }
}
