//! Merges shard results into the papers' tables, official-format exports and a scaling plot.
//!
//! CrossCodeEval: rows model × setting, columns language × {EM, ES, ID-EM, ID-F1} (Table 2 of
//! the paper). Numbers come from the stored per-example metrics, aggregated in data-file order
//! with the official rounding — or, for `rescore`, from the stored raw completions scored again.

use std::collections::BTreeMap;

use codesweep_store::records::Benchmark;
use codesweep_store::{RunLayout, RunStore, StoreError};
use codesweep_tasks::cceval::{CcevalSummary, EditSimBackend, Language};
use serde::Serialize;
use serde_json::{json, Value};

use crate::plan::{load_plan, load_spec, PlanError};

/// Why a report could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The store failed or holds something unexpected.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run has no plan.
    #[error("no run {run_id:?} in {store} (no plan.json); check the run id and the store URL")]
    NoRun {
        /// The run.
        run_id: String,
        /// The store's URL.
        store: String,
    },
    /// A stored record is invalid.
    #[error("{key}: {message}")]
    Record {
        /// The object or input concerned.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// Runs asked to share a report did not measure the same thing.
    #[error("runs {first} and {other} cannot share a report: {message}")]
    NotComparable {
        /// The first run.
        first: String,
        /// The run that differs.
        other: String,
        /// What is wrong.
        message: String,
    },
}

impl From<PlanError> for ReportError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::Store(e) => ReportError::Store(e),
            other => ReportError::Record { key: "plan".into(), message: other.to_string() },
        }
    }
}

/// How to obtain per-example metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    /// Use the metrics the workers stored.
    Stored,
    /// Score the stored raw completions again with today's code (`rescore`), optionally with
    /// other scoring settings than the run used.
    Rescore(RescoreOptions),
}

/// Scoring settings `rescore` may change; `None` keeps the run's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RescoreOptions {
    /// CrossCodeEval edit-similarity backend.
    pub edit_sim: Option<EditSimBackend>,
    /// RepoQA: strip comments from answers and needles before matching.
    pub ignore_comments: Option<bool>,
}

/// One (model, language, setting) cell of the CrossCodeEval table.
#[derive(Debug, Clone, Serialize)]
pub struct CcevalCell {
    /// Model display name.
    pub model: String,
    /// Parameter count from the spec, if given.
    pub parameters: Option<f64>,
    /// Language.
    pub language: String,
    /// Setting (`in_file`, `rg1_bm25`, …).
    pub setting: String,
    /// Examples with results.
    pub examples: usize,
    /// Examples planned.
    pub planned: usize,
    /// The official aggregate over the examples with results.
    #[serde(skip)]
    pub summary: Option<CcevalSummary>,
    /// Per-example predictions in data order, for official-format exports.
    #[serde(skip)]
    pub predictions: Vec<(String, String)>,
}

/// A run's merged results.
#[derive(Debug, Clone)]
pub struct Report {
    /// The run.
    pub run_id: String,
    /// CrossCodeEval cells, ordered by model (spec order), setting, language.
    pub cceval: Vec<CcevalCell>,
    /// RepoQA rows, ordered by model (spec order) and setting.
    pub repoqa: Vec<RepoqaRow>,
    /// Shards that failed for good and have no result, in shard-id order.
    pub failures: Vec<FailedShard>,
    /// Shards whose stored result cannot be used (damaged after the run), named with the
    /// object and line; their examples are missing from the tables.
    pub unreadable: Vec<FailedShard>,
}

/// A shard that failed for good: its final failure record in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedShard {
    /// The shard.
    pub shard_id: String,
    /// Attempts made, when recorded.
    pub attempts: Option<u64>,
    /// The last error.
    pub error: String,
}

/// Reads a run's final failure records, skipping shards that have a result after all
/// (a later retry succeeded).
pub async fn failed_shards(
    store: &RunStore,
    layout: &RunLayout,
    done: &std::collections::HashSet<String>,
) -> Result<Vec<FailedShard>, StoreError> {
    let prefix = format!("{}/failures/", layout.run_id());
    let mut failures = Vec::new();
    for key in store.list(&format!("{}/failures", layout.run_id())).await? {
        let Some(shard_id) = key.strip_prefix(&prefix).and_then(|k| k.strip_suffix(".json")) else { continue };
        if done.contains(shard_id) {
            continue;
        }
        let text = store.get_text(&key).await?.unwrap_or_default();
        let record = serde_json::from_str::<Value>(&text).ok();
        let error = record.as_ref().and_then(|v| v["error"].as_str().map(str::to_string)).unwrap_or(text);
        let attempts = record.as_ref().and_then(|v| v["attempts"].as_u64());
        failures.push(FailedShard { shard_id: shard_id.to_string(), attempts, error });
    }
    failures.sort_by(|a, b| a.shard_id.cmp(&b.shard_id));
    Ok(failures)
}

/// Shards of a run whose result objects exist.
pub async fn done_shards(store: &RunStore, layout: &RunLayout) -> Result<std::collections::HashSet<String>, StoreError> {
    Ok(store.list(&layout.results_prefix()).await?.iter().filter_map(|k| layout.shard_of_result(k)).collect())
}

/// The paper's name of a setting.
pub fn setting_title(setting: &str) -> String {
    if setting == crate::plan::IN_FILE {
        return "In-file".into();
    }
    if let Some(retriever) = setting.strip_prefix("rg1_") {
        return format!("Retrieval ({retriever})");
    }
    if let Some(retriever) = setting.strip_prefix("oracle_") {
        return format!("Retrieval w/ Ref. ({retriever})");
    }
    setting.to_string()
}

fn record_error(key: &str, message: impl Into<String>) -> ReportError {
    ReportError::Record { key: key.to_string(), message: message.into() }
}

/// Reads a run's results from the store and merges them.
pub async fn build_report(store: &RunStore, run_id: &str, scoring: Scoring) -> Result<Report, ReportError> {
    let layout = RunLayout::new(run_id);
    let no_run = || ReportError::NoRun { run_id: run_id.to_string(), store: store.url().to_string() };
    let plan = load_plan(store, &layout).await?.ok_or_else(no_run)?;
    let spec = load_spec(store, &layout).await?.ok_or_else(no_run)?;
    let model_order: Vec<&str> = spec.models.iter().map(|m| m.name.as_str()).collect();
    let parameters: BTreeMap<&str, Option<f64>> = spec.models.iter().map(|m| (m.name.as_str(), m.parameters)).collect();
    // (model index, setting, language index) → shards in index order.
    let mut cells: BTreeMap<(usize, String, usize), Vec<&crate::plan::PlannedShard>> = BTreeMap::new();
    for shard in plan.shards.iter().filter(|s| s.benchmark == Benchmark::Cceval) {
        let model = model_order.iter().position(|m| *m == shard.model).unwrap_or(usize::MAX);
        let language = Language::ALL.iter().position(|l| l.name() == shard.language).unwrap_or(usize::MAX);
        cells.entry((model, shard.setting.clone(), language)).or_default().push(shard);
    }
    let load::ScoredRun { mut scored, unreadable } = load::scored_shards(store, &layout, &plan, scoring).await?;
    let mut out = Vec::new();
    for ((_, setting, _), mut shards) in cells {
        shards.sort_by_key(|s| s.index);
        let first = shards[0];
        let mut metrics = Vec::new();
        let mut predictions = Vec::new();
        for shard in &shards {
            let Some(done) = scored.remove(&shard.shard_id) else { continue };
            let load::Verdicts::Cceval(shard_metrics) = done.verdicts else {
                return Err(record_error(&layout.result(&shard.shard_id), "not a CrossCodeEval result"));
            };
            metrics.extend(shard_metrics);
            predictions.extend(done.results.into_iter().map(|r| (r.task_id, r.completion)));
        }
        out.push(CcevalCell {
            model: first.model.clone(),
            parameters: parameters.get(first.model.as_str()).copied().flatten(),
            language: first.language.clone(),
            setting,
            examples: metrics.len(),
            planned: shards.iter().map(|s| s.examples).sum(),
            summary: CcevalSummary::from_metrics(&metrics),
            predictions,
        });
    }
    let repoqa = repoqa::collect(&layout, &plan, &model_order, &mut scored)?;
    let failures = failed_shards(store, &layout, &done_shards(store, &layout).await?).await?;
    Ok(Report { run_id: run_id.to_string(), cceval: out, repoqa, failures, unreadable })
}

/// A Markdown table of shards with their errors, under `title`.
fn shard_errors_markdown(title: &str, shards: &[FailedShard]) -> String {
    let mut out = format!("## {title}\n\n| Shard | Attempts | Error |\n|---|---:|---|\n");
    for f in shards {
        let attempts = f.attempts.map(|a| a.to_string()).unwrap_or_else(|| "?".into());
        let error = f.error.replace('|', "\\|").replace('\n', " ");
        out.push_str(&format!("| {} | {attempts} | {error} |\n", f.shard_id));
    }
    out
}

fn fmt2(x: f64) -> String {
    format!("{x:.2}")
}

impl Report {
    fn languages(&self) -> Vec<String> {
        let mut languages: Vec<String> = Vec::new();
        for l in Language::ALL {
            if self.cceval.iter().any(|c| c.language == l.name()) {
                languages.push(l.name().to_string());
            }
        }
        languages
    }

    fn rows(&self) -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = Vec::new();
        for cell in &self.cceval {
            let row = (cell.model.clone(), cell.setting.clone());
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        rows
    }

    fn cell(&self, model: &str, setting: &str, language: &str) -> Option<&CcevalCell> {
        self.cceval.iter().find(|c| c.model == model && c.setting == setting && c.language == language)
    }

    /// Every table as Markdown: CrossCodeEval, then RepoQA.
    pub fn markdown(&self) -> String {
        let mut parts = Vec::new();
        if !self.cceval.is_empty() {
            parts.push(self.cceval_markdown());
        }
        if !self.repoqa.is_empty() {
            parts.push(repoqa::markdown(&self.run_id, &self.repoqa));
        }
        if !self.failures.is_empty() {
            parts.push(self.failures_markdown());
        }
        if !self.unreadable.is_empty() {
            parts.push(self.unreadable_markdown());
        }
        parts.join("\n")
    }

    /// The shards that failed for good, with their errors (their examples are missing from
    /// the tables above).
    pub fn failures_markdown(&self) -> String {
        shard_errors_markdown(&format!("Failed shards — run `{}`", self.run_id), &self.failures)
    }

    /// The shards whose stored result cannot be used, with why (their examples are missing
    /// from the tables above).
    pub fn unreadable_markdown(&self) -> String {
        shard_errors_markdown(&format!("Unreadable stored results — run `{}`", self.run_id), &self.unreadable)
    }

    /// The CrossCodeEval table as Markdown; cells with missing results are marked `*`.
    pub fn cceval_markdown(&self) -> String {
        let languages = self.languages();
        let mut out = format!("## CrossCodeEval — run `{}`\n\n| Model | Setting |", self.run_id);
        for l in &languages {
            out.push_str(&format!(" {l} EM | {l} ES | {l} ID-EM | {l} ID-F1 |"));
        }
        out.push_str("\n|---|---|");
        out.push_str(&"---:|".repeat(4 * languages.len()));
        out.push('\n');
        let mut partial = false;
        for (model, setting) in self.rows() {
            out.push_str(&format!("| {model} | {} |", setting_title(&setting)));
            for l in &languages {
                match self.cell(&model, &setting, l).and_then(|c| c.summary.map(|s| (c, s))) {
                    Some((c, s)) => {
                        let mark = if c.examples < c.planned { "*" } else { "" };
                        partial |= !mark.is_empty();
                        for v in [s.em, s.es, s.id_em, s.id_f1] {
                            out.push_str(&format!(" {}{mark} |", fmt2(v)));
                        }
                    }
                    None => out.push_str(&" – |".repeat(4)),
                }
            }
            out.push('\n');
        }
        if partial {
            out.push_str("\n`*` some shards of this cell have no result (failed or still running).\n");
        }
        out
    }

    /// The table as CSV, one line per cell.
    pub fn csv(&self) -> String {
        let mut out = String::from("model,parameters,setting,language,examples,planned,em,es,id_em,id_precision,id_recall,id_f1\n");
        for c in &self.cceval {
            let params = c.parameters.map(|p| p.to_string()).unwrap_or_default();
            let values = match c.summary {
                Some(s) => [s.em, s.es, s.id_em, s.id_precision, s.id_recall, s.id_f1].map(fmt2).join(","),
                None => ",,,,,".into(),
            };
            out.push_str(&format!("{},{params},{},{},{},{},{values}\n", c.model, c.setting, c.language, c.examples, c.planned));
        }
        out
    }

    /// The table as JSON: each cell with the official `results.json` object.
    pub fn json(&self) -> Value {
        let cells: Vec<Value> = self
            .cceval
            .iter()
            .map(|c| {
                json!({
                    "model": c.model, "parameters": c.parameters, "setting": c.setting,
                    "language": c.language, "examples": c.examples, "planned": c.planned,
                    "results": c.summary.map(|s| s.to_json()),
                })
            })
            .collect();
        json!({
            "run_id": self.run_id, "cceval": cells, "repoqa": repoqa::json(&self.repoqa), "failures": self.failures, "unreadable": self.unreadable,
        })
    }

    /// Official-format prediction files: `(relative path, contents)` with one
    /// `{"task_id", "pred"}` line per example, for the official `eval.py` to re-check.
    pub fn exports(&self) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = self.cceval
            .iter()
            .map(|c| {
                let body: String = c
                    .predictions
                    .iter()
                    .map(|(task_id, pred)| json!({"task_id": task_id, "pred": pred}).to_string() + "\n")
                    .collect();
                (format!("exports/cceval/{}/{}/{}/prediction.jsonl", c.model, c.language, c.setting), body)
            })
            .collect();
        files.extend(repoqa::exports(&self.repoqa));
        files
    }
}

mod load;
mod merge;
mod plot;
pub mod repoqa;
mod rescore;
pub use merge::build_merged_report;
pub use plot::scaling_svg;
pub use repoqa::RepoqaRow;

impl Report {
    /// Every report file as (path under the report folder, contents): `report.md`,
    /// `cceval.csv`, `report.json`, `scaling.svg` and the official-format exports.
    pub fn files(&self) -> Result<Vec<(String, String)>, ReportError> {
        let json = serde_json::to_string_pretty(&self.json()).map_err(|e| record_error("report.json", e.to_string()))?;
        let mut files = vec![
            ("report.md".to_string(), self.markdown()),
            ("cceval.csv".to_string(), self.csv()),
            ("report.json".to_string(), json),
            ("scaling.svg".to_string(), scaling_svg(self)),
        ];
        files.extend(self.exports());
        Ok(files)
    }
}

/// Writes the report's [`Report::files`] under `<run>/report/` in the store.
pub async fn write_report(store: &RunStore, report: &Report) -> Result<(), ReportError> {
    let layout = RunLayout::new(&report.run_id);
    for (path, body) in report.files()? {
        store.put(&layout.report(&path), body).await?;
    }
    Ok(())
}
