//! The parts of the official RepoQA dataset that context construction reads: every file's
//! text in the reference's file order (`topological_sort(dependency)`) and the needles'
//! byte ranges and descriptions.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::repoqa::{decode_languages, prefix, usize_field};
use crate::input::{field, kind, str_field, FieldError, RecordError};

/// One source file of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path relative to the repository, as `content` and `dependency` key it.
    pub path: String,
    /// The file's text.
    pub text: String,
}

/// A needle as context construction sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceNeedle {
    /// Function name.
    pub name: String,
    /// File holding the function.
    pub path: String,
    /// `start_byte`: a UTF-8 offset in the dataset, which the reference uses as a character
    /// index (see [`super::CodeContext::needle_slice_byte_char_mismatch`]).
    pub start_byte: usize,
    /// `end_byte`, used like `start_byte`.
    pub end_byte: usize,
    /// The natural-language description the prompt gives the model.
    pub description: String,
}

/// One repository: files in the reference's order and its needles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRepo {
    /// Repository name (`repo`).
    pub name: String,
    /// Files in `topological_sort(dependency)` order; `content` files that are not in the
    /// dependency graph are left out, as the reference leaves them out.
    pub files: Vec<SourceFile>,
    /// The needles in dataset order (task `i` has position ratio `(i + 0.5) / len`). Empty
    /// when the repository has no `needles`, which the reference skips.
    pub needles: Vec<SourceNeedle>,
}

/// The official dataset `{lang: [repo, ...]}` with what context construction needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceDataset {
    /// `(language key, repositories)` in file order.
    pub languages: Vec<(String, Vec<SourceRepo>)>,
}

impl SourceDataset {
    /// Decodes the official dataset JSON (objects must keep their key order, as serde_json's
    /// `preserve_order` does: the file order depends on it). Errors name the field path,
    /// e.g. `python[2].needles[3].end_byte`.
    pub fn from_json(file: &str, value: &Value) -> Result<Self, RecordError> {
        Ok(Self { languages: decode_languages(file, value, decode_repo)? })
    }

    /// The repositories of `language`, if the dataset has that key.
    pub fn repos(&self, language: &str) -> Option<&[SourceRepo]> {
        self.languages.iter().find(|(key, _)| key == language).map(|(_, repos)| repos.as_slice())
    }
}

/// The reference's `topological_sort`: a depth-first search from every key in order,
/// visiting a node's dependencies in order and emitting it after them (post-order). A
/// cycle is cut where it closes (a node already being visited counts as visited);
/// dependencies that are not keys are emitted as leaves.
pub fn topological_sort(graph: &[(String, Vec<String>)]) -> Vec<&str> {
    let edges: HashMap<&str, &[String]> = graph.iter().map(|(node, deps)| (node.as_str(), deps.as_slice())).collect();
    let mut visited: HashSet<&str> = HashSet::new();
    let mut order = Vec::new();
    for (root, _) in graph {
        if !visited.insert(root.as_str()) {
            continue;
        }
        // Explicit stack of (node, next dependency index): the recursion of the reference,
        // without its depth limit.
        let mut frames: Vec<(&str, usize)> = vec![(root.as_str(), 0)];
        while let Some((node, next)) = frames.last_mut() {
            let deps = edges.get(*node).copied().unwrap_or_default();
            match deps.get(*next) {
                Some(dep) => {
                    *next += 1;
                    if visited.insert(dep.as_str()) {
                        frames.push((dep.as_str(), 0));
                    }
                }
                None => {
                    order.push(*node);
                    frames.pop();
                }
            }
        }
    }
    order
}

fn object<'a>(value: &'a Value, name: &str) -> Result<&'a Map<String, Value>, FieldError> {
    let found = field(value, name)?;
    found.as_object().ok_or_else(|| FieldError { field: name.into(), message: format!("expected an object, found {}", kind(found)) })
}

fn decode_repo(value: &Value) -> Result<SourceRepo, FieldError> {
    let name = str_field(value, "repo")?.to_string();
    let mut content: HashMap<&str, &str> = HashMap::new();
    for (path, text) in object(value, "content")? {
        let text = text.as_str().ok_or_else(|| FieldError {
            field: "content".into(),
            message: format!("`{path}`: expected the file's text, found {}", kind(text)),
        })?;
        content.insert(path, text);
    }
    let mut graph = Vec::new();
    for (path, deps) in object(value, "dependency")? {
        let bad = || FieldError { field: "dependency".into(), message: format!("`{path}`: expected an array of paths, found {}", kind(deps)) };
        let deps = deps.as_array().ok_or_else(bad)?;
        let deps = deps.iter().map(|d| d.as_str().map(str::to_string).ok_or_else(bad)).collect::<Result<Vec<_>, _>>()?;
        graph.push((path.clone(), deps));
    }
    let files = topological_sort(&graph)
        .into_iter()
        .map(|path| {
            let text = content.get(path).ok_or_else(|| FieldError {
                field: "dependency".into(),
                message: format!("`{path}` is not a text file in `content`"),
            })?;
            Ok(SourceFile { path: path.to_string(), text: text.to_string() })
        })
        .collect::<Result<Vec<_>, FieldError>>()?;
    let needles = match value.get("needles") {
        None => Vec::new(),
        Some(Value::Array(needles)) => needles
            .iter()
            .enumerate()
            .map(|(i, needle)| decode_needle(needle, &files).map_err(|e| prefix(e, &format!("needles[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => return Err(FieldError { field: "needles".into(), message: format!("expected an array, found {}", kind(other)) }),
    };
    Ok(SourceRepo { name, files, needles })
}

fn decode_needle(value: &Value, files: &[SourceFile]) -> Result<SourceNeedle, FieldError> {
    let needle = SourceNeedle {
        name: str_field(value, "name")?.to_string(),
        path: str_field(value, "path")?.to_string(),
        start_byte: usize_field(value, "start_byte")?,
        end_byte: usize_field(value, "end_byte")?,
        description: str_field(value, "description")?.to_string(),
    };
    if !files.iter().any(|f| f.path == needle.path) {
        return Err(FieldError {
            field: "path".into(),
            message: format!("`{}` is not among the files ordered by `dependency`", needle.path),
        });
    }
    Ok(needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn graph(edges: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        edges.iter().map(|(n, d)| (n.to_string(), d.iter().map(|s| s.to_string()).collect())).collect()
    }

    #[test]
    fn topological_order_is_the_reference_post_order() {
        // Checked against the reference `topological_sort` (Python).
        let g = graph(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[]), ("d", &["a"])]);
        assert_eq!(topological_sort(&g), vec!["c", "b", "a", "d"]);
    }

    #[test]
    fn cycles_are_cut_where_they_close_and_unknown_dependencies_are_leaves() {
        // a -> b -> c -> a: c's edge back to a (being visited) is skipped.
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a", "x"]), ("s", &["s"])]);
        assert_eq!(topological_sort(&g), vec!["x", "c", "b", "a", "s"]);
        // Starting the same cycle elsewhere gives another order, as the reference does.
        let g = graph(&[("c", &["a"]), ("a", &["b"]), ("b", &["c"])]);
        assert_eq!(topological_sort(&g), vec!["b", "a", "c"]);
    }

    #[test]
    fn deep_chains_do_not_overflow() {
        let names: Vec<String> = (0..100_000).map(|i| format!("f{i}")).collect();
        let g: Vec<(String, Vec<String>)> =
            names.iter().enumerate().map(|(i, n)| (n.clone(), names.get(i + 1).into_iter().cloned().collect())).collect();
        let order = topological_sort(&g);
        assert_eq!(order.first(), Some(&"f99999"));
        assert_eq!(order.last(), Some(&"f0"));
    }

    #[test]
    fn decodes_files_in_dependency_order() {
        let value = json!({"rust": [{"repo": "r", "content": {"a.rs": "A", "b.rs": "B", "z.rs": "Z"},
            "dependency": {"a.rs": ["b.rs"], "b.rs": []},
            "needles": [{"name": "f", "path": "a.rs", "start_byte": 0, "end_byte": 1, "description": "d"}]}],
            "go": [{"repo": "g", "content": {}, "dependency": {}}]});
        let dataset = SourceDataset::from_json("d.json", &value).unwrap();
        let repo = &dataset.repos("rust").unwrap()[0];
        let paths: Vec<&str> = repo.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, vec!["b.rs", "a.rs"]);
        assert_eq!(repo.needles[0].description, "d");
        assert!(dataset.repos("go").unwrap()[0].needles.is_empty());
        assert_eq!(dataset.languages.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(), vec!["rust", "go"]);
    }

    #[test]
    fn errors_name_the_field() {
        let repo = |dependency: Value, needle: Value| json!({"rust": [{"repo": "r", "content": {"a.rs": "A"}, "dependency": dependency, "needles": [needle]}]});
        let good_needle = json!({"name": "f", "path": "a.rs", "start_byte": 0, "end_byte": 1, "description": "d"});
        let err = SourceDataset::from_json("d.json", &repo(json!({"a.rs": ["b.rs"]}), good_needle.clone())).unwrap_err();
        assert_eq!(err.to_string(), "d.json: field `rust[0].dependency`: `b.rs` is not a text file in `content`");
        let err = SourceDataset::from_json("d.json", &repo(json!({"a.rs": "b.rs"}), good_needle)).unwrap_err();
        assert_eq!(err.to_string(), "d.json: field `rust[0].dependency`: `a.rs`: expected an array of paths, found a string");
        let needle = json!({"name": "f", "path": "a.rs", "start_byte": 0, "end_byte": 1});
        let err = SourceDataset::from_json("d.json", &repo(json!({"a.rs": []}), needle)).unwrap_err();
        assert_eq!(err.to_string(), "d.json: field `rust[0].needles[0].description`: missing");
        let needle = json!({"name": "f", "path": "b.rs", "start_byte": 0, "end_byte": 1, "description": "d"});
        let err = SourceDataset::from_json("d.json", &repo(json!({"a.rs": []}), needle)).unwrap_err();
        assert_eq!(err.to_string(), "d.json: field `rust[0].needles[0].path`: `b.rs` is not among the files ordered by `dependency`");
    }
}
