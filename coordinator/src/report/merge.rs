//! One report over several runs (a sweep run as several releases, one per model size): the runs'
//! tables side by side, refused when the runs did not measure the same thing.

use codesweep_store::{RunLayout, RunStore};
use serde_json::Value;

use super::{build_report, FailedShard, Report, ReportError, Scoring};
use crate::plan::load_spec;
use crate::spec::SweepSpec;

/// What must be equal for two runs' numbers to share a table: generation (less the
/// throughput-only `batch_size` and `max_tokens_in_flight`) and each benchmark's settings
/// (less the data's location, which may differ from cluster to cluster), as JSON.
fn measured_settings(spec: &SweepSpec) -> Vec<(&'static str, Value)> {
    let mut generation = spec.generation.clone();
    generation.batch_size = 0;
    generation.max_tokens_in_flight = 0;
    let cceval = spec.cceval.clone().map(|mut c| {
        c.data_dir = Default::default();
        c
    });
    let repoqa = spec.repoqa.clone().map(|mut r| {
        r.dataset = Default::default();
        r
    });
    let json = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    vec![
        ("generation", json(serde_json::to_value(&generation))),
        ("cceval", json(serde_json::to_value(&cceval))),
        ("repoqa", json(serde_json::to_value(&repoqa))),
    ]
}

/// The first top-level key whose values differ, with both values.
fn first_difference(a: &Value, b: &Value) -> Option<(String, Value, Value)> {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            keys.filter_map(|k| {
                let (x, y) = (a.get(k).cloned().unwrap_or(Value::Null), b.get(k).cloned().unwrap_or(Value::Null));
                (x != y).then(|| (k.clone(), x, y))
            })
            .next()
        }
        _ => (a != b).then(|| (String::new(), a.clone(), b.clone())),
    }
}

/// Builds each run's report and merges them into one: CrossCodeEval cells and RepoQA rows of
/// every run in the order given, failures named `<run>/<shard>`. Refuses runs whose measured
/// settings differ, and a model that appears in more than one run.
pub async fn build_merged_report(runs: &[(RunStore, String)], scoring: Scoring) -> Result<Report, ReportError> {
    let mut merged = Report { run_id: String::new(), cceval: Vec::new(), repoqa: Vec::new(), failures: Vec::new(), unreadable: Vec::new() };
    let mut first: Option<(String, Vec<(&'static str, Value)>)> = None;
    let mut models_of: Vec<(String, String)> = Vec::new();
    for (store, run_id) in runs {
        let no_run = || ReportError::NoRun { run_id: run_id.clone(), store: store.url().to_string() };
        let spec = load_spec(store, &RunLayout::new(run_id)).await?.ok_or_else(no_run)?;
        let settings = measured_settings(&spec);
        match &first {
            None => first = Some((run_id.clone(), settings)),
            Some((first_run, first_settings)) => {
                for ((section, a), (_, b)) in first_settings.iter().zip(&settings) {
                    if let Some((key, x, y)) = first_difference(a, b) {
                        let at = if key.is_empty() { section.to_string() } else { format!("{section}.{key}") };
                        return Err(ReportError::NotComparable {
                            first: first_run.clone(),
                            other: run_id.clone(),
                            message: format!("`{at}` is {x} in {first_run} and {y} in {run_id}"),
                        });
                    }
                }
            }
        }
        for model in &spec.models {
            if let Some((_, other)) = models_of.iter().find(|(m, _)| *m == model.name) {
                return Err(ReportError::NotComparable {
                    first: other.clone(),
                    other: run_id.clone(),
                    message: format!("model {:?} is in both; merge runs of different models", model.name),
                });
            }
            models_of.push((model.name.clone(), run_id.clone()));
        }
        let report = build_report(store, run_id, scoring).await?;
        merged.cceval.extend(report.cceval);
        merged.repoqa.extend(report.repoqa);
        merged.failures.extend(report.failures.into_iter().map(|f| FailedShard { shard_id: format!("{run_id}/{}", f.shard_id), ..f }));
        merged.unreadable.extend(report.unreadable.into_iter().map(|f| FailedShard { shard_id: format!("{run_id}/{}", f.shard_id), ..f }));
        merged.run_id = if merged.run_id.is_empty() { run_id.clone() } else { format!("{}+{run_id}", merged.run_id) };
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_the_first_key() {
        let a = serde_json::json!({"max_new_tokens": 50, "top_p": 0.95});
        let b = serde_json::json!({"max_new_tokens": 64, "top_p": 0.95});
        let (key, x, y) = first_difference(&a, &b).unwrap();
        assert_eq!((key.as_str(), x, y), ("max_new_tokens", serde_json::json!(50), serde_json::json!(64)));
        assert!(first_difference(&a, &a).is_none());
        let (key, ..) = first_difference(&Value::Null, &a).unwrap();
        assert_eq!(key, "");
    }
}
