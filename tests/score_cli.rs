//! `codesweep score` as a user runs it: real process, real files; golden outputs and bad input.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::golden;

fn codesweep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_codesweep")).args(args).output().expect("codesweep runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn score_cceval(examples: &Path, predictions: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "score", "cceval", "--language", "java",
        "--examples", examples.to_str().unwrap(),
        "--predictions", predictions.to_str().unwrap(),
        "--out", out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    codesweep(&args)
}

#[test]
fn cceval_outputs_are_the_official_files() {
    let dir = golden().join("cceval/python");
    let out = tempfile::tempdir().unwrap();
    for (backend, folder) in [("difflib", "expected"), ("levenshtein", "expected_levenshtein")] {
        let result = codesweep(&[
            "score", "cceval", "--language", "python", "--edit-sim", backend, "--threads", "2",
            "--examples", dir.join("examples.jsonl").to_str().unwrap(),
            "--predictions", dir.join("predictions.jsonl").to_str().unwrap(),
            "--out", out.path().to_str().unwrap(),
        ]);
        assert!(result.status.success(), "{}", text(&result.stderr));
        assert!(text(&result.stdout).contains("| 39.60 |"), "{}", text(&result.stdout));
        for name in ["results.json", "detailed_results.jsonl", "prediction_truncated.jsonl"] {
            let ours = std::fs::read(out.path().join(name)).unwrap();
            let theirs = std::fs::read(dir.join(folder).join(name)).unwrap();
            assert!(ours == theirs, "{backend}: {name} differs from the official file");
        }
        assert_eq!(
            std::fs::read(out.path().join("detailed_results.json")).unwrap(),
            std::fs::read(out.path().join("detailed_results.jsonl")).unwrap()
        );
    }
}

#[test]
fn repoqa_outputs_are_the_official_files() {
    let dir = golden().join("repoqa");
    let out = tempfile::tempdir().unwrap();
    // Default mode agrees with the official numbers under either grammar set.
    let result = codesweep(&[
        "score", "repoqa", "--grammars", "bundled",
        "--dataset", dir.join("dataset.json").to_str().unwrap(),
        "--outputs", dir.join("outputs.jsonl").to_str().unwrap(),
        "--out", out.path().to_str().unwrap(),
    ]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    assert!(text(&result.stdout).contains("all           69.3  68.0  66.7"), "{}", text(&result.stdout));
    let ours = std::fs::read(out.path().join("scores.json")).unwrap();
    assert!(ours == std::fs::read(dir.join("expected/scores.json")).unwrap(), "scores.json differs");
    let lines = std::fs::read_to_string(out.path().join("results.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 150);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

const EXAMPLE_A: &str = r#"{"prompt": "int x = ", "groundtruth": "a.b();", "metadata": {"task_id": "t/1"}}"#;
const EXAMPLE_B: &str = r#"{"prompt": "int y = ", "groundtruth": "c.d();", "metadata": {"task_id": "t/2"}}"#;

#[test]
fn bad_input_names_file_line_and_field_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let examples = write(dir.path(), "ex.jsonl", format!("{EXAMPLE_A}\n{EXAMPLE_B}\n").as_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed", b"{\"task_id\": \"t/1\", \"pred\": \"a.b();\"}\n{\"task_id\": \"t/2\", \"pred\": \n".to_vec(), "malformed.jsonl:2: malformed JSON"),
        ("missing", b"{\"task_id\": \"t/1\", \"pred\": \"x\"}\n{\"task_id\": \"t/2\"}\n".to_vec(), "missing.jsonl:2: field `pred`: missing"),
        ("utf8", b"{\"task_id\": \"t/1\", \"pred\": \"x\"}\n{\"task_id\": \"t/2\", \"pred\": \"\xff\"}\n".to_vec(), "utf8.jsonl:2: invalid UTF-8"),
        ("unknown", b"{\"task_id\": \"t/1\", \"pred\": \"x\"}\n{\"task_id\": \"t/9\", \"pred\": \"y\"}\n".to_vec(), "unknown.jsonl:2: field `task_id`: no example with task_id `t/9`"),
    ];
    for (name, bytes, expected) in cases {
        let predictions = write(dir.path(), &format!("{name}.jsonl"), &bytes);
        let out = dir.path().join(format!("out-{name}"));
        let result = score_cceval(&examples, &predictions, &out, &[]);
        let stderr = text(&result.stderr);
        assert_eq!(result.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(stderr.contains("--skip-invalid"), "{name}: the error says what to do next: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert!(!out.join("results.json").exists(), "{name}: no partial results");
    }
}

#[test]
fn skip_invalid_scores_the_rest_and_counts_what_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let examples = write(dir.path(), "ex.jsonl", format!("{EXAMPLE_A}\n{{broken\n{EXAMPLE_B}\n").as_bytes());
    let predictions = write(
        dir.path(),
        "pred.jsonl",
        b"{\"task_id\": \"t/1\", \"pred\": \"a.b(); junk\"}\n{\"task_id\": \"t/3\", \"pred\": \"z\"}\n",
    );
    let out = dir.path().join("out");
    let result = score_cceval(&examples, &predictions, &out, &["--skip-invalid"]);
    let stderr = text(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    // The broken example line, the unknown prediction, and the example left without one.
    assert!(stderr.contains("skipped 3 invalid record(s)"), "{stderr}");
    assert!(stderr.contains("ex.jsonl:2: malformed JSON"), "{stderr}");
    assert!(stderr.contains("pred.jsonl:2: field `task_id`"), "{stderr}");
    let results = std::fs::read_to_string(out.join("results.json")).unwrap();
    assert!(results.contains("\"em\": 100.0") && results.contains("\"total\": 1"), "{results}");
}

#[test]
fn repoqa_bad_outputs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = write(
        dir.path(),
        "d.json",
        br#"{"rust": [{"repo": "r", "content": {"a.rs": "fn f() {}\n"}, "needles": [{"path": "a.rs", "name": "f", "start_line": 0, "end_line": 1}]}]}"#,
    );
    let good = r#"{"language": "rust", "repo": "r", "name": "f", "output": ["fn f() {}"], "position_ratio": 0.5, "needle_token_start": 0, "needle_token_end": 3}"#;
    let outputs = write(
        dir.path(),
        "o.jsonl",
        format!("{good}\n{}\n{}\n", good.replace("\"repo\": \"r\"", "\"repo\": \"nope\""), good.replace("rust", "go")).as_bytes(),
    );
    let args = |extra: &'static str| {
        let mut a = vec!["score", "repoqa", "--grammars", "bundled", "--dataset", dataset.to_str().unwrap(), "--outputs", outputs.to_str().unwrap(), "--out"];
        a.push(dir.path().to_str().unwrap());
        if !extra.is_empty() {
            a.push(extra);
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let result = Command::new(env!("CARGO_BIN_EXE_codesweep")).args(args("")).output().unwrap();
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("o.jsonl:2: field `repo`: the dataset has no rust repository `nope`"), "{stderr}");
    assert!(stderr.contains("o.jsonl:3: field `language`: unknown RepoQA language `go`"), "{stderr}");
    let result = Command::new(env!("CARGO_BIN_EXE_codesweep")).args(args("--skip-invalid")).output().unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    assert!(text(&result.stdout).contains("1 tasks"), "{}", text(&result.stdout));
}

#[test]
fn missing_files_and_bad_dataset_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let result = score_cceval(&dir.path().join("nope.jsonl"), &dir.path().join("p.jsonl"), dir.path(), &[]);
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(1));
    assert!(stderr.contains("cannot read") && stderr.contains("nope.jsonl"), "{stderr}");
    let dataset = write(dir.path(), "d.json", b"{\"python\": [\n{\"repo\": 1}]}");
    let outputs = write(dir.path(), "o.jsonl", b"");
    let result = codesweep(&["score", "repoqa", "--dataset", dataset.to_str().unwrap(), "--outputs", outputs.to_str().unwrap(), "--out", dir.path().to_str().unwrap()]);
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(1));
    assert!(stderr.contains("field `python[0].repo`: expected a string"), "{stderr}");
}
