//! Turns a pest error into a diagnostic a scientist can act on: what was expected, in words,
//! and what was found instead.

use super::parse::Rule;
use super::structure;
use crate::diag::Diagnostic;
use crate::source::{FileId, SourceFile, Span};
use pest::error::{Error, ErrorVariant, InputLocation};

const NO_STATEMENT_FORM: &[&str] = &[
    "cycle",
    "prequest",
    "print_index",
    "print_scalar",
    "print_int",
];

pub fn syntax_error(
    file: FileId,
    text: &str,
    e: &Error<Rule>,
    attempts: Option<(usize, Vec<String>)>,
) -> Diagnostic {
    let rule_pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    // Literal tokens (`=`, `]`, ...) are not rules, so pest's own position can lag behind the
    // real point of failure; the detailed attempts know the furthest position and its tokens.
    let literal = attempts
        .map(|(at, tokens)| (at, punctuation(tokens)))
        .filter(|(at, tokens)| *at >= rule_pos && !tokens.is_empty());
    let pos = literal.as_ref().map_or(rule_pos, |(at, _)| *at);
    let src = SourceFile::new(Default::default(), text.to_string());
    let pest_line = src.line_col(pos).0;
    if let Some((_, d)) = structure::first_mismatch(file, text) {
        let line = src.line_col(d.span.start as usize).0;
        let at_end = text[pos.min(text.len())..].trim().is_empty();
        if line == pest_line || (at_end && d.message.ends_with("found the end of the file")) {
            return d;
        }
    }
    let found = token_at(text, pos);
    let span = Span::new(
        file,
        pos,
        pos + found.len().max(1).min(text.len().saturating_sub(pos)),
    );
    // At the same position both kinds of expectation are informative; past it, only the tokens.
    let positives: Vec<Rule> = match (&e.variant, &literal) {
        (ErrorVariant::ParsingError { positives, .. }, Some((at, _))) if *at == rule_pos => {
            positives.clone()
        }
        (ErrorVariant::ParsingError { positives, .. }, None) => positives.clone(),
        _ => Vec::new(),
    };
    if let Some(d) = else_if(file, text, pos) {
        return d;
    }
    let lower = found.to_ascii_lowercase();
    if let Some(d) = misused_word(span, &lower, &positives) {
        return d;
    }
    let mut expected = expected(&positives, literal.map(|(_, tokens)| tokens));
    let found_text = if found.is_empty() {
        if pos >= text.len() {
            "the end of the file".to_string()
        } else {
            "the end of the line".to_string()
        }
    } else {
        format!("`{found}`")
    };
    let message = match expected.len() {
        0 => format!("unexpected {found_text}"),
        1 => format!("expected {}, found {found_text}", expected[0]),
        _ => {
            let last = expected.pop().unwrap_or_default();
            format!(
                "expected {} or {}, found {found_text}",
                expected.join(", "),
                last
            )
        }
    };
    Diagnostic::error(span, message)
}

/// The expected tokens worth naming: punctuation. Blanks, comments and the characters that
/// would extend a name are always possible somewhere and say nothing.
fn punctuation(tokens: Vec<String>) -> Vec<String> {
    tokens
        .into_iter()
        .filter(|t| {
            !t.contains("..")
                && !matches!(
                    t.as_str(),
                    "" | " " | "\t" | "\x0c" | "#" | "." | "_" | "BUILTIN_RULE"
                )
                && !t.chars().all(|c| c.is_ascii_alphabetic())
        })
        .collect()
}

/// `else if` on the line of `pos`, which SIAL does not have.
fn else_if(file: FileId, text: &str, pos: usize) -> Option<Diagnostic> {
    let line_start = text[..pos.min(text.len())]
        .rfind(['\n', '\r'])
        .map_or(0, |i| i + 1);
    let line_words: Vec<String> = text[line_start..]
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .take(2)
        .map(str::to_ascii_lowercase)
        .collect();
    if line_words.len() != 2 || line_words[0] != "else" || line_words[1] != "if" {
        return None;
    }
    let span = Span::new(
        file,
        line_start,
        line_start
            + text[line_start..]
                .find(['\n', '\r'])
                .unwrap_or(text.len() - line_start),
    );
    Some(Diagnostic::error(
        span,
        "SIAL has no `else if`: end the line after `else` and nest the `if` inside it",
    ))
}

/// A word or symbol found where it cannot be, with what it is for: `lower` is the token found
/// (lower case), `positives` the rules expected there.
fn misused_word(span: Span, lower: &str, positives: &[Rule]) -> Option<Diagnostic> {
    let message = if lower == "import" {
        "import lines must come before the `sial` line".to_string()
    } else if lower == ";" {
        "SIAL has no statement separator `;`: put each statement on its own line".to_string()
    } else if ["<", ">", "<=", ">=", "==", "!="].contains(&lower) {
        "a comparison can only be the condition of `if` or `where`, not a value".to_string()
    } else if NO_STATEMENT_FORM.contains(&lower) {
        format!("`{lower}` is a reserved word of SIAL with no statement form")
    } else if is_keyword(lower) && positives.contains(&Rule::ident) {
        format!("`{lower}` is a reserved word and cannot be used as a name")
    } else {
        return None;
    };
    Some(Diagnostic::error(span, message))
}

/// What was expected, in words and without repeats: the rules, then the literal tokens.
fn expected(positives: &[Rule], tokens: Option<Vec<String>>) -> Vec<String> {
    let mut expected: Vec<String> = Vec::new();
    for r in positives {
        let w = describe(*r).to_string();
        if !expected.contains(&w) {
            expected.push(w);
        }
    }
    for token in tokens.unwrap_or_default() {
        let w = match token.as_str() {
            "\n" | "\r" => continue,
            "*" | "**" | "+" | "/" | "^" => "an operator".to_string(),
            "-" if expected
                .iter()
                .any(|e| e.starts_with("an ") || e.starts_with("a range")) =>
            {
                continue;
            }
            "\"" | "(" if expected.iter().any(|e| e == "an expression") => continue,
            "-" => "an operator".to_string(),
            t => format!("`{t}`"),
        };
        if !expected.contains(&w) {
            expected.push(w);
        }
    }
    expected
}

/// The token starting at `pos`: a word, a number, or one punctuation character.
fn token_at(text: &str, pos: usize) -> String {
    let rest = &text[pos.min(text.len())..];
    let rest = rest.trim_start_matches([' ', '\t']);
    let mut chars = rest.char_indices();
    match chars.next() {
        None => String::new(),
        Some((_, c)) if c == '\n' || c == '\r' => String::new(),
        Some((_, c)) if c.is_ascii_alphanumeric() || c == '_' || c == '.' => {
            let end = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '.'))
                .unwrap_or(rest.len());
            rest[..end].to_string()
        }
        Some((_, c)) => {
            let two: String = rest.chars().take(2).collect();
            if ["**", "+=", "-=", "*=", "<=", ">=", "==", "!="].contains(&two.as_str()) {
                two
            } else {
                c.to_string()
            }
        }
    }
}

fn is_keyword(w: &str) -> bool {
    KEYWORDS.contains(&w)
}

const KEYWORDS: &[&str] = &[
    "sial",
    "endsial",
    "import",
    "proc",
    "endproc",
    "call",
    "return",
    "stop",
    "do",
    "in",
    "enddo",
    "pardo",
    "endpardo",
    "where",
    "exit",
    "cycle",
    "section",
    "endsection",
    "if",
    "else",
    "endif",
    "aoindex",
    "moindex",
    "moaindex",
    "mobindex",
    "index",
    "laindex",
    "subindex",
    "of",
    "scalar",
    "int",
    "static",
    "temp",
    "local",
    "distributed",
    "served",
    "predefined",
    "contiguous",
    "sparse",
    "special",
    "allocate",
    "deallocate",
    "create",
    "delete",
    "destroy",
    "put",
    "get",
    "prepare",
    "request",
    "prequest",
    "collective",
    "execute",
    "sip_barrier",
    "server_barrier",
    "print",
    "println",
    "print_index",
    "print_scalar",
    "print_int",
    "gpu_on",
    "gpu_off",
    "gpu_allocate",
    "gpu_free",
    "gpu_put",
    "gpu_get",
    "set_persistent",
    "restore_persistent",
    "assert_same",
    "broadcast_from",
    "sqrt",
];

/// A grammar rule in words.
fn describe(r: Rule) -> &'static str {
    use Rule::*;
    match r {
        ident => "a name",
        integer => "an integer",
        double | exponent_double => "a number",
        string => "a string in double quotes",
        EOI => "the end of the file",
        kw_sial => "`sial NAME`",
        kw_endsial => "`endsial`",
        kw_import => "`import`",
        kw_endproc => "`endproc`",
        kw_enddo | enddo => "`enddo`",
        kw_endpardo | endpardo => "`endpardo`",
        kw_endif => "`endif`",
        kw_else | else_part => "`else`",
        kw_endsection => "`endsection`",
        kw_gpu_off => "`gpu_off`",
        kw_in => "`in`",
        kw_of => "`of`",
        kw_contiguous => "`contiguous`",
        assign_op => "an assignment operator (`=`, `+=`, `-=`, `*=`)",
        rel_op => "a comparison (`<`, `<=`, `>`, `>=`, `==`, `!=`)",
        add | sub | mul | div | pow | tensor => "an operator",
        expr | primary | paren | neg | kw_sqrt | cast_op => "an expression",
        reference => "a name or block reference",
        selector => "`[`",
        seg_range => "a segment range `lower:upper`",
        sel_index | index_cast => "an index",
        range_val | neg_integer => "a range bound (an integer or a predefined int)",
        init_literal => "a literal value",
        alloc_list | range_list => "`[`",
        alloc_index | wildcard => "an index or `*`",
        ident_list => "a list of indices",
        modifier | modifiers | kw_predefined | kw_sparse => "a declaration",
        index_kind | array_kind | kw_scalar | kw_int | kw_static | kw_temp | kw_local
        | kw_distributed | kw_served | kw_aoindex | kw_moindex | kw_moaindex | kw_mobindex
        | kw_laindex | kw_index | kw_subindex | kw_proc | kw_special | index_decl
        | subindex_decl | scalar_decl | int_decl | array_decl | proc_decl | special_decl => {
            "a declaration"
        }
        arg => "an argument",
        gpu_op => "a statement",
        relexpr => "a comparison",
        _ => "a statement",
    }
}
