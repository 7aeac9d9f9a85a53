//! RepoQA verdicts and pass@1 tables, as the official `needle_evaluator` and `compute_score`.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::bleu::{function_tokens, sentence_bleu, Bleu};
use super::code::CodeTools;
use super::grammars::RepoqaGrammars;
use super::{Dataset, Language, ModelOutput, Repo};
use crate::input::{field, str_field, FieldError};
use crate::pycompat::json::float_repr;

/// The official similarity thresholds.
pub const THRESHOLDS: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// The verdict for one model output.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskResult {
    /// Dataset language key.
    pub language: String,
    /// Repository name.
    pub repo: String,
    /// Ground-truth needle name.
    pub name: String,
    /// The best-matching needle is the ground truth.
    pub is_best_similar: bool,
    /// Best BLEU over the repository's needles; `NoOverlap` when no needle scored above 0.
    pub best_similar_score: Bleu,
    /// The best-matching needle's name, if any scored above 0.
    pub best_target: Option<String>,
    /// `position_ratio` of the output.
    pub needle_position: Value,
    /// `needle_token_start` of the output.
    pub token_start: Value,
    /// `needle_token_end` of the output.
    pub token_end: Value,
}

impl TaskResult {
    /// Passes at `threshold`: best match and similarity at least the threshold.
    pub fn passes(&self, threshold: f64) -> bool {
        self.is_best_similar && self.best_similar_score.value() >= threshold
    }

    /// Reads [`TaskResult::to_json`] back (stored shard results); the integer `0` score is
    /// the official "no needle overlapped" marker.
    pub fn from_json(value: &Value) -> Result<Self, FieldError> {
        let score = field(value, "best_similar_score")?;
        let best_similar_score = if score.is_i64() || score.is_u64() {
            Bleu::NoOverlap
        } else {
            Bleu::Score(score.as_f64().ok_or_else(|| FieldError {
                field: "best_similar_score".into(),
                message: format!("expected a number, found {}", crate::input::kind(score)),
            })?)
        };
        let best_target = match field(value, "best_target")? {
            Value::Null => None,
            _ => Some(str_field(value, "best_target")?.to_string()),
        };
        Ok(Self {
            language: str_field(value, "language")?.to_string(),
            repo: str_field(value, "repo")?.to_string(),
            name: str_field(value, "name")?.to_string(),
            is_best_similar: field(value, "is_best_similar")?.as_bool().ok_or_else(|| FieldError {
                field: "is_best_similar".into(),
                message: "expected true or false".into(),
            })?,
            best_similar_score,
            best_target,
            needle_position: field(value, "needle_position")?.clone(),
            token_start: field(value, "position.token_start")?.clone(),
            token_end: field(value, "position.token_end")?.clone(),
        })
    }

    /// The official per-task record, with `language` first.
    pub fn to_json(&self) -> Value {
        let score = match self.best_similar_score {
            Bleu::NoOverlap => json!(0),
            Bleu::Score(x) => json!(x),
        };
        json!({
            "language": self.language,
            "repo": self.repo,
            "name": self.name,
            "is_best_similar": self.is_best_similar,
            "best_similar_score": score,
            "best_target": self.best_target,
            "needle_position": self.needle_position,
            "position": {"token_start": self.token_start, "token_end": self.token_end},
        })
    }
}

/// Scores outputs against a dataset. Holds parsers; make one per thread.
pub struct RepoqaScorer {
    ignore_comments: bool,
    grammars: RepoqaGrammars,
    tools: HashMap<Language, CodeTools>,
    /// Comment-free needle texts by language and repository, made once per repository.
    clean_needles: HashMap<Language, HashMap<String, Vec<String>>>,
}

impl RepoqaScorer {
    /// A scorer; with `ignore_comments` comments and docstrings are removed from both the
    /// answer and the needles before matching. `grammars` chooses the tree-sitter grammars.
    pub fn new(ignore_comments: bool, grammars: RepoqaGrammars) -> Self {
        Self { ignore_comments, grammars, tools: HashMap::new(), clean_needles: HashMap::new() }
    }

    /// The official `needle_evaluator` plus the task record of `compute_score`.
    pub fn score(&mut self, language: Language, repo: &Repo, output: &ModelOutput) -> TaskResult {
        let grammars = &self.grammars;
        let tools = self.tools.entry(language).or_insert_with(|| CodeTools::new(language, grammars));
        let mut answer = tools.sanitize_output(&output.output);
        let ignore_comments = self.ignore_comments;
        if ignore_comments {
            answer = tools.remove_comments(&answer);
        }
        let needles: &[String] = if ignore_comments {
            let cleaned = self.clean_needles.entry(language).or_default();
            if !cleaned.contains_key(&repo.name) {
                let texts = repo.needle_texts.iter().map(|t| tools.remove_comments(t)).collect();
                cleaned.insert(repo.name.clone(), texts);
            }
            &cleaned[&repo.name]
        } else {
            &repo.needle_texts
        };
        // Strictly greater, starting from (integer) 0: the first best needle wins.
        let answer_tokens = function_tokens(&answer);
        let mut best = Bleu::NoOverlap;
        let mut best_target = None;
        for (needle, text) in repo.needles.iter().zip(needles) {
            let similarity = sentence_bleu(&function_tokens(text), &answer_tokens);
            if similarity.value() > best.value() {
                best = similarity;
                best_target = Some(needle.name.clone());
            }
        }
        TaskResult {
            language: output.language.clone(),
            repo: output.repo.clone(),
            name: output.name.clone(),
            is_best_similar: best_target.as_deref() == Some(output.name.as_str()),
            best_similar_score: best,
            best_target,
            needle_position: output.position_ratio.clone(),
            token_start: output.needle_token_start.clone(),
            token_end: output.needle_token_end.clone(),
        }
    }
}

/// Checks that an output can be scored against `dataset`: known language and repository.
pub fn resolve<'d>(dataset: &'d Dataset, output: &ModelOutput) -> Result<(Language, &'d Repo), FieldError> {
    let error = |field: &str, message: String| FieldError { field: field.into(), message };
    let language: Language = output.language.parse().map_err(|e| error("language", e))?;
    if !dataset.languages.contains_key(&output.language) {
        return Err(error("language", format!("the dataset has no language `{}`", output.language)));
    }
    let repo = dataset
        .repo(&output.language, &output.repo)
        .ok_or_else(|| error("repo", format!("the dataset has no {} repository `{}`", output.language, output.repo)))?;
    Ok((language, repo))
}

/// pass@1 per threshold for `all` and each language (in first-seen order).
#[derive(Debug, Clone, PartialEq)]
pub struct RepoqaScores {
    /// `("all" | language, pass@1 per threshold)`, `all` first.
    pub rows: Vec<(String, [f64; 11])>,
}

impl RepoqaScores {
    /// Aggregates results given in the official order (grouped by language, first-seen).
    /// With one sample per task pass@1 is the fraction passing.
    pub fn from_results(results: &[TaskResult]) -> Self {
        let pass_at_1 = |tasks: &[&TaskResult]| {
            THRESHOLDS.map(|t| tasks.iter().filter(|r| r.passes(t)).count() as f64 / tasks.len().max(1) as f64)
        };
        let all: Vec<&TaskResult> = results.iter().collect();
        let mut rows = vec![("all".to_string(), pass_at_1(&all))];
        for language in languages_in_order(results) {
            let tasks: Vec<&TaskResult> = results.iter().filter(|r| r.language == language).collect();
            rows.push((language, pass_at_1(&tasks)));
        }
        Self { rows }
    }

    /// The official `scores` object: `{lang: {"0.0": {"pass@1": x}, ...}}`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        for (language, values) in &self.rows {
            let mut by_threshold = Map::new();
            for (threshold, value) in THRESHOLDS.iter().zip(values) {
                by_threshold.insert(float_repr(*threshold), json!({"pass@1": value}));
            }
            out.insert(language.clone(), Value::Object(by_threshold));
        }
        Value::Object(out)
    }

    /// A plain-text table of pass@1 in percent, one row per `all` / language.
    pub fn table(&self) -> String {
        let mut out = format!("{:<12}", "threshold");
        for t in THRESHOLDS {
            out.push_str(&format!("{:>6}", float_repr(t)));
        }
        out.push('\n');
        for (language, values) in &self.rows {
            out.push_str(&format!("{language:<12}"));
            for v in values {
                out.push_str(&format!("{:>6.1}", 100.0 * v));
            }
            out.push('\n');
        }
        out
    }
}

/// Sorts results into the official order: grouped by language in first-seen order, stable.
pub fn official_order(mut results: Vec<TaskResult>) -> Vec<TaskResult> {
    let order = languages_in_order(&results);
    results.sort_by_key(|r| order.iter().position(|l| *l == r.language));
    results
}

fn languages_in_order(results: &[TaskResult]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for r in results {
        if !seen.contains(&r.language) {
            seen.push(r.language.clone());
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_verdicts_read_back_identically() {
        for score in [Bleu::NoOverlap, Bleu::Score(0.25)] {
            let r = TaskResult {
                language: "rust".into(), repo: "bytes".into(), name: "f".into(), is_best_similar: true,
                best_similar_score: score, best_target: (score != Bleu::NoOverlap).then(|| "f".to_string()),
                needle_position: json!(0.05), token_start: json!(3), token_end: json!(9),
            };
            assert_eq!(TaskResult::from_json(&r.to_json()).unwrap(), r);
        }
    }
    use crate::repoqa::Needle;

    fn repo() -> Repo {
        let needle = |name: &str| Needle { path: "a.rs".into(), name: name.into(), start_line: 0, end_line: 1 };
        Repo {
            name: "r".into(),
            needles: vec![needle("add"), needle("sub")],
            needle_texts: vec![
                "fn add(a: u8, b: u8) -> u8 { a + b } // sum".into(),
                "fn sub(a: u8, b: u8) -> u8 { a - b }".into(),
            ],
        }
    }

    fn output(name: &str, text: &str) -> ModelOutput {
        ModelOutput {
            language: "rust".into(),
            repo: "r".into(),
            name: name.into(),
            output: text.into(),
            position_ratio: json!(0.05),
            needle_token_start: json!(1),
            needle_token_end: json!(9),
        }
    }

    #[test]
    fn best_needle_wins_and_ties_keep_the_first() {
        let mut scorer = RepoqaScorer::new(false, RepoqaGrammars::Bundled);
        // A fenced answer is cut to the function node, which leaves out the trailing comment.
        let fenced = scorer.score(Language::Rust, &repo(), &output("add", "```rust\nfn add(a: u8, b: u8) -> u8 { a + b } // sum\n```"));
        assert!(fenced.is_best_similar && fenced.best_similar_score.value() < 1.0);
        let exact = scorer.score(Language::Rust, &repo(), &output("add", "fn add(a: u8, b: u8) -> u8 { a + b } // sum"));
        assert!(exact.is_best_similar);
        assert_eq!(exact.best_similar_score, Bleu::Score(1.0));
        let wrong = scorer.score(Language::Rust, &repo(), &output("add", "fn sub(a: u8, b: u8) -> u8 { a - b }"));
        assert_eq!((wrong.is_best_similar, wrong.best_target.as_deref()), (false, Some("sub")));
        let empty = scorer.score(Language::Rust, &repo(), &output("add", ""));
        assert_eq!(empty.to_json()["best_similar_score"], json!(0));
        assert_eq!(empty.to_json()["best_target"], Value::Null);
        assert!(!empty.passes(0.0));
    }

    #[test]
    fn ignoring_comments_changes_the_match() {
        let answer = output("add", "fn add(a: u8, b: u8) -> u8 { a + b }");
        let plain = RepoqaScorer::new(false, RepoqaGrammars::Bundled).score(Language::Rust, &repo(), &answer);
        let clean = RepoqaScorer::new(true, RepoqaGrammars::Bundled).score(Language::Rust, &repo(), &answer);
        assert!(plain.best_similar_score.value() < 1.0);
        assert_eq!(clean.best_similar_score, Bleu::Score(1.0));
    }

    #[test]
    fn scores_pool_all_and_split_languages() {
        let mut scorer = RepoqaScorer::new(false, RepoqaGrammars::Bundled);
        let mut results = vec![
            scorer.score(Language::Rust, &repo(), &output("add", "fn add(a: u8, b: u8) -> u8 { a + b } // sum")),
            scorer.score(Language::Rust, &repo(), &output("sub", "")),
        ];
        results[1].language = "python".into();
        let scores = RepoqaScores::from_results(&official_order(results));
        assert_eq!(scores.rows[0].1[10], 0.5);
        assert_eq!(scores.rows[1], ("rust".to_string(), [1.0; 11]));
        assert_eq!(scores.rows[2], ("python".to_string(), [0.0; 11]));
        assert_eq!(scores.to_json()["all"]["0.5"]["pass@1"], json!(0.5));
        assert!(scores.table().contains("rust         100.0"));
    }
}
