//! Scoring a whole predictions file on every core, and what the official `eval_metric.py` writes
//! for it: its five output files and the summary table.

use rayon::prelude::*;

use super::score::{CcevalScorer, CcevalSummary, ScoredExample};
use super::{EditSimBackend, Example, Language};
use crate::pycompat::json::{dumps, dumps_indent};

/// Scores each (example, completion) pair on the current rayon pool, one scorer per thread,
/// calling `on_done` after each; verdicts in pair order.
pub fn score_pairs(
    language: Language,
    backend: EditSimBackend,
    pairs: &[(&Example, &str)],
    on_done: impl Fn() + Sync + Send,
) -> Vec<ScoredExample> {
    pairs
        .par_iter()
        .map_init(
            || CcevalScorer::new(language, backend),
            |scorer, (example, completion)| {
                let scored = scorer.score(&example.task_id, &example.prompt, &example.groundtruth, completion);
                on_done();
                scored
            },
        )
        .collect()
}

/// The files the official scorer writes, as (name, contents): `prediction_truncated.jsonl`,
/// `exact_match_idx.jsonl`, `detailed_results.jsonl`, `detailed_results.json` (the same lines)
/// and `results.json`.
pub fn official_files(scored: &[ScoredExample], summary: &CcevalSummary) -> Vec<(&'static str, String)> {
    let detailed: String = scored.iter().map(|s| dumps(&s.detailed_json()) + "\n").collect();
    let truncated: String = scored.iter().map(|s| dumps(&s.truncated_json()) + "\n").collect();
    let exact: String = scored.iter().filter(|s| s.em).map(|s| format!("{}\n", s.task_id)).collect();
    vec![
        ("prediction_truncated.jsonl", truncated),
        ("exact_match_idx.jsonl", exact),
        ("detailed_results.jsonl", detailed.clone()),
        ("detailed_results.json", detailed),
        ("results.json", dumps_indent(&summary.to_json(), 2)),
    ]
}

impl CcevalSummary {
    /// A one-row Markdown table of the six metrics, under a line naming the language, the
    /// example count and the edit-similarity backend.
    pub fn table(&self, language: Language, backend: EditSimBackend) -> String {
        format!(
            "CrossCodeEval {language}: {} examples, edit similarity {}\n\
             | EM | ES | ID-EM | ID-precision | ID-recall | ID-F1 |\n|---:|---:|---:|---:|---:|---:|\n\
             | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            self.total,
            backend.name(),
            self.em,
            self.es,
            self.id_em,
            self.id_precision,
            self.id_recall,
            self.id_f1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_scored_in_order_and_the_files_agree() {
        let example = |id: &str, truth: &str| Example { task_id: id.into(), prompt: "x = ".into(), groundtruth: truth.into() };
        let (a, b) = (example("a", "f(1)"), example("b", "g(2)"));
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let scored = score_pairs(Language::Python, EditSimBackend::Difflib, &[(&a, "f(1)\n"), (&b, "h(3)\n")], || {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(calls.into_inner(), 2);
        assert_eq!((scored[0].task_id.as_str(), scored[0].em, scored[1].em), ("a", true, false));
        let summary = CcevalSummary::from_scored(&scored).unwrap();
        let files = official_files(&scored, &summary);
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["prediction_truncated.jsonl", "exact_match_idx.jsonl", "detailed_results.jsonl", "detailed_results.json", "results.json"]);
        assert_eq!(files[1].1, "a\n");
        assert_eq!(files[2].1.lines().count(), 2);
        assert!(summary.table(Language::Python, EditSimBackend::Difflib).contains("| 50.00 |"), "{}", summary.table(Language::Python, EditSimBackend::Difflib));
    }
}
