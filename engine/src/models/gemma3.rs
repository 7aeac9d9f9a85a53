//! Gemma 3 (`gemma3` in GGUF, `gemma3_text` in Hugging Face configs).
//!
//! Block, with every norm an RMSNorm:
//!   x += post_attn_norm(o(attn(rope_l(q_norm(q(n1(x)))), rope_l(k_norm(k(n1(x)))), v(n1(x)))))
//!   x += post_ffn_norm(down(gelu_tanh(gate(n2(x))) * up(n2(x))))
//! The embedding is multiplied by √hidden and tied to the output head. Layers come in groups
//! (6 in the released models): all local but the last, which is global. Local layers see only the
//! last `window` positions and rotate with their own base (10,000); global layers see the whole
//! past and rotate with the file's base, linearly scaled in the larger models. Local layers forget
//! the keys and values behind their window (see `KvCache::slide_window`), so a long context costs
//! its full length in the global layers only.
//!
//! Hugging Face checkpoints store each norm's weight as `w - 1` (the model multiplies by `1 + w`);
//! llama.cpp's converter adds the 1 when it writes a GGUF, so here the 1 is added for safetensors.

use candle_core::Tensor;

use crate::config::ModelConfig;
use crate::kv_cache::KvCache;
use crate::layers::{logits_f32, GatedMlp, Norm, Rotary, RotaryAttention};
use crate::weights::{Embedding, Linear, Name, Weights};

struct Block {
    attn_norm: Norm,
    attn: RotaryAttention,
    post_attn_norm: Norm,
    ffn_norm: Norm,
    mlp: GatedMlp,
    post_ffn_norm: Norm,
    local: bool,
}

/// A loaded Gemma 3 text model.
pub struct Gemma3 {
    embed: Embedding,
    /// √hidden, applied to the looked-up embeddings.
    embed_scale: f64,
    blocks: Vec<Block>,
    norm: Norm,
    head: Linear,
    global_rotary: Rotary,
    local_rotary: Rotary,
    /// A local layer's query sees keys fewer than this many positions back.
    window: usize,
}

impl Gemma3 {
    /// Loads every weight by name (llama.cpp's GGUF names or Hugging Face's).
    pub fn load(w: &mut Weights, cfg: &ModelConfig) -> crate::Result<Self> {
        let h = cfg.hidden_size;
        // `ModelConfig` refuses a Gemma 3 configuration without one.
        let local = cfg.local_attention.ok_or_else(|| crate::EngineError::Metadata {
            path: w.path().to_path_buf(),
            key: "sliding_window".into(),
            message: "a Gemma 3 model needs its local attention window".into(),
        })?;
        // Hugging Face stores `w - 1`; GGUF stores `w`.
        let plus_one = !w.is_gguf();
        let norm = |w: &mut Weights, name: Name, width: usize| -> crate::Result<Norm> {
            let weight = w.vector(&name, "weight", width)?;
            let weight = if plus_one { (weight + 1.0)? } else { weight };
            Ok(Norm::Rms { weight, eps: cfg.norm_eps })
        };
        let embed = w.embedding(&Name::new("token_embd", "model.embed_tokens"), h)?;
        let mut blocks = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let g = |s: &str| format!("blk.{i}.{s}");
            let f = |s: &str| format!("model.layers.{i}.{s}");
            let attention = super::rotary::attention_names(i);
            let q_norm = norm(w, Name::new(g("attn_q_norm"), f("self_attn.q_norm")), cfg.head_dim)?;
            let k_norm = norm(w, Name::new(g("attn_k_norm"), f("self_attn.k_norm")), cfg.head_dim)?;
            let mlp = super::rotary::gated_mlp_names(i);
            blocks.push(Block {
                attn_norm: norm(w, Name::new(g("attn_norm"), f("input_layernorm")), h)?,
                attn: RotaryAttention::load(w, attention, cfg, false, false)?.with_qk_norm(q_norm, k_norm),
                post_attn_norm: norm(w, Name::new(g("post_attention_norm"), f("post_attention_layernorm")), h)?,
                ffn_norm: norm(w, Name::new(g("ffn_norm"), f("pre_feedforward_layernorm")), h)?,
                mlp: GatedMlp::load(w, mlp, h, cfg.intermediate_size)?.with_gelu(),
                post_ffn_norm: norm(w, Name::new(g("post_ffw_norm"), f("post_feedforward_layernorm")), h)?,
                local: local.is_local(i),
            });
        }
        let norm = norm(w, Name::new("output_norm", "model.norm"), h)?;
        let head = w.output_head(&embed, h)?;
        let (d, max, dtype, device) = (cfg.head_dim, cfg.max_positions, w.dtype(), w.device().clone());
        let global_rotary = Rotary::linearly_scaled(d, max, cfg.rope_theta, cfg.rope_linear_factor, false, dtype, &device)?;
        let local_rotary = Rotary::new(d, max, local.rope_theta, false, dtype, &device)?;
        Ok(Self { embed, embed_scale: (h as f64).sqrt(), blocks, norm, head, global_rotary, local_rotary, window: local.window })
    }

    /// `tokens`, `positions`: (b, t) u32; `mask` (global layers) and `local_mask` (local layers):
    /// (b, 1, t, columns). Returns last-position logits (b, vocab).
    pub fn forward(
        &self,
        tokens: &Tensor,
        positions: &Tensor,
        mask: &Tensor,
        local_mask: &Tensor,
        cache: &mut KvCache,
    ) -> candle_core::Result<Tensor> {
        // (b, t, hidden)
        let mut x = (self.embed.forward(tokens, mask.dtype())? * self.embed_scale)?;
        let local_layers = self.blocks.iter().enumerate().filter(|(_, b)| b.local).map(|(i, _)| i);
        let local_mask = &cache.slide_window(local_layers, self.window, local_mask)?;
        for (i, block) in self.blocks.iter().enumerate() {
            let (rotary, mask) = if block.local { (&self.local_rotary, local_mask) } else { (&self.global_rotary, mask) };
            let a = block.attn.forward(&block.attn_norm.forward(&x)?, rotary, positions, mask, cache, i)?;
            x = (x + block.post_attn_norm.forward(&a)?)?;
            let m = block.mlp.forward(&block.ffn_norm.forward(&x)?)?;
            x = (&x + block.post_ffn_norm.forward(&m)?)?;
        }
        logits_f32(&x, &self.norm, &self.head)
    }
}
