//! Batched generation: many prompts sorted by length, left-padded into batches with per-sequence
//! masks and positions, a KV cache, and finished sequences dropped from the running batch.

pub mod batch;
pub mod sampling;

use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::Tensor;

use crate::error::{EngineError, Result};
use crate::kv_cache::KvCache;
use crate::models::Model;
use batch::step_inputs;
pub use sampling::Sampling;
use sampling::{argmax, log_probs, sample_nucleus, sequence_rng};

/// Decides from the text generated so far whether to stop, and where to cut it.
///
/// Benchmark rules (an end-of-statement cut, say) live with the caller; the engine only calls them.
pub trait StopPredicate: Send + Sync {
    /// `Some(n)`: stop now and keep `text[..n]` (a char boundary); `None`: go on.
    fn stop_at(&self, text: &str) -> Option<usize>;
}

impl<F: Fn(&str) -> Option<usize> + Send + Sync> StopPredicate for F {
    fn stop_at(&self, text: &str) -> Option<usize> {
        self(text)
    }
}

/// One prompt to complete.
#[derive(Clone)]
pub struct Request {
    /// Caller's id, echoed in the completion.
    pub id: String,
    /// The prompt text (special tokens such as BOS are added as the tokenizer says).
    pub prompt: String,
    /// Generation stops after this many new tokens.
    pub max_new_tokens: usize,
    /// Generation stops when the text contains one of these; the text is cut before it.
    pub stop: Vec<String>,
    /// Greedy or nucleus sampling.
    pub sampling: Sampling,
    /// Number of samples (1 for greedy).
    pub n: usize,
    /// Optional caller-supplied stop rule over the decoded text.
    pub predicate: Option<Arc<dyn StopPredicate>>,
}

impl Request {
    /// A greedy request with no stop strings.
    pub fn greedy(id: impl Into<String>, prompt: impl Into<String>, max_new_tokens: usize) -> Self {
        Self {
            id: id.into(),
            prompt: prompt.into(),
            max_new_tokens,
            stop: Vec::new(),
            sampling: Sampling::Greedy,
            n: 1,
            predicate: None,
        }
    }
}

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `max_new_tokens` reached.
    Length,
    /// The model produced an end-of-sequence token.
    Eos,
    /// A stop string appeared.
    StopString,
    /// The stop predicate fired.
    Predicate,
    /// The model's context length was reached.
    ContextFull,
}

impl StopReason {
    /// The name written to output files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Length => "length",
            Self::Eos => "eos",
            Self::StopString => "stop_string",
            Self::Predicate => "predicate",
            Self::ContextFull => "context_full",
        }
    }
}

/// One finished sample of one request.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The request id.
    pub id: String,
    /// Sample index within the request (0 for greedy).
    pub sample: usize,
    /// Generated text, cut at the stop string or predicate position.
    pub text: String,
    /// Generated token ids (without an end-of-sequence token).
    pub token_ids: Vec<u32>,
    /// Number of prompt tokens fed to the model.
    pub prompt_tokens: usize,
    /// Number of tokens generated, the end-of-sequence token included.
    pub generated_tokens: usize,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// Mean log-probability of the generated tokens under the model (temperature 1, no nucleus cut).
    pub mean_logprob: f64,
    /// Log-probability of each generated token, the end-of-sequence token included.
    pub token_logprobs: Vec<f64>,
    /// From the start of its batch to its end.
    pub elapsed: Duration,
}

impl Completion {
    /// The completion as one line of `codesweep generate`'s output: id, sample, text, token
    /// counts, stop reason, mean log-probability and milliseconds.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id, "sample": self.sample, "completion": self.text,
            "prompt_tokens": self.prompt_tokens, "generated_tokens": self.generated_tokens,
            "stop_reason": self.stop_reason.as_str(), "mean_logprob": self.mean_logprob,
            "elapsed_ms": self.elapsed.as_secs_f64() * 1000.0,
        })
    }
}

/// What a `generate` call did, for progress and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct GenerateStats {
    /// Batches run.
    pub batches: usize,
    /// Prompt tokens prefilled (padding excluded).
    pub prompt_tokens: usize,
    /// Prompt columns computed, padding included (rows × longest prompt, per batch).
    pub prefill_columns: usize,
    /// Row-steps of decoding: for each decode step, the rows still running. Finished rows cost nothing.
    pub decode_rows: usize,
    /// Time spent in prefill.
    pub prefill_time: Duration,
    /// Time spent decoding.
    pub decode_time: Duration,
}

/// Completions in request order, and what it took.
#[derive(Debug, Clone)]
pub struct Generation {
    /// One per (request, sample), in request order.
    pub completions: Vec<Completion>,
    /// Work done.
    pub stats: GenerateStats,
}

impl Generation {
    /// One line for people: completions, prompt and generated tokens, `wall` seconds, and the
    /// prefill and decode rates.
    pub fn summary(&self, wall: Duration) -> String {
        let s = &self.stats;
        let generated: usize = self.completions.iter().map(|c| c.generated_tokens).sum();
        format!(
            "{} completions, {} prompt tokens, {generated} generated tokens in {:.1}s (prefill {:.0} tok/s, decode {:.1} tok/s)",
            self.completions.len(),
            s.prompt_tokens,
            wall.as_secs_f64(),
            s.prompt_tokens as f64 / s.prefill_time.as_secs_f64().max(1e-9),
            generated as f64 / s.decode_time.as_secs_f64().max(1e-9),
        )
    }
}

/// Limits of the batching loop.
#[derive(Debug, Clone, Copy)]
pub struct GenerateOptions {
    /// Most sequences in one batch.
    pub batch_size: usize,
    /// Most tokens (rows × (longest prompt + max new tokens)) a batch may hold; bounds KV memory.
    pub max_tokens_in_flight: usize,
    /// Prompt tokens per prefill step, over all rows of the batch (a batch of 8 takes 64
    /// columns a step at the default 512); bounds activation and attention-score memory. About
    /// 512 keeps each step's activations in the CPU caches: 8 rows × 512 columns ran at 0.6× the
    /// speed of 8 × 64.
    pub prefill_chunk: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self { batch_size: 8, max_tokens_in_flight: 32_768, prefill_chunk: 512 }
    }
}

struct Sequence {
    request: usize,
    sample: usize,
    prompt: Arc<Vec<u32>>,
    generated: Vec<u32>,
    logprobs: Vec<f64>,
    rng: Option<rand::rngs::StdRng>,
}

/// Runs requests through a model.
pub struct Generator<'m> {
    model: &'m Model,
    options: GenerateOptions,
}

impl<'m> Generator<'m> {
    /// A generator over `model` with `options`.
    pub fn new(model: &'m Model, options: GenerateOptions) -> Self {
        Self { model, options }
    }

    /// Completes every request; `on_done` sees each completion as it finishes (for progress).
    /// Results come back in request order, samples in order. Requests are checked before any work
    /// starts, so a bad one fails the call without wasting compute.
    pub fn generate(&self, requests: &[Request], mut on_done: impl FnMut(&Completion)) -> Result<Generation> {
        let mut stats = GenerateStats::default();
        let mut sequences = Vec::new();
        for (r, req) in requests.iter().enumerate() {
            let prompt = Arc::new(self.check(req)?);
            for sample in 0..req.n.max(1) {
                let rng = match req.sampling {
                    Sampling::Greedy => None,
                    Sampling::Nucleus { seed, .. } => Some(sequence_rng(seed, &req.id, sample)),
                };
                sequences.push(Sequence { request: r, sample, prompt: prompt.clone(), generated: Vec::new(), logprobs: Vec::new(), rng });
            }
        }
        // Longest first: similar lengths share a batch, and memory peaks at the start.
        sequences.sort_by(|a, b| b.prompt.len().cmp(&a.prompt.len()).then(a.request.cmp(&b.request)));
        let mut done: Vec<(usize, usize, Completion)> = Vec::with_capacity(sequences.len());
        let mut rest = sequences.into_iter().peekable();
        while rest.peek().is_some() {
            let mut batch = Vec::new();
            let mut longest = 0;
            let mut most_new = 0;
            while let Some(next) = rest.peek() {
                let req = &requests[next.request];
                let l = longest.max(next.prompt.len());
                let m = most_new.max(req.max_new_tokens);
                let cost = (batch.len() + 1) * (l + m);
                if !batch.is_empty() && (batch.len() >= self.options.batch_size || cost > self.options.max_tokens_in_flight) {
                    break;
                }
                longest = l;
                most_new = m;
                batch.extend(rest.next());
            }
            for c in self.run_batch(requests, batch, &mut stats)? {
                on_done(&c.2);
                done.push(c);
            }
        }
        done.sort_by_key(|(r, s, _)| (*r, *s));
        Ok(Generation { completions: done.into_iter().map(|(_, _, c)| c).collect(), stats })
    }

    fn check(&self, req: &Request) -> Result<Vec<u32>> {
        let bad = |message: String| EngineError::Request { id: req.id.clone(), message };
        if let Sampling::Nucleus { temperature, top_p, .. } = req.sampling {
            if !(temperature > 0.0 && temperature.is_finite()) {
                return Err(bad(format!("temperature must be > 0 for sampling, got {temperature}")));
            }
            if !(top_p > 0.0 && top_p <= 1.0) {
                return Err(bad(format!("top_p must be in (0, 1], got {top_p}")));
            }
        }
        let ids = self.model.tokenizer.encode(&req.prompt)?;
        if ids.is_empty() {
            return Err(bad("the prompt encodes to no tokens".into()));
        }
        let max = self.model.config.max_positions;
        if ids.len() >= max {
            return Err(bad(format!("the prompt has {} tokens; the model's context is {max}", ids.len())));
        }
        Ok(ids)
    }

    /// Prefills a left-padded batch, then decodes until every row has stopped.
    fn run_batch(
        &self,
        requests: &[Request],
        mut rows: Vec<Sequence>,
        stats: &mut GenerateStats,
    ) -> Result<Vec<(usize, usize, Completion)>> {
        let started = Instant::now();
        let model = self.model;
        let windows = model.config.windows();
        let longest = rows.iter().map(|s| s.prompt.len()).max().unwrap_or(0);
        let mut pads: Vec<usize> = rows.iter().map(|s| longest - s.prompt.len()).collect();
        stats.batches += 1;
        stats.prompt_tokens += rows.iter().map(|s| s.prompt.len()).sum::<usize>();
        stats.prefill_columns += rows.len() * longest;
        let mut cache = KvCache::new(model.config.num_layers, model.kv_cache);
        let mut logits = None;
        let chunk = (self.options.prefill_chunk / rows.len().max(1)).max(1);
        let mut start = 0;
        while start < longest {
            let t = chunk.min(longest - start);
            let cols: Vec<Vec<u32>> = rows
                .iter()
                .zip(&pads)
                .map(|(s, &pad)| (start..start + t).map(|c| if c < pad { 0 } else { s.prompt[c - pad] }).collect())
                .collect();
            let step = step_inputs(&cols, &pads, start, windows, model.dtype, &model.device)?;
            logits = Some(model.network.forward(&step, &mut cache)?);
            start += t;
        }
        let mut logits = match logits {
            Some(l) => l,
            None => return Ok(Vec::new()),
        };
        // Reading the logits waits for the device, so the prefill time is complete here.
        let mut table: Vec<Vec<f32>> = logits.to_vec2()?;
        stats.prefill_time += started.elapsed();
        let decode_started = Instant::now();
        let mut finished = Vec::new();
        loop {
            let mut keep = Vec::with_capacity(rows.len());
            let mut next_rows = Vec::with_capacity(rows.len());
            let mut next_pads = Vec::with_capacity(rows.len());
            let tokens: Vec<usize> = rows
                .iter_mut()
                .zip(&table)
                .map(|(seq, row)| match (requests[seq.request].sampling, seq.rng.as_mut()) {
                    (Sampling::Nucleus { temperature, top_p, .. }, Some(rng)) => sample_nucleus(row, temperature, top_p, rng),
                    _ => argmax(row),
                })
                .collect();
            let logprobs = log_probs(&table, &tokens);
            for (i, (mut seq, pad)) in rows.into_iter().zip(pads).enumerate() {
                let req = &requests[seq.request];
                let token = tokens[i];
                seq.logprobs.push(logprobs[i]);
                match self.after_token(req, &mut seq, token as u32)? {
                    Some((reason, text)) => finished.push(self.finish(req, seq, reason, text, started)),
                    None => {
                        keep.push(i as u32);
                        next_rows.push(seq);
                        next_pads.push(pad);
                    }
                }
            }
            rows = next_rows;
            pads = next_pads;
            if rows.is_empty() {
                break;
            }
            if keep.len() < table.len() {
                cache.retain_rows(&Tensor::new(keep.as_slice(), &model.device)?)?;
            }
            // Columns that are padding for every remaining row are dead weight.
            let common = pads.iter().copied().min().unwrap_or(0);
            if common > 0 {
                cache.drop_front_columns(common)?;
                pads.iter_mut().for_each(|p| *p -= common);
            }
            let start = cache.columns();
            let cols: Vec<Vec<u32>> = rows.iter().map(|s| vec![*s.generated.last().unwrap_or(&0)]).collect();
            let step = step_inputs(&cols, &pads, start, windows, model.dtype, &model.device)?;
            stats.decode_rows += rows.len();
            logits = model.network.forward(&step, &mut cache)?;
            table = logits.to_vec2()?;
        }
        stats.decode_time += decode_started.elapsed();
        Ok(finished)
    }

    /// Appends `token` and applies the stop rules; `Some` when the sequence is finished.
    fn after_token(&self, req: &Request, seq: &mut Sequence, token: u32) -> Result<Option<(StopReason, String)>> {
        let tok = &self.model.tokenizer;
        if tok.eos_ids().contains(&token) {
            seq.generated.push(token);
            let text = tok.decode(&seq.generated[..seq.generated.len() - 1])?;
            return Ok(Some((StopReason::Eos, text)));
        }
        seq.generated.push(token);
        let text = tok.decode(&seq.generated)?;
        if let Some(cut) = req.stop.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str())).min() {
            return Ok(Some((StopReason::StopString, text[..cut].to_string())));
        }
        if let Some(pred) = &req.predicate {
            if let Some(cut) = pred.stop_at(&text) {
                let cut = floor_char_boundary(&text, cut);
                return Ok(Some((StopReason::Predicate, text[..cut].to_string())));
            }
        }
        if seq.generated.len() >= req.max_new_tokens {
            return Ok(Some((StopReason::Length, text)));
        }
        if seq.prompt.len() + seq.generated.len() >= self.model.config.max_positions {
            return Ok(Some((StopReason::ContextFull, text)));
        }
        Ok(None)
    }

    fn finish(&self, req: &Request, seq: Sequence, reason: StopReason, text: String, started: Instant) -> (usize, usize, Completion) {
        let generated_tokens = seq.generated.len();
        let mut token_ids = seq.generated;
        if reason == StopReason::Eos {
            token_ids.pop();
        }
        let completion = Completion {
            id: req.id.clone(),
            sample: seq.sample,
            text,
            token_ids,
            prompt_tokens: seq.prompt.len(),
            generated_tokens,
            stop_reason: reason,
            mean_logprob: if generated_tokens == 0 { 0.0 } else { seq.logprobs.iter().sum::<f64>() / generated_tokens as f64 },
            token_logprobs: seq.logprobs,
            elapsed: started.elapsed(),
        };
        (seq.request, seq.sample, completion)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
