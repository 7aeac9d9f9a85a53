//! Fetching a run's stored shard results concurrently and scoring them in parallel, so
//! `report` and `rescore` cost one round of reads and all cores, not one shard at a time.

use std::collections::HashMap;

use codesweep_store::records::{self, Benchmark, ExampleResult, ResultHeader, ShardHeader};
use codesweep_store::{RunLayout, RunStore};
use codesweep_tasks::cceval::{CcevalScorer, EditSimBackend, Example, ExampleMetrics, Language};
use codesweep_tasks::repoqa::TaskResult;
use futures::{StreamExt, TryStreamExt};
use rayon::prelude::*;
use serde_json::Value;

use super::{record_error, ReportError, Scoring};
use crate::plan::Plan;

/// Object-store reads in flight at once.
const CONCURRENT_READS: usize = 32;

/// One shard's stored result and, when rescoring, its input.
struct StoredShard {
    key: String,
    header: ResultHeader,
    results: Vec<ExampleResult>,
    input: Option<(String, Vec<Value>)>,
}

/// A shard's per-example verdicts, by benchmark.
pub(super) enum Verdicts {
    /// CrossCodeEval metrics, in result order.
    Cceval(Vec<ExampleMetrics>),
    /// RepoQA verdicts, in result order.
    Repoqa(Vec<TaskResult>),
}

/// A scored shard: its stored results and their verdicts.
pub(super) struct ScoredShard {
    /// The stored results (completions), in input order.
    pub results: Vec<ExampleResult>,
    /// Their verdicts.
    pub verdicts: Verdicts,
}

async fn load_one(store: &RunStore, layout: &RunLayout, shard_id: String, with_input: bool) -> Result<Option<StoredShard>, ReportError> {
    let key = layout.result(&shard_id);
    let Some(text) = store.get_text(&key).await? else { return Ok(None) };
    let (header, results): (ResultHeader, Vec<ExampleResult>) = records::decode(&key, &text)?;
    // A task scored twice would count twice in every table: refuse the object instead.
    let mut seen = std::collections::HashSet::new();
    if let Some((index, r)) = results.iter().enumerate().find(|(_, r)| !seen.insert(r.task_id.as_str())) {
        return Err(record_error(&key, format!("record {}: task_id {:?} appears twice in the result", index + 1, r.task_id)));
    }
    let input = if with_input {
        let input_key = layout.input(&shard_id);
        let text = store.get_text(&input_key).await?.ok_or_else(|| record_error(&input_key, "shard input missing"))?;
        let (_, examples): (ShardHeader, Vec<Value>) = records::decode(&input_key, &text)?;
        Some((input_key, examples))
    } else {
        None
    };
    Ok(Some(StoredShard { key, header, results, input }))
}

/// Reads every finished shard of `plan` and scores it: the stored metrics as they are, or
/// (rescoring) the stored completions scored again against the shard inputs. Shards without a
/// result are absent from the map.
pub(super) async fn scored_shards(
    store: &RunStore,
    layout: &RunLayout,
    plan: &Plan,
    scoring: Scoring,
) -> Result<HashMap<String, ScoredShard>, ReportError> {
    let with_input = matches!(scoring, Scoring::Rescore(_));
    let loaded: Vec<Option<StoredShard>> = futures::stream::iter(plan.shards.iter().map(|s| s.shard_id.clone()))
        .map(|id| load_one(store, layout, id, with_input))
        .buffer_unordered(CONCURRENT_READS)
        .try_collect()
        .await?;
    let stored: Vec<StoredShard> = loaded.into_iter().flatten().collect();
    // Scoring is CPU-bound: off the async threads, across every core.
    tokio::task::spawn_blocking(move || {
        stored
            .into_par_iter()
            .map(|shard| {
                let verdicts = verdicts(&shard, scoring)?;
                Ok((shard.header.shard.shard_id.clone(), ScoredShard { results: shard.results, verdicts }))
            })
            .collect()
    })
    .await
    .map_err(|e| record_error(layout.run_id(), format!("scoring panicked: {e}")))?
}

fn verdicts(shard: &StoredShard, scoring: Scoring) -> Result<Verdicts, ReportError> {
    let key = &shard.key;
    let field_error = |task: &str, field: &str, message: &str| record_error(key, format!("{task}: field `{field}`: {message}"));
    match (shard.header.shard.benchmark, scoring, &shard.input) {
        (Benchmark::Cceval, Scoring::Stored, _) => shard
            .results
            .iter()
            .map(|r| ExampleMetrics::from_detailed_json(&r.metrics).map_err(|e| field_error(&r.task_id, &e.field, &e.message)))
            .collect::<Result<_, _>>()
            .map(Verdicts::Cceval),
        (Benchmark::Repoqa, Scoring::Stored, _) => shard
            .results
            .iter()
            .map(|r| TaskResult::from_json(&r.metrics).map_err(|e| field_error(&r.task_id, &e.field, &e.message)))
            .collect::<Result<_, _>>()
            .map(Verdicts::Repoqa),
        (Benchmark::Cceval, Scoring::Rescore(options), Some((input_key, examples))) => {
            rescore_cceval(input_key, &shard.header.shard, examples, &shard.results, options.edit_sim).map(Verdicts::Cceval)
        }
        (Benchmark::Repoqa, Scoring::Rescore(options), Some((input_key, examples))) => {
            super::repoqa::rescore(input_key, &shard.header.shard, examples, &shard.results, options.ignore_comments)
                .map(Verdicts::Repoqa)
        }
        (_, Scoring::Rescore(_), None) => Err(record_error(key, "rescoring needs the shard input")),
    }
}

/// Scores a CrossCodeEval shard's stored completions again against its input examples.
fn rescore_cceval(
    key: &str,
    shard: &ShardHeader,
    examples: &[Value],
    results: &[ExampleResult],
    edit_sim: Option<EditSimBackend>,
) -> Result<Vec<ExampleMetrics>, ReportError> {
    let language: Language = shard.language.parse().map_err(|e: String| record_error(key, e))?;
    let backend = match edit_sim {
        Some(backend) => backend,
        None => shard.edit_sim.as_deref().unwrap_or("difflib").parse().map_err(|e: String| record_error(key, e))?,
    };
    let by_id: HashMap<String, Example> = examples
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Example::from_json(v)
                .map(|e| (e.task_id.clone(), e))
                .map_err(|e| record_error(key, format!("line {}: field `{}`: {}", i + 2, e.field, e.message)))
        })
        .collect::<Result<_, _>>()?;
    let mut scorer = CcevalScorer::new(language, backend);
    results
        .iter()
        .map(|r| {
            let example = by_id.get(&r.task_id).ok_or_else(|| record_error(key, format!("no example {:?}", r.task_id)))?;
            let scored = scorer.score(&r.task_id, &example.prompt, &example.groundtruth, &r.completion);
            Ok(ExampleMetrics::from(&scored))
        })
        .collect()
}
