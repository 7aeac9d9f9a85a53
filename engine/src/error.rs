//! The engine's error type: every variant names the file, tensor, key or request at fault.

use std::path::PathBuf;

/// Architectures the engine can run, as named in GGUF `general.architecture` or `config.json` `model_type`.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["qwen2", "llama", "starcoder2", "gpt_bigcode (GGUF: starcoder)", "gemma3 (Hugging Face: gemma3_text)"];

/// Errors from loading models and tokenizers, and from generation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The model file or directory is not a usable model (truncated, corrupt, missing parts).
    #[error("{path}: {message}")]
    Model {
        /// The model file or directory.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
    /// The architecture is not one the engine implements.
    #[error("{path}: architecture `{found}` is not supported; supported: {}", SUPPORTED_ARCHITECTURES.join(", "))]
    UnsupportedArchitecture {
        /// The model file or directory.
        path: PathBuf,
        /// The architecture the file names.
        found: String,
    },
    /// A metadata key (GGUF) or config field (config.json) is missing or has the wrong type.
    #[error("{path}: metadata `{key}`: {message}")]
    Metadata {
        /// The model file or config.json.
        path: PathBuf,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A weight tensor is missing or has the wrong shape.
    #[error("{path}: tensor `{name}`: {message}")]
    Tensor {
        /// The model file or directory.
        path: PathBuf,
        /// The tensor name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The tokenizer could not be built or used.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A device string was not understood or the device is not available in this build.
    #[error("device `{device}`: {message}")]
    Device {
        /// The device string as given.
        device: String,
        /// What is wrong.
        message: String,
    },
    /// A generation request is invalid (empty prompt, too long for the model, bad sampling parameters).
    #[error("request `{id}`: {message}")]
    Request {
        /// The request id.
        id: String,
        /// What is wrong.
        message: String,
    },
    /// An HTTP backend call failed after its retries.
    #[error("{url}: {message}")]
    Http {
        /// The endpoint.
        url: String,
        /// What happened.
        message: String,
    },
    /// A chat request cannot be rendered: the template is not one the engine renders, or a
    /// message is not acceptable.
    #[error("chat template: {0}")]
    Chat(String),
    /// A process setting (an environment variable) has a value the engine cannot use.
    #[error("{name}: {message}")]
    Setting {
        /// The variable.
        name: String,
        /// What is wrong and what to use instead.
        message: String,
    },
    /// A tensor operation failed.
    #[error("tensor operation: {0}")]
    Candle(#[from] candle_core::Error),
}

/// The engine's result type.
pub type Result<T> = std::result::Result<T, EngineError>;
