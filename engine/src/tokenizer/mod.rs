//! Tokenizers: a Hugging Face `tokenizer.json`, or one rebuilt from GGUF metadata (see `gguf`).

mod gguf;

use std::path::Path;

use tokenizers::Tokenizer;

use crate::error::{EngineError, Result};

pub use gguf::{tokenizer_json_from_gguf, GgufTokenizer};

/// Fill-in-the-middle marker tokens of a model, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FimTokens {
    /// Starts the code before the hole.
    pub prefix: String,
    /// Starts the code after the hole.
    pub suffix: String,
    /// Asks for the middle.
    pub middle: String,
}

/// Marker spellings of the model families we know, as (prefix, suffix, middle).
const FIM_SPELLINGS: &[(&str, &str, &str)] = &[
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),
    ("▁<PRE>", "▁<SUF>", "▁<MID>"),
];

/// A model's tokenizer with the ids generation needs (end-of-sequence, FIM markers).
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    eos_ids: Vec<u32>,
    fim: Option<FimTokens>,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer").field("eos_ids", &self.eos_ids).field("fim", &self.fim).finish()
    }
}

impl TextTokenizer {
    /// Wraps a `tokenizers` tokenizer; `eos_ids` end generation.
    pub fn new(inner: Tokenizer, eos_ids: Vec<u32>) -> Self {
        let fim = FIM_SPELLINGS.iter().find_map(|(p, s, m)| {
            let has = |t: &str| inner.token_to_id(t).is_some();
            (has(p) && has(s) && has(m)).then(|| FimTokens {
                prefix: p.trim_start_matches('▁').to_string(),
                suffix: s.trim_start_matches('▁').to_string(),
                middle: m.trim_start_matches('▁').to_string(),
            })
        });
        Self { inner, eos_ids, fim }
    }

    /// Reads a `tokenizer.json` file.
    pub fn from_file(path: &Path, eos_ids: Vec<u32>) -> Result<Self> {
        let inner = Tokenizer::from_file(path)
            .map_err(|e| EngineError::Tokenizer(format!("{}: cannot load: {e}", path.display())))?;
        Ok(Self::new(inner, eos_ids))
    }

    /// Parses a `tokenizer.json` document.
    pub fn from_json(json: &str, eos_ids: Vec<u32>) -> Result<Self> {
        let inner: Tokenizer =
            json.parse().map_err(|e| EngineError::Tokenizer(format!("cannot build the tokenizer: {e}")))?;
        Ok(Self::new(inner, eos_ids))
    }

    /// Token ids of `text` with the model's special tokens added (e.g. BOS), as the model expects a prompt.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.encode_with(text, true)
    }

    /// Token ids of `text`; `add_special` adds BOS/EOS the way the tokenizer's post-processor says.
    pub fn encode_with(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        let enc = self.inner.encode(text, add_special).map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Token ids of `text` without special tokens (what the official `tokenizer.tokenize` counts).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        self.encode_with(text, false)
    }

    /// `text` cut to its first, or with `from_end` its last, `max_tokens` tokens (counted
    /// without special tokens) and decoded back to text; unchanged when within budget. A cut
    /// inside a character decodes to U+FFFD, as Python's `errors="replace"` does.
    pub fn keep_tokens(&self, text: &str, max_tokens: usize, from_end: bool) -> Result<String> {
        let ids = self.tokenize(text)?;
        if ids.len() <= max_tokens {
            return Ok(text.to_string());
        }
        let kept = if from_end { &ids[ids.len() - max_tokens..] } else { &ids[..max_tokens] };
        self.inner.decode(kept, false).map_err(|e| EngineError::Tokenizer(e.to_string()))
    }

    /// Text of `ids`, skipping special tokens.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, true).map_err(|e| EngineError::Tokenizer(e.to_string()))
    }

    /// Ids that end generation.
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos_ids
    }

    /// The FIM markers, if the vocabulary has a known set.
    pub fn fim(&self) -> Option<&FimTokens> {
        self.fim.as_ref()
    }

    /// Id of a token string, if in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// sha256 (lower-case hex) of the vocabulary, added tokens included, as one line
    /// `id<TAB>piece` per token in id order: identifies a tokenizer by what it maps, whatever
    /// the layout of the file it was read from.
    pub fn vocabulary_sha256(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut entries: Vec<(u32, String)> = self.inner.get_vocab(true).into_iter().map(|(piece, id)| (id, piece)).collect();
        entries.sort_unstable();
        let mut hasher = Sha256::new();
        for (id, piece) in entries {
            hasher.update(format!("{id}\t{piece}\n").as_bytes());
        }
        hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A byte-level BPE without merges: one token per byte.
    fn bytes_tokenizer() -> TextTokenizer {
        let mut alphabet: Vec<char> = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet().into_iter().collect();
        alphabet.sort_unstable();
        let vocab: serde_json::Map<String, serde_json::Value> =
            alphabet.iter().enumerate().map(|(i, c)| (c.to_string(), json!(i))).collect();
        let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false});
        let doc = json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
            "pre_tokenizer": byte_level, "post_processor": null, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": vocab, "merges": []}
        });
        TextTokenizer::from_json(&doc.to_string(), vec![]).expect("byte tokenizer")
    }

    #[test]
    fn kept_tokens_come_from_either_end_and_a_cut_character_decodes_like_errors_replace() {
        let t = bytes_tokenizer();
        assert_eq!(t.tokenize("def f(x):\n\treturn x").unwrap().len(), 19);
        assert_eq!(t.keep_tokens("0123456789", 4, true).unwrap(), "6789");
        assert_eq!(t.keep_tokens("0123456789", 4, false).unwrap(), "0123");
        assert_eq!(t.keep_tokens("0123", 4, true).unwrap(), "0123");
        // "aé" is 3 bytes; keeping the last one leaves half of "é", which decodes to U+FFFD.
        assert_eq!(t.keep_tokens("aé", 1, true).unwrap(), "\u{fffd}");
        assert_eq!(t.keep_tokens("aé", 2, false).unwrap(), "a\u{fffd}");
        assert_eq!(t.keep_tokens("aé", 3, false).unwrap(), "aé");
    }
}
