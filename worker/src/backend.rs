//! The model a worker runs, the engine's [`TextModel`] (local weights or an OpenAI-compatible
//! endpoint), loaded as a spec names it; and a shard's generation in engine calls with
//! progress and stop checks between them.

use std::path::Path;
use std::sync::atomic::Ordering;

use codesweep_engine::{Completion, GenerateOptions, Placement, Request, Sampling, TextModel};
use codesweep_store::records::{GenerationSpec, ModelSpec};
use codesweep_telemetry::{instruments, KeyValue};
use tracing::field::Empty;

use crate::error::WorkerError;
use crate::shard_control::ShardControl;

/// Loads `spec`'s model from `local_path` (the model's path, downloaded if it was a URL), or
/// connects to its endpoint, with the tokenizer at `local_tokenizer` (an endpoint's
/// `tokenizer`, downloaded if it was a URL). Blocking: call it off the async runtime.
pub fn load_model(
    spec: &ModelSpec,
    local_path: Option<&Path>,
    local_tokenizer: Option<&Path>,
    default_device: &str,
) -> Result<TextModel, WorkerError> {
    let engine = |source| WorkerError::Engine { model: spec.name.clone(), source };
    if let Some(endpoint) = &spec.endpoint {
        let api_model = spec.api_model.as_deref().unwrap_or(&spec.name);
        return TextModel::endpoint(endpoint, api_model, spec.api_key_env.as_deref(), spec.chat, local_tokenizer).map_err(engine);
    }
    let path = local_path.ok_or_else(|| WorkerError::Input {
        key: spec.name.clone(),
        message: "the model has neither a path nor an endpoint".into(),
    })?;
    let placement = Placement::parse(spec.device.as_deref().unwrap_or(default_device), spec.dtype.as_deref()).map_err(engine)?;
    TextModel::load(path, &placement).map_err(engine)
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
    model: &TextModel,
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
        let generation = model
            .generate(chunk, options, |c: &Completion| {
                control.examples_done.fetch_add(1, Ordering::Relaxed);
                control.generated_tokens.fetch_add(c.generated_tokens as u64, Ordering::Relaxed);
            })
            .map_err(|source| WorkerError::Engine { model: model_name.to_string(), source })?;
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
