//! Tiny real encoders for the embedding tests: a WordPiece BERT tokenizer and a byte-level BPE
//! RoBERTa tokenizer trained on this repository's code, and random-weight BERT / RoBERTa models
//! written as Hugging Face directories (config.json, model.safetensors, tokenizer.json).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::Tensor;
use serde_json::json;

use super::{code_corpus, Rng};

/// Hidden width of the tiny encoders.
pub const E_HIDDEN: usize = 32;
/// Attention heads of the tiny encoders.
pub const E_HEADS: usize = 4;
/// Feed-forward width of the tiny encoders.
pub const E_INTER: usize = 64;
/// Layers of the tiny encoders.
pub const E_LAYERS: usize = 2;
/// Usable positions of both tiny encoders (RoBERTa's table has `padding_idx + 1` more rows).
pub const E_POSITIONS: usize = 64;

fn train(base: serde_json::Value, trainer: tokenizers::models::TrainerWrapper) -> String {
    let mut tok: tokenizers::Tokenizer = base.to_string().parse().expect("base tokenizer");
    let mut trainer = trainer;
    tok.train(&mut trainer, code_corpus().into_iter()).expect("train");
    tok.to_string(false).expect("serialize")
}

fn specials(names: &[&str]) -> Vec<tokenizers::AddedToken> {
    names.iter().map(|s| tokenizers::AddedToken::from(s.to_string(), true)).collect()
}

/// A BERT `tokenizer.json` (lower-casing BertNormalizer, WordPiece, `[CLS] … [SEP]`) trained on
/// the repository's code. Ids: `[PAD]` 0, `[UNK]` 1, `[CLS]` 2, `[SEP]` 3, `[MASK]` 4.
pub fn wordpiece_tokenizer_json(vocab_size: usize) -> String {
    let base = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": {}}
    });
    let trainer = tokenizers::models::wordpiece::WordPieceTrainer::builder()
        .vocab_size(vocab_size)
        .show_progress(false)
        .special_tokens(specials(&["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
        .build();
    train(base, tokenizers::models::TrainerWrapper::WordPieceTrainer(trainer))
}

/// A RoBERTa `tokenizer.json` (byte-level BPE, `<s> … </s>`) trained on the repository's code.
/// Ids: `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3.
pub fn roberta_tokenizer_json(vocab_size: usize) -> String {
    let base = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true, "add_prefix_space": false},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": {}, "merges": []}
    });
    let trainer = tokenizers::models::bpe::BpeTrainer::builder()
        .vocab_size(vocab_size)
        .show_progress(false)
        .initial_alphabet(tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet().into_iter().collect())
        .special_tokens(specials(&["<s>", "<pad>", "</s>", "<unk>"]))
        .build();
    train(base, tokenizers::models::TrainerWrapper::BpeTrainer(trainer))
}

/// Which tiny encoder to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderArch {
    /// `model_type: bert`, tensors named as a bare `BertModel` saves them.
    Bert,
    /// `model_type: roberta`, tensors under `roberta.` (as `RobertaForMaskedLM` saves them),
    /// padding_idx 1, a position table of `E_POSITIONS + 2` rows, one token type.
    Roberta,
}

/// Vocabulary size (largest id + 1) of a tokenizer.json.
pub fn vocab_size(tokenizer_json: &str) -> usize {
    let tok: tokenizers::Tokenizer = tokenizer_json.parse().expect("tokenizer");
    tok.get_vocab(true).values().copied().max().map_or(0, |m| m as usize + 1)
}

/// (name, tensor) of every parameter of a random encoder; names without any prefix.
pub fn encoder_parameters(arch: EncoderArch, vocab: usize, seed: u64) -> Vec<(String, Tensor)> {
    let mut rng = Rng::new(seed);
    let h = E_HIDDEN;
    let (positions, types) = match arch {
        EncoderArch::Bert => (E_POSITIONS, 2),
        EncoderArch::Roberta => (E_POSITIONS + 2, 1),
    };
    let mut p = vec![
        ("embeddings.word_embeddings.weight".to_string(), rng.tensor(&[vocab, h], 0.5, 0.0)),
        ("embeddings.position_embeddings.weight".to_string(), rng.tensor(&[positions, h], 0.5, 0.0)),
        ("embeddings.token_type_embeddings.weight".to_string(), rng.tensor(&[types, h], 0.5, 0.0)),
        ("embeddings.LayerNorm.weight".to_string(), rng.tensor(&[h], 0.1, 1.0)),
        ("embeddings.LayerNorm.bias".to_string(), rng.tensor(&[h], 0.1, 0.0)),
    ];
    for i in 0..E_LAYERS {
        let l = |s: &str| format!("encoder.layer.{i}.{s}");
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", E_INTER, h),
            ("output.dense", h, E_INTER),
        ] {
            p.push((l(&format!("{name}.weight")), rng.tensor(&[out, inp], 0.4, 0.0)));
            p.push((l(&format!("{name}.bias")), rng.tensor(&[out], 0.1, 0.0)));
        }
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
            p.push((l(&format!("{norm}.weight")), rng.tensor(&[h], 0.1, 1.0)));
            p.push((l(&format!("{norm}.bias")), rng.tensor(&[h], 0.1, 0.0)));
        }
    }
    // The pooler head, which embeddings do not use.
    p.push(("pooler.dense.weight".to_string(), rng.tensor(&[h, h], 0.4, 0.0)));
    p.push(("pooler.dense.bias".to_string(), rng.tensor(&[h], 0.1, 0.0)));
    p
}

/// The config.json of a tiny encoder.
pub fn encoder_config(arch: EncoderArch, vocab: usize) -> serde_json::Value {
    let mut c = json!({"hidden_size": E_HIDDEN, "num_hidden_layers": E_LAYERS, "num_attention_heads": E_HEADS,
        "intermediate_size": E_INTER, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "vocab_size": vocab,
        "position_embedding_type": "absolute"});
    match arch {
        EncoderArch::Bert => {
            c["model_type"] = json!("bert");
            c["max_position_embeddings"] = json!(E_POSITIONS);
            c["type_vocab_size"] = json!(2);
            c["pad_token_id"] = json!(0);
        }
        EncoderArch::Roberta => {
            c["model_type"] = json!("roberta");
            c["max_position_embeddings"] = json!(E_POSITIONS + 2);
            c["type_vocab_size"] = json!(1);
            c["pad_token_id"] = json!(1);
        }
    }
    c
}

/// Writes a Hugging Face directory `dir/name` with `config`, `tensors` (names as given) and the tokenizer.
pub fn write_encoder_dir(dir: &Path, name: &str, config: &serde_json::Value, tensors: Vec<(String, Tensor)>, tokenizer_json: &str) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("config.json"), serde_json::to_string_pretty(config).unwrap()).unwrap();
    std::fs::write(root.join("tokenizer.json"), tokenizer_json).unwrap();
    let tensors: HashMap<String, Tensor> = tensors.into_iter().collect();
    candle_core::safetensors::save(&tensors, root.join("model.safetensors")).unwrap();
    root
}

/// A random tiny encoder of `arch` with its tokenizer, in `dir/tiny-<arch>`.
pub fn write_encoder(dir: &Path, arch: EncoderArch, tokenizer_json: &str) -> PathBuf {
    let vocab = vocab_size(tokenizer_json);
    let prefix = if arch == EncoderArch::Roberta { "roberta." } else { "" };
    let tensors = encoder_parameters(arch, vocab, 29).into_iter().map(|(n, t)| (format!("{prefix}{n}"), t)).collect();
    let name = if arch == EncoderArch::Bert { "tiny-bert" } else { "tiny-roberta" };
    write_encoder_dir(dir, name, &encoder_config(arch, vocab), tensors, tokenizer_json)
}
