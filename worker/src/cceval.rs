//! CrossCodeEval shards: official prompts, generation stopped at the end of the statement,
//! and the official per-example metrics.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use codesweep_engine::{Request, Sampling, StopPredicate, TextModel, TextTokenizer};
use codesweep_store::records::{ExampleResult, ShardHeader, ShardTotals};
use codesweep_tasks::cceval::prompt::{cceval_prompt, FimMarkers, Keep, PromptBudget, PromptError, PromptTokenizer};
use codesweep_tasks::cceval::shard::{edit_sim_or_default, score_completions, shard_examples};
use codesweep_tasks::cceval::{Example, Language, StatementEnd};
use serde_json::Value;

use crate::backend::{generate_shard, sampling};
use crate::error::WorkerError;
use crate::shard_control::ShardControl;

/// The engine's tokenizer as the CrossCodeEval prompt builder's.
struct EnginePromptTokenizer<'a>(&'a TextTokenizer);

impl PromptTokenizer for EnginePromptTokenizer<'_> {
    fn truncate(&self, text: &str, max_tokens: usize, keep: Keep) -> Result<String, String> {
        self.0.keep_tokens(text, max_tokens, keep == Keep::End).map_err(|e| e.to_string())
    }

    fn fim_markers(&self) -> Option<FimMarkers> {
        self.0.fim().map(|f| FimMarkers { prefix: f.prefix.clone(), suffix: f.suffix.clone(), middle: f.middle.clone() })
    }
}

/// The request for one CrossCodeEval example, as the worker and the dataset builder's model
/// filter send it: the official prompt budgeted with the model's `tokenizer` (an endpoint,
/// with none, gets the context and prompt as they are and truncates on its side), stopped at
/// the end of the statement.
pub fn cceval_request(
    tokenizer: Option<&TextTokenizer>,
    language: Language,
    example: &Example,
    crossfile: Option<&str>,
    budget: &PromptBudget,
    sampling: Sampling,
) -> Result<Request, PromptError> {
    let prompt = match tokenizer {
        Some(tokenizer) => cceval_prompt(&EnginePromptTokenizer(tokenizer), &example.prompt, crossfile, budget)?,
        None => match crossfile {
            Some(context) => format!("{context}\n{}", example.prompt),
            None => example.prompt.clone(),
        },
    };
    let stop: Arc<dyn StopPredicate> = Arc::new(StatementStop(Mutex::new(StatementEnd::new(language, &example.prompt))));
    Ok(Request {
        sampling,
        predicate: Some(stop),
        ..Request::greedy(example.task_id.clone(), prompt, budget.generation_max_tokens)
    })
}

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
    backend: &TextModel,
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
    let sampling = sampling(g);
    let requests = examples
        .iter()
        .map(|p| cceval_request(backend.tokenizer(), language, &p.example, p.crossfile.as_deref(), &budget, sampling))
        .collect::<Result<Vec<Request>, PromptError>>()
        .map_err(|e| input(format!("cannot build the prompt: {e}")))?;
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
