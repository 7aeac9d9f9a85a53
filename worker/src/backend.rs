//! The model a worker runs: a local model on the engine, or an OpenAI-compatible endpoint.

use std::path::Path;
use std::sync::Arc;

use codesweep_engine::http::{Endpoint, HttpBackend};
use std::sync::atomic::Ordering;

use codesweep_engine::{Completion, GenerateOptions, Generation, Generator, Model, Request, Sampling, TextTokenizer};
use codesweep_store::records::{GenerationSpec, ModelSpec};
use codesweep_telemetry::{instruments, KeyValue};
use tracing::field::Empty;

use crate::shard_control::ShardControl;

use crate::error::WorkerError;

/// A loaded model, ready to generate.
#[derive(Clone)]
pub enum Backend {
    /// Weights in this process.
    Local(Arc<Model>),
    /// A server that completes prompts (vLLM, TGI, llama.cpp, `codesweep serve`, hosted APIs).
    Http(Box<Served>),
}

/// An OpenAI-compatible endpoint as the spec describes it.
#[derive(Clone)]
pub struct Served {
    /// `/v1/completions`, for raw prompts (CrossCodeEval).
    pub completions: HttpBackend,
    /// `/v1/chat/completions`, for instructions (RepoQA), when the spec says `chat`.
    pub chat: Option<HttpBackend>,
    /// The served model's tokenizer, when the spec names one.
    pub tokenizer: Option<Arc<TextTokenizer>>,
}

impl Backend {
    /// Loads `spec`'s model from `local_path` (the model's path, downloaded if it was a URL), or
    /// connects to its endpoint, with the tokenizer at `local_tokenizer` (an endpoint's
    /// `tokenizer`, downloaded if it was a URL). Blocking: call it off the async runtime.
    pub fn load(
        spec: &ModelSpec,
        local_path: Option<&Path>,
        local_tokenizer: Option<&Path>,
        default_device: &str,
    ) -> Result<Self, WorkerError> {
        let engine = |source| WorkerError::Engine { model: spec.name.clone(), source };
        if let Some(endpoint) = &spec.endpoint {
            let api_model = spec.api_model.as_deref().unwrap_or(&spec.name);
            let http = |kind| HttpBackend::new(endpoint, api_model, kind, spec.api_key_env.as_deref());
            let tokenizer = local_tokenizer.map(|path| TextTokenizer::from_file(path, Vec::new())).transpose().map_err(engine)?;
            return Ok(Backend::Http(Box::new(Served {
                completions: http(Endpoint::Completions),
                chat: spec.chat.then(|| http(Endpoint::Chat)),
                tokenizer: tokenizer.map(Arc::new),
            })));
        }
        let path = local_path.ok_or_else(|| WorkerError::Input {
            key: spec.name.clone(),
            message: "the model has neither a path nor an endpoint".into(),
        })?;
        let device = codesweep_engine::parse_device(spec.device.as_deref().unwrap_or(default_device)).map_err(engine)?;
        let dtype = spec.dtype.as_deref().map(codesweep_engine::parse_dtype).transpose().map_err(engine)?;
        let model = Model::load(path, &device, dtype).map_err(engine)?;
        Ok(Backend::Local(Arc::new(model)))
    }

    /// The tokenizer for prompt budgets and RepoQA contexts; an endpoint has one only when its
    /// spec names it.
    pub fn tokenizer(&self) -> Option<&TextTokenizer> {
        match self {
            Backend::Local(model) => Some(&model.tokenizer),
            Backend::Http(served) => served.tokenizer.as_deref(),
        }
    }

    /// The backend instructions (RepoQA) go to: an endpoint's chat completions when its spec
    /// says `chat` (the server applies its chat template, as a local model's template is).
    pub fn for_instructions(&self) -> Backend {
        match self {
            Backend::Http(served) => match &served.chat {
                Some(chat) => Backend::Http(Box::new(Served {
                    completions: chat.clone(),
                    chat: None,
                    tokenizer: served.tokenizer.clone(),
                })),
                None => self.clone(),
            },
            Backend::Local(_) => self.clone(),
        }
    }

    /// Completes `requests`; `on_done` sees each completion as it finishes.
    pub fn generate(
        &self,
        model_name: &str,
        requests: &[Request],
        options: GenerateOptions,
        on_done: impl FnMut(&Completion) + Send,
    ) -> Result<Generation, WorkerError> {
        let engine = |source| WorkerError::Engine { model: model_name.to_string(), source };
        match self {
            Backend::Local(model) => Generator::new(model, options).generate(requests, on_done).map_err(engine),
            Backend::Http(served) => served.completions.generate(requests, on_done).map_err(engine),
        }
    }
}

/// Greedy at temperature 0, seeded nucleus sampling otherwise.
pub fn sampling(g: &GenerationSpec) -> Sampling {
    if g.temperature > 0.0 {
        Sampling::Nucleus { temperature: g.temperature, top_p: g.top_p, seed: g.seed }
    } else {
        Sampling::Greedy
    }
}

/// Generates for a shard's requests a few batches per engine call, counting progress in
/// `control` and stopping with [`WorkerError::Stopped`] between calls when asked to.
pub fn generate_shard(
    backend: &Backend,
    model_name: &str,
    requests: &[Request],
    g: &GenerationSpec,
    control: &ShardControl,
) -> Result<Vec<Completion>, WorkerError> {
    let options = GenerateOptions {
        batch_size: g.batch_size.max(1),
        max_tokens_in_flight: g.max_tokens_in_flight,
        ..GenerateOptions::default()
    };
    let mut completions = Vec::with_capacity(requests.len());
    let attributes = [KeyValue::new("model", model_name.to_string())];
    for (index, chunk) in requests.chunks(options.batch_size * 4).enumerate() {
        if let Some(reason) = control.stop_reason() {
            return Err(WorkerError::Stopped(reason));
        }
        // One engine call: it runs the chunk in batches of up to `batch_size` sequences. Integers
        // as i64: the OpenTelemetry bridge exports other integer types as strings.
        let span = tracing::info_span!(
            "batch",
            batch.index = index as i64,
            batch.requests = chunk.len() as i64,
            batch.engine_batches = Empty,
            batch.prompt_tokens = Empty,
            batch.generated_tokens = Empty,
        );
        let _in_batch = span.enter();
        let started = std::time::Instant::now();
        let generation = backend.generate(model_name, chunk, options, |c| {
            control.examples_done.fetch_add(1, Ordering::Relaxed);
            control.generated_tokens.fetch_add(c.generated_tokens as u64, Ordering::Relaxed);
        })?;
        let prompt_tokens: u64 = generation.completions.iter().map(|c| c.prompt_tokens as u64).sum();
        let generated_tokens: u64 = generation.completions.iter().map(|c| c.generated_tokens as u64).sum();
        span.record("batch.engine_batches", generation.stats.batches as i64);
        span.record("batch.prompt_tokens", prompt_tokens as i64);
        span.record("batch.generated_tokens", generated_tokens as i64);
        let metrics = instruments();
        metrics.examples_generated.add(chunk.len() as u64, &attributes);
        metrics.tokens_prompt.add(prompt_tokens, &attributes);
        metrics.tokens_generated.add(generated_tokens, &attributes);
        metrics.batch_duration.record(started.elapsed().as_secs_f64(), &attributes);
        completions.extend(generation.completions);
    }
    Ok(completions)
}
