//! The BERT / RoBERTa encoder forward pass, on candle ops.
//!
//! Embeddings: `LayerNorm(word[id] + position[pos] + token_type[0])`. Then each post-norm block:
//! `x = LN1(x + o(attn(q(x), k(x), v(x))))`; `x = LN2(x + down(act(up(x))))`. BERT and RoBERTa
//! differ only in the position ids the caller passes (see [`super::config::EncoderKind`]); the
//! pooler head is not used.

use candle_core::{DType, Device, Tensor};

use super::config::{Activation, EncoderConfig};
use crate::error::{EngineError, Result};
use crate::layers::{attention, Norm};
use crate::weights::{Embedding, Linear, Name, Weights};

struct Block {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    up: Linear,
    down: Linear,
    out_norm: Norm,
}

/// A loaded encoder: embedding tables, blocks, and the shapes the forward pass needs.
pub struct Encoder {
    word: Embedding,
    position: Embedding,
    /// Row 0 of the token-type table, (1, 1, hidden).
    token_type: Tensor,
    embed_norm: Norm,
    blocks: Vec<Block>,
    heads: usize,
    head_dim: usize,
    activation: Activation,
}

/// Prefixes under which checkpoints store the encoder: a bare `BertModel`, or the encoder inside a
/// `BertFor…` / `RobertaFor…` head model.
const PREFIXES: &[&str] = &["", "bert.", "roberta.", "model."];

impl Encoder {
    /// Loads every weight by its Hugging Face name, checking shapes against `cfg`.
    pub fn load(w: &mut Weights, cfg: &EncoderConfig, path: &std::path::Path) -> Result<Self> {
        let prefix = PREFIXES
            .iter()
            .find(|p| w.has(&Name::new("", format!("{p}embeddings.word_embeddings"))))
            .ok_or_else(|| EngineError::Tensor {
                path: path.to_path_buf(),
                name: "embeddings.word_embeddings.weight".into(),
                message: format!("missing (also looked under the prefixes {})", PREFIXES[1..].join(", ")),
            })?;
        let name = |s: &str| Name::new("", format!("{prefix}{s}"));
        let h = cfg.hidden_size;
        let eps = cfg.layer_norm_eps;
        let word = w.embedding(&name("embeddings.word_embeddings"), h)?;
        let position = w.embedding(&name("embeddings.position_embeddings"), h)?;
        let types = w.embedding(&name("embeddings.token_type_embeddings"), h)?;
        let rows = |e: &Embedding, what: &str| {
            e.rows().map_err(|err| EngineError::Tensor { path: path.to_path_buf(), name: what.into(), message: err.to_string() })
        };
        let check_rows = |e: &Embedding, what: &str, want: usize, key: &str| -> Result<()> {
            let found = rows(e, what)?;
            if found == want {
                Ok(())
            } else {
                Err(EngineError::Tensor {
                    path: path.to_path_buf(),
                    name: format!("{prefix}{what}.weight"),
                    message: format!("has {found} rows but config.json `{key}` says {want}"),
                })
            }
        };
        check_rows(&word, "embeddings.word_embeddings", cfg.vocab_size, "vocab_size")?;
        check_rows(&position, "embeddings.position_embeddings", cfg.max_position_embeddings, "max_position_embeddings")?;
        check_rows(&types, "embeddings.token_type_embeddings", cfg.type_vocab_size, "type_vocab_size")?;
        let zero = Tensor::zeros((1, 1), DType::U32, w.device())?;
        // (1, 1, hidden)
        let token_type = types.forward(&zero, w.dtype())?;
        let embed_norm = Norm::layer(w, &name("embeddings.LayerNorm"), h, eps)?;
        let mut blocks = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let b = |s: &str| name(&format!("encoder.layer.{i}.{s}"));
            blocks.push(Block {
                query: w.linear(&b("attention.self.query"), h, h, true)?,
                key: w.linear(&b("attention.self.key"), h, h, true)?,
                value: w.linear(&b("attention.self.value"), h, h, true)?,
                attn_out: w.linear(&b("attention.output.dense"), h, h, true)?,
                attn_norm: Norm::layer(w, &b("attention.output.LayerNorm"), h, eps)?,
                up: w.linear(&b("intermediate.dense"), cfg.intermediate_size, h, true)?,
                down: w.linear(&b("output.dense"), h, cfg.intermediate_size, true)?,
                out_norm: Norm::layer(w, &b("output.LayerNorm"), h, eps)?,
            });
        }
        Ok(Self {
            word,
            position,
            token_type,
            embed_norm,
            blocks,
            heads: cfg.num_heads,
            head_dim: cfg.head_dim(),
            activation: cfg.activation,
        })
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        self.token_type.device()
    }

    /// `ids`, `positions`: (b, t) u32; `mask`: (b, 1, 1, t) additive, 0 for tokens and -inf for
    /// padding, in the compute dtype. Returns the final hidden states (b, t, hidden).
    pub fn forward(&self, ids: &Tensor, positions: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let dtype = mask.dtype();
        let (b, t) = ids.dims2()?;
        // (b, t, hidden)
        let x = (self.word.forward(ids, dtype)? + self.position.forward(positions, dtype)?)?;
        let mut x = self.embed_norm.forward(&x.broadcast_add(&self.token_type)?)?;
        let split = |y: Tensor| y.reshape((b, t, self.heads, self.head_dim))?.transpose(1, 2)?.contiguous();
        for block in &self.blocks {
            // (b, heads, t, head_dim) each
            let q = split(block.query.forward(&x)?)?;
            let k = split(block.key.forward(&x)?)?;
            let v = split(block.value.forward(&x)?)?;
            // (b, t, hidden): every query sees every unmasked key, both directions.
            let a = block.attn_out.forward(&attention(&q, &k, &v, mask, self.head_dim as f64)?)?;
            x = block.attn_norm.forward(&(a + &x)?)?;
            // (b, t, intermediate)
            let inner = block.up.forward(&x)?;
            let inner = match self.activation {
                Activation::Gelu => inner.gelu_erf()?,
                Activation::GeluTanh => inner.gelu()?,
                Activation::Relu => inner.relu()?,
                Activation::Silu => candle_nn::ops::silu(&inner)?,
            };
            // (b, t, hidden)
            x = block.out_norm.forward(&(block.down.forward(&inner)? + &x)?)?;
        }
        Ok(x)
    }
}
