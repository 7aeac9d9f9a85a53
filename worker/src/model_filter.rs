//! The CrossCodeEval dataset builder's model filter (paper §2.3): which examples a model already
//! completes exactly, through the worker's own request and scoring path.

use std::collections::HashSet;

use codesweep_engine::{GenerateOptions, Generator, Model, Sampling};
use codesweep_tasks::cceval::prompt::PromptBudget;
use codesweep_tasks::cceval::shard::{edit_sim_or_default, score_completions};
use codesweep_tasks::cceval::{Example, Language};

use crate::cceval::cceval_request;
use crate::error::WorkerError;

/// The task ids of `examples` that `model` completes exactly (EM) in-file, greedy, with the
/// official prompt under `budget`, in batches of `batch_size`; `on_done` is called after each
/// completion.
pub fn solved_by_model(
    model: &Model,
    language: Language,
    examples: &[Example],
    budget: &PromptBudget,
    batch_size: usize,
    mut on_done: impl FnMut(),
) -> Result<HashSet<String>, WorkerError> {
    let requests = examples
        .iter()
        .map(|example| {
            cceval_request(Some(&model.tokenizer), language, example, None, budget, Sampling::Greedy)
                .map_err(|e| WorkerError::Input { key: example.task_id.clone(), message: format!("the filter prompt: {e}") })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let options = GenerateOptions { batch_size: batch_size.max(1), ..GenerateOptions::default() };
    let generation = Generator::new(model, options)
        .generate(&requests, |_| on_done())
        .map_err(|source| WorkerError::Engine { model: "the filter model".into(), source })?;
    let completions: Vec<(&str, &str)> = generation.completions.iter().map(|c| (c.id.as_str(), c.text.as_str())).collect();
    let edit_sim = edit_sim_or_default(None).map_err(|message| WorkerError::Input { key: "edit similarity".into(), message })?;
    let scored = score_completions(language, edit_sim, "the built examples", examples, "the filter model's completions", &completions)
        .map_err(|e| WorkerError::Input { key: "the filter model's completions".into(), message: e.to_string() })?;
    Ok(scored.into_iter().filter(|s| s.em).map(|s| s.task_id).collect())
}
