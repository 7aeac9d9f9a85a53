//! Shared pieces of the CLI's process-level tests: the binary, golden data in the official
//! layout, tiny models, and child processes (coordinator, workers) that die with the test.
#![allow(dead_code)]

pub use codesweep_test_support::models as common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use candle_core::quantized::GgmlDType;
use serde_json::Value;

pub const TOKEN: &str = "cluster-test-token";
pub const EXAMPLES_PER_LANGUAGE: usize = 10;
/// The `[generation]` token budgets that fit the tiny models' 512 positions.
pub const TINY_BUDGETS: &str = "model_max_tokens = 400\ncrossfile_max_tokens = 120\nbuffer = 16";

/// A `[repoqa]` section over `dataset` sized for the tiny models, whose contexts are counted in
/// their own tokens (the official Code Llama tokenizer is not needed).
pub fn tiny_repoqa_section(dataset: &Path) -> String {
    format!("[repoqa]\ndataset = \"{}\"\ncode_context_size = 64\nmax_new_tokens = 8\ncontext_tokenizer = \"model\"\n", dataset.display())
}

pub fn codesweep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_codesweep"))
}

/// `$CODESWEEP_GOLDEN`, else the repository's `tests/golden`.
pub use codesweep_test_support::golden::golden_dir as golden;

/// The first golden examples with their official BM25 cross-file context, in the official
/// data layout (the golden retrieval files keep only `metadata` and `crossfile_context`; the
/// rest of each record is the golden example at the same position).
pub fn write_data(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    for language in ["python", "java"] {
        let read = |path: PathBuf| std::fs::read_to_string(path).unwrap();
        let examples = read(golden().join("cceval").join(language).join("examples.jsonl"));
        let contexts = read(golden().join("retrieval").join(language).join("line_completion_rg1_bm25.jsonl"));
        let lines: Vec<String> = examples
            .lines()
            .zip(contexts.lines())
            .take(EXAMPLES_PER_LANGUAGE)
            .map(|(example, context)| {
                let mut record: Value = serde_json::from_str(example).unwrap();
                let context: Value = serde_json::from_str(context).unwrap();
                assert_eq!(record["metadata"]["task_id"], context["metadata"]["task_id"]);
                record["crossfile_context"] = context["crossfile_context"].clone();
                record.to_string()
            })
            .collect();
        std::fs::create_dir_all(data.join(language)).unwrap();
        std::fs::write(data.join(language).join("line_completion_rg1_bm25.jsonl"), lines.join("\n") + "\n").unwrap();
    }
    data
}

/// One golden RepoQA repository of two languages, keeping only needles short enough for the
/// tiny models' 512-token context.
pub fn write_repoqa_dataset(dir: &Path) -> PathBuf {
    let full: Value = serde_json::from_str(&std::fs::read_to_string(golden().join("repoqa/dataset.json")).unwrap()).unwrap();
    let mut reduced = serde_json::Map::new();
    for (language, repo) in [("python", "tomlkit"), ("rust", "bytes")] {
        let repos = full[language].as_array().unwrap();
        let mut chosen: Vec<Value> = repos.iter().filter(|r| r["repo"] == repo).cloned().collect();
        for r in &mut chosen {
            let short: Vec<Value> = r["needles"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["end_byte"].as_u64().unwrap() - n["start_byte"].as_u64().unwrap() <= 100)
                .cloned()
                .collect();
            r["needles"] = Value::Array(short);
        }
        assert_eq!(chosen.len(), 1, "{language}/{repo}");
        reduced.insert(language.to_string(), Value::Array(chosen));
    }
    let path = dir.join("repoqa.json");
    std::fs::write(&path, Value::Object(reduced).to_string()).unwrap();
    path
}

pub fn write_models(dir: &Path) -> (PathBuf, PathBuf) {
    let tokenizer = common::trained_tokenizer_json(400);
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    (
        common::write_gguf(&a, common::Arch::Qwen2, GgmlDType::Q8_0, &tokenizer),
        common::write_gguf(&b, common::Arch::Llama, GgmlDType::Q8_0, &tokenizer),
    )
}

/// A child process that is killed when dropped, so a failing test leaves nothing behind.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A coordinator on a free loopback port that submits `spec`, reloads `store` at start and
/// exits when its runs end; returns it and its `http://` address.
pub fn start_coordinator(spec: &Path, store: &Path) -> (Guard, String) {
    start_coordinator_on("127.0.0.1:0", spec, store)
}

/// Like [`start_coordinator`] on a given address (a restart on the same port).
pub fn start_coordinator_on(listen: &str, spec: &Path, store: &Path) -> (Guard, String) {
    start_coordinator_with(listen, spec, store, &[])
}

/// Like [`start_coordinator_on`] with extra flags.
pub fn start_coordinator_with(listen: &str, spec: &Path, store: &Path, extra: &[&str]) -> (Guard, String) {
    let mut child = codesweep()
        .args(["coordinator", "--listen", listen, "--heartbeat-seconds", "0.2", "--exit-when-done"])
        .args(["--store", store.to_str().unwrap(), "--submit", spec.to_str().unwrap()])
        .args(extra)
        .env("CODESWEEP_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let address = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}")).to_string();
    (Guard(child), address)
}

/// A worker process with warnings on stderr.
pub fn start_worker(address: &str, name: &str) -> Guard {
    Guard(
        codesweep()
            .args(["worker", "--coordinator", address, "--name", name])
            .env("CODESWEEP_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    )
}

/// A worker process whose info-level log (one `shard started` line per execution) goes to `log`.
pub fn start_logged_worker(address: &str, name: &str, log: &Path) -> Guard {
    Guard(
        codesweep()
            .args(["worker", "--coordinator", address, "--name", name, "--reconnect-seconds", "60"])
            .env("CODESWEEP_TOKEN", TOKEN)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

pub fn status(address: &str, run: &str) -> String {
    let out = codesweep().args(["status", run, "--coordinator", address]).env("CODESWEEP_TOKEN", TOKEN).output().unwrap();
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

pub fn wait_for(child: &mut Guard, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "process did not finish within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The report's CrossCodeEval cells and RepoQA rows.
pub fn report_cells(store: &Path, run: &str) -> (Vec<Value>, Vec<Value>) {
    let out = codesweep().args(["report", &format!("{}/{run}", store.display())]).output().unwrap();
    assert!(out.status.success(), "report failed: {}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(store.join(run).join("report/report.json")).unwrap()).unwrap();
    (json["cceval"].as_array().unwrap().clone(), json["repoqa"].as_array().unwrap().clone())
}


/// Runs `codesweep ARGS` to completion.
pub fn run_codesweep(args: &[&str]) -> std::process::Output {
    codesweep().args(args).output().expect("codesweep runs")
}

/// A process output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes `contents` to `path`, creating its folders.
pub fn write(path: &Path, contents: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
}

/// `codesweep serve --port 0 ARGS` in the background; returns it and its OpenAI base URL
/// (`http://…/v1`).
pub fn start_serve(args: &[&str]) -> (Guard, String) {
    let mut child = codesweep()
        .arg("serve")
        .args(args)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}")).to_string();
    (Guard(child), format!("{url}/v1"))
}
