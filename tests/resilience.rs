//! What a cluster survives, with real processes over loopback gRPC: a coordinator killed and
//! restarted mid-run (workers keep their shards and reconnect; nothing finished is redone), a
//! corrupt data record (only its shard fails, the report lists it), `codesweep cancel`, and
//! a second coordinator on a held run (refused until the holder's hold lapses).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

/// A one-model CrossCodeEval spec (Python and Java, in-file and BM25) with small shards.
fn write_spec(dir: &Path, name: &str, store: &Path, data: &Path, model: &Path, shard_size: usize) -> PathBuf {
    let spec = format!(
        r#"[run]
name = "{name}"
store = "{store}"
shard_size = {shard_size}
lease_ttl_seconds = 3.0
retry_backoff_seconds = 0.1

[[models]]
name = "tiny-qwen2"
path = "{model}"
parameters = 1e6

[generation]
max_new_tokens = 16
batch_size = 2
{budgets}

[cceval]
data_dir = "{data}"
"#,
        store = store.display(),
        budgets = TINY_BUDGETS,
        model = model.display(),
        data = data.display()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, spec).unwrap();
    path
}

/// Result objects in a filesystem store, as shard ids.
fn finished_shards(store: &Path, run: &str) -> BTreeSet<String> {
    let root = store.join(run).join("shards");
    let mut found = BTreeSet::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Some(id) = path.strip_prefix(&root).ok().and_then(|p| p.to_str()).and_then(|p| p.strip_suffix(".jsonl")) {
                found.insert(id.to_string());
            }
        }
    }
    found
}

/// Drops ANSI escape sequences from a log.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// How many times each shard was started, from the workers' `shard started` log lines.
fn executions(logs: &[PathBuf]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for log in logs {
        let text = strip_ansi(&std::fs::read_to_string(log).unwrap());
        for line in text.lines().filter(|l| l.contains("shard started")) {
            let shard = line.split_whitespace().find_map(|w| w.strip_prefix("shard=")).unwrap_or_else(|| panic!("no shard in {line:?}"));
            *counts.entry(shard.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

fn wait_until_done(address: &str, run: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let text = status(address, run);
        if text.contains(": succeeded") || text.contains("failed —") || text.contains(": cancelled") {
            return text;
        }
        assert!(Instant::now() < deadline, "run did not finish: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_restarted_coordinator_finishes_the_run_without_redoing_finished_shards() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let (model, _) = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), "restart", &store, &data, &model, 2);
    // 1 model × 2 languages × (in_file, rg1_bm25) × 10 examples / 2 per shard.
    let total_shards = 20;

    let (mut first, address) = start_coordinator(&spec, &store);
    let logs: Vec<PathBuf> = (0..2).map(|i| dir.path().join(format!("worker{i}.log"))).collect();
    let mut workers: Vec<Guard> =
        logs.iter().enumerate().map(|(i, log)| start_logged_worker(&address, &format!("w{i}"), log)).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while finished_shards(&store, "restart").len() < 3 {
        assert!(Instant::now() < deadline, "no shard finished: {}", status(&address, "restart"));
        std::thread::sleep(Duration::from_millis(10));
    }
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let finished_before = finished_shards(&store, "restart");
    assert!(finished_before.len() < total_shards, "the run ended before the coordinator was killed");
    // The workers keep running (and retrying) while no coordinator is up.
    std::thread::sleep(Duration::from_millis(800));
    for worker in &mut workers {
        assert!(worker.0.try_wait().unwrap().is_none(), "a worker gave up while the coordinator was down");
    }

    let listen = address.strip_prefix("http://").unwrap();
    let (mut second, again) = start_coordinator_on(listen, &spec, &store);
    assert_eq!(again, address);
    let text = wait_until_done(&address, "restart", Duration::from_secs(180));
    assert!(text.contains(&format!("shards {total_shards}/{total_shards} done")), "{text}");
    for worker in &mut workers {
        assert!(wait_for(worker, Duration::from_secs(30)).success(), "a worker did not exit cleanly");
    }
    assert!(wait_for(&mut second, Duration::from_secs(30)).success(), "the restarted coordinator did not exit when done");

    // Every shard ran exactly once: finished ones were not redone, and the ones running during
    // the restart were adopted by the new coordinator rather than given to another worker.
    let runs = executions(&logs);
    assert_eq!(runs.len(), total_shards, "{runs:?}");
    for shard in &finished_before {
        assert_eq!(runs.get(shard), Some(&1), "finished shard {shard} was run again: {runs:?}");
    }
    assert!(runs.values().all(|&n| n == 1), "a shard ran more than once: {runs:?}");
    let (cells, _) = report_cells(&store, "restart");
    assert_eq!(cells.len(), 4);
    for cell in &cells {
        assert_eq!((cell["examples"].as_u64(), cell["planned"].as_u64()), (Some(10), Some(10)), "{cell}");
    }
}

#[test]
fn a_corrupt_record_fails_only_its_shard_and_the_report_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    // Break the third Python record of the in-file setting's file (the BM25 file stays intact).
    let file = data.join("python/line_completion_rg1_bm25.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    std::fs::write(data.join("python/line_completion.jsonl"), {
        let mut broken = lines.clone();
        broken[2] = broken[2].chars().take(40).collect();
        broken.join("\n") + "\n"
    })
    .unwrap();
    // And drop the prompt of the fifth Java record.
    let java = data.join("java/line_completion_rg1_bm25.jsonl");
    lines = std::fs::read_to_string(&java).unwrap().lines().map(str::to_string).collect();
    let mut record: Value = serde_json::from_str(&lines[4]).unwrap();
    record.as_object_mut().unwrap().remove("prompt");
    lines[4] = record.to_string();
    std::fs::write(&java, lines.join("\n") + "\n").unwrap();
    let (model, _) = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), "corrupt", &store, &data, &model, 4);

    let out = codesweep().args(["run", spec.to_str().unwrap(), "--quiet"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "a run with failed shards must exit 3: {stderr}");
    assert!(stdout.contains("## Failed shards"), "{stdout}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(store.join("corrupt/report/report.json")).unwrap()).unwrap();
    let failures = json["failures"].as_array().unwrap();
    let ids: Vec<&str> = failures.iter().map(|f| f["shard_id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["tiny-qwen2/cceval/java/in_file/0001", "tiny-qwen2/cceval/java/rg1_bm25/0001", "tiny-qwen2/cceval/python/in_file/0000"]
    );
    let python = failures[2]["error"].as_str().unwrap();
    assert!(python.contains("line_completion.jsonl:3: malformed JSON"), "{python}");
    let java_error = failures[0]["error"].as_str().unwrap();
    assert!(java_error.contains("line_completion_rg1_bm25.jsonl:5: field `prompt`"), "{java_error}");
    // Bad input is not retried.
    assert!(failures.iter().all(|f| f["attempts"] == 1), "{failures:?}");
    // Every other shard finished: the cells hold all examples but the failed shards'.
    for cell in json["cceval"].as_array().unwrap() {
        let expected = match (cell["language"].as_str().unwrap(), cell["setting"].as_str().unwrap()) {
            ("python", "in_file") => 6,
            ("java", _) => 6,
            _ => 10,
        };
        assert_eq!(cell["examples"], expected, "{cell}");
        assert_eq!(cell["planned"], 10, "{cell}");
    }

    // A stored result damaged after the run: `report` and `rescore` name it, never count twice.
    let result = store.join("corrupt/shards/tiny-qwen2/cceval/python/rg1_bm25/0000.jsonl");
    let intact = std::fs::read_to_string(&result).unwrap();
    let last = intact.lines().last().unwrap().to_string();
    let tables = |command: &str| {
        let out = codesweep().args([command, &format!("{}/corrupt", store.display())]).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    std::fs::write(&result, format!("{intact}{last}\n")).unwrap();
    for command in ["report", "rescore"] {
        let (ok, stderr) = tables(command);
        assert!(!ok, "{command} accepted a result with a task twice");
        assert!(stderr.contains("python/rg1_bm25/0000.jsonl") && stderr.contains("appears twice"), "{command}: {stderr}");
    }
    std::fs::write(&result, &intact[..intact.len() - last.len() / 2 - 1]).unwrap();
    for command in ["report", "rescore"] {
        let (ok, stderr) = tables(command);
        assert!(!ok, "{command} accepted a truncated result");
        assert!(stderr.contains("python/rg1_bm25/0000.jsonl, line"), "{command}: {stderr}");
    }
    std::fs::write(&result, &intact).unwrap();
    assert!(tables("rescore").0, "rescore of the restored result failed");
}

#[test]
fn cancel_stops_a_run_and_its_workers() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let (model, _) = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), "doomed", &store, &data, &model, 2);
    let (mut coordinator, address) = start_coordinator(&spec, &store);

    let cancel = |run: &str| {
        codesweep().args(["cancel", run, "--coordinator", &address]).env("CODESWEEP_TOKEN", TOKEN).output().unwrap()
    };
    let unknown = cancel("nope");
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("has no run \"nope\""));
    let out = cancel("doomed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("run doomed cancelled"));
    assert!(status(&address, "doomed").contains("run doomed: cancelled"));
    // A worker joining now gets nothing and is told to exit; so does the coordinator.
    let mut worker = start_worker(&address, "late");
    assert!(wait_for(&mut worker, Duration::from_secs(30)).success());
    // Stopped before the end: the batch job must not look successful.
    assert_eq!(wait_for(&mut coordinator, Duration::from_secs(30)).code(), Some(4));
    assert!(finished_shards(&store, "doomed").is_empty(), "a cancelled run's shards were run");
}

#[test]
fn a_batch_coordinator_exits_3_when_shards_failed_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    // Poison the third record of the Python in-file data.
    let bm25 = std::fs::read_to_string(data.join("python/line_completion_rg1_bm25.jsonl")).unwrap();
    let mut lines: Vec<String> = bm25.lines().map(str::to_string).collect();
    lines[2] = lines[2].chars().take(40).collect();
    std::fs::write(data.join("python/line_completion.jsonl"), lines.join("\n") + "\n").unwrap();
    let (model, _) = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), "poisoned", &store, &data, &model, 4);
    let (mut coordinator, address) = start_coordinator(&spec, &store);
    let mut worker = start_worker(&address, "w");
    assert!(wait_for(&mut worker, Duration::from_secs(180)).success(), "the worker did not exit 0 at the end");
    assert_eq!(wait_for(&mut coordinator, Duration::from_secs(60)).code(), Some(3), "shards failed for good: exit 3");
    // The coordinator wrote the report itself, with the failed shard and its error.
    let json: Value = serde_json::from_str(&std::fs::read_to_string(store.join("poisoned/report/report.json")).unwrap()).unwrap();
    let failures = json["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["shard_id"], "tiny-qwen2/cceval/python/in_file/0000");
    assert!(failures[0]["error"].as_str().unwrap().contains("line_completion.jsonl:3: malformed JSON"), "{failures:?}");
    assert!(store.join("poisoned/report/report.md").is_file());
}

#[test]
fn a_worker_asked_for_a_device_it_lacks_exits_78_before_leasing() {
    // Nothing listens on the coordinator's address: the check comes before any connection.
    for device in ["cuda:0", "tpu"] {
        let out = codesweep()
            .args(["worker", "--coordinator", "http://127.0.0.1:9", "--device", device, "--connect-timeout", "30"])
            .env("CODESWEEP_TOKEN", TOKEN)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{device}: {stderr}");
        assert!(stderr.contains(&format!("--device {device}")) && stderr.contains("leases nothing"), "{stderr}");
    }
}

/// A coordinator submitting `spec` as host `host` (the pod name on Kubernetes), holding its
/// runs for `hold` seconds, with its info log as JSON lines in `log`.
fn start_held_coordinator(host: &str, hold: &str, spec: &Path, store: &Path, log: &Path) -> (Guard, String) {
    let mut child = codesweep()
        .args(["coordinator", "--listen", "127.0.0.1:0", "--heartbeat-seconds", "0.2", "--exit-when-done"])
        .args(["--store", store.to_str().unwrap(), "--submit", spec.to_str().unwrap()])
        .args(["--hold-seconds", hold, "--log-format", "json"])
        .env("CODESWEEP_TOKEN", TOKEN)
        .env("HOSTNAME", host)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let address = line.trim().strip_prefix("listening on ").unwrap_or_default().to_string();
    (Guard(child), address)
}

/// A coordinator that should refuse to start: its exit status and stderr.
fn refused_coordinator(host: &str, spec: &Path, store: &Path) -> (Option<i32>, String) {
    let out = codesweep()
        .args(["coordinator", "--listen", "127.0.0.1:0", "--exit-when-done", "--hold-seconds", "3"])
        .args(["--store", store.to_str().unwrap(), "--submit", spec.to_str().unwrap()])
        .env("CODESWEEP_TOKEN", TOKEN)
        .env("HOSTNAME", host)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn one_coordinator_holds_a_run_and_another_takes_it_over_only_after_the_hold_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let (model, _) = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), "held", &store, &data, &model, 2);
    let first_log = dir.path().join("first.log");
    let (mut first, address) = start_held_coordinator("pod-a", "4", &spec, &store, &first_log);
    let worker_log = dir.path().join("worker.log");
    // Not a terminal and no NO_COLOR: the worker's text log must still carry no colour codes.
    let mut worker = Guard(
        codesweep()
            .args(["worker", "--coordinator", &address, "--name", "w"])
            .env("CODESWEEP_TOKEN", TOKEN)
            .env("RUST_LOG", "info")
            .env_remove("NO_COLOR")
            .stderr(std::fs::File::create(&worker_log).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while finished_shards(&store, "held").is_empty() {
        assert!(Instant::now() < deadline, "no shard finished: {}", status(&address, "held"));
        std::thread::sleep(Duration::from_millis(10));
    }

    // A second coordinator (another pod) on the same store and run refuses, naming the holder.
    let (code, stderr) = refused_coordinator("pod-b", &spec, &store);
    assert_eq!(code, Some(1), "{stderr}");
    let pid = first.0.id();
    let holder = format!("{} on host pod-a (pid {pid})", address.strip_prefix("http://").unwrap());
    assert!(stderr.contains(&format!("run \"held\" is served by the coordinator at {holder}")), "{stderr}");
    assert!(first.0.try_wait().unwrap().is_none(), "the refusal disturbed the holder");

    // The holder and its worker die at once (a lost node): the hold stays until it lapses.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    worker.0.kill().unwrap();
    worker.0.wait().unwrap();
    let killed_at = Instant::now();
    let (code, stderr) = refused_coordinator("pod-b", &spec, &store);
    assert_eq!(code, Some(1), "taken over {:?} after the kill, before the hold lapsed: {stderr}", killed_at.elapsed());
    assert!(stderr.contains("lapses in"), "{stderr}");

    std::thread::sleep(Duration::from_millis(4_500).saturating_sub(killed_at.elapsed()));
    let (mut second, address) = start_held_coordinator("pod-b", "4", &spec, &store, &dir.path().join("second.log"));
    let mut worker = start_worker(&address, "w2");
    let text = wait_until_done(&address, "held", Duration::from_secs(180));
    assert!(text.contains("shards 20/20 done"), "{text}");
    assert!(wait_for(&mut worker, Duration::from_secs(30)).success());
    assert!(wait_for(&mut second, Duration::from_secs(30)).success(), "the coordinator that took over did not exit 0");
    // A clean exit gives the hold up.
    assert!(!store.join("held/coordinator.json").exists(), "the hold outlived its run");
    let (cells, _) = report_cells(&store, "held");
    for cell in &cells {
        assert_eq!((cell["examples"].as_u64(), cell["planned"].as_u64()), (Some(10), Some(10)), "{cell}");
    }

    // Logs for collectors: JSON lines from the coordinator, no ANSI codes off a terminal.
    let json_log = std::fs::read_to_string(&first_log).unwrap();
    assert!(json_log.lines().count() > 2, "{json_log}");
    for line in json_log.lines() {
        let record: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(record["level"].is_string() && record["fields"].is_object(), "{line}");
    }
    assert!(json_log.contains("took the run's hold"), "{json_log}");
    let text_log = std::fs::read_to_string(&worker_log).unwrap();
    assert!(text_log.contains("shard started") && !text_log.contains('\u{1b}'), "{text_log}");
}
