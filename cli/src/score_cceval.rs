//! `codesweep score cceval`: the official CrossCodeEval statement-level scorer.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::builder::TypedValueParser;
use clap::ValueEnum;
use codesweep_tasks::cceval::{pair_predictions, CcevalScorer, CcevalSummary, EditSimBackend, Example, Language, Prediction};
use codesweep_tasks::input::parse_jsonl;
use codesweep_tasks::pycompat::json::{dumps, dumps_indent};
use rayon::prelude::*;

use crate::files::{handle_invalid, ScoringFlags, output_dir, print_stdout, progress, read_input, thread_pool, write_atomic};

/// Edit-similarity implementation.
#[derive(Clone, Copy, ValueEnum)]
enum EditSimArg {
    /// fuzzywuzzy on difflib.SequenceMatcher — what the official requirements.txt installs.
    Difflib,
    /// fuzzywuzzy with python-Levenshtein installed (Levenshtein.ratio).
    Levenshtein,
}

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
    #[arg(long, value_parser = language_parser())]
    language: Language,
    /// Edit-similarity backend; `difflib` reproduces the official environment.
    #[arg(long, value_enum, default_value = codesweep_tasks::cceval::shard::DEFAULT_EDIT_SIM)]
    edit_sim: EditSimArg,
    /// Output directory: results.json, detailed_results.jsonl (also as the official
    /// detailed_results.json), prediction_truncated.jsonl, exact_match_idx.jsonl.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten)]
    flags: ScoringFlags,
}

/// Accepts exactly the names of [`Language::ALL`] and lists them in `--help`.
fn language_parser() -> impl TypedValueParser<Value = Language> {
    clap::builder::PossibleValuesParser::new(Language::ALL.map(Language::name)).try_map(|name| name.parse::<Language>())
}

pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let language = args.language;
    let backend = match args.edit_sim {
        EditSimArg::Difflib => EditSimBackend::Difflib,
        EditSimArg::Levenshtein => EditSimBackend::Levenshtein,
    };
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
    let scoring = Instant::now();
    let scored: Vec<_> = pool.install(|| {
        pairing
            .pairs
            .par_iter()
            .map_init(
                || CcevalScorer::new(language, backend),
                |scorer, &(p, e)| {
                    let example = &examples.records[e].value;
                    let pred = &predictions.records[p].value.pred;
                    let result = scorer.score(&example.task_id, &example.prompt, &example.groundtruth, pred);
                    bar.inc(1);
                    result
                },
            )
            .collect()
    });
    let scoring_time = scoring.elapsed();
    bar.finish_and_clear();
    let Some(summary) = CcevalSummary::from_scored(&scored) else { bail!("nothing to score") };

    output_dir(&args.out)?;
    let detailed: String = scored.iter().map(|s| dumps(&s.detailed_json()) + "\n").collect();
    let truncated: String = scored.iter().map(|s| dumps(&s.truncated_json()) + "\n").collect();
    let exact: String = scored.iter().filter(|s| s.em).map(|s| format!("{}\n", s.task_id)).collect();
    write_atomic(&args.out, "prediction_truncated.jsonl", &truncated)?;
    write_atomic(&args.out, "exact_match_idx.jsonl", &exact)?;
    write_atomic(&args.out, "detailed_results.jsonl", &detailed)?;
    write_atomic(&args.out, "detailed_results.json", &detailed)?;
    write_atomic(&args.out, "results.json", &dumps_indent(&summary.to_json(), 2))?;

    let mut report = format!("CrossCodeEval {language}: {} examples, edit similarity {}\n", summary.total, backend.name());
    report += "| EM | ES | ID-EM | ID-precision | ID-recall | ID-F1 |\n|---:|---:|---:|---:|---:|---:|\n";
    report += &format!(
        "| {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
        summary.em, summary.es, summary.id_em, summary.id_precision, summary.id_recall, summary.id_f1
    );
    report += &format!("results in {}\n", args.out.display());
    print_stdout(&report)?;
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
