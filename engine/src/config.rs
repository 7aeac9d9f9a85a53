//! Model hyper-parameters, read from GGUF metadata or a Hugging Face `config.json`.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use serde_json::Value as Json;

use crate::error::{EngineError, Result};

/// The transformer families the engine runs; each has its own module under `models/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// LLaMA, CodeLlama, DeepSeek-Coder: RMSNorm, SwiGLU, rotary positions, grouped-query attention.
    Llama,
    /// Qwen2 / Qwen2.5-Coder: the LLaMA block with biases on the q/k/v projections.
    Qwen2,
    /// StarCoder2: LayerNorm with bias, GELU MLP, biases everywhere, rotary positions, sliding window.
    Starcoder2,
    /// StarCoder / SantaCoder (`gpt_bigcode`): LayerNorm, GELU MLP, learned positions, multi-query attention.
    GptBigcode,
}

impl Architecture {
    /// The architecture for a GGUF `general.architecture` or `config.json` `model_type` value.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "llama" => Some(Self::Llama),
            "qwen2" => Some(Self::Qwen2),
            "starcoder2" => Some(Self::Starcoder2),
            // llama.cpp calls gpt_bigcode "starcoder".
            "gpt_bigcode" | "starcoder" => Some(Self::GptBigcode),
            _ => None,
        }
    }

    /// The name used in messages and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Starcoder2 => "starcoder2",
            Self::GptBigcode => "gpt_bigcode",
        }
    }
}

/// The hyper-parameters every architecture needs; fields an architecture does not use are ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Which forward pass to run.
    pub architecture: Architecture,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP's inner layer.
    pub intermediate_size: usize,
    /// Number of transformer blocks.
    pub num_layers: usize,
    /// Number of query heads.
    pub num_heads: usize,
    /// Number of key/value heads (1 for multi-query attention).
    pub num_kv_heads: usize,
    /// Width of one attention head.
    pub head_dim: usize,
    /// Longest sequence the model was trained for (prompt plus generation).
    pub max_positions: usize,
    /// Epsilon of RMSNorm / LayerNorm.
    pub norm_eps: f64,
    /// Rotary base frequency.
    pub rope_theta: f64,
    /// Rotary pairs are interleaved `(x0,x1),(x2,x3)…` (llama.cpp's LLaMA GGUF layout) rather than halves.
    pub rope_interleaved: bool,
    /// Sliding-window attention span, if the model uses one.
    pub sliding_window: Option<usize>,
}

impl ModelConfig {
    /// Reads the configuration from GGUF metadata (llama.cpp's key names).
    pub fn from_gguf(path: &Path, metadata: &HashMap<String, Value>) -> Result<Self> {
        let meta = GgufMeta { path, metadata };
        let arch_name = meta.string("general.architecture")?;
        let architecture = Architecture::from_name(arch_name).ok_or_else(|| EngineError::UnsupportedArchitecture {
            path: path.to_path_buf(),
            found: arch_name.to_string(),
        })?;
        let key = |k: &str| format!("{arch_name}.{k}");
        let hidden_size = meta.usize(&key("embedding_length"))?;
        let num_heads = meta.usize(&key("attention.head_count"))?;
        let num_kv_heads = meta.usize_or(&key("attention.head_count_kv"), num_heads)?;
        let head_dim = meta.usize_or(&key("attention.key_length"), hidden_size / num_heads.max(1))?;
        let norm_eps = match architecture {
            Architecture::Llama | Architecture::Qwen2 => meta.f64(&key("attention.layer_norm_rms_epsilon"))?,
            Architecture::Starcoder2 | Architecture::GptBigcode => meta.f64(&key("attention.layer_norm_epsilon"))?,
        };
        if let Some(kind) = meta.metadata.get(&key("rope.scaling.type")) {
            let kind = kind.to_string().map(String::as_str).unwrap_or("?");
            if kind != "none" {
                return Err(meta.error(&key("rope.scaling.type"), format!("rope scaling `{kind}` is not supported")));
            }
        }
        let config = Self {
            architecture,
            hidden_size,
            intermediate_size: meta.usize(&key("feed_forward_length"))?,
            num_layers: meta.usize(&key("block_count"))?,
            num_heads,
            num_kv_heads,
            head_dim,
            max_positions: meta.usize(&key("context_length"))?,
            norm_eps,
            rope_theta: meta.f64_or(&key("rope.freq_base"), 10_000.0)?,
            rope_interleaved: architecture == Architecture::Llama,
            sliding_window: None,
        };
        config.validate(path)?;
        Ok(config)
    }

    /// Reads the configuration from a Hugging Face `config.json` document.
    pub fn from_hf_json(path: &Path, json: &Json) -> Result<Self> {
        let cfg = HfConfig { path, json };
        let model_type = cfg.string("model_type")?;
        if crate::embed::config::ENCODER_TYPES.contains(&model_type) {
            return Err(cfg.error(
                "model_type",
                format!("`{model_type}` is an encoder, which embeds rather than generates: load it with `Embedder` (`codesweep serve --embedder DIR`)"),
            ));
        }
        let architecture = Architecture::from_name(model_type).ok_or_else(|| EngineError::UnsupportedArchitecture {
            path: path.to_path_buf(),
            found: model_type.to_string(),
        })?;
        if let Some(scaling) = json.get("rope_scaling").filter(|v| !v.is_null()) {
            return Err(cfg.error("rope_scaling", format!("rope scaling {scaling} is not supported")));
        }
        let config = if architecture == Architecture::GptBigcode {
            let hidden_size = cfg.usize("n_embd")?;
            let num_heads = cfg.usize("n_head")?;
            let multi_query = json.get("multi_query").and_then(Json::as_bool).unwrap_or(true);
            Self {
                architecture,
                hidden_size,
                intermediate_size: cfg.usize_or("n_inner", 4 * hidden_size)?,
                num_layers: cfg.usize("n_layer")?,
                num_heads,
                num_kv_heads: if multi_query { 1 } else { num_heads },
                head_dim: hidden_size / num_heads.max(1),
                max_positions: cfg.usize("n_positions")?,
                norm_eps: cfg.f64_or("layer_norm_epsilon", 1e-5)?,
                rope_theta: 0.0,
                rope_interleaved: false,
                sliding_window: None,
            }
        } else {
            let hidden_size = cfg.usize("hidden_size")?;
            let num_heads = cfg.usize("num_attention_heads")?;
            let eps_key = if architecture == Architecture::Starcoder2 { "norm_epsilon" } else { "rms_norm_eps" };
            let use_window = architecture == Architecture::Starcoder2
                || json.get("use_sliding_window").and_then(Json::as_bool).unwrap_or(false);
            Self {
                architecture,
                hidden_size,
                intermediate_size: cfg.usize("intermediate_size")?,
                num_layers: cfg.usize("num_hidden_layers")?,
                num_heads,
                num_kv_heads: cfg.usize_or("num_key_value_heads", num_heads)?,
                head_dim: cfg.usize_or("head_dim", hidden_size / num_heads.max(1))?,
                max_positions: cfg.usize("max_position_embeddings")?,
                norm_eps: cfg.f64(eps_key)?,
                rope_theta: cfg.f64_or("rope_theta", 10_000.0)?,
                rope_interleaved: false,
                sliding_window: if use_window { cfg.optional_usize("sliding_window")? } else { None },
            }
        };
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<()> {
        let bad = |key: &str, message: String| EngineError::Metadata {
            path: path.to_path_buf(),
            key: key.to_string(),
            message,
        };
        if self.num_heads == 0 || self.num_kv_heads == 0 || !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(bad(
                "head counts",
                format!("{} query heads cannot be grouped over {} key/value heads", self.num_heads, self.num_kv_heads),
            ));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return Err(bad("head_dim", format!("head width {} must be even and non-zero", self.head_dim)));
        }
        if self.num_layers == 0 || self.hidden_size == 0 {
            return Err(bad("layers", "the model has no layers or a zero hidden size".into()));
        }
        Ok(())
    }
}

struct GgufMeta<'a> {
    path: &'a Path,
    metadata: &'a HashMap<String, Value>,
}

impl GgufMeta<'_> {
    fn error(&self, key: &str, message: String) -> EngineError {
        EngineError::Metadata { path: self.path.to_path_buf(), key: key.to_string(), message }
    }

    fn get(&self, key: &str) -> Result<&Value> {
        self.metadata.get(key).ok_or_else(|| self.error(key, "missing".into()))
    }

    fn string(&self, key: &str) -> Result<&str> {
        self.get(key)?.to_string().map(String::as_str).map_err(|e| self.error(key, e.to_string()))
    }

    fn usize(&self, key: &str) -> Result<usize> {
        gguf_to_usize(self.get(key)?).ok_or_else(|| self.error(key, "expected a non-negative integer".into()))
    }

    fn usize_or(&self, key: &str, default: usize) -> Result<usize> {
        if self.metadata.contains_key(key) { self.usize(key) } else { Ok(default) }
    }

    fn f64(&self, key: &str) -> Result<f64> {
        gguf_to_f64(self.get(key)?).ok_or_else(|| self.error(key, "expected a number".into()))
    }

    fn f64_or(&self, key: &str, default: f64) -> Result<f64> {
        if self.metadata.contains_key(key) { self.f64(key) } else { Ok(default) }
    }
}

/// A GGUF integer value of any width as `usize`.
pub(crate) fn gguf_to_usize(value: &Value) -> Option<usize> {
    match value {
        Value::U8(v) => Some(*v as usize),
        Value::U16(v) => Some(*v as usize),
        Value::U32(v) => Some(*v as usize),
        Value::U64(v) => usize::try_from(*v).ok(),
        Value::I8(v) => usize::try_from(*v).ok(),
        Value::I16(v) => usize::try_from(*v).ok(),
        Value::I32(v) => usize::try_from(*v).ok(),
        Value::I64(v) => usize::try_from(*v).ok(),
        _ => None,
    }
}

fn gguf_to_f64(value: &Value) -> Option<f64> {
    match value {
        Value::F32(v) => Some(*v as f64),
        Value::F64(v) => Some(*v),
        other => gguf_to_usize(other).map(|v| v as f64),
    }
}

struct HfConfig<'a> {
    path: &'a Path,
    json: &'a Json,
}

impl HfConfig<'_> {
    fn error(&self, key: &str, message: String) -> EngineError {
        EngineError::Metadata { path: self.path.to_path_buf(), key: key.to_string(), message }
    }

    fn string(&self, key: &str) -> Result<&str> {
        self.json.get(key).and_then(Json::as_str).ok_or_else(|| self.error(key, "missing or not a string".into()))
    }

    fn optional_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.json.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|v| usize::try_from(v).ok())
                .map(Some)
                .ok_or_else(|| self.error(key, format!("expected a non-negative integer, found {v}"))),
        }
    }

    fn usize(&self, key: &str) -> Result<usize> {
        self.optional_usize(key)?.ok_or_else(|| self.error(key, "missing".into()))
    }

    fn usize_or(&self, key: &str, default: usize) -> Result<usize> {
        Ok(self.optional_usize(key)?.unwrap_or(default))
    }

    fn f64(&self, key: &str) -> Result<f64> {
        match self.json.get(key) {
            None | Some(Json::Null) => Err(self.error(key, "missing".into())),
            Some(v) => v.as_f64().ok_or_else(|| self.error(key, format!("expected a number, found {v}"))),
        }
    }

    fn f64_or(&self, key: &str, default: f64) -> Result<f64> {
        if self.json.get(key).is_some_and(|v| !v.is_null()) { self.f64(key) } else { Ok(default) }
    }
}
