//! StarCoder2 decoder: LayerNorm with bias, rotary positions, grouped-query attention with biases,
//! GELU (tanh) MLP with biases, optional sliding window (applied by the mask).

use candle_core::Tensor;

use crate::config::ModelConfig;
use crate::layers::{logits_f32, GeluMlp, KvCache, Norm, Rotary, RotaryAttention};
use crate::weights::{Embedding, Linear, Name, Weights};

struct Block {
    attn_norm: Norm,
    attn: RotaryAttention,
    mlp_norm: Norm,
    mlp: GeluMlp,
}

/// A loaded StarCoder2 model.
pub struct Starcoder2 {
    embed: Embedding,
    blocks: Vec<Block>,
    norm: Norm,
    head: Linear,
    rotary: Rotary,
}

impl Starcoder2 {
    /// Loads every weight by name.
    pub fn load(w: &mut Weights, cfg: &ModelConfig) -> crate::Result<Self> {
        let h = cfg.hidden_size;
        let embed = w.embedding(&Name::new("token_embd", "model.embed_tokens"), h)?;
        let mut blocks = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let g = |s: &str| format!("blk.{i}.{s}");
            let f = |s: &str| format!("model.layers.{i}.{s}");
            blocks.push(Block {
                attn_norm: Norm::layer(w, &Name::new(g("attn_norm"), f("input_layernorm")), h, cfg.norm_eps)?,
                attn: RotaryAttention::load(
                    w,
                    [
                        Name::new(g("attn_q"), f("self_attn.q_proj")),
                        Name::new(g("attn_k"), f("self_attn.k_proj")),
                        Name::new(g("attn_v"), f("self_attn.v_proj")),
                        Name::new(g("attn_output"), f("self_attn.o_proj")),
                    ],
                    cfg,
                    true,
                    true,
                )?,
                mlp_norm: Norm::layer(w, &Name::new(g("ffn_norm"), f("post_attention_layernorm")), h, cfg.norm_eps)?,
                mlp: GeluMlp::load(
                    w,
                    [Name::new(g("ffn_up"), f("mlp.c_fc")), Name::new(g("ffn_down"), f("mlp.c_proj"))],
                    h,
                    cfg.intermediate_size,
                )?,
            });
        }
        let norm = Norm::layer(w, &Name::new("output_norm", "model.norm"), h, cfg.norm_eps)?;
        let head_name = Name::new("output", "lm_head");
        let head = if w.has(&head_name) { w.linear(&head_name, embed.rows()?, h, false)? } else { embed.as_linear()? };
        let rotary = Rotary::new(cfg.head_dim, cfg.max_positions, cfg.rope_theta, false, w.dtype(), w.device())?;
        Ok(Self { embed, blocks, norm, head, rotary })
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
        for (i, block) in self.blocks.iter().enumerate() {
            let a = block.attn.forward(&block.attn_norm.forward(&x)?, &self.rotary, positions, mask, cache, i)?;
            x = (x + a)?;
            x = (&x + block.mlp.forward(&block.mlp_norm.forward(&x)?)?)?;
        }
        logits_f32(&x, &self.norm, &self.head)
    }
}
