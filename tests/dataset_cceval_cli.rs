//! `codesweep dataset cceval` as a user runs it: a repository written by the test becomes an
//! example file that `codesweep score cceval` and `codesweep retrieve` read as it is.

mod support;

use std::path::Path;

use serde_json::Value;
use support::{run_codesweep as codesweep, text, write};

/// Repository `shop` under `dir/repos`: `shop/cart.py` uses `shop/money.py`.
fn fixture(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repos/shop");
    write(&repo.join("shop/__init__.py"), "");
    write(
        &repo.join("shop/money.py"),
        "class Money:\n    def __init__(self, cents):\n        self.cents = cents\n\n    def plus(self, other):\n        return Money(self.cents + other.cents)\n\n\ndef parse_money(text):\n    return Money(int(text))\n",
    );
    let filler: String = (0..12).map(|i| format!("RATE_{i} = {i}\n")).collect();
    write(
        &repo.join("shop/cart.py"),
        &format!(
            "from .money import Money, parse_money\n\n{filler}\n\nclass Cart:\n    def __init__(self):\n        self.total = Money(0)\n\n    def add(self, price_text):\n        price = parse_money(price_text.strip())\n        self.total = self.total.plus(price)\n        return self.total.cents * RATE_3\n"
        ),
    );
    repo
}

#[test]
fn built_examples_score_and_retrieve() {
    let dir = tempfile::tempdir().unwrap();
    let repo = fixture(dir.path());
    let examples = dir.path().join("examples.jsonl");
    let summary = dir.path().join("summary.json");
    let built = codesweep(&[
        "dataset", "cceval", "--repo", repo.to_str().unwrap(), "--language", "python",
        "--out", examples.to_str().unwrap(), "--summary", summary.to_str().unwrap(), "--seed", "11",
    ]);
    assert!(built.status.success(), "{}", text(&built.stderr));
    let stdout = text(&built.stdout);
    assert!(stdout.contains("| # repositories | # files | # examples |"), "{stdout}");
    let rows: Vec<Value> = std::fs::read_to_string(&examples).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(summary["examples"], rows.len());
    // Money(0), parse_money(..), .plus(..) and .cents on self.total (assigned from Money).
    assert_eq!(rows.len(), 4, "{rows:#?}");
    for (n, row) in rows.iter().enumerate() {
        let keys: Vec<&str> = row.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["prompt", "groundtruth", "right_context", "metadata", "crossfile_context"]);
        assert_eq!(row["metadata"]["task_id"], format!("project_cc_python/{n}"));
        assert_eq!(row["metadata"]["repository"], "shop");
        assert_eq!(row["metadata"]["file"], "shop/cart.py");
    }

    // The groundtruths as predictions: every one an exact match.
    let predictions: String = rows
        .iter()
        .map(|r| serde_json::json!({"task_id": r["metadata"]["task_id"], "pred": r["groundtruth"]}).to_string() + "\n")
        .collect();
    let predictions_file = dir.path().join("predictions.jsonl");
    std::fs::write(&predictions_file, predictions).unwrap();
    let scores = dir.path().join("scores");
    let scored = codesweep(&[
        "score", "cceval", "--examples", examples.to_str().unwrap(), "--predictions", predictions_file.to_str().unwrap(),
        "--language", "python", "--out", scores.to_str().unwrap(),
    ]);
    assert!(scored.status.success(), "{}", text(&scored.stderr));
    let results: Value = serde_json::from_str(&std::fs::read_to_string(scores.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["em"], 100.0);
    assert_eq!(results["total"], 4);

    // retrieve reads metadata.repository / metadata.file against the repositories' parent folder.
    let punkt = dir.path().join("punkt");
    for name in ["abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab"] {
        write(&punkt.join(name), "");
    }
    let retrieved = dir.path().join("retrieved.jsonl");
    let result = codesweep(&[
        "retrieve", "--language", "python", "--examples", examples.to_str().unwrap(),
        "--repos", dir.path().join("repos").to_str().unwrap(), "--punkt", punkt.to_str().unwrap(),
        "--retriever", "bm25", "--out", retrieved.to_str().unwrap(),
    ]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let first: Value = serde_json::from_str(std::fs::read_to_string(&retrieved).unwrap().lines().next().unwrap()).unwrap();
    let list = first["crossfile_context"]["list"].as_array().unwrap();
    assert!(list.iter().any(|c| c["filename"] == "shop/money.py"), "{first}");
}

#[test]
fn missing_repository_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.jsonl");
    let missing = dir.path().join("nope");
    let result = codesweep(&["dataset", "cceval", "--repo", missing.to_str().unwrap(), "--language", "java", "--out", out.to_str().unwrap()]);
    assert!(!result.status.success());
    assert!(text(&result.stderr).contains("nope: not a folder"), "{}", text(&result.stderr));
}

/// `--filter-model` with a real model (set `CODESWEEP_FILTER_MODEL` to a GGUF file, e.g.
/// Qwen2.5-Coder-0.5B from scripts/fetch-models.sh; skipped otherwise): a line the file spells
/// out in a comment is completed exactly from in-file context, so its example is dropped.
#[test]
fn filter_model_drops_examples_completed_from_the_file_alone() {
    let Some(model) = std::env::var_os("CODESWEEP_FILTER_MODEL") else {
        eprintln!("skipped: CODESWEEP_FILTER_MODEL is not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let repo = fixture(dir.path());
    let cart = repo.join("shop/cart.py");
    let source = std::fs::read_to_string(&cart).unwrap().replace(
        "class Cart:",
        "# Example:\n#     self.total = Money(0)\n#     price = parse_money(price_text.strip())\nclass Cart:",
    );
    std::fs::write(&cart, source).unwrap();
    let run = |extra: &[&str]| -> Value {
        let out = dir.path().join("examples.jsonl");
        let summary = dir.path().join("summary.json");
        let mut args = vec![
            "dataset", "cceval", "--repo", repo.to_str().unwrap(), "--language", "python", "--seed", "11",
            "--out", out.to_str().unwrap(), "--summary", summary.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let result = codesweep(&args);
        assert!(result.status.success(), "{}", text(&result.stderr));
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap()
    };
    let unfiltered = run(&[]);
    let filtered = run(&["--filter-model", model.to_str().unwrap(), "--filter-context-tokens", "512"]);
    let dropped = filtered["dropped"]["model_exact_match"].as_u64().unwrap();
    assert!(dropped >= 1, "{filtered}");
    assert_eq!(filtered["examples"].as_u64().unwrap() + dropped, unfiltered["examples"].as_u64().unwrap());
}
