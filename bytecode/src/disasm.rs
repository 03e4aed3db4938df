//! A readable listing of a program: tables, then one line per instruction with its source line.

use super::*;
use std::fmt::Write as _;

/// Lists `p`. `source_line(file, line)` supplies the text of a source line when available.
pub fn disassemble(p: &Program, source_line: &dyn Fn(usize, u32) -> Option<String>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "program {}  (bytecode format {})",
        p.name, FORMAT_VERSION
    );
    for (i, f) in p.files.iter().enumerate() {
        let _ = writeln!(out, "  file {i}: {f}");
    }
    let d = Names(p);
    section(
        &mut out,
        "indices",
        p.indices.iter().enumerate().map(|(i, x)| {
            let range = match x.parent {
                Some(parent) => format!("of {}", d.index(parent)),
                None => format!("{}:{}", d.bound(x.lo), d.bound(x.hi)),
            };
            format!("{i:4}  {:<16} {:<9} {range}", x.name, x.kind.name())
        }),
    );
    section(
        &mut out,
        "ints",
        p.ints.iter().enumerate().map(|(i, x)| {
            let how = if x.predefined {
                "predefined".to_string()
            } else {
                format!("= {}", x.init)
            };
            format!("{i:4}  {:<16} {how}", x.name)
        }),
    );
    section(
        &mut out,
        "scalars",
        p.scalars.iter().enumerate().map(|(i, x)| {
            let how = if x.predefined {
                "predefined".to_string()
            } else {
                format!("= {:?}", x.init)
            };
            format!("{i:4}  {:<16} {how}", x.name)
        }),
    );
    section(
        &mut out,
        "arrays",
        p.arrays.iter().enumerate().map(|(i, a)| {
            let dims: Vec<&str> = a.dims.iter().map(|&s| d.index(s)).collect();
            let pre = if a.predefined { "predefined " } else { "" };
            let unused = if a.used { "" } else { "  (unused)" };
            format!(
                "{i:4}  {:<16} {pre}{}[{}]{unused}",
                a.name,
                a.kind.name(),
                dims.join(",")
            )
        }),
    );
    section(
        &mut out,
        "specials",
        p.specials.iter().enumerate().map(|(i, s)| {
            let sig: String = s
                .intents
                .iter()
                .map(|k| match k {
                    Intent::Read => 'r',
                    Intent::Write => 'w',
                    Intent::Update => 'u',
                })
                .collect();
            format!("{i:4}  {} {sig}", s.name)
        }),
    );
    section(
        &mut out,
        "strings",
        p.strings
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{i:4}  {s:?}")),
    );
    section(
        &mut out,
        "procs",
        p.procs
            .iter()
            .enumerate()
            .map(|(i, x)| format!("{i:4}  {} @{}", x.name, x.entry)),
    );
    let _ = writeln!(out, "code:");
    for (pc, ins) in p.code.iter().enumerate() {
        if let Some(proc) = p.procs.iter().find(|x| x.entry as usize == pc) {
            let _ = writeln!(out, "proc {}:", proc.name);
        }
        let text = d.op(&ins.op);
        let src = source_line(ins.loc.file.index(), ins.loc.line)
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let file = if ins.loc.file.0 == 0 {
            String::new()
        } else {
            format!("{}:", ins.loc.file.0)
        };
        let _ = writeln!(out, "{pc:6}  {text:<60} ; {file}{:<4} {src}", ins.loc.line);
    }
    out
}

fn section(out: &mut String, title: &str, rows: impl Iterator<Item = String>) {
    let rows: Vec<String> = rows.collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "{title}:");
    for r in rows {
        let _ = writeln!(out, "{r}");
    }
}

struct Names<'a>(&'a Program);

impl Names<'_> {
    fn index(&self, s: IndexSlot) -> &str {
        self.0
            .indices
            .get(s.index())
            .map_or("?", |x| x.name.as_str())
    }

    fn bound(&self, b: Bound) -> String {
        match b {
            Bound::Literal(v) => v.to_string(),
            Bound::Predefined(s) => self
                .0
                .ints
                .get(s.index())
                .map_or("?".into(), |x| x.name.clone()),
        }
    }

    fn array(&self, s: ArraySlot) -> &str {
        self.0
            .arrays
            .get(s.index())
            .map_or("?", |x| x.name.as_str())
    }

    fn scalar(&self, s: ScalarSlot) -> &str {
        self.0
            .scalars
            .get(s.index())
            .map_or("?", |x| x.name.as_str())
    }

    fn int(&self, s: IntSlot) -> &str {
        self.0.ints.get(s.index()).map_or("?", |x| x.name.as_str())
    }

    fn string(&self, s: StringSlot) -> String {
        format!(
            "{:?}",
            self.0.strings.get(s.index()).map_or("?", |x| x.as_str())
        )
    }

    fn block(&self, b: &BlockRef) -> String {
        let idx: Vec<&str> = b.indices.iter().map(|&i| self.index(i)).collect();
        format!("{}[{}]", self.array(b.array), idx.join(","))
    }

    fn region(&self, r: &RegionRef) -> String {
        let ranges: Vec<String> = r
            .ranges
            .iter()
            .map(|&(l, u)| format!("{}:{}", self.expr(l), self.expr(u)))
            .collect();
        format!("{}[{}]", self.array(r.array), ranges.join(","))
    }

    fn operand(&self, o: &Operand) -> String {
        match o {
            Operand::Block(b) => self.block(b),
            Operand::Region(r) => self.region(r),
        }
    }

    fn exprs(&self, list: &[ExprId]) -> String {
        list.iter()
            .map(|&e| self.expr(e))
            .collect::<Vec<_>>()
            .join(" and ")
    }

    /// Infix text of an expression's stack program, fully parenthesised except at the top.
    fn expr(&self, id: ExprId) -> String {
        let (text, binary) = self.expr_parts(id);
        if binary {
            text[1..text.len() - 1].to_string()
        } else {
            text
        }
    }

    /// An expression as an operand of something else: parenthesised when compound.
    fn operand_expr(&self, id: ExprId) -> String {
        self.expr_parts(id).0
    }

    /// The text, and whether its outermost step is a binary operator (so it is wrapped in
    /// parentheses).
    fn expr_parts(&self, id: ExprId) -> (String, bool) {
        let Some(e) = self.0.exprs.get(id.index()) else {
            return ("?".into(), false);
        };
        let mut stack: Vec<(String, bool)> = Vec::new();
        let bin = |stack: &mut Vec<(String, bool)>, op: &str| {
            let b = stack.pop().unwrap_or_default().0;
            let a = stack.pop().unwrap_or_default().0;
            stack.push((format!("({a} {op} {b})"), true));
        };
        let un = |stack: &mut Vec<(String, bool)>, f: &dyn Fn(String) -> String| {
            let a = stack.pop().unwrap_or_default().0;
            stack.push((f(a), false));
        };
        for op in &e.ops {
            match op {
                ExprOp::Int(v) => stack.push((v.to_string(), false)),
                ExprOp::Scalar(v) => stack.push((format!("{v:?}"), false)),
                ExprOp::LoadInt(s) => stack.push((self.int(*s).to_string(), false)),
                ExprOp::LoadIndex(s) => stack.push((self.index(*s).to_string(), false)),
                ExprOp::LoadScalar(s) => stack.push((self.scalar(*s).to_string(), false)),
                ExprOp::LoadBlockScalar(b) => stack.push((self.block(b), false)),
                ExprOp::Dot { left, right, .. } => stack.push((
                    format!("dot({}, {})", self.block(left), self.block(right)),
                    false,
                )),
                ExprOp::IntAdd | ExprOp::ScalarAdd => bin(&mut stack, "+"),
                ExprOp::IntSub | ExprOp::ScalarSub => bin(&mut stack, "-"),
                ExprOp::IntMul | ExprOp::ScalarMul => bin(&mut stack, "*"),
                ExprOp::IntDiv | ExprOp::ScalarDiv => bin(&mut stack, "/"),
                ExprOp::ScalarPow => bin(&mut stack, "**"),
                ExprOp::IntNeg | ExprOp::ScalarNeg => un(&mut stack, &|a| format!("-{a}")),
                ExprOp::ScalarSqrt => un(&mut stack, &|a| format!("sqrt {a}")),
                ExprOp::ToInt => un(&mut stack, &|a| format!("(int){a}")),
                ExprOp::ToScalar => un(&mut stack, &|a| format!("(scalar){a}")),
                ExprOp::IntCmp(c) | ExprOp::ScalarCmp(c) => bin(&mut stack, cmp(*c)),
            }
        }
        stack.pop().unwrap_or_default()
    }

    fn exec_arg(&self, a: &ExecArg) -> String {
        match a {
            ExecArg::Block(b) => self.block(b),
            ExecArg::Region(r) => self.region(r),
            ExecArg::Scalar(s) => self.scalar(*s).to_string(),
            ExecArg::Array(s) => self.array(*s).to_string(),
            ExecArg::Literal(v) => format!("{v:?}"),
        }
    }

    fn op(&self, op: &Op) -> String {
        match op {
            Op::Jump { target } => format!("jump {target}"),
            Op::JumpUnless { cond, target } => {
                format!("jump_unless {} -> {target}", self.expr(*cond))
            }
            Op::Call { proc } => format!("call {}", self.proc(*proc)),
            Op::Return => "return".into(),
            Op::End => "end".into(),
            Op::Stop => "stop".into(),
            Op::DoStart { index, wheres, end } => self.do_loop(*index, None, wheres, *end),
            Op::DoInStart {
                index,
                parent,
                wheres,
                end,
            } => self.do_loop(*index, Some(*parent), wheres, *end),
            Op::PardoStart {
                indices,
                wheres,
                pragma,
                end,
            } => self.pardo(indices, *pragma, wheres, *end),
            Op::LoopEnd { start } => format!("loop_end (start {start})"),
            Op::Exit { start } => format!("exit loop {start}"),
            Op::SectionStart => "section".into(),
            Op::SectionEnd => "end_section (barrier)".into(),
            Op::Barrier { kind } => match kind {
                BarrierKind::Sip => "sip_barrier".into(),
                BarrierKind::Server => "server_barrier".into(),
            },
            Op::AssignInt { target, op, value } => self.assignment(self.int(*target), *op, *value),
            Op::AssignScalar { target, op, value } => {
                self.assignment(self.scalar(*target), *op, *value)
            }
            Op::Collective { target, value } => format!(
                "collective {} += {}",
                self.scalar(*target),
                self.expr(*value)
            ),
            Op::AssertSame { target } => format!("assert_same {}", self.scalar(*target)),
            Op::BroadcastFrom { root, array } => {
                format!("broadcast_from {} {}", self.expr(*root), self.array(*array))
            }
            Op::BlockScalar { dst, update, value } => self.block_scalar(dst, *update, *value),
            Op::BlockCopy { dst, src, layout } => self.block_copy(dst, src, layout),
            Op::BlockAccumulate {
                dst,
                src,
                sign,
                layout,
            } => self.accumulate(dst, *sign, src, layout),
            Op::BlockSum {
                dst,
                left,
                right,
                sign,
            } => self.sum(dst, left, *sign, right),
            Op::BlockContract {
                dst,
                left,
                right,
                plan,
                accumulate,
            } => {
                let op = if *accumulate {
                    "contract_add"
                } else {
                    "contract"
                };
                format!("{op} {}", self.contraction(dst, left, right, plan))
            }
            Op::BlockScaleCopy {
                dst,
                src,
                factor,
                accumulate,
            } => self.scale_copy(dst, src, *factor, *accumulate),
            Op::Slice { dst, src } => format!("slice {} <- {}", self.block(dst), self.block(src)),
            Op::Insert { dst, src } => format!("insert {} <- {}", self.block(dst), self.block(src)),
            Op::Execute { special, args } => self.execute(*special, args),
            Op::Allocate { array, selector } => {
                format!("allocate {}", self.selector(*array, selector))
            }
            Op::Deallocate { array, selector } => {
                format!("deallocate {}", self.selector(*array, selector))
            }
            Op::AllocateRegion { region } => format!("allocate_region {}", self.region(region)),
            Op::DeallocateRegion { region } => format!("deallocate_region {}", self.region(region)),
            Op::Create { array } => format!("create {}", self.array(*array)),
            Op::Delete { array } => format!("delete {}", self.array(*array)),
            Op::Get { block } => format!("get {}", self.block(block)),
            Op::Put { dst, op, value } => self.put(dst, *op, value),
            Op::SetPersistent { object, label } => {
                self.persistence("set_persistent", *object, *label)
            }
            Op::RestorePersistent { object, label } => {
                self.persistence("restore_persistent", *object, *label)
            }
            Op::Print { item, newline } => {
                let op = if *newline { "println" } else { "print" };
                format!("{op} {}", self.print_item(item))
            }
            Op::GpuOn => "gpu_on".into(),
            Op::GpuOff => "gpu_off".into(),
            Op::Gpu { op, arg } => {
                let op = match op {
                    GpuOp::Allocate => "gpu_allocate",
                    GpuOp::Free => "gpu_free",
                    GpuOp::Put => "gpu_put",
                    GpuOp::Get => "gpu_get",
                };
                format!("{op} {}", self.exec_arg(arg))
            }
        }
    }

    fn proc(&self, p: ProcId) -> &str {
        self.0.procs.get(p.index()).map_or("?", |x| x.name.as_str())
    }

    // ---- loop heads -------------------------------------------------------------------------

    /// `do i` or, with a parent, `do i in p`.
    fn do_loop(
        &self,
        index: IndexSlot,
        parent: Option<IndexSlot>,
        w: &[ExprId],
        end: Pc,
    ) -> String {
        let parent = parent
            .map(|p| format!(" in {}", self.index(p)))
            .unwrap_or_default();
        format!(
            "do {}{parent}{} (end {end})",
            self.index(index),
            self.wheres(w)
        )
    }

    fn pardo(
        &self,
        indices: &[IndexSlot],
        pragma: Option<StringSlot>,
        w: &[ExprId],
        end: Pc,
    ) -> String {
        let list: Vec<&str> = indices.iter().map(|&i| self.index(i)).collect();
        let pragma = pragma
            .map(|s| format!(" {}", self.string(s)))
            .unwrap_or_default();
        format!(
            "pardo {}{pragma}{} (end {end})",
            list.join(","),
            self.wheres(w)
        )
    }

    /// The where clauses of a loop head, with their leading space; empty without any.
    fn wheres(&self, w: &[ExprId]) -> String {
        if w.is_empty() {
            String::new()
        } else {
            format!(" where {}", self.exprs(w))
        }
    }

    // ---- variables ----------------------------------------------------------------------------

    fn assignment(&self, target: &str, op: ScalarAssign, value: ExprId) -> String {
        format!("{target} {} {}", assign(op), self.expr(value))
    }

    // ---- block arithmetic ---------------------------------------------------------------------

    fn block_scalar(&self, dst: &Operand, update: ScalarUpdate, value: ExprId) -> String {
        let op = match update {
            ScalarUpdate::Fill => "fill",
            ScalarUpdate::Add => "add_scalar",
            ScalarUpdate::Scale => "scale",
        };
        format!("{op} {} {}", self.operand(dst), self.expr(value))
    }

    fn block_copy(&self, dst: &Operand, src: &Operand, layout: &Layout) -> String {
        let kind = if layout.is_identity() {
            "copy"
        } else {
            "permute"
        };
        format!(
            "{kind} {} <- {} {}",
            self.operand(dst),
            self.operand(src),
            perm(layout)
        )
    }

    fn accumulate(&self, dst: &BlockRef, sign: Sign, src: &BlockRef, layout: &Layout) -> String {
        format!(
            "accumulate {} {}= {} {}",
            self.block(dst),
            sign_text(sign),
            self.block(src),
            perm(layout)
        )
    }

    fn sum(&self, dst: &BlockRef, left: &BlockRef, sign: Sign, right: &BlockRef) -> String {
        format!(
            "sum {} <- {} {} {}",
            self.block(dst),
            self.block(left),
            sign_text(sign),
            self.block(right)
        )
    }

    /// `d <- l * r` with the contraction pattern, without the mnemonic.
    fn contraction(
        &self,
        dst: &BlockRef,
        left: &BlockRef,
        right: &BlockRef,
        plan: &ContractPlan,
    ) -> String {
        format!(
            "{} <- {} * {} sum{:?} free{:?}{:?}",
            self.block(dst),
            self.block(left),
            self.block(right),
            plan.contracted,
            plan.left_free,
            plan.right_free
        )
    }

    fn scale_copy(
        &self,
        dst: &BlockRef,
        src: &BlockRef,
        factor: ExprId,
        accumulate: bool,
    ) -> String {
        let op = if accumulate {
            "scale_add"
        } else {
            "scale_copy"
        };
        format!(
            "{op} {} <- {} * {}",
            self.block(dst),
            self.block(src),
            self.operand_expr(factor)
        )
    }

    fn execute(&self, special: SpecialSlot, args: &[ExecArg]) -> String {
        let args: Vec<String> = args.iter().map(|a| self.exec_arg(a)).collect();
        let name = self
            .0
            .specials
            .get(special.index())
            .map_or("?", |s| s.name.as_str());
        format!("execute {name} {}", args.join(" "))
    }

    // ---- servers, persistence, output ---------------------------------------------------------

    fn put(&self, dst: &BlockRef, op: PutOp, value: &PutValue) -> String {
        let op = match op {
            PutOp::Replace => "=",
            PutOp::Accumulate => "+=",
            PutOp::Scale => "*=",
        };
        let value = match value {
            PutValue::Block(b) => self.block(b),
            PutValue::Scalar(e) => self.expr(*e),
        };
        format!("put {} {op} {value}", self.block(dst))
    }

    fn persistence(&self, op: &str, object: Persistent, label: StringSlot) -> String {
        format!("{op} {} {}", self.persistent(object), self.string(label))
    }

    fn print_item(&self, item: &PrintItem) -> String {
        match item {
            PrintItem::Str(s) => self.string(*s),
            PrintItem::IntVar(s) => self.int(*s).to_string(),
            PrintItem::Index(s) => self.index(*s).to_string(),
            PrintItem::ScalarVar(s) => self.scalar(*s).to_string(),
            PrintItem::IntExpr(e) => format!("int {}", self.expr(*e)),
            PrintItem::ScalarExpr(e) => format!("scalar {}", self.expr(*e)),
            PrintItem::Block(o) => self.operand(o),
            PrintItem::Array(a) => format!("array {}", self.array(*a)),
        }
    }

    fn selector(&self, array: ArraySlot, sel: &[Option<IndexSlot>]) -> String {
        let items: Vec<&str> = sel
            .iter()
            .map(|s| s.map_or("*", |i| self.index(i)))
            .collect();
        format!("{}[{}]", self.array(array), items.join(","))
    }

    fn persistent(&self, p: Persistent) -> &str {
        match p {
            Persistent::Scalar(s) => self.scalar(s),
            Persistent::Array(a) => self.array(a),
        }
    }
}

fn assign(op: ScalarAssign) -> &'static str {
    match op {
        ScalarAssign::Set => "=",
        ScalarAssign::Add => "+=",
        ScalarAssign::Sub => "-=",
        ScalarAssign::Mul => "*=",
    }
}

fn sign_text(s: Sign) -> &'static str {
    match s {
        Sign::Plus => "+",
        Sign::Minus => "-",
    }
}

fn cmp(c: CmpOp) -> &'static str {
    match c {
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
    }
}

fn perm(l: &Layout) -> String {
    if l.is_identity() {
        return String::new();
    }
    let p: Vec<String> = l
        .perm
        .iter()
        .map(|p| p.map_or("-".into(), |d| d.to_string()))
        .collect();
    format!("perm[{}]", p.join(","))
}
