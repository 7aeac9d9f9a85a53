//! RepoQA shards: one repository's needles, contexts sized with the official harness's
//! tokenizer (or the one the spec names), the official instruction (inside the model's chat
//! template when it has one), and the official verdicts.

use std::time::Instant;

use codesweep_engine::{ChatMessage, Request, TextModel};
use codesweep_store::records::{ExampleResult, ShardHeader, ShardTotals};
use codesweep_tasks::repoqa::context::{build_snf_tasks, CommentMode, SourceDataset, TokenizeError};
use codesweep_fetch::grammars::choose_grammars;
use codesweep_tasks::repoqa::shard::{score_answers, shard_dataset};
use codesweep_tasks::repoqa::{Language, ModelOutput, RepoqaScorer};
use serde_json::{json, Value};

use crate::backend::{generate_shard, sampling};
use crate::context_tokenizer::ContextTokenizer;
use crate::error::WorkerError;
use crate::shard_control::ShardControl;

/// Runs one RepoQA shard (one repository of one language), sizing contexts with
/// `context_tokenizer` (resolved from the shard's `context_tokenizer` option).
pub fn run_repoqa_shard(
    backend: &TextModel,
    context_tokenizer: &ContextTokenizer,
    key: &str,
    header: &ShardHeader,
    records: &[Value],
    control: &ShardControl,
) -> Result<(Vec<ExampleResult>, ShardTotals), WorkerError> {
    let started = Instant::now();
    let input = |message: String| WorkerError::Input { key: key.to_string(), message };
    let options = header.repoqa.clone().unwrap_or_default();
    let language: Language = header.language.parse().map_err(input)?;
    let mode: CommentMode = options.comment_mode.parse().map_err(input)?;
    let (dataset, document) = shard_dataset(key, &header.language, records).map_err(input)?;
    let source = SourceDataset::from_json(key, &document).map_err(|e| input(e.to_string()))?;
    let grammars = choose_grammars(&options.grammars).map_err(|e| input(e.to_string()))?;
    let tokenizer = match context_tokenizer {
        ContextTokenizer::Loaded(tokenizer) => tokenizer.as_ref(),
        ContextTokenizer::Model => backend.tokenizer().ok_or_else(|| {
            input(format!(
                "`context_tokenizer = \"model\"` sizes contexts in the model's tokens: give endpoint model {:?} a \
                 `tokenizer` (its tokenizer.json)",
                header.model.name
            ))
        })?,
    };
    let count = |text: &str| -> Result<usize, TokenizeError> {
        tokenizer.tokenize(text).map(|ids| ids.len()).map_err(|e| Box::new(e) as TokenizeError)
    };
    let tasks = build_snf_tasks(&source, language, options.code_context_size, mode, &count, &grammars)
        .map_err(|e| input(e.to_string()))?;
    // A local model's own chat template; an endpoint applies its template server-side (`chat`)
    // or gets the instruction as is. A template codesweep cannot render is reported, and the
    // instruction goes as is.
    let template = backend.chat_template().unwrap_or_else(|e| {
        tracing::warn!(model = %header.model.name, "RepoQA instructions go without the chat template: {e}");
        None
    });
    let backend = &backend.for_instructions();
    let g = &header.generation;
    let sampling = sampling(g);
    let mut requests = Vec::with_capacity(tasks.len());
    for task in &tasks {
        let user = task.prompt();
        let prompt = match &template {
            Some(t) => t
                .render(&[ChatMessage::new("user", user)])
                .map_err(|source| WorkerError::Engine { model: header.model.name.clone(), source })?,
            None => user,
        };
        requests.push(Request { sampling, ..Request::greedy(task.task_id(), prompt, options.max_new_tokens) });
    }
    let completions = generate_shard(backend, &header.model.name, &requests, g, control)?;
    let answers: Vec<ModelOutput> = tasks
        .iter()
        .zip(&completions)
        .map(|(task, c)| ModelOutput {
            language: header.language.clone(),
            repo: task.repo.clone(),
            name: task.name.clone(),
            output: c.text.clone(),
            position_ratio: json!(task.position_ratio),
            needle_token_start: json!(task.context.needle_token_start),
            needle_token_end: json!(task.context.needle_token_end),
        })
        .collect();
    let mut scorer = RepoqaScorer::new(options.ignore_comments, grammars);
    let verdicts = score_answers(&mut scorer, language, &dataset, key, &answers).map_err(input)?;
    let mut totals = ShardTotals { examples: tasks.len(), ..ShardTotals::default() };
    let mut results = Vec::with_capacity(tasks.len());
    for ((task, c), verdict) in tasks.iter().zip(&completions).zip(verdicts) {
        totals.prompt_tokens += c.prompt_tokens as u64;
        totals.generated_tokens += c.generated_tokens as u64;
        results.push(ExampleResult {
            task_id: task.task_id(),
            completion: c.text.clone(),
            prediction: verdict.best_target.clone().unwrap_or_default(),
            prompt_tokens: c.prompt_tokens,
            generated_tokens: c.generated_tokens,
            stop_reason: c.stop_reason.as_str().to_string(),
            seconds: c.elapsed.as_secs_f64(),
            metrics: verdict.to_json(),
            task: Some(task.to_json()),
        });
    }
    totals.seconds = started.elapsed().as_secs_f64();
    Ok((results, totals))
}
