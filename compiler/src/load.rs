//! Loads a program and its imports: each file once, imports before importers, cycles reported
//! with the whole chain.

use crate::Options;
use crate::diag::{Diagnostic, Diagnostics};
use crate::source::{FileId, SourceMap};
use crate::syntax::{ast, parse_file};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One parsed file of a compilation.
pub struct LoadedFile {
    pub id: FileId,
    pub ast: ast::File,
    /// Indices (into [`Unit::files`]) of the files this one imports directly, in import order.
    pub imports: Vec<usize>,
}

/// A program and everything it imports, in dependency order: every file comes after the files
/// it imports, and the main program is last.
pub struct Unit {
    pub files: Vec<LoadedFile>,
}

impl Unit {
    pub fn main(&self) -> usize {
        self.files.len() - 1
    }
}

struct Loader<'a> {
    options: &'a Options,
    sources: &'a mut SourceMap,
    diags: &'a mut Diagnostics,
    files: Vec<LoadedFile>,
    done: HashMap<PathBuf, usize>,
    /// Files being loaded (the import chain), for cycle detection.
    active: Vec<(PathBuf, String)>,
}

pub fn load(
    path: &Path,
    text: String,
    options: &Options,
    sources: &mut SourceMap,
    diags: &mut Diagnostics,
) -> Option<Unit> {
    let mut loader = Loader {
        options,
        sources,
        diags,
        files: Vec::new(),
        done: HashMap::new(),
        active: Vec::new(),
    };
    loader.load_file(path.to_path_buf(), text)?;
    Some(Unit {
        files: loader.files,
    })
}

impl Loader<'_> {
    fn load_file(&mut self, path: PathBuf, text: String) -> Option<usize> {
        let key = canonical(&path);
        let id = self.sources.add(path.clone(), text);
        let (ast, parse_diags) = parse_file(id, &self.sources.file(id).text);
        let failed = ast.is_none() || parse_diags.iter().any(Diagnostic::is_error);
        for d in parse_diags {
            self.diags.push(d);
        }
        let ast = ast?;
        self.active.push((key.clone(), path.display().to_string()));
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut imports = Vec::new();
        for import in &ast.imports {
            if let Some(i) = self.import(&dir, import) {
                imports.push(i);
            }
        }
        self.active.pop();
        if failed {
            return None;
        }
        self.files.push(LoadedFile { id, ast, imports });
        let index = self.files.len() - 1;
        self.done.insert(key, index);
        Some(index)
    }

    fn import(&mut self, dir: &Path, import: &ast::Import) -> Option<usize> {
        let Some(path) = self.find(dir, &import.path) else {
            self.diags.push(not_found(import, dir, self.options));
            return None;
        };
        let key = canonical(&path);
        if let Some(start) = self.active.iter().position(|(k, _)| *k == key) {
            let mut chain: Vec<&str> = self.active[start..]
                .iter()
                .map(|(_, shown)| shown.as_str())
                .collect();
            let again = path.display().to_string();
            chain.push(&again);
            self.diags.push(Diagnostic::error(
                import.span,
                format!("cyclic import: {}", chain.join(" imports ")),
            ));
            return None;
        }
        if let Some(&i) = self.done.get(&key) {
            return Some(i);
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => self.load_file(path, text),
            Err(e) => {
                self.diags.push(Diagnostic::error(
                    import.span,
                    format!("cannot read imported file {}: {e}", path.display()),
                ));
                None
            }
        }
    }

    /// Search order: the importing file's directory, the `-I` directories, then `SIALPATH`.
    fn find(&self, dir: &Path, name: &str) -> Option<PathBuf> {
        std::iter::once(dir)
            .chain(self.options.include_dirs.iter().map(PathBuf::as_path))
            .chain(self.options.sialpath.iter().map(PathBuf::as_path))
            .map(|d| {
                if d.as_os_str().is_empty() {
                    PathBuf::from(name)
                } else {
                    d.join(name)
                }
            })
            .find(|p| p.is_file())
    }
}

fn not_found(import: &ast::Import, dir: &Path, options: &Options) -> Diagnostic {
    let mut searched: Vec<String> = vec![if dir.as_os_str().is_empty() {
        ".".into()
    } else {
        dir.display().to_string()
    }];
    searched.extend(options.include_dirs.iter().map(|d| d.display().to_string()));
    searched.extend(options.sialpath.iter().map(|d| d.display().to_string()));
    Diagnostic::error(
        import.span,
        format!("imported file \"{}\" not found", import.path),
    )
    .with_note(format!(
        "searched: {} (add a directory with -I DIR or SIALPATH)",
        searched.join(", ")
    ))
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
