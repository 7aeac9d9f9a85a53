//! The architectures, and loading a model (weights, configuration, tokenizer) from a GGUF file or
//! a Hugging Face directory.

pub mod gemma3;
pub mod gpt_bigcode;
pub mod rotary;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor};

use crate::config::{Architecture, ModelConfig};
use crate::error::{EngineError, Result};
use crate::generate::batch::StepInputs;
use crate::kv_cache::{CachePrecision, KvCache};
use crate::tokenizer::{tokenizer_json_from_gguf, TextTokenizer};
use crate::weights::Weights;

/// A forward pass of one of the supported architectures.
pub enum Network {
    /// LLaMA, Qwen2 and StarCoder2.
    Rotary(rotary::RotaryDecoder),
    /// GPT-BigCode.
    GptBigcode(gpt_bigcode::GptBigcode),
    /// Gemma 3.
    Gemma3(gemma3::Gemma3),
}

impl Network {
    /// Runs one step — `tokens` (b, t) at `positions` (b, t) under `mask` (b, 1, t, columns), and
    /// `local_mask` for local layers — appending to `cache`; returns the logits of each row's last
    /// position, (b, vocab) in f32.
    pub fn forward(&self, step: &StepInputs, cache: &mut KvCache) -> Result<Tensor> {
        let (tokens, positions, mask) = (&step.tokens, &step.positions, &step.mask);
        Ok(match self {
            Self::Rotary(m) => m.forward(tokens, positions, mask, cache)?,
            Self::GptBigcode(m) => m.forward(tokens, positions, mask, cache)?,
            Self::Gemma3(m) => {
                let local_mask = step.local_mask.as_ref().ok_or_else(|| {
                    EngineError::Candle(candle_core::Error::Msg(
                        "a Gemma 3 step needs the local layers' mask: build it with the model's windows()".into(),
                    ))
                })?;
                m.forward(tokens, positions, mask, local_mask, cache)?
            }
        })
    }
}

/// A model ready to generate: network, configuration, tokenizer, device.
pub struct Model {
    /// The forward pass.
    pub network: Network,
    /// Hyper-parameters.
    pub config: ModelConfig,
    /// The tokenizer.
    pub tokenizer: TextTokenizer,
    /// Where activations live.
    pub device: Device,
    /// The activation dtype (f32 for GGUF; as chosen for safetensors).
    pub dtype: DType,
    /// The file or directory it came from.
    pub path: PathBuf,
    /// The Jinja chat template the model ships (GGUF `tokenizer.chat_template`, or the
    /// directory's `tokenizer_config.json` / `chat_template.jinja`); see [`crate::chat`].
    pub chat_template: Option<String>,
    /// What the CPU KV cache keeps of keys and values (`CODESWEEP_KV_CACHE`, read at load).
    pub kv_cache: CachePrecision,
}

/// Parses `cpu` or `cuda:N` (`cuda` = `cuda:0`).
pub fn parse_device(spec: &str) -> Result<Device> {
    let err = |message: &str| EngineError::Device { device: spec.to_string(), message: message.to_string() };
    match spec {
        "cpu" => Ok(Device::Cpu),
        s if s == "cuda" || s.starts_with("cuda:") => {
            let ordinal = match s.strip_prefix("cuda:") {
                None => 0,
                Some(n) => n.parse::<usize>().map_err(|_| err("expected cuda:N with N a GPU index"))?,
            };
            if !candle_core::utils::cuda_is_available() {
                return Err(err("this build has no CUDA support; rebuild with `--features cuda`"));
            }
            Device::new_cuda(ordinal).map_err(|e| {
                // candle appends a backtrace to a driver error; its first line is the driver's answer.
                let answer = e.to_string();
                let answer = answer.lines().next().unwrap_or_default();
                err(&format!(
                    "cannot open GPU {ordinal}: {answer} (does `nvidia-smi` list it, with a driver as new as the CUDA this binary was built with?)"
                ))
            })
        }
        _ => Err(err("expected `cpu` or `cuda:N`")),
    }
}

/// Parses `f32`, `f16` or `bf16`.
pub fn parse_dtype(spec: &str) -> Result<DType> {
    match spec {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        other => Err(EngineError::Device { device: other.to_string(), message: "dtype must be f32, f16 or bf16".into() }),
    }
}

impl Model {
    /// Loads a `.gguf` file or a Hugging Face directory (`config.json`, `*.safetensors`,
    /// `tokenizer.json`). `dtype` applies to safetensors weights (default f32 on CPU, f16 on GPU).
    pub fn load(path: &Path, device: &Device, dtype: Option<DType>) -> Result<Self> {
        // Read once, before the weights, so a bad setting fails at once.
        let kv_cache = CachePrecision::from_env()?;
        if path.is_dir() {
            Self::load_hf(path, device, dtype.unwrap_or(if device.is_cpu() { DType::F32 } else { DType::F16 }), kv_cache)
        } else {
            Self::load_gguf(path, device, kv_cache)
        }
    }

    fn load_gguf(path: &Path, device: &Device, kv_cache: CachePrecision) -> Result<Self> {
        let file = File::open(path).map_err(|source| EngineError::Io { path: path.to_path_buf(), source })?;
        let mut reader = BufReader::new(file);
        let content = gguf_file::Content::read(&mut reader).map_err(|e| EngineError::Model {
            path: path.to_path_buf(),
            message: format!("not a GGUF file, or its header is corrupt or truncated ({e})"),
        })?;
        let config = ModelConfig::from_gguf(path, &content.metadata)?;
        let built = tokenizer_json_from_gguf(path, &content.metadata)?;
        let chat_template = content.metadata.get("tokenizer.chat_template").and_then(|v| v.to_string().ok()).cloned();
        let tokenizer = TextTokenizer::from_json(&built.json, built.eos_ids)?;
        let mut weights = Weights::gguf(path, content, device)?;
        let network = build_network(&mut weights, &config)?;
        Ok(Self {
            network,
            config,
            tokenizer,
            device: device.clone(),
            dtype: DType::F32,
            path: path.to_path_buf(),
            chat_template,
            kv_cache,
        })
    }

    fn load_hf(dir: &Path, device: &Device, dtype: DType, kv_cache: CachePrecision) -> Result<Self> {
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|source| EngineError::Io { path: config_path.clone(), source })?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| EngineError::Model {
            path: config_path.clone(),
            message: format!("not valid JSON: {e}"),
        })?;
        let config = ModelConfig::from_hf_json(&config_path, &json)?;
        let files = crate::weights::safetensors_files(dir)?;
        let mut eos_ids = json_ids(json.get("eos_token_id"));
        if let Ok(gen) = std::fs::read_to_string(dir.join("generation_config.json")) {
            if let Ok(gen) = serde_json::from_str::<serde_json::Value>(&gen) {
                eos_ids.extend(json_ids(gen.get("eos_token_id")));
            }
        }
        eos_ids.sort_unstable();
        eos_ids.dedup();
        let tokenizer = TextTokenizer::from_file(&dir.join("tokenizer.json"), eos_ids)?;
        let mut weights = Weights::safetensors(dir, &files, device, dtype)?;
        let network = build_network(&mut weights, &config)?;
        let chat_template = crate::chat::hf_chat_template(dir)?;
        Ok(Self { network, config, tokenizer, device: device.clone(), dtype, path: dir.to_path_buf(), chat_template, kv_cache })
    }
}

fn build_network(w: &mut Weights, cfg: &ModelConfig) -> Result<Network> {
    Ok(match cfg.architecture {
        Architecture::Llama | Architecture::Qwen2 | Architecture::Starcoder2 => {
            Network::Rotary(rotary::RotaryDecoder::load(w, cfg)?)
        }
        Architecture::GptBigcode => Network::GptBigcode(gpt_bigcode::GptBigcode::load(w, cfg)?),
        Architecture::Gemma3 => Network::Gemma3(gemma3::Gemma3::load(w, cfg)?),
    })
}

fn json_ids(v: Option<&serde_json::Value>) -> Vec<u32> {
    match v {
        Some(serde_json::Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()).into_iter().collect(),
        Some(serde_json::Value::Array(a)) => a.iter().filter_map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok())).collect(),
        _ => Vec::new(),
    }
}

