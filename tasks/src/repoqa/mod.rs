//! RepoQA "Searching Needle Function": dataset and output formats, answer sanitising,
//! comment removal and BLEU matching of evalplus/repoqa `compute_score.py`, `metric.py` and
//! `utility.py`, and the code contexts and prompts of `search_needle_function.py`
//! ([`context`]).

pub mod bleu;
pub mod code;
pub mod context;
pub mod grammars;
pub mod outputs;
pub mod score;
pub mod shard;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::input::{field, kind, str_field, FieldError, RecordError};

pub use grammars::RepoqaGrammars;
pub use score::{RepoqaScorer, RepoqaScores, TaskResult, THRESHOLDS};

/// The RepoQA languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    /// Python.
    Python,
    /// C++ (and C).
    Cpp,
    /// Java.
    Java,
    /// TypeScript (and JavaScript).
    TypeScript,
    /// Rust.
    Rust,
}

impl Language {
    /// All languages in the paper's order (also declaration order: `language as usize`
    /// indexes this array).
    pub const ALL: [Language; 5] = [Language::Python, Language::Cpp, Language::Java, Language::TypeScript, Language::Rust];

    /// The dataset key.
    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Cpp => "cpp",
            Self::Java => "java",
            Self::TypeScript => "typescript",
            Self::Rust => "rust",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Language {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| format!("unknown RepoQA language `{s}`; expected python, cpp, java, typescript or rust"))
    }
}

/// A needle: the function a task asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Needle {
    /// File holding the function.
    pub path: String,
    /// Function name (what a correct answer must match best).
    pub name: String,
    /// First line, 0-based.
    pub start_line: usize,
    /// Line after the last, 0-based.
    pub end_line: usize,
}

/// One repository of the dataset: its files and needles.
#[derive(Debug, Clone, PartialEq)]
pub struct Repo {
    /// Repository name, as outputs refer to it.
    pub name: String,
    /// The needles' source texts (whole lines `start_line..end_line` of their files).
    pub needle_texts: Vec<String>,
    /// The needles.
    pub needles: Vec<Needle>,
}

/// The parts of the official dataset that scoring reads: `{lang: [repo, ...]}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dataset {
    /// Repositories by language, in file order.
    pub languages: HashMap<String, Vec<Repo>>,
}

impl Dataset {
    /// Decodes the official dataset JSON. Errors name the field path, e.g.
    /// `python[2].needles[3].start_line`.
    pub fn from_json(file: &str, value: &Value) -> Result<Self, RecordError> {
        Ok(Self { languages: decode_languages(file, value, decode_repo)?.into_iter().collect() })
    }

    /// The repository `name` of `language`, as the official `_get_repo` finds it (first).
    pub fn repo(&self, language: &str, name: &str) -> Option<&Repo> {
        self.languages.get(language)?.iter().find(|r| r.name == name)
    }
}

/// Decodes the dataset layout `{lang: [repo, ...]}` in file order, `decode` turning each
/// repository record into the caller's view; errors name the path, e.g. `python[2].repo`.
fn decode_languages<R>(
    file: &str,
    value: &Value,
    decode: impl Fn(&Value) -> Result<R, FieldError>,
) -> Result<Vec<(String, Vec<R>)>, RecordError> {
    let at = |e: FieldError| e.at(file, 0);
    let Value::Object(languages) = value else {
        return Err(RecordError {
            file: file.into(),
            line: 0,
            field: None,
            message: format!("expected an object of languages, found {}", kind(value)),
        });
    };
    languages
        .iter()
        .map(|(language, repos)| {
            let repos = repos.as_array().ok_or_else(|| {
                at(FieldError { field: language.clone(), message: format!("expected an array of repositories, found {}", kind(repos)) })
            })?;
            let decoded = repos
                .iter()
                .enumerate()
                .map(|(i, repo)| decode(repo).map_err(|e| at(prefix(e, &format!("{language}[{i}]")))))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((language.clone(), decoded))
        })
        .collect()
}

fn prefix(e: FieldError, path: &str) -> FieldError {
    FieldError { field: format!("{path}.{}", e.field), ..e }
}

fn usize_field(value: &Value, path: &str) -> Result<usize, FieldError> {
    let found = field(value, path)?;
    found.as_u64().map(|n| n as usize).ok_or_else(|| FieldError {
        field: path.into(),
        message: format!("expected a non-negative integer, found {}", kind(found)),
    })
}

fn decode_repo(value: &Value) -> Result<Repo, FieldError> {
    let name = str_field(value, "repo")?.to_string();
    let content = field(value, "content")?;
    let needles_value = field(value, "needles")?;
    let needles_array = needles_value.as_array().ok_or_else(|| FieldError {
        field: "needles".into(),
        message: format!("expected an array, found {}", kind(needles_value)),
    })?;
    let mut needles = Vec::new();
    let mut needle_texts = Vec::new();
    for (i, needle) in needles_array.iter().enumerate() {
        let path = format!("needles[{i}]");
        let decoded = (|| {
            Ok::<_, FieldError>(Needle {
                path: str_field(needle, "path")?.to_string(),
                name: str_field(needle, "name")?.to_string(),
                start_line: usize_field(needle, "start_line")?,
                end_line: usize_field(needle, "end_line")?,
            })
        })()
        .map_err(|e| prefix(e, &path))?;
        let file_text = content.get(&decoded.path).and_then(Value::as_str).ok_or_else(|| FieldError {
            field: format!("{path}.path"),
            message: format!("`{}` is not a text file in `content`", decoded.path),
        })?;
        // Whole lines, as `"\n".join(content.split("\n")[start:end])`; Python slices clamp.
        let lines: Vec<&str> = file_text.split('\n').collect();
        let end = decoded.end_line.min(lines.len());
        let start = decoded.start_line.min(end);
        needle_texts.push(lines[start..end].join("\n"));
        needles.push(decoded);
    }
    Ok(Repo { name, needle_texts, needles })
}

/// One line of a model-output JSONL file.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOutput {
    /// Dataset language key.
    pub language: String,
    /// Repository name.
    pub repo: String,
    /// Ground-truth needle name.
    pub name: String,
    /// `output[0]`, the only sample scored.
    pub output: String,
    /// `position_ratio`, echoed to results.
    pub position_ratio: Value,
    /// `needle_token_start`, echoed to results.
    pub needle_token_start: Value,
    /// `needle_token_end`, echoed to results.
    pub needle_token_end: Value,
}

impl ModelOutput {
    /// Decodes one output line.
    pub fn from_json(value: &Value) -> Result<Self, FieldError> {
        let outputs = field(value, "output")?;
        let first = match outputs {
            Value::Array(items) => items.first().ok_or_else(|| FieldError {
                field: "output".into(),
                message: "empty list; the first sample is the one scored".into(),
            })?,
            other => {
                return Err(FieldError { field: "output".into(), message: format!("expected a list of strings, found {}", kind(other)) })
            }
        };
        let output = first
            .as_str()
            .ok_or_else(|| FieldError { field: "output[0]".into(), message: format!("expected a string, found {}", kind(first)) })?;
        Ok(Self {
            language: str_field(value, "language")?.to_string(),
            repo: str_field(value, "repo")?.to_string(),
            name: str_field(value, "name")?.to_string(),
            output: output.to_string(),
            position_ratio: field(value, "position_ratio")?.clone(),
            needle_token_start: field(value, "needle_token_start")?.clone(),
            needle_token_end: field(value, "needle_token_end")?.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dataset_needle_text_is_whole_lines() {
        let value = json!({"python": [{"repo": "r", "content": {"a.py": "x\n  def f():\n    pass\ny"},
            "needles": [{"path": "a.py", "name": "f", "start_line": 1, "end_line": 3}]}]});
        let dataset = Dataset::from_json("d.json", &value).unwrap();
        let repo = dataset.repo("python", "r").unwrap();
        assert_eq!(repo.needle_texts, vec!["  def f():\n    pass"]);
        assert!(dataset.repo("python", "zz").is_none());
    }

    #[test]
    fn dataset_errors_name_the_field_path() {
        let value = json!({"rust": [{"repo": "r", "content": {}, "needles": [{"path": "a.rs", "name": "f", "start_line": -1, "end_line": 3}]}]});
        let err = Dataset::from_json("d.json", &value).unwrap_err();
        assert_eq!(err.to_string(), "d.json: field `rust[0].needles[0].start_line`: expected a non-negative integer, found a number");
        let value = json!({"rust": [{"repo": "r", "content": {}, "needles": [{"path": "a.rs", "name": "f", "start_line": 1, "end_line": 3}]}]});
        let err = Dataset::from_json("d.json", &value).unwrap_err();
        assert_eq!(err.to_string(), "d.json: field `rust[0].needles[0].path`: `a.rs` is not a text file in `content`");
    }

    #[test]
    fn outputs_need_a_first_sample() {
        let base = json!({"language": "rust", "repo": "r", "name": "f", "position_ratio": 0.5, "needle_token_start": 1, "needle_token_end": 2});
        let mut with_empty = base.clone();
        with_empty["output"] = json!([]);
        assert_eq!(ModelOutput::from_json(&with_empty).unwrap_err().field, "output");
        let mut good = base;
        good["output"] = json!(["a", "b"]);
        assert_eq!(ModelOutput::from_json(&good).unwrap().output, "a");
    }
}
