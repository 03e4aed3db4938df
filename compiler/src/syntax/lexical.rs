//! Character-level checks made before parsing, so that their messages are exact: SIAL source is
//! ASCII outside comments (a comment may say anything) and string literals end on their line.
//! Also bounds line length and parenthesis and block nesting, which bounds the recursion depth
//! of the parser and of every later pass (the parser itself does not probe the stack).

use crate::diag::Diagnostic;
use crate::source::{FileId, Span};

/// Longest accepted line, in bytes.
pub const MAX_LINE: usize = 2000;
/// Deepest accepted nesting of parentheses within a line, and of blocks (loops, ifs, ...).
pub const MAX_DEPTH: usize = 100;
/// Most arithmetic operators accepted on one line (each may add a level to an expression tree).
pub const MAX_OPERATORS: usize = 256;

const OPENERS: &[&str] = &["proc", "do", "pardo", "if", "section", "gpu_on"];
const CLOSERS: &[&str] = &[
    "endproc",
    "enddo",
    "endpardo",
    "endif",
    "endsection",
    "gpu_off",
];

pub fn check(file: FileId, text: &str) -> Option<Diagnostic> {
    let mut in_string: Option<usize> = None;
    let mut in_comment = false;
    let mut line_start = 0;
    let mut parens = 0usize;
    let mut operators = 0usize;
    let mut blocks = 0usize;
    let mut first_word_done = false;
    for (i, c) in text.char_indices() {
        if !first_word_done && !c.is_ascii_whitespace() {
            first_word_done = true;
            let word: String = text[i..]
                .chars()
                .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
                .collect::<String>()
                .to_ascii_lowercase();
            if OPENERS.contains(&word.as_str()) {
                blocks += 1;
                if blocks > MAX_DEPTH {
                    return Some(Diagnostic::error(
                        Span::new(file, i, i + word.len()),
                        format!("blocks are nested more than {MAX_DEPTH} deep"),
                    ));
                }
            } else if CLOSERS.contains(&word.as_str()) {
                blocks = blocks.saturating_sub(1);
            }
        }
        if c == '\n' || c == '\r' {
            if i - line_start > MAX_LINE {
                return Some(Diagnostic::error(
                    Span::new(file, line_start, line_start + 1),
                    format!("line is longer than {MAX_LINE} characters"),
                ));
            }
            line_start = i + 1;
            parens = 0;
            operators = 0;
            first_word_done = false;
        }
        if c == '(' && !in_comment && in_string.is_none() {
            parens += 1;
            if parens > MAX_DEPTH {
                return Some(Diagnostic::error(
                    Span::new(file, i, i + 1),
                    format!("parentheses are nested more than {MAX_DEPTH} deep"),
                ));
            }
        }
        if matches!(c, '+' | '-' | '*' | '/' | '^') && !in_comment && in_string.is_none() {
            operators += 1;
            if operators > MAX_OPERATORS {
                return Some(Diagnostic::error(
                    Span::new(file, i, i + 1),
                    format!(
                        "more than {MAX_OPERATORS} operators on one line; split the expression over several statements"
                    ),
                ));
            }
        }
        if c == ')' && !in_comment && in_string.is_none() {
            parens = parens.saturating_sub(1);
        }
        if !c.is_ascii() && !in_comment {
            return Some(Diagnostic::error(
                Span::new(file, i, i + c.len_utf8()),
                format!(
                    "non-ASCII character {:?} (U+{:04X}); SIAL source must be ASCII",
                    c, c as u32
                ),
            ));
        }
        match c {
            '\n' | '\r' => {
                if let Some(start) = in_string {
                    return Some(Diagnostic::error(
                        Span::new(file, start, i),
                        "string literal is not closed on its line (add the closing `\"`)",
                    ));
                }
                in_comment = false;
            }
            '"' if !in_comment => in_string = if in_string.is_some() { None } else { Some(i) },
            '#' if in_string.is_none() => in_comment = true,
            _ => {}
        }
    }
    if text.len() - line_start > MAX_LINE {
        return Some(Diagnostic::error(
            Span::new(file, line_start, line_start + 1),
            format!("line is longer than {MAX_LINE} characters"),
        ));
    }
    in_string.map(|start| {
        Diagnostic::error(
            Span::new(file, start, text.len()),
            "string literal is not closed on its line (add the closing `\"`)",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        let f = FileId(0);
        assert!(check(f, &format!("x = {}1{}\n", "(".repeat(101), ")".repeat(101))).is_some());
        assert!(check(f, &format!("x = {}1{}\n", "(".repeat(100), ")".repeat(100))).is_none());
        assert!(check(f, &"do i\n".repeat(101)).is_some());
        assert!(check(f, &"x".repeat(MAX_LINE + 1)).is_some());
        assert!(
            check(
                f,
                &format!("x = {}\n", vec!["y"; MAX_OPERATORS + 2].join("+"))
            )
            .is_some()
        );
        assert!(
            check(
                f,
                &format!("x = {}\n", vec!["y"; MAX_OPERATORS + 1].join("+"))
            )
            .is_none()
        );
        assert!(check(f, "x = 1 # \u{e9}t\u{e9}\n").is_none());
        assert!(check(f, "x = \"abc\n").is_some());
    }
}
