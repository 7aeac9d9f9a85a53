//! An OpenAI-compatible HTTP backend (`/v1/completions`, `/v1/chat/completions`, `/v1/embeddings`)
//! behind the same request/completion types as local generation: vLLM, TGI, llama.cpp servers,
//! hosted APIs, or `codesweep serve`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::{EngineError, Result};
use crate::generate::{Completion, GenerateStats, Generation, Request, Sampling, StopReason};

/// Which endpoint completions go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/completions`: the prompt is sent as is.
    Completions,
    /// `/v1/chat/completions`: the prompt is one user message (instruct models).
    Chat,
}

/// Connection settings of an OpenAI-compatible server.
#[derive(Clone)]
pub struct HttpBackend {
    base_url: String,
    model: String,
    api_key: Option<String>,
    endpoint: Endpoint,
    /// Most requests in flight at once.
    pub concurrency: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries after a 429, a 5xx or a transport error, with exponential backoff.
    pub max_retries: u32,
    /// First backoff delay; doubled on each retry.
    pub backoff: Duration,
}

impl std::fmt::Debug for HttpBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed.
        f.debug_struct("HttpBackend")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl HttpBackend {
    /// A backend for `base_url` (e.g. `http://host:8000/v1`) serving `model`; the API key, if
    /// any, is read from the environment variable `api_key_env`.
    pub fn new(base_url: &str, model: &str, endpoint: Endpoint, api_key_env: Option<&str>) -> Self {
        let api_key = api_key_env.and_then(|name| std::env::var(name).ok()).filter(|k| !k.is_empty());
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key,
            endpoint,
            concurrency: 8,
            timeout: Duration::from_secs(300),
            max_retries: 5,
            backoff: Duration::from_millis(500),
        }
    }

    fn agent(&self) -> ureq::Agent {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            .build();
        ureq::Agent::new_with_config(config)
    }

    /// POSTs `body` to `path`, retrying 429/5xx/transport errors with backoff.
    fn post(&self, agent: &ureq::Agent, path: &str, body: &Value) -> Result<Value> {
        let url = format!("{}{path}", self.base_url);
        let fail = |message: String| EngineError::Http { url: url.clone(), message };
        let mut delay = self.backoff;
        let mut attempt = 0;
        loop {
            let mut req = agent.post(&url).header("content-type", "application/json");
            if let Some(key) = &self.api_key {
                req = req.header("authorization", &format!("Bearer {key}"));
            }
            let outcome = req.send(body.to_string().as_bytes());
            let retry_reason = match outcome {
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    let text = resp.body_mut().read_to_string().map_err(|e| fail(format!("cannot read the response: {e}")))?;
                    if status == 200 {
                        return serde_json::from_str(&text).map_err(|e| fail(format!("response is not JSON: {e}")));
                    }
                    if status != 429 && status < 500 {
                        return Err(fail(format!("HTTP {status}: {}", text.chars().take(300).collect::<String>())));
                    }
                    format!("HTTP {status}")
                }
                Err(e) => e.to_string(),
            };
            attempt += 1;
            if attempt > self.max_retries {
                return Err(fail(format!("gave up after {attempt} attempts; last: {retry_reason}")));
            }
            std::thread::sleep(delay);
            delay *= 2;
        }
    }

    fn complete_one(&self, agent: &ureq::Agent, req: &Request) -> Result<Vec<Completion>> {
        let started = Instant::now();
        let mut body = json!({"model": self.model, "max_tokens": req.max_new_tokens, "n": req.n.max(1)});
        match self.endpoint {
            Endpoint::Completions => {
                body["prompt"] = json!(req.prompt);
                body["logprobs"] = json!(1);
            }
            Endpoint::Chat => {
                body["messages"] = json!([{"role": "user", "content": req.prompt}]);
                body["logprobs"] = json!(true);
            }
        }
        match req.sampling {
            Sampling::Greedy => body["temperature"] = json!(0.0),
            Sampling::Nucleus { temperature, top_p, seed } => {
                body["temperature"] = json!(temperature);
                body["top_p"] = json!(top_p);
                body["seed"] = json!(seed);
            }
        }
        if !req.stop.is_empty() {
            body["stop"] = json!(req.stop);
        }
        let path = match self.endpoint {
            Endpoint::Completions => "/completions",
            Endpoint::Chat => "/chat/completions",
        };
        let resp = self.post(agent, path, &body)?;
        let url = format!("{}{path}", self.base_url);
        let bad = |what: &str| EngineError::Http { url: url.clone(), message: format!("response has no {what}") };
        let prompt_tokens = resp["usage"]["prompt_tokens"].as_u64().unwrap_or(0) as usize;
        let choices = resp["choices"].as_array().ok_or_else(|| bad("`choices`"))?;
        let mut out = Vec::with_capacity(choices.len());
        for (i, choice) in choices.iter().enumerate() {
            let raw = match self.endpoint {
                Endpoint::Completions => choice["text"].as_str(),
                Endpoint::Chat => choice["message"]["content"].as_str(),
            }
            .ok_or_else(|| bad("completion text"))?;
            let logprobs: Vec<f64> = match self.endpoint {
                Endpoint::Completions => choice["logprobs"]["token_logprobs"].as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()),
                Endpoint::Chat => choice["logprobs"]["content"].as_array().map(|a| a.iter().filter_map(|t| t["logprob"].as_f64()).collect()),
            }
            .unwrap_or_default();
            let mut reason = match choice["finish_reason"].as_str() {
                Some("length") => StopReason::Length,
                Some("stop") if !req.stop.is_empty() => StopReason::StopString,
                _ => StopReason::Eos,
            };
            let mut text = raw.to_string();
            // The server cannot run a caller's predicate: apply it to the returned text's prefixes.
            if let Some(pred) = &req.predicate {
                let cut = text.char_indices().map(|(i, _)| i).skip(1).chain([text.len()]).find_map(|end| pred.stop_at(&text[..end]));
                if let Some(cut) = cut {
                    text.truncate(cut.min(text.len()));
                    reason = StopReason::Predicate;
                }
            }
            let generated = logprobs.len().max(usize::from(!text.is_empty()));
            out.push(Completion {
                id: req.id.clone(),
                sample: choice["index"].as_u64().map_or(i, |x| x as usize),
                text,
                token_ids: Vec::new(),
                prompt_tokens,
                generated_tokens: generated,
                stop_reason: reason,
                mean_logprob: if logprobs.is_empty() { f64::NAN } else { logprobs.iter().sum::<f64>() / logprobs.len() as f64 },
                token_logprobs: logprobs,
                elapsed: started.elapsed(),
            });
        }
        out.sort_by_key(|c| c.sample);
        Ok(out)
    }

    /// Completes every request with up to `concurrency` in flight; results in request order.
    /// The first request that fails after its retries fails the call.
    pub fn generate(&self, requests: &[Request], on_done: impl FnMut(&Completion) + Send) -> Result<Generation> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<Vec<Completion>>>>> = Mutex::new((0..requests.len()).map(|_| None).collect());
        let on_done = Mutex::new(on_done);
        std::thread::scope(|scope| {
            for _ in 0..self.concurrency.max(1).min(requests.len().max(1)) {
                scope.spawn(|| {
                    let agent = self.agent();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(req) = requests.get(i) else { break };
                        let r = self.complete_one(&agent, req);
                        if let Ok(cs) = &r {
                            if let Ok(mut f) = on_done.lock() {
                                cs.iter().for_each(&mut *f);
                            }
                        }
                        let failed = r.is_err();
                        if let Ok(mut slots) = results.lock() {
                            slots[i] = Some(r);
                        }
                        if failed {
                            next.store(requests.len(), Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let slots = results.into_inner().map_err(|_| EngineError::Http { url: self.base_url.clone(), message: "a worker thread panicked".into() })?;
        let mut completions = Vec::new();
        let mut stats = GenerateStats::default();
        for slot in slots.into_iter().flatten() {
            let cs = slot?;
            stats.prompt_tokens += cs.first().map_or(0, |c| c.prompt_tokens);
            completions.extend(cs);
        }
        if completions.len() < requests.len() {
            return Err(EngineError::Http { url: self.base_url.clone(), message: "not every request was answered".into() });
        }
        Ok(Generation { completions, stats })
    }

    /// Embeds `texts` through `/v1/embeddings`, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let agent = self.agent();
        let resp = self.post(&agent, "/embeddings", &json!({"model": self.model, "input": texts}))?;
        let url = format!("{}/embeddings", self.base_url);
        let data = resp["data"].as_array().ok_or_else(|| EngineError::Http { url: url.clone(), message: "response has no `data`".into() })?;
        let mut out = vec![Vec::new(); texts.len()];
        for (i, item) in data.iter().enumerate() {
            let index = item["index"].as_u64().map_or(i, |x| x as usize);
            let vector = item["embedding"].as_array().ok_or_else(|| EngineError::Http { url: url.clone(), message: format!("item {i} has no embedding") })?;
            if let Some(slot) = out.get_mut(index) {
                *slot = vector.iter().filter_map(Value::as_f64).map(|x| x as f32).collect();
            }
        }
        if out.iter().any(Vec::is_empty) {
            return Err(EngineError::Http { url, message: format!("{} texts sent, fewer embeddings returned", texts.len()) });
        }
        Ok(out)
    }
}
