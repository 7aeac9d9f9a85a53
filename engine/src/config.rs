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
    /// Gemma 3: sandwich RMSNorms, QK-norm, GeGLU, a scaled embedding, and local sliding-window
    /// layers interleaved with global ones, each kind with its own rotary base.
    Gemma3,
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
            // GGUF says `gemma3`; a Hugging Face text-only checkpoint says `gemma3_text`.
            "gemma3" | "gemma3_text" => Some(Self::Gemma3),
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
            Self::Gemma3 => "gemma3",
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
    /// Sliding-window attention span of every layer, if the model uses one (StarCoder2).
    pub sliding_window: Option<usize>,
    /// Local layers interleaved with global ones (Gemma 3); `None` when every layer is alike.
    pub local_attention: Option<LocalAttention>,
    /// Linear rotary scaling of the global layers: positions are divided by this (1 = none).
    pub rope_linear_factor: f64,
    /// Queries are scaled by `query_scalar^-1/2` before attention (default: the head width).
    pub query_scalar: f64,
}

/// Local sliding-window layers interleaved with global layers (Gemma 3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalAttention {
    /// A local layer's query sees keys fewer than this many positions back.
    pub window: usize,
    /// Layers come in groups of this many: all local but the last, which is global.
    pub global_every: usize,
    /// Rotary base frequency of the local layers.
    pub rope_theta: f64,
}

impl LocalAttention {
    /// Whether layer `i` (from 0) is a local one.
    pub fn is_local(&self, layer: usize) -> bool {
        self.global_every == 0 || layer % self.global_every < self.global_every - 1
    }
}

/// The attention spans a forward step builds masks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Windows {
    /// The span of the ordinary mask (`None`: the whole past).
    pub all: Option<usize>,
    /// The span of local layers' mask, when the model has local layers.
    pub local: Option<usize>,
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
        let gemma3 = architecture == Architecture::Gemma3;
        let norm_eps = match architecture {
            Architecture::Llama | Architecture::Qwen2 | Architecture::Gemma3 => {
                meta.f64(&key("attention.layer_norm_rms_epsilon"))?
            }
            Architecture::Starcoder2 | Architecture::GptBigcode => meta.f64(&key("attention.layer_norm_epsilon"))?,
        };
        let mut rope_linear_factor = 1.0;
        if let Some(kind) = meta.metadata.get(&key("rope.scaling.type")) {
            let kind = kind.to_string().map(String::as_str).unwrap_or("?");
            match kind {
                "none" => {}
                // Gemma 3 (4B and up) stretches its global layers' positions linearly.
                "linear" if gemma3 => rope_linear_factor = meta.f64(&key("rope.scaling.factor"))?,
                _ => return Err(meta.error(&key("rope.scaling.type"), format!("rope scaling `{kind}` is not supported"))),
            }
        }
        let num_layers = meta.usize(&key("block_count"))?;
        let local_attention = if gemma3 {
            // llama.cpp's reading of Gemma 3 GGUFs: groups of 6 layers, the local rotary base fixed
            // at 10,000 (neither is in the file).
            Some(LocalAttention { window: meta.usize(&key("attention.sliding_window"))?, global_every: 6, rope_theta: 10_000.0 })
        } else {
            None
        };
        // Gemma 3 27B scales queries by the model width per head rather than the head width, as
        // llama.cpp does (the GGUF does not say; 27B is the one with 62 layers).
        let query_scalar = if gemma3 && num_layers == 62 { (hidden_size / num_heads.max(1)) as f64 } else { head_dim as f64 };
        let config = Self {
            architecture,
            hidden_size,
            intermediate_size: meta.usize(&key("feed_forward_length"))?,
            num_layers,
            num_heads,
            num_kv_heads,
            head_dim,
            max_positions: meta.usize(&key("context_length"))?,
            norm_eps,
            rope_theta: meta.f64_or(&key("rope.freq_base"), 10_000.0)?,
            rope_interleaved: architecture == Architecture::Llama,
            sliding_window: None,
            local_attention,
            rope_linear_factor,
            query_scalar,
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
        if model_type == "gemma3" {
            return Err(cfg.error(
                "model_type",
                "`gemma3` is the multimodal checkpoint; load its text-only form (`gemma3_text`) or its GGUF".into(),
            ));
        }
        let architecture = Architecture::from_name(model_type).ok_or_else(|| EngineError::UnsupportedArchitecture {
            path: path.to_path_buf(),
            found: model_type.to_string(),
        })?;
        let gemma3 = architecture == Architecture::Gemma3;
        let mut rope_linear_factor = 1.0;
        if let Some(scaling) = json.get("rope_scaling").filter(|v| !v.is_null()) {
            let linear = scaling.get("rope_type").or_else(|| scaling.get("type")).and_then(Json::as_str) == Some("linear");
            match scaling.get("factor").and_then(Json::as_f64) {
                Some(factor) if gemma3 && linear && factor > 0.0 => rope_linear_factor = factor,
                _ => return Err(cfg.error("rope_scaling", format!("rope scaling {scaling} is not supported"))),
            }
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
                local_attention: None,
                rope_linear_factor,
                query_scalar: (hidden_size / num_heads.max(1)) as f64,
            }
        } else {
            let hidden_size = cfg.usize("hidden_size")?;
            let num_heads = cfg.usize("num_attention_heads")?;
            let eps_key = if architecture == Architecture::Starcoder2 { "norm_epsilon" } else { "rms_norm_eps" };
            let use_window = architecture == Architecture::Starcoder2
                || json.get("use_sliding_window").and_then(Json::as_bool).unwrap_or(false);
            let head_dim = cfg.usize_or("head_dim", hidden_size / num_heads.max(1))?;
            let local_attention = if gemma3 {
                Some(LocalAttention {
                    window: cfg.usize("sliding_window")?,
                    global_every: cfg.usize_or("sliding_window_pattern", 6)?,
                    rope_theta: cfg.f64_or("rope_local_base_freq", 10_000.0)?,
                })
            } else {
                None
            };
            Self {
                architecture,
                hidden_size,
                intermediate_size: cfg.usize("intermediate_size")?,
                num_layers: cfg.usize("num_hidden_layers")?,
                num_heads,
                num_kv_heads: cfg.usize_or("num_key_value_heads", num_heads)?,
                head_dim,
                max_positions: cfg.usize("max_position_embeddings")?,
                norm_eps: cfg.f64(eps_key)?,
                rope_theta: cfg.f64_or("rope_theta", 10_000.0)?,
                rope_interleaved: false,
                sliding_window: if use_window && !gemma3 { cfg.optional_usize("sliding_window")? } else { None },
                local_attention,
                rope_linear_factor,
                query_scalar: if gemma3 { cfg.f64_or("query_pre_attn_scalar", head_dim as f64)? } else { head_dim as f64 },
            }
        };
        config.validate(path)?;
        Ok(config)
    }

    /// The attention spans of this model's masks.
    pub fn windows(&self) -> Windows {
        Windows { all: self.sliding_window, local: self.local_attention.map(|l| l.window) }
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
        if self.architecture == Architecture::Gemma3 && self.local_attention.is_none() {
            return Err(bad("sliding_window", "a Gemma 3 model needs its local attention window".into()));
        }
        if let Some(local) = self.local_attention {
            if local.window == 0 || local.global_every == 0 {
                return Err(bad("sliding_window", format!("a local window of {} in groups of {} layers", local.window, local.global_every)));
            }
        }
        if !(self.rope_linear_factor > 0.0 && self.query_scalar > 0.0) {
            return Err(bad("rope scaling", format!("factor {} and query scalar {} must be positive", self.rope_linear_factor, self.query_scalar)));
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
