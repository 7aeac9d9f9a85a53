//! Building blocks shared by the architectures: norms, rotary positions and batched attention
//! with per-sequence masks.

use candle_core::{DType, Device, Tensor};

use crate::kv_cache::KvCache;
use crate::weights::{Linear, Name, Weights};

/// RMSNorm (LLaMA, Qwen2) or LayerNorm with bias (StarCoder families).
#[derive(Debug, Clone)]
pub enum Norm {
    /// `x / rms(x) * w`.
    Rms {
        /// The scale per channel.
        weight: Tensor,
        /// Added to the variance for stability.
        eps: f64,
    },
    /// `(x - mean) / std * w + b`.
    Layer {
        /// The scale per channel.
        weight: Tensor,
        /// The shift per channel.
        bias: Tensor,
        /// Added to the variance for stability.
        eps: f64,
    },
}

impl Norm {
    /// Loads an RMSNorm weight of width `hidden`.
    pub fn rms(w: &mut Weights, name: &Name, hidden: usize, eps: f64) -> crate::Result<Self> {
        Ok(Self::Rms { weight: w.vector(name, "weight", hidden)?, eps })
    }

    /// Loads a LayerNorm weight and bias of width `hidden`.
    pub fn layer(w: &mut Weights, name: &Name, hidden: usize, eps: f64) -> crate::Result<Self> {
        Ok(Self::Layer { weight: w.vector(name, "weight", hidden)?, bias: w.vector(name, "bias", hidden)?, eps })
    }

    /// Normalizes the last dimension of `x`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Rms { weight, eps } => candle_nn::ops::rms_norm(&x.contiguous()?, weight, *eps as f32),
            Self::Layer { weight, bias, eps } => {
                candle_nn::ops::layer_norm(&x.contiguous()?, weight, bias, *eps as f32)
            }
        }
    }
}

/// Rotary position tables; each sequence of a batch looks up its own positions.
#[derive(Debug, Clone)]
pub struct Rotary {
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
}

impl Rotary {
    /// Tables for positions `0..max_positions` and heads of width `head_dim`.
    pub fn new(
        head_dim: usize,
        max_positions: usize,
        theta: f64,
        interleaved: bool,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Self> {
        Self::linearly_scaled(head_dim, max_positions, theta, 1.0, interleaved, dtype, device)
    }

    /// [`Rotary::new`] with positions divided by `factor` (linear rope scaling).
    pub fn linearly_scaled(
        head_dim: usize,
        max_positions: usize,
        theta: f64,
        factor: f64,
        interleaved: bool,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Self> {
        let half = head_dim / 2;
        let inv_freq: Vec<f32> =
            (0..half).map(|i| (1.0 / theta.powf(2.0 * i as f64 / head_dim as f64) / factor) as f32).collect();
        let inv_freq = Tensor::from_vec(inv_freq, (1, half), device)?;
        let positions = Tensor::arange(0u32, max_positions as u32, device)?.to_dtype(DType::F32)?;
        // (max_positions, half)
        let freqs = positions.reshape((max_positions, 1))?.broadcast_mul(&inv_freq)?;
        Ok(Self { cos: freqs.cos()?.to_dtype(dtype)?, sin: freqs.sin()?.to_dtype(dtype)?, interleaved })
    }

    /// Rotates `x` of shape (b, heads, t, head_dim) by `positions` of shape (b, t).
    pub fn apply(&self, x: &Tensor, positions: &Tensor) -> candle_core::Result<Tensor> {
        let (b, t) = positions.dims2()?;
        let flat = positions.flatten_all()?;
        let half = self.cos.dim(1)?;
        // (b, t, half)
        let cos = self.cos.index_select(&flat, 0)?.reshape((b, t, half))?;
        let sin = self.sin.index_select(&flat, 0)?.reshape((b, t, half))?;
        if self.interleaved {
            candle_nn::rotary_emb::rope_i(&x.contiguous()?, &cos, &sin)
        } else {
            candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin)
        }
    }
}

/// Multi-head attention over per-sequence additive masks.
///
/// `q`: (b, heads, t, d); `k`, `v`: (b, kv_heads, columns, d); `mask`: (b, 1, t, columns) with 0 or -inf.
/// Scores are divided by `√query_scalar` (the head width d, unless the model says otherwise).
/// Query heads are grouped over key/value heads without copying the keys. Returns (b, t, heads·d).
/// f32 on the CPU takes the engine's kernel, whose results do not depend on the batch, the
/// padding or the prefill chunk; other devices and dtypes take candle's ops, which do.
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, query_scalar: f64) -> candle_core::Result<Tensor> {
    match crate::kernels::attention::cpu_attention(q, k, v, mask, query_scalar)? {
        Some(y) => Ok(y),
        None => candle_attention(q, k, v, mask, query_scalar),
    }
}

/// [`attention`] in candle's ops (batched matmuls and softmax), for any device and length.
pub(crate) fn candle_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, query_scalar: f64) -> candle_core::Result<Tensor> {
    let (b, heads, t, d) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    let columns = k.dim(2)?;
    let group = heads / kv_heads;
    // (b, kv_heads, group·t, d): heads sharing a key/value head are adjacent.
    let q = q.contiguous()?.reshape((b, kv_heads, group * t, d))?;
    let scores = (q.matmul(&k.t()?)? / query_scalar.sqrt())?;
    // (b, heads, t, columns)
    let scores = scores.reshape((b, heads, t, columns))?.broadcast_add(mask)?;
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    // (b, kv_heads, group·t, d)
    let y = probs.reshape((b, kv_heads, group * t, columns))?.matmul(v)?;
    y.reshape((b, heads, t, d))?.transpose(1, 2)?.reshape((b, t, heads * d))
}

/// Self-attention with separate q/k/v projections and rotary positions (LLaMA, Qwen2, StarCoder2,
/// Gemma 3).
#[derive(Debug, Clone)]
pub struct RotaryAttention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// RMSNorms over each query and key head before the rotation (Gemma 3's QK-norm).
    qk_norm: Option<(Norm, Norm)>,
    /// Scores are divided by its square root (see [`attention`]).
    query_scalar: f64,
}

impl RotaryAttention {
    /// Loads the four projections of block `prefix`; `qkv_bias`/`o_bias` say which carry biases.
    pub fn load(
        w: &mut Weights,
        names: [Name; 4],
        cfg: &crate::config::ModelConfig,
        qkv_bias: bool,
        o_bias: bool,
    ) -> crate::Result<Self> {
        let (h, d) = (cfg.hidden_size, cfg.head_dim);
        let [qn, kn, vn, on] = names;
        Ok(Self {
            q: w.linear(&qn, cfg.num_heads * d, h, qkv_bias)?,
            k: w.linear(&kn, cfg.num_kv_heads * d, h, qkv_bias)?,
            v: w.linear(&vn, cfg.num_kv_heads * d, h, qkv_bias)?,
            o: w.linear(&on, h, cfg.num_heads * d, o_bias)?,
            heads: cfg.num_heads,
            kv_heads: cfg.num_kv_heads,
            head_dim: d,
            qk_norm: None,
            query_scalar: cfg.query_scalar,
        })
    }

    /// Adds RMSNorms (query, key), each of the head width, applied per head before the rotation.
    pub fn with_qk_norm(self, q_norm: Norm, k_norm: Norm) -> Self {
        Self { qk_norm: Some((q_norm, k_norm)), ..self }
    }

    /// `x`: (b, t, hidden) → (b, t, hidden); appends this chunk's keys/values to `cache` at `layer`.
    /// `mask`: (b, 1, t, the columns `layer` holds with this chunk's), as `KvCache::slide_window`
    /// cuts it for a layer that forgets.
    pub fn forward(
        &self,
        x: &Tensor,
        rotary: &Rotary,
        positions: &Tensor,
        mask: &Tensor,
        cache: &mut KvCache,
        layer: usize,
    ) -> candle_core::Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let d = self.head_dim;
        let split = |y: Tensor, n: usize| y.reshape((b, t, n, d))?.transpose(1, 2)?.contiguous();
        // (b, heads, t, d) and (b, kv_heads, t, d)
        let [q, k, v]: [Tensor; 3] = Linear::forward_stacked(&[&self.q, &self.k, &self.v], x)?
            .try_into()
            .map_err(|_| candle_core::Error::msg("three projections gave another number of outputs"))?;
        let (mut q, mut k) = (split(q, self.heads)?, split(k, self.kv_heads)?);
        if let Some((q_norm, k_norm)) = &self.qk_norm {
            q = q_norm.forward(&q)?;
            k = k_norm.forward(&k)?;
        }
        let (q, k) = (rotary.apply(&q, positions)?, rotary.apply(&k, positions)?);
        let v = split(v, self.kv_heads)?;
        let (k, v) = cache.append(layer, k, v)?;
        self.o.forward(&attention(&q, &k, &v, mask, self.query_scalar)?)
    }
}

/// Gated MLP: `down(act(gate(x)) * up(x))`, SiLU (LLaMA, Qwen2) or tanh-GELU (Gemma's GeGLU).
#[derive(Debug, Clone)]
pub struct GatedMlp {
    gate: Linear,
    up: Linear,
    down: Linear,
    gelu: bool,
}

impl GatedMlp {
    /// Loads gate, up and down projections of a SiLU-gated MLP.
    pub fn load(w: &mut Weights, names: [Name; 3], hidden: usize, inner: usize) -> crate::Result<Self> {
        let [g, u, d] = names;
        Ok(Self {
            gate: w.linear(&g, inner, hidden, false)?,
            up: w.linear(&u, inner, hidden, false)?,
            down: w.linear(&d, hidden, inner, false)?,
            gelu: false,
        })
    }

    /// The same MLP gated by GELU (tanh approximation) instead of SiLU.
    pub fn with_gelu(self) -> Self {
        Self { gelu: true, ..self }
    }

    /// (b, t, hidden) → (b, t, hidden).
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let [gate, up]: [Tensor; 2] = Linear::forward_stacked(&[&self.gate, &self.up], x)?
            .try_into()
            .map_err(|_| candle_core::Error::msg("two projections gave another number of outputs"))?;
        let gate = if self.gelu { crate::kernels::math::gelu_tanh(&gate)? } else { candle_nn::ops::silu(&gate)? };
        self.down.forward(&(gate * up)?)
    }
}

/// GELU (tanh approximation) MLP with biases (StarCoder, StarCoder2): `proj(gelu(fc(x)))`.
#[derive(Debug, Clone)]
pub struct GeluMlp {
    fc: Linear,
    proj: Linear,
}

impl GeluMlp {
    /// Loads the up (`fc`) and down (`proj`) projections with biases.
    pub fn load(w: &mut Weights, names: [Name; 2], hidden: usize, inner: usize) -> crate::Result<Self> {
        let [fc, proj] = names;
        Ok(Self { fc: w.linear(&fc, inner, hidden, true)?, proj: w.linear(&proj, hidden, inner, true)? })
    }

    /// (b, t, hidden) → (b, t, hidden).
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.proj.forward(&crate::kernels::math::gelu_tanh(&self.fc.forward(x)?)?)
    }
}

/// The MLP of a block: SiLU-gated or GELU.
#[derive(Debug, Clone)]
pub enum Mlp {
    /// LLaMA, Qwen2.
    Gated(GatedMlp),
    /// StarCoder, StarCoder2.
    Gelu(GeluMlp),
}

impl Mlp {
    /// (b, t, hidden) → (b, t, hidden).
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Gated(m) => m.forward(x),
            Self::Gelu(m) => m.forward(x),
        }
    }
}

/// The last position of each row: (b, t, h) → (b, h).
pub fn last_position(x: &Tensor) -> candle_core::Result<Tensor> {
    let t = x.dim(1)?;
    x.narrow(1, t - 1, 1)?.squeeze(1)
}

/// Logits as f32 on the model's device: (b, vocab).
pub fn logits_f32(x: &Tensor, norm: &Norm, head: &Linear) -> candle_core::Result<Tensor> {
    let x = last_position(x)?.unsqueeze(1)?;
    head.forward(&norm.forward(&x)?)?.squeeze(1)?.to_dtype(DType::F32)
}
