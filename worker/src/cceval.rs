//! CrossCodeEval shards: official prompts, generation stopped at the end of the statement,
//! and the official per-example metrics.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use codesweep_engine::prompt::{cceval_prompt, PromptBudget};
use codesweep_engine::{Request, StopPredicate};
use codesweep_store::records::{ExampleResult, ShardHeader, ShardTotals};
use codesweep_tasks::cceval::{CcevalScorer, EditSimBackend, Example, Language, StatementEnd};
use codesweep_tasks::input::str_field;
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

struct Prepared {
    example: Example,
    crossfile: Option<String>,
}

fn prepare(key: &str, header: &ShardHeader, records: &[Value]) -> Result<Vec<Prepared>, WorkerError> {
    let input = |line: usize, message: String| WorkerError::Input { key: key.to_string(), message: format!("line {line}: {message}") };
    records
        .iter()
        .enumerate()
        .map(|(i, value)| {
            if let Some(error) = codesweep_store::records::invalid_record_error(value) {
                return Err(input(i + 2, format!("corrupt input record: {error}")));
            }
            let example = Example::from_json(value).map_err(|e| input(i + 2, format!("field `{}`: {}", e.field, e.message)))?;
            let crossfile = if header.use_crossfile {
                Some(str_field(value, "crossfile_context.text").map_err(|e| input(i + 2, format!("field `{}`: {}", e.field, e.message)))?.to_string())
            } else {
                None
            };
            Ok(Prepared { example, crossfile })
        })
        .collect()
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
    let edit_sim: EditSimBackend = header.edit_sim.as_deref().unwrap_or("difflib").parse().map_err(input)?;
    let examples = prepare(key, header, records)?;
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
    let mut scorer = CcevalScorer::new(language, edit_sim);
    let mut totals = ShardTotals { examples: examples.len(), ..ShardTotals::default() };
    let results = examples
        .iter()
        .zip(&completions)
        .map(|(p, c)| {
            let scored = scorer.score(&p.example.task_id, &p.example.prompt, &p.example.groundtruth, &c.text);
            totals.prompt_tokens += c.prompt_tokens as u64;
            totals.generated_tokens += c.generated_tokens as u64;
            ExampleResult {
                task: None,
                task_id: p.example.task_id.clone(),
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
