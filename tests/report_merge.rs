//! `codesweep report` over several runs (a sweep run as one release per model size): one set of
//! tables equal to the union of the runs' own tables, and a clear refusal when the runs did not
//! measure the same thing or share a model. `report` and `rescore` on a run with a corrupted
//! stored result: the worker's verdicts and the rescored ones agree, the bad object is named.

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
{budgets}

[cceval]
data_dir = "{data}"
settings = ["in_file"]
limit = 5
"#,
        store = store.display(),
        budgets = TINY_BUDGETS,
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

/// The report's cells and failures as JSON, read from `out/report.json`.
fn report_json(out_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn rescore_agrees_with_the_worker_and_a_corrupted_result_is_named_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let (qwen, _) = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), "corrupt", &store, &data, ("tiny-qwen2", &qwen), 8);
    std::fs::write(&spec, std::fs::read_to_string(&spec).unwrap().replace("shard_size = 5", "shard_size = 2")).unwrap();
    run(&spec);
    let run_url = format!("{}/corrupt", store.display());
    // Runs `report`/`rescore` with `--out`: whether it succeeded, report.json, stdout, stderr.
    let report = |args: &[&str], out: &Path| {
        let mut all = vec![args[0], run_url.as_str(), "--out", out.to_str().unwrap()];
        all.extend_from_slice(&args[1..]);
        let result = run_codesweep(&all);
        (result.status.success(), report_json(out), text(&result.stdout), text(&result.stderr))
    };
    // The worker's stored verdicts and verdicts computed again from the stored completions agree.
    let (ok, stored, _, stderr) = report(&["report"], &dir.path().join("stored"));
    assert!(ok, "{stderr}");
    let (ok, rescored, _, stderr) = report(&["rescore"], &dir.path().join("rescored"));
    assert!(ok, "{stderr}");
    assert_eq!(stored["cceval"], rescored["cceval"], "rescore disagrees with the worker");
    assert_eq!(stored["cceval"][0]["examples"], 5);

    // One python result object now holds a task twice (as a botched copy or merge would).
    let shard = store.join("corrupt/shards/tiny-qwen2/cceval/python/in_file/0000.jsonl");
    let text_before = std::fs::read_to_string(&shard).unwrap_or_else(|e| panic!("{}: {e}", shard.display()));
    let second_line = text_before.lines().nth(1).unwrap().to_string();
    std::fs::write(&shard, format!("{text_before}{second_line}\n")).unwrap();
    for command in ["report", "rescore"] {
        let out = dir.path().join(format!("{command}-after"));
        let (ok, json, markdown, stderr) = report(&[command], &out);
        // The tables are written without the shard, and the command fails naming it.
        assert!(!ok && stderr.contains("1 stored result(s) could not be used"), "{command}: {stderr}");
        assert!(stderr.contains("python/in_file/0000.jsonl:4: task_id") && stderr.contains("appears twice"), "{command}: {stderr}");
        assert_eq!(json["failures"].as_array().unwrap().len(), 0, "{command}: no shard failed when it ran");
        let unreadable = json["unreadable"].as_array().unwrap();
        assert_eq!(unreadable.len(), 1, "{command}: {unreadable:?}");
        let python = json["cceval"].as_array().unwrap().iter().find(|c| c["language"] == "python").unwrap();
        assert_eq!((python["examples"].as_u64(), python["planned"].as_u64()), (Some(3), Some(5)), "{command}: the shard is left out, not counted twice");
        let java = json["cceval"].as_array().unwrap().iter().find(|c| c["language"] == "java").unwrap();
        let java_before = stored["cceval"].as_array().unwrap().iter().find(|c| c["language"] == "java").unwrap();
        assert_eq!(java, java_before, "{command}: the other shards are reported as before");
        assert!(markdown.contains("## Unreadable stored results") && markdown.contains("appears twice"), "{command}: {markdown}");
    }
}
