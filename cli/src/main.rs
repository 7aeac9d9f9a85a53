//! codesweep: evaluate code models on CrossCodeEval and RepoQA with numbers equal to the
//! official scripts.

mod cluster;
mod dataset_cceval;
mod dataset_repoqa;
mod dense;
mod exit;
mod files;
mod generate;
mod results_cmd;
mod retrieve;
mod run_cmd;
mod score_cceval;
mod score_repoqa;
mod serve;
mod services;
mod telemetry;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Evaluate code models on repository-level benchmarks (CrossCodeEval, RepoQA).
#[derive(Parser)]
#[command(name = "codesweep", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a whole sweep on this machine: coordinator, local workers, filesystem store,
    /// progress, and the tables at the end. Running it again resumes.
    Run(run_cmd::Args),
    /// Serve the coordinator of a cluster (gRPC): plans runs, leases shards to workers.
    Coordinator(services::CoordinatorArgs),
    /// Run a worker of a cluster: lease shards from the coordinator, generate, score, store.
    Worker(services::WorkerArgs),
    /// Show a run's progress from its coordinator.
    Status(results_cmd::StatusArgs),
    /// Cancel a run: lease no more of its shards and stop the running ones (finished results
    /// stay; submitting the spec again resumes).
    Cancel(results_cmd::CancelArgs),
    /// Merge a run's stored results into tables (Markdown, CSV, JSON), a scaling plot and
    /// official-format exports.
    Report(results_cmd::ReportArgs),
    /// Recompute every metric of a run from its stored raw completions (no model, no GPU).
    Rescore(results_cmd::RescoreArgs),
    /// Score stored predictions exactly as the official scripts do (no model, no GPU).
    #[command(subcommand)]
    Score(ScoreCommand),
    /// Complete a JSONL file of prompts with a local model (GGUF or Hugging Face directory).
    Generate(generate::Args),
    /// Serve a local model over a minimal OpenAI-compatible API (completions, chat completions,
    /// embeddings).
    Serve(serve::Args),
    /// Retrieve cross-file context for CrossCodeEval examples exactly as the official prompt
    /// builder does (prompt_builder/augment_with_cfc.py): BM25, TF-IDF, Jaccard or dense
    /// embeddings (cosine).
    Retrieve(retrieve::Args),
    /// Build benchmark datasets (CrossCodeEval, RepoQA) from source repositories on disk.
    #[command(subcommand)]
    Dataset(DatasetCommand),
}

#[derive(Subcommand)]
enum DatasetCommand {
    /// CrossCodeEval line completion examples by tree-sitter static analysis (paper §2.2-2.3).
    Cceval(dataset_cceval::Args),
    /// A RepoQA Searching-Needle-Function entry (paper §3.1, evalplus/repoqa curation scripts):
    /// import graph, topological order, function tables, 10 seeded needles, descriptions.
    Repoqa(dataset_repoqa::Args),
}

#[derive(Subcommand)]
enum ScoreCommand {
    /// CrossCodeEval line completion: EM, edit similarity and identifier match
    /// (amazon-science/cceval scripts/eval_metric.py).
    Cceval(score_cceval::Args),
    /// RepoQA Searching Needle Function: BLEU best-match pass@1 at thresholds 0.0..1.0
    /// (evalplus/repoqa repoqa/compute_score.py).
    Repoqa(score_repoqa::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run_cmd::run(args),
        Command::Coordinator(args) => services::coordinator(args),
        Command::Worker(args) => services::worker(args),
        Command::Status(args) => results_cmd::status(args),
        Command::Cancel(args) => results_cmd::cancel(args),
        Command::Report(args) => results_cmd::report(args),
        Command::Rescore(args) => results_cmd::rescore(args),
        Command::Score(ScoreCommand::Cceval(args)) => score_cceval::run(args),
        Command::Score(ScoreCommand::Repoqa(args)) => score_repoqa::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Retrieve(args) => retrieve::run(args),
        Command::Dataset(DatasetCommand::Cceval(args)) => dataset_cceval::run(args),
        Command::Dataset(DatasetCommand::Repoqa(args)) => dataset_repoqa::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", codesweep_telemetry::final_error_line(&format!("{error:#}")));
            ExitCode::from(exit::code_of(&error))
        }
    }
}
