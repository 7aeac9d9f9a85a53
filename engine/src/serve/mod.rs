//! A minimal OpenAI-compatible server over the engine, the counterpart of [`crate::http`]'s
//! client: completions, chat completions (ChatML templates) and embeddings (BERT-family
//! encoders).
//!
//! Generation requests arriving together are batched: HTTP threads hand jobs to one engine
//! thread, which takes every job waiting and generates for all of them at once. Embedding
//! requests run on the HTTP threads.

mod disconnect;
mod openai;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use disconnect::Connection;
use serde_json::{json, Value};

use crate::error::{EngineError, Result};
use crate::{ChatTemplate, Completion, Embedder, GenerateOptions, Generator, Model, Request, TextTokenizer};

/// What one server serves: a generator, an embedder with its served name, or both.
pub struct Served {
    /// The generator, served under `name`.
    pub generator: Option<Model>,
    /// The embedder and its served name.
    pub embedder: Option<(Arc<Embedder>, String)>,
    /// The generator's served name (`/v1/models`, the `model` field requests may carry).
    pub name: String,
}

/// How the server takes requests.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Most sequences decoded together.
    pub batch_size: usize,
    /// The key clients must send as `Authorization: Bearer …`, if any.
    pub api_key: Option<String>,
    /// Most samples one request may ask for (`n`).
    pub max_n: usize,
    /// Most stop strings one request may carry.
    pub max_stop: usize,
    /// Most prompts in one completions request.
    pub max_prompts: usize,
    /// Largest request body in bytes; a larger one gets a 413 unread.
    pub max_body: usize,
}

/// A bound server, ready to run.
pub struct OpenAiServer {
    server: Arc<tiny_http::Server>,
    address: SocketAddr,
    service: Arc<Service>,
    generator: Option<Model>,
    batch_size: usize,
}

impl OpenAiServer {
    /// Listens on `host:port` (port 0 picks a free one) for `served`.
    pub fn bind(host: &str, port: u16, served: Served, options: ServeOptions) -> Result<Self> {
        let listen_error = |message: String| EngineError::Http { url: format!("http://{host}:{port}"), message };
        let server = tiny_http::Server::http((host, port)).map_err(|e| listen_error(format!("cannot listen: {e}")))?;
        let address = server.server_addr().to_ip().ok_or_else(|| listen_error("the server has no IP address".into()))?;
        let model = served.generator;
        let chat = match model.as_ref().map(|m| m.chat_template.as_deref()) {
            None => Err("this server has no generator; it serves POST /v1/embeddings".to_string()),
            Some(None) => Err("the model has no chat template; send a formatted prompt to /v1/completions".to_string()),
            Some(Some(t)) => ChatTemplate::from_jinja(t).map_err(|e| e.to_string()),
        };
        let limits = openai::Limits {
            context: model.as_ref().map_or(0, |m| m.config.max_positions),
            max_n: options.max_n.max(1),
            max_stop: options.max_stop,
            max_prompts: options.max_prompts.max(1),
        };
        let service = Arc::new(Service {
            generator: model.as_ref().map(|_| served.name.clone()),
            tokenizer: model.as_ref().map(|m| m.tokenizer.clone()),
            chat,
            embedder: served.embedder,
            api_key: options.api_key,
            limits,
            max_body: options.max_body.max(1),
            port: address.port(),
        });
        Ok(Self { server: Arc::new(server), address, service, generator: model, batch_size: options.batch_size.max(1) })
    }

    /// The address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Answers requests until the process is stopped.
    pub fn run(self) {
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let mut handlers = Vec::new();
        for _ in 0..4 {
            let server = self.server.clone();
            let jobs_tx = jobs_tx.clone();
            let service = self.service.clone();
            handlers.push(std::thread::spawn(move || {
                while let Ok(rq) = server.recv() {
                    handle(rq, &jobs_tx, &service);
                }
            }));
        }
        drop(jobs_tx);
        if let Some(model) = &self.generator {
            let options = GenerateOptions { batch_size: self.batch_size, ..GenerateOptions::default() };
            generation_loop(&Generator::new(model, options), &jobs_rx);
        }
        for h in handlers {
            let _ = h.join();
        }
    }
}

struct Job {
    requests: Vec<Request>,
    reply: mpsc::Sender<std::result::Result<Vec<Completion>, String>>,
}

/// What request handlers share.
struct Service {
    /// Name of the generator (`None` when the server only embeds).
    generator: Option<String>,
    /// The generator's tokenizer, to name tokens in chat log-probabilities.
    tokenizer: Option<TextTokenizer>,
    /// The generator's chat template, or why chat is unavailable.
    chat: std::result::Result<ChatTemplate, String>,
    /// The embedder and its served name.
    embedder: Option<(Arc<Embedder>, String)>,
    api_key: Option<String>,
    /// What one generation request may ask for.
    limits: openai::Limits,
    /// Largest body read, in bytes.
    max_body: usize,
    /// The port the server listens on, to find a request's connection.
    port: u16,
}

/// Takes every job waiting, generates for all of them at once, and answers each.
fn generation_loop(generator: &Generator, jobs_rx: &mpsc::Receiver<Job>) {
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

const ROUTES: &str = "POST /v1/completions, POST /v1/chat/completions, POST /v1/embeddings, GET /v1/models, GET /health";

fn handle(mut rq: tiny_http::Request, jobs: &mpsc::Sender<Job>, service: &Service) {
    if let Some(key) = &service.api_key {
        let sent = rq.headers().iter().find(|h| h.field.equiv("authorization")).map(|h| h.value.as_str().to_string());
        let ok = sent.as_deref().and_then(|v| v.strip_prefix("Bearer ")).is_some_and(|v| same_key(v.as_bytes(), key.as_bytes()));
        if !ok {
            return error(rq, 401, "missing or wrong API key");
        }
    }
    let url = rq.url().to_string();
    let method = rq.method().as_str().to_string();
    if method != "POST" {
        return match (method.as_str(), url.as_str()) {
            ("GET", "/health") => respond(rq, 200, json!({"status": "ok"})),
            ("GET", "/v1/models") => {
                let names = service.generator.iter().chain(service.embedder.iter().map(|(_, n)| n));
                let data: Vec<Value> = names.map(|n| json!({"id": n, "object": "model", "owned_by": "codesweep"})).collect();
                respond(rq, 200, json!({"object": "list", "data": data}))
            }
            _ => error(rq, 404, &format!("no route for {url}; this server has {ROUTES}")),
        };
    }
    if !["/v1/completions", "/v1/chat/completions", "/v1/embeddings"].contains(&url.as_str()) {
        return error(rq, 404, &format!("no route for {url}; this server has {ROUTES}"));
    }
    let too_large = || format!("the body is over {} MiB (--max-body-mib)", service.max_body >> 20);
    if rq.body_length().is_some_and(|n| n > service.max_body) {
        return error(rq, 413, &too_large());
    }
    let mut raw = Vec::new();
    let read = std::io::Read::read_to_end(&mut std::io::Read::take(rq.as_reader(), service.max_body as u64 + 1), &mut raw);
    if read.is_err() {
        return error(rq, 400, "the body could not be read");
    }
    if raw.len() > service.max_body {
        return error(rq, 413, &too_large());
    }
    let body = match String::from_utf8(raw) {
        Ok(body) => body,
        Err(e) => return error(rq, 400, &format!("the body is not UTF-8: invalid byte at offset {}", e.utf8_error().valid_up_to())),
    };
    let connection = rq.remote_addr().map(|&client| Connection { server_port: service.port, client });
    let answer = match url.as_str() {
        "/v1/completions" => completions(&body, jobs, service, connection),
        "/v1/chat/completions" => chat(&body, jobs, service, connection),
        _ => embeddings(&body, service),
    };
    match answer {
        Ok(v) => respond(rq, 200, v),
        Err((status, message)) => error(rq, status, &message),
    }
}

type Answer = std::result::Result<Value, (u16, String)>;

fn bad(message: String) -> (u16, String) {
    (400, message)
}

/// How often a waiting request checks that its client is still there.
const CLIENT_CHECK: Duration = Duration::from_millis(200);

/// Hands `requests` to the engine thread and waits for the completions. When the client
/// disconnects meanwhile, its sequences stop at their next token (the batch's other requests
/// go on) and the answer is dropped.
fn generate(
    jobs: &mpsc::Sender<Job>,
    requests: Vec<Request>,
    connection: Option<Connection>,
) -> std::result::Result<Vec<Completion>, (u16, String)> {
    let gone = Arc::new(AtomicBool::new(false));
    let requests = requests
        .into_iter()
        .map(|r| {
            let gone = gone.clone();
            let stop_when_gone = move |text: &str| gone.load(Ordering::Relaxed).then_some(text.len());
            Request { predicate: Some(Arc::new(stop_when_gone)), ..r }
        })
        .collect();
    let (tx, rx) = mpsc::channel();
    if jobs.send(Job { requests, reply: tx }).is_err() {
        return Err((503, "the engine has stopped".into()));
    }
    loop {
        match rx.recv_timeout(CLIENT_CHECK) {
            Ok(Ok(cs)) => return Ok(cs),
            Ok(Err(m)) => return Err(bad(m)),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err((500, "the engine failed".into())),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(c) = connection.filter(|c| !gone.load(Ordering::Relaxed) && !c.client_connected()) {
                    eprintln!("client {} disconnected; stopping its generation", c.client);
                    gone.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Counts a prompt's tokens as the engine will.
fn prompt_tokens(tokenizer: &TextTokenizer) -> impl Fn(&str) -> std::result::Result<usize, String> + '_ {
    move |prompt| tokenizer.encode(prompt).map(|ids| ids.len()).map_err(|e| format!("cannot tokenize the prompt: {e}"))
}

fn completions(body: &str, jobs: &mpsc::Sender<Job>, service: &Service, connection: Option<Connection>) -> Answer {
    let (Some(name), Some(tokenizer)) = (&service.generator, &service.tokenizer) else {
        return Err(bad("this server has no generator (the model is an encoder); it serves POST /v1/embeddings".into()));
    };
    let v = openai::body_json(body).map_err(bad)?;
    let prompts = openai::completion_prompts(&v).map_err(bad)?;
    let requests = openai::requests(&v, prompts, &service.limits, prompt_tokens(tokenizer)).map_err(bad)?;
    Ok(openai::completion_response(name, &generate(jobs, requests, connection)?))
}

fn chat(body: &str, jobs: &mpsc::Sender<Job>, service: &Service, connection: Option<Connection>) -> Answer {
    let template = service.chat.as_ref().map_err(|m| bad(m.clone()))?;
    let (Some(name), Some(tokenizer)) = (&service.generator, &service.tokenizer) else {
        return Err(bad("this server has no generator".into()));
    };
    let v = openai::body_json(body).map_err(bad)?;
    let prompt = template.render(&openai::chat_messages(&v).map_err(bad)?).map_err(|e| bad(e.to_string()))?;
    let requests = openai::requests(&v, vec![prompt], &service.limits, prompt_tokens(tokenizer)).map_err(bad)?;
    Ok(openai::chat_response(name, &generate(jobs, requests, connection)?, tokenizer))
}

fn embeddings(body: &str, service: &Service) -> Answer {
    let Some((embedder, name)) = &service.embedder else {
        return Err(bad("this server has no embedder; start it with --embedder DIR (a BERT/RoBERTa directory)".into()));
    };
    let v = openai::body_json(body).map_err(bad)?;
    let texts = openai::embedding_inputs(&v).map_err(bad)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let out = embedder.embed_counted(&refs).map_err(|e| bad(e.to_string()))?;
    let base64 = v["encoding_format"].as_str() == Some("base64");
    Ok(openai::embedding_response(name, &out.vectors, out.tokens, base64))
}
