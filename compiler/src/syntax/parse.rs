//! pest parse tree -> AST. Literal range errors are reported here (the grammar cannot).

use super::ast::*;
use super::errors::syntax_error;
use crate::diag::Diagnostic;
use crate::source::{FileId, Span};
use pest::Parser as _;
use pest::iterators::{Pair, Pairs};
use pest::pratt_parser::{Assoc, Op, PrattParser};
use std::sync::LazyLock;

#[derive(pest_derive::Parser)]
#[grammar = "../../grammar/sial.pest"]
pub struct SialParser;

type P<'a> = Pair<'a, Rule>;

/// Operator precedence of SIAL-SPEC §2.1, loosest first.
static PRATT: LazyLock<PrattParser<Rule>> = LazyLock::new(|| {
    PrattParser::new()
        .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
        .op(Op::infix(Rule::mul, Assoc::Left)
            | Op::infix(Rule::div, Assoc::Left)
            | Op::infix(Rule::tensor, Assoc::Left))
        .op(Op::infix(Rule::pow, Assoc::Left))
        .op(Op::prefix(Rule::cast_op))
        .op(Op::prefix(Rule::neg) | Op::prefix(Rule::kw_sqrt))
});

/// Parses one file. On a syntax error returns that error alone; otherwise the AST and any
/// literal errors found while building it.
pub fn parse_file(file: FileId, text: &str) -> (Option<File>, Vec<Diagnostic>) {
    if let Some(d) = super::lexical::check(file, text) {
        return (None, vec![d]);
    }
    match SialParser::parse(Rule::file, text) {
        Err(e) => {
            // Parse again, collecting the tokens (not only the rules) expected at the point of
            // failure; this costs time, so only a failed parse pays it.
            pest::set_error_detail(true);
            let detailed = SialParser::parse(Rule::file, text).err();
            pest::set_error_detail(false);
            let attempts = detailed.as_ref().and_then(|d| d.parse_attempts()).map(|a| {
                let tokens = a.expected_tokens().iter().map(|t| t.to_string()).collect();
                (a.max_position, tokens)
            });
            (None, vec![syntax_error(file, text, &e, attempts)])
        }
        Ok(mut pairs) => {
            let mut b = Builder {
                file,
                diags: Vec::new(),
            };
            let ast = pairs.next().map(|p| b.file(p));
            (ast, b.diags)
        }
    }
}

struct Builder {
    file: FileId,
    diags: Vec<Diagnostic>,
}

fn inner(p: P) -> pest::iterators::Pairs<Rule> {
    p.into_inner()
}

impl Builder {
    fn span(&self, p: &P) -> Span {
        let s = p.as_span();
        Span::new(self.file, s.start(), s.end())
    }

    fn name(&self, p: P) -> Name {
        Name {
            text: p.as_str().to_ascii_lowercase(),
            span: self.span(&p),
        }
    }

    fn file(&mut self, p: P) -> File {
        let mut imports = Vec::new();
        let mut program = None;
        for c in inner(p) {
            match c.as_rule() {
                Rule::import => {
                    let span = self.span(&c);
                    let s = inner(c)
                        .nth(1)
                        .map(|s| unquote(s.as_str()))
                        .unwrap_or_default();
                    imports.push(Import { path: s, span });
                }
                Rule::program => program = Some(self.program(c)),
                _ => {}
            }
        }
        let program = program.unwrap_or_else(|| unreachable_program(self.file));
        File { imports, program }
    }

    fn program(&mut self, p: P) -> Program {
        let span = self.span(&p);
        let mut it = inner(p);
        it.next(); // sial
        let name = self.name(it.next().expect_pair());
        let body = self.body(it.next().expect_pair());
        it.next(); // endsial
        let end_name = self.name(it.next().expect_pair());
        Program {
            name,
            end_name,
            body,
            span,
        }
    }

    fn body(&mut self, p: P) -> Vec<Item> {
        inner(p).map(|c| self.item(c)).collect()
    }

    fn item(&mut self, p: P) -> Item {
        match p.as_rule() {
            Rule::index_decl
            | Rule::subindex_decl
            | Rule::scalar_decl
            | Rule::int_decl
            | Rule::array_decl
            | Rule::proc_decl
            | Rule::special_decl => Item::Decl(self.decl(p)),
            _ => Item::Stmt(self.stmt(p)),
        }
    }

    fn modifiers(&self, p: P) -> Vec<(Modifier, Span)> {
        inner(p)
            .map(|m| {
                let span = self.span(&m);
                let kw = inner(m).next().map(|k| k.as_rule());
                let m = match kw {
                    Some(Rule::kw_predefined) => Modifier::Predefined,
                    Some(Rule::kw_contiguous) => Modifier::Contiguous,
                    _ => Modifier::Sparse,
                };
                (m, span)
            })
            .collect()
    }

    fn decl(&mut self, p: P) -> Decl {
        let span = self.span(&p);
        let rule = p.as_rule();
        let mut it = inner(p).peekable();
        let modifiers = match it.peek().map(|c| c.as_rule()) {
            Some(Rule::modifiers) => self.modifiers(it.next().expect_pair()),
            _ => Vec::new(),
        };
        match rule {
            Rule::index_decl => {
                let kind = index_kind(it.next().expect_pair());
                let name = self.name(it.next().expect_pair());
                let lo = self.range_bound(it.next().expect_pair());
                let hi = self.range_bound(it.next().expect_pair());
                Decl {
                    modifiers,
                    name,
                    kind: DeclKind::Index { kind, lo, hi },
                    span,
                }
            }
            Rule::subindex_decl => {
                it.next(); // subindex
                let name = self.name(it.next().expect_pair());
                it.next(); // of
                let parent = self.name(it.next().expect_pair());
                Decl {
                    modifiers,
                    name,
                    kind: DeclKind::Subindex { parent },
                    span,
                }
            }
            Rule::scalar_decl | Rule::int_decl => {
                it.next(); // keyword
                let name = self.name(it.next().expect_pair());
                let init = it.next().map(|l| self.init_literal(l));
                let kind = if rule == Rule::scalar_decl {
                    DeclKind::Scalar { init }
                } else {
                    DeclKind::Int { init }
                };
                Decl {
                    modifiers,
                    name,
                    kind,
                    span,
                }
            }
            Rule::array_decl => {
                let kind = array_kind(it.next().expect_pair());
                let name = self.name(it.next().expect_pair());
                let dims = it.map(|d| self.name(d)).collect();
                Decl {
                    modifiers,
                    name,
                    kind: DeclKind::Array { kind, dims },
                    span,
                }
            }
            Rule::proc_decl => {
                it.next(); // proc
                let name = self.name(it.next().expect_pair());
                let body = self.body(it.next().expect_pair());
                it.next(); // endproc
                let end_name = self.name(it.next().expect_pair());
                Decl {
                    modifiers,
                    name,
                    kind: DeclKind::Proc { body, end_name },
                    span,
                }
            }
            _ => {
                it.next(); // special
                let name = self.name(it.next().expect_pair());
                let signature = it.next().map(|s| self.name(s));
                Decl {
                    modifiers,
                    name,
                    kind: DeclKind::Special { signature },
                    span,
                }
            }
        }
    }

    fn range_bound(&mut self, p: P) -> RangeBound {
        let c = inner(p).next().expect_pair();
        let span = self.span(&c);
        match c.as_rule() {
            Rule::neg_integer => {
                let digits = inner(c).next().expect_pair();
                let v = self.integer_value(&digits, true);
                RangeBound::Int(-v, span)
            }
            Rule::integer => RangeBound::Int(self.integer_value(&c, false), span),
            _ => RangeBound::Name(self.name(c)),
        }
    }

    fn init_literal(&mut self, p: P) -> InitLiteral {
        let span = self.span(&p);
        let mut negative = false;
        let mut value = Literal::Int(0);
        for c in inner(p) {
            match c.as_rule() {
                Rule::minus => negative = true,
                Rule::integer => value = Literal::Int(self.integer_value(&c, false)),
                Rule::double => value = Literal::Double(self.double_value(&c)),
                _ => value = Literal::Double(self.exponent_double(&c)),
            }
        }
        InitLiteral {
            negative,
            value,
            span,
        }
    }

    /// Integer literals must fit a signed 32-bit int (SIAL-SPEC §1.5); a negated literal may
    /// reach -2^31.
    fn integer_value(&mut self, p: &P, negated: bool) -> i64 {
        let limit: i64 = if negated { 1 << 31 } else { i32::MAX as i64 };
        match p.as_str().parse::<i64>() {
            Ok(v) if v <= limit => v,
            _ => {
                self.diags.push(Diagnostic::error(
                    self.span(p),
                    format!(
                        "integer literal {} does not fit in a 32-bit int (the largest is {})",
                        p.as_str(),
                        i32::MAX
                    ),
                ));
                0
            }
        }
    }

    fn double_value(&self, p: &P) -> f64 {
        p.as_str().parse::<f64>().unwrap_or(0.0)
    }

    fn exponent_double(&mut self, p: &P) -> f64 {
        let text = p.as_str();
        let value = text.parse::<f64>().unwrap_or(0.0);
        self.diags.push(Diagnostic::error(
            self.span(p),
            format!(
                "SIAL double literals have no exponent: write {} instead of {}",
                plain_decimal(value),
                text
            ),
        ));
        value
    }

    fn names(&self, p: Option<P>) -> Vec<Name> {
        p.map(|l| inner(l).map(|n| self.name(n)).collect())
            .unwrap_or_default()
    }

    fn stmt(&mut self, p: P) -> Stmt {
        let span = self.span(&p);
        let rule = p.as_rule();
        let mut it = inner(p);
        let kind = match rule {
            Rule::call_stmt => StmtKind::Call(self.name(it.nth(1).expect_pair())),
            Rule::return_stmt => StmtKind::Return,
            Rule::stop_stmt => StmtKind::Stop,
            Rule::exit_stmt => StmtKind::Exit,
            Rule::sip_barrier_stmt => StmtKind::SipBarrier,
            Rule::server_barrier_stmt => StmtKind::ServerBarrier,
            Rule::do_stmt => self.do_loop(it, span),
            Rule::pardo_stmt => self.pardo(it, span),
            Rule::section_stmt => StmtKind::Section {
                body: self.body(it.nth(1).expect_pair()),
            },
            Rule::gpu_region => StmtKind::GpuRegion {
                body: self.body(it.nth(1).expect_pair()),
            },
            Rule::if_stmt => self.if_stmt(it),
            Rule::where_stmt => StmtKind::Where(self.relexpr(it.nth(1).expect_pair())),
            Rule::allocate_stmt | Rule::deallocate_stmt => self.allocation(rule, it),
            Rule::allocate_contiguous_stmt | Rule::deallocate_contiguous_stmt => {
                self.contiguous_allocation(rule, it)
            }
            Rule::create_stmt => StmtKind::Create(self.name(it.nth(1).expect_pair())),
            Rule::delete_stmt => StmtKind::Delete(self.name(it.nth(1).expect_pair())),
            Rule::destroy_stmt => StmtKind::Destroy(self.name(it.nth(1).expect_pair())),
            Rule::put_stmt | Rule::prepare_stmt => self.put(rule, it),
            Rule::get_stmt => StmtKind::Get(self.reference(it.nth(1).expect_pair())),
            Rule::request_stmt => StmtKind::Request(self.reference(it.nth(1).expect_pair())),
            Rule::collective_stmt => {
                it.next();
                let target = self.name(it.next().expect_pair());
                let opp = it.next().expect_pair();
                let op_span = self.span(&opp);
                let op = assign_op(opp);
                let value = self.expr(it.next().expect_pair());
                StmtKind::Collective {
                    target,
                    op,
                    value,
                    op_span,
                }
            }
            Rule::execute_stmt => {
                it.next();
                let name = self.name(it.next().expect_pair());
                let args = it.map(|a| self.arg(a)).collect();
                StmtKind::Execute { name, args }
            }
            Rule::print_stmt | Rule::println_stmt => {
                let value = self.expr(it.nth(1).expect_pair());
                StmtKind::Print {
                    value,
                    newline: rule == Rule::println_stmt,
                }
            }
            Rule::gpu_stmt => self.gpu(it),
            Rule::set_persistent_stmt | Rule::restore_persistent_stmt => {
                it.next();
                let name = self.name(it.next().expect_pair());
                let label = self.str_lit(it.next().expect_pair());
                if rule == Rule::set_persistent_stmt {
                    StmtKind::SetPersistent { name, label }
                } else {
                    StmtKind::RestorePersistent { name, label }
                }
            }
            Rule::assert_same_stmt => StmtKind::AssertSame(self.name(it.nth(1).expect_pair())),
            Rule::broadcast_from_stmt => {
                it.next();
                let root = self.primary(it.next().expect_pair());
                let array = self.name(it.next().expect_pair());
                StmtKind::BroadcastFrom { root, array }
            }
            _ => {
                let target = self.reference(it.next().expect_pair());
                let opp = it.next().expect_pair();
                let op_span = self.span(&opp);
                let op = assign_op(opp);
                let value = self.expr(it.next().expect_pair());
                StmtKind::Assign {
                    target,
                    op,
                    value,
                    op_span,
                }
            }
        };
        Stmt { kind, span }
    }

    /// `do i [in p] ... enddo i [in p]`.
    fn do_loop(&mut self, mut it: Pairs<Rule>, span: Span) -> StmtKind {
        it.next(); // do
        let index = self.name(it.next().expect_pair());
        let mut parent = None;
        let mut body = Vec::new();
        let mut end_index = index.clone();
        let mut end_parent = None;
        let mut end_span = span;
        for c in it {
            match c.as_rule() {
                Rule::kw_in => {}
                Rule::ident => parent = Some(self.name(c)),
                Rule::body => body = self.body(c),
                _ => {
                    end_span = self.span(&c);
                    let names: Vec<Name> = inner(c)
                        .filter(|n| n.as_rule() == Rule::ident)
                        .map(|n| self.name(n))
                        .collect();
                    let mut names = names.into_iter();
                    if let Some(n) = names.next() {
                        end_index = n;
                    }
                    end_parent = names.next();
                }
            }
        }
        StmtKind::Do {
            index,
            parent,
            body,
            end_index,
            end_parent,
            end_span,
        }
    }

    /// `pardo i, j ["pragma"] ... endpardo i, j`.
    fn pardo(&mut self, mut it: Pairs<Rule>, span: Span) -> StmtKind {
        it.next(); // pardo
        let mut indices = Vec::new();
        let mut pragma = None;
        let mut body = Vec::new();
        let mut end_indices = Vec::new();
        let mut end_span = span;
        for c in it {
            match c.as_rule() {
                Rule::ident_list => indices = self.names(Some(c)),
                Rule::string => pragma = Some(self.str_lit(c)),
                Rule::body => body = self.body(c),
                _ => {
                    end_span = self.span(&c);
                    end_indices = self.names(inner(c).nth(1));
                }
            }
        }
        StmtKind::Pardo {
            indices,
            pragma,
            body,
            end_indices,
            end_span,
        }
    }

    fn if_stmt(&mut self, mut it: Pairs<Rule>) -> StmtKind {
        it.next(); // if
        let cond = self.relexpr(it.next().expect_pair());
        let then_body = self.body(it.next().expect_pair());
        let else_body = it
            .next()
            .filter(|c| c.as_rule() == Rule::else_part)
            .map(|c| self.body(inner(c).nth(1).expect_pair()));
        StmtKind::If {
            cond,
            then_body,
            else_body,
        }
    }

    /// `allocate a[i, *]` or `deallocate a[i, *]`.
    fn allocation(&mut self, rule: Rule, mut it: Pairs<Rule>) -> StmtKind {
        it.next(); // allocate or deallocate
        let array = self.name(it.next().expect_pair());
        let selector = it.next().map(|l| {
            inner(l)
                .map(|a| {
                    let c = inner(a).next().expect_pair();
                    if c.as_rule() == Rule::wildcard {
                        AllocIndex::Wildcard(self.span(&c))
                    } else {
                        AllocIndex::Index(self.name(c))
                    }
                })
                .collect()
        });
        if rule == Rule::allocate_stmt {
            StmtKind::Allocate { array, selector }
        } else {
            StmtKind::Deallocate { array, selector }
        }
    }

    /// `allocate contiguous c[l:u, ...]` or `deallocate contiguous c[l:u, ...]`.
    fn contiguous_allocation(&mut self, rule: Rule, mut it: Pairs<Rule>) -> StmtKind {
        it.next(); // allocate or deallocate
        it.next(); // contiguous
        let array = self.name(it.next().expect_pair());
        let ranges = inner(it.next().expect_pair())
            .map(|r| self.seg_range(r))
            .collect();
        if rule == Rule::allocate_contiguous_stmt {
            StmtKind::AllocateContiguous { array, ranges }
        } else {
            StmtKind::DeallocateContiguous { array, ranges }
        }
    }

    /// `put` or `prepare`.
    fn put(&mut self, rule: Rule, mut it: Pairs<Rule>) -> StmtKind {
        it.next(); // put or prepare
        let target = self.reference(it.next().expect_pair());
        let op = assign_op(it.next().expect_pair());
        let value = self.expr(it.next().expect_pair());
        if rule == Rule::put_stmt {
            StmtKind::Put { target, op, value }
        } else {
            StmtKind::Prepare { target, op, value }
        }
    }

    fn gpu(&mut self, mut it: Pairs<Rule>) -> StmtKind {
        let op = match inner(it.next().expect_pair()).next().map(|k| k.as_rule()) {
            Some(Rule::kw_gpu_allocate) => GpuOp::Allocate,
            Some(Rule::kw_gpu_free) => GpuOp::Free,
            Some(Rule::kw_gpu_put) => GpuOp::Put,
            _ => GpuOp::Get,
        };
        let arg = self.arg(it.next().expect_pair());
        StmtKind::Gpu { op, arg }
    }

    fn str_lit(&self, p: P) -> StrLit {
        StrLit {
            text: unquote(p.as_str()),
            span: self.span(&p),
        }
    }

    fn arg(&mut self, p: P) -> Arg {
        let c = inner(p).next().expect_pair();
        let span = self.span(&c);
        match c.as_rule() {
            Rule::integer => Arg::Int(self.integer_value(&c, false), span),
            Rule::double => Arg::Double(self.double_value(&c), span),
            Rule::exponent_double => Arg::Double(self.exponent_double(&c), span),
            Rule::string => Arg::Str(unquote(c.as_str()), span),
            _ => Arg::Ref(self.reference(c)),
        }
    }

    fn seg_range(&mut self, p: P) -> SegRange {
        let span = self.span(&p);
        let mut it = inner(p);
        let lower = self.expr(it.next().expect_pair());
        let upper = self.expr(it.next().expect_pair());
        SegRange { lower, upper, span }
    }

    fn reference(&mut self, p: P) -> Reference {
        let span = self.span(&p);
        let mut it = inner(p);
        let name = self.name(it.next().expect_pair());
        let selector = it.next().map(|sel| {
            inner(sel)
                .map(|item| match item.as_rule() {
                    Rule::seg_range => SelItem::Range(self.seg_range(item)),
                    _ => {
                        let mut cast = false;
                        let mut name = None;
                        for c in inner(item) {
                            match c.as_rule() {
                                Rule::index_cast => cast = true,
                                _ => name = Some(self.name(c)),
                            }
                        }
                        SelItem::Index {
                            name: name.expect_pair(),
                            cast,
                        }
                    }
                })
                .collect()
        });
        Reference {
            name,
            selector,
            span,
        }
    }

    fn relexpr(&mut self, p: P) -> RelExpr {
        let span = self.span(&p);
        let mut it = inner(p);
        let left = self.expr(it.next().expect_pair());
        let op = match it.next().expect_pair().as_str() {
            "<" => RelOp::Lt,
            "<=" => RelOp::Le,
            ">" => RelOp::Gt,
            ">=" => RelOp::Ge,
            "==" => RelOp::Eq,
            _ => RelOp::Ne,
        };
        let right = self.expr(it.next().expect_pair());
        RelExpr {
            op,
            left,
            right,
            span,
        }
    }

    /// An operator/operand sequence, structured by precedence.
    fn expr(&mut self, p: P) -> Expr {
        let file = self.file;
        let span_of = move |p: &P| {
            let s = p.as_span();
            Span::new(file, s.start(), s.end())
        };
        PRATT
            .map_primary(|primary| self.primary(primary))
            .map_prefix(|op, operand| {
                let span = span_of(&op).to(operand.span);
                let kind = match op.as_rule() {
                    Rule::neg => ExprKind::Neg(Box::new(operand)),
                    Rule::kw_sqrt => ExprKind::Sqrt(Box::new(operand)),
                    _ => {
                        let kind = match inner(op).next().map(|k| k.as_rule()) {
                            Some(Rule::kw_int) => CastKind::Int,
                            Some(Rule::kw_scalar) => CastKind::Scalar,
                            _ => CastKind::Index,
                        };
                        ExprKind::Cast(kind, Box::new(operand))
                    }
                };
                Expr { kind, span }
            })
            .map_infix(|left, op, right| {
                let op = match op.as_rule() {
                    Rule::add => BinOp::Add,
                    Rule::sub => BinOp::Sub,
                    Rule::mul => BinOp::Mul,
                    Rule::div => BinOp::Div,
                    Rule::tensor => BinOp::Tensor,
                    _ => BinOp::Pow,
                };
                let span = left.span.to(right.span);
                Expr {
                    kind: ExprKind::Binary(op, Box::new(left), Box::new(right)),
                    span,
                }
            })
            .parse(inner(p))
    }

    fn primary(&mut self, p: P) -> Expr {
        let c = if p.as_rule() == Rule::primary {
            inner(p).next().expect_pair()
        } else {
            p
        };
        let span = self.span(&c);
        let kind = match c.as_rule() {
            Rule::paren => ExprKind::Paren(Box::new(self.expr(inner(c).next().expect_pair()))),
            Rule::integer => ExprKind::Int(self.integer_value(&c, false)),
            Rule::double => ExprKind::Double(self.double_value(&c)),
            Rule::exponent_double => ExprKind::Double(self.exponent_double(&c)),
            Rule::string => ExprKind::Str(unquote(c.as_str())),
            _ => ExprKind::Ref(self.reference(c)),
        };
        Expr { kind, span }
    }
}

fn index_kind(p: P) -> IndexKind {
    match inner(p).next().map(|k| k.as_rule()) {
        Some(Rule::kw_aoindex) => IndexKind::Ao,
        Some(Rule::kw_moindex) => IndexKind::Mo,
        Some(Rule::kw_moaindex) => IndexKind::MoA,
        Some(Rule::kw_mobindex) => IndexKind::MoB,
        Some(Rule::kw_laindex) => IndexKind::La,
        _ => IndexKind::Simple,
    }
}

fn array_kind(p: P) -> ArrayKind {
    match inner(p).next().map(|k| k.as_rule()) {
        Some(Rule::kw_static) => ArrayKind::Static,
        Some(Rule::kw_temp) => ArrayKind::Temp,
        Some(Rule::kw_local) => ArrayKind::Local,
        Some(Rule::kw_distributed) => ArrayKind::Distributed,
        _ => ArrayKind::Served,
    }
}

fn assign_op(p: P) -> AssignOp {
    match p.as_str() {
        "+=" => AssignOp::Add,
        "-=" => AssignOp::Sub,
        "*=" => AssignOp::Mul,
        _ => AssignOp::Assign,
    }
}

fn unquote(s: &str) -> String {
    s.trim_start_matches('"').trim_end_matches('"').to_string()
}

/// A double in plain positional notation, as SIAL needs it.
fn plain_decimal(v: f64) -> String {
    let s = format!("{v:.20}");
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

fn unreachable_program(file: FileId) -> Program {
    let name = Name {
        text: String::new(),
        span: Span::new(file, 0, 0),
    };
    Program {
        name: name.clone(),
        end_name: name,
        body: Vec::new(),
        span: Span::new(file, 0, 0),
    }
}

/// The grammar guarantees the shape of every parse tree node; these helpers turn a violation
/// of that guarantee (a grammar/builder mismatch, i.e. a bug in this file) into a clear panic
/// message rather than silently producing a wrong tree.
trait ExpectPair<T> {
    fn expect_pair(self) -> T;
}

impl<T> ExpectPair<T> for Option<T> {
    #[track_caller]
    fn expect_pair(self) -> T {
        match self {
            Some(v) => v,
            None => panic!("parse tree does not match the grammar (bug in syntax/parse.rs)"),
        }
    }
}
