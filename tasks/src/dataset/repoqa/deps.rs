//! File dependencies from imports, per language, in the spirit of the curation scripts'
//! analysers (`scripts/curate/dep_analysis/*`): Python `import`/`from` statements resolved to
//! modules (pydeps), C/C++ `#include` searched in the file's folder and include folders,
//! Java imports plus same-package class references (DepAnalyze.java), TypeScript relative
//! imports (dep-tree), Rust `mod` declarations and `crate::`/`super::`/`self::` paths
//! (cargo-modules). Only files of `content` are ever dependencies, and every file is a key.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use tree_sitter::{Node, Parser};

use super::files::{join, normalize, parent, SourceText};
use crate::repoqa::code::CodeTools;
use crate::repoqa::{Language, RepoqaGrammars};

/// `{path: [imported paths]}` for every file, in path order; each list sorted, without the
/// file itself.
pub fn analyze(language: Language, files: &[SourceText], entry: &str, grammars: &RepoqaGrammars) -> Vec<(String, Vec<String>)> {
    let known: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let mut tools = CodeTools::new(language, grammars);
    let rust_modules = (language == Language::Rust).then(|| RustModules::new(files, entry));
    let mut parser = Parser::new();
    let grammar = grammars.grammar(language);
    let parser_ok = parser.set_language(&grammar).is_ok();
    files
        .iter()
        .map(|file| {
            let found: Vec<String> = match language {
                Language::Python if parser_ok => python_imports(file, entry, &known, &mut parser),
                Language::Python => Vec::new(),
                Language::Cpp => cpp_includes(file, entry, &known),
                Language::Java => java_imports(file, &known, &tools.remove_comments(&file.text), &mut parser),
                Language::TypeScript => typescript_imports(file, &known, &tools.remove_comments(&file.text)),
                Language::Rust => rust_modules.as_ref().map_or_else(Vec::new, |m| m.uses(file, &tools.remove_comments(&file.text))),
            };
            let deps: BTreeSet<String> = found.into_iter().filter(|d| *d != file.path && known.contains(d.as_str())).collect();
            (file.path.clone(), deps.into_iter().collect())
        })
        .collect()
}

fn text<'a>(node: Node, source: &'a str) -> &'a str {
    source.get(node.start_byte()..node.end_byte()).unwrap_or("")
}

/// Every node of the tree, depth first.
fn walk<'t>(root: Node<'t>, mut visit: impl FnMut(Node<'t>)) {
    let mut cursor = root.walk();
    'outer: loop {
        visit(cursor.node());
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                break 'outer;
            }
            if cursor.goto_next_sibling() {
                continue 'outer;
            }
        }
    }
}

/// `module/path` as a file: `module/path.py` or `module/path/__init__.py`.
fn python_module(base: &str, known: &HashSet<&str>) -> Option<String> {
    [format!("{base}.py"), format!("{base}/__init__.py")].into_iter().find(|p| known.contains(p.as_str()))
}

fn python_imports(file: &SourceText, entry: &str, known: &HashSet<&str>, parser: &mut Parser) -> Vec<String> {
    let Some(tree) = parser.parse(&file.text, None) else { return Vec::new() };
    let source = file.text.as_str();
    // Absolute imports resolve from the entry's ancestors (and the entry itself when it is a
    // source folder rather than a package), as Python's path would have them.
    let entry = entry.trim_matches('/');
    let mut roots: Vec<String> = vec![String::new()];
    let mut acc = String::new();
    for part in entry.split('/').filter(|p| !p.is_empty()) {
        acc = join(&acc, part);
        roots.push(acc.clone());
    }
    if !entry.is_empty() && known.contains(join(entry, "__init__.py").as_str()) {
        roots.retain(|r| r != entry);
    }
    let mut out = Vec::new();
    // `from X import a, b`: the submodules `X.a`, `X.b` when they exist, else `X` itself.
    let mut resolve = |bases: Vec<String>, names: &[String]| {
        for base in bases {
            let submodules: Vec<String> = names.iter().filter_map(|name| python_module(&join(&base, name), known)).collect();
            if submodules.is_empty() {
                out.extend(python_module(&base, known));
            }
            out.extend(submodules);
        }
    };
    let mut statements = Vec::new();
    walk(tree.root_node(), |node| {
        if node.kind() == "import_statement" || node.kind() == "import_from_statement" {
            statements.push(node);
        }
    });
    for node in statements {
        let mut cursor = node.walk();
        let names: Vec<String> = node
            .children_by_field_name("name", &mut cursor)
            .map(|n| {
                let n = if n.kind() == "aliased_import" { n.child_by_field_name("name").unwrap_or(n) } else { n };
                text(n, source).replace('.', "/")
            })
            .collect();
        if node.kind() == "import_statement" {
            for name in names {
                resolve(roots.iter().map(|r| join(r, &name)).collect(), &[]);
            }
            continue;
        }
        let Some(module) = node.child_by_field_name("module_name") else { continue };
        let module_text = text(module, source);
        let dots = module_text.chars().take_while(|&c| c == '.').count();
        let path = module_text[dots..].trim().replace('.', "/");
        if dots > 0 {
            let mut base = parent(&file.path).to_string();
            for _ in 1..dots {
                base = parent(&base).to_string();
            }
            let base = if path.is_empty() { base } else { join(&base, &path) };
            resolve(vec![base], &names);
        } else {
            resolve(roots.iter().map(|r| join(r, &path)).collect(), &names);
        }
    }
    out
}

/// The curation script's include folders: the root and every folder named like one.
const INCLUDE_DIR_NAMES: [&str; 7] = ["include", "src", "lib", "libs", "library", "libraries", "inc"];

fn cpp_includes(file: &SourceText, entry: &str, known: &HashSet<&str>) -> Vec<String> {
    let mut dirs: BTreeSet<&str> = BTreeSet::new();
    for path in known {
        let mut dir = parent(path);
        while !dir.is_empty() {
            if INCLUDE_DIR_NAMES.contains(&dir.rsplit('/').next().unwrap_or(dir)) {
                dirs.insert(dir);
            }
            dir = parent(dir);
        }
    }
    let mut search: Vec<&str> = vec![parent(&file.path), ""];
    search.extend(dirs);
    let mut out = Vec::new();
    for line in file.text.split('\n') {
        let words: Vec<&str> = line.split_whitespace().collect();
        let include = match words.as_slice() {
            [first, name, ..] if *first == "#include" => *name,
            [hash, word, name, ..] if *hash == "#" && *word == "include" => *name,
            [first] if first.starts_with("#include") => first.trim_start_matches("#include"),
            _ => continue,
        };
        if !(include.starts_with('"') || include.starts_with('<')) || !include.contains('.') || include.len() < 2 {
            continue;
        }
        let include = &include[1..include.len() - 1];
        // Only folders inside the entry count, as `entrypoint in str(possible_path)`.
        let found = search
            .iter()
            .filter(|dir| entry.is_empty() || dir.contains(entry))
            .filter_map(|dir| normalize(&join(dir, include)))
            .find(|p| known.contains(p.as_str()));
        out.extend(found);
    }
    out
}

static JAVA_PACKAGE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^\s*package\s+([\w.]+)\s*;").expect("static regex"));
static JAVA_IMPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*import\s+(?:static\s+)?([\w.]+?)(\.\*)?\s*;").expect("static regex"));

fn java_imports(file: &SourceText, known: &HashSet<&str>, code: &str, parser: &mut Parser) -> Vec<String> {
    let dir = parent(&file.path);
    // The source root: the file's folder less its package's folders.
    let package = JAVA_PACKAGE.captures(code).and_then(|c| c.get(1)).map_or("", |m| m.as_str()).replace('.', "/");
    let root = match dir.strip_suffix(&package) {
        Some(r) if !package.is_empty() => r.trim_end_matches('/').to_string(),
        _ => dir.to_string(),
    };
    let mut out = Vec::new();
    for c in JAVA_IMPORT.captures_iter(code) {
        let name = c.get(1).map_or("", |m| m.as_str()).replace('.', "/");
        let class = join(&root, &format!("{name}.java"));
        if known.contains(class.as_str()) {
            out.push(class);
        } else if c.get(2).is_some() {
            let folder = join(&root, &name);
            out.extend(known.iter().filter(|p| parent(p) == folder && p.ends_with(".java")).map(|p| p.to_string()));
        } else if let Some(outer) = name.rsplit_once('/').map(|(o, _)| join(&root, &format!("{o}.java"))) {
            // `import static a.B.member;` or a nested class: the enclosing class's file.
            if known.contains(outer.as_str()) {
                out.push(outer);
            }
        }
    }
    // Classes of the same package referred to by name.
    let siblings: HashMap<&str, &str> = known
        .iter()
        .filter(|p| parent(p) == dir && **p != file.path)
        .filter_map(|p| p.rsplit('/').next().and_then(|n| n.strip_suffix(".java")).map(|stem| (stem, *p)))
        .collect();
    if let Some(tree) = parser.parse(code, None) {
        walk(tree.root_node(), |node| {
            if node.kind() == "identifier" || node.kind() == "type_identifier" {
                if let Some(path) = siblings.get(text(node, code)) {
                    out.push(path.to_string());
                }
            }
        });
    }
    out
}

static TS_IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:\b(?:import|export)\b[^;'"]*?\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"](\.{1,2}/[^'"]*|\.{1,2})['"]"#)
        .expect("static regex")
});

fn typescript_imports(file: &SourceText, known: &HashSet<&str>, code: &str) -> Vec<String> {
    let dir = parent(&file.path);
    TS_IMPORT
        .captures_iter(code)
        .filter_map(|c| c.get(1))
        .filter_map(|spec| normalize(&join(dir, spec.as_str())))
        .filter_map(|base| {
            let stem = base.strip_suffix(".js").unwrap_or(&base).to_string();
            [
                base.clone(),
                format!("{base}.ts"),
                format!("{stem}.ts"),
                format!("{base}.tsx"),
                format!("{base}.js"),
                format!("{base}/index.ts"),
                format!("{base}/index.js"),
            ]
            .into_iter()
            .find(|p| known.contains(p.as_str()))
        })
        .collect()
}

static RUST_MOD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(\w+)\s*;").expect("static regex"));
static RUST_USE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?s)\buse\s+([^;]+);").expect("static regex"));
static RUST_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:crate|super|self)(?:\s*::\s*\w+)+").expect("static regex"));

/// The crate's module tree derived from file paths: `lib.rs`/`main.rs` is the root,
/// `a/mod.rs` and `a.rs` are `a`, `a/b.rs` is `a::b`.
struct RustModules {
    by_module: HashMap<Vec<String>, String>,
    by_file: HashMap<String, Vec<String>>,
}

impl RustModules {
    fn new(files: &[SourceText], entry: &str) -> Self {
        // The crate root folder: the shallowest folder holding lib.rs or main.rs, else the entry.
        let root = files
            .iter()
            .filter(|f| f.path.ends_with("/lib.rs") || f.path.ends_with("/main.rs") || f.path == "lib.rs" || f.path == "main.rs")
            .map(|f| parent(&f.path))
            .min_by_key(|d| (d.matches('/').count(), d.len()))
            .unwrap_or(entry.trim_matches('/'))
            .to_string();
        let mut by_module = HashMap::new();
        let mut by_file = HashMap::new();
        for f in files {
            let rel = if root.is_empty() { Some(f.path.as_str()) } else { f.path.strip_prefix(&format!("{root}/")) };
            let Some(rel) = rel else { continue };
            let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
            if parts.last().is_some_and(|l| l == "mod") || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main")) {
                parts.pop();
            }
            // With both lib.rs and main.rs, lib.rs (first in path order) is the crate root.
            by_file.insert(f.path.clone(), parts.clone());
            if parts.is_empty() && by_module.contains_key(&parts) {
                continue;
            }
            by_module.insert(parts, f.path.clone());
        }
        Self { by_module, by_file }
    }

    /// The files `file` depends on: its `mod x;` children and the modules its paths name.
    fn uses(&self, file: &SourceText, code: &str) -> Vec<String> {
        let Some(module) = self.by_file.get(&file.path) else { return Vec::new() };
        let mut out = Vec::new();
        for c in RUST_MOD.captures_iter(code) {
            let mut child = module.clone();
            child.push(c[1].to_string());
            out.extend(self.by_module.get(&child).cloned());
        }
        let mut paths: Vec<Vec<String>> = Vec::new();
        for c in RUST_USE.captures_iter(code) {
            expand_use(&c[1].split_whitespace().collect::<Vec<_>>().join(" "), &mut paths);
        }
        for m in RUST_PATH.find_iter(code) {
            paths.push(m.as_str().split("::").map(|s| s.trim().to_string()).collect());
        }
        for path in paths {
            out.extend(self.resolve(module, &path));
        }
        out
    }

    /// The file of the deepest module `path` names from `module`; `None` for other crates.
    fn resolve(&self, module: &[String], path: &[String]) -> Option<String> {
        let first = path.first()?.trim_start_matches("::");
        let (mut base, rest): (Vec<String>, &[String]) = match first {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (module.to_vec(), &path[1..]),
            "super" => {
                let mut base = module.to_vec();
                let mut i = 0;
                while path.get(i).is_some_and(|s| s == "super") {
                    base.pop();
                    i += 1;
                }
                (base, &path[i..])
            }
            name => {
                // 2018 uniform paths: a child module of the current one.
                let mut child = module.to_vec();
                child.push(name.to_string());
                if !self.by_module.contains_key(&child) {
                    return None;
                }
                (child, &path[1..])
            }
        };
        for segment in rest {
            let mut next = base.clone();
            next.push(segment.clone());
            if !self.by_module.contains_key(&next) {
                break;
            }
            base = next;
        }
        self.by_module.get(&base).cloned()
    }
}

/// Expands one `use` tree (whitespace collapsed to single spaces) into plain paths: `a::{b, c::{d, e}}` gives
/// `a::b`, `a::c::d`, `a::c::e`; `as` renames and globs are dropped.
fn expand_use(tree: &str, out: &mut Vec<Vec<String>>) {
    fn split_top(list: &str) -> Vec<&str> {
        let (mut depth, mut start, mut parts) = (0usize, 0usize, Vec::new());
        for (i, c) in list.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    parts.push(&list[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&list[start..]);
        parts
    }
    fn go(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        let tree = tree.trim();
        if tree.is_empty() {
            return;
        }
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
            let inner = tree[open + 1..].strip_suffix('}').unwrap_or(&tree[open + 1..]);
            let mut base = prefix.to_vec();
            base.extend(head);
            for part in split_top(inner) {
                go(&base, part, out);
            }
            return;
        }
        let plain = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix.to_vec();
        path.extend(plain.split("::").map(str::trim).filter(|s| !s.is_empty() && *s != "*").map(str::to_string));
        if path.last().is_some_and(|s| s == "self") {
            path.pop();
        }
        out.push(path);
    }
    go(&[], tree, out);
}
