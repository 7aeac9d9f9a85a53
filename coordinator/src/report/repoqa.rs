//! The RepoQA part of a report: pass@1 per language at the paper's 0.8 threshold, a
//! threshold sweep, and official-format outputs for the official `compute_score`.

use std::collections::HashMap;

use codesweep_store::records::Benchmark;
use codesweep_store::RunLayout;
use codesweep_tasks::repoqa::score::official_order;
use codesweep_tasks::repoqa::{Language, RepoqaScores, TaskResult, THRESHOLDS};
use serde_json::{json, Value};

use super::load::{ScoredShard, Verdicts};
use super::{record_error, ReportError};
use crate::plan::Plan;

/// One model × context setting of RepoQA.
#[derive(Debug, Clone)]
pub struct RepoqaRow {
    /// Model display name.
    pub model: String,
    /// Context setting, e.g. `ctx16384_none`.
    pub setting: String,
    /// Needles planned.
    pub planned: usize,
    /// Verdicts in the official order.
    pub results: Vec<TaskResult>,
    /// `(verdict, raw answer, the task as the harness writes it)` in plan order, for exports.
    pub outputs: Vec<(TaskResult, String, Option<Value>)>,
    /// pass@1 per threshold, `all` first.
    pub scores: RepoqaScores,
}

/// Gathers every scored RepoQA shard of the plan (taken out of `scored`), grouped by (model,
/// setting) in spec order.
pub(super) fn collect(
    layout: &RunLayout,
    plan: &Plan,
    model_order: &[&str],
    scored: &mut HashMap<String, ScoredShard>,
) -> Result<Vec<RepoqaRow>, ReportError> {
    let mut groups: Vec<((usize, String), Vec<&crate::plan::PlannedShard>)> = Vec::new();
    for shard in plan.shards.iter().filter(|s| s.benchmark == Benchmark::Repoqa) {
        let key = (model_order.iter().position(|m| *m == shard.model).unwrap_or(usize::MAX), shard.setting.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, shards)) => shards.push(shard),
            None => groups.push((key, vec![shard])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rows = Vec::new();
    for (_, shards) in groups {
        let mut outputs = Vec::new();
        for shard in &shards {
            let Some(done) = scored.remove(&shard.shard_id) else { continue };
            let Verdicts::Repoqa(verdicts) = done.verdicts else {
                return Err(record_error(&layout.result(&shard.shard_id), "not a RepoQA result"));
            };
            outputs.extend(verdicts.into_iter().zip(done.results).map(|(v, r)| (v, r.completion, r.task)));
        }
        let results = official_order(outputs.iter().map(|(v, _, _)| v.clone()).collect());
        let scores = RepoqaScores::from_results(&results);
        rows.push(RepoqaRow {
            model: shards[0].model.clone(),
            setting: shards[0].setting.clone(),
            planned: shards.iter().map(|s| s.examples).sum(),
            results,
            outputs,
            scores,
        });
    }
    Ok(rows)
}

fn pass_at(scores: &RepoqaScores, row: &str, threshold_index: usize) -> Option<f64> {
    scores.rows.iter().find(|(name, _)| name == row).map(|(_, values)| 100.0 * values[threshold_index])
}

/// The RepoQA tables in Markdown: languages and `all` at threshold 0.8, then `all` over every threshold.
pub fn markdown(run_id: &str, rows: &[RepoqaRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let at_08 = THRESHOLDS.iter().position(|t| (*t - 0.8).abs() < 1e-9).unwrap_or(8);
    let languages: Vec<&str> = Language::ALL
        .iter()
        .map(|l| l.name())
        .filter(|l| rows.iter().any(|r| r.scores.rows.iter().any(|(n, _)| n == l)))
        .collect();
    let mut out = format!("## RepoQA Searching Needle Function — run `{run_id}` (pass@1 %, threshold 0.8)\n\n| Model | Context |");
    for l in &languages {
        out.push_str(&format!(" {l} |"));
    }
    out.push_str(" all |\n|---|---|");
    out.push_str(&"---:|".repeat(languages.len() + 1));
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} | {} |", row.model, row.setting));
        for l in languages.iter().copied().chain(["all"]) {
            match pass_at(&row.scores, l, at_08) {
                Some(v) => out.push_str(&format!(" {v:.1} |")),
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    out.push_str("\n### Threshold sweep (all languages, pass@1 %)\n\n| Model | Context |");
    for t in THRESHOLDS {
        out.push_str(&format!(" {t:.1} |"));
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---:|".repeat(THRESHOLDS.len()));
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} | {} |", row.model, row.setting));
        for i in 0..THRESHOLDS.len() {
            out.push_str(&format!(" {:.1} |", pass_at(&row.scores, "all", i).unwrap_or(0.0)));
        }
        out.push('\n');
    }
    if rows.iter().any(|r| r.results.len() < r.planned) {
        out.push_str("\nSome needles have no result yet (failed or still running); their rows score only the finished ones.\n");
    }
    out
}

/// JSON rows with the official `scores` object.
pub fn json(rows: &[RepoqaRow]) -> Value {
    Value::Array(
        rows.iter()
            .map(|r| json!({"model": r.model, "setting": r.setting, "tasks": r.results.len(), "planned": r.planned, "scores": r.scores.to_json()}))
            .collect(),
    )
}

/// Official-format model outputs per (model, setting), readable by `codesweep score repoqa`
/// and the official `compute_score`: each line is the task as the official harness writes it
/// (`repo, name, language, path, position_ratio, description, instruction, template,
/// code_context, needle_token_start, needle_token_end, code_context_ntokens`) plus `output`.
/// Results stored before the task was kept give only the fields scoring reads.
pub fn exports(rows: &[RepoqaRow]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| {
            let body: String = r
                .outputs
                .iter()
                .map(|(v, answer, task)| {
                    let line = match task {
                        Some(Value::Object(task)) => {
                            let mut line = task.clone();
                            line.insert("output".into(), json!([answer]));
                            Value::Object(line)
                        }
                        _ => json!({
                            "language": v.language, "repo": v.repo, "name": v.name,
                            "position_ratio": v.needle_position, "needle_token_start": v.token_start,
                            "needle_token_end": v.token_end, "output": [answer],
                        }),
                    };
                    line.to_string() + "\n"
                })
                .collect();
            (format!("exports/repoqa/{}/{}/outputs.jsonl", r.model, r.setting), body)
        })
        .collect()
}
