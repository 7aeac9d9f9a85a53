//! The official CrossCodeEval prompt (amazon-science/cceval `scripts/vllm_inference.py`,
//! `prepare_prompt` and `truncate`): token budgets, the in-file prompt left-truncated, the
//! cross-file context right-truncated, and a fill-in-the-middle variant. Any tokenizer serves
//! through [`PromptTokenizer`]; the engine's adapter lives with the worker.

/// Which end of an over-budget text to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The last tokens (left truncation).
    End,
    /// The first tokens (right truncation).
    Start,
}

/// A model's fill-in-the-middle markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FimMarkers {
    /// Starts the code before the hole.
    pub prefix: String,
    /// Starts the code after the hole.
    pub suffix: String,
    /// Asks for the middle.
    pub middle: String,
}

/// What prompt building needs of a tokenizer.
pub trait PromptTokenizer {
    /// The official `truncate`: `text` tokenized without special tokens; when over
    /// `max_tokens`, that many tokens kept from one end and decoded back to text (a cut inside
    /// a character decodes to U+FFFD, as Python's `errors="replace"`). Errors are the tokenizer's.
    fn truncate(&self, text: &str, max_tokens: usize, keep: Keep) -> Result<String, String>;

    /// The fill-in-the-middle markers, when the model has them.
    fn fim_markers(&self) -> Option<FimMarkers> {
        None
    }
}

/// Why a prompt could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    /// The budgets leave no tokens for the in-file prompt.
    #[error("model_max_tokens {model_max_tokens} leaves no room after generation {generation}, buffer {buffer} and cross-file {crossfile}")]
    NoRoom {
        /// `model_max_tokens`.
        model_max_tokens: usize,
        /// `generation_max_tokens`.
        generation: usize,
        /// `buffer`.
        buffer: usize,
        /// The cross-file budget reserved (0 without context).
        crossfile: usize,
    },
    /// The tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A FIM prompt for a model without FIM markers.
    #[error("the model has no fill-in-the-middle tokens; use the left-to-right prompt")]
    NoFim,
}

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
    pub fn prompt_tokens(&self, with_crossfile: bool) -> Result<usize, PromptError> {
        let crossfile = if with_crossfile { self.crossfile_max_tokens } else { 0 };
        let reserved = self.generation_max_tokens + self.buffer + crossfile;
        self.model_max_tokens.checked_sub(reserved).filter(|&n| n > 0).ok_or(PromptError::NoRoom {
            model_max_tokens: self.model_max_tokens,
            generation: self.generation_max_tokens,
            buffer: self.buffer,
            crossfile,
        })
    }
}

fn cut(tokenizer: &dyn PromptTokenizer, text: &str, max_tokens: usize, keep: Keep) -> Result<String, PromptError> {
    tokenizer.truncate(text, max_tokens, keep).map_err(PromptError::Tokenizer)
}

/// The official CrossCodeEval prompt: the in-file prompt left-truncated to its budget, the
/// cross-file context right-truncated to its budget, joined as `context + "\n" + prompt`
/// (without context the official script still prepends the newline).
pub fn cceval_prompt(
    tokenizer: &dyn PromptTokenizer,
    prompt: &str,
    crossfile: Option<&str>,
    budget: &PromptBudget,
) -> Result<String, PromptError> {
    let prompt = cut(tokenizer, prompt, budget.prompt_tokens(crossfile.is_some())?, Keep::End)?;
    let context = match crossfile {
        Some(c) => cut(tokenizer, c, budget.crossfile_max_tokens, Keep::Start)?,
        None => String::new(),
    };
    Ok(format!("{context}\n{prompt}"))
}

/// A prefix-suffix-middle FIM prompt: the CrossCodeEval prompt as prefix (with room made for
/// the suffix and the three markers), `right_context` right-truncated to `suffix_tokens` as suffix.
pub fn cceval_fim_prompt(
    tokenizer: &dyn PromptTokenizer,
    prompt: &str,
    crossfile: Option<&str>,
    right_context: &str,
    suffix_tokens: usize,
    budget: &PromptBudget,
) -> Result<String, PromptError> {
    let fim = tokenizer.fim_markers().ok_or(PromptError::NoFim)?;
    let reduced = PromptBudget { model_max_tokens: budget.model_max_tokens.saturating_sub(suffix_tokens + 3), ..*budget };
    let prefix = cceval_prompt(tokenizer, prompt, crossfile, &reduced)?;
    let suffix = cut(tokenizer, right_context, suffix_tokens, Keep::Start)?;
    Ok(format!("{}{prefix}{}{suffix}{}", fim.prefix, fim.suffix, fim.middle))
}

#[cfg(test)]
mod tests {
    //! Checked against amazon-science/cceval `scripts/vllm_inference.py` (`truncate`,
    //! `prepare_prompt`, the budgets in `cceval_generate`); `openai_inference.py` does the same.
    use super::*;

    /// A byte-level tokenizer without merges: one token per byte, so budgets read as byte
    /// counts; decoding a cut inside a character gives U+FFFD, as byte-level BPEs do.
    struct Bytes {
        fim: bool,
    }

    impl PromptTokenizer for Bytes {
        fn truncate(&self, text: &str, max_tokens: usize, keep: Keep) -> Result<String, String> {
            let bytes = text.as_bytes();
            if bytes.len() <= max_tokens {
                return Ok(text.to_string());
            }
            let kept = match keep {
                Keep::End => &bytes[bytes.len() - max_tokens..],
                Keep::Start => &bytes[..max_tokens],
            };
            Ok(String::from_utf8_lossy(kept).into_owned())
        }

        fn fim_markers(&self) -> Option<FimMarkers> {
            self.fim.then(|| FimMarkers { prefix: "<|fim_prefix|>".into(), suffix: "<|fim_suffix|>".into(), middle: "<|fim_middle|>".into() })
        }
    }

    const T: Bytes = Bytes { fim: false };

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
    fn in_file_prompt_is_left_truncated_to_its_budget() {
        let b = budget(10, 100);
        // Without context the whole model budget minus generation and buffer is the prompt's.
        assert_eq!(b.prompt_tokens(false).unwrap(), 110);
        assert_eq!(cceval_prompt(&T, "0123456789abcdef", None, &b).unwrap(), "\n0123456789abcdef");
        let small = PromptBudget { model_max_tokens: 17, ..b };
        assert_eq!(small.prompt_tokens(false).unwrap(), 10);
        // Over budget: the last tokens are kept; the official script still prepends "\n".
        assert_eq!(cceval_prompt(&T, "0123456789abcdef", None, &small).unwrap(), "\n6789abcdef");
        // Exactly at the budget nothing is cut (the script's `num_tokens > max_num_tokens`).
        assert_eq!(cceval_prompt(&T, "0123456789", None, &small).unwrap(), "\n0123456789");
    }

    #[test]
    fn cross_file_context_is_right_truncated_and_joined_with_a_newline() {
        let b = budget(10, 8);
        let context = "# a.py\nimport os\nimport sys\n";
        let prompt = "x = compute_something(1)\ny = ";
        let got = cceval_prompt(&T, prompt, Some(context), &b).unwrap();
        // Context keeps its first 8 tokens, the prompt its last 10: `<CFC>\n<PROMPT>`.
        assert_eq!(got, "# a.py\ni\nng(1)\ny = ");
        assert_eq!(got, format!("{}\n{}", &context[..8], &prompt[prompt.len() - 10..]));
        // Context within budget is kept whole.
        assert_eq!(cceval_prompt(&T, "y = ", Some("# b"), &b).unwrap(), "# b\ny = ");
        // An empty context still reserves its budget, as `use_crossfile_context` does.
        assert_eq!(cceval_prompt(&T, prompt, Some(""), &b).unwrap(), format!("\n{}", &prompt[prompt.len() - 10..]));
    }

    #[test]
    fn fim_prompt_is_prefix_suffix_middle() {
        let t = Bytes { fim: true };
        let b = budget(20, 8);
        let prompt = "def area(r):\n    return ";
        let right = " * r * r\n\ndef perimeter(r):\n    return 2 * 3.14 * r\n";
        let got = cceval_fim_prompt(&t, prompt, Some("# shapes"), right, 6, &b).unwrap();
        // The prefix is the left-to-right prompt with room made for the suffix and the 3 markers.
        let reduced = PromptBudget { model_max_tokens: b.model_max_tokens - 6 - 3, ..b };
        let prefix = cceval_prompt(&t, prompt, Some("# shapes"), &reduced).unwrap();
        assert_eq!(prefix, "# shapes\n    return ");
        assert_eq!(got, format!("<|fim_prefix|>{prefix}<|fim_suffix|> * r *<|fim_middle|>"));
        assert_eq!(cceval_fim_prompt(&T, prompt, None, right, 6, &b).unwrap_err(), PromptError::NoFim);
    }
}
