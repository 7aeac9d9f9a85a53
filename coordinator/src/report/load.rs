//! Fetching a run's stored shard results concurrently and scoring them in parallel, so
//! `report` and `rescore` cost one round of reads and all cores, not one shard at a time. A
//! stored result that cannot be read or scored (edited, truncated, a task twice) is named and
//! left out of the tables like a failed shard; the other shards are reported.

use std::collections::HashMap;

use codesweep_store::records::{self, Benchmark, ExampleResult, ResultHeader, ShardHeader};
use codesweep_store::{RunLayout, RunStore, StoreError};
use codesweep_tasks::cceval::ExampleMetrics;
use codesweep_tasks::repoqa::TaskResult;
use futures::{StreamExt, TryStreamExt};
use rayon::prelude::*;
use serde_json::Value;

use super::rescore::{rescore_cceval, rescore_repoqa};
use super::{record_error, FailedShard, ReportError, Scoring};
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

/// What reading one shard's result gave.
enum Loaded {
    /// No result yet.
    Absent,
    /// The result (and input, when rescoring).
    Stored(StoredShard),
    /// A result object that cannot be used: why, naming object and line.
    Unreadable(FailedShard),
}

async fn load_one(store: &RunStore, layout: &RunLayout, shard_id: String, with_input: bool) -> Result<Loaded, ReportError> {
    let key = layout.result(&shard_id);
    let Some(text) = store.get_text(&key).await? else { return Ok(Loaded::Absent) };
    let unreadable = |error: String| Ok(Loaded::Unreadable(FailedShard { shard_id: shard_id.clone(), attempts: None, error }));
    let (header, results): (ResultHeader, Vec<ExampleResult>) = match records::decode(&key, &text) {
        Ok(decoded) => decoded,
        Err(e @ StoreError::Format { .. }) => return unreadable(format!("stored result unreadable: {e}")),
        Err(e) => return Err(e.into()),
    };
    // A task scored twice would count twice in every table: the object is refused.
    let mut seen = std::collections::HashSet::new();
    if let Some((index, r)) = results.iter().enumerate().find(|(_, r)| !seen.insert(r.task_id.as_str())) {
        return unreadable(format!("stored result unreadable: {key}:{}: task_id {:?} appears twice", index + 2, r.task_id));
    }
    let input = if with_input {
        let input_key = layout.input(&shard_id);
        let text = store.get_text(&input_key).await?.ok_or_else(|| record_error(&input_key, "shard input missing"))?;
        let (_, examples): (ShardHeader, Vec<Value>) = records::decode(&input_key, &text)?;
        Some((input_key, examples))
    } else {
        None
    };
    Ok(Loaded::Stored(StoredShard { key, header, results, input }))
}

/// The shards of a run that have a result: scored, and those whose result cannot be used.
pub(super) struct ScoredRun {
    /// Scored shards by shard id.
    pub scored: HashMap<String, ScoredShard>,
    /// Results that could not be read or scored, named; their examples are missing from the tables.
    pub unreadable: Vec<FailedShard>,
}

/// Reads every finished shard of `plan` and scores it: the stored metrics as they are, or
/// (rescoring) the stored completions scored again against the shard inputs. Shards without a
/// result are absent from the map.
pub(super) async fn scored_shards(store: &RunStore, layout: &RunLayout, plan: &Plan, scoring: Scoring) -> Result<ScoredRun, ReportError> {
    let with_input = matches!(scoring, Scoring::Rescore(_));
    let loaded: Vec<Loaded> = futures::stream::iter(plan.shards.iter().map(|s| s.shard_id.clone()))
        .map(|id| load_one(store, layout, id, with_input))
        .buffer_unordered(CONCURRENT_READS)
        .try_collect()
        .await?;
    let mut unreadable = Vec::new();
    let mut stored = Vec::new();
    for shard in loaded {
        match shard {
            Loaded::Absent => {}
            Loaded::Stored(shard) => stored.push(shard),
            Loaded::Unreadable(failed) => unreadable.push(failed),
        }
    }
    // Scoring is CPU-bound: off the async threads, across every core.
    let scored: Vec<Result<(String, ScoredShard), FailedShard>> = tokio::task::spawn_blocking(move || {
        stored
            .into_par_iter()
            .map(|shard| {
                let shard_id = shard.header.shard.shard_id.clone();
                match verdicts(&shard, scoring) {
                    Ok(verdicts) => Ok((shard_id, ScoredShard { results: shard.results, verdicts })),
                    Err(error) => Err(FailedShard { shard_id, attempts: None, error: format!("stored result unreadable: {error}") }),
                }
            })
            .collect()
    })
    .await
    .map_err(|e| record_error(layout.run_id(), format!("scoring panicked: {e}")))?;
    let mut run = ScoredRun { scored: HashMap::new(), unreadable };
    for shard in scored {
        match shard {
            Ok((id, shard)) => {
                run.scored.insert(id, shard);
            }
            Err(failed) => run.unreadable.push(failed),
        }
    }
    run.unreadable.sort_by(|a, b| a.shard_id.cmp(&b.shard_id));
    Ok(run)
}

fn verdicts(shard: &StoredShard, scoring: Scoring) -> Result<Verdicts, String> {
    let key = &shard.key;
    let field_error = |index: usize, field: &str, message: &str| format!("{key}:{}: field `metrics.{field}`: {message}", index + 2);
    match (shard.header.shard.benchmark, scoring, &shard.input) {
        (Benchmark::Cceval, Scoring::Stored, _) => shard
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| ExampleMetrics::from_detailed_json(&r.metrics).map_err(|e| field_error(i, &e.field, &e.message)))
            .collect::<Result<_, _>>()
            .map(Verdicts::Cceval),
        (Benchmark::Repoqa, Scoring::Stored, _) => shard
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| TaskResult::from_json(&r.metrics).map_err(|e| field_error(i, &e.field, &e.message)))
            .collect::<Result<_, _>>()
            .map(Verdicts::Repoqa),
        (Benchmark::Cceval, Scoring::Rescore(options), Some((input_key, examples))) => {
            rescore_cceval(input_key, key, &shard.header.shard, examples, &shard.results, options.edit_sim).map(Verdicts::Cceval)
        }
        (Benchmark::Repoqa, Scoring::Rescore(options), Some((input_key, examples))) => {
            rescore_repoqa(input_key, key, &shard.header.shard, examples, &shard.results, options.ignore_comments).map(Verdicts::Repoqa)
        }
        (_, Scoring::Rescore(_), None) => Err(format!("{key}: rescoring needs the shard input")),
    }
}
