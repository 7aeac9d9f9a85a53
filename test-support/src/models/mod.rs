//! Tiny real models for the engine tests: a byte-level BPE tokenizer trained on this repository's
//! own source code, and random-weight transformers of each architecture written as GGUF (quantized)
//! and as Hugging Face safetensors directories.


pub mod encoder;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use serde_json::{json, Value as Json};

/// Hidden width of the tiny decoders.
pub const HIDDEN: usize = 64;
/// Query heads of the tiny decoders.
pub const HEADS: usize = 4;
/// Width of one attention head.
pub const HEAD_DIM: usize = 16;
/// Feed-forward width of the tiny decoders.
pub const INTER: usize = 128;
/// Layers of the tiny decoders.
pub const LAYERS: usize = 2;
/// Context length of the tiny decoders.
pub const MAX_POS: usize = 512;

/// Real code for tokenizer training and test prompts: a frozen snapshot of 43 of this
/// repository's own source files (`corpus/`, see its README), so the tiny models and prompts
/// stay the same when the live sources change.
pub fn code_corpus() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    let files: Vec<String> = paths.iter().map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).collect();
    assert_eq!(files.len(), 43, "the frozen corpus under {} is incomplete", dir.display());
    files
}

/// Prompts of several lengths cut from real code.
pub fn code_prompts() -> Vec<String> {
    let corpus = code_corpus();
    let text = &corpus[3];
    let cuts = [40usize, 7, 120, 300, 75, 18];
    cuts.iter()
        .enumerate()
        .map(|(i, &n)| {
            let start = (i * 97) % (text.len() / 2);
            let start = (0..=start).rev().find(|&s| text.is_char_boundary(s)).unwrap_or(0);
            let end = (start + n).min(text.len());
            let end = (end..text.len()).find(|&e| text.is_char_boundary(e)).unwrap_or(text.len());
            text[start..end].to_string()
        })
        .collect()
}

/// Sixteen prompts of 3 to 800 characters cut from real source files (the frozen corpus): the
/// batch-invariance tests decode them alone and in batches.
pub fn sixteen_code_prompts() -> Vec<String> {
    let corpus = code_corpus();
    let lengths = [3usize, 40, 75, 130, 200, 260, 330, 420, 520, 700, 30, 90, 150, 600, 800, 12];
    lengths
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let text = &corpus[(i * 5) % corpus.len()];
            let start = (0..=(i * 131) % (text.len() / 2)).rev().find(|&s| text.is_char_boundary(s)).unwrap_or(0);
            let end = (start + n).min(text.len());
            let end = (end..=text.len()).find(|&e| text.is_char_boundary(e)).unwrap_or(text.len());
            text[start..end].to_string()
        })
        .collect()
}

/// The special tokens of the tiny tokenizers (Qwen2.5-Coder's names).
pub const SPECIALS: &[&str] =
    &["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|im_start|>", "<|im_end|>"];

/// A Qwen2-style byte-level BPE `tokenizer.json` trained on the repository's code.
pub fn trained_tokenizer_json(vocab_size: usize) -> String {
    let base = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"},
             "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": {}, "merges": []}
    });
    let mut tok: tokenizers::Tokenizer = base.to_string().parse().expect("base tokenizer");
    let specials = SPECIALS.iter().map(|s| tokenizers::AddedToken::from(s.to_string(), true)).collect();
    let trainer = tokenizers::models::bpe::BpeTrainer::builder()
        .vocab_size(vocab_size)
        .show_progress(false)
        .initial_alphabet(tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet().into_iter().collect())
        .special_tokens(specials)
        .build();
    let mut trainer = tokenizers::models::TrainerWrapper::BpeTrainer(trainer);
    tok.train(&mut trainer, code_corpus().into_iter()).expect("train");
    tok.to_string(false).expect("serialize")
}

/// Vocabulary (id order), merges and special-token flags of a byte-level BPE tokenizer.json.
pub fn vocab_and_merges(json_text: &str) -> (Vec<String>, Vec<String>, Vec<i32>) {
    let doc: Json = serde_json::from_str(json_text).unwrap();
    let vocab = doc["model"]["vocab"].as_object().unwrap();
    let mut tokens = vec![String::new(); vocab.len()];
    for (t, id) in vocab {
        tokens[id.as_u64().unwrap() as usize] = t.clone();
    }
    let mut types = vec![1i32; tokens.len()];
    for added in doc["added_tokens"].as_array().unwrap() {
        let id = added["id"].as_u64().unwrap() as usize;
        if id >= tokens.len() {
            tokens.resize(id + 1, String::new());
            types.resize(id + 1, 1);
        }
        tokens[id] = added["content"].as_str().unwrap().to_string();
        types[id] = 3;
    }
    let merges = doc["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m {
            Json::String(s) => s.clone(),
            Json::Array(p) => format!("{} {}", p[0].as_str().unwrap(), p[1].as_str().unwrap()),
            _ => panic!("merge {m}"),
        })
        .collect();
    (tokens, merges, types)
}

/// GGUF tokenizer metadata for a byte-level BPE tokenizer.json.
pub fn gguf_tokenizer_metadata(json_text: &str, pre: &str) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value as V;
    let (tokens, merges, types) = vocab_and_merges(json_text);
    let eos = tokens.iter().position(|t| t == "<|endoftext|>").unwrap() as u32;
    vec![
        ("tokenizer.ggml.model".into(), V::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), V::String(pre.into())),
        ("tokenizer.ggml.tokens".into(), V::Array(tokens.into_iter().map(V::String).collect())),
        ("tokenizer.ggml.token_type".into(), V::Array(types.into_iter().map(V::I32).collect())),
        ("tokenizer.ggml.merges".into(), V::Array(merges.into_iter().map(V::String).collect())),
        ("tokenizer.ggml.eos_token_id".into(), V::U32(eos)),
        ("tokenizer.ggml.bos_token_id".into(), V::U32(eos)),
        ("tokenizer.ggml.add_bos_token".into(), V::Bool(false)),
    ]
}

/// Deterministic pseudo-random tensors.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (same seed, same tensors).
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407))
    }
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    /// A tensor of `shape` with values uniform in `offset ± scale`.
    pub fn tensor(&mut self, shape: &[usize], scale: f32, offset: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| offset + scale * self.next()).collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }
}

/// The architectures under test, with their GGUF and config.json names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Qwen2 (Qwen2.5-Coder): RMSNorm, SwiGLU, biased QKV.
    Qwen2,
    /// Llama: RMSNorm, SwiGLU, no biases.
    Llama,
    /// StarCoder2: LayerNorm with biases, GELU MLP.
    Starcoder2,
    /// GPT-BigCode (StarCoder 1): multi-query attention, learned positions.
    GptBigcode,
    /// Gemma 3: sandwich norms, QK-norm, GeGLU, five local layers of window
    /// [`GEMMA_WINDOW`] then one global layer.
    Gemma3,
}

/// Every architecture under test.
pub const ALL_ARCHS: [Arch; 5] = [Arch::Qwen2, Arch::Llama, Arch::Starcoder2, Arch::GptBigcode, Arch::Gemma3];

/// The tiny Gemma 3's local attention window: shorter than most test prompts, so it matters.
pub const GEMMA_WINDOW: usize = 8;

impl Arch {
    fn gguf_name(self) -> &'static str {
        match self {
            Arch::Qwen2 => "qwen2",
            Arch::Llama => "llama",
            Arch::Starcoder2 => "starcoder2",
            Arch::GptBigcode => "starcoder",
            Arch::Gemma3 => "gemma3",
        }
    }
    fn hf_name(self) -> &'static str {
        match self {
            Arch::Qwen2 => "qwen2",
            Arch::Llama => "llama",
            Arch::Starcoder2 => "starcoder2",
            Arch::GptBigcode => "gpt_bigcode",
            Arch::Gemma3 => "gemma3_text",
        }
    }
    fn kv_heads(self) -> usize {
        if self == Arch::GptBigcode { 1 } else { 2 }
    }
    /// Layers: Gemma 3 needs six for one group of local layers and its global layer.
    pub fn layers(self) -> usize {
        if self == Arch::Gemma3 { 6 } else { LAYERS }
    }
}

/// (gguf name, hf name, tensor) for every parameter of a random model of `arch`.
fn parameters(arch: Arch, vocab: usize, seed: u64) -> Vec<(String, String, Tensor)> {
    let mut rng = Rng::new(seed);
    let kv = arch.kv_heads() * HEAD_DIM;
    let h = HIDDEN;
    let mut p: Vec<(String, String, Tensor)> = Vec::new();
    let mut add = |g: String, f: String, shape: &[usize], scale: f32, offset: f32, rng: &mut Rng| {
        p.push((g, f, rng.tensor(shape, scale, offset)));
    };
    let w = 0.35f32;
    match arch {
        Arch::Qwen2 | Arch::Llama | Arch::Starcoder2 => {
            add("token_embd.weight".into(), "model.embed_tokens.weight".into(), &[vocab, h], 0.2, 0.0, &mut rng);
            let sc2 = arch == Arch::Starcoder2;
            for i in 0..LAYERS {
                let g = |s: &str| format!("blk.{i}.{s}");
                let f = |s: &str| format!("model.layers.{i}.{s}");
                add(g("attn_norm.weight"), f("input_layernorm.weight"), &[h], 0.1, 1.0, &mut rng);
                add(g("ffn_norm.weight"), f("post_attention_layernorm.weight"), &[h], 0.1, 1.0, &mut rng);
                if sc2 {
                    add(g("attn_norm.bias"), f("input_layernorm.bias"), &[h], 0.1, 0.0, &mut rng);
                    add(g("ffn_norm.bias"), f("post_attention_layernorm.bias"), &[h], 0.1, 0.0, &mut rng);
                }
                for (gn, fname, out, inp) in [
                    ("attn_q", "self_attn.q_proj", HEADS * HEAD_DIM, h),
                    ("attn_k", "self_attn.k_proj", kv, h),
                    ("attn_v", "self_attn.v_proj", kv, h),
                    ("attn_output", "self_attn.o_proj", h, HEADS * HEAD_DIM),
                ] {
                    add(g(&format!("{gn}.weight")), f(&format!("{fname}.weight")), &[out, inp], w, 0.0, &mut rng);
                    let biased = sc2 || (arch == Arch::Qwen2 && gn != "attn_output");
                    if biased {
                        add(g(&format!("{gn}.bias")), f(&format!("{fname}.bias")), &[out], 0.1, 0.0, &mut rng);
                    }
                }
                if sc2 {
                    add(g("ffn_up.weight"), f("mlp.c_fc.weight"), &[INTER, h], w, 0.0, &mut rng);
                    add(g("ffn_up.bias"), f("mlp.c_fc.bias"), &[INTER], 0.1, 0.0, &mut rng);
                    add(g("ffn_down.weight"), f("mlp.c_proj.weight"), &[h, INTER], w, 0.0, &mut rng);
                    add(g("ffn_down.bias"), f("mlp.c_proj.bias"), &[h], 0.1, 0.0, &mut rng);
                } else {
                    add(g("ffn_gate.weight"), f("mlp.gate_proj.weight"), &[INTER, h], w, 0.0, &mut rng);
                    add(g("ffn_up.weight"), f("mlp.up_proj.weight"), &[INTER, h], w, 0.0, &mut rng);
                    add(g("ffn_down.weight"), f("mlp.down_proj.weight"), &[h, INTER], w, 0.0, &mut rng);
                }
            }
            add("output_norm.weight".into(), "model.norm.weight".into(), &[h], 0.1, 1.0, &mut rng);
            if sc2 {
                add("output_norm.bias".into(), "model.norm.bias".into(), &[h], 0.1, 0.0, &mut rng);
            }
            if arch == Arch::Llama {
                // An untied output head, as the Qwen2.5-Coder-0.5B GGUF has.
                add("output.weight".into(), "lm_head.weight".into(), &[vocab, h], w, 0.0, &mut rng);
            }
        }
        Arch::Gemma3 => {
            add("token_embd.weight".into(), "model.embed_tokens.weight".into(), &[vocab, h], 0.2, 0.0, &mut rng);
            for i in 0..arch.layers() {
                let g = |s: &str| format!("blk.{i}.{s}");
                let f = |s: &str| format!("model.layers.{i}.{s}");
                for (gn, fname) in [
                    ("attn_norm", "input_layernorm"),
                    ("post_attention_norm", "post_attention_layernorm"),
                    ("ffn_norm", "pre_feedforward_layernorm"),
                    ("post_ffw_norm", "post_feedforward_layernorm"),
                ] {
                    add(g(&format!("{gn}.weight")), f(&format!("{fname}.weight")), &[h], 0.1, 1.0, &mut rng);
                }
                add(g("attn_q_norm.weight"), f("self_attn.q_norm.weight"), &[HEAD_DIM], 0.1, 1.0, &mut rng);
                add(g("attn_k_norm.weight"), f("self_attn.k_norm.weight"), &[HEAD_DIM], 0.1, 1.0, &mut rng);
                for (gn, fname, out, inp) in [
                    ("attn_q", "self_attn.q_proj", HEADS * HEAD_DIM, h),
                    ("attn_k", "self_attn.k_proj", kv, h),
                    ("attn_v", "self_attn.v_proj", kv, h),
                    ("attn_output", "self_attn.o_proj", h, HEADS * HEAD_DIM),
                    ("ffn_gate", "mlp.gate_proj", INTER, h),
                    ("ffn_up", "mlp.up_proj", INTER, h),
                    ("ffn_down", "mlp.down_proj", h, INTER),
                ] {
                    add(g(&format!("{gn}.weight")), f(&format!("{fname}.weight")), &[out, inp], w, 0.0, &mut rng);
                }
            }
            add("output_norm.weight".into(), "model.norm.weight".into(), &[h], 0.1, 1.0, &mut rng);
        }
        Arch::GptBigcode => {
            add("token_embd.weight".into(), "transformer.wte.weight".into(), &[vocab, h], 0.2, 0.0, &mut rng);
            add("position_embd.weight".into(), "transformer.wpe.weight".into(), &[MAX_POS, h], 0.5, 0.0, &mut rng);
            for i in 0..LAYERS {
                let g = |s: &str| format!("blk.{i}.{s}");
                let f = |s: &str| format!("transformer.h.{i}.{s}");
                for (gn, fname, len) in [("attn_norm", "ln_1", h), ("ffn_norm", "ln_2", h)] {
                    add(g(&format!("{gn}.weight")), f(&format!("{fname}.weight")), &[len], 0.1, 1.0, &mut rng);
                    add(g(&format!("{gn}.bias")), f(&format!("{fname}.bias")), &[len], 0.1, 0.0, &mut rng);
                }
                for (gn, fname, out, inp) in [
                    ("attn_qkv", "attn.c_attn", h + 2 * kv, h),
                    ("attn_output", "attn.c_proj", h, h),
                    ("ffn_up", "mlp.c_fc", INTER, h),
                    ("ffn_down", "mlp.c_proj", h, INTER),
                ] {
                    add(g(&format!("{gn}.weight")), f(&format!("{fname}.weight")), &[out, inp], w, 0.0, &mut rng);
                    add(g(&format!("{gn}.bias")), f(&format!("{fname}.bias")), &[out], 0.1, 0.0, &mut rng);
                }
            }
            add("output_norm.weight".into(), "transformer.ln_f.weight".into(), &[h], 0.1, 1.0, &mut rng);
            add("output_norm.bias".into(), "transformer.ln_f.bias".into(), &[h], 0.1, 0.0, &mut rng);
        }
    }
    p
}

/// Writes a GGUF model of `arch`: 2-D weights in `qtype`, vectors in f32, tokenizer in metadata.
pub fn write_gguf(dir: &Path, arch: Arch, qtype: GgmlDType, tokenizer_json: &str) -> PathBuf {
    write_gguf_with(dir, arch, qtype, tokenizer_json, None)
}

/// [`write_gguf`] with a `tokenizer.chat_template`, written as `<name>-chat.gguf`.
pub fn write_gguf_chat(dir: &Path, arch: Arch, qtype: GgmlDType, tokenizer_json: &str, chat_template: &str) -> PathBuf {
    write_gguf_with(dir, arch, qtype, tokenizer_json, Some(chat_template))
}

fn write_gguf_with(dir: &Path, arch: Arch, qtype: GgmlDType, tokenizer_json: &str, chat_template: Option<&str>) -> PathBuf {
    use gguf_file::Value as V;
    let vocab = vocab_and_merges(tokenizer_json).0.len();
    let a = arch.gguf_name();
    let mut md: Vec<(String, V)> = vec![
        ("general.architecture".into(), V::String(a.into())),
        (format!("{a}.embedding_length"), V::U32(HIDDEN as u32)),
        (format!("{a}.feed_forward_length"), V::U32(INTER as u32)),
        (format!("{a}.block_count"), V::U32(arch.layers() as u32)),
        (format!("{a}.attention.head_count"), V::U32(HEADS as u32)),
        (format!("{a}.attention.head_count_kv"), V::U32(arch.kv_heads() as u32)),
        (format!("{a}.context_length"), V::U32(MAX_POS as u32)),
        (format!("{a}.rope.freq_base"), V::F32(10_000.0)),
    ];
    let eps_key = if matches!(arch, Arch::Qwen2 | Arch::Llama | Arch::Gemma3) { "layer_norm_rms_epsilon" } else { "layer_norm_epsilon" };
    md.push((format!("{a}.attention.{eps_key}"), V::F32(1e-5)));
    if arch == Arch::Gemma3 {
        md.push((format!("{a}.attention.sliding_window"), V::U32(GEMMA_WINDOW as u32)));
        md.push((format!("{a}.attention.key_length"), V::U32(HEAD_DIM as u32)));
    }
    md.extend(gguf_tokenizer_metadata(tokenizer_json, "qwen2"));
    if let Some(t) = chat_template {
        md.push(("tokenizer.chat_template".into(), V::String(t.into())));
    }
    let tensors: Vec<(String, QTensor)> = parameters(arch, vocab, 11)
        .into_iter()
        .map(|(g, _, t)| {
            let q = if t.rank() == 2 { qtype } else { GgmlDType::F32 };
            (g, QTensor::quantize(&t, q).unwrap())
        })
        .collect();
    let suffix = if chat_template.is_some() { "-chat" } else { "" };
    let path = dir.join(format!("tiny-{}{suffix}.gguf", arch.hf_name()));
    let mut file = std::fs::File::create(&path).unwrap();
    let md_refs: Vec<(&str, &V)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut file, &md_refs, &t_refs).unwrap();
    path
}

/// Writes a Hugging Face directory of `arch` in f32: config.json, model.safetensors, tokenizer.json.
pub fn write_hf(dir: &Path, arch: Arch, tokenizer_json: &str) -> PathBuf {
    let (tokens, _, _) = vocab_and_merges(tokenizer_json);
    let vocab = tokens.len();
    let eos = tokens.iter().position(|t| t == "<|endoftext|>").unwrap();
    let root = dir.join(format!("tiny-{}-hf", arch.hf_name()));
    std::fs::create_dir_all(&root).unwrap();
    let config = match arch {
        Arch::GptBigcode => json!({"model_type": "gpt_bigcode", "n_embd": HIDDEN, "n_head": HEADS, "n_layer": LAYERS,
            "n_inner": INTER, "n_positions": MAX_POS, "multi_query": true, "layer_norm_epsilon": 1e-5,
            "vocab_size": vocab, "eos_token_id": eos}),
        _ => {
            let eps = if arch == Arch::Starcoder2 { "norm_epsilon" } else { "rms_norm_eps" };
            let mut c = json!({"model_type": arch.hf_name(), "hidden_size": HIDDEN, "intermediate_size": INTER,
                "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": arch.kv_heads(),
                "max_position_embeddings": MAX_POS, "rope_theta": 10000.0, "vocab_size": vocab, "eos_token_id": eos,
                "tie_word_embeddings": arch != Arch::Llama});
            c[eps] = json!(1e-5);
            if arch == Arch::Starcoder2 {
                c["sliding_window"] = json!(64);
            }
            if arch == Arch::Gemma3 {
                c["num_hidden_layers"] = json!(arch.layers());
                c["head_dim"] = json!(HEAD_DIM);
                c["sliding_window"] = json!(GEMMA_WINDOW);
                c["sliding_window_pattern"] = json!(6);
                c["rope_local_base_freq"] = json!(10000.0);
                c["query_pre_attn_scalar"] = json!(HEAD_DIM);
                c["hidden_activation"] = json!("gelu_pytorch_tanh");
            }
            c
        }
    };
    std::fs::write(root.join("config.json"), serde_json::to_string_pretty(&config).unwrap()).unwrap();
    std::fs::write(root.join("tokenizer.json"), tokenizer_json).unwrap();
    let tensors: HashMap<String, Tensor> = parameters(arch, vocab, 11)
        .into_iter()
        .map(|(_, f, t)| {
            // Gemma's checkpoints store norm weights as `w - 1` (GGUF converters add the 1 back).
            let t = if arch == Arch::Gemma3 && f.contains("norm") { (t - 1.0).unwrap() } else { t };
            (f, t)
        })
        .collect();
    candle_core::safetensors::save(&tensors, root.join("model.safetensors")).unwrap();
    root
}

/// Qwen2.5's ChatML chat template, reduced to what the tests need (default system message, generation prompt).
#[allow(dead_code)]
pub const CHATML: &str = "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou write code.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
