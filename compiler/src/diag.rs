//! Diagnostics: `path:line:col: error: message`, the source line, and a caret under the span.

use crate::source::{SourceMap, Span};
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// One message about the program, anchored at a span.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub span: Span,
    pub message: String,
    /// Extra lines printed after the caret (`note: ...`), e.g. where the other side of a
    /// mismatch was declared.
    pub notes: Vec<String>,
    /// A declaration nothing uses: `sial check` shows it; `sial run` only counts it, since
    /// production programs carry many.
    pub unused: bool,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            span,
            message: message.into(),
            notes: Vec::new(),
            unused: false,
        }
    }

    pub fn warning(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            span,
            message: message.into(),
            notes: Vec::new(),
            unused: false,
        }
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Renders the diagnostic with its source line and caret.
    pub fn render(&self, sources: &SourceMap) -> String {
        let file = sources.file(self.span.file);
        let (line, col) = file.line_col(self.span.start as usize);
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = format!(
            "{}:{}:{}: {}: {}\n",
            file.path.display(),
            line,
            col,
            kind,
            self.message
        );
        let text = file.line_text(line);
        let shown: String = text
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        let width = {
            let end_line = file.line_col(self.span.end as usize).0;
            let end_col = if end_line == line {
                file.line_col(self.span.end as usize).1
            } else {
                shown.chars().count() + 1
            };
            end_col.saturating_sub(col).max(1)
        };
        let _ = writeln!(out, "{:>5} | {}", line, shown);
        let _ = writeln!(
            out,
            "{:>5} | {}{}",
            "",
            " ".repeat(col - 1),
            "^".repeat(width)
        );
        for note in &self.notes {
            let _ = writeln!(out, "{:>5} = note: {}", "", note);
        }
        out
    }
}

/// Collected diagnostics of a compilation, in source order per phase.
#[derive(Debug, Default)]
pub struct Diagnostics {
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    pub fn error(&mut self, span: Span, message: impl Into<String>) {
        self.push(Diagnostic::error(span, message));
    }

    pub fn warning(&mut self, span: Span, message: impl Into<String>) {
        self.push(Diagnostic::warning(span, message));
    }

    /// A warning about a declaration nothing uses (see [`Diagnostic::unused`]).
    pub fn unused(&mut self, span: Span, message: impl Into<String>) {
        let mut d = Diagnostic::warning(span, message);
        d.unused = true;
        self.push(d);
    }

    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.is_error()).count()
    }

    /// Renders every diagnostic, sorted by file and position, with a closing count.
    pub fn render(&self, sources: &SourceMap) -> String {
        self.render_with(sources, true)
    }

    /// What `sial run` shows: everything but the warnings about unused declarations, which are
    /// counted in one line per file.
    pub fn render_for_run(&self, sources: &SourceMap) -> String {
        self.render_with(sources, false)
    }

    fn render_with(&self, sources: &SourceMap, show_unused: bool) -> String {
        let mut items: Vec<&Diagnostic> = self.items.iter().collect();
        items.sort_by_key(|d| (d.span.file, d.span.start));
        items.dedup_by(|a, b| a.span == b.span && a.message == b.message);
        let mut out = String::new();
        let mut unused: Vec<(crate::source::FileId, usize)> = Vec::new();
        for d in &items {
            if d.unused && !show_unused {
                match unused.last_mut() {
                    Some((file, n)) if *file == d.span.file => *n += 1,
                    _ => unused.push((d.span.file, 1)),
                }
                continue;
            }
            out.push_str(&d.render(sources));
        }
        for (file, n) in unused {
            let _ = writeln!(
                out,
                "{}: warning: {n} declaration{} never used (`sial check` lists them)",
                sources.file(file).path.display(),
                if n == 1 { " is" } else { "s are" }
            );
        }
        let errors = items.iter().filter(|d| d.is_error()).count();
        if errors > 0 {
            let _ = writeln!(
                out,
                "{} error{} found",
                errors,
                if errors == 1 { "" } else { "s" }
            );
        }
        out
    }
}
