//! Encoder hyper-parameters from a Hugging Face `config.json` (`bert`, `roberta`).

use std::path::Path;

use serde_json::Value as Json;

use crate::error::{EngineError, Result};

/// `model_type` values the embedder runs.
pub const ENCODER_TYPES: &[&str] = &["bert", "roberta", "xlm-roberta"];

/// The encoder families: they share the post-norm block and differ in where positions start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderKind {
    /// BERT (all-MiniLM, CodeBERT-style BERTs): positions `0, 1, 2, …`.
    Bert,
    /// RoBERTa (UniXcoder, CodeBERT, XLM-R): positions `padding_idx + 1, padding_idx + 2, …` for
    /// every token that is not the pad token, and `padding_idx` for pad tokens (Hugging Face
    /// `create_position_ids_from_input_ids`).
    Roberta,
}

/// The MLP activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact, erf-based GELU.
    Gelu,
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`: the tanh approximation.
    GeluTanh,
    /// `relu`.
    Relu,
    /// `silu` / `swish`.
    Silu,
}

/// Hyper-parameters of a BERT-family encoder.
#[derive(Debug, Clone, PartialEq)]
pub struct EncoderConfig {
    /// Which position rule applies.
    pub kind: EncoderKind,
    /// Rows of the word-embedding table.
    pub vocab_size: usize,
    /// Width of the hidden states (and of the embeddings).
    pub hidden_size: usize,
    /// Number of encoder blocks.
    pub num_layers: usize,
    /// Attention heads per block.
    pub num_heads: usize,
    /// Width of the MLP's inner layer.
    pub intermediate_size: usize,
    /// Rows of the position-embedding table.
    pub max_position_embeddings: usize,
    /// Rows of the token-type table (every token uses type 0).
    pub type_vocab_size: usize,
    /// Epsilon of every LayerNorm.
    pub layer_norm_eps: f64,
    /// The MLP activation.
    pub activation: Activation,
    /// Id of the pad token (`pad_token_id`; RoBERTa's `padding_idx`).
    pub pad_token_id: u32,
}

impl EncoderConfig {
    /// Reads `config.json` at `path` (parsed as `json`); errors name the file and the field.
    pub fn from_hf_json(path: &Path, json: &Json) -> Result<Self> {
        let field = |key: &str, message: String| EngineError::Metadata { path: path.to_path_buf(), key: key.into(), message };
        let usize_of = |key: &str, default: Option<usize>| -> Result<usize> {
            match json.get(key) {
                None | Some(Json::Null) => default.ok_or_else(|| field(key, "missing".into())),
                Some(v) => v
                    .as_u64()
                    .and_then(|v| usize::try_from(v).ok())
                    .ok_or_else(|| field(key, format!("expected a non-negative integer, found {v}"))),
            }
        };
        let model_type = json.get("model_type").and_then(Json::as_str).ok_or_else(|| field("model_type", "missing or not a string".into()))?;
        let kind = match model_type {
            "bert" => EncoderKind::Bert,
            "roberta" | "xlm-roberta" => EncoderKind::Roberta,
            other => {
                return Err(field(
                    "model_type",
                    format!("`{other}` is not an encoder the embedder runs; supported: {}", ENCODER_TYPES.join(", ")),
                ))
            }
        };
        if let Some(p) = json.get("position_embedding_type").and_then(Json::as_str) {
            if p != "absolute" {
                return Err(field("position_embedding_type", format!("`{p}` is not supported; only `absolute`")));
            }
        }
        let activation = match json.get("hidden_act").map(|v| v.as_str()) {
            None | Some(Some("gelu")) => Activation::Gelu,
            Some(Some("gelu_new" | "gelu_pytorch_tanh" | "gelu_fast")) => Activation::GeluTanh,
            Some(Some("relu")) => Activation::Relu,
            Some(Some("silu" | "swish")) => Activation::Silu,
            Some(other) => {
                return Err(field("hidden_act", format!("{other:?} is not supported; supported: gelu, gelu_new, relu, silu")))
            }
        };
        let layer_norm_eps = match json.get("layer_norm_eps") {
            None | Some(Json::Null) => 1e-12,
            Some(v) => v.as_f64().ok_or_else(|| field("layer_norm_eps", format!("expected a number, found {v}")))?,
        };
        let default_pad = if kind == EncoderKind::Roberta { 1 } else { 0 };
        let pad = usize_of("pad_token_id", Some(default_pad))?;
        let config = Self {
            kind,
            vocab_size: usize_of("vocab_size", None)?,
            hidden_size: usize_of("hidden_size", None)?,
            num_layers: usize_of("num_hidden_layers", None)?,
            num_heads: usize_of("num_attention_heads", None)?,
            intermediate_size: usize_of("intermediate_size", None)?,
            max_position_embeddings: usize_of("max_position_embeddings", None)?,
            type_vocab_size: usize_of("type_vocab_size", Some(2))?,
            layer_norm_eps,
            activation,
            pad_token_id: u32::try_from(pad).map_err(|_| field("pad_token_id", format!("{pad} is too large")))?,
        };
        if config.num_heads == 0 || !config.hidden_size.is_multiple_of(config.num_heads) {
            return Err(field(
                "num_attention_heads",
                format!("hidden_size {} is not divisible into {} heads", config.hidden_size, config.num_heads),
            ));
        }
        if config.num_layers == 0 || config.type_vocab_size == 0 {
            return Err(field("num_hidden_layers", "the encoder has no layers or no token types".into()));
        }
        if config.max_tokens() == 0 {
            return Err(field("max_position_embeddings", format!("{} leaves no usable positions", config.max_position_embeddings)));
        }
        Ok(config)
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// Longest input, special tokens included, the position table can hold: RoBERTa's first
    /// `padding_idx + 1` rows are never used by real tokens.
    pub fn max_tokens(&self) -> usize {
        match self.kind {
            EncoderKind::Bert => self.max_position_embeddings,
            EncoderKind::Roberta => self.max_position_embeddings.saturating_sub(self.pad_token_id as usize + 1),
        }
    }
}

/// Whether `path` is a Hugging Face directory whose `config.json` names an encoder the embedder
/// runs (a quick look for callers choosing between [`crate::Model`] and [`super::Embedder`]).
pub fn is_encoder_dir(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path.join("config.json")) else { return false };
    let Ok(json) = serde_json::from_str::<Json>(&text) else { return false };
    json.get("model_type").and_then(Json::as_str).is_some_and(|t| ENCODER_TYPES.contains(&t))
}
