//! A RepoQA shard scored: the one path the worker (fresh answers) and `rescore` share. A shard
//! is one repository of one language; its input record is that repository in the official
//! dataset layout, and each stored result keeps the task it answered, so answers can be
//! scored again without rebuilding contexts.

use serde_json::{json, Value};

use super::{Dataset, Language, ModelOutput, RepoqaScorer, TaskResult};
use crate::input::invalid_record_error;

/// A shard's repository as a one-repository [`Dataset`]; `key` names the object in errors, and
/// the planner's stand-in for an unusable data line is refused with the error it carries.
pub fn shard_dataset(key: &str, language: &str, records: &[Value]) -> Result<(Dataset, Value), String> {
    let [record] = records else {
        return Err(format!("{key}: expected one repository record, found {}", records.len()));
    };
    if let Some(problem) = invalid_record_error(record) {
        return Err(format!("{key}:2: corrupt input record: {problem}"));
    }
    let document = json!({ language: [record] });
    let dataset = Dataset::from_json(key, &document).map_err(|e| e.to_string())?;
    Ok((dataset, document))
}

impl ModelOutput {
    /// The answer `completion` to the task a stored verdict records (for rescoring).
    pub fn from_verdict(verdict: &TaskResult, completion: &str) -> Self {
        Self {
            language: verdict.language.clone(),
            repo: verdict.repo.clone(),
            name: verdict.name.clone(),
            output: completion.to_string(),
            position_ratio: verdict.needle_position.clone(),
            needle_token_start: verdict.token_start.clone(),
            needle_token_end: verdict.token_end.clone(),
        }
    }
}

/// Scores `answers` against the shard's `dataset`, in order; an answer about a repository the
/// shard does not hold is named. `key` names the object the answers come from.
pub fn score_answers(
    scorer: &mut RepoqaScorer,
    language: Language,
    dataset: &Dataset,
    key: &str,
    answers: &[ModelOutput],
) -> Result<Vec<TaskResult>, String> {
    answers
        .iter()
        .enumerate()
        .map(|(i, answer)| {
            let repo = dataset
                .repo(&answer.language, &answer.repo)
                .ok_or_else(|| format!("{key}:{}: no repository {:?} ({}) in the shard input", i + 2, answer.repo, answer.language))?;
            Ok(scorer.score(language, repo, answer))
        })
        .collect()
}
