//! The dense ranker's embedder for `codesweep retrieve --retriever dense`: a local BERT/RoBERTa
//! directory run by the engine, or an OpenAI-compatible `/v1/embeddings` endpoint.
//!
//! As the official `SemanticReranking`, texts are stripped before embedding and cut to 256
//! tokens; embeddings are mean-pooled over the tokens that are not padding.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use codesweep_engine::{EmbedderOptions, EmbeddingModel, Placement};
use codesweep_tasks::retrieval::ranker_name;
use codesweep_worker::DenseEmbedder;

/// Where the dense ranker's embeddings come from.
#[derive(clap::Args)]
pub struct EmbedderArgs {
    /// A BERT/RoBERTa directory (config.json, model.safetensors, tokenizer.json), e.g.
    /// UniXcoder or all-MiniLM-L6-v2 (`scripts/fetch-embedder.sh`), run locally.
    #[arg(long, value_name = "DIR", conflicts_with = "embedder_endpoint")]
    embedder: Option<PathBuf>,
    /// An OpenAI-compatible server's base URL (e.g. `http://host:8000/v1`, as `codesweep serve
    /// --embedder DIR` gives) whose POST /embeddings embeds the texts.
    #[arg(long, value_name = "URL")]
    embedder_endpoint: Option<String>,
    /// Model name sent to the endpoint.
    #[arg(long, value_name = "NAME", default_value = "embedder")]
    embedder_model: String,
    /// Environment variable holding the endpoint's API key.
    #[arg(long, value_name = "VAR")]
    embedder_api_key_env: Option<String>,
    /// Most tokens per text, special tokens included (the official `max_sequence_length`).
    /// Applies to a local embedder; an endpoint truncates as its server was started.
    #[arg(long, default_value_t = 256)]
    embed_max_length: usize,
    /// Texts per forward pass (local) or per request (endpoint).
    #[arg(long, default_value_t = 64)]
    embed_batch_size: usize,
    /// `cpu`, or `cuda:N` in a build with `--features cuda` (local embedder).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Weight dtype of a local embedder: f32, f16 or bf16 (default f32 on CPU, f16 on GPU).
    #[arg(long)]
    dtype: Option<String>,
    /// The ranker's name in the official output file name
    /// (`line_completion_rg1_<ranker>_cosine_sim.jsonl`); default `unixcoder` when the
    /// embedder's name mentions UniXcoder, else the embedder's folder or model name.
    #[arg(long, value_name = "NAME")]
    ranker_name: Option<String>,
}

impl EmbedderArgs {
    /// Loads the embedder named by the flags, with the ranker name for the output file.
    pub fn load(&self) -> Result<(DenseEmbedder, String)> {
        let (embedder, name) = match (&self.embedder, &self.embedder_endpoint) {
            (Some(dir), None) => {
                let placement = Placement::parse(&self.device, self.dtype.as_deref())?;
                let options =
                    EmbedderOptions { max_length: self.embed_max_length, batch_size: self.embed_batch_size.max(1), normalize: false, dtype: None };
                let embedder = EmbeddingModel::load(dir, &placement, options)
                    .with_context(|| format!("cannot load the embedder {} (a BERT/RoBERTa directory)", dir.display()))?;
                (DenseEmbedder(embedder), folder_name(dir))
            }
            (None, Some(url)) => {
                let embedder = EmbeddingModel::endpoint(url, &self.embedder_model, self.embedder_api_key_env.as_deref(), self.embed_batch_size);
                (DenseEmbedder(embedder), self.embedder_model.clone())
            }
            _ => bail!("--retriever dense needs --embedder DIR (a BERT/RoBERTa directory) or --embedder-endpoint URL"),
        };
        let ranker = self.ranker_name.clone().unwrap_or_else(|| ranker_name(&name));
        Ok((embedder, ranker))
    }
}

fn folder_name(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "embedder".into())
}
