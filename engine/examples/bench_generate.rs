//! Engine throughput on a real model: prefill tokens/s at 512-token prompts and decode tokens/s,
//! at batch 1 and 8, medians of several runs; then greedy completions of real code prompts.
//!
//!   cargo run --release -p codesweep-engine --example bench_generate -- MODEL.gguf PROMPTS.jsonl... [--runs N]
//!       [--completions OUT.jsonl] [--no-speed] [--no-completions] [--batches 1,8] [--decode-tokens 32]
//!
//! PROMPTS files are CrossCodeEval-format JSONL (a `prompt` field per line): real code.
//! `--completions` also writes each greedy completion with its exact prompt text, so another
//! engine can be given the same prompts (scripts/bench-engine.sh does that with llama.cpp).

use std::time::Instant;

use candle_core::Device;
use codesweep_engine::{GenerateOptions, Generator, Model, Request};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let runs = match option("--runs") {
        Some(v) => v.parse().map_err(|_| format!("--runs takes a number, not `{v}`"))?,
        None => 3usize,
    };
    let completions_out = option("--completions");
    let batches: Vec<usize> = match option("--batches") {
        Some(v) => v.split(',').map(|b| b.parse().map_err(|_| format!("--batches takes numbers like 1,8, not `{v}`"))).collect::<Result<_, _>>()?,
        None => vec![1, 8],
    };
    if batches.iter().any(|&b| b == 0 || b > 8) {
        return Err("--batches takes sizes from 1 to 8".into());
    }
    let decode_tokens: usize = match option("--decode-tokens") {
        Some(v) => v.parse().map_err(|_| format!("--decode-tokens takes a number, not `{v}`"))?,
        None => 32,
    };
    let measure_speed = !args.iter().any(|a| a == "--no-speed");
    let mut positional: Vec<&String> = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--runs" | "--completions" | "--batches" | "--decode-tokens" => {
                rest.next();
            }
            flag if flag.starts_with("--") => {}
            _ => positional.push(a),
        }
    }
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
    if measure_speed {
        // Warm-up, not measured: the first forward pages the mapped weights in (llama-batched-bench warms up too).
        let warm = GenerateOptions { batch_size: 1, max_tokens_in_flight: 1 << 20, prefill_chunk: 512 };
        Generator::new(&model, warm).generate(&[Request::greedy("warm-up", long[0].clone(), 2)], |_| {})?;
    }
    for batch in if measure_speed { batches } else { Vec::new() } {
        let opts = GenerateOptions { batch_size: batch, ..GenerateOptions::default() };
        let gen = Generator::new(&model, opts);
        let mut prefill = Vec::new();
        let mut decode = Vec::new();
        for _ in 0..runs {
            // One call measures both: the stats keep prefill (prompt to first logits) and decode
            // (32 further steps by default, as llama-batched-bench -ntg 32) apart.
            let reqs: Vec<Request> = long[..batch].iter().enumerate().map(|(i, p)| Request::greedy(format!("d{i}"), p.clone(), decode_tokens + 1)).collect();
            let g = gen.generate(&reqs, |_| {})?;
            prefill.push(g.stats.prompt_tokens as f64 / g.stats.prefill_time.as_secs_f64());
            decode.push(g.stats.decode_rows as f64 / g.stats.decode_time.as_secs_f64());
        }
        println!("batch {batch}: prefill {:.1} tok/s (512-token prompts), decode {:.2} tok/s (median of {runs})", median(prefill), median(decode));
    }

    if args.iter().any(|a| a == "--no-completions") {
        return Ok(());
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
    let mut out = match completions_out {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?)),
        None => None,
    };
    for (c, (lang, prompt)) in g.completions.iter().zip(&sample) {
        println!("COMPLETION\t{}\t{}\t{}", c.id, c.stop_reason.as_str(), serde_json::to_string(&c.text)?);
        if let Some(out) = out.as_mut() {
            let line = serde_json::json!({"id": c.id, "language": lang, "prompt": prompt, "max_new_tokens": 48,
                "completion": c.text, "stop_reason": c.stop_reason.as_str(), "token_ids": c.token_ids});
            std::io::Write::write_all(out, format!("{line}\n").as_bytes())?;
        }
    }
    if let Some(out) = out.as_mut() {
        std::io::Write::flush(out)?;
    }
    Ok(())
}
