//! `codesweep dataset cceval`: build CrossCodeEval examples from source repositories (paper
//! §2.2-2.3) and print the paper's Table 1 for them.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser;
use codesweep_engine::{GenerateOptions, Generator, Sampling};
use codesweep_tasks::cceval::prompt::PromptBudget;
use codesweep_tasks::cceval::shard::{edit_sim_or_default, score_completions};
use codesweep_tasks::cceval::{Example, Language};
use codesweep_worker::cceval_request;
use codesweep_tasks::dataset::cceval::{build, DatasetExample, Options, Repository, Summary};
use codesweep_tasks::pycompat::json::dumps;
use codesweep_tasks::retrieval::chunks::read_project;

use crate::files::{print_stdout, progress, thread_pool, ModelArgs};

/// Build a CrossCodeEval dataset.
#[derive(clap::Args)]
pub struct Args {
    /// A repository folder; repeat for several. Its folder name becomes `metadata.repository`,
    /// so the parent folder can be given to `codesweep retrieve --repos`.
    #[arg(long = "repo", value_name = "DIR", required = true)]
    repos: Vec<PathBuf>,
    /// Language of the examples: Python `**/*.py`, Java `**/*.java`, C# `**/*.cs`, TypeScript
    /// `src/**/*.ts[x]` (the files `codesweep retrieve` reads).
    #[arg(long, value_parser = language_parser())]
    language: Language,
    /// Output JSONL file in the official record layout.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Seed of the cursor positions.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Also write the Table-1 summary and filter counts as JSON here.
    #[arg(long, value_name = "FILE")]
    summary: Option<PathBuf>,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    #[command(flatten)]
    filter: FilterModelArgs,
}

/// The optional model filter (the paper used starcoderbase-1B).
#[derive(clap::Args)]
struct FilterModelArgs {
    /// Drop the examples this model (`.gguf` or Hugging Face directory) completes exactly, greedily,
    /// from the in-file prompt alone.
    #[arg(long, value_name = "MODEL")]
    filter_model: Option<PathBuf>,
    /// Device of the filter model: `cpu`, or `cuda:N` in a build with `--features cuda`.
    #[arg(long, default_value = "cpu", requires = "filter_model")]
    filter_device: String,
    /// Dtype of a safetensors filter model (f32, f16, bf16).
    #[arg(long, requires = "filter_model")]
    filter_dtype: Option<String>,
    /// Prompt budget in tokens: the prompt keeps its last `N - 50` tokens (the official
    /// `--model_max_tokens` rule with 50 new tokens, no cross-file context).
    #[arg(long, default_value_t = 2048, requires = "filter_model")]
    filter_context_tokens: usize,
    /// Sequences generated together.
    #[arg(long, default_value_t = 8, requires = "filter_model")]
    filter_batch_size: usize,
}

/// Accepts exactly the names of [`Language::ALL`] and lists them in `--help`.
fn language_parser() -> impl TypedValueParser<Value = Language> {
    clap::builder::PossibleValuesParser::new(Language::ALL.map(Language::name)).try_map(|name| name.parse::<Language>())
}

/// Reads the repositories, builds the examples (and runs the model filter), writes the JSONL
/// file and the summary, and prints the Table-1 row.
pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let mut repositories = Vec::new();
    for dir in &args.repos {
        if !dir.is_dir() {
            bail!("--repo {}: not a folder", dir.display());
        }
        let canonical = dir.canonicalize().with_context(|| format!("cannot resolve {}", dir.display()))?;
        let Some(name) = canonical.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            bail!("--repo {}: has no folder name to use as metadata.repository", dir.display());
        };
        if repositories.iter().any(|r: &Repository| r.name == name) {
            bail!("--repo {}: another repository is also named `{name}`", dir.display());
        }
        let files = read_project(dir, args.language).with_context(|| format!("cannot read {}", dir.display()))?;
        if files.is_empty() {
            let pattern = if args.language == Language::TypeScript { "src/**/*.ts[x]" } else { "source" };
            eprintln!("warning: --repo {}: no {} {pattern} files", dir.display(), args.language);
        }
        repositories.push(Repository { name, files });
    }
    let pool = thread_pool(args.threads)?;
    let building = Instant::now();
    let dataset = pool.install(|| build(&repositories, Options { language: args.language, seed: args.seed }))?;
    let mut dataset = dataset;
    if let Some(model) = &args.filter.filter_model {
        let solved = model_solved(&args.filter, model, args.language, &dataset.examples)?;
        dataset.drop_model_solved(args.language, &solved);
    }
    let build_time = building.elapsed().as_secs_f64();

    let lines: String = dataset.examples.iter().map(|e| dumps(&e.to_json()) + "\n").collect();
    std::fs::write(&args.out, lines).with_context(|| format!("cannot write {}", args.out.display()))?;
    if let Some(path) = &args.summary {
        std::fs::write(path, dumps(&summary_json(&dataset.summary, args.language, build_time)) + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print_stdout(&table(&dataset.summary, args.language))?;
    eprintln!(
        "built {} examples from {} files in {:.3} s ({:.0} examples/s, {} threads); {:.3} s in all; wrote {}",
        dataset.summary.examples,
        dataset.summary.files_read,
        build_time,
        dataset.summary.examples as f64 / build_time.max(1e-9),
        pool.current_num_threads(),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    Ok(())
}

/// For each example, whether the model's greedy completion of the in-file prompt is an exact
/// match after the official post-processing.
fn model_solved(filter: &FilterModelArgs, path: &Path, language: Language, examples: &[DatasetExample]) -> Result<Vec<bool>> {
    let model = ModelArgs { model: path.to_path_buf(), device: filter.filter_device.clone(), dtype: filter.filter_dtype.clone() }
        .load()?;
    let budget = PromptBudget { model_max_tokens: filter.filter_context_tokens, generation_max_tokens: 50, ..PromptBudget::default() };
    // The worker's CrossCodeEval path: its requests, then the shard scoring.
    let inputs: Vec<Example> = examples
        .iter()
        .map(|e| Example { task_id: e.task_id.clone(), prompt: e.prompt.clone(), groundtruth: e.groundtruth.clone() })
        .collect();
    let requests = inputs
        .iter()
        .map(|example| {
            cceval_request(Some(&model.tokenizer), language, example, None, &budget, Sampling::Greedy)
                .with_context(|| format!("cannot build the filter prompt of {}", example.task_id))
        })
        .collect::<Result<Vec<_>>>()?;
    let options = GenerateOptions { batch_size: filter.filter_batch_size.max(1), ..GenerateOptions::default() };
    let bar = progress(requests.len(), "filter model");
    let generation = Generator::new(&model, options).generate(&requests, |_| bar.inc(1))?;
    bar.finish_and_clear();
    let completions: Vec<(&str, &str)> = generation.completions.iter().map(|c| (c.id.as_str(), c.text.as_str())).collect();
    let edit_sim = edit_sim_or_default(None).map_err(anyhow::Error::msg)?;
    let scored = score_completions(language, edit_sim, "the built examples", &inputs, "the filter model's completions", &completions)?;
    let solved_ids: std::collections::HashSet<&str> = scored.iter().filter(|s| s.em).map(|s| s.task_id.as_str()).collect();
    let solved = examples.iter().map(|e| solved_ids.contains(e.task_id.as_str())).collect();
    Ok(solved)
}

/// The paper's Table 1 row for this set, then what each filter removed.
fn table(summary: &Summary, language: Language) -> String {
    let d = &summary.dropped;
    format!(
        "CrossCodeEval {language} dataset\n\
         | # repositories | # files | # examples | avg prompt lines | avg prompt tokens | avg reference tokens |\n\
         |---:|---:|---:|---:|---:|---:|\n\
         | {} | {} | {} | {:.1} | {:.1} | {:.1} |\n\
         cross-file names (first use per file): {}; dropped: no statement end {}, short prompt {}, \
         reference length {}, found in another file {}, duplicate {}, solved by the filter model {}\n",
        summary.repositories,
        summary.files,
        summary.examples,
        summary.avg_prompt_lines,
        summary.avg_prompt_tokens,
        summary.avg_reference_tokens,
        summary.candidates,
        d.no_statement_end,
        d.short_prompt,
        d.reference_length,
        d.found_in_other_file,
        d.duplicate,
        d.model_exact_match,
    )
}

fn summary_json(summary: &Summary, language: Language, seconds: f64) -> serde_json::Value {
    let d = &summary.dropped;
    serde_json::json!({
        "language": language.name(),
        "repositories": summary.repositories,
        "files_read": summary.files_read,
        "files": summary.files,
        "examples": summary.examples,
        "candidates": summary.candidates,
        "avg_prompt_lines": summary.avg_prompt_lines,
        "avg_prompt_tokens": summary.avg_prompt_tokens,
        "avg_reference_tokens": summary.avg_reference_tokens,
        "dropped": {
            "no_statement_end": d.no_statement_end,
            "short_prompt": d.short_prompt,
            "reference_length": d.reference_length,
            "found_in_other_file": d.found_in_other_file,
            "duplicate": d.duplicate,
            "model_exact_match": d.model_exact_match,
        },
        "build_seconds": seconds,
    })
}
