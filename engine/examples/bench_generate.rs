//! Engine throughput on a real model: prefill tokens/s at 512-token prompts and decode tokens/s,
//! at batch 1 and 8, medians of several runs; then greedy completions of real code prompts.
//!
//!   cargo run --release -p codesweep-engine --example bench_generate -- MODEL.gguf PROMPTS.jsonl... [--runs N]
//!       [--completions OUT.jsonl] [--no-speed] [--no-completions] [--batches 1,8] [--decode-tokens 32]
//!       [--device cpu|cuda:N] [--dtype f32|f16|bf16] [--prompt-tokens 512] [--prefill-chunk 512]
//!       [--speed-json OUT.json] [--logits OUT.json]
//!
//! MODEL is a GGUF file or a Hugging Face directory (config.json, *.safetensors, tokenizer.json).
//! PROMPTS files are CrossCodeEval-format JSONL (a `prompt` field per line): real code.
//! `--completions` also writes each greedy completion with its exact prompt text, so another
//! engine can be given the same prompts (scripts/bench-engine.sh does that with llama.cpp).
//!
//! Without PROMPTS files the prompts are synthetic: words of the model's own vocabulary (each one
//! token), exactly `--prompt-tokens` tokens each, as many as the largest batch; there are no
//! completions then. scripts/gpu-bench.sh runs it that way on a GPU against transformers.
//!
//! * `--device`, `--dtype`: where and in what dtype to run (`cuda:N` needs `--features cuda`;
//!   the dtype applies to safetensors weights, default f32 on the CPU and f16 on a GPU). On a GPU
//!   each batch size gets one unmeasured warm-up call of its own.
//! * `--prompt-tokens`: length of the speed prompts (from PROMPTS files: the last N tokens of
//!   prompts at least N + 48 tokens long). `--prefill-chunk`: prompt tokens per prefill step over
//!   the batch (the engine's default, 512, unless given).
//! * `--speed-json OUT.json`: the speed figures with every run's raw numbers, and the token ids of
//!   the speed prompts, for another engine to be fed the same ones.
//! * `--logits OUT.json`: for a few prompts (8, 64, 256 and `--prompt-tokens` tokens), the token
//!   ids fed and the full logits of the last position (the first generated token's distribution),
//!   from one forward pass of the whole prompt, as f32.

use std::path::Path;
use std::time::Instant;

use codesweep_engine::generate::batch::step_inputs;
use codesweep_engine::KvCache;
use codesweep_engine::{parse_device, parse_dtype, GenerateOptions, Generator, Model, Request, TextTokenizer};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Options that take a value (skipped when collecting positional arguments).
const VALUE_OPTIONS: &[&str] = &[
    "--runs",
    "--completions",
    "--batches",
    "--decode-tokens",
    "--device",
    "--dtype",
    "--prompt-tokens",
    "--prefill-chunk",
    "--speed-json",
    "--logits",
];

/// Largest batch size accepted (synthetic prompts are made for the largest batch asked for).
const MAX_BATCH: usize = 1024;

/// Prompt lengths of `--logits` (each capped at `--prompt-tokens`).
const LOGIT_LENGTHS: [usize; 3] = [8, 64, 256];

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn number(option: Option<&String>, name: &str, default: usize) -> BoxResult<usize> {
    match option {
        Some(v) => Ok(v.parse().map_err(|_| format!("{name} takes a number, not `{v}`"))?),
        None => Ok(default),
    }
}

/// splitmix64: a small deterministic generator, so synthetic prompts are the same on every run.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Words of the vocabulary that are one token on their own and one pre-token in running text:
/// a space and 2 to 10 lower-case ASCII letters (" return", " value"). Any sequence of them
/// tokenizes to exactly one token per word.
fn plain_words(tok: &TextTokenizer) -> BoxResult<Vec<String>> {
    let mut words = Vec::new();
    for id in 0..u32::try_from(tok.vocab_size()).map_err(|_| "vocabulary too large")? {
        let text = tok.decode(&[id])?;
        let Some(rest) = text.strip_prefix(' ') else { continue };
        if !(2..=10).contains(&rest.len()) || !rest.bytes().all(|b| b.is_ascii_lowercase()) {
            continue;
        }
        if tok.tokenize(&text)? == [id] {
            words.push(text);
            if words.len() == 4096 {
                break;
            }
        }
    }
    if words.len() < 64 {
        return Err(format!(
            "the tokenizer has only {} plain words (a space and lower-case letters, one token each; byte-level BPE vocabularies such as Qwen's have thousands); synthetic prompts need 64",
            words.len()
        )
        .into());
    }
    Ok(words)
}

/// `tokens` words drawn from `words` with `seed`; checked to encode to `tokens` tokens.
fn synthetic_prompt(tok: &TextTokenizer, words: &[String], tokens: usize, seed: u64) -> BoxResult<String> {
    let mut state = seed;
    let mut text = String::new();
    for _ in 0..tokens {
        let pick = usize::try_from(splitmix64(&mut state) % words.len() as u64).map_err(|_| "word index overflow")?;
        text.push_str(&words[pick]);
    }
    let n = tok.tokenize(&text)?.len();
    if n != tokens {
        return Err(format!("a synthetic prompt of {tokens} words tokenized to {n} tokens").into());
    }
    Ok(text)
}

/// Logits of the last position of `ids`, one forward pass over the whole prompt, as f32.
fn last_logits(model: &Model, ids: &[u32]) -> BoxResult<Vec<f32>> {
    let step = step_inputs(&[ids.to_vec()], &[0], 0, model.config.windows(), model.dtype, &model.device)?;
    let mut cache = KvCache::new(model.config.num_layers, model.kv_cache);
    let logits = model.network.forward(&step, &mut cache)?;
    Ok(logits.squeeze(0)?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?)
}

fn write_json(path: &str, value: &serde_json::Value) -> BoxResult<()> {
    std::fs::write(path, format!("{value}\n")).map_err(|e| format!("{path}: {e}"))?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_generate: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> BoxResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let runs = number(option("--runs"), "--runs", 3)?;
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let completions_out = option("--completions");
    let batches: Vec<usize> = match option("--batches") {
        Some(v) => v.split(',').map(|b| b.parse().map_err(|_| format!("--batches takes numbers like 1,8, not `{v}`"))).collect::<Result<_, _>>()?,
        None => vec![1, 8],
    };
    if batches.iter().any(|&b| b == 0 || b > MAX_BATCH) {
        return Err(format!("--batches takes sizes from 1 to {MAX_BATCH}").into());
    }
    let decode_tokens = number(option("--decode-tokens"), "--decode-tokens", 32)?;
    let prompt_tokens = number(option("--prompt-tokens"), "--prompt-tokens", 512)?;
    if prompt_tokens == 0 {
        return Err("--prompt-tokens must be at least 1".into());
    }
    let prefill_chunk = number(option("--prefill-chunk"), "--prefill-chunk", GenerateOptions::default().prefill_chunk)?;
    if prefill_chunk == 0 {
        return Err("--prefill-chunk must be at least 1".into());
    }
    let device_spec = option("--device").map(String::as_str).unwrap_or("cpu");
    let device = parse_device(device_spec)?;
    let dtype = option("--dtype").map(|d| parse_dtype(d)).transpose()?;
    let speed_json = option("--speed-json");
    let logits_out = option("--logits");
    let measure_speed = !args.iter().any(|a| a == "--no-speed");
    let mut positional: Vec<&String> = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            name if VALUE_OPTIONS.contains(&name) => {
                rest.next();
            }
            flag if flag.starts_with("--") => {}
            _ => positional.push(a),
        }
    }
    let (model_path, prompt_files) =
        positional.split_first().ok_or("usage: bench_generate MODEL [PROMPTS.jsonl...] (see the header of engine/examples/bench_generate.rs)")?;
    let synthetic = prompt_files.is_empty();
    let started = Instant::now();
    let model = Model::load(Path::new(model_path.as_str()), &device, dtype)?;
    let load_seconds = started.elapsed().as_secs_f64();
    println!("model {model_path}: {} layers, hidden {}, loaded in {:.1}s, threads {}",
        model.config.num_layers, model.config.hidden_size, load_seconds, candle_core::utils::get_num_threads());
    if !device.is_cpu() || dtype.is_some() {
        println!("device {device_spec}, dtype {:?}", model.dtype);
    }

    let mut prompts: Vec<(String, String)> = Vec::new();
    for file in prompt_files {
        let lang = Path::new(file.as_str()).parent().and_then(|p| p.file_name()).map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        for line in std::fs::read_to_string(file.as_str()).map_err(|e| format!("{file}: {e}"))?.lines() {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("{file}: not JSON lines: {e}"))?;
            if let Some(p) = v["prompt"].as_str() {
                prompts.push((lang.clone(), p.to_string()));
            }
        }
    }
    let tok = &model.tokenizer;
    let wanted = batches.iter().copied().max().unwrap_or(1).max(8);
    let words = if synthetic { plain_words(tok)? } else { Vec::new() };
    let mut long = Vec::new();
    if synthetic {
        for i in 0..wanted {
            long.push(synthetic_prompt(tok, &words, prompt_tokens, i as u64)?);
        }
    } else {
        // N-token prompts (512 by default): the last N tokens of long real prompts, decoded back to
        // text (counted without the BOS a tokenizer such as Gemma's adds).
        for (_, p) in &prompts {
            let ids = tok.tokenize(p)?;
            if ids.len() >= prompt_tokens + 48 {
                let text = tok.inner().decode(&ids[ids.len() - prompt_tokens..], false).map_err(|e| e.to_string())?;
                if tok.tokenize(&text)?.len() == prompt_tokens {
                    long.push(text);
                }
            }
            if long.len() == wanted {
                break;
            }
        }
        if long.len() < wanted {
            return Err(format!("need {wanted} prompts of at least {} tokens", prompt_tokens + 48).into());
        }
    }

    // The ids the engine feeds for each speed prompt (the tokenizer's special tokens included).
    let long_ids: Vec<Vec<u32>> = long.iter().map(|p| tok.encode(p)).collect::<Result<_, _>>()?;

    if let Some(path) = logits_out {
        let mut rows = Vec::new();
        let mut lengths: Vec<usize> = LOGIT_LENGTHS.iter().map(|&n| n.min(prompt_tokens)).chain([prompt_tokens]).collect();
        lengths.dedup();
        for (i, &n) in lengths.iter().enumerate() {
            let text = if synthetic {
                synthetic_prompt(tok, &words, n, 1_000_000 + i as u64)?
            } else {
                tok.keep_tokens(&long[i % long.len()], n, true)?
            };
            let ids = tok.encode(&text)?;
            let logits = last_logits(&model, &ids)?;
            let argmax = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
            println!("logits: prompt of {} tokens, argmax {argmax}, logit {:.4}", ids.len(), logits.get(argmax).copied().unwrap_or(f32::NAN));
            rows.push(serde_json::json!({"ids": ids, "argmax": argmax, "logits": logits}));
        }
        write_json(path, &serde_json::json!({
            "engine": "codesweep", "model": model_path, "device": device_spec,
            "dtype": format!("{:?}", model.dtype).to_lowercase(), "prompts": rows,
        }))?;
    }

    let on_gpu = !device.is_cpu();
    if measure_speed {
        // Warm-up, not measured: the first forward pages the mapped weights in (llama-batched-bench warms up too).
        let warm = GenerateOptions { batch_size: 1, max_tokens_in_flight: 1 << 20, prefill_chunk };
        Generator::new(&model, warm).generate(&[Request::greedy("warm-up", long[0].clone(), 2)], |_| {})?;
    }
    let mut speed = Vec::new();
    for batch in if measure_speed { batches } else { Vec::new() } {
        // The whole batch must fit in one engine batch (the default bound is 32768 tokens).
        let longest = long_ids[..batch].iter().map(Vec::len).max().unwrap_or(0);
        let in_flight = batch * (longest + decode_tokens + 1);
        let opts = GenerateOptions {
            batch_size: batch,
            max_tokens_in_flight: GenerateOptions::default().max_tokens_in_flight.max(in_flight),
            prefill_chunk,
        };
        let gen = Generator::new(&model, opts);
        let reqs: Vec<Request> = long[..batch].iter().enumerate().map(|(i, p)| Request::greedy(format!("d{i}"), p.clone(), decode_tokens + 1)).collect();
        if on_gpu {
            // A GPU's first calls at a shape pay for cuBLAS's choices and the allocator's growth.
            gen.generate(&reqs, |_| {})?;
        }
        let mut prefill = Vec::new();
        let mut decode = Vec::new();
        let mut raw = Vec::new();
        for _ in 0..runs {
            // One call measures both: the stats keep prefill (prompt to first logits) and decode
            // (32 further steps by default, as llama-batched-bench -ntg 32) apart.
            let g = gen.generate(&reqs, |_| {})?;
            let s = &g.stats;
            prefill.push(s.prompt_tokens as f64 / s.prefill_time.as_secs_f64());
            decode.push(s.decode_rows as f64 / s.decode_time.as_secs_f64());
            raw.push(serde_json::json!({
                "engine_batches": s.batches, "prompt_tokens": s.prompt_tokens, "prefill_seconds": s.prefill_time.as_secs_f64(),
                "decode_rows": s.decode_rows, "decode_seconds": s.decode_time.as_secs_f64(),
            }));
        }
        let (prefill, decode) = (median(prefill), median(decode));
        println!("batch {batch}: prefill {prefill:.1} tok/s ({prompt_tokens}-token prompts), decode {decode:.2} tok/s (median of {runs})");
        speed.push(serde_json::json!({"batch": batch, "prefill_tokens_per_s": prefill, "decode_tokens_per_s": decode, "runs": raw}));
        // Rewritten after each batch size, so a later failure (out of memory) keeps the earlier ones.
        if let Some(path) = speed_json {
            write_json(path, &serde_json::json!({
                "engine": "codesweep", "model": model_path, "device": device_spec,
                "dtype": format!("{:?}", model.dtype).to_lowercase(), "load_seconds": load_seconds,
                "prompt_tokens": prompt_tokens, "decode_tokens": decode_tokens, "prefill_chunk": prefill_chunk,
                "runs": runs, "synthetic_prompts": synthetic, "batches": speed, "prompt_ids": long_ids,
            }))?;
        }
    }

    if args.iter().any(|a| a == "--no-completions") {
        return Ok(());
    }
    if synthetic {
        println!("no completions: synthetic prompts (give PROMPTS files for completions of real code)");
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
