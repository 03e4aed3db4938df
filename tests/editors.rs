//! The editor files (`editors/`) highlight SIAL as the compiler reads it: their keywords are
//! exactly those of `grammar/sial.pest`, and run on real programs (`programs/`, and ACES4's
//! with `SIAL_ACES4_DIR`) the VS Code TextMate grammar and Vim's syntax file mark every keyword,
//! and nothing else, as a keyword, and every comment, string and number as such. Expected
//! marks come from a small lexer of this test that follows the grammar's token rules.

mod common;

use common::root;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The keywords of the grammar: every `kw_NAME = @{ ^"word" ... }` rule.
fn grammar_keywords() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("grammar/sial.pest")).expect("grammar");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("kw_"))
        .filter_map(|l| l.split("^\"").nth(1)?.split('"').next())
        .map(str::to_string)
        .collect()
}

fn textmate() -> Value {
    let path = root().join("editors/vscode/syntaxes/sial.tmLanguage.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("grammar file")).expect("JSON")
}

/// The scopes of the grammar's top-level patterns, in order, with their compiled regexes.
fn textmate_patterns() -> Vec<(String, fancy_regex::Regex)> {
    let g = textmate();
    g["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .map(|p| {
            let name = p["include"]
                .as_str()
                .expect("include")
                .trim_start_matches('#');
            let rule = &g["repository"][name];
            let regex = rule["match"].as_str().expect("match");
            let scope = rule["name"].as_str().expect("name").to_string();
            (scope, fancy_regex::Regex::new(regex).expect("regex"))
        })
        .collect()
}

/// The class of a scope: K keyword, N number, O operator, S string, C comment.
fn class(scope: &str) -> char {
    match scope.split('.').next().unwrap_or_default() {
        "keyword" if scope.starts_with("keyword.operator") => 'O',
        "keyword" | "storage" | "support" => 'K',
        "constant" => 'N',
        "string" => 'S',
        "comment" => 'C',
        _ => '?',
    }
}

/// One line through the TextMate grammar: at each place the earliest match of any pattern
/// (the first pattern on a tie), as an editor does; a class per character.
fn textmate_line(patterns: &[(String, fancy_regex::Regex)], line: &str) -> String {
    let mut marks = vec!['.'; line.len()];
    // Each pattern's next match from where the scan stands, found again only once passed.
    let mut next: Vec<Option<(usize, usize)>> = vec![Some((0, 0)); patterns.len()];
    let mut at = 0;
    while at < line.len() {
        for ((_, re), n) in patterns.iter().zip(next.iter_mut()) {
            if n.is_some_and(|(start, end)| start < at || end == 0) {
                *n = re
                    .find_from_pos(line, at)
                    .ok()
                    .flatten()
                    .map(|m| (m.start(), m.end().max(m.start() + 1)));
            }
        }
        let found = next
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.map(|(start, end)| (start, end, i)))
            .min_by_key(|(start, _, i)| (*start, *i));
        let Some((start, end, i)) = found else {
            break;
        };
        marks[start..end.min(line.len())].fill(class(&patterns[i].0));
        at = end;
    }
    marks.into_iter().collect()
}

/// What a line should look like, by the grammar's token rules.
fn expected_line(keywords: &BTreeSet<String>, line: &str) -> String {
    let b = line.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
    let mut marks = vec!['.'; b.len()];
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let mark = if c == b'#' {
            i = b.len();
            'C'
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            i = (i + 1).min(b.len());
            'S'
        } else if c.is_ascii_alphabetic() {
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            if keywords.contains(&line[start..i].to_ascii_lowercase()) {
                'K'
            } else {
                '.'
            }
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            'N'
        } else if b"+-*=<>!".contains(&c) && b.get(i + 1) == Some(&b'=') {
            i += 2;
            'O'
        } else if b"+-*/^=<>:".contains(&c) {
            i += 1;
            'O'
        } else {
            i += 1;
            '.'
        };
        marks[start..i].fill(mark);
    }
    marks.into_iter().collect()
}

/// The programs the highlighting is tried on.
fn programs() -> Vec<PathBuf> {
    let mut files = common::sial_sources(&root().join("programs"));
    if let Ok(dir) = std::env::var("SIAL_ACES4_DIR") {
        sialx_files(&Path::new(&dir).join("qm"), &mut files);
    }
    files
}

/// ACES4's programs: the `.sialx` files under `dir`.
fn sialx_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sialx_files(&path, files);
        } else if path.extension().is_some_and(|x| x == "sialx") {
            files.push(path);
        }
    }
}

/// The lines of a file (non-ASCII lines left out: the editors and this lexer count columns
/// differently there).
fn lines(file: &Path) -> Vec<String> {
    let text = std::fs::read(file).unwrap_or_default();
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| l.is_ascii())
        .map(str::to_string)
        .collect()
}

#[test]
fn editor_keywords_are_the_grammars() {
    let keywords = grammar_keywords();
    assert!(keywords.len() >= 70, "{keywords:?}");
    let vim = std::fs::read_to_string(root().join("editors/vim/syntax/sial.vim")).expect("vim");
    let in_vim: BTreeSet<String> = vim
        .lines()
        .filter_map(|l| l.strip_prefix("syn keyword "))
        .flat_map(|l| l.split_whitespace().skip(1).map(str::to_string))
        .collect();
    assert_eq!(in_vim, keywords, "editors/vim/syntax/sial.vim");
    let g = textmate();
    let in_textmate: BTreeSet<String> = ["control", "type", "statement"]
        .iter()
        .flat_map(|r| {
            let m = g["repository"][r]["match"].as_str().unwrap_or_default();
            let inner = m.split("(?:").nth(1).and_then(|x| x.split(')').next());
            inner
                .unwrap_or_default()
                .split('|')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(in_textmate, keywords, "sial.tmLanguage.json");
}

#[test]
fn textmate_grammar_marks_real_programs_as_the_compiler_reads_them() {
    let keywords = grammar_keywords();
    let patterns = textmate_patterns();
    let mut checked = 0;
    for file in programs() {
        for (n, line) in lines(&file).iter().enumerate() {
            let want = expected_line(&keywords, line);
            let got = textmate_line(&patterns, line);
            assert_eq!(got, want, "{}:{}: {line}", file.display(), n + 1);
            checked += 1;
        }
    }
    assert!(checked > 2000, "only {checked} lines");
}

#[test]
fn vim_marks_real_programs_as_the_compiler_reads_them() {
    if std::process::Command::new("vim")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("vim is not installed: its syntax file was checked for keywords only");
        return;
    }
    let keywords = grammar_keywords();
    let dir = common::scratch("vim-syntax");
    let script = dir.join("marks.vim");
    let out = dir.join("marks.txt");
    std::fs::write(
        &script,
        format!(
            r#"let names = {{'sialControl':'K','sialType':'K','sialStatement':'K','sialNumber':'N','sialOperator':'O','sialString':'S','sialComment':'C'}}
let out = []
for l in range(1, line('$'))
  let s = ''
  for c in range(1, col([l, '$']) - 1)
    let s .= get(names, synIDattr(synID(l, c, 1), 'name'), '.')
  endfor
  call add(out, s)
endfor
call writefile(out, '{}')
qa!
"#,
            out.display()
        ),
    )
    .expect("script");
    let mut checked = 0;
    for file in programs() {
        let _ = std::fs::remove_file(&out);
        let status = std::process::Command::new("vim")
            .args(["-u", "NONE", "-i", "NONE", "-N", "-es", "--cmd"])
            .arg(format!("set rtp^={}", root().join("editors/vim").display()))
            .args(["-c", "filetype on", "-c", "syntax on", "-c"])
            .arg(format!("edit {}", file.display()))
            .arg("-S")
            .arg(&script)
            .status()
            .expect("vim");
        assert!(status.success(), "vim on {}", file.display());
        let marks = std::fs::read_to_string(&out).expect("vim's marks");
        let all: Vec<String> = std::fs::read(&file)
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .lines()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        for (n, (line, got)) in all.iter().zip(marks.lines()).enumerate() {
            if !line.is_ascii() {
                continue;
            }
            let want = expected_line(&keywords, line);
            assert_eq!(got, want, "{}:{}: {line}", file.display(), n + 1);
            checked += 1;
        }
    }
    assert!(checked > 2000, "only {checked} lines");
}
