//! Token-budgeted prompts: the official CrossCodeEval prompt (vLLM script budgets) and a
//! fill-in-the-middle variant for models with FIM tokens.

use crate::error::{EngineError, Result};
use crate::tokenizer::TextTokenizer;

/// Token budgets, defaulting to the official `scripts/vllm_inference.py` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptBudget {
    /// `--model_max_tokens` (16384).
    pub model_max_tokens: usize,
    /// `--crossfile_max_tokens` (12800).
    pub crossfile_max_tokens: usize,
    /// `--generation_max_tokens` (50).
    pub generation_max_tokens: usize,
    /// The script's `BUFFER` for tokenizers that do not round-trip (100).
    pub buffer: usize,
}

impl Default for PromptBudget {
    fn default() -> Self {
        Self { model_max_tokens: 16_384, crossfile_max_tokens: 12_800, generation_max_tokens: 50, buffer: 100 }
    }
}

impl PromptBudget {
    /// Tokens left for the in-file prompt: with cross-file context the context's budget is reserved.
    pub fn prompt_tokens(&self, with_crossfile: bool) -> Result<usize> {
        let reserved = self.generation_max_tokens + self.buffer + if with_crossfile { self.crossfile_max_tokens } else { 0 };
        self.model_max_tokens.checked_sub(reserved).filter(|&n| n > 0).ok_or_else(|| EngineError::Request {
            id: "prompt budget".into(),
            message: format!(
                "model_max_tokens {} leaves no room after generation {}, buffer {} and cross-file {}",
                self.model_max_tokens,
                self.generation_max_tokens,
                self.buffer,
                if with_crossfile { self.crossfile_max_tokens } else { 0 }
            ),
        })
    }
}

/// Which end of the text to keep when it is over budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Keep the last tokens (left truncation).
    End,
    /// Keep the first tokens (right truncation).
    Start,
}

/// The official `truncate`: tokenize without special tokens; if over `max_tokens`, keep that many
/// tokens from one end and turn them back into text.
pub fn truncate(tokenizer: &TextTokenizer, text: &str, max_tokens: usize, keep: Keep) -> Result<String> {
    let ids = tokenizer.tokenize(text)?;
    if ids.len() <= max_tokens {
        return Ok(text.to_string());
    }
    let kept = match keep {
        Keep::End => &ids[ids.len() - max_tokens..],
        Keep::Start => &ids[..max_tokens],
    };
    tokenizer.inner().decode(kept, false).map_err(|e| EngineError::Tokenizer(e.to_string()))
}

/// The official CrossCodeEval prompt: the in-file prompt left-truncated to its budget, the
/// cross-file context right-truncated to its budget, joined as `context + "\n" + prompt`
/// (without context the official script still prepends the newline).
pub fn cceval_prompt(tokenizer: &TextTokenizer, prompt: &str, crossfile: Option<&str>, budget: &PromptBudget) -> Result<String> {
    let prompt = truncate(tokenizer, prompt, budget.prompt_tokens(crossfile.is_some())?, Keep::End)?;
    let context = match crossfile {
        Some(c) => truncate(tokenizer, c, budget.crossfile_max_tokens, Keep::Start)?,
        None => String::new(),
    };
    Ok(format!("{context}\n{prompt}"))
}

/// A prefix-suffix-middle FIM prompt: the CrossCodeEval prompt as prefix, `right_context`
/// right-truncated to `suffix_tokens` as suffix. Errors if the tokenizer has no FIM tokens.
pub fn cceval_fim_prompt(
    tokenizer: &TextTokenizer,
    prompt: &str,
    crossfile: Option<&str>,
    right_context: &str,
    suffix_tokens: usize,
    budget: &PromptBudget,
) -> Result<String> {
    let fim = tokenizer
        .fim()
        .ok_or_else(|| EngineError::Tokenizer("the model has no fill-in-the-middle tokens; use the left-to-right prompt".into()))?
        .clone();
    let mut reduced = *budget;
    reduced.model_max_tokens = budget.model_max_tokens.saturating_sub(suffix_tokens + 3);
    let prefix = cceval_prompt(tokenizer, prompt, crossfile, &reduced)?;
    let suffix = truncate(tokenizer, right_context, suffix_tokens, Keep::Start)?;
    Ok(format!("{}{prefix}{}{suffix}{}", fim.prefix, fim.suffix, fim.middle))
}
