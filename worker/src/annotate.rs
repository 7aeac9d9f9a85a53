//! RepoQA needle descriptions written by a model (local or endpoint), for the dataset builder:
//! each prompt sent as one user turn through the model's chat template.

use std::collections::HashMap;

use codesweep_engine::{ChatMessage, ChatTemplate, GenerateOptions, Request, TextModel};
use codesweep_tasks::dataset::repoqa::{AnnotateError, Annotator};

use crate::error::WorkerError;

/// A model as a RepoQA annotator.
pub struct ModelAnnotator {
    model: TextModel,
    template: Option<ChatTemplate>,
    label: String,
    max_new_tokens: usize,
    on_progress: Box<dyn Fn(usize, usize) + Send + Sync>,
}

impl ModelAnnotator {
    /// Describes with `model`, named `label` in the dataset, up to `max_new_tokens` per answer;
    /// `on_progress(done, total)` follows each answer. Fails when the model's chat template
    /// does not parse (an endpoint applies its own).
    pub fn new(
        model: TextModel,
        label: String,
        max_new_tokens: usize,
        on_progress: Box<dyn Fn(usize, usize) + Send + Sync>,
    ) -> Result<Self, WorkerError> {
        let template = model.chat_template().map_err(|source| WorkerError::Engine { model: label.clone(), source })?;
        Ok(Self { model, template, label, max_new_tokens, on_progress })
    }

    /// Whether prompts go out as plain text: a local model without a chat template.
    pub fn plain_text(&self) -> bool {
        self.template.is_none() && matches!(self.model, TextModel::Local(_))
    }
}

impl Annotator for ModelAnnotator {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn annotate(&self, prompts: &[String]) -> Result<Vec<String>, AnnotateError> {
        let requests = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let prompt = match &self.template {
                    Some(t) => t.render(&[ChatMessage::new("user", p.clone())])?,
                    None => p.clone(),
                };
                Ok(Request::greedy(format!("needle-{i}"), prompt, self.max_new_tokens))
            })
            .collect::<Result<Vec<_>, AnnotateError>>()?;
        let mut done = 0;
        let generation = self.model.for_instructions().generate(&requests, GenerateOptions::default(), |_| {
            done += 1;
            (self.on_progress)(done, requests.len());
        })?;
        let mut by_id: HashMap<String, String> = generation.completions.into_iter().map(|c| (c.id, c.text)).collect();
        requests.iter().map(|r| by_id.remove(&r.id).ok_or_else(|| format!("no answer for {}", r.id).into())).collect()
    }
}
