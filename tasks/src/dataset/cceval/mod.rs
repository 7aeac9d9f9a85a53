//! CrossCodeEval dataset construction (paper §2.2-2.3, Appendix A) by tree-sitter static
//! analysis instead of compilers: find the names of each file that only another file of the
//! repository can resolve, put a cursor before each one's first use, cut the reference at the
//! end of its statement, and keep the examples that pass the paper's filters.
//!
//! The paper replaces each imported class or module by an empty one and collects the names
//! that become undefined; here the same names are found syntactically: member accesses and
//! calls on imported names, on instances created from or typed with them, and on `self.x` /
//! `this.x` fields assigned from them (see the language modules).

mod csharp;
mod java;
mod python;
mod summary;
pub mod reference;
mod typescript;
pub mod uses;

use std::collections::HashSet;

use rayon::prelude::*;
use serde_json::{json, Value};
use tree_sitter::Parser;

use crate::cceval::postprocess::{cut_bracket_statement, PythonStatementCutter};
use crate::cceval::Language;
use crate::retrieval::chunks::ProjectFile;
use reference::{code_lines, count_tokens, cursor_choices, reference_end, tokens, SplitMix64};
use uses::{Entity, ParsedFile};

/// One repository to build examples from.
pub struct Repository {
    /// `metadata.repository`: the folder name under the retrieval root.
    pub name: String,
    /// Its source files of the chosen language, paths relative to the repository root.
    pub files: Vec<ProjectFile>,
}

/// Settings of a build.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The language of the files and examples.
    pub language: Language,
    /// Seed of the cursor positions.
    pub seed: u64,
}

impl Options {
    /// The paper's minimum of non-import prompt lines: 10 Python, 20 Java, 30 TypeScript, 5 C#.
    pub fn min_prompt_lines(&self) -> usize {
        match self.language {
            Language::Python => 10,
            Language::Java => 20,
            Language::TypeScript => 30,
            Language::CSharp => 5,
        }
    }
}

/// Fewest and most tokens of a reference.
pub const REFERENCE_TOKENS: std::ops::RangeInclusive<usize> = 3..=30;

/// One example in the official record layout.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetExample {
    /// `metadata.task_id`: `project_cc_<language>/<n>`.
    pub task_id: String,
    /// `metadata.repository`.
    pub repository: String,
    /// `metadata.file`.
    pub file: String,
    /// The file up to the cursor.
    pub prompt: String,
    /// The reference: cursor to end of statement.
    pub groundtruth: String,
    /// The rest of the file.
    pub right_context: String,
    /// The cross-file name the reference completes (information, not written).
    pub entity: String,
}

impl DatasetExample {
    /// 0-based line of the cursor (`metadata.groundtruth_start_lineno`).
    pub fn groundtruth_line(&self) -> usize {
        self.prompt.matches('\n').count()
    }

    /// The official record (`crossfile_context` empty: `codesweep retrieve` fills it).
    pub fn to_json(&self) -> Value {
        let line = self.groundtruth_line();
        json!({
            "prompt": self.prompt,
            "groundtruth": self.groundtruth,
            "right_context": self.right_context,
            "metadata": {
                "task_id": self.task_id,
                "repository": self.repository,
                "file": self.file,
                "context_start_lineno": 0,
                "groundtruth_start_lineno": line,
                "right_context_start_lineno": line + self.groundtruth.matches('\n').count() + 1,
            },
            "crossfile_context": {"text": "", "list": []},
        })
    }
}

/// How many candidates each filter removed, in the order they are applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dropped {
    /// No statement end after the cursor, or (Java, TypeScript, C#) one that the scorer's
    /// raw-text rule would place elsewhere (a `;`, `{` or `}` inside a string or comment).
    pub no_statement_end: usize,
    /// Too few non-import lines before the cursor.
    pub short_prompt: usize,
    /// Reference outside 3-30 tokens.
    pub reference_length: usize,
    /// Reference found verbatim in another file of the repository.
    pub found_in_other_file: usize,
    /// Reference equal to an earlier example's.
    pub duplicate: usize,
    /// Completed exactly by the filter model from in-file context alone (`--filter-model`).
    pub model_exact_match: usize,
}

/// Table 1 of the paper, for the built set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Repositories read.
    pub repositories: usize,
    /// Source files read.
    pub files_read: usize,
    /// Files with at least one example.
    pub files: usize,
    /// Examples kept.
    pub examples: usize,
    /// Cross-file names found (first use per file), before filtering.
    pub candidates: usize,
    /// Mean lines of the prompt.
    pub avg_prompt_lines: f64,
    /// Mean tokens of the prompt (`\w+` runs and single punctuation, not a model tokenizer).
    pub avg_prompt_tokens: f64,
    /// Mean tokens of the reference (same count).
    pub avg_reference_tokens: f64,
    /// What each filter removed.
    pub dropped: Dropped,
}

/// Why a build could not run.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The grammar does not load into the linked tree-sitter runtime.
    #[error("the {language} grammar does not load: {message}")]
    Grammar {
        /// The language.
        language: Language,
        /// The runtime's message.
        message: String,
    },
}

/// Examples and their summary.
pub struct Dataset {
    /// Kept examples, task ids numbered in order.
    pub examples: Vec<DatasetExample>,
    /// The Table-1 figures.
    pub summary: Summary,
}

impl Dataset {
    /// Drops the examples a model completed exactly (`solved[i]` for example `i`), numbers the
    /// rest again from 0 and recomputes the summary.
    pub fn drop_model_solved(&mut self, language: Language, solved: &[bool]) {
        let before = self.examples.len();
        let mut index = 0;
        self.examples.retain(|_| {
            let keep = !solved.get(index).copied().unwrap_or(false);
            index += 1;
            keep
        });
        self.summary.dropped.model_exact_match += before - self.examples.len();
        for (n, example) in self.examples.iter_mut().enumerate() {
            example.task_id = format!("project_cc_{}/{n}", language.name());
        }
        self.summary.fill_from(&self.examples);
    }
}

impl Summary {
    /// Sets the file and example counts and the averages from the kept examples.
    fn fill_from(&mut self, examples: &[DatasetExample]) {
        let files: HashSet<(&str, &str)> = examples.iter().map(|e| (e.repository.as_str(), e.file.as_str())).collect();
        self.files = files.len();
        self.examples = examples.len();
        let n = examples.len().max(1) as f64;
        self.avg_prompt_lines = examples.iter().map(|e| e.prompt.lines().count() as f64).sum::<f64>() / n;
        self.avg_prompt_tokens = examples.iter().map(|e| count_tokens(&e.prompt) as f64).sum::<f64>() / n;
        self.avg_reference_tokens = examples.iter().map(|e| count_tokens(&e.groundtruth) as f64).sum::<f64>() / n;
    }
}

/// The grammar for a file (`.tsx` files get the TSX dialect).
fn grammar(language: Language, path: &str) -> tree_sitter::Language {
    match language {
        Language::Python => tree_sitter_python::LANGUAGE.into(),
        Language::Java => tree_sitter_java::LANGUAGE.into(),
        Language::TypeScript if path.ends_with(".tsx") => tree_sitter_typescript::LANGUAGE_TSX.into(),
        Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        Language::CSharp => tree_sitter_c_sharp::LANGUAGE.into(),
    }
}

/// Cross-file entities of each file, the first use of each name only.
pub fn find_entities(language: Language, files: &[ParsedFile]) -> Vec<Vec<Entity>> {
    let all = match language {
        Language::Python => python::find_entities(files),
        Language::Java => java::find_entities(files),
        Language::TypeScript => typescript::find_entities(files),
        Language::CSharp => csharp::find_entities(files),
    };
    all.into_iter()
        .map(|entities| {
            let mut seen = HashSet::new();
            entities.into_iter().filter(|e| seen.insert(e.name.clone())).collect()
        })
        .collect()
}

/// Parses every file (a file tree-sitter gives up on is left out).
fn parse_all(language: Language, files: &[ProjectFile]) -> Result<Vec<ParsedFile<'_>>, DatasetError> {
    let parsed: Result<Vec<Option<ParsedFile>>, DatasetError> = files
        .par_iter()
        .map_init(Parser::new, |parser, file| {
            parser
                .set_language(&grammar(language, &file.path))
                .map_err(|e| DatasetError::Grammar { language, message: e.to_string() })?;
            Ok(parser.parse(&file.content, None).map(|tree| ParsedFile { path: &file.path, text: &file.content, tree }))
        })
        .collect();
    Ok(parsed?.into_iter().flatten().collect())
}

/// A candidate example before the repository-wide filters.
struct Candidate {
    file: usize,
    cursor: usize,
    end: usize,
    entity: String,
}

/// Builds the examples of every repository, in repository, file and position order.
pub fn build(repositories: &[Repository], options: Options) -> Result<Dataset, DatasetError> {
    let language = options.language;
    let mut summary = Summary { repositories: repositories.len(), ..Summary::default() };
    let mut examples = Vec::new();
    let mut seen_references = HashSet::new();
    for repository in repositories {
        summary.files_read += repository.files.len();
        let parsed = parse_all(language, &repository.files)?;
        let entities = find_entities(language, &parsed);
        let outcomes: Vec<(Vec<Candidate>, Dropped, usize)> = parsed
            .par_iter()
            .enumerate()
            .map_init(PythonStatementCutter::new, |cutter, (index, file)| {
                file_candidates(index, file, &entities[index], options, cutter)
            })
            .collect();
        let mut candidates = Vec::new();
        for (found, dropped, count) in outcomes {
            candidates.extend(found);
            summary.candidates += count;
            summary.dropped.no_statement_end += dropped.no_statement_end;
            summary.dropped.short_prompt += dropped.short_prompt;
            summary.dropped.reference_length += dropped.reference_length;
        }
        let elsewhere: Vec<bool> = candidates
            .par_iter()
            .map(|c| {
                let finder = memchr::memmem::Finder::new(parsed[c.file].text[c.cursor..c.end].trim());
                parsed.iter().enumerate().any(|(i, other)| i != c.file && finder.find(other.text.as_bytes()).is_some())
            })
            .collect();
        for (candidate, found_elsewhere) in candidates.into_iter().zip(elsewhere) {
            let file = &parsed[candidate.file];
            let groundtruth = &file.text[candidate.cursor..candidate.end];
            if found_elsewhere {
                summary.dropped.found_in_other_file += 1;
                continue;
            }
            if !seen_references.insert(groundtruth.trim().to_string()) {
                summary.dropped.duplicate += 1;
                continue;
            }
            examples.push(DatasetExample {
                task_id: format!("project_cc_{}/{}", language.name(), examples.len()),
                repository: repository.name.clone(),
                file: file.path.to_string(),
                prompt: file.text[..candidate.cursor].to_string(),
                groundtruth: groundtruth.to_string(),
                right_context: file.text[candidate.end..].to_string(),
                entity: candidate.entity,
            });
        }
    }
    summary.fill_from(&examples);
    Ok(Dataset { examples, summary })
}

/// The candidates of one file that pass the per-example filters, what those removed, and how
/// many entities there were.
fn file_candidates(
    index: usize,
    file: &ParsedFile,
    entities: &[Entity],
    options: Options,
    cutter: &mut PythonStatementCutter,
) -> (Vec<Candidate>, Dropped, usize) {
    let language = options.language;
    let tokens = tokens(&file.tree);
    let mut dropped = Dropped::default();
    let mut found = Vec::new();
    for entity in entities {
        let choices = cursor_choices(file.text, &tokens, entity.start, language);
        if choices.is_empty() {
            dropped.no_statement_end += 1;
            continue;
        }
        let mut rng = SplitMix64::for_entity(options.seed, file.path, entity.start);
        let cursor_token = rng.pick(choices);
        let cursor = tokens[cursor_token].start;
        // The scorer cuts predictions at the first `;`, `{` or `}` of the raw text, strings
        // included; a reference that rule would cut elsewhere could never be matched exactly.
        let scorer_agrees = |end: usize| {
            language == Language::Python || cut_bracket_statement(&file.text[cursor..end]).len() == end - cursor
        };
        let end = match reference_end(&file.tree, file.text, &tokens, cursor_token, language, cutter) {
            Some(end) if end >= entity.start + entity.name.len() && scorer_agrees(end) => end,
            _ => {
                dropped.no_statement_end += 1;
                continue;
            }
        };
        if code_lines(&file.text[..cursor], language) < options.min_prompt_lines() {
            dropped.short_prompt += 1;
            continue;
        }
        if !REFERENCE_TOKENS.contains(&count_tokens(&file.text[cursor..end])) {
            dropped.reference_length += 1;
            continue;
        }
        found.push(Candidate { file: index, cursor, end, entity: entity.name.clone() });
    }
    (found, dropped, entities.len())
}
