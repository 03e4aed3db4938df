//! Statement bodies: loops, procedures, control flow and the rules about where things may
//! appear (indices inside loops over them, no pardo or barrier inside a pardo, ...).

use super::Checker;
use super::symbols::Sym;
use crate::bytecode::{self as bc, IndexSlot, Instr, Op, Pc};
use crate::diag::Diagnostic;
use crate::source::Span;
use crate::syntax::ast::{self, Item, Stmt, StmtKind};

/// An open loop while its body is checked.
pub(super) struct Loop {
    pub indices: Vec<IndexSlot>,
    pub start: Pc,
    pub line: u32,
}

/// The state of one body being checked and emitted: the main program or one procedure.
pub(super) struct Body {
    pub code: Vec<Instr>,
    pub file: usize,
    /// The procedure (declaration order) when this is a procedure body.
    pub proc: Option<usize>,
    pub loops: Vec<Loop>,
    /// Line of the enclosing pardo.
    pub pardo: Option<u32>,
    pub callees: Vec<usize>,
    pub free_indices: Vec<(IndexSlot, Span)>,
    pub loop_indices: Vec<(IndexSlot, u32)>,
    pub pardo_seen: Option<u32>,
    pub barrier_seen: Option<(&'static str, u32)>,
    pub create_seen: Option<(String, u32)>,
}

impl Body {
    fn new(file: usize, proc: Option<usize>) -> Body {
        Body {
            code: Vec::new(),
            file,
            proc,
            loops: Vec::new(),
            pardo: None,
            callees: Vec::new(),
            free_indices: Vec::new(),
            loop_indices: Vec::new(),
            pardo_seen: None,
            barrier_seen: None,
            create_seen: None,
        }
    }

    pub fn here(&self) -> Pc {
        self.code.len() as Pc
    }

    pub fn defines(&self, slot: IndexSlot) -> Option<u32> {
        self.loops
            .iter()
            .rev()
            .find(|l| l.indices.contains(&slot))
            .map(|l| l.line)
    }
}

/// The `do i [in p]` line that opens a do loop, or the `enddo i [in p]` line that closes it.
#[derive(Clone, Copy)]
struct DoLine<'a> {
    index: &'a ast::Name,
    parent: Option<&'a ast::Name>,
    span: Span,
}

impl DoLine<'_> {
    /// The names as written: `i` or `i in p`.
    fn text(&self) -> String {
        match self.parent {
            Some(p) => format!("{} in {}", self.index.text, p.text),
            None => self.index.text.clone(),
        }
    }

    /// What the two lines of a loop must agree on.
    fn names(&self) -> (&str, Option<&str>) {
        (&self.index.text, self.parent.map(|p| p.text.as_str()))
    }
}

/// The `pardo i, j` line that opens a pardo (its pragma aside), or the `endpardo i, j` line
/// that closes it.
#[derive(Clone, Copy)]
struct PardoLine<'a> {
    indices: &'a [ast::Name],
    span: Span,
}

impl PardoLine<'_> {
    /// The index names, which the two lines of a pardo must agree on.
    fn names(&self) -> Vec<&str> {
        self.indices.iter().map(|n| n.text.as_str()).collect()
    }
}

impl Checker<'_> {
    pub(super) fn emit(&mut self, b: &mut Body, op: Op, span: Span) -> Pc {
        let loc = self.loc(span);
        b.code.push(Instr { op, loc });
        b.here() - 1
    }

    /// Checks and records a use of an index: it must be defined by an enclosing loop, or (in a
    /// procedure) at every call site.
    pub(super) fn use_index(&mut self, b: &mut Body, slot: IndexSlot, span: Span) -> bool {
        if b.defines(slot).is_some() {
            return true;
        }
        if b.proc.is_some() {
            if !b.free_indices.iter().any(|(s, _)| *s == slot) {
                b.free_indices.push((slot, span));
            }
            return true;
        }
        let name = self.program.indices[slot.index()].name.clone();
        self.diags.error(
            span,
            format!("index {name} not defined by enclosing do or pardo loop"),
        );
        false
    }

    pub(super) fn procedure(
        &mut self,
        f: usize,
        d: &ast::Decl,
        items: &[Item],
        end_name: &ast::Name,
    ) {
        if end_name.text != d.name.text {
            self.diags.error(
                end_name.span,
                format!("mismatched names at beginning and end of procedure: `proc {}` ends with `endproc {}`", d.name.text, end_name.text),
            );
        }
        let order = match self.symbols_lookup_own(f, &d.name.text) {
            Some(Sym::Proc(p)) if !self.procs[p].checked => Some(p),
            _ => None,
        };
        let mut b = Body::new(f, order);
        for item in items {
            match item {
                Item::Decl(inner) => {
                    let msg = if matches!(inner.kind, ast::DeclKind::Proc { .. }) {
                        "nested procedures are not allowed".to_string()
                    } else {
                        format!(
                            "declaration of {} inside procedure {}; declarations belong before the statements of the program",
                            inner.name.text, d.name.text
                        )
                    };
                    self.diags.error(inner.span, msg);
                }
                Item::Stmt(s) => self.stmt(&mut b, s),
            }
        }
        self.emit(&mut b, Op::Return, end_name.span);
        if let Some(p) = order {
            let info = &mut self.procs[p];
            info.code = b.code;
            info.free_indices = b.free_indices;
            info.loop_indices = b.loop_indices;
            info.pardo = b.pardo_seen;
            info.barrier = b.barrier_seen;
            info.create = b.create_seen;
            info.callees = b.callees;
            info.checked = true;
        }
    }

    /// The line of a procedure of file `f` named `name`, if one is declared anywhere in it.
    fn later_proc(&self, f: usize, name: &str) -> Option<u32> {
        self.unit.files[f]
            .ast
            .program
            .body
            .iter()
            .find_map(|item| match item {
                Item::Decl(d)
                    if d.name.text == name && matches!(d.kind, ast::DeclKind::Proc { .. }) =>
                {
                    Some(self.line(d.span))
                }
                _ => None,
            })
    }

    fn symbols_lookup_own(&self, f: usize, name: &str) -> Option<Sym> {
        self.symbols
            .all
            .iter()
            .rev()
            .find(|s| s.file == f && s.name == name)
            .map(|s| s.sym)
    }

    /// The statements of the main program.
    pub(super) fn main_body(&mut self, main: usize) -> Vec<Instr> {
        let program = &self.unit.files[main].ast.program;
        let mut b = Body::new(main, None);
        for item in &program.body {
            if let Item::Stmt(s) = item {
                self.stmt(&mut b, s);
            }
        }
        self.emit(&mut b, Op::End, program.end_name.span);
        self.main_callees = b.callees;
        b.code
    }

    fn items(&mut self, b: &mut Body, items: &[Item]) {
        for item in items {
            match item {
                Item::Decl(d) => {
                    let msg = if matches!(d.kind, ast::DeclKind::Proc { .. }) {
                        "nested procedures are not allowed".to_string()
                    } else {
                        format!(
                            "declaration of {} inside a statement; all declarations must come before the statements",
                            d.name.text
                        )
                    };
                    self.diags.error(d.span, msg);
                }
                Item::Stmt(s) => self.stmt(b, s),
            }
        }
    }

    fn line(&self, span: Span) -> u32 {
        self.sources.line(span)
    }

    pub(super) fn stmt(&mut self, b: &mut Body, s: &Stmt) {
        let span = s.span;
        match &s.kind {
            StmtKind::Call(name) => self.call(b, name, span),
            StmtKind::Return => {
                if b.proc.is_none() {
                    self.diags.error(span, "return outside a procedure");
                }
                self.emit(b, Op::Return, span);
            }
            StmtKind::Stop => {
                self.emit(b, Op::Stop, span);
            }
            StmtKind::Exit => match b.loops.last() {
                Some(l) => {
                    let start = l.start;
                    self.emit(b, Op::Exit { start }, span);
                }
                None => self.diags.error(span, "exit outside a do or pardo loop"),
            },
            StmtKind::SipBarrier | StmtKind::ServerBarrier => {
                let (kind, name) = match s.kind {
                    StmtKind::SipBarrier => (bc::BarrierKind::Sip, "sip_barrier"),
                    _ => (bc::BarrierKind::Server, "server_barrier"),
                };
                let line = self.line(span);
                if let Some(p) = b.pardo {
                    self.diags.error(
                        span,
                        format!("{name} at line {line} is enclosed in pardo statement at line {p}"),
                    );
                }
                b.barrier_seen.get_or_insert((name, line));
                self.emit(b, Op::Barrier { kind }, span);
            }
            StmtKind::Do {
                index,
                parent,
                body,
                end_index,
                end_parent,
                end_span,
            } => {
                let open = DoLine {
                    index,
                    parent: parent.as_ref(),
                    span,
                };
                let close = DoLine {
                    index: end_index,
                    parent: end_parent.as_ref(),
                    span: *end_span,
                };
                self.do_loop(b, open, body, close);
            }
            StmtKind::Pardo {
                indices,
                pragma,
                body,
                end_indices,
                end_span,
            } => {
                let open = PardoLine { indices, span };
                let close = PardoLine {
                    indices: end_indices,
                    span: *end_span,
                };
                self.pardo(b, open, pragma.as_ref(), body, close);
            }
            StmtKind::Section { body } => {
                self.emit(b, Op::SectionStart, span);
                for item in body {
                    match item {
                        Item::Stmt(st) if matches!(st.kind, StmtKind::Pardo { .. }) => {
                            self.stmt(b, st)
                        }
                        other => self.diags.error(
                            other.span(),
                            "illegal statement in section, must be a pardo",
                        ),
                    }
                }
                let end = Span {
                    start: span.end,
                    end: span.end,
                    file: span.file,
                };
                self.emit(b, Op::SectionEnd, end);
            }
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.relational(b, cond, false);
                let jump = self.emit(
                    b,
                    Op::JumpUnless {
                        cond: cond.unwrap_or(bc::ExprId(0)),
                        target: 0,
                    },
                    span,
                );
                self.items(b, then_body);
                if let Some(else_body) = else_body {
                    let skip = self.emit(b, Op::Jump { target: 0 }, span);
                    let here = b.here();
                    set_target(&mut b.code[jump as usize].op, here);
                    self.items(b, else_body);
                    let here = b.here();
                    set_target(&mut b.code[skip as usize].op, here);
                } else {
                    let here = b.here();
                    set_target(&mut b.code[jump as usize].op, here);
                }
            }
            StmtKind::Where(_) => {
                let msg = if b.loops.is_empty() {
                    "where clause outside a do or pardo loop"
                } else {
                    "where clause must come directly after the `do` or `pardo` line, before the other statements"
                };
                self.diags.error(span, msg);
            }
            StmtKind::GpuRegion { body } => {
                self.emit(b, Op::GpuOn, span);
                self.items(b, body);
                self.emit(b, Op::GpuOff, span);
            }
            _ => self.data_stmt(b, s),
        }
    }

    fn call(&mut self, b: &mut Body, name: &ast::Name, span: Span) {
        if self.symbols_lookup_own(b.file, &name.text).is_none()
            && let Some(decl_line) = self.later_proc(b.file, &name.text)
        {
            self.diags.error(name.span, format!("procedure {} is called before its declaration at line {decl_line}; declare procedures before calling them", name.text));
            return;
        }
        let p = match self.lookup(b.file, name) {
            Some(Sym::Proc(p)) => p,
            Some(_) => {
                self.diags.error(
                    name.span,
                    format!("{} is not declared as a procedure", name.text),
                );
                return;
            }
            None => return,
        };
        let line = self.line(span);
        if b.proc == Some(p) {
            // Recursion: the body's own summary is being built; nothing new to learn from it.
        } else if !self.procs[p].checked {
            let decl_line = self.line(self.procs[p].span);
            self.diags.error(name.span, format!("procedure {} is called before its declaration at line {decl_line}; declare procedures before calling them", name.text));
            return;
        } else {
            let callee = &self.procs[p];
            let free = callee.free_indices.clone();
            let loops = callee.loop_indices.clone();
            let (pardo, barrier, create) = (callee.pardo, callee.barrier, callee.create.clone());
            for (slot, use_span) in free {
                if b.defines(slot).is_some() {
                    continue;
                }
                if b.proc.is_some() {
                    if !b.free_indices.iter().any(|(s, _)| *s == slot) {
                        b.free_indices.push((slot, span));
                    }
                } else {
                    let idx = self.program.indices[slot.index()].name.clone();
                    self.diags.push(
                        Diagnostic::error(
                            span,
                            format!(
                                "index {idx} not defined at call site call {} at line {line}",
                                name.text
                            ),
                        )
                        .with_note(format!(
                            "procedure {} uses {idx} at line {}",
                            name.text,
                            self.line(use_span)
                        )),
                    );
                }
            }
            for (slot, loop_line) in &loops {
                if let Some(outer) = b.defines(*slot) {
                    let idx = self.program.indices[slot.index()].name.clone();
                    self.diags.error(
                        span,
                        format!("procedure {} loops over index {idx} (line {loop_line}), which already has a value here from the loop at line {outer}", name.text),
                    );
                }
            }
            if let Some(p_line) = b.pardo {
                if let Some(inner) = pardo {
                    self.diags.error(span, format!("pardo at line {inner} is enclosed in pardo statement at line {p_line} (through call {})", name.text));
                }
                if let Some((what, l)) = barrier {
                    self.diags.error(span, format!("{what} at line {l} is enclosed in pardo statement at line {p_line} (through call {})", name.text));
                }
                if let Some((array, l)) = &create {
                    self.diags.error(span, format!("create {array} at line {l} is inside pardo at line {p_line} (through call {})", name.text));
                }
            }
            if b.pardo_seen.is_none() {
                b.pardo_seen = pardo;
            }
            if b.barrier_seen.is_none() {
                b.barrier_seen = barrier;
            }
            if b.create_seen.is_none() {
                b.create_seen = create;
            }
            for l in loops {
                if !b.loop_indices.iter().any(|(s, _)| *s == l.0) {
                    b.loop_indices.push(l);
                }
            }
        }
        if !b.callees.contains(&p) {
            b.callees.push(p);
        }
        self.emit(
            b,
            Op::Call {
                proc: bc::ProcId(p as u32),
            },
            span,
        );
    }

    /// Resolves a loop index; reports a nested loop over the same index.
    fn loop_index(
        &mut self,
        b: &mut Body,
        name: &ast::Name,
        want_sub: bool,
        what: &str,
    ) -> Option<IndexSlot> {
        let slot = match self.lookup(b.file, name) {
            Some(Sym::Index(s)) => s,
            Some(_) => {
                self.diags
                    .error(name.span, format!("{} is not an index", name.text));
                return None;
            }
            None => return None,
        };
        let is_sub = self.program.indices[slot.index()].kind == bc::IndexKind::Sub;
        if is_sub && !want_sub {
            self.diags.error(
                name.span,
                format!(
                    "{} is a subindex; loop over it with `do {} in <parent>`",
                    name.text, name.text
                ),
            );
            return None;
        }
        if !is_sub && want_sub {
            self.diags.error(
                name.span,
                format!(
                    "do loop sub index must be declared as subindex type: {} is not a subindex",
                    name.text
                ),
            );
            return None;
        }
        if let Some(outer) = b.defines(slot) {
            self.diags.error(
                name.span,
                format!(
                    "{what} over index {} is nested inside a loop over {} (line {outer})",
                    name.text, name.text
                ),
            );
            return None;
        }
        Some(slot)
    }

    /// Leading where clauses of a loop body, and the rest of the body.
    fn wheres<'b>(&mut self, b: &mut Body, items: &'b [Item]) -> (Vec<bc::ExprId>, &'b [Item]) {
        let mut exprs = Vec::new();
        let mut rest = items;
        while let Some((
            Item::Stmt(Stmt {
                kind: StmtKind::Where(rel),
                ..
            }),
            tail,
        )) = rest.split_first()
        {
            if let Some(e) = self.relational(b, rel, true) {
                exprs.push(e);
            }
            rest = tail;
        }
        (exprs, rest)
    }

    fn do_loop(&mut self, b: &mut Body, open: DoLine, items: &[Item], close: DoLine) {
        let DoLine {
            index,
            parent,
            span,
        } = open;
        let line = self.line(span);
        let slot = self.loop_index(b, index, parent.is_some(), "do loop");
        let mut parent_slot = None;
        if let Some(p) = parent {
            if let Some(Sym::Index(ps)) = self.lookup(b.file, p) {
                self.use_index(b, ps, p.span);
                if let Some(s) = slot
                    && self.program.indices[s.index()].parent != Some(ps)
                {
                    self.diags.error(p.span, format!("do loop parent index type must match type of declared parent index: {} is not declared as a subindex of {}", index.text, p.text));
                }
                parent_slot = Some(ps);
            } else {
                self.diags
                    .error(p.span, format!("{} is not an index", p.text));
            }
        }
        if close.names() != open.names() {
            self.diags.error(close.span, format!("unmatched indices at beginning and end of do loop: `do {}` (line {line}) ends with `enddo {}`", open.text(), close.text()));
        }
        let start = b.here();
        let op = match parent_slot {
            Some(parent) => Op::DoInStart {
                index: slot.unwrap_or(IndexSlot(0)),
                parent,
                wheres: Vec::new(),
                end: 0,
            },
            None => Op::DoStart {
                index: slot.unwrap_or(IndexSlot(0)),
                wheres: Vec::new(),
                end: 0,
            },
        };
        self.emit(b, op, span);
        let indices: Vec<IndexSlot> = slot.into_iter().collect();
        for &s in &indices {
            if !b.loop_indices.iter().any(|(x, _)| *x == s) {
                b.loop_indices.push((s, line));
            }
        }
        b.loops.push(Loop {
            indices,
            start,
            line,
        });
        let (wheres, rest) = self.wheres(b, items);
        self.items(b, rest);
        b.loops.pop();
        let end = self.emit(b, Op::LoopEnd { start }, close.span);
        match &mut b.code[start as usize].op {
            Op::DoStart {
                wheres: w, end: e, ..
            }
            | Op::DoInStart {
                wheres: w, end: e, ..
            } => {
                *w = wheres;
                *e = end;
            }
            _ => {}
        }
    }

    fn pardo(
        &mut self,
        b: &mut Body,
        open: PardoLine,
        pragma: Option<&ast::StrLit>,
        items: &[Item],
        close: PardoLine,
    ) {
        let PardoLine { indices, span } = open;
        let line = self.line(span);
        if let Some(outer) = b.pardo {
            self.diags.error(
                span,
                format!("pardo at line {line} is enclosed in pardo statement at line {outer}"),
            );
        }
        b.pardo_seen.get_or_insert(line);
        if indices.is_empty() {
            self.diags.error(
                span,
                "missing indices in pardo statement: name the indices it runs over (`pardo i, j`)",
            );
        }
        let mut slots = Vec::new();
        for (k, name) in indices.iter().enumerate() {
            if indices[..k].iter().any(|n| n.text == name.text) {
                self.diags.error(
                    name.span,
                    format!("index {} appears twice in the pardo", name.text),
                );
                continue;
            }
            if let Some(s) = self.loop_index(b, name, false, "pardo") {
                slots.push(s);
            }
        }
        if close.names() != open.names() {
            self.diags.error(
                close.span,
                format!("unmatched indices at beginning and end of pardo: `pardo {}` (line {line}) ends with `endpardo {}`", open.names().join(", "), close.names().join(", ")),
            );
        }
        let pragma = pragma.map(|p| self.string(&p.text));
        let start = b.here();
        self.emit(
            b,
            Op::PardoStart {
                indices: slots.clone(),
                wheres: Vec::new(),
                pragma,
                end: 0,
            },
            span,
        );
        for &s in &slots {
            if !b.loop_indices.iter().any(|(x, _)| *x == s) {
                b.loop_indices.push((s, line));
            }
        }
        let outer_pardo = b.pardo.replace(line);
        b.loops.push(Loop {
            indices: slots,
            start,
            line,
        });
        let (wheres, rest) = self.wheres(b, items);
        self.items(b, rest);
        b.loops.pop();
        b.pardo = outer_pardo;
        let end = self.emit(b, Op::LoopEnd { start }, close.span);
        if let Op::PardoStart {
            wheres: w, end: e, ..
        } = &mut b.code[start as usize].op
        {
            *w = wheres;
            *e = end;
        }
    }
}

fn set_target(op: &mut Op, here: Pc) {
    if let Op::Jump { target } | Op::JumpUnless { target, .. } = op {
        *target = here;
    }
}
