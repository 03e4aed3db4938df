//! A line-based scan of block openers and closers (`do`/`enddo`, `pardo`/`endpardo`, ...).
//! It runs only after pest has failed, to say which opener a misplaced or missing closer
//! belongs to, which a grammar error position alone cannot.

use crate::diag::Diagnostic;
use crate::source::{FileId, Span};

struct Open {
    kind: &'static str,
    header: String,
    closer: String,
    line: usize,
}

/// The first structural mismatch, if any, with the 1-based line it was found on.
pub fn first_mismatch(file: FileId, text: &str) -> Option<(usize, Diagnostic)> {
    let mut stack: Vec<Open> = Vec::new();
    let mut offset = 0;
    for (n, raw) in text.split_inclusive(['\n', '\r']).enumerate() {
        let line_no = n + 1;
        let start = offset;
        offset += raw.len();
        let code = strip_comment(raw).trim();
        if code.is_empty() {
            continue;
        }
        let lower = code.to_ascii_lowercase();
        let mut words = lower.split_whitespace();
        let first = words.next().unwrap_or("");
        let lead = raw.len() - raw.trim_start().len();
        let span = Span::new(file, start + lead, start + lead + code.len());
        let rest = lower[first.len()..].trim().to_string();
        let opener = match first {
            "sial" => Some(("sial", format!("endsial {rest}"))),
            "proc" => Some(("proc", format!("endproc {rest}"))),
            "do" => Some(("do", format!("enddo {rest}"))),
            "pardo" => {
                let list = rest.split('"').next().unwrap_or("").trim().to_string();
                Some(("pardo", format!("endpardo {list}")))
            }
            "if" => Some(("if", "endif".to_string())),
            "section" => Some(("section", "endsection".to_string())),
            "gpu_on" => Some(("gpu_on", "gpu_off".to_string())),
            _ => None,
        };
        if let Some((kind, closer)) = opener {
            stack.push(Open {
                kind,
                header: lower.clone(),
                closer,
                line: line_no,
            });
            continue;
        }
        let closes = match first {
            "endsial" => "sial",
            "endproc" => "proc",
            "enddo" => "do",
            "endpardo" => "pardo",
            "endif" => "if",
            "endsection" => "section",
            "gpu_off" => "gpu_on",
            "else" => {
                if stack.last().is_some_and(|o| o.kind == "if") {
                    continue;
                }
                let d = match stack.last() {
                    Some(o) => Diagnostic::error(
                        span,
                        format!(
                            "`else` without an open `if`: expected `{}` to close `{}` opened at line {}",
                            o.closer.trim(),
                            o.header,
                            o.line
                        ),
                    ),
                    None => Diagnostic::error(span, "`else` without an open `if`"),
                };
                return Some((line_no, d));
            }
            _ => continue,
        };
        match stack.pop() {
            Some(o) if o.kind == closes => {}
            Some(o) => {
                return Some((
                    line_no,
                    Diagnostic::error(
                        span,
                        format!(
                            "expected `{}` to close `{}` opened at line {}, found `{}`",
                            o.closer.trim(),
                            o.header,
                            o.line,
                            lower
                        ),
                    ),
                ));
            }
            None => {
                return Some((
                    line_no,
                    Diagnostic::error(span, format!("`{first}` without an open `{closes}`")),
                ));
            }
        }
    }
    let o = stack.pop()?;
    let end = text.len();
    let line = text.split_inclusive(['\n', '\r']).count().max(1);
    Some((
        line,
        Diagnostic::error(
            Span::new(file, end, end),
            format!(
                "expected `{}` to close `{}` opened at line {}, found the end of the file",
                o.closer.trim(),
                o.header,
                o.line
            ),
        ),
    ))
}

fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_string = !in_string,
            '#' if !in_string => return &line[..i],
            _ => {}
        }
    }
    line.trim_end_matches(['\n', '\r'])
}
