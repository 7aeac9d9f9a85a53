//! codesweep-engine: runs code models for codesweep.
//!
//! Loads GGUF files (weights stay quantized) and Hugging Face safetensors directories for the
//! `qwen2`, `llama`, `starcoder2` and `gpt_bigcode` architectures, rebuilds GGUF tokenizers, and
//! generates for many prompts at once with per-sequence masks, positions and a KV cache; embeds texts
//! with BERT-family encoders for dense retrieval; serves and calls OpenAI-compatible endpoints
//! (`serve`, `http`), behind one front for local and remote models (`front`). It knows nothing
//! of benchmarks: stop rules and prompts come from the caller.

pub mod chat;
pub mod config;
pub mod embed;
pub mod front;
pub mod error;
pub mod generate;
pub mod http;
pub mod kernels;
pub mod kv_cache;
pub mod layers;
pub mod models;
pub mod serve;
pub mod tokenizer;
pub mod weights;

pub use chat::{ChatMessage, ChatTemplate};
pub use config::{Architecture, ModelConfig};
pub use embed::{Embedder, EmbedderOptions, Embeddings};
pub use error::{EngineError, Result};
pub use front::{EmbeddingModel, Placement, TextModel};
pub use kv_cache::{CachePrecision, KvCache};
pub use generate::{Completion, GenerateOptions, GenerateStats, Generation, Generator, Request, Sampling, StopPredicate, StopReason};
pub use models::{parse_device, parse_dtype, Model, Network};
pub use tokenizer::TextTokenizer;
