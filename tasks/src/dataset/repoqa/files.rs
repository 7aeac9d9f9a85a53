//! The repository's `content`: the files under the entry directory with the language's
//! suffixes (the curation scripts' `lang2suffix`), read as Python's text mode reads them
//! (UTF-8, universal newlines), sorted by path.

use std::path::Path;

use super::CurateError;
use crate::repoqa::Language;

/// One source file of the dataset's `content`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceText {
    /// Path relative to the repository root, `/`-separated.
    pub path: String,
    /// The text, `\r\n` and `\r` turned into `\n`.
    pub text: String,
}

/// The suffixes the official curation takes for each language (`scripts/curate/utility.py`).
pub fn suffixes(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => &[".py"],
        Language::Cpp => &[".cpp", ".hpp", ".cc", ".hh", ".cxx", ".hxx", ".c", ".h"],
        Language::Java => &[".java"],
        Language::TypeScript => &[".ts", ".js"],
        Language::Rust => &[".rs"],
    }
}

/// The entry directory used when none is given: the first of the language's usual source
/// folders that exists (`src/main/java` for Java, `src` otherwise), else the root (`""`).
pub fn default_entry(root: &Path, language: Language) -> String {
    let candidates: &[&str] = match language {
        Language::Java => &["src/main/java", "src"],
        _ => &["src", "lib"],
    };
    candidates.iter().find(|c| root.join(c).is_dir()).map_or_else(String::new, |c| c.to_string())
}

/// Files read, and files left out because they are not UTF-8.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// Files in path order.
    pub files: Vec<SourceText>,
    /// Paths skipped because their bytes are not UTF-8 (the official `open().read()` fails on them).
    pub not_utf8: Vec<String>,
}

/// Reads every file under `root/entry` whose name ends with one of the language's suffixes,
/// skipping hidden entries and the sub-directories `exclude` (relative to `entry`).
pub fn read_sources(root: &Path, entry: &str, language: Language, exclude: &[String]) -> Result<Sources, CurateError> {
    let start = root.join(entry);
    if !start.is_dir() {
        return Err(CurateError::Io { path: start.display().to_string(), message: "the entry directory does not exist".into() });
    }
    let excluded: Vec<String> = exclude.iter().map(|e| join(entry, e.trim_matches('/'))).collect();
    let mut sources = Sources::default();
    let mut stack = vec![entry.trim_matches('/').to_string()];
    while let Some(dir) = stack.pop() {
        let full = root.join(&dir);
        let read = std::fs::read_dir(&full).map_err(|e| CurateError::Io { path: full.display().to_string(), message: e.to_string() })?;
        for item in read {
            let item = item.map_err(|e| CurateError::Io { path: full.display().to_string(), message: e.to_string() })?;
            let name = item.file_name().to_string_lossy().to_string();
            if name.starts_with('.') {
                continue;
            }
            let rel = join(&dir, &name);
            let kind = item.file_type().map_err(|e| CurateError::Io { path: rel.clone(), message: e.to_string() })?;
            if kind.is_dir() {
                if !excluded.contains(&rel) {
                    stack.push(rel);
                }
            } else if kind.is_file() && suffixes(language).iter().any(|s| name.ends_with(s)) {
                let bytes = std::fs::read(item.path()).map_err(|e| CurateError::Io { path: rel.clone(), message: e.to_string() })?;
                match String::from_utf8(bytes) {
                    Ok(text) => sources.files.push(SourceText { path: rel, text: universal_newlines(&text) }),
                    Err(_) => sources.not_utf8.push(rel),
                }
            }
        }
    }
    sources.files.sort_by(|a, b| a.path.cmp(&b.path));
    sources.not_utf8.sort();
    Ok(sources)
}

/// Python's text-mode reading: `\r\n` and lone `\r` become `\n`.
pub fn universal_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// `a/b` without a leading slash when `a` is empty.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Resolves `.` and `..` segments of a `/`-separated relative path; `None` when it climbs above the root.
pub fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The directory part of a relative path (`""` for a file at the root).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_and_join() {
        assert_eq!(normalize("a/./b/../c.h").as_deref(), Some("a/c.h"));
        assert_eq!(normalize("../x"), None);
        assert_eq!(join("", "a.py"), "a.py");
        assert_eq!(parent("a/b/c.rs"), "a/b");
        assert_eq!(parent("c.rs"), "");
        assert_eq!(universal_newlines("a\r\nb\rc\n"), "a\nb\nc\n");
    }

    #[test]
    fn reads_matching_utf8_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, bytes) in [
            ("src/b.ts", &b"let b = 1;\r\n"[..]),
            ("src/a.js", b"a"),
            ("src/x.py", b"no"),
            ("src/.hidden/h.ts", b"no"),
            ("src/gen/g.ts", b"excluded"),
            ("src/bad.ts", b"\xff\xfe"),
            ("top.ts", b"outside the entry"),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), bytes).unwrap();
        }
        assert_eq!(default_entry(root, Language::TypeScript), "src");
        let sources = read_sources(root, "src", Language::TypeScript, &["gen".to_string()]).unwrap();
        let paths: Vec<&str> = sources.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["src/a.js", "src/b.ts"]);
        assert_eq!(sources.files[1].text, "let b = 1;\n");
        assert_eq!(sources.not_utf8, ["src/bad.ts"]);
        assert!(read_sources(root, "nope", Language::TypeScript, &[]).is_err());
    }
}
