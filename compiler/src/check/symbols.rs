//! Declarations: the symbol tables of every file, visibility through imports, name lookup,
//! and the checks on each declaration (ranges, modifiers, signatures).

use super::Checker;
use crate::bytecode::{self as bc, ArraySlot, Bound, IndexSlot, IntSlot, ScalarSlot, SpecialSlot};
use crate::diag::Diagnostic;
use crate::source::Span;
use crate::syntax::ast::{self, DeclKind, Literal, Modifier, RangeBound};
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sym {
    Program,
    Index(IndexSlot),
    Int(IntSlot),
    Scalar(ScalarSlot),
    Array(ArraySlot),
    /// A procedure, by its declaration order in the whole unit.
    Proc(usize),
    Special(SpecialSlot),
    /// A declaration that had an error: its name is known, so later uses are not reported as
    /// undeclared, and they are not checked further (every error has been said once).
    Poisoned,
}

#[derive(Clone, Debug)]
pub struct Symbol {
    pub name: String,
    pub sym: Sym,
    /// Index of the declaring file in the unit.
    pub file: usize,
    pub span: Span,
}

pub type SymId = usize;

#[derive(Clone, Copy, Debug)]
enum Visible {
    One(SymId),
    Ambiguous(SymId, SymId),
}

/// Symbol tables of all files of a unit.
#[derive(Default)]
pub struct Symbols {
    pub all: Vec<Symbol>,
    /// Per file: names it declares itself.
    own: Vec<HashMap<String, SymId>>,
    /// Per file: names visible through its imports (transitively).
    imported: Vec<HashMap<String, Visible>>,
    /// Per file: the `sial` name of every program it can see (itself and its imports).
    programs: Vec<HashMap<String, usize>>,
}

impl Symbols {
    pub fn get(&self, id: SymId) -> &Symbol {
        &self.all[id]
    }
}

/// The modifiers that change what a declaration declares (`sparse` is only reported).
#[derive(Clone, Copy)]
struct Modifiers {
    predefined: Option<Span>,
    contiguous: Option<Span>,
}

impl Checker<'_> {
    /// Sets up the tables of file `f`, whose imports have already been declared.
    pub(super) fn open_file(&mut self, f: usize) {
        let mut imported: HashMap<String, Visible> = HashMap::new();
        let mut programs = HashMap::new();
        for &i in &self.unit.files[f].imports {
            let from_import = self.symbols.own[i]
                .iter()
                .map(|(k, &v)| (k.clone(), Visible::One(v)));
            let transitive = self.symbols.imported[i]
                .iter()
                .map(|(k, &v)| (k.clone(), v));
            for (name, vis) in from_import.chain(transitive).collect::<Vec<_>>() {
                let merged = match (imported.get(&name).copied(), vis) {
                    (None, v) => v,
                    (Some(Visible::One(a)), Visible::One(b)) if a == b => Visible::One(a),
                    (Some(Visible::One(a)), Visible::One(b)) => Visible::Ambiguous(a, b),
                    (Some(amb @ Visible::Ambiguous(..)), _) => amb,
                    (Some(Visible::One(a)), Visible::Ambiguous(b, _)) if a == b => vis,
                    (Some(Visible::One(a)), Visible::Ambiguous(b, _)) => Visible::Ambiguous(a, b),
                };
                imported.insert(name, merged);
            }
            for (k, &v) in &self.symbols.programs[i] {
                programs.insert(k.clone(), v);
            }
        }
        programs.insert(self.unit.files[f].ast.program.name.text.clone(), f);
        self.symbols.own.push(HashMap::new());
        self.symbols.imported.push(imported);
        self.symbols.programs.push(programs);
        let name = self.unit.files[f].ast.program.name.clone();
        self.declare(f, &name, Sym::Program);
    }

    /// Enters a name in file `f`'s table; reports a duplicate when the name is already visible.
    pub(super) fn declare(&mut self, f: usize, name: &ast::Name, sym: Sym) -> bool {
        if name.text.contains('.') {
            self.diags.error(name.span, format!("`{}`: declared names cannot contain `.` (it separates a program name from a name)", name.text));
            return false;
        }
        let previous = self.symbols.own[f].get(&name.text).copied().or_else(|| {
            match self.symbols.imported[f].get(&name.text) {
                Some(Visible::One(id)) | Some(Visible::Ambiguous(id, _)) => Some(*id),
                None => None,
            }
        });
        if let Some(prev) = previous {
            let p = self.symbols.get(prev);
            let line = self.sources.line(p.span);
            let path = self.sources.path(p.span.file).display().to_string();
            let what = if p.sym == Sym::Program {
                "the name of the program declared"
            } else {
                "already declared"
            };
            self.diags.push(
                Diagnostic::error(name.span, format!("duplicate declaration of {}", name.text))
                    .with_note(format!("{} is {what} at {}:{}", name.text, path, line)),
            );
            return false;
        }
        self.symbols.all.push(Symbol {
            name: name.text.clone(),
            sym,
            file: f,
            span: name.span,
        });
        let id = self.symbols.all.len() - 1;
        self.symbols.own[f].insert(name.text.clone(), id);
        true
    }

    /// Looks a name up from file `f`: its own declarations first, then its imports; `prog.x`
    /// looks in program `prog`. Reports and returns `None` when not found or ambiguous.
    pub(super) fn lookup(&mut self, f: usize, name: &ast::Name) -> Option<Sym> {
        if let Some((prog, rest)) = name.text.split_once('.') {
            let Some(&pf) = self.symbols.programs[f].get(prog) else {
                self.diags.error(
                    name.span,
                    format!("{}: no program named {prog} is imported", name.text),
                );
                return None;
            };
            return match self.symbols.own[pf].get(rest) {
                Some(&id) => {
                    let sym = self.symbols.get(id).sym;
                    if sym == Sym::Poisoned {
                        return None;
                    }
                    if let Sym::Array(a) = sym {
                        self.program.arrays[a.index()].used = true;
                    }
                    Some(sym)
                }
                None => {
                    self.diags.error(
                        name.span,
                        format!("{rest} is not declared in program {prog}"),
                    );
                    None
                }
            };
        }
        let found = self.symbols.own[f]
            .get(&name.text)
            .copied()
            .map(Visible::One)
            .or_else(|| self.symbols.imported[f].get(&name.text).copied());
        match found {
            Some(Visible::One(id)) => {
                let sym = self.symbols.get(id).sym;
                if sym == Sym::Poisoned {
                    return None;
                }
                // Any mention in a statement counts as a use, even in a statement with an error,
                // so that an error is not followed by a misleading "never used" warning.
                if let Sym::Array(a) = sym {
                    self.program.arrays[a.index()].used = true;
                }
                Some(sym)
            }
            Some(Visible::Ambiguous(a, b)) => {
                let fa = self.file_path(self.symbols.get(a).file);
                let fb = self.file_path(self.symbols.get(b).file);
                self.diags.error(
                    name.span,
                    format!(
                        "{} multiply defined in {fa} and {fb}; use a qualified name (program.{})",
                        name.text, name.text
                    ),
                );
                None
            }
            None => {
                self.diags
                    .error(name.span, format!("{} not declared", name.text));
                None
            }
        }
    }

    /// Like [`Self::lookup`] for an unqualified name, without reporting anything.
    fn peek(&self, f: usize, name: &str) -> Option<Sym> {
        if name.contains('.') {
            return None;
        }
        match self.symbols.own[f]
            .get(name)
            .copied()
            .map(Visible::One)
            .or_else(|| self.symbols.imported[f].get(name).copied())
        {
            Some(Visible::One(id)) => Some(self.symbols.get(id).sym),
            _ => None,
        }
    }

    /// The line of a declaration of `name` anywhere in file `f` (used when a name is used
    /// before its declaration).
    pub(super) fn declared_later(&self, f: usize, name: &str) -> Option<u32> {
        self.unit.files[f]
            .ast
            .program
            .body
            .iter()
            .find_map(|item| match item {
                ast::Item::Decl(d) if d.name.text == name => Some(self.sources.line(d.span)),
                _ => None,
            })
    }

    /// The name of an index in the program's tables: qualified (`defs.mu`) when it is declared
    /// in an imported file, as ACES4 writes it, so that `print mu` shows the same text.
    fn index_name(&self, f: usize, name: &str) -> String {
        if f == self.unit.main() {
            name.to_string()
        } else {
            format!("{}.{name}", self.unit.files[f].ast.program.name.text)
        }
    }

    pub(super) fn file_path(&self, f: usize) -> String {
        self.sources
            .path(self.unit.files[f].id)
            .display()
            .to_string()
    }

    /// Checks a declaration and adds it to the tables.
    pub(super) fn declaration(&mut self, f: usize, d: &ast::Decl) {
        let modifiers = self.modifiers(d);
        match &d.kind {
            DeclKind::Index { kind, lo, hi } => {
                let lo_b = self.range_bound(f, lo, *kind);
                let hi_b = self.range_bound(f, hi, *kind);
                self.check_range(*kind, lo, hi);
                let slot = IndexSlot(self.program.indices.len() as u32);
                if self.declare(f, &d.name, Sym::Index(slot)) {
                    self.program.indices.push(bc::Index {
                        name: self.index_name(f, &d.name.text),
                        kind: index_kind(*kind),
                        lo: lo_b.unwrap_or(Bound::Literal(1)),
                        hi: hi_b.unwrap_or(Bound::Literal(1)),
                        parent: None,
                    });
                }
            }
            DeclKind::Subindex { parent } => {
                let parent_slot = self.subindex_parent(f, parent);
                let slot = IndexSlot(self.program.indices.len() as u32);
                if self.declare(f, &d.name, Sym::Index(slot)) {
                    self.program.indices.push(bc::Index {
                        name: self.index_name(f, &d.name.text),
                        kind: bc::IndexKind::Sub,
                        lo: Bound::Literal(1),
                        hi: Bound::Literal(super::SUBSEGMENTS),
                        parent: Some(parent_slot.unwrap_or(IndexSlot(0))),
                    });
                }
            }
            DeclKind::Scalar { init } => {
                self.scalar_declaration(f, d, init.as_ref(), modifiers.predefined)
            }
            DeclKind::Int { init } => {
                self.int_declaration(f, d, init.as_ref(), modifiers.predefined)
            }
            DeclKind::Array { kind, dims } => self.array_declaration(f, d, *kind, dims, modifiers),
            DeclKind::Proc { .. } => {
                let order = self.procs.len();
                if self.declare(f, &d.name, Sym::Proc(order)) {
                    self.procs
                        .push(super::ProcInfo::new(d.name.text.clone(), f, d.span));
                }
            }
            DeclKind::Special { signature } => self.special_declaration(f, d, signature.as_ref()),
        }
    }

    /// The modifiers of a declaration; `sparse`, which nothing implements, is reported.
    fn modifiers(&mut self, d: &ast::Decl) -> Modifiers {
        let sparse = d.modifiers.iter().find(|(m, _)| *m == Modifier::Sparse);
        if let Some((_, span)) = sparse {
            self.diags.error(
                *span,
                "sparse arrays are not supported (the `sparse` modifier has no implementation)",
            );
        }
        let find = |wanted: Modifier| {
            d.modifiers
                .iter()
                .find(|(m, _)| *m == wanted)
                .map(|(_, s)| *s)
        };
        Modifiers {
            predefined: find(Modifier::Predefined),
            contiguous: find(Modifier::Contiguous),
        }
    }

    /// The parent of a subindex: an index that is not a subindex itself.
    fn subindex_parent(&mut self, f: usize, parent: &ast::Name) -> Option<IndexSlot> {
        match self.lookup(f, parent) {
            Some(Sym::Index(p)) if self.program.indices[p.index()].kind != bc::IndexKind::Sub => {
                Some(p)
            }
            Some(_) => {
                self.diags.error(
                    parent.span,
                    format!(
                        "{} must be declared as an index type (the parent of a subindex)",
                        parent.text
                    ),
                );
                None
            }
            None => None,
        }
    }

    fn scalar_declaration(
        &mut self,
        f: usize,
        d: &ast::Decl,
        init: Option<&ast::InitLiteral>,
        predefined: Option<Span>,
    ) {
        let value = init
            .and_then(|i| self.init_value(i, true, &d.name))
            .map(|v| match v {
                Literal::Double(x) => x,
                Literal::Int(n) => n as f64,
            });
        if let (Some(_), Some(i)) = (predefined, init) {
            self.diags.warning(i.span, format!("the initial value of predefined scalar {} is ignored: its value comes from setup data", d.name.text));
        }
        let slot = ScalarSlot(self.program.scalars.len() as u32);
        if self.declare(f, &d.name, Sym::Scalar(slot)) {
            self.program.scalars.push(bc::ScalarVar {
                name: d.name.text.clone(),
                init: value.unwrap_or(0.0),
                predefined: predefined.is_some(),
            });
        }
    }

    fn int_declaration(
        &mut self,
        f: usize,
        d: &ast::Decl,
        init: Option<&ast::InitLiteral>,
        predefined: Option<Span>,
    ) {
        let value = init
            .and_then(|i| self.init_value(i, false, &d.name))
            .map(|v| match v {
                Literal::Int(n) => n as i32,
                Literal::Double(x) => x as i32,
            });
        if let (Some(_), Some(i)) = (predefined, init) {
            self.diags.warning(i.span, format!("the initial value of predefined int {} is ignored: its value comes from setup data", d.name.text));
        }
        let slot = IntSlot(self.program.ints.len() as u32);
        if self.declare(f, &d.name, Sym::Int(slot)) {
            self.program.ints.push(bc::IntVar {
                name: d.name.text.clone(),
                init: value.unwrap_or(0),
                predefined: predefined.is_some(),
            });
        }
    }

    fn special_declaration(&mut self, f: usize, d: &ast::Decl, signature: Option<&ast::Name>) {
        let mut intents = Vec::new();
        let mut ok = true;
        if let Some(sig) = signature {
            for c in sig.text.chars() {
                match c {
                    'r' => intents.push(bc::Intent::Read),
                    'w' => intents.push(bc::Intent::Write),
                    'u' => intents.push(bc::Intent::Update),
                    other => {
                        self.diags.error(sig.span, format!("illegal character {other} in special instruction signature {} (use r, w or u per argument)", sig.text));
                        ok = false;
                        break;
                    }
                }
            }
            if intents.len() > bc::MAX_RANK {
                self.diags.error(
                    sig.span,
                    format!(
                        "special {} declares {} arguments; at most {} are supported",
                        d.name.text,
                        intents.len(),
                        bc::MAX_RANK
                    ),
                );
            }
        }
        if !ok {
            self.declare(f, &d.name, Sym::Poisoned);
            return;
        }
        let slot = SpecialSlot(self.program.specials.len() as u32);
        if self.declare(f, &d.name, Sym::Special(slot)) {
            self.program.specials.push(bc::Special {
                name: d.name.text.clone(),
                intents,
            });
        }
    }

    fn array_declaration(
        &mut self,
        f: usize,
        d: &ast::Decl,
        kind: ast::ArrayKind,
        dims: &[ast::Name],
        modifiers: Modifiers,
    ) {
        use ast::ArrayKind as K;
        let Modifiers {
            predefined,
            contiguous,
        } = modifiers;
        if let Some(span) = predefined
            && kind != K::Static
        {
            self.diags.error(span, format!("predefined applies only to static arrays, ints and scalars, not to {} array {}", kind.keyword(), d.name.text));
        }
        if let Some(span) = contiguous
            && !matches!(kind, K::Local | K::Static)
        {
            self.diags.error(
                span,
                format!(
                    "contiguous applies only to local arrays, not to {} array {}",
                    kind.keyword(),
                    d.name.text
                ),
            );
        }
        if dims.len() > bc::MAX_RANK {
            self.diags.error(
                d.name.span,
                format!(
                    "array {} has {} dimensions; at most {} are supported",
                    d.name.text,
                    dims.len(),
                    bc::MAX_RANK
                ),
            );
        }
        let mut slots = Vec::new();
        let mut ok = true;
        for dim in dims {
            match self.peek(f, &dim.text) {
                Some(Sym::Index(s)) => slots.push(s),
                Some(_) => {
                    ok = false;
                    self.diags.error(
                        dim.span,
                        format!(
                            "{} must be a previously declared index or subindex",
                            dim.text
                        ),
                    );
                }
                None => {
                    ok = false;
                    match self.declared_later(f, &dim.text) {
                        Some(line) => self.diags.error(
                            dim.span,
                            format!("{} must be a previously declared index or subindex (it is declared later, at line {line})", dim.text),
                        ),
                        None => {
                            self.lookup(f, dim);
                        }
                    }
                }
            }
        }
        if !ok {
            self.declare(f, &d.name, Sym::Poisoned);
            return;
        }
        let kind = match kind {
            K::Static => bc::ArrayKind::Static,
            K::Temp => bc::ArrayKind::Temp,
            K::Local if contiguous.is_some() => bc::ArrayKind::ContiguousLocal,
            K::Local => bc::ArrayKind::Local,
            K::Distributed => bc::ArrayKind::Distributed,
            K::Served => bc::ArrayKind::Served,
        };
        let slot = ArraySlot(self.program.arrays.len() as u32);
        if self.declare(f, &d.name, Sym::Array(slot)) {
            self.program.arrays.push(bc::Array {
                name: d.name.text.clone(),
                kind,
                dims: slots,
                predefined: predefined.is_some() && kind == bc::ArrayKind::Static,
                used: false,
            });
            self.array_decl_spans.push((d.name.span, f));
        }
    }

    fn init_value(
        &mut self,
        init: &ast::InitLiteral,
        scalar: bool,
        name: &ast::Name,
    ) -> Option<Literal> {
        let what = if scalar { "scalar" } else { "int" };
        if init.negative {
            self.diags.error(init.span, format!("the initial value of {what} {} must be an unsigned literal; assign a negative value in a statement", name.text));
            return None;
        }
        match (&init.value, scalar) {
            (Literal::Double(_), true) | (Literal::Int(_), false) => Some(init.value.clone()),
            (Literal::Int(n), true) => {
                self.diags.error(
                    init.span,
                    format!(
                        "scalar {} needs a double literal as initial value, e.g. {n}.0",
                        name.text
                    ),
                );
                None
            }
            (Literal::Double(_), false) => {
                self.diags.error(
                    init.span,
                    format!(
                        "int {} needs an integer literal as initial value",
                        name.text
                    ),
                );
                None
            }
        }
    }

    fn range_bound(&mut self, f: usize, b: &RangeBound, kind: ast::IndexKind) -> Option<Bound> {
        match b {
            RangeBound::Int(v, span) => {
                if kind != ast::IndexKind::Simple && *v < 0 {
                    self.diags.error(
                        *span,
                        "negative range only allowed for simple indices (declared with `index`)",
                    );
                } else if kind != ast::IndexKind::Simple && *v == 0 {
                    self.diags.error(
                        *span,
                        "index range must be at least 1 (unless the index is simple)",
                    );
                }
                Some(Bound::Literal(*v as i32))
            }
            RangeBound::Name(n) => match self.lookup(f, n) {
                Some(Sym::Int(s)) if self.program.ints[s.index()].predefined => {
                    Some(Bound::Predefined(s))
                }
                Some(_) => {
                    self.diags.error(
                        n.span,
                        format!(
                            "{} must be a predefined int to bound an index range",
                            n.text
                        ),
                    );
                    None
                }
                None => None,
            },
        }
    }

    fn check_range(&mut self, kind: ast::IndexKind, lo: &RangeBound, hi: &RangeBound) {
        let span = lo.span().to(hi.span());
        match (lo, hi) {
            (RangeBound::Int(a, _), RangeBound::Int(b, _)) if a > b => {
                let min = if kind == ast::IndexKind::Simple {
                    ""
                } else {
                    " and at least 1"
                };
                self.diags.error(span, format!("invalid range {a}:{b}: the lower bound must not exceed the upper bound{min}"));
            }
            (RangeBound::Name(a), RangeBound::Name(b)) if known_greater(&a.text, &b.text) => {
                self.diags.error(
                    span,
                    format!(
                        "invalid range {}:{}: {} is always greater than {}",
                        a.text, b.text, a.text, b.text
                    ),
                );
            }
            _ => {}
        }
    }
}

pub(super) fn index_kind(k: ast::IndexKind) -> bc::IndexKind {
    match k {
        ast::IndexKind::Ao => bc::IndexKind::Ao,
        ast::IndexKind::Mo => bc::IndexKind::Mo,
        ast::IndexKind::MoA => bc::IndexKind::MoA,
        ast::IndexKind::MoB => bc::IndexKind::MoB,
        ast::IndexKind::Simple => bc::IndexKind::Simple,
        ast::IndexKind::La => bc::IndexKind::La,
    }
}

/// The ordering the ACES conventions guarantee between the standard range constants
/// (SIAL-SPEC §3.1.1): `bocc <= eocc < bvirt <= evirt`, the same for the `a`/`b` spin variants,
/// and `norb` above everything.
fn known_greater(a: &str, b: &str) -> bool {
    if a == b {
        return false;
    }
    if a == "norb" {
        return rank(b).is_some();
    }
    match (rank(a), rank(b)) {
        (Some((fa, ra)), Some((fb, rb))) if fa == fb => {
            // Strictly greater when a lies above b across the strict eocc < bvirt step.
            ra > rb && ra >= 2 && rb <= 1
        }
        _ => false,
    }
}

/// (spin family, position in bocc/eocc/bvirt/evirt).
fn rank(name: &str) -> Option<(&'static str, u8)> {
    const NAMES: [(&str, &str, u8); 12] = [
        ("bocc", "", 0),
        ("eocc", "", 1),
        ("bvirt", "", 2),
        ("evirt", "", 3),
        ("baocc", "a", 0),
        ("eaocc", "a", 1),
        ("bavirt", "a", 2),
        ("eavirt", "a", 3),
        ("bbocc", "b", 0),
        ("ebocc", "b", 1),
        ("bbvirt", "b", 2),
        ("ebvirt", "b", 3),
    ];
    NAMES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, f, r)| (*f, *r))
}

#[cfg(test)]
mod tests {
    use super::known_greater;

    #[test]
    fn aces_range_constants() {
        assert!(known_greater("bvirt", "eocc"));
        assert!(known_greater("evirt", "bocc"));
        assert!(known_greater("norb", "evirt"));
        assert!(!known_greater("eocc", "bocc"));
        assert!(!known_greater("evirt", "bvirt"));
        assert!(!known_greater("bocc", "evirt"));
        assert!(known_greater("eavirt", "baocc"));
        assert!(!known_greater("eavirt", "bbocc"));
        assert!(!known_greater("x", "y"));
    }
}
