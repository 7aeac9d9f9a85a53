//! CrossCodeEval golden vectors: every per-example value, every aggregate and the bytes of
//! every output file equal the official scorer's, for 4 languages × 2 edit-similarity backends.

use codesweep_test_support::golden as common;

use codesweep_tasks::cceval::{pair_predictions, CcevalScorer, CcevalSummary, EditSimBackend, Example, Language, Prediction};
use codesweep_tasks::input::parse_jsonl;
use codesweep_tasks::pycompat::json::{dumps, dumps_indent};
use common::{assert_json_close, golden_dir, read, read_jsonl};
use serde_json::Value;

fn check(language: Language, backend: EditSimBackend, expected_folder: &str) {
    let dir = golden_dir().join("cceval").join(language.name());
    let examples = parse_jsonl("examples.jsonl", &read(&dir.join("examples.jsonl")), Example::from_json);
    let predictions = parse_jsonl("predictions.jsonl", &read(&dir.join("predictions.jsonl")), Prediction::from_json);
    assert!(examples.errors.is_empty() && predictions.errors.is_empty());
    let pairing = pair_predictions("examples.jsonl", &examples.records, "predictions.jsonl", &predictions.records);
    assert!(pairing.errors.is_empty(), "{:?}", pairing.errors);

    let mut scorer = CcevalScorer::new(language, backend);
    let scored: Vec<_> = pairing
        .pairs
        .iter()
        .map(|&(p, e)| {
            let example = &examples.records[e].value;
            scorer.score(&example.task_id, &example.prompt, &example.groundtruth, &predictions.records[p].value.pred)
        })
        .collect();

    let expected = dir.join(expected_folder);
    let context = format!("{language}/{expected_folder}");
    let detailed = read_jsonl(&expected.join("detailed_results.jsonl"));
    let truncated = read_jsonl(&expected.join("prediction_truncated.jsonl"));
    assert_eq!(scored.len(), detailed.len(), "{context}: row count");
    for (i, s) in scored.iter().enumerate() {
        assert_json_close(&s.truncated_json(), &truncated[i], &format!("{context} truncated row {i} ({})", s.task_id));
        assert_json_close(&s.detailed_json(), &detailed[i], &format!("{context} detailed row {i} ({})", s.task_id));
    }
    let summary = CcevalSummary::from_scored(&scored).expect("non-empty");
    let results: Value = serde_json::from_slice(&read(&expected.join("results.json"))).unwrap();
    assert_eq!(summary.to_json(), results, "{context}: results.json");

    // The files we write are byte-identical to the official ones.
    let ours_detailed: String = scored.iter().map(|s| dumps(&s.detailed_json()) + "\n").collect();
    assert_eq!(ours_detailed.as_bytes(), read(&expected.join("detailed_results.jsonl")), "{context}: detailed bytes");
    let ours_truncated: String = scored.iter().map(|s| dumps(&s.truncated_json()) + "\n").collect();
    assert_eq!(ours_truncated.as_bytes(), read(&expected.join("prediction_truncated.jsonl")), "{context}: truncated bytes");
    assert_eq!(dumps_indent(&summary.to_json(), 2).as_bytes(), read(&expected.join("results.json")), "{context}: results bytes");
}

macro_rules! golden {
    ($($name:ident: $language:expr, $backend:expr, $folder:literal;)*) => {$(
        #[test]
        fn $name() {
            check($language, $backend, $folder);
        }
    )*};
}

golden! {
    python_difflib: Language::Python, EditSimBackend::Difflib, "expected";
    python_levenshtein: Language::Python, EditSimBackend::Levenshtein, "expected_levenshtein";
    java_difflib: Language::Java, EditSimBackend::Difflib, "expected";
    java_levenshtein: Language::Java, EditSimBackend::Levenshtein, "expected_levenshtein";
    typescript_difflib: Language::TypeScript, EditSimBackend::Difflib, "expected";
    typescript_levenshtein: Language::TypeScript, EditSimBackend::Levenshtein, "expected_levenshtein";
    csharp_difflib: Language::CSharp, EditSimBackend::Difflib, "expected";
    csharp_levenshtein: Language::CSharp, EditSimBackend::Levenshtein, "expected_levenshtein";
}

/// Incremental parsing (the prompt parsed once, candidates as edits) finds the same cut as
/// re-parsing `prompt + prefix` from scratch, on every golden Python example and on every
/// golden prediction placed after every example's prompt.
#[test]
fn python_incremental_cut_equals_fresh_parse() {
    use codesweep_tasks::cceval::postprocess::PythonStatementCutter;
    let dir = golden_dir().join("cceval/python");
    let examples = parse_jsonl("examples.jsonl", &read(&dir.join("examples.jsonl")), Example::from_json);
    let predictions = parse_jsonl("predictions.jsonl", &read(&dir.join("predictions.jsonl")), Prediction::from_json);
    let mut cutter = PythonStatementCutter::new();
    let mut compared = 0;
    for (i, example) in examples.records.iter().enumerate() {
        // Its own prediction, its groundtruth continued by the right context, and a neighbour's prediction.
        let neighbour = &predictions.records[(i * 7 + 3) % predictions.records.len()].value.pred;
        let own = &predictions.records[i].value.pred;
        let continued = format!("{}\n{}", example.value.groundtruth, "    x = (1,\n  2)\nreturn y\n");
        for completion in [own.as_str(), neighbour.as_str(), continued.as_str()] {
            let prompt = &example.value.prompt;
            assert_eq!(
                cutter.find_cut(prompt, completion, true),
                cutter.find_cut(prompt, completion, false),
                "{}: {completion:?}",
                example.value.task_id
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 750);
}
