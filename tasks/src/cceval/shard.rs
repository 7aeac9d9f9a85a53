//! A CrossCodeEval shard scored: the one path the worker (fresh completions), `rescore` and
//! `report` share, so the three read, validate, pair and score a shard alike. A shard object
//! holds a header line, so record `i` is on line `i + 2`.

use serde_json::Value;

use super::{pair_task_ids, CcevalScorer, EditSimBackend, Example, Language, ScoredExample};
use crate::input::{invalid_record_error, str_field, RecordError};

/// The edit-similarity backend of a spec or shard that names none: the official `difflib`.
pub const DEFAULT_EDIT_SIM: &str = "difflib";

/// The backend `name` gives, [`DEFAULT_EDIT_SIM`] when there is none.
pub fn edit_sim_or_default(name: Option<&str>) -> Result<EditSimBackend, String> {
    name.unwrap_or(DEFAULT_EDIT_SIM).parse()
}

/// One input record of a shard: the example and, when the setting uses it, its cross-file context.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardExample {
    /// Task id, prompt and reference.
    pub example: Example,
    /// `crossfile_context.text`, for settings with retrieval.
    pub crossfile: Option<String>,
}

/// The line of record `index` in a shard object (after the header line).
fn line_of(index: usize) -> usize {
    index + 2
}

/// Reads a shard's input records (`file` names the object), refusing the planner's stand-ins
/// for unusable data lines with the error they carry.
pub fn shard_examples(file: &str, records: &[Value], use_crossfile: bool) -> Result<Vec<ShardExample>, RecordError> {
    let error = |index: usize, field: Option<String>, message: String| RecordError { file: file.to_string(), line: line_of(index), field, message };
    records
        .iter()
        .enumerate()
        .map(|(i, value)| {
            if let Some(problem) = invalid_record_error(value) {
                return Err(error(i, None, format!("corrupt input record: {problem}")));
            }
            let example = Example::from_json(value).map_err(|e| error(i, Some(e.field), e.message))?;
            let crossfile = if use_crossfile {
                Some(str_field(value, "crossfile_context.text").map_err(|e| error(i, Some(e.field), e.message))?.to_string())
            } else {
                None
            };
            Ok(ShardExample { example, crossfile })
        })
        .collect()
}

/// Scores `completions` (task id and raw completion, in the order of the object `completions_file`)
/// against `examples` (from `examples_file`): paired by task id, so a completion of no example,
/// a task completed twice or an example left without a completion is named (file, line) and
/// nothing is counted twice. Verdicts come in completion order.
pub fn score_completions(
    language: Language,
    edit_sim: EditSimBackend,
    examples_file: &str,
    examples: &[Example],
    completions_file: &str,
    completions: &[(&str, &str)],
) -> Result<Vec<ScoredExample>, RecordError> {
    let example_ids: Vec<(usize, &str)> = examples.iter().enumerate().map(|(i, e)| (line_of(i), e.task_id.as_str())).collect();
    let completion_ids: Vec<(usize, &str)> = completions.iter().enumerate().map(|(i, (task_id, _))| (line_of(i), *task_id)).collect();
    let pairing = pair_task_ids(examples_file, &example_ids, completions_file, &completion_ids);
    if let Some(first) = pairing.errors.into_iter().next() {
        return Err(first);
    }
    let mut scorer = CcevalScorer::new(language, edit_sim);
    Ok(pairing
        .pairs
        .into_iter()
        .map(|(p, e)| {
            let (example, completion) = (&examples[e], completions[p].1);
            scorer.score(&example.task_id, &example.prompt, &example.groundtruth, completion)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(id: &str, groundtruth: &str) -> Value {
        json!({"prompt": "x = ", "groundtruth": groundtruth, "metadata": {"task_id": id}, "crossfile_context": {"text": "# ctx"}})
    }

    #[test]
    fn inputs_are_read_with_context_and_stand_ins_are_named() {
        let records = [record("a", "1"), crate::input::invalid_record("data.jsonl:7: field `prompt`: missing")];
        let error = shard_examples("in/0001.jsonl", &records, true).unwrap_err();
        assert_eq!(error.to_string(), "in/0001.jsonl:3: corrupt input record: data.jsonl:7: field `prompt`: missing");
        let read = shard_examples("in/0001.jsonl", &records[..1], true).unwrap();
        assert_eq!(read[0].crossfile.as_deref(), Some("# ctx"));
        assert_eq!(shard_examples("k", &[json!({"prompt": "x"})], false).unwrap_err().field.as_deref(), Some("metadata.task_id"));
    }

    #[test]
    fn completions_pair_by_task_id_and_a_duplicate_is_named_not_counted() {
        let examples: Vec<Example> =
            shard_examples("in", &[record("a", "1"), record("b", "2")], false).unwrap().into_iter().map(|s| s.example).collect();
        let edit_sim = edit_sim_or_default(None).unwrap();
        let scored = score_completions(Language::Python, edit_sim, "in", &examples, "out", &[("b", "2"), ("a", "7")]).unwrap();
        assert_eq!((scored[0].task_id.as_str(), scored[0].em), ("b", true));
        assert_eq!((scored[1].task_id.as_str(), scored[1].em), ("a", false));
        let twice = score_completions(Language::Python, edit_sim, "in", &examples, "out", &[("a", "1"), ("a", "1"), ("b", "2")]);
        assert_eq!(twice.unwrap_err().to_string(), "out:3: field `task_id`: duplicate prediction for `a` (first on line 2)");
        let missing = score_completions(Language::Python, edit_sim, "in", &examples, "out", &[("a", "1")]);
        assert!(missing.unwrap_err().to_string().starts_with("in:3: field `metadata.task_id`: no prediction for `b`"));
        assert_eq!(edit_sim_or_default(Some("nope")).unwrap_err(), "nope".parse::<EditSimBackend>().unwrap_err());
    }
}
