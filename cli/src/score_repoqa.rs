//! `codesweep score repoqa`: the official RepoQA Searching-Needle-Function scorer.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use codesweep_fetch::grammars::choose_grammars;
use codesweep_tasks::input::{parse_json_document, parse_jsonl};
use codesweep_tasks::repoqa::outputs::{official_files, score_outputs};
use codesweep_tasks::repoqa::score::resolve;
use codesweep_tasks::repoqa::{Dataset, ModelOutput, RepoqaScores};

use crate::files::{handle_invalid, output_dir, print_stdout, progress, read_input, thread_pool, write_atomic, ScoringFlags};

/// Score RepoQA model outputs.
#[derive(clap::Args)]
pub struct Args {
    /// Official dataset JSON: `{lang: [{repo, content, needles, ...}]}`.
    #[arg(long, value_name = "FILE")]
    dataset: PathBuf,
    /// Model outputs, one JSON object per line: `language`, `repo`, `name`, `output` (list;
    /// the first item is scored), `position_ratio`, `needle_token_start`, `needle_token_end`.
    #[arg(long, value_name = "FILE")]
    outputs: PathBuf,
    /// Remove comments (and Python docstrings) from answers and needles before matching,
    /// as the official `--ignore-comments`.
    #[arg(long)]
    ignore_comments: bool,
    /// Output directory: scores.json, results.jsonl, table.txt.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    flags: ScoringFlags,
    /// Tree-sitter grammars: `auto` uses the official scorer's grammar binaries
    /// (tree-sitter-languages 1.10.2, fetched into the cache when missing) and the bundled
    /// ones when they cannot be had; `official` fetches them or fails; `bundled`; or a path
    /// to a `languages.so`.
    #[arg(long, value_name = "auto|official|bundled|PATH", default_value = "auto")]
    grammars: String,
}


pub fn run(args: Args) -> Result<()> {
    let grammars = choose_grammars(&args.grammars)?;
    let dataset_name = args.dataset.display().to_string();
    let outputs_name = args.outputs.display().to_string();
    let document = parse_json_document(&dataset_name, &read_input(&args.dataset)?)?;
    let dataset = Dataset::from_json(&dataset_name, &document).context("invalid RepoQA dataset")?;
    let outputs = parse_jsonl(&outputs_name, &read_input(&args.outputs)?, ModelOutput::from_json);

    let mut errors = outputs.errors.clone();
    let mut tasks = Vec::new();
    for record in &outputs.records {
        match resolve(&dataset, &record.value) {
            Ok((language, repo)) => tasks.push((language, repo, &record.value)),
            Err(e) => errors.push(e.at(&outputs_name, record.line)),
        }
    }
    errors.sort_by_key(|e| e.line);
    handle_invalid(&errors, args.flags.skip_invalid)?;
    if tasks.is_empty() {
        bail!("no output in {outputs_name} can be scored against {dataset_name}");
    }

    let pool = thread_pool(args.flags.threads)?;
    let bar = progress(tasks.len(), "scoring");
    let scoring = Instant::now();
    let results = pool.install(|| score_outputs(&tasks, args.ignore_comments, &grammars, || bar.inc(1)));
    let scoring_time = scoring.elapsed();
    bar.finish_and_clear();
    let scores = RepoqaScores::from_results(&results);

    output_dir(&args.out)?;
    for (name, contents) in official_files(&results, &scores) {
        write_atomic(&args.out, name, &contents)?;
    }
    let table = scores.table();
    let mode = if args.ignore_comments { "comments ignored" } else { "comments kept" };
    let report = format!(
        "RepoQA pass@1 (%), {} tasks, {mode}, {}\n{table}results in {}\n",
        results.len(),
        grammars.describe(),
        args.out.display()
    );
    print_stdout(&report)?;
    eprintln!(
        "scored {} tasks in {:.3} s ({} threads)",
        results.len(),
        scoring_time.as_secs_f64(),
        pool.current_num_threads()
    );
    Ok(())
}
