//! `codesweep serve`: flags, model loading and start-up lines around the engine's
//! OpenAI-compatible server (`codesweep_engine::serve`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use codesweep_engine::embed::is_encoder_dir;
use codesweep_engine::serve::{OpenAiServer, ServeOptions, Served};
use codesweep_engine::{Embedder, EmbedderOptions};

use crate::files::ModelArgs;

/// Arguments of `codesweep serve`.
#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one; the chosen port is printed).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Name reported by /v1/models and accepted in requests (default: the model file name).
    #[arg(long)]
    served_name: Option<String>,
    /// Most sequences decoded together.
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    /// Environment variable holding the API key clients must send as `Authorization: Bearer …`.
    #[arg(long)]
    api_key_env: Option<String>,
    /// A BERT/RoBERTa directory (config.json, model.safetensors, tokenizer.json) to serve
    /// POST /v1/embeddings with, beside the generator. When --model itself is such an encoder,
    /// the server embeds only.
    #[arg(long)]
    embedder: Option<PathBuf>,
    /// Most tokens per embedded text, special tokens included; longer texts are cut.
    #[arg(long, default_value_t = 256)]
    embed_max_length: usize,
    /// Most texts per embedding forward pass.
    #[arg(long, default_value_t = 32)]
    embed_batch_size: usize,
    /// Return L2-normalised embeddings.
    #[arg(long)]
    normalize_embeddings: bool,
    /// Most samples one request may ask for (`n`); more gets a 400.
    #[arg(long, default_value_t = 16)]
    max_n: usize,
    /// Most stop strings one request may carry; more gets a 400.
    #[arg(long, default_value_t = 64)]
    max_stop: usize,
    /// Most prompts in one completions request; more gets a 400.
    #[arg(long, default_value_t = 64)]
    max_prompts: usize,
    /// Largest request body in MiB; a larger one gets a 413 unread.
    #[arg(long, default_value_t = 16)]
    max_body_mib: usize,
}

fn dir_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "model".into())
}

/// Runs the server until the process is stopped.
pub fn run(args: Args) -> Result<()> {
    let encoder_only = is_encoder_dir(&args.model.model);
    if encoder_only && args.embedder.is_some() {
        anyhow::bail!(
            "--model {} is itself an encoder (BERT/RoBERTa), so the server embeds with it; drop --embedder, or give a generator as --model",
            args.model.model.display()
        );
    }
    let embedder_dir = if encoder_only { Some(args.model.model.clone()) } else { args.embedder.clone() };
    let embedder = match &embedder_dir {
        Some(dir) => {
            let placement = args.model.placement()?;
            let options = EmbedderOptions {
                max_length: args.embed_max_length,
                batch_size: args.embed_batch_size.max(1),
                normalize: args.normalize_embeddings,
                dtype: placement.dtype,
            };
            let e = Embedder::load(dir, &placement.device, options).with_context(|| format!("cannot load the embedder {}", dir.display()))?;
            let name = if encoder_only { args.served_name.clone().unwrap_or_else(|| dir_name(dir)) } else { dir_name(dir) };
            Some((Arc::new(e), name))
        }
        None => None,
    };
    let model = if encoder_only { None } else { Some(args.model.load()?) };
    let name = args.served_name.clone().unwrap_or_else(|| dir_name(&args.model.model));
    let api_key = match &args.api_key_env {
        Some(var) => Some(std::env::var(var).with_context(|| format!("--api-key-env {var}: the variable is not set"))?),
        None => None,
    };
    let options = ServeOptions {
        batch_size: args.batch_size,
        api_key,
        max_n: args.max_n,
        max_stop: args.max_stop,
        max_prompts: args.max_prompts,
        max_body: args.max_body_mib.max(1).saturating_mul(1 << 20),
    };
    // What is served, said once the address is known.
    let (what, and_embeddings) = match (&model, &embedder) {
        (Some(m), e) => (
            format!("{name} ({})", m.config.architecture.name()),
            e.as_ref().map(|(_, n)| format!(", embeddings with {n}")).unwrap_or_default(),
        ),
        (None, _) => (format!("embeddings with {name}"), String::new()),
    };
    let server = OpenAiServer::bind(&args.host, args.port, Served { generator: model, embedder, name }, options)?;
    let addr = server.address();
    // Machine-readable first line, for scripts and tests that start the server on port 0.
    println!("listening on http://{addr}");
    eprintln!("serving {what} at http://{addr}/v1{and_embeddings}");
    server.run();
    Ok(())
}
