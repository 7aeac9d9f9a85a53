//! `codesweep serve`: a minimal OpenAI-compatible completions server over the engine.
//!
//! Requests arriving together are batched: HTTP threads hand jobs to one engine thread, which
//! takes every job waiting and generates for all of them at once.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use clap::Args as ClapArgs;
use codesweep_engine::{Completion, GenerateOptions, Generator, Request, Sampling, StopReason};
use serde_json::{json, Value};

use crate::files::ModelArgs;

/// Arguments of `codesweep serve`.
#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one; the chosen port is printed).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Name reported by /v1/models and accepted in requests (default: the model file name).
    #[arg(long)]
    served_name: Option<String>,
    /// Most sequences decoded together.
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    /// Environment variable holding the API key clients must send as `Authorization: Bearer …`.
    #[arg(long)]
    api_key_env: Option<String>,
}

struct Job {
    requests: Vec<Request>,
    reply: mpsc::Sender<Result<Vec<Completion>, String>>,
}

/// Runs the server until the process is stopped.
pub fn run(args: Args) -> Result<()> {
    let model = args.model.load()?;
    let name = args.served_name.clone().unwrap_or_else(|| {
        args.model.model.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "model".into())
    });
    let api_key = match &args.api_key_env {
        Some(var) => Some(std::env::var(var).with_context(|| format!("--api-key-env {var}: the variable is not set"))?),
        None => None,
    };
    let server = tiny_http::Server::http((args.host.as_str(), args.port))
        .map_err(|e| anyhow!("cannot listen on {}:{}: {e}", args.host, args.port))?;
    let addr = server.server_addr().to_ip().context("the server has no IP address")?;
    // Machine-readable first line, for scripts and tests that start the server on port 0.
    println!("listening on http://{addr}");
    eprintln!("serving {name} ({}) at http://{addr}/v1", model.config.architecture.name());
    let server = Arc::new(server);
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
    for _ in 0..4 {
        let server = server.clone();
        let jobs_tx = jobs_tx.clone();
        let name = name.clone();
        let api_key = api_key.clone();
        std::thread::spawn(move || {
            while let Ok(rq) = server.recv() {
                handle(rq, &jobs_tx, &name, api_key.as_deref());
            }
        });
    }
    drop(jobs_tx);
    let options = GenerateOptions { batch_size: args.batch_size.max(1), ..GenerateOptions::default() };
    let generator = Generator::new(&model, options);
    while let Ok(first) = jobs_rx.recv() {
        let mut jobs = vec![first];
        while let Ok(more) = jobs_rx.try_recv() {
            jobs.push(more);
        }
        // Ids stay as the client's prompt indices, so seeded samples do not depend on which
        // other requests share the batch; completions come back in request order, n per request.
        let all: Vec<Request> = jobs.iter().flat_map(|job| job.requests.iter().cloned()).collect();
        match generator.generate(&all, |_| {}) {
            Ok(generation) => {
                let mut completions = generation.completions.into_iter();
                for job in jobs {
                    let count: usize = job.requests.iter().map(|r| r.n.max(1)).sum();
                    let _ = job.reply.send(Ok(completions.by_ref().take(count).collect()));
                }
            }
            Err(e) => {
                for job in jobs {
                    let _ = job.reply.send(Err(e.to_string()));
                }
            }
        }
    }
    Ok(())
}

fn respond(rq: tiny_http::Request, status: u16, body: Value) {
    let header = tiny_http::Header::from_bytes("content-type", "application/json").ok();
    let mut resp = tiny_http::Response::from_string(body.to_string()).with_status_code(status);
    if let Some(h) = header {
        resp = resp.with_header(h);
    }
    let _ = rq.respond(resp);
}

fn error(rq: tiny_http::Request, status: u16, message: &str) {
    respond(rq, status, json!({"error": {"message": message, "type": "invalid_request_error"}}));
}

/// Constant-time comparison, so the key cannot be guessed byte by byte from timings.
fn same_key(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn handle(mut rq: tiny_http::Request, jobs: &mpsc::Sender<Job>, name: &str, api_key: Option<&str>) {
    if let Some(key) = api_key {
        let sent = rq.headers().iter().find(|h| h.field.equiv("authorization")).map(|h| h.value.as_str().to_string());
        let ok = sent.as_deref().and_then(|v| v.strip_prefix("Bearer ")).is_some_and(|v| same_key(v.as_bytes(), key.as_bytes()));
        if !ok {
            return error(rq, 401, "missing or wrong API key");
        }
    }
    let url = rq.url().to_string();
    match (rq.method().as_str(), url.as_str()) {
        ("GET", "/health") => respond(rq, 200, json!({"status": "ok"})),
        ("GET", "/v1/models") => respond(rq, 200, json!({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "codesweep"}]})),
        ("POST", "/v1/completions") => {
            let mut body = String::new();
            if std::io::Read::read_to_string(rq.as_reader(), &mut body).is_err() {
                return error(rq, 400, "the body is not UTF-8");
            }
            let requests = match parse_completion_request(&body) {
                Ok(r) => r,
                Err(m) => return error(rq, 400, &m),
            };
            let (tx, rx) = mpsc::channel();
            if jobs.send(Job { requests, reply: tx }).is_err() {
                return error(rq, 503, "the engine has stopped");
            }
            match rx.recv() {
                Ok(Ok(cs)) => respond(rq, 200, completion_response(name, &cs)),
                Ok(Err(m)) => error(rq, 400, &m),
                Err(_) => error(rq, 500, "the engine failed"),
            }
        }
        _ => error(rq, 404, &format!("no route for {url}; this server has POST /v1/completions, GET /v1/models, GET /health")),
    }
}

fn parse_completion_request(body: &str) -> Result<Vec<Request>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let prompts: Vec<String> = match &v["prompt"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|p| p.as_str().map(str::to_string).ok_or("`prompt` must be a string or a list of strings")).collect::<Result<_, _>>()?,
        _ => return Err("`prompt` must be a string or a list of strings".into()),
    };
    let max_tokens = v["max_tokens"].as_u64().unwrap_or(16) as usize;
    let temperature = v["temperature"].as_f64().unwrap_or(1.0);
    let top_p = v["top_p"].as_f64().unwrap_or(1.0);
    let n = v["n"].as_u64().unwrap_or(1).max(1) as usize;
    let seed = v["seed"].as_u64().unwrap_or(0);
    let stop: Vec<String> = match &v["stop"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    };
    if temperature < 0.0 {
        return Err("`temperature` must be ≥ 0".into());
    }
    let sampling = if temperature == 0.0 { Sampling::Greedy } else { Sampling::Nucleus { temperature, top_p, seed } };
    if sampling == Sampling::Greedy && n > 1 {
        return Err("`n` > 1 needs `temperature` > 0".into());
    }
    Ok(prompts
        .into_iter()
        .enumerate()
        .map(|(i, p)| Request { stop: stop.clone(), sampling, n, ..Request::greedy(i.to_string(), p, max_tokens) })
        .collect())
}

fn completion_response(name: &str, cs: &[Completion]) -> Value {
    let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let choices: Vec<Value> = cs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"index": i, "text": c.text,
                   "finish_reason": if c.stop_reason == StopReason::Length { "length" } else { "stop" },
                   "logprobs": {"token_logprobs": c.token_logprobs}})
        })
        .collect();
    let prompt_tokens: usize = cs.iter().filter(|c| c.sample == 0).map(|c| c.prompt_tokens).sum();
    let completion_tokens: usize = cs.iter().map(|c| c.generated_tokens).sum();
    json!({"id": format!("cmpl-{created}"), "object": "text_completion", "created": created, "model": name,
           "choices": choices,
           "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}})
}
