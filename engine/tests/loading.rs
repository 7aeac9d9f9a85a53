//! Loading: the GGUF-rebuilt tokenizer equals tokenizer.json on real code, and broken model files,
//! unknown architectures and bad configs fail with messages naming the file and the problem.

use codesweep_test_support::models as common;

use std::collections::HashMap;

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::Device;
use codesweep_engine::tokenizer::tokenizer_json_from_gguf;
use codesweep_engine::{Model, TextTokenizer};
use common::Arch;

#[test]
fn gguf_rebuilt_tokenizer_equals_tokenizer_json_on_code() {
    let json = common::trained_tokenizer_json(1200);
    let metadata: HashMap<String, gguf_file::Value> = common::gguf_tokenizer_metadata(&json, "qwen2").into_iter().collect();
    let rebuilt = tokenizer_json_from_gguf(std::path::Path::new("tiny.gguf"), &metadata).unwrap();
    let original = TextTokenizer::from_json(&json, vec![]).unwrap();
    let rebuilt = TextTokenizer::from_json(&rebuilt.json, rebuilt.eos_ids).unwrap();
    let mut tokens = 0;
    let mut texts = common::code_corpus();
    texts.push("<|fim_prefix|>def f(x):\n    return x<|fim_suffix|>\n<|fim_middle|>  naïve = '日本語' \r\n\t 12345".into());
    for text in &texts {
        let a = original.encode(text).unwrap();
        let b = rebuilt.encode(text).unwrap();
        assert_eq!(a, b, "token ids differ on {:?}…", &text[..text.len().min(60)]);
        assert_eq!(rebuilt.decode(&b).unwrap(), original.decode(&a).unwrap());
        tokens += a.len();
    }
    assert!(tokens > 10_000, "the corpus should be real code, got {tokens} tokens");
    // The merges are doing work: far fewer tokens than bytes.
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    assert!(tokens * 2 < bytes, "{tokens} tokens for {bytes} bytes");
    assert_eq!(rebuilt.eos_ids().len(), 1);
    assert_eq!(rebuilt.fim().map(|f| f.prefix.as_str()), Some("<|fim_prefix|>"));
}

/// Qwen2's tokenizer.json normalizes to NFC; the real-model check (scripts/check-tokenizer.sh) found
/// llama.cpp does not, so this pins that our rebuild keeps the original's behaviour.
#[test]
fn qwen2_rebuilt_tokenizer_composes_decomposed_characters_like_the_original() {
    let json = common::trained_tokenizer_json(1200);
    let metadata: HashMap<String, gguf_file::Value> = common::gguf_tokenizer_metadata(&json, "qwen2").into_iter().collect();
    let rebuilt = tokenizer_json_from_gguf(std::path::Path::new("tiny.gguf"), &metadata).unwrap();
    let rebuilt = TextTokenizer::from_json(&rebuilt.json, rebuilt.eos_ids).unwrap();
    let composed = "caf\u{e9} = '\u{c5}' # \u{f1}";
    let decomposed = "cafe\u{301} = 'A\u{30a}' # n\u{303}";
    assert_ne!(composed.as_bytes(), decomposed.as_bytes());
    assert_eq!(rebuilt.tokenize(decomposed).unwrap(), rebuilt.tokenize(composed).unwrap());
}

#[test]
fn unsupported_pre_tokenizer_is_named() {
    let json = common::trained_tokenizer_json(300);
    let metadata: HashMap<String, gguf_file::Value> = common::gguf_tokenizer_metadata(&json, "chatglm-bpe").into_iter().collect();
    let err = tokenizer_json_from_gguf(std::path::Path::new("m.gguf"), &metadata).unwrap_err().to_string();
    assert!(err.contains("m.gguf") && err.contains("chatglm-bpe") && err.contains("qwen2"), "{err}");
}

#[test]
fn truncated_gguf_says_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::write_gguf(dir.path(), Arch::Qwen2, GgmlDType::Q8_0, &common::trained_tokenizer_json(300));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 1000]).unwrap();
    let err = Model::load(&path, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("tiny-qwen2.gguf") && err.contains("truncated"), "{err}");
    // Cut inside the header (the tokenizer metadata).
    std::fs::write(&path, &bytes[..2000]).unwrap();
    let err = Model::load(&path, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("tiny-qwen2.gguf") && err.contains("not a GGUF file, or its header is corrupt"), "{err}");
}

/// Counts in the header that no file of this size can hold (tensors, metadata entries, a
/// string's length): an error naming the file, never a huge allocation or a panic.
#[test]
fn header_counts_beyond_the_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::write_gguf(dir.path(), Arch::Qwen2, GgmlDType::Q8_0, &common::trained_tokenizer_json(300));
    let bytes = std::fs::read(&path).unwrap();
    // GGUF v3: magic, version (u32), tensor count (u64 at 8), metadata count (u64 at 16), then the
    // first key's length (u64 at 24).
    for (offset, value) in [(8usize, u64::MAX), (8, 1 << 40), (16, u64::MAX), (16, 1 << 40), (24, u64::MAX), (24, 1 << 40)] {
        let mut corrupt = bytes.clone();
        corrupt[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
        std::fs::write(&path, &corrupt).unwrap();
        let err = Model::load(&path, &Device::Cpu, None).err().map(|e| e.to_string());
        let err = err.unwrap_or_else(|| panic!("a header with {value} at byte {offset} loaded"));
        assert!(err.contains("tiny-qwen2.gguf"), "{offset} {value}: {err}");
    }
}

#[test]
fn garbage_file_is_not_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    std::fs::write(&path, b"<html>404 not found</html>").unwrap();
    let err = Model::load(&path, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("model.gguf") && err.contains("not a GGUF file"), "{err}");
}

#[test]
fn unknown_architectures_list_the_supported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let tok = common::trained_tokenizer_json(300);
    let path = common::write_gguf(dir.path(), Arch::Llama, GgmlDType::Q8_0, &tok);
    // Rewrite general.architecture in place: same length keeps the file valid.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(5).position(|w| w == b"llama").unwrap();
    bytes[at..at + 5].copy_from_slice(b"mamba");
    std::fs::write(&path, &bytes).unwrap();
    let err = Model::load(&path, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("`mamba` is not supported") && err.contains("qwen2, llama, starcoder2"), "{err}");

    let hf = common::write_hf(dir.path(), Arch::Qwen2, &tok);
    let cfg = std::fs::read_to_string(hf.join("config.json")).unwrap().replace("\"qwen2\"", "\"rwkv\"");
    std::fs::write(hf.join("config.json"), cfg).unwrap();
    let err = Model::load(&hf, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("config.json") && err.contains("`rwkv` is not supported"), "{err}");
}

#[test]
fn broken_hf_directories_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let tok = common::trained_tokenizer_json(300);
    let hf = common::write_hf(dir.path(), Arch::Starcoder2, &tok);
    let weights = hf.join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let err = Model::load(&hf, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("safetensors"), "{err}");

    std::fs::remove_file(&weights).unwrap();
    let err = Model::load(&hf, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("no model.safetensors"), "{err}");

    let hf = common::write_hf(dir.path(), Arch::Llama, &tok);
    let cfg = std::fs::read_to_string(hf.join("config.json")).unwrap().replace("\"num_hidden_layers\"", "\"layers_renamed\"");
    std::fs::write(hf.join("config.json"), cfg).unwrap();
    let err = Model::load(&hf, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("config.json") && err.contains("num_hidden_layers") && err.contains("missing"), "{err}");

    let hf = common::write_hf(dir.path(), Arch::GptBigcode, &tok);
    std::fs::write(hf.join("config.json"), "{not json").unwrap();
    let err = Model::load(&hf, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("config.json") && err.contains("not valid JSON"), "{err}");
}

#[test]
fn wrong_tensor_shapes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let tok = common::trained_tokenizer_json(300);
    let hf = common::write_hf(dir.path(), Arch::Qwen2, &tok);
    let cfg = std::fs::read_to_string(hf.join("config.json")).unwrap().replace("\"intermediate_size\": 128", "\"intermediate_size\": 96");
    std::fs::write(hf.join("config.json"), cfg).unwrap();
    let err = Model::load(&hf, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("model.layers.0.mlp.gate_proj.weight") && err.contains("expected shape [96, 64]"), "{err}");
}

#[test]
fn chat_templates_are_read_from_gguf_and_hf_directories() {
    let dir = tempfile::tempdir().unwrap();
    let tok = common::trained_tokenizer_json(300);
    let template = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}";
    let gguf = common::write_gguf_chat(dir.path(), Arch::Qwen2, GgmlDType::Q8_0, &tok, template);
    assert_eq!(Model::load(&gguf, &Device::Cpu, None).unwrap().chat_template.as_deref(), Some(template));
    let plain = common::write_gguf(dir.path(), Arch::Qwen2, GgmlDType::Q8_0, &tok);
    assert_eq!(Model::load(&plain, &Device::Cpu, None).unwrap().chat_template, None);
    let hf = common::write_hf(dir.path(), Arch::Qwen2, &tok);
    std::fs::write(hf.join("tokenizer_config.json"), serde_json::json!({"chat_template": template}).to_string()).unwrap();
    assert_eq!(Model::load(&hf, &Device::Cpu, None).unwrap().chat_template.as_deref(), Some(template));
}

#[test]
fn an_encoder_given_as_a_generator_says_to_embed_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let bert = common::encoder::write_encoder(dir.path(), common::encoder::EncoderArch::Bert, &common::encoder::wordpiece_tokenizer_json(300));
    let err = Model::load(&bert, &Device::Cpu, None).err().unwrap().to_string();
    assert!(err.contains("config.json") && err.contains("`bert` is an encoder") && err.contains("--embedder"), "{err}");
}
