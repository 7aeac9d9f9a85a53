//! `codesweep generate` and `codesweep serve` as a user runs them, on a tiny real model the test
//! writes; the HTTP backend talks to a real `codesweep serve` process over loopback.

#[path = "../../engine/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use candle_core::quantized::GgmlDType;
use candle_core::Device;
use codesweep_engine::http::{Endpoint, HttpBackend};
use codesweep_engine::{GenerateOptions, Generator, Model, Request, Sampling};

fn tiny_model(dir: &Path) -> PathBuf {
    common::write_gguf(dir, common::Arch::Qwen2, GgmlDType::Q8_0, &common::trained_tokenizer_json(400))
}

fn codesweep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_codesweep"))
}

fn write_prompts(path: &Path, prompts: &[String]) {
    let lines: Vec<String> =
        prompts.iter().enumerate().map(|(i, p)| serde_json::json!({"id": format!("t{i}"), "prompt": p}).to_string()).collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn generate_writes_one_record_per_completion() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let prompts = common::code_prompts();
    let input = dir.path().join("prompts.jsonl");
    write_prompts(&input, &prompts);
    let out = dir.path().join("out/completions.jsonl");
    let result = codesweep()
        .args(["generate", "--model", model.to_str().unwrap(), "--prompts", input.to_str().unwrap()])
        .args(["--max-new-tokens", "6", "--batch-size", "4", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let records: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), prompts.len());
    // Same completions as the library gives, in input order.
    let local = Model::load(&model, &Device::Cpu, None).unwrap();
    let requests: Vec<Request> = prompts.iter().enumerate().map(|(i, p)| Request::greedy(format!("t{i}"), p.clone(), 6)).collect();
    let expected = Generator::new(&local, GenerateOptions::default()).generate(&requests, |_| {}).unwrap();
    for (r, c) in records.iter().zip(&expected.completions) {
        assert_eq!(r["id"], c.id.as_str());
        assert_eq!(r["completion"], c.text.as_str());
        assert_eq!(r["generated_tokens"], c.generated_tokens);
        assert_eq!(r["prompt_tokens"], c.prompt_tokens);
        assert!(["length", "eos"].contains(&r["stop_reason"].as_str().unwrap()));
    }
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("decode") && stderr.contains("tok/s"), "{stderr}");
}

#[test]
fn generate_names_the_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let input = dir.path().join("prompts.jsonl");
    std::fs::write(&input, "{\"id\": \"a\", \"prompt\": \"def f(\"}\n{\"id\": \"b\"}\n").unwrap();
    let out = dir.path().join("o.jsonl");
    let run = |extra: &[&str]| {
        codesweep()
            .args(["generate", "--model", model.to_str().unwrap(), "--prompts", input.to_str().unwrap()])
            .args(["--max-new-tokens", "3", "--out", out.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let result = run(&[]);
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("prompts.jsonl:2") && stderr.contains("prompt"), "{stderr}");
    assert!(!out.exists(), "no output on failure");
    let result = run(&["--skip-invalid"]);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
    let missing = dir.path().join("missing.gguf");
    let result = codesweep()
        .args(["generate", "--model", missing.to_str().unwrap(), "--prompts", input.to_str().unwrap()])
        .args(["--max-new-tokens", "3", "--out", out.to_str().unwrap(), "--skip-invalid"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success() && stderr.contains("missing.gguf"), "{stderr}");
}

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(model: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut cmd = codesweep();
    cmd.args(["serve", "--model", model.to_str().unwrap(), "--port", "0", "--served-name", "tiny"]).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {line:?}")).to_string();
    Server { child, url: format!("{url}/v1") }
}

#[test]
fn http_backend_against_codesweep_serve_equals_local_generation() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let server = serve(&model, &["--batch-size", "4"], &[]);
    let prompts = common::code_prompts();
    let requests: Vec<Request> = prompts.iter().enumerate().map(|(i, p)| Request::greedy(format!("h{i}"), p.clone(), 8)).collect();
    let mut backend = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, None);
    backend.concurrency = 3;
    let remote = backend.generate(&requests, |_| {}).unwrap();
    let local = Model::load(&model, &Device::Cpu, None).unwrap();
    let expected = Generator::new(&local, GenerateOptions::default()).generate(&requests, |_| {}).unwrap();
    assert_eq!(remote.completions.len(), expected.completions.len());
    for (r, e) in remote.completions.iter().zip(&expected.completions) {
        assert_eq!(r.id, e.id);
        assert_eq!(r.text, e.text, "request {}", e.id);
        assert_eq!(r.prompt_tokens, e.prompt_tokens);
        assert!((r.mean_logprob - e.mean_logprob).abs() < 1e-9);
    }
    // Stop strings and seeded samples travel too.
    let text = &expected.completions[2].text;
    if text.chars().count() > 4 {
        let stop: String = text.chars().skip(2).take(2).collect();
        let req = Request { stop: vec![stop.clone()], ..requests[2].clone() };
        let got = backend.generate(std::slice::from_ref(&req), |_| {}).unwrap();
        assert_eq!(got.completions[0].text, text[..text.find(&stop).unwrap()]);
    }
    let sampled = Request { sampling: Sampling::Nucleus { temperature: 1.5, top_p: 0.9, seed: 3 }, n: 2, ..requests[0].clone() };
    let a = backend.generate(std::slice::from_ref(&sampled), |_| {}).unwrap();
    let b = backend.generate(std::slice::from_ref(&sampled), |_| {}).unwrap();
    assert_eq!(a.completions.len(), 2);
    assert_eq!(a.completions.iter().map(|c| &c.text).collect::<Vec<_>>(), b.completions.iter().map(|c| &c.text).collect::<Vec<_>>());
}

#[test]
fn serve_rejects_missing_or_wrong_keys() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let server = serve(&model, &["--api-key-env", "CODESWEEP_TEST_KEY"], &[("CODESWEEP_TEST_KEY", "s3cret-key")]);
    let req = [Request::greedy("k", "def main():", 3)];
    let mut anonymous = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, None);
    anonymous.max_retries = 0;
    let err = anonymous.generate(&req, |_| {}).unwrap_err().to_string();
    assert!(err.contains("HTTP 401"), "{err}");
    std::env::set_var("CODESWEEP_WRONG_KEY", "s3cret-kex");
    let wrong = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, Some("CODESWEEP_WRONG_KEY"));
    let err = wrong.generate(&req, |_| {}).unwrap_err().to_string();
    assert!(err.contains("HTTP 401") && !err.contains("s3cret"), "{err}");
    std::env::set_var("CODESWEEP_RIGHT_KEY", "s3cret-key");
    let right = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, Some("CODESWEEP_RIGHT_KEY"));
    assert!(!format!("{right:?}").contains("s3cret"));
    assert_eq!(right.generate(&req, |_| {}).unwrap().completions.len(), 1);
}
