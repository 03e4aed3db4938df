//! Semantic analysis and code generation: resolves names, checks every rule of SIAL-SPEC §2–§5
//! (and the Rec. rejections of §11), and emits bytecode as it goes. Code is emitted only into
//! per-body buffers; the program is assembled (and procedures that are never called dropped)
//! only when the whole unit checked cleanly.

mod blocks;
mod body;
mod expr;
mod put;
mod stmts;
mod symbols;

use crate::bytecode::{self as bc, FileSlot, Instr, Loc, Op, Pc, ProcId};
use crate::diag::Diagnostics;
use crate::load::Unit;
use crate::source::{SourceMap, Span};
use crate::syntax::ast;
use std::collections::HashMap;
use symbols::Symbols;

/// Subsegments per segment of a subindex's parent (SIAL-SPEC §3.1.4).
pub const SUBSEGMENTS: i32 = 4;

/// What the checker learns about a procedure while checking its body; call sites are checked
/// against it (procedures are declared before they are called, so it is complete by then).
pub(crate) struct ProcInfo {
    pub name: String,
    pub file: usize,
    pub span: Span,
    /// Indices used in the body (directly or through calls) that no loop in the body defines:
    /// every call site must define them.
    pub free_indices: Vec<(bc::IndexSlot, Span)>,
    /// Indices the body loops over (directly or through calls).
    pub loop_indices: Vec<(bc::IndexSlot, u32)>,
    /// First pardo, barrier and create (directly or through calls), by line, for the rules
    /// against nesting them in a pardo.
    pub pardo: Option<u32>,
    pub barrier: Option<(&'static str, u32)>,
    pub create: Option<(String, u32)>,
    pub callees: Vec<usize>,
    pub code: Vec<Instr>,
    pub checked: bool,
}

impl ProcInfo {
    fn new(name: String, file: usize, span: Span) -> ProcInfo {
        ProcInfo {
            name,
            file,
            span,
            free_indices: Vec::new(),
            loop_indices: Vec::new(),
            pardo: None,
            barrier: None,
            create: None,
            callees: Vec::new(),
            code: Vec::new(),
            checked: false,
        }
    }
}

pub(crate) struct Checker<'a> {
    unit: &'a Unit,
    sources: &'a SourceMap,
    diags: &'a mut Diagnostics,
    symbols: Symbols,
    program: bc::Program,
    procs: Vec<ProcInfo>,
    /// Declaration span and file of each array slot (for the unused-array warning).
    array_decl_spans: Vec<(Span, usize)>,
    strings: HashMap<String, bc::StringSlot>,
    file_slots: HashMap<crate::source::FileId, FileSlot>,
    /// Procedures called from the main program.
    main_callees: Vec<usize>,
    /// Procedures reachable from the main program (known after the whole unit is checked).
    reachable: Vec<bool>,
}

/// Checks a loaded unit; returns its bytecode when there were no errors.
pub fn check(unit: &Unit, sources: &SourceMap, diags: &mut Diagnostics) -> Option<bc::Program> {
    let main = unit.main();
    let main_ast = &unit.files[main].ast;
    let mut files = vec![sources.path(unit.files[main].id).display().to_string()];
    let mut file_slots = HashMap::from([(unit.files[main].id, FileSlot(0))]);
    for (i, f) in unit.files.iter().enumerate() {
        if i != main {
            file_slots.insert(f.id, FileSlot(files.len() as u32));
            files.push(sources.path(f.id).display().to_string());
        }
    }
    let mut c = Checker {
        unit,
        sources,
        diags,
        symbols: Symbols::default(),
        program: bc::Program {
            name: main_ast.program.name.text.clone(),
            files,
            indices: Vec::new(),
            ints: Vec::new(),
            scalars: Vec::new(),
            arrays: Vec::new(),
            specials: Vec::new(),
            strings: Vec::new(),
            exprs: Vec::new(),
            procs: Vec::new(),
            code: Vec::new(),
        },
        procs: Vec::new(),
        array_decl_spans: Vec::new(),
        strings: HashMap::new(),
        file_slots,
        main_callees: Vec::new(),
        reachable: Vec::new(),
    };
    for f in 0..unit.files.len() {
        c.check_file(f);
    }
    let main_code = c.main_body(main);
    c.warn_unused(main);
    if c.diags.has_errors() {
        return None;
    }
    Some(c.assemble(main_code))
}

impl Checker<'_> {
    /// Declarations, procedure bodies, and the layout rules of one file.
    fn check_file(&mut self, f: usize) {
        self.open_file(f);
        let ast = &self.unit.files[f].ast;
        let program = &ast.program;
        if program.end_name.text != program.name.text {
            self.diags.error(
                program.end_name.span,
                format!("mismatched names at beginning and end of program: `sial {}` ends with `endsial {}`", program.name.text, program.end_name.text),
            );
        }
        let is_main = f == self.unit.main();
        let mut first_stmt: Option<Span> = None;
        for item in &program.body {
            match item {
                ast::Item::Stmt(s) => {
                    if first_stmt.is_none() {
                        first_stmt = Some(s.span);
                        if !is_main {
                            self.diags.error(
                                s.span,
                                format!("imported file {} contains statements; an imported program may hold declarations only", self.file_path(f)),
                            );
                        }
                    }
                }
                ast::Item::Decl(d) => {
                    if let Some(stmt) = first_stmt {
                        self.diags.push(
                            crate::Diagnostic::error(d.span, format!("declaration of {} after the first statement; all declarations must come before the statements", d.name.text))
                                .with_note(format!("the first statement is at line {}", self.sources.line(stmt))),
                        );
                    }
                    self.declaration(f, d);
                    if let ast::DeclKind::Proc { body, end_name } = &d.kind {
                        self.procedure(f, d, body, end_name);
                    }
                }
            }
        }
    }

    fn loc(&self, span: Span) -> Loc {
        Loc {
            file: self
                .file_slots
                .get(&span.file)
                .copied()
                .unwrap_or(FileSlot(0)),
            line: self.sources.line(span),
        }
    }

    pub(crate) fn string(&mut self, s: &str) -> bc::StringSlot {
        if let Some(&slot) = self.strings.get(s) {
            return slot;
        }
        let slot = bc::StringSlot(self.program.strings.len() as u32);
        self.program.strings.push(s.to_string());
        self.strings.insert(s.to_string(), slot);
        slot
    }

    pub(crate) fn add_expr(&mut self, e: bc::Expr) -> bc::ExprId {
        self.program.exprs.push(e);
        bc::ExprId(self.program.exprs.len() as u32 - 1)
    }

    /// Warns about arrays and procedures of the main file that nothing uses; skipped when there
    /// are errors, since an erroneous statement may be the missing use.
    fn warn_unused(&mut self, main: usize) {
        let quiet = self.diags.has_errors();
        for (slot, a) in self.program.arrays.iter().enumerate() {
            if quiet {
                break;
            }
            let (span, file) = self.array_decl_spans[slot];
            if !a.used && file == main {
                let line = self.sources.line(span);
                self.diags.unused(
                    span,
                    format!(
                        "array {} at line {line} is never used; it gets no storage",
                        a.name
                    ),
                );
            }
        }
        let mut reachable = vec![false; self.procs.len()];
        let mut stack: Vec<usize> = self.main_callees.clone();
        while let Some(p) = stack.pop() {
            if !reachable[p] {
                reachable[p] = true;
                stack.extend(self.procs[p].callees.iter().copied());
            }
        }
        for (i, p) in self.procs.iter().enumerate() {
            if !reachable[i] && p.file == main && !quiet {
                let line = self.sources.line(p.span);
                self.diags.unused(
                    p.span,
                    format!(
                        "procedure {} at line {line} is never called; no code generated",
                        p.name
                    ),
                );
            }
        }
        self.reachable = reachable;
    }

    /// Lays out the main code, then each called procedure; resolves jumps and calls.
    fn assemble(mut self, main_code: Vec<Instr>) -> bc::Program {
        let mut code = main_code;
        let mut proc_ids: HashMap<usize, ProcId> = HashMap::new();
        for (i, p) in self.procs.iter_mut().enumerate() {
            if !self.reachable[i] {
                continue;
            }
            let base = code.len() as Pc;
            proc_ids.insert(i, ProcId(self.program.procs.len() as u32));
            self.program.procs.push(bc::Proc {
                name: p.name.clone(),
                entry: base,
            });
            for mut ins in std::mem::take(&mut p.code) {
                relocate(&mut ins.op, base);
                code.push(ins);
            }
        }
        for ins in &mut code {
            if let Op::Call { proc } = &mut ins.op {
                *proc = proc_ids.get(&proc.index()).copied().unwrap_or(*proc);
            }
        }
        self.program.code = code;
        self.program
    }
}

/// Moves a body's local addresses to where the body is placed.
fn relocate(op: &mut Op, base: Pc) {
    match op {
        Op::Jump { target } | Op::JumpUnless { target, .. } => *target += base,
        Op::DoStart { end, .. } | Op::DoInStart { end, .. } | Op::PardoStart { end, .. } => {
            *end += base
        }
        Op::LoopEnd { start } | Op::Exit { start } => *start += base,
        _ => {}
    }
}

#[cfg(test)]
mod tests;
