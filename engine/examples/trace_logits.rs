//! Our next-token logits along a greedy or given token path: the engine's side of the `logits`
//! part of scripts/bench-engine.sh, in the output format of scripts/reference/llama_logits.cpp,
//! so the two engines can be compared step by step on the same tokens.
//!
//!   cargo run --release -p codesweep-engine --example trace_logits -- MODEL.gguf PROMPT_FILE STEPS [PATH] [LOGITS_OUT] [--keep-everything]
//!
//! The prompt is encoded with the model's special tokens (as `generate` feeds it) and run as one
//! forward pass; each later step feeds one token against the KV cache. PATH: comma-separated token
//! ids to feed (`-` or absent: our own argmax each step, i.e. greedy). LOGITS_OUT: the prompt's
//! last-position logits as raw little-endian f32. Prints one JSON object:
//! `{"n_prompt": N, "steps": [[argmax, its logit, runner-up, its logit], ...], "kv_cache_bytes": B}`.
//! `--keep-everything`: a KV cache that never forgets what a sliding window no longer sees (the
//! logits must come out the same bits; the bytes larger on long prompts).

use std::path::Path;

use codesweep_engine::generate::batch::step_inputs;
use codesweep_engine::kernels::math::argmax;
use codesweep_engine::{parse_device, KvCache, Model};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The largest entry and the largest other entry, each the first among equals, by the engine's
/// own greedy choice ([`argmax`]), so a traced path is the one `generate` takes.
fn top_two(logits: &[f32]) -> (usize, usize) {
    let best = argmax(logits);
    let mut others = logits.to_vec();
    others[best] = f32::NEG_INFINITY;
    (best, argmax(&others))
}

fn main() -> BoxResult<()> {
    let keep_everything = std::env::args().any(|a| a == "--keep-everything");
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let [model_path, prompt_path, steps, rest @ ..] = args.as_slice() else {
        return Err("usage: trace_logits MODEL PROMPT_FILE STEPS [PATH] [LOGITS_OUT]".into());
    };
    let steps: usize = steps.parse().map_err(|_| format!("STEPS must be a whole number, not '{steps}'"))?;
    if steps == 0 {
        return Err("STEPS must be at least 1".into());
    }
    let path: Option<Vec<u32>> = match rest.first().map(String::as_str) {
        None | Some("-") => None,
        Some(ids) => Some(
            ids.split(',')
                .map(|id| id.trim().parse().map_err(|_| format!("PATH: '{id}' is not a token id")))
                .collect::<Result<_, _>>()?,
        ),
    };
    let logits_out = rest.get(1);

    let model = Model::load(Path::new(model_path), &parse_device("cpu")?, None)?;
    let prompt = std::fs::read_to_string(prompt_path).map_err(|e| format!("{prompt_path}: {e}"))?;
    let prompt_ids = model.tokenizer.encode(&prompt)?;
    if prompt_ids.is_empty() {
        return Err(format!("{prompt_path}: the prompt encodes to no tokens").into());
    }
    let mut cache = KvCache::new(model.config.num_layers, model.kv_cache);
    if keep_everything {
        cache = cache.keeping_everything();
    }
    let (mut start, mut feed) = (0, prompt_ids.clone());
    let mut rows = Vec::new();
    for step in 0..steps {
        let inputs = step_inputs(&[feed.clone()], &[0], start, model.config.windows(), model.dtype, &model.device)?;
        let logits = model.network.forward(&inputs, &mut cache)?.squeeze(0)?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        if let (0, Some(out)) = (step, logits_out) {
            let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(out, bytes).map_err(|e| format!("{out}: {e}"))?;
        }
        let (best, second) = top_two(&logits);
        rows.push(format!("[{best}, {:.6}, {second}, {:.6}]", logits[best], logits[second]));
        let next = match &path {
            Some(path) => match path.get(step) {
                Some(&id) => id,
                None => break,
            },
            None if model.tokenizer.eos_ids().contains(&(best as u32)) => break,
            None => best as u32,
        };
        start += feed.len();
        feed = vec![next];
    }
    println!("{{\"n_prompt\": {}, \"steps\": [{}], \"kv_cache_bytes\": {}}}", prompt_ids.len(), rows.join(", "), cache.bytes());
    Ok(())
}
