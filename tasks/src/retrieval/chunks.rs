//! Project files -> cross files by distance -> chunks: the official builder's
//! `read_project_files`, `find_files_within_distance_k`, `file_distance` and chunking.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use super::tokenize::Tokenizer;
use super::{rank, RetrievalError};
use crate::cceval::Language;
use crate::pycompat::text::py_strip;

/// Lines per chunk (`CHUNK_SIZE`, equal to `SLIDING_WINDOW_SIZE`: windows do not overlap).
pub const CHUNK_LINES: usize = 10;

/// One source file of a project, as the builder holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectFile {
    /// Path relative to the repository root, `/`-separated.
    pub path: String,
    /// Text as Python's `open(f, "r").read()` gives it (see [`python_read`]).
    pub content: String,
}

/// Python `open(f, "r").read()` under a UTF-8 locale: strict UTF-8 with universal newlines
/// (`\r\n` and lone `\r` become `\n`; a BOM stays); when that fails the builder re-reads the
/// bytes with `decode(errors="replace")`, which replaces invalid sequences and translates no
/// newlines.
pub fn python_read(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\r') => text.to_string(),
        Ok(text) => text.replace("\r\n", "\n").replace('\r', "\n"),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn io_error(path: &Path, error: std::io::Error) -> RetrievalError {
    RetrievalError::Io { path: path.display().to_string(), message: error.to_string() }
}

/// Python `glob` with `recursive=True` for `dir/**/*<suffix>`: hidden names (leading `.`) are
/// skipped at every level; symbolic links are followed; only regular files are kept.
fn glob_suffix(dir: &Path, rel: &str, suffix: &str, out: &mut Vec<(String, std::path::PathBuf)>) -> Result<(), RetrievalError> {
    let mut ancestors = Vec::new();
    glob_walk(dir, rel, suffix, &mut ancestors, out)
}

/// One directory of [`glob_suffix`]. `ancestors` holds the canonical directories being walked:
/// a symbolic link back into one of them is not followed (Python would loop until the path
/// is too long).
fn glob_walk(
    dir: &Path,
    rel: &str,
    suffix: &str,
    ancestors: &mut Vec<std::path::PathBuf>,
    out: &mut Vec<(String, std::path::PathBuf)>,
) -> Result<(), RetrievalError> {
    let Ok(canonical) = dir.canonicalize() else { return Ok(()) };
    if ancestors.contains(&canonical) {
        return Ok(());
    }
    ancestors.push(canonical);
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(_) => return Ok(()), // glob ignores unreadable directories
    };
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if meta.is_dir() {
            glob_walk(&path, &child, suffix, ancestors, out)?;
        } else if meta.is_file() && name.ends_with(suffix) {
            out.push((child, path));
        }
    }
    ancestors.pop();
    Ok(())
}

/// `read_project_files`: every source file of the repository at `root` (TypeScript: `.ts`
/// and `.tsx` under `src/`; others: `**/*.py|java|cs`), keyed by relative path and sorted.
/// A missing root gives an empty list, as in the builder.
pub fn read_project(root: &Path, language: Language) -> Result<Vec<ProjectFile>, RetrievalError> {
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    match language {
        Language::TypeScript => {
            glob_suffix(&root.join("src"), "src", ".ts", &mut found)?;
            glob_suffix(&root.join("src"), "src", ".tsx", &mut found)?;
        }
        Language::Python => glob_suffix(root, "", ".py", &mut found)?,
        Language::Java => glob_suffix(root, "", ".java", &mut found)?,
        Language::CSharp => glob_suffix(root, "", ".cs", &mut found)?,
    }
    found.sort();
    found.dedup_by(|a, b| a.0 == b.0);
    found
        .into_par_iter()
        .map(|(rel, path)| {
            let bytes = std::fs::read(&path).map_err(|e| io_error(&path, e))?;
            Ok(ProjectFile { path: rel, content: python_read(&bytes) })
        })
        .collect()
}

/// `file_distance(a, b)`: the number of `/` in each path relative to their common path,
/// summed (`a/b.py`, `a/c.py` -> 0; `a.py`, `b/c.py` -> 1; `x/a.py`, `y/b.py` -> 2).
pub fn file_distance(a: &str, b: &str) -> usize {
    let pa: Vec<&str> = a.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let pb: Vec<&str> = b.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let common = pa.iter().zip(&pb).take_while(|(x, y)| x == y).count();
    pa.len().saturating_sub(common + 1) + pb.len().saturating_sub(common + 1)
}

/// `find_files_within_distance_k` then the `maximum_cross_files` cut: indices of the other
/// files within `max_distance` of `current`, by (distance, path), at most `max_files`.
pub fn cross_files(paths: &[&str], current: &str, max_distance: usize, max_files: usize) -> Vec<usize> {
    let mut near: Vec<(usize, &str, usize)> = paths
        .iter()
        .enumerate()
        .filter(|(_, p)| **p != current)
        .map(|(i, p)| (file_distance(p, current), *p, i))
        .filter(|(d, _, _)| *d <= max_distance)
        .collect();
    near.sort();
    near.into_iter().take(max_files).map(|(_, _, i)| i).collect()
}

/// The text windows of one file: `content.split("\n")`, lines that are blank after Python
/// `strip()` dropped, windows of [`CHUNK_LINES`] joined by `"\n"`.
pub fn windows(content: &str) -> Vec<String> {
    let lines: Vec<&str> = content.split('\n').filter(|l| !py_strip(l).is_empty()).collect();
    lines.chunks(CHUNK_LINES).map(|w| w.join("\n")).collect()
}

/// One chunk: text, and the term counts of the token stream its ranking function uses.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// The chunk text.
    pub text: String,
    /// Token count (document length for BM25).
    pub len: usize,
    /// [`rank::term_counts`] of the ranking tokens.
    pub counts: Vec<(u32, u32)>,
}

/// A file's chunks; chunk `k` has id `"<path>|<k>"` (windows without tokens take no id).
#[derive(Debug, Clone)]
pub struct ChunkedFile {
    /// Relative path.
    pub path: String,
    /// The file's chunks in order.
    pub chunks: Vec<Chunk>,
}

/// A repository read and chunked once, shared by all its examples.
#[derive(Debug, Default)]
pub struct RepoIndex {
    /// Files sorted by path.
    pub files: Vec<ChunkedFile>,
    by_path: HashMap<String, usize>,
    vocab: HashMap<String, u32>,
}

impl RepoIndex {
    /// Chunks every file. A window is kept iff `tokenize_nltk(window)` is non-empty; the ranking
    /// tokens are those of the lowercased window when `lowercase` (TF-IDF), else the same tokens.
    pub fn build(files: Vec<ProjectFile>, tokenizer: &Tokenizer, lowercase: bool) -> Self {
        // (path, [(window text, ranking tokens)]) per file.
        type Tokenized = (String, Vec<(String, Vec<String>)>);
        let tokenized: Vec<Tokenized> = files
            .into_par_iter()
            .map(|f| {
                let chunks = windows(&f.content)
                    .into_iter()
                    .filter_map(|w| {
                        let tokens = tokenizer.tokenize(&w);
                        if tokens.is_empty() {
                            return None;
                        }
                        let tokens = if lowercase { tokenizer.tokenize(&w.to_lowercase()) } else { tokens };
                        Some((w, tokens))
                    })
                    .collect();
                (f.path, chunks)
            })
            .collect();
        let mut index = Self::default();
        for (path, chunks) in tokenized {
            let chunks = chunks
                .into_iter()
                .map(|(text, tokens)| {
                    let ids: Vec<u32> = tokens.iter().map(|t| index.intern(t)).collect();
                    Chunk { text, len: ids.len(), counts: rank::term_counts(&ids) }
                })
                .collect();
            index.by_path.insert(path.clone(), index.files.len());
            index.files.push(ChunkedFile { path, chunks });
        }
        index.number_in_string_order();
        index
    }

    /// Renumbers the vocabulary so that id order is the words' string order (scikit-learn's
    /// column order, which TF-IDF sums follow).
    fn number_in_string_order(&mut self) {
        let mut words: Vec<(&String, u32)> = self.vocab.iter().map(|(w, &id)| (w, id)).collect();
        words.sort_unstable();
        let mut new_id = vec![0u32; words.len()];
        for (rank, (_, old)) in words.iter().enumerate() {
            new_id[*old as usize] = rank as u32;
        }
        for v in self.vocab.values_mut() {
            *v = new_id[*v as usize];
        }
        for chunk in self.files.iter_mut().flat_map(|f| f.chunks.iter_mut()) {
            chunk.counts.iter_mut().for_each(|(t, _)| *t = new_id[*t as usize]);
        }
    }

    fn intern(&mut self, token: &str) -> u32 {
        if let Some(&id) = self.vocab.get(token) {
            return id;
        }
        let id = self.vocab.len() as u32;
        self.vocab.insert(token.to_string(), id);
        id
    }

    /// Index of the file with this relative path.
    pub fn file(&self, path: &str) -> Option<usize> {
        self.by_path.get(path).copied()
    }

    /// Token ids of a query; words outside the repository's vocabulary get fresh ids (distinct
    /// per distinct word), so they count in set sizes but match nothing.
    pub fn query_ids(&self, tokens: &[String]) -> Vec<u32> {
        let mut unknown: HashMap<&str, u32> = HashMap::new();
        let base = self.vocab.len() as u32;
        tokens
            .iter()
            .map(|t| match self.vocab.get(t.as_str()) {
                Some(&id) => id,
                None => {
                    let next = base + unknown.len() as u32;
                    *unknown.entry(t.as_str()).or_insert(next)
                }
            })
            .collect()
    }
}

/// Reference to chunk `chunk` of file `file` in a [`RepoIndex`].
pub type ChunkRef = (usize, usize);

/// All chunks of the cross files in order (nearest files first), as `(file, chunk)`.
pub fn cross_chunks(index: &RepoIndex, cross: &[usize]) -> Vec<ChunkRef> {
    cross.iter().flat_map(|&f| (0..index.files[f].chunks.len()).map(move |k| (f, k))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_separators_below_the_common_path() {
        assert_eq!(file_distance("a/b.py", "a/c.py"), 0);
        assert_eq!(file_distance("a.py", "b/c.py"), 1);
        assert_eq!(file_distance("x/a.py", "y/b.py"), 2);
        assert_eq!(file_distance("p/q/r/a.py", "p/b.py"), 2);
    }

    #[test]
    fn cross_files_sorted_by_distance_then_path() {
        let paths = ["z.py", "pkg/a.py", "pkg/cur.py", "b.py", "pkg/sub/c.py"];
        let picked = cross_files(&paths, "pkg/cur.py", 100, 1000);
        let names: Vec<&str> = picked.iter().map(|&i| paths[i]).collect();
        assert_eq!(names, ["pkg/a.py", "b.py", "pkg/sub/c.py", "z.py"]);
        assert_eq!(cross_files(&paths, "pkg/cur.py", 0, 1000).len(), 1);
        assert_eq!(cross_files(&paths, "pkg/cur.py", 100, 2).len(), 2);
    }

    #[test]
    fn python_read_translates_newlines_only_when_strict_utf8_succeeds() {
        assert_eq!(python_read(b"a\r\nb\rc\n"), "a\nb\nc\n");
        assert_eq!(python_read(b"\xef\xbb\xbfx"), "\u{feff}x");
        assert_eq!(python_read(b"a\r\n\xff"), "a\r\n\u{fffd}");
    }

    #[test]
    fn glob_skips_hidden_names_and_follows_links_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, text) in [("a.py", "x"), ("pkg/b.py", "y"), (".hidden/c.py", "z"), ("pkg/.d.py", "w"), ("pkg/e.pyc", "v")] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        std::fs::create_dir_all(root.join("src/x.ts")).unwrap(); // a directory named like a source file
        std::fs::write(root.join("src/x.ts/y.tsx"), "t").unwrap();
        std::fs::write(root.join("src/z.d.ts"), "d").unwrap();
        std::fs::write(root.join("top.ts"), "not under src").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("pkg"), root.join("pkg/loop")).unwrap();
        let paths = |language| read_project(root, language).unwrap().into_iter().map(|f| f.path).collect::<Vec<_>>();
        let python = paths(Language::Python);
        assert!(python.starts_with(&["a.py".to_string(), "pkg/b.py".to_string()]), "{python:?}");
        assert!(python.iter().all(|p| !p.contains(".hidden") && !p.ends_with(".d.py") && !p.ends_with(".pyc")));
        assert_eq!(paths(Language::TypeScript), ["src/x.ts/y.tsx", "src/z.d.ts"]);
        assert!(read_project(&root.join("absent"), Language::Java).unwrap().is_empty());
    }

    #[test]
    fn windows_skip_blank_lines() {
        let text = (0..23).map(|i| if i % 2 == 0 { format!("l{i}") } else { " \t\u{1c}".into() }).collect::<Vec<_>>().join("\n");
        let w = windows(&text);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].lines().count(), 10);
        assert!(w[1].starts_with("l20\nl22"));
    }

    #[test]
    fn windows_without_tokens_take_no_id() {
        let files = vec![ProjectFile {
            path: "a.py".into(),
            content: (0..30).map(|i| if (10..20).contains(&i) { "# ---".to_string() } else { format!("x{i}") }).collect::<Vec<_>>().join("\n"),
        }];
        let index = RepoIndex::build(files, &Tokenizer::default(), false);
        let chunks = &index.files[0].chunks;
        assert_eq!(chunks.len(), 2);
        assert!(chunks[1].text.starts_with("x20"));
    }
}
