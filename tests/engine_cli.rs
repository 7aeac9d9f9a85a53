//! `codesweep generate` and `codesweep serve` as a user runs them, on tiny real models the tests
//! write; the HTTP backend talks to a real `codesweep serve` process over loopback (completions,
//! chat, embeddings), and through a real flaky HTTP proxy for its retries.

use codesweep_test_support::models as common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Runs `codesweep generate --model MODEL --prompts PROMPTS --max-new-tokens N --out OUT` and `extra`.
fn generate(model: &Path, prompts: &Path, max_new: usize, out: &Path, extra: &[&str]) -> std::process::Output {
    codesweep()
        .args(["generate", "--model", model.to_str().unwrap(), "--prompts", prompts.to_str().unwrap()])
        .args(["--max-new-tokens", &max_new.to_string(), "--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

/// [`generate`], which must succeed: the records it wrote, and its stderr.
fn generate_records(model: &Path, prompts: &Path, max_new: usize, out: &Path, extra: &[&str]) -> (Vec<serde_json::Value>, String) {
    let result = generate(model, prompts, max_new, out, extra);
    let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
    assert!(result.status.success(), "{stderr}");
    let records = std::fs::read_to_string(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (records, stderr)
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
    let (records, stderr) = generate_records(&model, &input, 6, &out, &["--batch-size", "4"]);
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
    assert!(stderr.contains("decode") && stderr.contains("tok/s"), "{stderr}");
}

#[test]
fn generate_names_the_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let input = dir.path().join("prompts.jsonl");
    std::fs::write(&input, "{\"id\": \"a\", \"prompt\": \"def f(\"}\n{\"id\": \"b\"}\n").unwrap();
    let out = dir.path().join("o.jsonl");
    let result = generate(&model, &input, 3, &out, &[]);
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("prompts.jsonl:2") && stderr.contains("prompt"), "{stderr}");
    assert!(!out.exists(), "no output on failure");
    let result = generate(&model, &input, 3, &out, &["--skip-invalid"]);
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
    let missing = dir.path().join("missing.gguf");
    let result = generate(&missing, &input, 3, &out, &["--skip-invalid"]);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success() && stderr.contains("missing.gguf"), "{stderr}");
}

/// `CODESWEEP_KV_CACHE` picks the cache precision (f16 by default, f32 on request); any other
/// value stops the run before it reads the model, naming the variable, the value and the choices.
#[test]
fn kv_cache_setting_is_honoured_or_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let input = dir.path().join("prompts.jsonl");
    write_prompts(&input, &common::code_prompts()[..3]);
    for (value, ok) in [("f32", true), ("f16", true), ("fp8", false)] {
        let out = dir.path().join(format!("{value}.jsonl"));
        let result = codesweep()
            .args(["generate", "--model", model.to_str().unwrap(), "--prompts", input.to_str().unwrap()])
            .args(["--max-new-tokens", "4", "--out", out.to_str().unwrap()])
            .env("CODESWEEP_KV_CACHE", value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.success(), ok, "{value}: {stderr}");
        if ok {
            assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 3, "{value}");
        } else {
            assert!(stderr.contains("CODESWEEP_KV_CACHE") && stderr.contains("`fp8`") && stderr.contains("`f32`"), "{stderr}");
            assert!(!out.exists(), "no output on failure");
        }
    }
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

/// Sixteen real prompts sent to `codesweep serve` all at once (batched as they arrive) come back
/// exactly as `codesweep generate --batch-size 1` writes them: same text, token counts and
/// log-probabilities, bit for bit.
#[test]
fn serve_with_concurrent_requests_equals_generate_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let prompts = common::sixteen_code_prompts();
    let input = dir.path().join("prompts.jsonl");
    write_prompts(&input, &prompts);
    let out = dir.path().join("alone.jsonl");
    let (alone, _) = generate_records(&model, &input, 12, &out, &["--batch-size", "1"]);
    assert_eq!(alone.len(), 16);

    let server = serve(&model, &["--batch-size", "16"], &[]);
    let mut backend = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, None);
    backend.concurrency = 16;
    let requests: Vec<Request> = prompts.iter().enumerate().map(|(i, p)| Request::greedy(format!("t{i}"), p.clone(), 12)).collect();
    let served = backend.generate(&requests, |_| {}).unwrap();
    for (one, got) in alone.iter().zip(&served.completions) {
        assert_eq!(one["id"], got.id.as_str());
        assert_eq!(one["completion"], got.text.as_str(), "{}", got.id);
        assert_eq!(one["prompt_tokens"], got.prompt_tokens, "{}", got.id);
        assert_eq!(one["generated_tokens"], got.generated_tokens, "{}", got.id);
        assert_eq!(one["mean_logprob"].as_f64().unwrap().to_bits(), got.mean_logprob.to_bits(), "{}", got.id);
    }
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

fn texts_to_embed() -> Vec<String> {
    let mut t = common::code_prompts();
    t.push("fn main() {}".into());
    t.push(common::code_corpus()[6].chars().take(1500).collect());
    t
}

#[test]
fn serve_embeddings_equal_the_local_embedder() {
    use common::encoder::{self as enc, EncoderArch};
    use codesweep_engine::{Embedder, EmbedderOptions};
    let dir = tempfile::tempdir().unwrap();
    let texts = texts_to_embed();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    // An encoder as --model: the server embeds only.
    let bert = enc::write_encoder(dir.path(), EncoderArch::Bert, &enc::wordpiece_tokenizer_json(400));
    let server = serve(&bert, &[], &[]);
    let mut backend = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, None);
    backend.max_retries = 0;
    let remote = backend.embed(&refs).unwrap();
    let local = Embedder::load(&bert, &Device::Cpu, EmbedderOptions::default()).unwrap().embed(&refs).unwrap();
    assert_eq!(remote, local, "embeddings must survive JSON exactly");
    let err = backend.generate(&[Request::greedy("c", "def f(", 3)], |_| {}).unwrap_err().to_string();
    assert!(err.contains("HTTP 400") && err.contains("/v1/embeddings"), "{err}");

    // A generator with --embedder beside it, normalised and truncated embeddings.
    let roberta = enc::write_encoder(dir.path(), EncoderArch::Roberta, &enc::roberta_tokenizer_json(400));
    let model = tiny_model(dir.path());
    let extra = ["--embedder", roberta.to_str().unwrap(), "--normalize-embeddings", "--embed-max-length", "16", "--embed-batch-size", "3"];
    let server = serve(&model, &extra, &[]);
    let mut backend = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, None);
    backend.max_retries = 0;
    let options = EmbedderOptions { max_length: 16, batch_size: 5, normalize: true, dtype: None };
    let local = Embedder::load(&roberta, &Device::Cpu, options).unwrap().embed(&refs).unwrap();
    let remote = backend.embed(&refs).unwrap();
    assert_eq!(remote.len(), local.len());
    for (r, l) in remote.iter().zip(&local) {
        let d = r.iter().zip(l).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        // Different batch sizes on each side: equal up to float reassociation.
        assert!(d <= 1e-5, "remote and local differ by {d}");
    }
    assert_eq!(backend.generate(&[Request::greedy("c", "def f(", 3)], |_| {}).unwrap().completions.len(), 1);
    // This model has no chat template: chat is refused with a reason.
    let mut chat = HttpBackend::new(&server.url, "tiny", Endpoint::Chat, None);
    chat.max_retries = 0;
    let err = chat.generate(&[Request::greedy("c", "hi", 3)], |_| {}).unwrap_err().to_string();
    assert!(err.contains("HTTP 400") && err.contains("no chat template"), "{err}");
}

/// A ChatML template in Qwen2.5's shape, with its own default system message.

#[test]
fn chat_completions_equal_local_generation_on_the_chatml_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = common::trained_tokenizer_json(400);
    let model = common::write_gguf_chat(dir.path(), common::Arch::Qwen2, GgmlDType::Q8_0, &tokenizer, common::CHATML);
    let server = serve(&model, &["--batch-size", "3"], &[]);
    let prompts = common::code_prompts();
    let requests: Vec<Request> = prompts.iter().enumerate().map(|(i, p)| Request::greedy(format!("c{i}"), p.clone(), 8)).collect();
    let backend = HttpBackend::new(&server.url, "tiny", Endpoint::Chat, None);
    let remote = backend.generate(&requests, |_| {}).unwrap();
    let local = Model::load(&model, &Device::Cpu, None).unwrap();
    // The ChatML prompt, written out by hand.
    let formatted: Vec<Request> = requests
        .iter()
        .map(|r| Request {
            prompt: format!("<|im_start|>system\nYou write code.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n", r.prompt),
            ..r.clone()
        })
        .collect();
    assert_eq!(local.tokenizer.tokenize("<|im_start|>").unwrap().len(), 1, "ChatML markers are single tokens");
    let expected = Generator::new(&local, GenerateOptions::default()).generate(&formatted, |_| {}).unwrap();
    assert_eq!(remote.completions.len(), expected.completions.len());
    assert!(expected.completions.iter().any(|c| !c.text.is_empty()));
    for (r, e) in remote.completions.iter().zip(&expected.completions) {
        assert_eq!(r.text, e.text, "request {}", e.id);
        assert_eq!(r.prompt_tokens, e.prompt_tokens);
        assert!((r.mean_logprob - e.mean_logprob).abs() < 1e-9, "{} vs {}", r.mean_logprob, e.mean_logprob);
    }

    // A template that is neither ChatML nor Gemma's is refused with a clear 400.
    let llama2 = common::write_gguf_chat(dir.path(), common::Arch::Llama, GgmlDType::Q8_0, &tokenizer, "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}");
    let server = serve(&llama2, &[], &[]);
    let mut chat = HttpBackend::new(&server.url, "tiny", Endpoint::Chat, None);
    chat.max_retries = 0;
    let err = chat.generate(&requests[..1], |_| {}).unwrap_err().to_string();
    assert!(err.contains("HTTP 400") && err.contains("neither ChatML"), "{err}");
}

/// A real HTTP server in front of `upstream` that answers the first requests with the given
/// statuses and forwards the rest, counting every attempt.
struct FlakyProxy {
    server: Arc<tiny_http::Server>,
    url: String,
    attempts: Arc<AtomicUsize>,
}

impl Drop for FlakyProxy {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

fn flaky_proxy(upstream: &str, failures: Vec<u16>) -> FlakyProxy {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let attempts = Arc::new(AtomicUsize::new(0));
    let (s, a, upstream) = (server.clone(), attempts.clone(), upstream.trim_end_matches("/v1").to_string());
    std::thread::spawn(move || {
        while let Ok(mut rq) = s.recv() {
            let n = a.fetch_add(1, Ordering::SeqCst);
            let mut body = String::new();
            rq.as_reader().read_to_string(&mut body).unwrap();
            let (status, text) = match failures.get(n) {
                Some(&status) => (status, format!("{{\"error\": {{\"message\": \"injected {status}\"}}}}")),
                None => {
                    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
                    let mut resp = agent.post(&format!("{upstream}{}", rq.url())).header("content-type", "application/json").send(body.as_bytes()).unwrap();
                    (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap())
                }
            };
            let _ = rq.respond(tiny_http::Response::from_string(text).with_status_code(status));
        }
    });
    FlakyProxy { server, url, attempts }
}

#[test]
fn http_backend_retries_429_and_5xx_with_backoff_but_not_400() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let server = serve(&model, &[], &[]);
    let req = [Request::greedy("r", "fn retry_me(", 6)];
    let direct = HttpBackend::new(&server.url, "tiny", Endpoint::Completions, None).generate(&req, |_| {}).unwrap();
    let backend = |url: &str, retries: u32| {
        let mut b = HttpBackend::new(url, "tiny", Endpoint::Completions, None);
        b.max_retries = retries;
        b.backoff = Duration::from_millis(60);
        b
    };

    // 503 twice, then the real server: three attempts, 60 + 120 ms of backoff, the same answer.
    let proxy = flaky_proxy(&server.url, vec![503, 503]);
    let started = Instant::now();
    let got = backend(&proxy.url, 3).generate(&req, |_| {}).unwrap();
    assert_eq!(proxy.attempts.load(Ordering::SeqCst), 3);
    assert!(started.elapsed() >= Duration::from_millis(180), "backoff too short: {:?}", started.elapsed());
    assert_eq!(got.completions[0].text, direct.completions[0].text);

    // 429 is retried like a 5xx.
    let proxy = flaky_proxy(&server.url, vec![429]);
    assert_eq!(backend(&proxy.url, 3).generate(&req, |_| {}).unwrap().completions[0].text, direct.completions[0].text);
    assert_eq!(proxy.attempts.load(Ordering::SeqCst), 2);

    // Out of retries: the error says how many attempts and what the last one got.
    let proxy = flaky_proxy(&server.url, vec![502, 503, 500]);
    let err = backend(&proxy.url, 1).generate(&req, |_| {}).unwrap_err().to_string();
    assert!(err.contains("gave up after 2 attempts") && err.contains("HTTP 503"), "{err}");
    assert_eq!(proxy.attempts.load(Ordering::SeqCst), 2);

    // A 400 is the client's fault: one attempt, the server's message passed on.
    let proxy = flaky_proxy(&server.url, vec![400]);
    let err = backend(&proxy.url, 3).generate(&req, |_| {}).unwrap_err().to_string();
    assert!(err.contains("HTTP 400") && err.contains("injected 400"), "{err}");
    assert_eq!(proxy.attempts.load(Ordering::SeqCst), 1);
}

/// POSTs a raw body; returns the status and the JSON answer.
fn post_raw(url: &str, body: &[u8]) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.post(url).header("content-type", "application/json").send(body).unwrap();
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
}

#[test]
fn serve_refuses_requests_that_would_hold_it_and_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let server = serve(&model, &["--max-n", "4", "--max-body-mib", "1"], &[]);
    let completions = format!("{}/completions", server.url);
    let message = |answer: &serde_json::Value| answer["error"]["message"].as_str().unwrap_or_default().to_string();
    let refused = [
        (r#"{"prompt": "def f(", "max_tokens": -1}"#.to_string(), "`max_tokens` must be a positive integer"),
        (r#"{"prompt": "def f(", "max_tokens": 0}"#.to_string(), "`max_tokens` must be a positive integer"),
        (r#"{"prompt": "def f(", "max_tokens": 1000000000}"#.to_string(), "maximum context length"),
        (r#"{"prompt": "def f(", "n": 1000, "temperature": 1.0}"#.to_string(), "`n` is 1000"),
        (format!(r#"{{"prompt": "def f(", "stop": {}}}"#, serde_json::json!((0..1000).map(|i| format!("s{i}")).collect::<Vec<_>>())), "1000 strings"),
        (r#"{"prompt": "def f(", "#.to_string(), "the body is not JSON"),
        (format!(r#"{{"prompt": "{}", "max_tokens": 4}}"#, "x = 1\\n".repeat(20_000)), "maximum context length"),
    ];
    for (body, expected) in &refused {
        let (status, answer) = post_raw(&completions, body.as_bytes());
        assert_eq!(status, 400, "{expected}: {answer}");
        assert!(message(&answer).contains(expected), "{expected}: {answer}");
    }
    // Over the body limit: refused unread.
    let (status, answer) = post_raw(&completions, format!(r#"{{"prompt": "{}"}}"#, "a".repeat(2 << 20)).as_bytes());
    assert_eq!(status, 413, "{answer}");
    // Invalid UTF-8 is named, not a crash.
    let (status, answer) = post_raw(&completions, b"{\"prompt\": \"\xff\xfe\"}");
    assert!(status == 400 && message(&answer).contains("not UTF-8"), "{answer}");
    // A lone surrogate, as Python's json module sends it, reads as U+FFFD.
    let (status, answer) = post_raw(&completions, br#"{"prompt": "def f(\ud800", "max_tokens": 2, "temperature": 0}"#);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["usage"]["completion_tokens"].as_u64().map(|n| n <= 2), Some(true), "{answer}");
    // Many concurrent requests: every one is answered, and the server is still up after.
    let answered: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..64)
            .map(|i| {
                let url = completions.clone();
                scope.spawn(move || post_raw(&url, format!(r#"{{"prompt": "def f{i}(", "max_tokens": 2, "temperature": 0}}"#).as_bytes()).0)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(answered.iter().all(|&s| s == 200), "{answered:?}");
    let (status, _) = post_raw(&completions, br#"{"prompt": "def g(", "max_tokens": 2, "temperature": 0}"#);
    assert_eq!(status, 200);
}
