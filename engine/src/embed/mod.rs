//! Text embeddings for dense retrieval: BERT-family encoders (all-MiniLM, UniXcoder, CodeBERT)
//! from a Hugging Face directory, batched with padding and an attention mask, mean-pooled over
//! the tokens that are not padding (sentence-transformers' `Pooling` with `pooling_mode_mean_tokens`),
//! optionally L2-normalised.
//!
//! Texts are truncated to `max_length` tokens, special tokens included, as sentence-transformers'
//! `max_seq_length` does. Batches hold texts of similar length, so padding costs little.

pub mod bert;
pub mod config;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::error::{EngineError, Result};
use crate::weights::Weights;
use bert::Encoder;
pub use config::{is_encoder_dir, Activation, EncoderConfig, EncoderKind, ENCODER_TYPES};

/// How an [`Embedder`] tokenizes, batches and pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedderOptions {
    /// Most tokens per text, special tokens included; longer texts are cut at the end. Capped at
    /// what the model's position table holds. Default 256 (all-MiniLM-L6-v2's `max_seq_length`).
    pub max_length: usize,
    /// Most texts per forward pass. Default 32.
    pub batch_size: usize,
    /// Divide each embedding by its L2 norm (sentence-transformers' `Normalize`). Default off.
    pub normalize: bool,
    /// Weight and activation dtype (default f32 on CPU, f16 on GPU); pooling is always f32.
    pub dtype: Option<DType>,
}

impl Default for EmbedderOptions {
    fn default() -> Self {
        Self { max_length: 256, batch_size: 32, normalize: false, dtype: None }
    }
}

/// Embeddings of several texts, and the tokens they took.
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    /// One vector per text, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens fed to the model, special tokens included, padding excluded.
    pub tokens: usize,
}

/// A loaded encoder with its tokenizer: turns texts into vectors.
pub struct Embedder {
    encoder: Encoder,
    config: EncoderConfig,
    tokenizer: Tokenizer,
    dtype: DType,
    max_length: usize,
    batch_size: usize,
    normalize: bool,
    path: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("path", &self.path)
            .field("config", &self.config)
            .field("dtype", &self.dtype)
            .field("max_length", &self.max_length)
            .field("batch_size", &self.batch_size)
            .field("normalize", &self.normalize)
            .finish()
    }
}

impl Embedder {
    /// Loads `config.json`, `model.safetensors` (or an index of shards) and `tokenizer.json` from
    /// the directory `dir`.
    pub fn load(dir: &Path, device: &Device, options: EmbedderOptions) -> Result<Self> {
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|source| EngineError::Io { path: config_path.clone(), source })?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| EngineError::Model { path: config_path.clone(), message: format!("not valid JSON: {e}") })?;
        let config = EncoderConfig::from_hf_json(&config_path, &json)?;
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"), &config, options.max_length)?;
        let dtype = options.dtype.unwrap_or(if device.is_cpu() { DType::F32 } else { DType::F16 });
        let files = crate::weights::safetensors_files(dir)?;
        let mut weights = Weights::safetensors(dir, &files, device, dtype)?;
        let encoder = Encoder::load(&mut weights, &config, dir)?;
        let max_length = options.max_length.min(config.max_tokens());
        Ok(Self {
            encoder,
            config,
            tokenizer,
            dtype,
            max_length,
            batch_size: options.batch_size.max(1),
            normalize: options.normalize,
            path: dir.to_path_buf(),
        })
    }

    /// One vector per text, in order, each of [`Self::dim`] values.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(self.embed_counted(texts)?.vectors)
    }

    /// Like [`Self::embed`], also counting the tokens fed to the model.
    pub fn embed_counted(&self, texts: &[&str]) -> Result<Embeddings> {
        let ids: Vec<Vec<u32>> = texts.iter().enumerate().map(|(i, t)| self.ids_of(i, t)).collect::<Result<_>>()?;
        // Longest first, so each batch holds texts of similar length; ties keep input order.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut vectors = vec![Vec::new(); ids.len()];
        for chunk in order.chunks(self.batch_size) {
            let rows: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            let pooled = self.pooled(&rows)?;
            for (&i, v) in chunk.iter().zip(pooled) {
                vectors[i] = v;
            }
        }
        Ok(Embeddings { vectors, tokens: ids.iter().map(Vec::len).sum() })
    }

    /// The token ids the model sees for `text`: special tokens added, truncated to [`Self::max_length`].
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        self.ids_of(0, text)
    }

    /// The final hidden states of `text` alone, (tokens, hidden) as rows, before pooling.
    pub fn token_states(&self, text: &str) -> Result<Vec<Vec<f32>>> {
        let ids = self.ids_of(0, text)?;
        let (hidden, _) = self.hidden(&[ids.as_slice()])?;
        // (t, hidden)
        Ok(hidden.squeeze(0)?.to_dtype(DType::F32)?.to_vec2()?)
    }

    /// Width of the embeddings.
    pub fn dim(&self) -> usize {
        self.config.hidden_size
    }

    /// Most tokens per text in effect (the option, capped at the model's positions).
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// Whether embeddings are L2-normalised.
    pub fn normalizes(&self) -> bool {
        self.normalize
    }

    /// The encoder's hyper-parameters.
    pub fn config(&self) -> &EncoderConfig {
        &self.config
    }

    /// The directory the model came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn ids_of(&self, index: usize, text: &str) -> Result<Vec<u32>> {
        let enc = self.tokenizer.encode(text, true).map_err(|e| EngineError::Tokenizer(format!("text {index}: {e}")))?;
        let mut ids = enc.get_ids().to_vec();
        // The tokenizer already truncated; this only guards the position table.
        ids.truncate(self.max_length);
        if ids.is_empty() {
            return Err(EngineError::Request {
                id: format!("text {index}"),
                message: "tokenizes to no tokens (the tokenizer adds no special tokens); nothing to embed".into(),
            });
        }
        Ok(ids)
    }

    /// Runs a padded batch: returns hidden states (b, t, hidden) and the 0/1 mask (b, t) in f32.
    fn hidden(&self, rows: &[&[u32]]) -> Result<(Tensor, Tensor)> {
        let device = self.encoder.device();
        let b = rows.len();
        let t = rows.iter().map(|r| r.len()).max().unwrap_or(0);
        let pad = self.config.pad_token_id;
        let mut ids = Vec::with_capacity(b * t);
        let mut positions = Vec::with_capacity(b * t);
        let mut keep = Vec::with_capacity(b * t);
        for row in rows {
            let mut seen = 0u32;
            for j in 0..t {
                let id = row.get(j).copied().unwrap_or(pad);
                ids.push(id);
                keep.push(if j < row.len() { 1f32 } else { 0f32 });
                positions.push(match self.config.kind {
                    EncoderKind::Bert => j as u32,
                    // Hugging Face counts tokens that are not the pad id, from padding_idx + 1.
                    EncoderKind::Roberta if id != pad => {
                        seen += 1;
                        pad + seen
                    }
                    EncoderKind::Roberta => pad,
                });
            }
        }
        // (b, t)
        let ids = Tensor::from_vec(ids, (b, t), device)?;
        let positions = Tensor::from_vec(positions, (b, t), device)?;
        let keep = Tensor::from_vec(keep, (b, t), device)?;
        // (b, 1, 1, t): 0 where attended, -inf on padding.
        let mask = keep.ne(0f32)?.where_cond(
            &Tensor::zeros((b, t), DType::F32, device)?,
            &Tensor::full(f32::NEG_INFINITY, (b, t), device)?,
        )?;
        let mask = mask.reshape((b, 1, 1, t))?.to_dtype(self.dtype)?;
        Ok((self.encoder.forward(&ids, &positions, &mask)?, keep))
    }

    /// Mean-pools (and maybe normalises) one padded batch; one vector per row.
    fn pooled(&self, rows: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let (hidden, keep) = self.hidden(rows)?;
        // (b, t, hidden) in f32
        let hidden = hidden.to_dtype(DType::F32)?;
        // (b, t, 1)
        let keep = keep.unsqueeze(2)?;
        // (b, hidden) / (b, 1)
        let sum = hidden.broadcast_mul(&keep)?.sum(1)?;
        let count = keep.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mut pooled = sum.broadcast_div(&count)?;
        if self.normalize {
            // (b, 1)
            let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f32, f32::MAX)?;
            pooled = pooled.broadcast_div(&norm)?;
        }
        Ok(pooled.to_vec2()?)
    }
}

/// Reads `tokenizer.json`, truncating to `max_length` (special tokens included) and without the
/// file's own padding; checks its ids fit the embedding table.
fn load_tokenizer(path: &Path, config: &EncoderConfig, max_length: usize) -> Result<Tokenizer> {
    let text = std::fs::read_to_string(path).map_err(|source| EngineError::Io { path: path.to_path_buf(), source })?;
    let fail = |message: String| EngineError::Tokenizer(format!("{}: {message}", path.display()));
    let mut tokenizer: Tokenizer = text.parse().map_err(|e| fail(format!("cannot load: {e}")))?;
    let max_length = max_length.min(config.max_tokens()).max(1);
    tokenizer
        .with_truncation(Some(TruncationParams {
            direction: TruncationDirection::Right,
            max_length,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        }))
        .map_err(|e| fail(format!("cannot truncate to {max_length} tokens: {e}")))?;
    tokenizer.with_padding(None);
    let vocab = tokenizer.get_vocab_size(true);
    let largest = tokenizer.get_vocab(true).values().copied().max().unwrap_or(0) as usize;
    if largest >= config.vocab_size {
        return Err(fail(format!(
            "has ids up to {largest} ({vocab} tokens) but config.json `vocab_size` is {}; the tokenizer does not belong to this model",
            config.vocab_size
        )));
    }
    Ok(tokenizer)
}
