//! One front for inference, so every caller (shard workers, dataset annotators, dense
//! retrieval, `generate`, `serve`) names, loads and calls a model the same way: weights on this
//! machine or an OpenAI-compatible endpoint, for completions, chat and embeddings. Device and
//! dtype names are parsed here once.

use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device};

use crate::chat::ChatTemplate;
use crate::embed::{Embedder, EmbedderOptions};
use crate::error::Result;
use crate::generate::{Completion, GenerateOptions, Generation, Generator, Request};
use crate::http::{Endpoint, HttpBackend};
use crate::models::{parse_device, parse_dtype, Model};
use crate::tokenizer::TextTokenizer;

/// Where weights run: a device and, for safetensors, an activation dtype.
#[derive(Debug, Clone)]
pub struct Placement {
    /// `cpu` or `cuda:N`.
    pub device: Device,
    /// f32, f16 or bf16; `None` is the model's default for the device.
    pub dtype: Option<DType>,
}

impl Placement {
    /// Parses the names flags and specs use (`cpu`, `cuda:0`; `f32`, `f16`, `bf16`).
    pub fn parse(device: &str, dtype: Option<&str>) -> Result<Self> {
        Ok(Self { device: parse_device(device)?, dtype: dtype.map(parse_dtype).transpose()? })
    }
}

/// A generative model: weights in this process, or a server that completes prompts (vLLM,
/// TGI, llama.cpp, `codesweep serve`, hosted APIs).
#[derive(Clone)]
pub enum TextModel {
    /// Weights in this process.
    Local(Arc<Model>),
    /// An OpenAI-compatible endpoint.
    Endpoint(Box<EndpointModel>),
}

/// An OpenAI-compatible endpoint and what is known of its model.
#[derive(Clone)]
pub struct EndpointModel {
    /// `/v1/completions`, for raw prompts.
    pub completions: HttpBackend,
    /// `/v1/chat/completions`, for instructions, when the server applies a chat template.
    pub chat: Option<HttpBackend>,
    /// The served model's tokenizer, when the caller has it.
    pub tokenizer: Option<Arc<TextTokenizer>>,
}

impl TextModel {
    /// Loads a `.gguf` file or a Hugging Face directory.
    pub fn load(path: &Path, placement: &Placement) -> Result<Self> {
        Ok(Self::Local(Arc::new(Model::load(path, &placement.device, placement.dtype)?)))
    }

    /// An endpoint at `base_url` serving `api_model`, with the API key in `api_key_env`;
    /// `chat` sends instructions to its chat API; `tokenizer` is the served model's
    /// `tokenizer.json`, for prompt budgets.
    pub fn endpoint(base_url: &str, api_model: &str, api_key_env: Option<&str>, chat: bool, tokenizer: Option<&Path>) -> Result<Self> {
        let http = |kind| HttpBackend::new(base_url, api_model, kind, api_key_env);
        let tokenizer = tokenizer.map(|path| TextTokenizer::from_file(path, Vec::new())).transpose()?;
        Ok(Self::Endpoint(Box::new(EndpointModel {
            completions: http(Endpoint::Completions),
            chat: chat.then(|| http(Endpoint::Chat)),
            tokenizer: tokenizer.map(Arc::new),
        })))
    }

    /// The tokenizer for prompt budgets and contexts; an endpoint has one only when given.
    pub fn tokenizer(&self) -> Option<&TextTokenizer> {
        match self {
            Self::Local(model) => Some(&model.tokenizer),
            Self::Endpoint(served) => served.tokenizer.as_deref(),
        }
    }

    /// The model's chat template, for a local model that has one; an error when it has one
    /// this engine cannot render. An endpoint applies its own (`None`).
    pub fn chat_template(&self) -> Result<Option<ChatTemplate>> {
        match self {
            Self::Local(model) => model.chat_template.as_deref().map(ChatTemplate::from_jinja).transpose(),
            Self::Endpoint(_) => Ok(None),
        }
    }

    /// The model instructions go to: an endpoint's chat API when it has one (the server
    /// applies its template, as a local model's template is applied by the caller).
    pub fn for_instructions(&self) -> Self {
        match self {
            Self::Endpoint(served) => match &served.chat {
                Some(chat) => Self::Endpoint(Box::new(EndpointModel { completions: chat.clone(), chat: None, tokenizer: served.tokenizer.clone() })),
                None => self.clone(),
            },
            Self::Local(_) => self.clone(),
        }
    }

    /// Completes `requests`; `on_done` sees each completion as it finishes.
    pub fn generate(&self, requests: &[Request], options: GenerateOptions, on_done: impl FnMut(&Completion) + Send) -> Result<Generation> {
        match self {
            Self::Local(model) => Generator::new(model, options).generate(requests, on_done),
            Self::Endpoint(served) => served.completions.generate(requests, on_done),
        }
    }
}

/// An embedding model: an encoder in this process or an endpoint's `/v1/embeddings`.
pub enum EmbeddingModel {
    /// A BERT/RoBERTa directory run by the engine.
    Local(Box<Embedder>),
    /// An OpenAI-compatible endpoint, `batch` texts per request.
    Endpoint {
        /// The endpoint.
        backend: HttpBackend,
        /// Texts per request.
        batch: usize,
    },
}

impl EmbeddingModel {
    /// Loads an encoder directory.
    pub fn load(dir: &Path, placement: &Placement, options: EmbedderOptions) -> Result<Self> {
        let options = EmbedderOptions { dtype: placement.dtype.or(options.dtype), ..options };
        Ok(Self::Local(Box::new(Embedder::load(dir, &placement.device, options)?)))
    }

    /// An endpoint at `base_url` serving `api_model`.
    pub fn endpoint(base_url: &str, api_model: &str, api_key_env: Option<&str>, batch: usize) -> Self {
        Self::Endpoint { backend: HttpBackend::new(base_url, api_model, Endpoint::Completions, api_key_env), batch: batch.max(1) }
    }

    /// One vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        match self {
            Self::Local(embedder) => embedder.embed(texts),
            Self::Endpoint { backend, batch } => {
                let mut out = Vec::with_capacity(texts.len());
                for part in texts.chunks(*batch) {
                    out.extend(backend.embed(part)?);
                }
                Ok(out)
            }
        }
    }
}
