//! Property tests: any input, and any mutation of a real program, gives diagnostics or bytecode,
//! never a panic. `PROPTEST_CASES=100000 cargo test --release -p sial-compiler --test fuzz` runs
//! a long campaign.

use proptest::prelude::*;
use sial_compiler::{Options, compile_source};
use std::path::{Path, PathBuf};

fn corpus() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in ["programs", "tests/diagnostics", "tests/diagnostics/valid"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "sial")
                    && let Ok(text) = std::fs::read_to_string(&p)
                {
                    out.push((p, text));
                }
            }
        }
    }
    out.sort();
    out
}

fn compile(path: &Path, text: String) {
    let c = compile_source(path, text, &Options::default());
    // Rendering exercises span arithmetic on arbitrary positions.
    let _ = c.diagnostics.render(&c.sources);
    if let Some(p) = c.program {
        let bytes = sial_compiler::bytecode::encode(&p);
        assert_eq!(sial_compiler::bytecode::decode(&bytes).as_ref(), Ok(&p));
        let _ = sial_compiler::bytecode::disassemble(&p, &|_, _| None);
    }
}

/// Tokens SIAL programs are made of, for structured random programs.
const TOKENS: &[&str] = &[
    "sial",
    "endsial",
    "p",
    "\n",
    " ",
    "do",
    "enddo",
    "pardo",
    "endpardo",
    "i",
    "j",
    ",",
    "[",
    "]",
    "(",
    ")",
    "=",
    "+=",
    "-=",
    "*=",
    "+",
    "-",
    "*",
    "/",
    "**",
    "^",
    ":",
    "1",
    "2.5",
    ".5",
    "\"s\"",
    "#c",
    "if",
    "else",
    "endif",
    "where",
    "<",
    "<=",
    "==",
    "index",
    "aoindex",
    "moindex",
    "subindex",
    "of",
    "scalar",
    "int",
    "x",
    "n",
    "local",
    "temp",
    "static",
    "distributed",
    "served",
    "contiguous",
    "predefined",
    "a",
    "b",
    "proc",
    "endproc",
    "call",
    "return",
    "get",
    "put",
    "prepare",
    "request",
    "allocate",
    "deallocate",
    "execute",
    "special",
    "rw",
    "print",
    "println",
    "(int)",
    "(scalar)",
    "(index)",
    "sqrt",
    "section",
    "endsection",
    "gpu_on",
    "gpu_off",
    "collective",
    "exit",
    "sip_barrier",
    "create",
    "delete",
    "import",
    "in",
    "*",
    "99999999999",
    "1.0e5",
    "\r",
];

proptest! {
    // 256 cases per property by default; PROPTEST_CASES raises it for long campaigns.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC*") {
        compile(Path::new("fuzz.sial"), text);
    }

    #[test]
    fn token_soup_never_panics(tokens in prop::collection::vec(0..TOKENS.len(), 0..80)) {
        let text: String = tokens.iter().map(|&t| TOKENS[t]).collect::<Vec<_>>().join(" ");
        compile(Path::new("fuzz.sial"), format!("sial p\n{text}\nendsial p\n"));
    }

    #[test]
    fn mutated_programs_never_panic(pick in any::<prop::sample::Index>(), edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, 0..TOKENS.len()), 1..6)) {
        let corpus = corpus();
        prop_assume!(!corpus.is_empty());
        let (path, text) = &corpus[pick.index(corpus.len())];
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for (at, kind, token) in edits {
            if lines.is_empty() { break; }
            let k = at.index(lines.len());
            match kind {
                0 => { lines.remove(k); }
                1 => { let l = lines[k].clone(); lines.insert(k, l); }
                2 => { let j = (k + 1) % lines.len(); lines.swap(k, j); }
                _ => {
                    let line = &mut lines[k];
                    let cut = line.char_indices().map(|(i, _)| i).nth(line.len() / 2).unwrap_or(0);
                    line.insert_str(cut, TOKENS[token]);
                }
            }
        }
        compile(path, lines.join("\n"));
    }
}

/// The longest and deepest expressions the lexical limits admit compile on a test thread's
/// default stack, in debug builds too.
#[test]
fn deepest_accepted_input_fits_the_stack() {
    let long = vec!["x"; 257].join("+");
    compile(
        Path::new("long.sial"),
        format!("sial p\nscalar x\nx = {long}\nendsial p\n"),
    );
    let deep = format!("{}x{}", "(x*".repeat(100), ")".repeat(100));
    compile(
        Path::new("deep.sial"),
        format!("sial p\nscalar x\nx = {deep}\nendsial p\n"),
    );
    let casts = "(scalar)(int)".repeat(70);
    compile(
        Path::new("casts.sial"),
        format!("sial p\nscalar x\nx = {casts}x\nendsial p\n"),
    );
    let mut nested = String::from("sial p\nindex i = 1:2\nscalar x\n");
    for _ in 0..99 {
        nested.push_str("if x < 1.0\n");
    }
    nested.push_str("x = 1.0\n");
    for _ in 0..99 {
        nested.push_str("endif\n");
    }
    nested.push_str("endsial p\n");
    compile(Path::new("nested.sial"), nested);
}
