//! CrossCodeEval shards: official prompts, generation stopped at the end of the statement,
//! and the official per-example metrics.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use codesweep_engine::prompt::{cceval_prompt, PromptBudget};
use codesweep_engine::{Request, StopPredicate};
use codesweep_store::records::{ExampleResult, ShardHeader, ShardTotals};
use codesweep_tasks::cceval::shard::{edit_sim_or_default, score_completions, shard_examples};
use codesweep_tasks::cceval::{Example, Language, StatementEnd};
use serde_json::Value;

use crate::backend::{generate_shard, sampling, Backend};
use crate::error::WorkerError;
use crate::lease_loop::ShardControl;

/// The statement-end rule as the engine's stop predicate (one per request).
struct StatementStop(Mutex<StatementEnd>);

impl StopPredicate for StatementStop {
    fn stop_at(&self, text: &str) -> Option<usize> {
        self.0.lock().ok()?.stop_at(text)
    }
}

/// Runs one CrossCodeEval shard: returns a result per example, in input order, and totals.
/// `key` names the input object in errors. Checks `control` between batches and stops with
/// [`WorkerError::Stopped`] when asked to.
pub fn run_cceval_shard(
    backend: &Backend,
    key: &str,
    header: &ShardHeader,
    records: &[Value],
    control: &ShardControl,
) -> Result<(Vec<ExampleResult>, ShardTotals), WorkerError> {
    let started = Instant::now();
    let input = |message: String| WorkerError::Input { key: key.to_string(), message };
    let language: Language = header.language.parse().map_err(input)?;
    let edit_sim = edit_sim_or_default(header.edit_sim.as_deref()).map_err(input)?;
    let examples = shard_examples(key, records, header.use_crossfile).map_err(|e| input(e.to_string()))?;
    let g = &header.generation;
    let budget = PromptBudget {
        model_max_tokens: g.model_max_tokens,
        crossfile_max_tokens: g.crossfile_max_tokens,
        generation_max_tokens: g.max_new_tokens,
        buffer: g.buffer,
    };
    let engine = |source| WorkerError::Engine { model: header.model.name.clone(), source };
    let sampling = sampling(g);
    let mut requests = Vec::with_capacity(examples.len());
    for p in &examples {
        let prompt = match backend.tokenizer() {
            Some(tokenizer) => {
                cceval_prompt(tokenizer, &p.example.prompt, p.crossfile.as_deref(), &budget).map_err(engine)?
            }
            // An endpoint truncates (or rejects) on its side.
            None => match &p.crossfile {
                Some(context) => format!("{context}\n{}", p.example.prompt),
                None => p.example.prompt.clone(),
            },
        };
        let stop: Arc<dyn StopPredicate> =
            Arc::new(StatementStop(Mutex::new(StatementEnd::new(language, &p.example.prompt))));
        requests.push(Request {
            sampling,
            predicate: Some(stop),
            ..Request::greedy(p.example.task_id.clone(), prompt, g.max_new_tokens)
        });
    }
    let completions = generate_shard(backend, &header.model.name, &requests, g, control)?;
    let inputs: Vec<Example> = examples.into_iter().map(|p| p.example).collect();
    let answered: Vec<(&str, &str)> = completions.iter().map(|c| (c.id.as_str(), c.text.as_str())).collect();
    let scored = score_completions(language, edit_sim, key, &inputs, "the shard's completions", &answered)
        .map_err(|e| input(e.to_string()))?;
    let mut totals = ShardTotals { examples: inputs.len(), ..ShardTotals::default() };
    let results = scored
        .iter()
        .zip(&completions)
        .map(|(scored, c)| {
            totals.prompt_tokens += c.prompt_tokens as u64;
            totals.generated_tokens += c.generated_tokens as u64;
            ExampleResult {
                task: None,
                task_id: scored.task_id.clone(),
                completion: c.text.clone(),
                prediction: scored.pred.clone(),
                prompt_tokens: c.prompt_tokens,
                generated_tokens: c.generated_tokens,
                stop_reason: c.stop_reason.as_str().to_string(),
                seconds: c.elapsed.as_secs_f64(),
                metrics: scored.detailed_json(),
            }
        })
        .collect();
    totals.seconds = started.elapsed().as_secs_f64();
    Ok((results, totals))
}
