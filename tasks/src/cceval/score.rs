//! Per-example scoring and the aggregate table of the official `compute_metric_stmt`.

use serde_json::{json, Value};

use super::edit_sim::{edit_similarity, EditSimBackend};
use super::identifiers::{extract_identifiers, IdentifierMatch};
use super::postprocess::{cut_bracket_statement, remove_comments, PythonStatementCutter};
use super::Language;
use crate::pycompat::num::py_round_digits;
use crate::pycompat::text::py_strip;

/// Every per-example value the official scorer computes.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredExample {
    /// The example's task id.
    pub task_id: String,
    /// Prediction after statement truncation and comment removal.
    pub pred: String,
    /// Groundtruth after comment removal.
    pub target: String,
    /// Identifiers of `pred`, ordered, with duplicates.
    pub pred_ids: Vec<String>,
    /// Identifiers of `target`, ordered, with duplicates.
    pub target_ids: Vec<String>,
    /// Exact match of the stripped non-empty lines.
    pub em: bool,
    /// Edit similarity 0..=100 (an integer value).
    pub es: f64,
    /// Identifier lists equal (order and duplicates count).
    pub id_em: bool,
    /// Set comparison of identifiers.
    pub id_match: IdentifierMatch,
}

impl ScoredExample {
    /// A line of the official `detailed_results.json` (JSON lines), with the official
    /// integer `0` where a ratio's denominator is zero.
    pub fn detailed_json(&self) -> Value {
        let ratio = |r: Option<f64>| r.map_or(json!(0), |r| json!(r));
        json!({
            "task_id": self.task_id,
            "em": u8::from(self.em),
            "es": self.es,
            "id_em": u8::from(self.id_em),
            "id_precision": ratio(self.id_match.precision()),
            "id_recall": ratio(self.id_match.recall()),
            "id_f1": ratio(self.id_match.f1()),
        })
    }

    /// A line of the official `prediction_truncated.jsonl`.
    pub fn truncated_json(&self) -> Value {
        json!({
            "task_id": self.task_id,
            "pred": self.pred,
            "target": self.target,
            "pred_ids": self.pred_ids,
            "target_ids": self.target_ids,
        })
    }
}

/// Scores predictions for one language. Holds a parser for Python; make one per thread.
pub struct CcevalScorer {
    language: Language,
    backend: EditSimBackend,
    python: Option<PythonStatementCutter>,
}

impl CcevalScorer {
    /// A scorer for `language` using the `backend` edit similarity.
    pub fn new(language: Language, backend: EditSimBackend) -> Self {
        let python = (language == Language::Python).then(PythonStatementCutter::new);
        Self { language, backend, python }
    }

    /// The official `postprocess_code_lines`: cut the completion at the end of its first
    /// statement.
    pub fn truncate_statement<'c>(&mut self, prompt: &str, completion: &'c str) -> &'c str {
        match &mut self.python {
            Some(cutter) => cutter.cut(prompt, completion),
            None => cut_bracket_statement(completion),
        }
    }

    /// Scores one prediction against its example, exactly as `process_examples` followed by
    /// the per-example part of `compute_metric_stmt`.
    pub fn score(&mut self, task_id: &str, prompt: &str, groundtruth: &str, completion: &str) -> ScoredExample {
        let pred = remove_comments(self.truncate_statement(prompt, completion));
        let target = remove_comments(groundtruth);
        let em = non_empty_stripped_lines(&pred).eq(non_empty_stripped_lines(&target));
        let pred_ids = extract_identifiers(&pred, self.language);
        let target_ids = extract_identifiers(&target, self.language);
        let es = edit_similarity(&pred, &target, self.backend);
        let id_match = IdentifierMatch::new(&pred_ids, &target_ids);
        ScoredExample { task_id: task_id.to_string(), id_em: pred_ids == target_ids, pred, target, pred_ids, target_ids, em, es, id_match }
    }
}

fn non_empty_stripped_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').map(py_strip).filter(|line| !line.is_empty())
}

/// The per-example numbers the summary averages: one line of `detailed_results.json`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExampleMetrics {
    /// Exact match.
    pub em: bool,
    /// Edit similarity 0..=100.
    pub es: f64,
    /// Identifier exact match.
    pub id_em: bool,
    /// Identifier precision (0 when undefined, as the official script writes it).
    pub id_precision: f64,
    /// Identifier recall (0 when undefined).
    pub id_recall: f64,
    /// Identifier F1 (0 when undefined).
    pub id_f1: f64,
}

impl From<&ScoredExample> for ExampleMetrics {
    fn from(s: &ScoredExample) -> Self {
        Self {
            em: s.em,
            es: s.es,
            id_em: s.id_em,
            id_precision: s.id_match.precision().unwrap_or(0.0),
            id_recall: s.id_match.recall().unwrap_or(0.0),
            id_f1: s.id_match.f1().unwrap_or(0.0),
        }
    }
}

impl ExampleMetrics {
    /// Reads a [`ScoredExample::detailed_json`] object back (stored shard results).
    pub fn from_detailed_json(value: &Value) -> Result<Self, crate::input::FieldError> {
        use crate::input::f64_field;
        Ok(Self {
            em: f64_field(value, "em")? != 0.0,
            es: f64_field(value, "es")?,
            id_em: f64_field(value, "id_em")? != 0.0,
            id_precision: f64_field(value, "id_precision")?,
            id_recall: f64_field(value, "id_recall")?,
            id_f1: f64_field(value, "id_f1")?,
        })
    }
}

/// The official `results.json`: percentages rounded with Python's `round(x, 2)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CcevalSummary {
    /// Exact match, %.
    pub em: f64,
    /// Mean edit similarity.
    pub es: f64,
    /// Identifier exact match, %.
    pub id_em: f64,
    /// Mean identifier precision, %.
    pub id_precision: f64,
    /// Mean identifier recall, %.
    pub id_recall: f64,
    /// Mean identifier F1, %.
    pub id_f1: f64,
    /// Number of scored examples.
    pub total: usize,
}

impl CcevalSummary {
    /// Aggregates per-example results in order, with the official float operations;
    /// `None` for an empty set (the official script divides by zero).
    pub fn from_scored(scored: &[ScoredExample]) -> Option<Self> {
        let metrics: Vec<ExampleMetrics> = scored.iter().map(ExampleMetrics::from).collect();
        Self::from_metrics(&metrics)
    }

    /// Aggregates per-example metrics in order (stored results give the same numbers as
    /// scoring afresh: the values round-trip through JSON exactly).
    pub fn from_metrics(metrics: &[ExampleMetrics]) -> Option<Self> {
        if metrics.is_empty() {
            return None;
        }
        let n = metrics.len() as f64;
        let count = |f: fn(&ExampleMetrics) -> bool| metrics.iter().filter(|s| f(s)).count() as f64;
        let mean_percent = |f: fn(&ExampleMetrics) -> f64| {
            let sum = metrics.iter().fold(0.0, |acc, s| acc + f(s));
            py_round_digits(sum / n * 100.0, 2)
        };
        Some(Self {
            em: py_round_digits(count(|s| s.em) / n * 100.0, 2),
            es: py_round_digits(metrics.iter().fold(0.0, |acc, s| acc + s.es) / n, 2),
            id_em: py_round_digits(count(|s| s.id_em) / n * 100.0, 2),
            id_precision: mean_percent(|s| s.id_precision),
            id_recall: mean_percent(|s| s.id_recall),
            id_f1: mean_percent(|s| s.id_f1),
            total: metrics.len(),
        })
    }

    /// The official `results.json` object.
    pub fn to_json(&self) -> Value {
        json!({
            "em": self.em,
            "es": self.es,
            "id_em": self.id_em,
            "id_precision": self.id_precision,
            "id_recall": self.id_recall,
            "id_f1": self.id_f1,
            "total": self.total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_prediction_scores_zero_against_a_real_target() {
        let mut scorer = CcevalScorer::new(Language::Java, EditSimBackend::Difflib);
        let s = scorer.score("t", "int x = ", "foo.bar();", "");
        assert_eq!((s.em, s.es, s.id_em), (false, 0.0, false));
        assert_eq!(s.detailed_json()["id_precision"], json!(0));
        assert_eq!(s.detailed_json()["id_recall"], json!(0.0));
    }

    #[test]
    fn em_ignores_blank_lines_and_indentation_but_not_comments_order() {
        let mut scorer = CcevalScorer::new(Language::TypeScript, EditSimBackend::Difflib);
        let s = scorer.score("t", "", "a.b(c);", "  a.b(c);   ");
        assert!(s.em && s.id_em);
        assert_eq!(s.es, 100.0);
        // Comment before the terminator: removed together with the rest of the line.
        let s = scorer.score("t", "", "a.b(c);", "a.b(c) // done;\n");
        assert_eq!(s.pred, "a.b(c) ");
        assert!(!s.em);
    }

    #[test]
    fn python_prediction_is_cut_then_compared() {
        let mut scorer = CcevalScorer::new(Language::Python, EditSimBackend::Levenshtein);
        let s = scorer.score("t", "import os\nx = os.", "path.join(a, 'b')", "path.join(a, 'b')  # join\ny = 1\n");
        assert_eq!(s.pred, "path.join(a, 'b')  ");
        assert!(s.em && s.id_em);
        assert_eq!(s.pred_ids, ["path", "join", "a"]);
    }

    #[test]
    fn summary_rounds_like_python() {
        let mut scorer = CcevalScorer::new(Language::Java, EditSimBackend::Difflib);
        let scored = vec![
            scorer.score("1", "", "a.b();", "a.b();"),
            scorer.score("2", "", "a.b();", "a.c();"),
            scorer.score("3", "", "a.b();", ""),
        ];
        let summary = CcevalSummary::from_scored(&scored).unwrap();
        assert_eq!(summary.em, 33.33);
        assert_eq!(summary.total, 3);
        assert_eq!(summary.es, py_round_digits((100.0 + scored[1].es + 0.0) / 3.0, 2));
        assert!(CcevalSummary::from_scored(&[]).is_none());
        let stored: Vec<ExampleMetrics> =
            scored.iter().map(|s| ExampleMetrics::from_detailed_json(&s.detailed_json()).unwrap()).collect();
        assert_eq!(CcevalSummary::from_metrics(&stored), Some(summary));
    }
}
