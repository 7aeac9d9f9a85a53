//! Token ids of texts under the tokenizer we rebuild from a GGUF file's metadata, for comparison
//! with independent tokenizers (scripts/reference/compare_tokenizers.py).
//!
//!   cargo run --release -p codesweep-engine --example tokenize_gguf -- MODEL.gguf TEXTS.jsonl > IDS.jsonl
//!
//! TEXTS.jsonl has a `text` field per line; each output line is `{"ids": [...]}` for the same line,
//! without special tokens added (what the prompt text itself tokenizes to).

use std::io::Write;

use candle_core::quantized::gguf_file;
use codesweep_engine::tokenizer::tokenizer_json_from_gguf;
use codesweep_engine::TextTokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model_path, texts_path] = args.as_slice() else {
        return Err("usage: tokenize_gguf MODEL.gguf TEXTS.jsonl".into());
    };
    let model_path = std::path::Path::new(model_path);
    let mut reader = std::io::BufReader::new(
        std::fs::File::open(model_path).map_err(|e| format!("{}: {e}", model_path.display()))?,
    );
    let content = gguf_file::Content::read(&mut reader).map_err(|e| format!("{}: {e}", model_path.display()))?;
    let built = tokenizer_json_from_gguf(model_path, &content.metadata)?;
    let tokenizer = TextTokenizer::from_json(&built.json, built.eos_ids)?;
    let texts = std::fs::read_to_string(texts_path).map_err(|e| format!("{texts_path}: {e}"))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (n, line) in texts.lines().enumerate() {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{texts_path}:{}: not JSON: {e}", n + 1))?;
        let text = value["text"].as_str().ok_or_else(|| format!("{texts_path}:{}: no string field `text`", n + 1))?;
        writeln!(out, "{}", serde_json::json!({"ids": tokenizer.tokenize(text)?}))?;
    }
    Ok(())
}
