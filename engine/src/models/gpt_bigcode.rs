//! GPT-BigCode decoder (StarCoder, SantaCoder): learned absolute positions, LayerNorm, fused q/k/v
//! projection with multi-query attention, GELU (tanh) MLP; llama.cpp names the GGUF arch `starcoder`.

use candle_core::Tensor;

use crate::config::ModelConfig;
use crate::kv_cache::KvCache;
use crate::layers::{attention, logits_f32, GeluMlp, Norm};
use crate::weights::{Embedding, Linear, Name, Weights};

struct Block {
    attn_norm: Norm,
    qkv: Linear,
    out: Linear,
    mlp_norm: Norm,
    mlp: GeluMlp,
}

/// A loaded GPT-BigCode model.
pub struct GptBigcode {
    embed: Embedding,
    positions: Embedding,
    blocks: Vec<Block>,
    norm: Norm,
    head: Linear,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl GptBigcode {
    /// Loads every weight by name.
    pub fn load(w: &mut Weights, cfg: &ModelConfig) -> crate::Result<Self> {
        let h = cfg.hidden_size;
        let kv_width = cfg.num_kv_heads * cfg.head_dim;
        let embed = w.embedding(&Name::new("token_embd", "transformer.wte"), h)?;
        let positions = w.embedding(&Name::new("position_embd", "transformer.wpe"), h)?;
        let mut blocks = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let g = |s: &str| format!("blk.{i}.{s}");
            let f = |s: &str| format!("transformer.h.{i}.{s}");
            blocks.push(Block {
                attn_norm: Norm::layer(w, &Name::new(g("attn_norm"), f("ln_1")), h, cfg.norm_eps)?,
                qkv: w.linear(&Name::new(g("attn_qkv"), f("attn.c_attn")), h + 2 * kv_width, h, true)?,
                out: w.linear(&Name::new(g("attn_output"), f("attn.c_proj")), h, h, true)?,
                mlp_norm: Norm::layer(w, &Name::new(g("ffn_norm"), f("ln_2")), h, cfg.norm_eps)?,
                mlp: GeluMlp::load(
                    w,
                    [Name::new(g("ffn_up"), f("mlp.c_fc")), Name::new(g("ffn_down"), f("mlp.c_proj"))],
                    h,
                    cfg.intermediate_size,
                )?,
            });
        }
        let norm = Norm::layer(w, &Name::new("output_norm", "transformer.ln_f"), h, cfg.norm_eps)?;
        let head = w.output_head(&embed, h)?;
        Ok(Self {
            embed,
            positions,
            blocks,
            norm,
            head,
            heads: cfg.num_heads,
            kv_heads: cfg.num_kv_heads,
            head_dim: cfg.head_dim,
        })
    }

    /// `tokens`, `positions`: (b, t) u32; `mask`: (b, 1, t, columns). Returns last-position logits (b, vocab).
    pub fn forward(
        &self,
        tokens: &Tensor,
        positions: &Tensor,
        mask: &Tensor,
        cache: &mut KvCache,
    ) -> candle_core::Result<Tensor> {
        let dtype = mask.dtype();
        let (b, t) = tokens.dims2()?;
        let d = self.head_dim;
        let mut x = (self.embed.forward(tokens, dtype)? + self.positions.forward(positions, dtype)?)?;
        for (i, block) in self.blocks.iter().enumerate() {
            // (b, t, h + 2·kv_width) split into q | k | v.
            let qkv = block.qkv.forward(&block.attn_norm.forward(&x)?)?;
            let qw = self.heads * d;
            let kw = self.kv_heads * d;
            let split = |start: usize, n: usize| {
                qkv.narrow(2, start, n * d)?.reshape((b, t, n, d))?.transpose(1, 2)?.contiguous()
            };
            let q = split(0, self.heads)?;
            let k = split(qw, self.kv_heads)?;
            let v = split(qw + kw, self.kv_heads)?;
            let (k, v) = cache.append(i, k, v)?;
            x = (&x + block.out.forward(&attention(&q, &k, &v, mask, d as f64)?)?)?;
            x = (&x + block.mlp.forward(&block.mlp_norm.forward(&x)?)?)?;
        }
        logits_f32(&x, &self.norm, &self.head)
    }
}
