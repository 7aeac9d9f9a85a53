//! Builds a RepoQA "Searching Needle Function" dataset entry from a repository on disk, as the
//! paper (§3.1) and evalplus/repoqa's curation scripts do: the files under an entry directory
//! ([`files`]), their dependencies from imports ([`deps`]), the files in topological order
//! (cycles cut where they close), function tables with line and byte spans ([`functions`]),
//! 64 bins with the first unique, short function of each and a seeded sample of 10 needles
//! ([`needles`]), and descriptions by an annotator model or the functions' own docstrings
//! ([`describe`]). The result is the official dataset layout `{language: [repo, ...]}`.

pub mod deps;
pub mod describe;
pub mod files;
pub mod functions;
pub mod needles;

#[cfg(test)]
mod tests;

use std::path::Path;

use serde_json::{json, Map, Value};

use crate::repoqa::context::topological_sort;
use crate::repoqa::{Language, RepoqaGrammars};
pub use files::SourceText;
pub use functions::Function;
pub use needles::SelectOptions;

/// Why a dataset entry could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CurateError {
    /// A file or folder could not be read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The grammar could not be used.
    #[error("tree-sitter: {0}")]
    Grammar(String),
    /// Nothing to build from.
    #[error("{0}")]
    Empty(String),
    /// The annotator failed.
    #[error("annotator {label}: {message}")]
    Annotator {
        /// The annotator's label.
        label: String,
        /// What went wrong.
        message: String,
    },
    /// An existing dataset to add to is not in the official layout.
    #[error("{0}")]
    Layout(String),
}

/// What an annotator's failure carries.
pub type AnnotateError = Box<dyn std::error::Error + Send + Sync>;

/// A model that answers the annotation prompts (greedy), e.g. a local chat model or an
/// OpenAI-compatible endpoint; implemented by callers.
pub trait Annotator {
    /// Names the annotator in the dataset (`description_source`), e.g. `model:qwen2.5-coder`.
    fn label(&self) -> String;
    /// One answer per prompt, in order.
    fn annotate(&self, prompts: &[String]) -> Result<Vec<String>, AnnotateError>;
}

/// What to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurateOptions {
    /// Language of the files taken.
    pub language: Language,
    /// The dataset's `repo` name.
    pub name: String,
    /// The dataset's `commit_sha` (a commit or a package version).
    pub commit: String,
    /// Folder under the repository whose files are taken (`entrypoint_path`; `""` = all).
    pub entry: String,
    /// Sub-folders of the entry left out.
    pub exclude: Vec<String>,
    /// Needle selection.
    pub select: SelectOptions,
}

/// A chosen needle and its description.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenNeedle {
    /// File of the function.
    pub path: String,
    /// The function's table entry.
    pub function: Function,
    /// Description shown to the evaluated model.
    pub description: String,
    /// Where the description came from: `docstring`, `docstring:none` (no docstring found),
    /// or the annotator's label.
    pub source: String,
}

/// One repository of the dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct CuratedRepo {
    /// Settings it was built with.
    pub options: CurateOptions,
    /// `content`, in path order.
    pub files: Vec<SourceText>,
    /// Files skipped because they are not UTF-8.
    pub not_utf8: Vec<String>,
    /// `dependency`, in path order.
    pub dependency: Vec<(String, Vec<String>)>,
    /// `functions`, in topological order.
    pub functions: Vec<(String, Vec<Function>)>,
    /// Number of needle candidates (one per bin at most).
    pub candidates: usize,
    /// `needles`, in sample order.
    pub needles: Vec<ChosenNeedle>,
}

/// Reads the repository at `root` and builds its entry, with docstring descriptions (see
/// [`CuratedRepo::annotate`] for a model's).
pub fn curate(root: &Path, options: &CurateOptions, grammars: &RepoqaGrammars) -> Result<CuratedRepo, CurateError> {
    let sources = files::read_sources(root, &options.entry, options.language, &options.exclude)?;
    if sources.files.is_empty() {
        return Err(CurateError::Empty(format!(
            "no {} file ({}) under {}",
            options.language,
            files::suffixes(options.language).join(" "),
            root.join(&options.entry).display()
        )));
    }
    let dependency = deps::analyze(options.language, &sources.files, &options.entry, grammars);
    let order = topological_sort(&dependency);
    let by_path: std::collections::HashMap<&str, &SourceText> = sources.files.iter().map(|f| (f.path.as_str(), f)).collect();
    let ordered: Vec<&SourceText> = order.iter().filter_map(|p| by_path.get(p).copied()).collect();
    let tables = functions::function_tables(options.language, &ordered, grammars)?;
    let repo_chars: usize = sources.files.iter().map(|f| f.text.chars().count()).sum();
    let candidates = needles::candidates(&tables, repo_chars, &options.select);
    let chosen = needles::sample(&candidates, options.select.needles, options.select.seed);
    let needles = chosen
        .into_iter()
        .map(|(path, function)| {
            let text = by_path.get(path).map_or("", |f| f.text.as_str());
            let doc = describe::docstring(options.language, text, function, grammars);
            ChosenNeedle {
                path: path.to_string(),
                function: function.clone(),
                description: describe::docstring_description(&function.name, doc.as_deref()),
                source: if doc.is_some() { "docstring".into() } else { "docstring:none".into() },
            }
        })
        .collect();
    let candidates = candidates.len();
    Ok(CuratedRepo {
        options: options.clone(),
        files: sources.files,
        not_utf8: sources.not_utf8,
        dependency,
        functions: tables,
        candidates,
        needles,
    })
}

impl CuratedRepo {
    /// What was built, for people: one line of counts (with `grammars`, the grammars'
    /// description), then one line per needle with where it is and where its description came from.
    pub fn summary(&self, grammars: &str) -> String {
        let functions: usize = self.functions.iter().map(|(_, f)| f.len()).sum();
        let edges: usize = self.dependency.iter().map(|(_, d)| d.len()).sum();
        let chars: usize = self.files.iter().map(|f| f.text.chars().count()).sum();
        let o = &self.options;
        let mut text = format!(
            "{} {} (entry `{}`): {} files, {chars} characters, {edges} import edges, {functions} functions, {} candidates, {} needles [{grammars}]\n",
            o.language,
            o.name,
            o.entry,
            self.files.len(),
            self.candidates,
            self.needles.len(),
        );
        for (i, n) in self.needles.iter().enumerate() {
            let f = &n.function;
            text.push_str(&format!(
                "  {i}. {} {}:{}-{} ({} bytes, global byte {}) description: {}\n",
                f.name,
                n.path,
                f.start_line + 1,
                f.end_line,
                f.end_byte - f.start_byte,
                f.global_start_byte,
                n.source
            ));
        }
        text
    }

    /// The annotation prompt of every needle, in needle order, showing `prefix_lines` lines
    /// before the needle ([`describe::CODE_PREFIX_LINES`] in the script).
    pub fn annotation_prompts(&self, prefix_lines: usize) -> Vec<String> {
        let mut lines: Vec<&str> = Vec::new();
        let by_path: std::collections::HashMap<&str, &str> = self.files.iter().map(|f| (f.path.as_str(), f.text.as_str())).collect();
        for (path, _) in &self.functions {
            lines.extend(by_path.get(path.as_str()).copied().unwrap_or("").split('\n'));
        }
        self.needles
            .iter()
            .map(|n| describe::annotation_prompt(&n.function.name, &describe::annotation_code(&lines, &n.function, prefix_lines)))
            .collect()
    }

    /// Replaces the descriptions with `annotator`'s answers to the official prompt (the part
    /// between `<desc_start>` and `<desc_end>`), showing `prefix_lines` lines before each needle.
    pub fn annotate(&mut self, annotator: &dyn Annotator, prefix_lines: usize) -> Result<(), CurateError> {
        let prompts = self.annotation_prompts(prefix_lines);
        let label = annotator.label();
        let answers = annotator.annotate(&prompts).map_err(|e| CurateError::Annotator { label: label.clone(), message: e.to_string() })?;
        if answers.len() != prompts.len() {
            let message = format!("{} answers for {} prompts", answers.len(), prompts.len());
            return Err(CurateError::Annotator { label, message });
        }
        for (needle, answer) in self.needles.iter_mut().zip(&answers) {
            needle.description = describe::capture_annotation(answer).to_string();
            needle.source = label.clone();
        }
        Ok(())
    }

    /// The repository in the official layout; each needle also records `description_source`.
    pub fn to_json(&self) -> Value {
        let content: Map<String, Value> = self.files.iter().map(|f| (f.path.clone(), Value::String(f.text.clone()))).collect();
        let dependency: Map<String, Value> = self.dependency.iter().map(|(p, d)| (p.clone(), json!(d))).collect();
        let functions: Map<String, Value> =
            self.functions.iter().map(|(p, fs)| (p.clone(), Value::Array(fs.iter().map(Function::to_json).collect()))).collect();
        let needles: Vec<Value> = self
            .needles
            .iter()
            .map(|n| {
                let mut v = n.function.to_json();
                if let Value::Object(map) = &mut v {
                    map.insert("path".into(), json!(n.path));
                    map.insert("description".into(), json!(n.description));
                    map.insert("description_source".into(), json!(n.source));
                }
                v
            })
            .collect();
        json!({
            "repo": self.options.name, "commit_sha": self.options.commit, "entrypoint_path": self.options.entry,
            "topic": "", "content": content, "dependency": dependency, "functions": functions, "needles": needles,
        })
    }
}

/// Adds `repo` to a dataset `{language: [repo, ...]}` (`existing`, or a new one), replacing a
/// repository of the same name in that language.
pub fn add_to_dataset(existing: Option<Value>, language: Language, repo: Value) -> Result<Value, CurateError> {
    let mut dataset = match existing {
        None => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(CurateError::Layout("the existing dataset is not an object {language: [repo, ...]}".into())),
    };
    let list = dataset.entry(language.name()).or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(repos) = list else {
        return Err(CurateError::Layout(format!("the existing dataset's `{}` is not a list of repositories", language.name())));
    };
    let name = repo["repo"].clone();
    match repos.iter_mut().find(|r| r["repo"] == name) {
        Some(slot) => *slot = repo,
        None => repos.push(repo),
    }
    Ok(Value::Object(dataset))
}
