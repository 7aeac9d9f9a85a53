//! A real cluster on loopback: `codesweep coordinator` and `codesweep worker` processes over
//! gRPC, a filesystem store, tiny models the test writes, and CrossCodeEval data in the official
//! layout. The merged tables must equal those of a single-process `codesweep run`, survive a
//! worker killed mid-shard, and agree with `codesweep score` on the exported predictions.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

fn write_spec(dir: &Path, name: &str, store: &Path, data: &Path, models: &(PathBuf, PathBuf)) -> PathBuf {
    let spec = format!(
        r#"[run]
name = "{name}"
store = "{store}"
shard_size = 4
lease_ttl_seconds = 2.0
retry_backoff_seconds = 0.1

[[models]]
name = "tiny-qwen2"
path = "{a}"
parameters = 1e6

[[models]]
name = "tiny-llama"
path = "{b}"
parameters = 2e6

[generation]
max_new_tokens = 8
batch_size = 3
{budgets}

[cceval]
data_dir = "{data}"

{repoqa_section}"#,
        repoqa_section = tiny_repoqa_section(&data.parent().unwrap().join("repoqa.json")),
        budgets = TINY_BUDGETS,
        store = store.display(),
        a = models.0.display(),
        b = models.1.display(),
        data = data.display()
    );
    let path = dir.join(format!("{name}-{}.toml", store.file_name().unwrap().to_string_lossy()));
    std::fs::write(&path, spec).unwrap();
    path
}

#[test]
fn a_cluster_with_a_killed_worker_gives_the_single_process_tables() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let repoqa_dataset = write_repoqa_dataset(dir.path());
    let models = write_models(dir.path());

    // Reference: everything in one process with one worker.
    let single_store = dir.path().join("single");
    let single_spec = write_spec(dir.path(), "sweep", &single_store, &data, &models);
    let out = codesweep().args(["run", single_spec.to_str().unwrap(), "--workers", "1", "--quiet"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "run failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("| tiny-qwen2 | In-file |") && stdout.contains("Retrieval (bm25)"), "{stdout}");
    assert!(stdout.contains("## RepoQA") && stdout.contains("| tiny-llama | ctx64_none |"), "{stdout}");
    let (single, single_repoqa) = report_cells(&single_store, "sweep");
    assert_eq!(single_repoqa.len(), 2);
    for row in &single_repoqa {
        // tomlkit keeps 3 needles, bytes 5.
        assert_eq!((row["tasks"].as_u64(), row["planned"].as_u64()), (Some(8), Some(8)), "{row}");
    }
    // CrossCodeEval: 2 models × 2 languages × (in_file, rg1_bm25), every example scored.
    assert_eq!(single.len(), 8);
    for cell in &single {
        assert_eq!(cell["examples"], EXAMPLES_PER_LANGUAGE, "{cell}");
        assert_eq!(cell["results"]["total"], EXAMPLES_PER_LANGUAGE, "{cell}");
    }

    // The cluster: a coordinator process, one worker killed while it holds a lease, then three.
    let cluster_store = dir.path().join("cluster");
    let cluster_spec = write_spec(dir.path(), "sweep", &cluster_store, &data, &models);
    let (mut coordinator, address) = start_coordinator(&cluster_spec, &cluster_store);
    let mut doomed = start_worker(&address, "doomed");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !status(&address, "sweep").contains("1 running") {
        assert!(Instant::now() < deadline, "the first worker never leased a shard: {}", status(&address, "sweep"));
        std::thread::sleep(Duration::from_millis(20));
    }
    doomed.0.kill().unwrap();
    let mut workers: Vec<Guard> = (0..3).map(|i| start_worker(&address, &format!("w{i}"))).collect();
    let final_status = {
        // Poll until done, keeping the last status for the lease-expiration check.
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let text = status(&address, "sweep");
            if text.contains(": succeeded") || text.contains("failed —") {
                break text;
            }
            assert!(Instant::now() < deadline, "cluster run did not finish: {text}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    assert!(final_status.contains("succeeded"), "{final_status}");
    assert!(!final_status.contains("lease expirations 0"), "the killed worker's lease never expired: {final_status}");
    for worker in &mut workers {
        assert!(wait_for(worker, Duration::from_secs(30)).success(), "a worker did not exit cleanly");
    }
    assert!(wait_for(&mut coordinator, Duration::from_secs(30)).success(), "the coordinator did not exit when done");

    let (cluster, cluster_repoqa) = report_cells(&cluster_store, "sweep");
    assert_eq!(cluster, single, "cluster tables differ from the single-process run");
    assert_eq!(cluster_repoqa, single_repoqa, "cluster RepoQA tables differ from the single-process run");
    // The RepoQA export scored by `codesweep score repoqa` gives the report's scores.
    let outputs = cluster_store.join("sweep/report/exports/repoqa/tiny-qwen2/ctx64_none/outputs.jsonl");
    // Every line is the task as the official harness writes it, plus the output, so the
    // contexts can be re-checked too: the prompt is the template's fields in order.
    let exported = std::fs::read_to_string(&outputs).unwrap();
    assert!(exported.lines().count() > 0);
    for line in exported.lines() {
        let task: Value = serde_json::from_str(line).unwrap();
        let mut keys: Vec<&str> = task.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "code_context", "code_context_ntokens", "description", "instruction", "language", "name",
                "needle_token_end", "needle_token_start", "output", "path", "position_ratio", "repo", "template"
            ],
            "{line}"
        );
        let prompt: String = task["template"].as_str().unwrap().split('\n').map(|k| task[k].as_str().unwrap()).collect();
        assert!(prompt.contains(task["code_context"].as_str().unwrap()) && prompt.starts_with("Based on the function"), "{line}");
        assert!(task["needle_token_end"].as_u64() <= task["code_context_ntokens"].as_u64(), "{line}");
    }
    let scored = dir.path().join("scored-repoqa");
    let out = codesweep()
        .args(["score", "repoqa", "--dataset", repoqa_dataset.to_str().unwrap(), "--outputs", outputs.to_str().unwrap()])
        .args(["--out", scored.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "score repoqa failed: {}", String::from_utf8_lossy(&out.stderr));
    let scores: Value = serde_json::from_str(&std::fs::read_to_string(scored.join("scores.json")).unwrap()).unwrap();
    let row = cluster_repoqa.iter().find(|r| r["model"] == "tiny-qwen2").unwrap();
    assert_eq!(row["scores"], scores);
    for (language, setting) in [("python", "in_file"), ("java", "rg1_bm25")] {
        let rel = format!("sweep/report/exports/cceval/tiny-qwen2/{language}/{setting}/prediction.jsonl");
        let (a, b) = (std::fs::read_to_string(single_store.join(&rel)).unwrap(), std::fs::read_to_string(cluster_store.join(&rel)).unwrap());
        assert_eq!(a, b, "{rel}");
        // One scoring path: the official-format export scored by `codesweep score` gives the report's numbers.
        let scored = dir.path().join(format!("scored-{language}-{setting}"));
        let out = codesweep()
            .args(["score", "cceval", "--language", language, "--out", scored.to_str().unwrap()])
            .args(["--examples", data.join(language).join("line_completion_rg1_bm25.jsonl").to_str().unwrap()])
            .args(["--predictions", cluster_store.join(&rel).to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "score failed: {}", String::from_utf8_lossy(&out.stderr));
        let results: Value = serde_json::from_str(&std::fs::read_to_string(scored.join("results.json")).unwrap()).unwrap();
        let cell = cluster.iter().find(|c| c["model"] == "tiny-qwen2" && c["language"] == language && c["setting"] == setting).unwrap();
        assert_eq!(cell["results"], results, "{language}/{setting}");
    }

    // Rescoring the stored raw completions reproduces the stored metrics.
    let out = codesweep().args(["rescore", &format!("{}/sweep", cluster_store.display()), "--out", dir.path().join("rescored").to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "rescore failed: {}", String::from_utf8_lossy(&out.stderr));
    let rescored: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("rescored/report.json")).unwrap()).unwrap();
    assert_eq!(rescored["cceval"].as_array().unwrap(), &cluster);
    assert_eq!(rescored["repoqa"].as_array().unwrap(), &cluster_repoqa);

    // `--ignore-comments` rescoring agrees with the official scorer's option on the export.
    let rescored_dir = dir.path().join("rescored-ignore-comments");
    let out = codesweep()
        .args(["rescore", &format!("{}/sweep", cluster_store.display()), "--ignore-comments"])
        .args(["--out", rescored_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "rescore --ignore-comments failed: {}", String::from_utf8_lossy(&out.stderr));
    let rescored: Value = serde_json::from_str(&std::fs::read_to_string(rescored_dir.join("report.json")).unwrap()).unwrap();
    let scored = dir.path().join("scored-repoqa-ignore-comments");
    let out = codesweep()
        .args(["score", "repoqa", "--ignore-comments", "--dataset", repoqa_dataset.to_str().unwrap()])
        .args(["--outputs", outputs.to_str().unwrap(), "--out", scored.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "score repoqa --ignore-comments failed: {}", String::from_utf8_lossy(&out.stderr));
    let scores: Value = serde_json::from_str(&std::fs::read_to_string(scored.join("scores.json")).unwrap()).unwrap();
    let row = rescored["repoqa"].as_array().unwrap().iter().find(|r| r["model"] == "tiny-qwen2").unwrap();
    assert_eq!(row["scores"], scores);

    // Running the finished sweep again redoes nothing.
    let out = codesweep().args(["run", single_spec.to_str().unwrap(), "--quiet"]).output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("(28 already done)") && stderr.contains("single"), "{stderr}");
}

#[test]
fn a_wrong_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    write_repoqa_dataset(dir.path());
    let models = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), "auth", &store, &data, &models);
    let (_coordinator, address) = start_coordinator(&spec, &store);
    let out = codesweep().args(["status", "auth", "--coordinator", &address]).env("CODESWEEP_TOKEN", "wrong").output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bearer token"), "{stderr}");
    assert!(!stderr.contains(TOKEN));
    let ok = status(&address, "auth");
    assert!(ok.contains("run auth: running"), "{ok}");
}

#[test]
fn invalid_specs_fail_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.toml");
    std::fs::write(&spec, "[run]\nname = \"x\"\nshard_size = 0\n[[models]]\nname = \"m\"\npath = \"/m.gguf\"\n[cceval]\ndata_dir = \"/nonexistent\"\n").unwrap();
    let out = codesweep().args(["run", spec.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.toml") && stderr.contains("`run.shard_size`"), "{stderr}");
    assert!(!dir.path().join("runs").exists(), "nothing may be written for an invalid spec");
}
