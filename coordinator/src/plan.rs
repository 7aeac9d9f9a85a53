//! The planner: a sweep spec becomes shards whose inputs are written once to the store.
//!
//! Each shard input carries its model, generation parameters and examples verbatim, so a
//! worker needs nothing but the store to run it and any shard can be replayed later.

use std::path::{Path, PathBuf};

use codesweep_store::records::{self, Benchmark, ShardHeader};
use codesweep_store::{shard_id, RunLayout, RunStore, StoreError};
use codesweep_tasks::cceval::{Example, Language};
use codesweep_tasks::input::{parse_jsonl, RecordError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::{CcevalSection, RepoqaSection, SweepSpec};

/// Why a spec could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A data file is missing or unreadable.
    #[error("{path}: {message}")]
    Data {
        /// The data file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Records of a data file are invalid.
    #[error("{count} invalid record(s) in the CrossCodeEval data:\n{listing}")]
    Records {
        /// How many records are invalid.
        count: usize,
        /// The first of them, one per line.
        listing: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run exists with another spec.
    #[error("run {run_id:?} already exists in {store} with a different spec; choose another `run.name`, or submit the stored spec to resume it")]
    SpecChanged {
        /// The run.
        run_id: String,
        /// The store's URL.
        store: String,
    },
}

/// One shard of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedShard {
    /// `<model>/<benchmark>/<language>/<setting>/<nnnn>`.
    pub shard_id: String,
    /// Model display name.
    pub model: String,
    /// Benchmark.
    pub benchmark: Benchmark,
    /// Language.
    pub language: String,
    /// Setting.
    pub setting: String,
    /// Position of the shard within its (model, benchmark, language, setting) cell.
    pub index: usize,
    /// Number of examples.
    pub examples: usize,
}

/// Every shard of a run, in a stable order (model, benchmark, language, setting, index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The run id.
    pub run_id: String,
    /// The shards.
    pub shards: Vec<PlannedShard>,
}

/// The setting name of the in-file (no retrieval) baseline.
pub const IN_FILE: &str = "in_file";

/// One data file chosen for a (language, setting) cell.
#[derive(Debug, Clone)]
struct CcevalCell {
    language: Language,
    setting: String,
    file: PathBuf,
    use_crossfile: bool,
}

fn data_error(path: &Path, message: impl Into<String>) -> PlanError {
    PlanError::Data { path: path.display().to_string(), message: message.into() }
}

/// The `line_completion_<setting>.jsonl` settings present in a language folder, sorted.
fn settings_in(dir: &Path) -> Result<Vec<String>, PlanError> {
    let entries = std::fs::read_dir(dir).map_err(|e| data_error(dir, format!("cannot list: {e}")))?;
    let mut settings = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(setting) = name.strip_prefix("line_completion_").and_then(|s| s.strip_suffix(".jsonl")) {
            settings.push(setting.to_string());
        }
    }
    settings.sort();
    Ok(settings)
}

fn cceval_cells(section: &CcevalSection) -> Result<Vec<CcevalCell>, PlanError> {
    let languages: Vec<Language> = if section.languages.is_empty() {
        Language::ALL.iter().copied().filter(|l| section.data_dir.join(l.name()).is_dir()).collect()
    } else {
        section.languages.iter().filter_map(|l| l.parse().ok()).collect()
    };
    if languages.is_empty() {
        return Err(data_error(&section.data_dir, "no language folders (python, java, typescript, csharp)"));
    }
    let mut cells = Vec::new();
    for language in languages {
        let dir = section.data_dir.join(language.name());
        let present = settings_in(&dir)?;
        let wanted: Vec<String> = if section.settings.is_empty() {
            std::iter::once(IN_FILE.to_string()).chain(present.iter().cloned()).collect()
        } else {
            section.settings.clone()
        };
        for setting in wanted {
            let (file, use_crossfile) = if setting == IN_FILE {
                // The baseline reads the prompts without their cross-file context; any setting's
                // file holds the same prompts, `line_completion.jsonl` when present.
                let plain = dir.join("line_completion.jsonl");
                let file = if plain.is_file() {
                    plain
                } else {
                    let first = present.first().ok_or_else(|| data_error(&dir, "no line_completion*.jsonl files"))?;
                    dir.join(format!("line_completion_{first}.jsonl"))
                };
                (file, false)
            } else {
                let file = dir.join(format!("line_completion_{setting}.jsonl"));
                if !file.is_file() {
                    return Err(data_error(
                        &file,
                        format!("missing; settings present here: {IN_FILE}, {}", present.join(", ")),
                    ));
                }
                (file, true)
            };
            cells.push(CcevalCell { language, setting, file, use_crossfile });
        }
    }
    Ok(cells)
}

/// Reads a data file's examples verbatim (validated: task id, prompt, groundtruth, and the
/// cross-file context text when the setting uses it). An unusable record becomes an
/// [`invalid_record`](codesweep_tasks::input::invalid_record) stand-in at its place, so only its shard fails; a file with no
/// usable record at all is refused (most likely the wrong file).
fn read_examples(cell: &CcevalCell, limit: Option<usize>) -> Result<Vec<Value>, PlanError> {
    let bytes = std::fs::read(&cell.file).map_err(|e| data_error(&cell.file, format!("cannot read: {e}")))?;
    let name = cell.file.display().to_string();
    let parsed = parse_jsonl(&name, &bytes, |v| {
        Example::from_json(v)?;
        if cell.use_crossfile {
            codesweep_tasks::input::str_field(v, "crossfile_context.text")?;
        }
        Ok(v.clone())
    });
    if parsed.records.is_empty() && !parsed.errors.is_empty() {
        return Err(records_error(&parsed.errors));
    }
    if parsed.records.is_empty() {
        return Err(data_error(&cell.file, "no examples"));
    }
    for error in &parsed.errors {
        tracing::warn!(%error, "unusable data record; the shard holding it will fail, the rest of the run goes on");
    }
    let mut lines: Vec<(usize, Value)> = parsed.records.into_iter().map(|r| (r.line, r.value)).collect();
    lines.extend(parsed.errors.iter().map(|e| (e.line, codesweep_tasks::input::invalid_record(&e.to_string()))));
    lines.sort_by_key(|(line, _)| *line);
    let mut examples: Vec<Value> = lines.into_iter().map(|(_, value)| value).collect();
    if let Some(limit) = limit {
        examples.truncate(limit);
    }
    Ok(examples)
}

fn records_error(errors: &[RecordError]) -> PlanError {
    let listing: Vec<String> = errors.iter().take(10).map(|e| format!("  {e}")).collect();
    let more = if errors.len() > 10 { format!("\n  … and {} more", errors.len() - 10) } else { String::new() };
    PlanError::Records { count: errors.len(), listing: listing.join("\n") + &more }
}

/// Plans a run: writes the resolved spec, every shard input and the plan, and returns the
/// plan. If the run already exists with the same spec, its stored plan is returned as is.
pub async fn plan_run(spec: &SweepSpec, store: &RunStore) -> Result<Plan, PlanError> {
    let layout = RunLayout::new(&spec.run.name);
    // Where telemetry goes is no part of what the run computes: a run resumes with it changed.
    let stored_form = SweepSpec { telemetry: None, ..spec.clone() };
    let spec_json = to_json(&stored_form, "spec")?;
    if let Some(stored) = load_spec(store, &layout).await? {
        // Nor is which pool runs a model: a run resumes with its models moved between pools,
        // and the stored spec takes the new placement (a restarted coordinator reads it).
        if to_json(&without_pools(&stored), "spec")? != to_json(&without_pools(&stored_form), "spec")? {
            return Err(PlanError::SpecChanged { run_id: spec.run.name.clone(), store: store.url().to_string() });
        }
        if let Some(plan) = load_plan(store, &layout).await? {
            if stored.models.iter().map(|m| &m.pool).ne(stored_form.models.iter().map(|m| &m.pool)) {
                store.put(&layout.spec(), spec_json).await?;
            }
            return Ok(plan);
        }
    }
    let mut shards = Vec::new();
    let mut inputs = Vec::new();
    if let Some(section) = &spec.cceval {
        plan_cceval(spec, section, &layout, &mut shards, &mut inputs)?;
    }
    if let Some(section) = &spec.repoqa {
        plan_repoqa(spec, section, &layout, &mut shards, &mut inputs)?;
    }
    for (key, text) in inputs {
        store.put(&key, text).await?;
    }
    let plan = Plan { run_id: spec.run.name.clone(), shards };
    let plan_json = to_json(&plan, "plan")?;
    store.put(&layout.plan(), plan_json).await?;
    // The spec goes last: a run whose spec exists has a complete plan.
    store.put(&layout.spec(), spec_json).await?;
    Ok(plan)
}

fn to_json<T: Serialize>(value: &T, what: &str) -> Result<String, PlanError> {
    serde_json::to_string_pretty(value).map_err(|e| data_error(Path::new(what), e.to_string()))
}

/// A spec with every model in the default pool.
fn without_pools(spec: &SweepSpec) -> SweepSpec {
    let mut spec = spec.clone();
    for model in &mut spec.models {
        model.pool = None;
    }
    spec
}

/// The model as a shard input records it: what the shard computes, without its placement.
fn shard_model(model: &codesweep_store::records::ModelSpec) -> codesweep_store::records::ModelSpec {
    codesweep_store::records::ModelSpec { pool: None, ..model.clone() }
}

/// The setting name of a RepoQA context configuration, e.g. `ctx16384_none`.
pub fn repoqa_setting(section: &RepoqaSection) -> String {
    format!("ctx{}_{}", section.options.code_context_size, section.options.comment_mode)
}

/// One RepoQA shard per (model, language, repository): its input holds the repository's
/// dataset record (sources, dependency graph, needles) verbatim.
fn plan_repoqa(
    spec: &SweepSpec,
    section: &RepoqaSection,
    layout: &RunLayout,
    shards: &mut Vec<PlannedShard>,
    inputs: &mut Vec<(String, String)>,
) -> Result<(), PlanError> {
    let path = &section.dataset;
    let bytes = std::fs::read(path).map_err(|e| data_error(path, format!("cannot read: {e}")))?;
    let name = path.display().to_string();
    let document = codesweep_tasks::input::parse_json_document(&name, &bytes).map_err(|e| records_error(&[e]))?;
    // Decoding both views up front reports every bad field before anything is written.
    codesweep_tasks::repoqa::context::SourceDataset::from_json(&name, &document).map_err(|e| records_error(&[e]))?;
    codesweep_tasks::repoqa::Dataset::from_json(&name, &document).map_err(|e| records_error(&[e]))?;
    let languages: Vec<String> = if section.languages.is_empty() {
        codesweep_tasks::repoqa::Language::ALL
            .iter()
            .map(|l| l.name().to_string())
            .filter(|l| document.get(l).is_some())
            .collect()
    } else {
        section.languages.clone()
    };
    let setting = repoqa_setting(section);
    for language in &languages {
        let repos = document.get(language).and_then(Value::as_array).ok_or_else(|| data_error(path, format!("no {language:?} repositories")))?;
        let repos: Vec<&Value> =
            repos.iter().filter(|r| r.get("needles").and_then(Value::as_array).is_some_and(|n| !n.is_empty())).collect();
        for model in &spec.models {
            for (index, repo) in repos.iter().enumerate() {
                let needles = repo["needles"].as_array().map_or(0, Vec::len);
                let id = shard_id(&model.name, Benchmark::Repoqa.name(), language, &setting, index);
                let header = ShardHeader {
                    run_id: spec.run.name.clone(),
                    shard_id: id.clone(),
                    model: shard_model(model),
                    benchmark: Benchmark::Repoqa,
                    language: language.clone(),
                    setting: setting.clone(),
                    use_crossfile: false,
                    generation: spec.generation.clone(),
                    edit_sim: None,
                    repoqa: Some(section.options.clone()),
                    examples: needles,
                };
                let text = records::encode(&header, &[*repo]).map_err(|e| data_error(path, e.to_string()))?;
                inputs.push((layout.input(&id), text));
                shards.push(PlannedShard {
                    shard_id: id,
                    model: model.name.clone(),
                    benchmark: Benchmark::Repoqa,
                    language: language.clone(),
                    setting: setting.clone(),
                    index,
                    examples: needles,
                });
            }
        }
    }
    Ok(())
}

fn plan_cceval(
    spec: &SweepSpec,
    section: &CcevalSection,
    layout: &RunLayout,
    shards: &mut Vec<PlannedShard>,
    inputs: &mut Vec<(String, String)>,
) -> Result<(), PlanError> {
    let cells = cceval_cells(section)?;
    for cell in &cells {
        let examples = read_examples(cell, section.limit)?;
        for model in &spec.models {
            for (index, chunk) in examples.chunks(spec.run.shard_size).enumerate() {
                let id = shard_id(&model.name, Benchmark::Cceval.name(), cell.language.name(), &cell.setting, index);
                let header = ShardHeader {
                    run_id: spec.run.name.clone(),
                    shard_id: id.clone(),
                    model: shard_model(model),
                    benchmark: Benchmark::Cceval,
                    language: cell.language.name().to_string(),
                    setting: cell.setting.clone(),
                    use_crossfile: cell.use_crossfile,
                    generation: spec.generation.clone(),
                    edit_sim: Some(section.edit_sim.clone()),
                    repoqa: None,
                    examples: chunk.len(),
                };
                let text = records::encode(&header, chunk).map_err(|e| data_error(&cell.file, e.to_string()))?;
                inputs.push((layout.input(&id), text));
                shards.push(PlannedShard {
                    shard_id: id,
                    model: model.name.clone(),
                    benchmark: Benchmark::Cceval,
                    language: header.language,
                    setting: header.setting,
                    index,
                    examples: chunk.len(),
                });
            }
        }
    }
    Ok(())
}

/// Reads a run's stored plan, if it has one.
pub async fn load_plan(store: &RunStore, layout: &RunLayout) -> Result<Option<Plan>, PlanError> {
    load_json(store, layout.plan()).await
}

/// Reads a run's stored (resolved) spec, if it has one.
pub async fn load_spec(store: &RunStore, layout: &RunLayout) -> Result<Option<SweepSpec>, PlanError> {
    load_json(store, layout.spec()).await
}

async fn load_json<T: serde::de::DeserializeOwned>(store: &RunStore, key: String) -> Result<Option<T>, PlanError> {
    let Some(text) = store.get_text(&key).await? else { return Ok(None) };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| PlanError::Store(StoreError::Format { key, line: e.line(), message: e.to_string() }))
}
