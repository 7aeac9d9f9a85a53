//! `codesweep dataset repoqa` as a user runs it: repositories the test writes become a dataset
//! in the official layout that `codesweep score repoqa` scores (answers reproducing the needles
//! pass); descriptions from a tiny real chat model, locally and through `codesweep serve`.

mod support;

use std::path::Path;

use candle_core::quantized::GgmlDType;
use serde_json::{json, Value};
use support::common;
use support::{run_codesweep as codesweep, start_serve, text, write};

/// A Python package of three modules importing each other, `n` documented functions each.
fn python_repo(root: &Path, n: usize) {
    let functions = |stem: &str| -> String {
        (0..n).map(|i| format!("def {stem}_{i}(x):\n    \"\"\"Scales x by {i} for {stem}.\"\"\"\n    y = x * {i}\n    return y + 1\n\n\n")).collect()
    };
    write(&root.join("src/geo/__init__.py"), "from .shapes import shapes_0\n");
    write(&root.join("src/geo/shapes.py"), &format!("from geo import units\n\n{}", functions("shapes")));
    write(&root.join("src/geo/units.py"), &format!("from .shapes import shapes_1\n\n{}", functions("units")));
}

/// A Rust crate of two modules.
fn rust_repo(root: &Path) {
    let functions = |stem: &str| -> String {
        (0..4).map(|i| format!("/// Adds {i}.\npub fn {stem}_{i}(x: u32) -> u32 {{\n    x + {i}\n}}\n\n")).collect()
    };
    write(&root.join("src/lib.rs"), &format!("mod parse;\nuse crate::parse::parse_0;\n\n{}", functions("lib")));
    write(&root.join("src/parse.rs"), &format!("use super::lib_0;\n\n{}", functions("parse")));
}

/// One output per needle reproducing it in a fenced block.
fn perfect_outputs(dataset: &Value) -> String {
    let mut lines = String::new();
    for (language, repos) in dataset.as_object().unwrap() {
        for repo in repos.as_array().unwrap() {
            let needles = repo["needles"].as_array().unwrap();
            for (i, needle) in needles.iter().enumerate() {
                let file = repo["content"][needle["path"].as_str().unwrap()].as_str().unwrap();
                let (start, end) = (needle["start_line"].as_u64().unwrap() as usize, needle["end_line"].as_u64().unwrap() as usize);
                let code = file.split('\n').collect::<Vec<_>>()[start..end].join("\n");
                let record = json!({
                    "language": language, "repo": repo["repo"], "name": needle["name"],
                    "position_ratio": (i as f64 + 0.5) / needles.len() as f64, "needle_token_start": 0, "needle_token_end": 0,
                    "output": [format!("The function:\n```\n{code}\n```\n")],
                });
                lines.push_str(&format!("{record}\n"));
            }
        }
    }
    lines
}

#[test]
fn builds_a_dataset_that_scores_answers_reproducing_the_needles() {
    let dir = tempfile::tempdir().unwrap();
    let (py, rs) = (dir.path().join("py"), dir.path().join("rs"));
    python_repo(&py, 6);
    rust_repo(&rs);
    let dataset = dir.path().join("out/dataset.json");
    let d = dataset.to_str().unwrap();
    let result = codesweep(&[
        "dataset", "repoqa", "--repo", py.to_str().unwrap(), "--language", "python", "--entry", "src/geo", "--name", "geo",
        "--commit", "0.1", "--seed", "5", "--grammars", "bundled", "--out", d,
    ]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    assert!(stdout.starts_with("python geo (entry `src/geo`): 3 files"), "{stdout}");
    assert!(stdout.contains("12 functions, 12 candidates, 10 needles"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.ends_with("description: docstring")).count(), 10, "{stdout}");
    let result = codesweep(&["dataset", "repoqa", "--repo", rs.to_str().unwrap(), "--language", "rust", "--append", "--grammars", "bundled", "--out", d]);
    assert!(result.status.success(), "{}", text(&result.stderr));

    let value: Value = serde_json::from_str(&std::fs::read_to_string(&dataset).unwrap()).unwrap();
    assert_eq!(value.as_object().unwrap().keys().collect::<Vec<_>>(), ["python", "rust"]);
    let geo = &value["python"][0];
    assert_eq!((geo["repo"].as_str(), geo["commit_sha"].as_str(), geo["entrypoint_path"].as_str()), (Some("geo"), Some("0.1"), Some("src/geo")));
    assert_eq!(geo["dependency"]["src/geo/shapes.py"], json!(["src/geo/units.py"]));
    assert_eq!(geo["dependency"]["src/geo/units.py"], json!(["src/geo/shapes.py"]));
    assert_eq!(value["rust"][0]["repo"], "rs", "the folder name by default");
    assert_eq!(value["rust"][0]["needles"].as_array().unwrap().len(), 8);

    let outputs = dir.path().join("outputs.jsonl");
    std::fs::write(&outputs, perfect_outputs(&value)).unwrap();
    let scores = dir.path().join("scores");
    let result = codesweep(&["score", "repoqa", "--grammars", "bundled", "--dataset", d, "--outputs", outputs.to_str().unwrap(), "--out", scores.to_str().unwrap()]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let scores: Value = serde_json::from_str(&std::fs::read_to_string(scores.join("scores.json")).unwrap()).unwrap();
    for key in ["all", "python", "rust"] {
        assert_eq!(scores[key]["0.8"]["pass@1"].as_f64(), Some(1.0), "{key}: {scores}");
    }
}

#[test]
fn bad_arguments_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.json");
    let result = codesweep(&["dataset", "repoqa", "--repo", dir.path().join("nope").to_str().unwrap(), "--language", "rust", "--out", out.to_str().unwrap()]);
    assert!(!result.status.success() && text(&result.stderr).contains("not a folder"), "{}", text(&result.stderr));
    python_repo(dir.path(), 1);
    let result = codesweep(&["dataset", "repoqa", "--repo", dir.path().to_str().unwrap(), "--language", "java", "--out", out.to_str().unwrap()]);
    assert!(!result.status.success() && text(&result.stderr).contains("no java file"), "{}", text(&result.stderr));
    let result =
        codesweep(&["dataset", "repoqa", "--repo", dir.path().to_str().unwrap(), "--language", "python", "--describe", "oracle", "--out", out.to_str().unwrap()]);
    assert!(!result.status.success() && text(&result.stderr).contains("expected docstring, model:PATH or endpoint:URL"), "{}", text(&result.stderr));
}

/// A ChatML template in Qwen2.5's shape.
const CHATML: &str = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";


#[test]
fn model_and_endpoint_annotators_give_the_same_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("geo");
    python_repo(&repo, 1);
    let model = common::write_gguf_chat(dir.path(), common::Arch::Qwen2, GgmlDType::Q8_0, &common::trained_tokenizer_json(2000), CHATML);
    let describe_model = format!("model:{}", model.display());
    let local = dir.path().join("local.json");
    let base = ["dataset", "repoqa", "--repo", repo.to_str().unwrap(), "--language", "python", "--grammars", "bundled", "--max-new-tokens", "6", "--code-prefix-lines", "0"];
    let mut args = base.to_vec();
    args.extend(["--describe", &describe_model, "--out", local.to_str().unwrap()]);
    let result = codesweep(&args);
    assert!(result.status.success(), "{}", text(&result.stderr));

    let (_server, url) = start_serve(&["--model", model.to_str().unwrap(), "--served-name", "tiny"]);
    let describe_endpoint = format!("endpoint:{url}");
    let remote = dir.path().join("remote.json");
    let mut args = base.to_vec();
    args.extend(["--describe", &describe_endpoint, "--describe-model", "tiny", "--out", remote.to_str().unwrap()]);
    let result = codesweep(&args);
    assert!(result.status.success(), "{}", text(&result.stderr));

    let read = |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (local, remote) = (read(&local), read(&remote));
    let (ln, rn) = (local["python"][0]["needles"].as_array().unwrap(), remote["python"][0]["needles"].as_array().unwrap());
    assert_eq!(ln.len(), 2);
    for (l, r) in ln.iter().zip(rn) {
        assert_eq!(l["name"], r["name"]);
        assert_eq!(l["description"], r["description"], "greedy answers agree");
        assert!(!l["description"].as_str().unwrap().contains("docstring"), "{}", l["description"]);
        assert_eq!(l["description_source"], format!("model:{}", model.file_name().unwrap().to_str().unwrap()));
        assert!(r["description_source"].as_str().unwrap().starts_with("endpoint:http://"));
    }
}
