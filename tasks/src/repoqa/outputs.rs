//! Scoring a whole outputs file on every core, and what the official `compute_score.py` writes
//! for it: per-task results, the scores and the pass@1 table.

use rayon::prelude::*;

use super::grammars::RepoqaGrammars;
use super::score::{official_order, RepoqaScorer, RepoqaScores, TaskResult};
use super::{Language, ModelOutput, Repo};
use crate::pycompat::json::{dumps, dumps_indent};

/// Scores each (language, repository, output) on the current rayon pool, one scorer per thread,
/// calling `on_done` after each; verdicts in the official order.
pub fn score_outputs(
    tasks: &[(Language, &Repo, &ModelOutput)],
    ignore_comments: bool,
    grammars: &RepoqaGrammars,
    on_done: impl Fn() + Sync + Send,
) -> Vec<TaskResult> {
    let results = tasks
        .par_iter()
        .map_init(
            || RepoqaScorer::new(ignore_comments, grammars.clone()),
            |scorer, (language, repo, output)| {
                let result = scorer.score(*language, repo, output);
                on_done();
                result
            },
        )
        .collect();
    official_order(results)
}

/// The files of a scoring, as (name, contents): `results.jsonl` (one verdict per line),
/// `scores.json` and `table.txt` (the pass@1 table).
pub fn official_files(results: &[TaskResult], scores: &RepoqaScores) -> Vec<(&'static str, String)> {
    let lines: String = results.iter().map(|r| dumps(&r.to_json()) + "\n").collect();
    vec![
        ("results.jsonl", lines),
        ("scores.json", dumps_indent(&scores.to_json(), 1) + "\n"),
        ("table.txt", scores.table()),
    ]
}
