//! `codesweep generate`: raw completions for a JSONL file of prompts, with a local model.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use codesweep_engine::{GenerateOptions, Generator, Request, Sampling};
use codesweep_tasks::input::{parse_jsonl, str_field};

use crate::files::{handle_invalid, progress, read_input, write_file, ModelArgs};

/// Arguments of `codesweep generate`.
#[derive(ClapArgs)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// JSON Lines, one `{"id": …, "prompt": …}` per line.
    #[arg(long)]
    prompts: PathBuf,
    /// Most new tokens per completion.
    #[arg(long)]
    max_new_tokens: usize,
    /// Most sequences decoded together.
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    /// Most tokens (rows × (longest prompt + max new tokens)) one batch may hold; bounds memory.
    #[arg(long, default_value_t = 32_768)]
    max_tokens_in_flight: usize,
    /// Sampling temperature; 0 means greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Nucleus probability mass when sampling.
    #[arg(long, default_value_t = 0.95)]
    top_p: f64,
    /// Samples per prompt (sampling only).
    #[arg(long, default_value_t = 1)]
    n: usize,
    /// Seed of the sampling streams.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop when the completion contains this text (repeatable); the text is cut before it.
    #[arg(long)]
    stop: Vec<String>,
    /// Output JSON Lines: one record per completion.
    #[arg(long)]
    out: PathBuf,
    /// Generate for the valid prompts and report the invalid lines instead of stopping.
    #[arg(long)]
    skip_invalid: bool,
}

struct Prompt {
    id: String,
    prompt: String,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    if args.temperature < 0.0 {
        bail!("--temperature must be ≥ 0 (0 = greedy), got {}", args.temperature);
    }
    if args.temperature == 0.0 && args.n > 1 {
        bail!("--n {} asks for several samples, which needs --temperature > 0", args.n);
    }
    let file = args.prompts.display().to_string();
    let parsed = parse_jsonl(&file, &read_input(&args.prompts)?, |v| {
        Ok(Prompt { id: str_field(v, "id")?.to_string(), prompt: str_field(v, "prompt")?.to_string() })
    });
    handle_invalid(&parsed.errors, args.skip_invalid)?;
    if parsed.records.is_empty() {
        bail!("{file}: no prompts");
    }
    let loading = Instant::now();
    let model = args.model.load()?;
    eprintln!(
        "loaded {} ({}, {} layers) in {:.1}s",
        args.model.model.display(),
        model.config.architecture.name(),
        model.config.num_layers,
        loading.elapsed().as_secs_f64()
    );
    let sampling = if args.temperature > 0.0 {
        Sampling::Nucleus { temperature: args.temperature, top_p: args.top_p, seed: args.seed }
    } else {
        Sampling::Greedy
    };
    let requests: Vec<Request> = parsed
        .records
        .into_iter()
        .map(|r| Request {
            stop: args.stop.clone(),
            sampling,
            n: args.n,
            ..Request::greedy(r.value.id, r.value.prompt, args.max_new_tokens)
        })
        .collect();
    let options = GenerateOptions {
        batch_size: args.batch_size.max(1),
        max_tokens_in_flight: args.max_tokens_in_flight,
        ..GenerateOptions::default()
    };
    let total = requests.len() * args.n.max(1);
    let bar = progress(total.max(500), "generating");
    bar.set_length(total as u64);
    let started = Instant::now();
    let mut tokens = 0usize;
    let generation = Generator::new(&model, options).generate(&requests, |c| {
        tokens += c.generated_tokens;
        bar.inc(1);
        bar.set_message(format!("{:.1} tok/s", tokens as f64 / started.elapsed().as_secs_f64().max(1e-9)));
    })?;
    bar.finish_and_clear();
    let out: String = generation.completions.iter().map(|c| c.to_json().to_string() + "\n").collect();
    write_file(&args.out, &out)?;
    eprintln!("{}; wrote {}", generation.summary(started.elapsed()), args.out.display());
    Ok(())
}
