//! Stored answers scored again against their shard inputs, through the same shard-scoring
//! functions of codesweep-tasks the worker uses, so a rescore with the run's settings gives the
//! worker's verdicts.

use codesweep_fetch::grammars::choose_grammars;
use codesweep_store::records::{ExampleResult, ShardHeader};
use codesweep_tasks::cceval::shard::{edit_sim_or_default, score_completions, shard_examples};
use codesweep_tasks::cceval::{EditSimBackend, Example, ExampleMetrics, Language as CcevalLanguage};
use codesweep_tasks::repoqa::shard::{score_answers, shard_dataset};
use codesweep_tasks::repoqa::{Language, ModelOutput, RepoqaScorer, TaskResult};
use serde_json::Value;

/// Scores a CrossCodeEval shard's stored completions (`result_key`) against its input examples
/// (`input_key`); `edit_sim` overrides the run's backend. Errors name the object and line.
pub(super) fn rescore_cceval(
    input_key: &str,
    result_key: &str,
    shard: &ShardHeader,
    examples: &[Value],
    results: &[ExampleResult],
    edit_sim: Option<EditSimBackend>,
) -> Result<Vec<ExampleMetrics>, String> {
    let language: CcevalLanguage = shard.language.parse()?;
    let backend = match edit_sim {
        Some(backend) => backend,
        None => edit_sim_or_default(shard.edit_sim.as_deref())?,
    };
    let inputs: Vec<Example> =
        shard_examples(input_key, examples, false).map_err(|e| e.to_string())?.into_iter().map(|s| s.example).collect();
    let completions: Vec<(&str, &str)> = results.iter().map(|r| (r.task_id.as_str(), r.completion.as_str())).collect();
    let scored = score_completions(language, backend, input_key, &inputs, result_key, &completions).map_err(|e| e.to_string())?;
    Ok(scored.iter().map(ExampleMetrics::from).collect())
}

/// Scores a RepoQA shard's stored answers (`result_key`) again against its input repository
/// (`input_key`); `ignore_comments` overrides the run's setting.
pub(super) fn rescore_repoqa(
    input_key: &str,
    result_key: &str,
    shard: &ShardHeader,
    records: &[Value],
    results: &[ExampleResult],
    ignore_comments: Option<bool>,
) -> Result<Vec<TaskResult>, String> {
    let (dataset, _) = shard_dataset(input_key, &shard.language, records)?;
    let options = shard.repoqa.clone().unwrap_or_default();
    let grammars = choose_grammars(&options.grammars).map_err(|e| e.to_string())?;
    let language: Language = shard.language.parse()?;
    let answers: Vec<ModelOutput> = results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let stored = TaskResult::from_json(&r.metrics)
                .map_err(|e| format!("{result_key}:{}: field `metrics.{}`: {}", i + 2, e.field, e.message))?;
            Ok(ModelOutput::from_verdict(&stored, &r.completion))
        })
        .collect::<Result<_, String>>()?;
    let mut scorer = RepoqaScorer::new(ignore_comments.unwrap_or(options.ignore_comments), grammars);
    score_answers(&mut scorer, language, &dataset, result_key, &answers)
}
