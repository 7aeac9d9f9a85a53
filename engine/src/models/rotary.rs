//! The pre-norm rotary decoder shared by LLaMA (CodeLlama, DeepSeek-Coder), Qwen2 and StarCoder2.
//!
//! Block: x += o(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x)))); x += mlp(n2(x)).
//! The families differ only in parts:
//!
//! | family     | norms          | q/k/v bias | o bias | MLP                              |
//! |------------|----------------|------------|--------|----------------------------------|
//! | llama      | RMSNorm        | no         | no     | down(silu(gate(x)) * up(x))      |
//! | qwen2      | RMSNorm        | yes        | no     | down(silu(gate(x)) * up(x))      |
//! | starcoder2 | LayerNorm+bias | yes        | yes    | c_proj(gelu(c_fc(x))), biases    |

use candle_core::Tensor;

use crate::config::{Architecture, ModelConfig};
use crate::kv_cache::KvCache;
use crate::layers::{logits_f32, GatedMlp, GeluMlp, Mlp, Norm, Rotary, RotaryAttention};
use crate::weights::{Embedding, Linear, Name, Weights};

struct Block {
    attn_norm: Norm,
    attn: RotaryAttention,
    mlp_norm: Norm,
    mlp: Mlp,
}

/// A loaded LLaMA, Qwen2 or StarCoder2 model.
pub struct RotaryDecoder {
    embed: Embedding,
    blocks: Vec<Block>,
    norm: Norm,
    head: Linear,
    rotary: Rotary,
    /// Every layer's sliding window (StarCoder2), if any: the cache forgets what it hides.
    window: Option<usize>,
}

impl RotaryDecoder {
    /// Loads every weight by name, with the parts `cfg.architecture` uses.
    pub fn load(w: &mut Weights, cfg: &ModelConfig) -> crate::Result<Self> {
        let h = cfg.hidden_size;
        let starcoder2 = cfg.architecture == Architecture::Starcoder2;
        let qkv_bias = starcoder2 || cfg.architecture == Architecture::Qwen2;
        let norm = |w: &mut Weights, name: Name| {
            if starcoder2 { Norm::layer(w, &name, h, cfg.norm_eps) } else { Norm::rms(w, &name, h, cfg.norm_eps) }
        };
        let embed = w.embedding(&Name::new("token_embd", "model.embed_tokens"), h)?;
        let mut blocks = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let g = |s: &str| format!("blk.{i}.{s}");
            let f = |s: &str| format!("model.layers.{i}.{s}");
            let attention = attention_names(i);
            let mlp = if starcoder2 {
                let names = [Name::new(g("ffn_up"), f("mlp.c_fc")), Name::new(g("ffn_down"), f("mlp.c_proj"))];
                Mlp::Gelu(GeluMlp::load(w, names, h, cfg.intermediate_size)?)
            } else {
                Mlp::Gated(GatedMlp::load(w, gated_mlp_names(i), h, cfg.intermediate_size)?)
            };
            blocks.push(Block {
                attn_norm: norm(w, Name::new(g("attn_norm"), f("input_layernorm")))?,
                attn: RotaryAttention::load(w, attention, cfg, qkv_bias, starcoder2)?,
                mlp_norm: norm(w, Name::new(g("ffn_norm"), f("post_attention_layernorm")))?,
                mlp,
            });
        }
        let norm = norm(w, Name::new("output_norm", "model.norm"))?;
        let head = w.output_head(&embed, h)?;
        let rotary =
            Rotary::new(cfg.head_dim, cfg.max_positions, cfg.rope_theta, cfg.rope_interleaved, w.dtype(), w.device())?;
        Ok(Self { embed, blocks, norm, head, rotary, window: cfg.sliding_window })
    }

    /// `tokens`, `positions`: (b, t) u32; `mask`: (b, 1, t, columns). Returns last-position logits (b, vocab).
    pub fn forward(
        &self,
        tokens: &Tensor,
        positions: &Tensor,
        mask: &Tensor,
        cache: &mut KvCache,
    ) -> candle_core::Result<Tensor> {
        let mut x = self.embed.forward(tokens, mask.dtype())?;
        let mask = &match self.window {
            Some(window) => cache.slide_window(0..self.blocks.len(), window, mask)?,
            None => mask.clone(),
        };
        for (i, block) in self.blocks.iter().enumerate() {
            let a = block.attn.forward(&block.attn_norm.forward(&x)?, &self.rotary, positions, mask, cache, i)?;
            x = (x + a)?;
            x = (&x + block.mlp.forward(&block.mlp_norm.forward(&x)?)?)?;
        }
        logits_f32(&x, &self.norm, &self.head)
    }
}

/// Layer `i`'s q, k, v and output projections, by llama.cpp's and Hugging Face's names.
pub(super) fn attention_names(i: usize) -> [Name; 4] {
    let (g, f) = (|s: &str| format!("blk.{i}.{s}"), |s: &str| format!("model.layers.{i}.self_attn.{s}"));
    [
        Name::new(g("attn_q"), f("q_proj")),
        Name::new(g("attn_k"), f("k_proj")),
        Name::new(g("attn_v"), f("v_proj")),
        Name::new(g("attn_output"), f("o_proj")),
    ]
}

/// Layer `i`'s gate, up and down projections of a gated MLP, by both names.
pub(super) fn gated_mlp_names(i: usize) -> [Name; 3] {
    let (g, f) = (|s: &str| format!("blk.{i}.{s}"), |s: &str| format!("model.layers.{i}.mlp.{s}"));
    [Name::new(g("ffn_gate"), f("gate_proj")), Name::new(g("ffn_up"), f("up_proj")), Name::new(g("ffn_down"), f("down_proj"))]
}
