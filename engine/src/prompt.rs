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

#[cfg(test)]
mod tests {
    //! Checked against amazon-science/cceval `scripts/vllm_inference.py` (`truncate`,
    //! `prepare_prompt`, the budgets in `cceval_generate`); `openai_inference.py` does the same.
    use super::*;
    use serde_json::json;

    /// One token per byte (a byte-level BPE without merges), so budgets read as byte counts;
    /// with Qwen's FIM markers as special tokens when `fim`.
    fn bytes_tokenizer(fim: bool) -> TextTokenizer {
        let mut alphabet: Vec<char> = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet().into_iter().collect();
        alphabet.sort_unstable();
        let mut vocab = serde_json::Map::new();
        for (i, c) in alphabet.iter().enumerate() {
            vocab.insert(c.to_string(), json!(i));
        }
        let markers = if fim { vec!["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"] } else { vec![] };
        let added: Vec<serde_json::Value> = markers
            .iter()
            .enumerate()
            .map(|(i, m)| json!({"id": 256 + i, "content": m, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}))
            .collect();
        let doc = json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": added, "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": vocab, "merges": []}
        });
        TextTokenizer::from_json(&doc.to_string(), vec![]).expect("byte tokenizer")
    }

    /// Budgets leaving `prompt` tokens for the in-file prompt when cross-file context is given.
    fn budget(prompt: usize, crossfile: usize) -> PromptBudget {
        PromptBudget { model_max_tokens: prompt + crossfile + 2 + 5, crossfile_max_tokens: crossfile, generation_max_tokens: 2, buffer: 5 }
    }

    #[test]
    fn default_budgets_are_the_official_script_defaults() {
        let b = PromptBudget::default();
        assert_eq!((b.model_max_tokens, b.crossfile_max_tokens, b.generation_max_tokens, b.buffer), (16_384, 12_800, 50, 100));
        // model_max - generation - crossfile - BUFFER, and without context model_max - generation - BUFFER.
        assert_eq!(b.prompt_tokens(true).unwrap(), 16_384 - 50 - 12_800 - 100);
        assert_eq!(b.prompt_tokens(false).unwrap(), 16_384 - 50 - 100);
        let tight = PromptBudget { model_max_tokens: 12_950, ..b };
        let err = tight.prompt_tokens(true).unwrap_err().to_string();
        assert!(err.contains("12950") && err.contains("12800"), "{err}");
        assert_eq!(tight.prompt_tokens(false).unwrap(), 12_800);
    }

    #[test]
    fn the_tokenizer_counts_one_token_per_byte() {
        let t = bytes_tokenizer(false);
        assert_eq!(t.tokenize("def f(x):\n\treturn x").unwrap().len(), 19);
        assert_eq!(t.tokenize("é").unwrap().len(), 2);
    }

    #[test]
    fn in_file_prompt_is_left_truncated_to_its_budget() {
        let t = bytes_tokenizer(false);
        let b = budget(10, 100);
        // Without context the whole model budget minus generation and buffer is the prompt's.
        assert_eq!(b.prompt_tokens(false).unwrap(), 110);
        assert_eq!(cceval_prompt(&t, "0123456789abcdef", None, &b).unwrap(), "\n0123456789abcdef");
        let small = PromptBudget { model_max_tokens: 17, ..b };
        assert_eq!(small.prompt_tokens(false).unwrap(), 10);
        // Over budget: the last tokens are kept; the official script still prepends "\n".
        assert_eq!(cceval_prompt(&t, "0123456789abcdef", None, &small).unwrap(), "\n6789abcdef");
        // Exactly at the budget nothing is cut (the script's `num_tokens > max_num_tokens`).
        assert_eq!(cceval_prompt(&t, "0123456789", None, &small).unwrap(), "\n0123456789");
    }

    #[test]
    fn cross_file_context_is_right_truncated_and_joined_with_a_newline() {
        let t = bytes_tokenizer(false);
        let b = budget(10, 8);
        let context = "# a.py\nimport os\nimport sys\n";
        let prompt = "x = compute_something(1)\ny = ";
        let got = cceval_prompt(&t, prompt, Some(context), &b).unwrap();
        // Context keeps its first 8 tokens, the prompt its last 10: `<CFC>\n<PROMPT>`.
        assert_eq!(got, "# a.py\ni\nng(1)\ny = ");
        assert_eq!(got, format!("{}\n{}", &context[..8], &prompt[prompt.len() - 10..]));
        // Context within budget is kept whole.
        assert_eq!(cceval_prompt(&t, "y = ", Some("# b"), &b).unwrap(), "# b\ny = ");
        // An empty context still reserves its budget, as `use_crossfile_context` does.
        assert_eq!(cceval_prompt(&t, prompt, Some(""), &b).unwrap(), format!("\n{}", &prompt[prompt.len() - 10..]));
    }

    #[test]
    fn a_cut_inside_a_character_decodes_like_python_errors_replace() {
        let t = bytes_tokenizer(false);
        // "aé" is 3 bytes; keeping the last one leaves half of "é", which decodes to U+FFFD.
        assert_eq!(truncate(&t, "aé", 1, Keep::End).unwrap(), "\u{fffd}");
        assert_eq!(truncate(&t, "aé", 2, Keep::Start).unwrap(), "a\u{fffd}");
        assert_eq!(truncate(&t, "aé", 3, Keep::Start).unwrap(), "aé");
    }

    #[test]
    fn fim_prompt_is_prefix_suffix_middle() {
        let t = bytes_tokenizer(true);
        let b = budget(20, 8);
        let prompt = "def area(r):\n    return ";
        let right = " * r * r\n\ndef perimeter(r):\n    return 2 * 3.14 * r\n";
        let got = cceval_fim_prompt(&t, prompt, Some("# shapes"), right, 6, &b).unwrap();
        // The prefix is the left-to-right prompt with room made for the suffix and the 3 markers.
        let reduced = PromptBudget { model_max_tokens: b.model_max_tokens - 6 - 3, ..b };
        let prefix = cceval_prompt(&t, prompt, Some("# shapes"), &reduced).unwrap();
        assert_eq!(prefix, "# shapes\n    return ");
        assert_eq!(got, format!("<|fim_prefix|>{prefix}<|fim_suffix|> * r *<|fim_middle|>"));
        // The markers are single special tokens.
        let ids = t.tokenize(&got).unwrap();
        assert_eq!(ids.len(), 3 + prefix.len() + 6);
        assert_eq!((ids[0], ids[1 + prefix.len()], ids[ids.len() - 1]), (256, 257, 258));
        let err = cceval_fim_prompt(&bytes_tokenizer(false), prompt, None, right, 6, &b).unwrap_err().to_string();
        assert!(err.contains("fill-in-the-middle"), "{err}");
    }
}
