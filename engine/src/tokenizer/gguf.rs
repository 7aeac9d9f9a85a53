//! Rebuilds a Hugging Face `tokenizer.json` document from GGUF `tokenizer.ggml.*` metadata, so a
//! GGUF-only model tokenizes exactly as its original tokenizer did.
//!
//! `gpt2` models are byte-level BPE with the pre-tokenizer named by `tokenizer.ggml.pre`; `llama`
//! models are SentencePiece BPE whose merges are recovered from the piece scores.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use serde_json::{json, Map, Value as Json};

use crate::config::gguf_to_usize;
use crate::error::{EngineError, Result};

const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// `tokenizer.ggml.pre` values we rebuild, for error messages.
const SUPPORTED_PRE: &[&str] = &["qwen2", "llama-bpe", "llama3", "deepseek-coder", "starcoder", "refact", "gpt-2", "default"];

/// GGUF token types (llama.cpp `llama_token_type`).
const TOKEN_CONTROL: i64 = 3;
const TOKEN_USER_DEFINED: i64 = 4;

/// What the rebuilt tokenizer needs besides the JSON document.
#[derive(Debug, Clone)]
pub struct GgufTokenizer {
    /// The `tokenizer.json` document.
    pub json: String,
    /// End-of-sequence ids (`eos_token_id`, plus `eot_token_id` when present).
    pub eos_ids: Vec<u32>,
}

struct Meta<'a> {
    path: &'a Path,
    md: &'a HashMap<String, Value>,
}

impl Meta<'_> {
    fn error(&self, key: &str, message: impl Into<String>) -> EngineError {
        EngineError::Metadata { path: self.path.to_path_buf(), key: key.into(), message: message.into() }
    }
    fn array(&self, key: &str) -> Result<&Vec<Value>> {
        self.md.get(key).ok_or_else(|| self.error(key, "missing"))?.to_vec().map_err(|e| self.error(key, e.to_string()))
    }
    fn strings(&self, key: &str) -> Result<Vec<&str>> {
        self.array(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| v.to_string().map(String::as_str).map_err(|e| self.error(&format!("{key}[{i}]"), e.to_string())))
            .collect()
    }
    fn string(&self, key: &str) -> Option<&str> {
        self.md.get(key).and_then(|v| v.to_string().ok()).map(String::as_str)
    }
    fn id(&self, key: &str) -> Option<u32> {
        self.md.get(key).and_then(gguf_to_usize).and_then(|v| u32::try_from(v).ok())
    }
    fn flag(&self, key: &str) -> Option<bool> {
        self.md.get(key).and_then(|v| v.to_bool().ok())
    }
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::I32(x) => Some(*x as i64),
        Value::U32(x) => Some(*x as i64),
        Value::I64(x) => Some(*x),
        Value::I8(x) => Some(*x as i64),
        Value::U8(x) => Some(*x as i64),
        _ => None,
    }
}

fn float_of(v: &Value) -> Option<f64> {
    match v {
        Value::F32(x) => Some(*x as f64),
        Value::F64(x) => Some(*x),
        _ => None,
    }
}

/// Builds the tokenizer of a GGUF file from its metadata.
pub fn tokenizer_json_from_gguf(path: &Path, md: &HashMap<String, Value>) -> Result<GgufTokenizer> {
    let meta = Meta { path, md };
    let model = meta.string("tokenizer.ggml.model").ok_or_else(|| meta.error("tokenizer.ggml.model", "missing"))?;
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    let types: Vec<i64> = match md.get("tokenizer.ggml.token_type") {
        Some(_) => meta.array("tokenizer.ggml.token_type")?.iter().map(|v| int_of(v).unwrap_or(1)).collect(),
        None => vec![1; tokens.len()],
    };
    let bos = meta.id("tokenizer.ggml.bos_token_id");
    let mut eos_ids: Vec<u32> = ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"]
        .iter()
        .filter_map(|k| meta.id(k))
        .collect();
    // Gemma ends a chat turn with `<end_of_turn>`, which llama.cpp also treats as an end.
    let end_of_turn = tokens.iter().zip(&types).position(|(t, ty)| *t == "<end_of_turn>" && *ty == TOKEN_CONTROL);
    if let Some(id) = end_of_turn.map(|id| id as u32).filter(|id| !eos_ids.contains(id)) {
        eos_ids.push(id);
    }
    eos_ids.dedup();

    let added: Vec<Json> = tokens
        .iter()
        .zip(types.iter().chain(std::iter::repeat(&1)))
        .enumerate()
        .filter(|(_, (_, t))| **t == TOKEN_CONTROL || **t == TOKEN_USER_DEFINED)
        .map(|(id, (content, t))| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": *t == TOKEN_CONTROL})
        })
        .collect();
    let vocab: Map<String, Json> = tokens.iter().enumerate().map(|(i, t)| (t.to_string(), json!(i))).collect();

    let doc = match model {
        "gpt2" => {
            let pre = meta.string("tokenizer.ggml.pre").unwrap_or("default");
            let merges: Vec<Json> = meta
                .strings("tokenizer.ggml.merges")?
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    m.split_once(' ')
                        .map(|(a, b)| json!([a, b]))
                        .ok_or_else(|| meta.error(&format!("tokenizer.ggml.merges[{i}]"), format!("`{m}` is not `left right`")))
                })
                .collect::<Result<_>>()?;
            let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": use_regex});
            let split = |re: &str| json!({"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false});
            let (normalizer, pre_tokenizer, ignore_merges) = match pre {
                "qwen2" => (json!({"type": "NFC"}), json!({"type": "Sequence", "pretokenizers": [split(QWEN2_SPLIT), byte_level(false)]}), false),
                "llama-bpe" | "llama3" => (Json::Null, json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_SPLIT), byte_level(false)]}), true),
                "deepseek-coder" => (
                    Json::Null,
                    json!({"type": "Sequence", "pretokenizers": [
                        split(r"[\r\n]"), split(r"\s?\p{L}+"), split(r"\s?\p{P}+"),
                        split("[\u{4e00}-\u{9fa5}\u{0800}-\u{4e00}\u{ac00}-\u{d7ff}]+"),
                        {"type": "Digits", "individual_digits": true}, byte_level(false)]}),
                    false,
                ),
                "starcoder" | "refact" => (
                    Json::Null,
                    json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, byte_level(true)]}),
                    false,
                ),
                "gpt-2" | "default" => (Json::Null, byte_level(true), false),
                other => {
                    return Err(meta.error(
                        "tokenizer.ggml.pre",
                        format!("pre-tokenizer `{other}` is not supported; supported: {}; or use the model's tokenizer.json", SUPPORTED_PRE.join(", ")),
                    ))
                }
            };
            let add_bos = meta.flag("tokenizer.ggml.add_bos_token").unwrap_or(false);
            json!({
                "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
                "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
                "post_processor": post_processor(add_bos, bos, &tokens)?,
                "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
                "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                          "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                          "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}
            })
        }
        "llama" => {
            let scores: Vec<f64> = meta.array("tokenizer.ggml.scores")?.iter().map(|v| float_of(v).unwrap_or(0.0)).collect();
            if scores.len() != tokens.len() {
                return Err(meta.error("tokenizer.ggml.scores", format!("{} scores for {} tokens", scores.len(), tokens.len())));
            }
            let unk = meta.id("tokenizer.ggml.unknown_token_id").and_then(|i| tokens.get(i as usize)).copied();
            let add_bos = meta.flag("tokenizer.ggml.add_bos_token").unwrap_or(true);
            // LLaMA's SentencePiece models put "▁" before the text (and decoding strips it);
            // Gemma's do not (`add_space_prefix` false).
            let space_prefix = meta.flag("tokenizer.ggml.add_space_prefix").unwrap_or(true);
            let replace_spaces = json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"});
            let normalizers = if space_prefix { vec![json!({"type": "Prepend", "prepend": "▁"}), replace_spaces] } else { vec![replace_spaces] };
            let mut decoders = vec![
                json!({"type": "Replace", "pattern": {"String": "▁"}, "content": " "}),
                json!({"type": "ByteFallback"}),
                json!({"type": "Fuse"}),
            ];
            if space_prefix {
                decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
            }
            json!({
                "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
                "normalizer": {"type": "Sequence", "normalizers": normalizers},
                "pre_tokenizer": null,
                "post_processor": post_processor(add_bos, bos, &tokens)?,
                "decoder": {"type": "Sequence", "decoders": decoders},
                "model": {"type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
                          "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
                          "ignore_merges": false, "vocab": vocab, "merges": sentencepiece_merges(&tokens, &scores)}
            })
        }
        other => {
            return Err(meta.error("tokenizer.ggml.model", format!("tokenizer model `{other}` is not supported; supported: gpt2, llama")))
        }
    };
    Ok(GgufTokenizer { json: doc.to_string(), eos_ids })
}

fn post_processor(add_bos: bool, bos: Option<u32>, tokens: &[&str]) -> Result<Json> {
    let Some(bos) = bos.filter(|_| add_bos) else { return Ok(Json::Null) };
    let Some(text) = tokens.get(bos as usize) else {
        return Err(EngineError::Tokenizer(format!("bos_token_id {bos} is outside the vocabulary")));
    };
    Ok(json!({
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": text, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": text, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {*text: {"id": text, "ids": [bos], "tokens": [text]}}
    }))
}

/// Merges of a SentencePiece BPE vocabulary: every split of a piece into two pieces of the
/// vocabulary, ranked by the merged piece's score (higher first), ties in vocabulary order and then
/// by the ids of the halves — the order Hugging Face's converter produces.
fn sentencepiece_merges(tokens: &[&str], scores: &[f64]) -> Vec<Json> {
    let ids: HashMap<&str, usize> = tokens.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    let mut merges: Vec<(f64, usize, usize, usize)> = Vec::new();
    for (merged_id, piece) in tokens.iter().enumerate() {
        let mut local: Vec<(usize, usize)> = piece
            .char_indices()
            .skip(1)
            .filter_map(|(at, _)| Some((*ids.get(&piece[..at])?, *ids.get(&piece[at..])?)))
            .collect();
        local.sort_unstable();
        merges.extend(local.into_iter().map(|(l, r)| (scores[merged_id], merged_id, l, r)));
    }
    // Stable: equal scores keep vocabulary order.
    merges.sort_by(|a, b| b.0.total_cmp(&a.0));
    merges.into_iter().map(|(_, _, l, r)| json!([tokens[l], tokens[r]])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::TextTokenizer;

    /// A SentencePiece vocabulary in GGUF metadata: LLaMA's space prefix or Gemma's none.
    fn spm(space_prefix: Option<bool>) -> HashMap<String, Value> {
        let pieces = ["<unk>", "<bos>", "<eos>", "<end_of_turn>", "▁", "a", "b", "ab", "▁a", "▁ab", "\n"];
        let types = [2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 4];
        let mut md = HashMap::from([
            ("tokenizer.ggml.model".to_string(), Value::String("llama".into())),
            ("tokenizer.ggml.tokens".to_string(), Value::Array(pieces.iter().map(|p| Value::String(p.to_string())).collect())),
            ("tokenizer.ggml.scores".to_string(), Value::Array((0..pieces.len()).map(|i| Value::F32(-(i as f32))).collect())),
            ("tokenizer.ggml.token_type".to_string(), Value::Array(types.iter().map(|t| Value::I32(*t)).collect())),
            ("tokenizer.ggml.bos_token_id".to_string(), Value::U32(1)),
            ("tokenizer.ggml.eos_token_id".to_string(), Value::U32(2)),
            ("tokenizer.ggml.unknown_token_id".to_string(), Value::U32(0)),
        ]);
        if let Some(flag) = space_prefix {
            md.insert("tokenizer.ggml.add_space_prefix".into(), Value::Bool(flag));
        }
        md
    }

    fn load(md: &HashMap<String, Value>) -> TextTokenizer {
        let built = tokenizer_json_from_gguf(Path::new("spm.gguf"), md).unwrap();
        TextTokenizer::from_json(&built.json, built.eos_ids).unwrap()
    }

    #[test]
    fn gemma_vocabularies_have_no_space_prefix_and_end_turns() {
        let gemma = load(&spm(Some(false)));
        // BOS first; "ab" keeps no "▁"; the newline is a user-defined piece of its own.
        assert_eq!(gemma.encode("ab ab\n").unwrap(), vec![1, 7, 9, 10]);
        assert_eq!(gemma.decode(&[7, 9, 10]).unwrap(), "ab ab\n");
        assert_eq!(gemma.eos_ids(), &[2, 3]);

        for llama in [load(&spm(Some(true))), load(&spm(None))] {
            assert_eq!(llama.encode("ab ab").unwrap(), vec![1, 9, 9]);
            assert_eq!(llama.decode(&[9, 9]).unwrap(), "ab ab");
        }
    }
}
