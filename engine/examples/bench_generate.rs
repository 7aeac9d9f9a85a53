//! Engine throughput on a real model: prefill tokens/s at 512-token prompts and decode tokens/s,
//! at batch 1 and 8, medians of several runs; then greedy completions of real code prompts.
//!
//!   cargo run --release -p codesweep-engine --example bench_generate -- MODEL.gguf PROMPTS.jsonl... [--runs N]
//!
//! PROMPTS files are CrossCodeEval-format JSONL (a `prompt` field per line): real code.

use std::time::Instant;

use candle_core::Device;
use codesweep_engine::{GenerateOptions, Generator, Model, Request};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs = args.iter().position(|a| a == "--runs").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(3usize);
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--") && a.parse::<usize>().is_err()).collect();
    let (model_path, prompt_files) = positional.split_first().ok_or("usage: bench_generate MODEL PROMPTS.jsonl...")?;
    let started = Instant::now();
    let model = Model::load(std::path::Path::new(model_path.as_str()), &Device::Cpu, None)?;
    println!("model {model_path}: {} layers, hidden {}, loaded in {:.1}s, threads {}",
        model.config.num_layers, model.config.hidden_size, started.elapsed().as_secs_f64(), candle_core::utils::get_num_threads());

    let mut prompts: Vec<(String, String)> = Vec::new();
    for file in prompt_files {
        let lang = std::path::Path::new(file.as_str()).parent().and_then(|p| p.file_name()).map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        for line in std::fs::read_to_string(file.as_str())?.lines() {
            let v: serde_json::Value = serde_json::from_str(line)?;
            if let Some(p) = v["prompt"].as_str() {
                prompts.push((lang.clone(), p.to_string()));
            }
        }
    }
    // 512-token prompts: the last 512 tokens of long real prompts, decoded back to text.
    let tok = &model.tokenizer;
    let mut long = Vec::new();
    for (_, p) in &prompts {
        let ids = tok.tokenize(p)?;
        if ids.len() >= 560 {
            let text = tok.inner().decode(&ids[ids.len() - 512..], false).map_err(|e| e.to_string())?;
            if tok.encode(&text)?.len() == 512 {
                long.push(text);
            }
        }
        if long.len() == 8 {
            break;
        }
    }
    if long.len() < 8 {
        return Err("need 8 prompts of at least 560 tokens".into());
    }
    for batch in [1usize, 8] {
        let opts = GenerateOptions { batch_size: batch, max_tokens_in_flight: 1 << 20, prefill_chunk: 512 };
        let gen = Generator::new(&model, opts);
        let mut prefill = Vec::new();
        let mut decode = Vec::new();
        for _ in 0..runs {
            let reqs: Vec<Request> = long[..batch].iter().enumerate().map(|(i, p)| Request::greedy(format!("b{i}"), p.clone(), 1)).collect();
            let g = gen.generate(&reqs, |_| {})?;
            prefill.push(g.stats.prompt_tokens as f64 / g.stats.prefill_time.as_secs_f64());
            let reqs: Vec<Request> = long[..batch].iter().enumerate().map(|(i, p)| Request::greedy(format!("d{i}"), p.clone(), 33)).collect();
            let g = gen.generate(&reqs, |_| {})?;
            decode.push(g.stats.decode_rows as f64 / g.stats.decode_time.as_secs_f64());
        }
        println!("batch {batch}: prefill {:.1} tok/s (512-token prompts), decode {:.2} tok/s (median of {runs})", median(prefill), median(decode));
    }

    // Greedy completions of real code prompts, 5 per language, last 256 tokens of each prompt.
    let mut shown = std::collections::BTreeMap::<String, usize>::new();
    let mut sample = Vec::new();
    for (lang, p) in &prompts {
        let n = shown.entry(lang.clone()).or_default();
        if *n < 5 {
            *n += 1;
            let ids = tok.tokenize(p)?;
            let tail = tok.inner().decode(&ids[ids.len().saturating_sub(256)..], false).map_err(|e| e.to_string())?;
            sample.push((lang.clone(), tail));
        }
    }
    let reqs: Vec<Request> = sample.iter().enumerate().map(|(i, (l, p))| Request { stop: vec!["\n".into()], ..Request::greedy(format!("{l}/{i}"), p.clone(), 48) }).collect();
    let g = Generator::new(&model, GenerateOptions::default()).generate(&reqs, |_| {})?;
    for c in &g.completions {
        println!("COMPLETION\t{}\t{}\t{}", c.id, c.stop_reason.as_str(), serde_json::to_string(&c.text)?);
    }
    Ok(())
}
