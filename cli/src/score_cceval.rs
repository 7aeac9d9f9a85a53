//! `codesweep score cceval`: the official CrossCodeEval statement-level scorer.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use codesweep_tasks::cceval::outputs::{official_files, score_pairs};
use codesweep_tasks::cceval::{pair_predictions, CcevalSummary, EditSimBackend, Example, Language, Prediction};
use codesweep_tasks::input::parse_jsonl;

use crate::files::{choice, handle_invalid, output_dir, print_stdout, progress, read_input, thread_pool, write_atomic, ScoringFlags};

/// Score CrossCodeEval predictions.
#[derive(clap::Args)]
pub struct Args {
    /// Official example file (`line_completion*.jsonl`): `prompt`, `groundtruth`, `metadata.task_id`.
    #[arg(long, value_name = "FILE")]
    examples: PathBuf,
    /// Predictions, one `{"task_id", "pred"}` per line (extra fields are ignored).
    #[arg(long, value_name = "FILE")]
    predictions: PathBuf,
    /// Language of the examples; Python cuts at the first complete statement (tree-sitter),
    /// the others after the first `;`, `{` or `}`.
    #[arg(long, value_parser = choice::<Language>(Language::ALL.map(Language::name)))]
    language: Language,
    /// Edit similarity: `difflib` (fuzzywuzzy on difflib.SequenceMatcher, what the official
    /// requirements.txt installs) or `levenshtein` (fuzzywuzzy with python-Levenshtein).
    #[arg(long, value_parser = choice::<EditSimBackend>(["difflib", "levenshtein"]), default_value = codesweep_tasks::cceval::shard::DEFAULT_EDIT_SIM)]
    edit_sim: EditSimBackend,
    /// Output directory: results.json, detailed_results.jsonl (also as the official
    /// detailed_results.json), prediction_truncated.jsonl, exact_match_idx.jsonl.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    flags: ScoringFlags,
}

/// Scores the predictions on every core, writes the official output files and prints the table.
pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let language = args.language;
    let backend = args.edit_sim;
    let examples_name = args.examples.display().to_string();
    let predictions_name = args.predictions.display().to_string();
    let examples = parse_jsonl(&examples_name, &read_input(&args.examples)?, Example::from_json);
    let predictions = parse_jsonl(&predictions_name, &read_input(&args.predictions)?, Prediction::from_json);
    let pairing = pair_predictions(&examples_name, &examples.records, &predictions_name, &predictions.records);
    let errors: Vec<_> = examples.errors.iter().chain(&predictions.errors).chain(&pairing.errors).cloned().collect();
    handle_invalid(&errors, args.flags.skip_invalid)?;
    if pairing.pairs.is_empty() {
        bail!("no prediction in {predictions_name} matches an example in {examples_name}; nothing to score");
    }

    let pool = thread_pool(args.flags.threads)?;
    let bar = progress(pairing.pairs.len(), "scoring");
    let pairs: Vec<(&Example, &str)> = pairing
        .pairs
        .iter()
        .map(|&(p, e)| (&examples.records[e].value, predictions.records[p].value.pred.as_str()))
        .collect();
    let scoring = Instant::now();
    let scored = pool.install(|| score_pairs(language, backend, &pairs, || bar.inc(1)));
    let scoring_time = scoring.elapsed();
    bar.finish_and_clear();
    let Some(summary) = CcevalSummary::from_scored(&scored) else { bail!("nothing to score") };

    output_dir(&args.out)?;
    for (name, contents) in official_files(&scored, &summary) {
        write_atomic(&args.out, name, &contents)?;
    }
    print_stdout(&format!("{}results in {}\n", summary.table(language, backend), args.out.display()))?;
    eprintln!(
        "scored {} examples in {:.3} s ({:.0} examples/s, {} threads); {:.3} s in all",
        scored.len(),
        scoring_time.as_secs_f64(),
        scored.len() as f64 / scoring_time.as_secs_f64().max(1e-9),
        pool.current_num_threads(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
