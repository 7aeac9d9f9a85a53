//! CrossCodeEval: record formats, post-processing and metrics of the official
//! `scripts/eval_metric.py` + `scripts/eval_utils.py` (amazon-science/cceval).

pub mod edit_sim;
pub mod identifiers;
pub mod outputs;
pub mod postprocess;
pub mod prompt;
pub mod score;
pub mod shard;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::input::{str_field, FieldError, Located, RecordError};

pub use edit_sim::EditSimBackend;
pub use postprocess::StatementEnd;
pub use score::{CcevalScorer, CcevalSummary, ExampleMetrics, ScoredExample};

/// The four CrossCodeEval languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// Python (statement end found with tree-sitter-python).
    Python,
    /// Java.
    Java,
    /// TypeScript.
    TypeScript,
    /// C#.
    CSharp,
}

impl Language {
    /// All languages in the paper's table order.
    pub const ALL: [Language; 4] = [Language::Python, Language::Java, Language::TypeScript, Language::CSharp];

    /// The official `--language` value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Java => "java",
            Self::TypeScript => "typescript",
            Self::CSharp => "csharp",
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
            .ok_or_else(|| format!("unknown CrossCodeEval language `{s}`; expected python, java, typescript or csharp"))
    }
}

/// The fields of an official example record that scoring needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// `metadata.task_id`.
    pub task_id: String,
    /// In-file left context up to the cursor.
    pub prompt: String,
    /// The expected completion.
    pub groundtruth: String,
}

impl Example {
    /// Decodes one line of an official `line_completion*.jsonl` file.
    pub fn from_json(value: &Value) -> Result<Self, FieldError> {
        Ok(Self {
            task_id: str_field(value, "metadata.task_id")?.to_string(),
            prompt: str_field(value, "prompt")?.to_string(),
            groundtruth: str_field(value, "groundtruth")?.to_string(),
        })
    }
}

/// One model prediction: `{"task_id", "pred"}`; other fields (the official inference
/// script copies the whole example) are ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// Which example this completes.
    pub task_id: String,
    /// The raw completion.
    pub pred: String,
}

impl Prediction {
    /// Decodes one line of a prediction file.
    pub fn from_json(value: &Value) -> Result<Self, FieldError> {
        Ok(Self { task_id: str_field(value, "task_id")?.to_string(), pred: str_field(value, "pred")?.to_string() })
    }
}

/// Predictions matched to examples, in prediction order, plus every mismatch found.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    /// `(prediction index, example index)` pairs, in prediction order.
    pub pairs: Vec<(usize, usize)>,
    /// Duplicated task ids, predictions without an example, examples without a prediction.
    pub errors: Vec<RecordError>,
}

/// Matches predictions to examples by `task_id`.
///
/// The official script asserts equal counts and fails with a `KeyError` on an unknown id;
/// here every mismatch is reported with its file and line.
pub fn pair_predictions(
    examples_file: &str,
    examples: &[Located<Example>],
    predictions_file: &str,
    predictions: &[Located<Prediction>],
) -> Pairing {
    let example_ids: Vec<(usize, &str)> = examples.iter().map(|e| (e.line, e.value.task_id.as_str())).collect();
    let prediction_ids: Vec<(usize, &str)> = predictions.iter().map(|p| (p.line, p.value.task_id.as_str())).collect();
    pair_task_ids(examples_file, &example_ids, predictions_file, &prediction_ids)
}

/// [`pair_predictions`] on (line, task id) pairs alone, for callers that hold their records in
/// another shape.
pub fn pair_task_ids(examples_file: &str, examples: &[(usize, &str)], predictions_file: &str, predictions: &[(usize, &str)]) -> Pairing {
    let mut pairing = Pairing::default();
    let task_id_error = |file: &str, line: usize, message: String| RecordError {
        file: file.to_string(),
        line,
        field: Some("task_id".into()),
        message,
    };
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (index, &(line, id)) in examples.iter().enumerate() {
        if let Some(first) = by_id.insert(id, index) {
            pairing.errors.push(RecordError {
                field: Some("metadata.task_id".into()),
                ..task_id_error(examples_file, line, format!("duplicate task_id `{id}` (first on line {})", examples[first].0))
            });
            by_id.insert(id, first);
        }
    }
    let mut predicted: HashMap<&str, usize> = HashMap::new();
    for (index, &(line, id)) in predictions.iter().enumerate() {
        if let Some(first) = predicted.get(id) {
            pairing.errors.push(task_id_error(
                predictions_file,
                line,
                format!("duplicate prediction for `{id}` (first on line {})", predictions[*first].0),
            ));
            continue;
        }
        match by_id.get(id) {
            Some(&example) => {
                predicted.insert(id, index);
                pairing.pairs.push((index, example));
            }
            None => pairing.errors.push(task_id_error(predictions_file, line, format!("no example with task_id `{id}` in {examples_file}"))),
        }
    }
    for (index, &(line, id)) in examples.iter().enumerate() {
        if by_id.get(id) == Some(&index) && !predicted.contains_key(id) {
            pairing.errors.push(RecordError {
                field: Some("metadata.task_id".into()),
                ..task_id_error(examples_file, line, format!("no prediction for `{id}` in {predictions_file}"))
            });
        }
    }
    pairing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn located<T>(line: usize, value: T) -> Located<T> {
        Located { line, value }
    }

    fn example(id: &str) -> Example {
        Example { task_id: id.into(), prompt: String::new(), groundtruth: String::new() }
    }

    fn prediction(id: &str) -> Prediction {
        Prediction { task_id: id.into(), pred: String::new() }
    }

    #[test]
    fn pairs_follow_prediction_order_and_mismatches_are_named() {
        let examples = vec![located(1, example("a")), located(2, example("b")), located(3, example("c"))];
        let predictions =
            vec![located(1, prediction("c")), located(2, prediction("a")), located(3, prediction("a")), located(4, prediction("z"))];
        let pairing = pair_predictions("ex.jsonl", &examples, "pred.jsonl", &predictions);
        assert_eq!(pairing.pairs, vec![(0, 2), (1, 0)]);
        let shown: Vec<String> = pairing.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            vec![
                "pred.jsonl:3: field `task_id`: duplicate prediction for `a` (first on line 2)",
                "pred.jsonl:4: field `task_id`: no example with task_id `z` in ex.jsonl",
                "ex.jsonl:2: field `metadata.task_id`: no prediction for `b` in pred.jsonl",
            ]
        );
    }

    #[test]
    fn language_names_round_trip() {
        for language in Language::ALL {
            assert_eq!(language.name().parse::<Language>(), Ok(language));
        }
        assert!("c".parse::<Language>().unwrap_err().contains("expected python"));
    }
}
