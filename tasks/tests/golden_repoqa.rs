//! RepoQA golden vectors: per-task verdicts, pass@1 tables (both comment modes) and the
//! 180 unit vectors for `sanitize_output`, `remove_comments` and BLEU.

use codesweep_test_support::golden as common;

use codesweep_tasks::input::{parse_json_document, parse_jsonl};
use codesweep_tasks::pycompat::json::dumps_indent;
use codesweep_tasks::repoqa::bleu::{function_similarity, Bleu};
use codesweep_tasks::repoqa::code::CodeTools;
use codesweep_tasks::repoqa::score::{official_order, resolve};
use codesweep_tasks::repoqa::{Dataset, Language, ModelOutput, RepoqaGrammars, RepoqaScorer, RepoqaScores};
use common::{assert_json_close, golden_dir, read, read_jsonl};
use serde_json::{json, Value};

fn bleu_json(bleu: Bleu) -> Value {
    match bleu {
        Bleu::NoOverlap => json!(0),
        Bleu::Score(x) => json!(x),
    }
}

/// The official scorer's grammars; scripts/test.sh fetches them (scripts/fetch-repoqa-grammars.sh).
fn reference_grammars() -> RepoqaGrammars {
    let path = RepoqaGrammars::default_reference_path().expect("HOME or CODESWEEP_GRAMMARS_DIR is set");
    RepoqaGrammars::load_reference(&path)
        .unwrap_or_else(|e| panic!("{e}\n(the golden tests need the reference grammars: run scripts/fetch-repoqa-grammars.sh)"))
}

fn check_scores(ignore_comments: bool, expected_folder: &str, grammars: RepoqaGrammars) {
    let dir = golden_dir().join("repoqa");
    let document = parse_json_document("dataset.json", &read(&dir.join("dataset.json"))).unwrap();
    let dataset = Dataset::from_json("dataset.json", &document).unwrap();
    let outputs = parse_jsonl("outputs.jsonl", &read(&dir.join("outputs.jsonl")), ModelOutput::from_json);
    assert!(outputs.errors.is_empty());
    let mut scorer = RepoqaScorer::new(ignore_comments, grammars);
    let results: Vec<_> = outputs
        .records
        .iter()
        .map(|o| {
            let (language, repo) = resolve(&dataset, &o.value).unwrap();
            scorer.score(language, repo, &o.value)
        })
        .collect();
    let results = official_order(results);
    let expected = read_jsonl(&dir.join(expected_folder).join("results.jsonl"));
    assert_eq!(results.len(), expected.len());
    for (i, (ours, theirs)) in results.iter().zip(&expected).enumerate() {
        assert_json_close(&ours.to_json(), theirs, &format!("{expected_folder} task {i} ({}/{})", ours.repo, ours.name));
    }
    let scores = RepoqaScores::from_results(&results);
    let expected_scores: Value = serde_json::from_slice(&read(&dir.join(expected_folder).join("scores.json"))).unwrap();
    assert_json_close(&scores.to_json(), &expected_scores, &format!("{expected_folder} scores"));
    let expected_text = String::from_utf8(read(&dir.join(expected_folder).join("scores.json"))).unwrap();
    assert_eq!(dumps_indent(&scores.to_json(), 1) + "\n", expected_text, "{expected_folder}: scores.json text");
}

#[test]
fn scores_with_comments() {
    check_scores(false, "expected", reference_grammars());
}

#[test]
fn scores_ignoring_comments() {
    check_scores(true, "expected_ignore_comments", reference_grammars());
}

/// With comments kept, the bundled (newer) grammars give the official numbers too.
#[test]
fn scores_with_comments_bundled_grammars() {
    check_scores(false, "expected", RepoqaGrammars::Bundled);
}

#[test]
fn unit_vectors() {
    let failures = unit_vector_failures(&reference_grammars());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The bundled grammars differ from the reference on exactly one vector: prose followed by
/// unfenced Python, where tree-sitter-python 0.25 recovers a function (and so finds and
/// removes its docstring) and the reference grammar does not.
#[test]
fn unit_vectors_bundled_grammars_differ_only_on_error_recovery() {
    let failures = unit_vector_failures(&RepoqaGrammars::Bundled);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    assert!(failures[0].starts_with("vector 11 (python no_fence _normalize_nested_options): comments_removed"), "{failures:#?}");
}

fn unit_vector_failures(grammars: &RepoqaGrammars) -> Vec<String> {
    let vectors = read_jsonl(&golden_dir().join("repoqa/unit_vectors.jsonl"));
    assert_eq!(vectors.len(), 180);
    let mut failures = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let language: Language = text("lang").parse().unwrap();
        let mut tools = CodeTools::new(language, grammars);
        let context = format!("vector {i} ({} {} {})", text("lang"), text("variant"), text("name"));
        let sanitized = tools.sanitize_output(&text("input"));
        if sanitized != text("sanitized") {
            failures.push(format!("{context}: sanitized {sanitized:?} != {:?}", text("sanitized")));
            continue;
        }
        let removed = tools.remove_comments(&sanitized);
        if removed != text("comments_removed") {
            failures.push(format!("{context}: comments_removed {removed:?} != {:?}", text("comments_removed")));
        }
        let reference_removed = tools.remove_comments(&text("reference"));
        if reference_removed != text("reference_comments_removed") {
            failures.push(format!("{context}: reference_comments_removed {reference_removed:?} != {:?}", text("reference_comments_removed")));
        }
        let checks = [
            ("bleu", function_similarity(&text("candidate"), &text("reference"))),
            ("bleu_ignore_comments", function_similarity(&text("comments_removed"), &text("reference_comments_removed"))),
        ];
        for (key, bleu) in checks {
            let ours = bleu_json(bleu);
            let theirs = &v[key];
            let same_kind = ours.is_f64() == theirs.is_f64();
            if !same_kind || (ours.as_f64().unwrap() - theirs.as_f64().unwrap()).abs() > 1e-9 {
                failures.push(format!("{context}: {key} {ours} != {theirs}"));
            }
        }
    }
    failures
}
