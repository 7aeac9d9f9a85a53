//! `codesweep report` over several runs (a sweep run as one release per model size): one set of
//! tables equal to the union of the runs' own tables, and a clear refusal when the runs did not
//! measure the same thing or share a model.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::*;

/// A CrossCodeEval run of one tiny model; `max_new_tokens` varies to make runs incomparable.
fn write_spec(dir: &Path, run: &str, store: &Path, data: &Path, model: (&str, &Path), max_new_tokens: usize) -> PathBuf {
    let spec = format!(
        r#"[run]
name = "{run}"
store = "{store}"
shard_size = 5

[[models]]
name = "{name}"
path = "{path}"

[generation]
max_new_tokens = {max_new_tokens}
batch_size = 2
model_max_tokens = 400
crossfile_max_tokens = 120
buffer = 16

[cceval]
data_dir = "{data}"
settings = ["in_file"]
limit = 5
"#,
        store = store.display(),
        name = model.0,
        path = model.1.display(),
        data = data.display()
    );
    let path = dir.join(format!("{run}.toml"));
    write(&path, &spec);
    path
}

fn run(spec: &Path) {
    let out = run_codesweep(&["run", spec.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "run failed: {}", text(&out.stderr));
}

#[test]
fn a_report_over_two_runs_is_the_union_of_their_tables() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let (qwen, llama) = write_models(dir.path());
    // Two releases, two stores, one model each.
    let (store_a, store_b) = (dir.path().join("store-a"), dir.path().join("store-b"));
    run(&write_spec(dir.path(), "small", &store_a, &data, ("tiny-qwen2", &qwen), 8));
    run(&write_spec(dir.path(), "large", &store_b, &data, ("tiny-llama", &llama), 8));
    let (small, _) = report_cells(&store_a, "small");
    let (large, _) = report_cells(&store_b, "large");

    let merged_dir = dir.path().join("merged");
    let runs = [format!("{}/small", store_a.display()), format!("{}/large", store_b.display())];
    let out = run_codesweep(&["report", &runs[0], &runs[1], "--out", merged_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(merged_dir.join("report.json")).unwrap()).unwrap();
    let merged = json["cceval"].as_array().unwrap().clone();
    assert_eq!(merged, [small.clone(), large.clone()].concat(), "the merged cells are not the union");
    assert_eq!(merged.len(), 4, "two models × python and java");
    let markdown = text(&out.stdout);
    assert!(markdown.contains("| tiny-qwen2 | In-file |") && markdown.contains("| tiny-llama | In-file |"), "{markdown}");
    for model in ["tiny-qwen2", "tiny-llama"] {
        assert!(merged_dir.join(format!("exports/cceval/{model}/python/in_file/prediction.jsonl")).is_file(), "{model}");
    }

    // Several runs need --out: the report belongs to none of their stores.
    let out = run_codesweep(&["report", &runs[0], &runs[1]]);
    assert!(!out.status.success() && text(&out.stderr).contains("give --out DIR"), "{}", text(&out.stderr));
    // The same model twice would count it twice.
    let out = run_codesweep(&["report", &runs[0], &runs[0], "--out", merged_dir.to_str().unwrap()]);
    assert!(text(&out.stderr).contains("model \"tiny-qwen2\" is in both"), "{}", text(&out.stderr));
    // Another generation budget measures something else.
    let store_c = dir.path().join("store-c");
    run(&write_spec(dir.path(), "longer", &store_c, &data, ("tiny-llama", &llama), 12));
    let other = format!("{}/longer", store_c.display());
    let out = run_codesweep(&["report", &runs[0], &other, "--out", merged_dir.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "incomparable runs were merged");
    assert!(
        stderr.contains("runs small and longer cannot share a report: `generation.max_new_tokens` is 8 in small and 12 in longer"),
        "{stderr}"
    );
}
