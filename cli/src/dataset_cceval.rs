//! `codesweep dataset cceval`: build CrossCodeEval examples from source repositories (paper
//! §2.2-2.3) and print the paper's Table 1 for them.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use codesweep_tasks::cceval::prompt::PromptBudget;
use codesweep_tasks::cceval::{Example, Language};
use codesweep_tasks::dataset::cceval::{build, DatasetExample, Options, Repository};
use codesweep_worker::solved_by_model;
use codesweep_tasks::pycompat::json::dumps;
use codesweep_tasks::retrieval::chunks::read_project;

use crate::files::{choice, print_stdout, progress, thread_pool, write_file, ModelArgs};

/// Build a CrossCodeEval dataset.
#[derive(clap::Args)]
pub struct Args {
    /// A repository folder; repeat for several. Its folder name becomes `metadata.repository`,
    /// so the parent folder can be given to `codesweep retrieve --repos`.
    #[arg(long = "repo", value_name = "DIR", required = true)]
    repos: Vec<PathBuf>,
    /// Language of the examples: Python `**/*.py`, Java `**/*.java`, C# `**/*.cs`, TypeScript
    /// `src/**/*.ts[x]` (the files `codesweep retrieve` reads).
    #[arg(long, value_parser = choice::<Language>(Language::ALL.map(Language::name)))]
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
    write_file(&args.out, &lines)?;
    if let Some(path) = &args.summary {
        write_file(path, &(dumps(&dataset.summary.to_json(args.language, build_time)) + "\n"))?;
    }
    print_stdout(&dataset.summary.table(args.language))?;
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
    let inputs: Vec<Example> = examples
        .iter()
        .map(|e| Example { task_id: e.task_id.clone(), prompt: e.prompt.clone(), groundtruth: e.groundtruth.clone() })
        .collect();
    let bar = progress(inputs.len(), "filter model");
    let solved = solved_by_model(&model, language, &inputs, &budget, filter.filter_batch_size, || bar.inc(1))?;
    bar.finish_and_clear();
    Ok(examples.iter().map(|e| solved.contains(&e.task_id)).collect())
}
