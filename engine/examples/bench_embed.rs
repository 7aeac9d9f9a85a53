//! Embedder throughput and sanity on a real encoder: embeddings/s over chunks of this
//! repository's code (median of several runs), cosine similarities of related and unrelated
//! snippets, and, given a reference file, the largest difference from sentence-transformers.
//!
//!   cargo run --release -p codesweep-engine --example bench_embed -- MODEL_DIR [--runs 3] [--batch 32] [--reference REF.json]
//!
//! MODEL_DIR comes from `scripts/fetch-embedder.sh`; REF.json from
//! `scripts/reference/embed_reference.py` (texts and their normalised reference embeddings).

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::Device;
use codesweep_engine::{Embedder, EmbedderOptions};

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

/// 12-line windows of the repository's Rust sources.
fn code_chunks() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["engine/src", "engine/src/generate", "engine/src/models", "tasks/src", "cli/src"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "rs")));
        }
    }
    files.sort();
    let mut chunks = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        let lines: Vec<&str> = text.lines().collect();
        chunks.extend(lines.chunks(12).map(|c| c.join("\n")).filter(|c| c.trim().len() > 40));
    }
    chunks
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let runs: usize = flag("--runs").and_then(|v| v.parse().ok()).unwrap_or(3);
    let batch: usize = flag("--batch").and_then(|v| v.parse().ok()).unwrap_or(32);
    let model_dir = args.first().filter(|a| !a.starts_with("--")).ok_or("usage: bench_embed MODEL_DIR [--runs N] [--batch B] [--reference REF.json]")?;
    let options = EmbedderOptions { batch_size: batch, normalize: true, ..EmbedderOptions::default() };
    let started = Instant::now();
    let embedder = Embedder::load(Path::new(model_dir), &Device::Cpu, options)?;
    println!(
        "model {model_dir}: {} layers, dim {}, max length {}, loaded in {:.2}s, threads {}",
        embedder.config().num_layers,
        embedder.dim(),
        embedder.max_length(),
        started.elapsed().as_secs_f64(),
        candle_core::utils::get_num_threads()
    );

    let pairs = [
        ("def add(a, b):\n    return a + b", "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}", "SELECT name FROM users WHERE age > 30;"),
        ("with open(path) as f:\n    data = f.read()", "let data = std::fs::read_to_string(path)?;", "for i in range(10):\n    print(i * i)"),
        ("sort the list in descending order", "items.sort(reverse=True)", "socket.connect((host, port))"),
    ];
    println!("cosine(query, related) vs cosine(query, unrelated):");
    let mut sane = true;
    for (q, related, unrelated) in pairs {
        let e = embedder.embed(&[q, related, unrelated])?;
        let (r, u) = (cosine(&e[0], &e[1]), cosine(&e[0], &e[2]));
        sane &= r > u;
        println!("  {r:.3} vs {u:.3}  {:?}", q.lines().next().unwrap_or(""));
    }
    println!("related scores higher in every case: {sane}");

    if let Some(reference) = flag("--reference") {
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(reference)?)?;
        let texts: Vec<&str> = doc["texts"].as_array().ok_or("reference has no `texts`")?.iter().filter_map(|t| t.as_str()).collect();
        let expected: Vec<Vec<f32>> = serde_json::from_value(doc["embeddings"].clone())?;
        let got = embedder.embed(&texts)?;
        let mut max_diff = 0f32;
        let mut min_cos = 1f32;
        for (g, e) in got.iter().zip(&expected) {
            max_diff = g.iter().zip(e).map(|(a, b)| (a - b).abs()).fold(max_diff, f32::max);
            min_cos = min_cos.min(cosine(g, e));
        }
        println!(
            "reference {reference}: {} texts, max |ours - reference| = {max_diff:.3e}, min cosine = {min_cos:.7}",
            texts.len()
        );
    }

    let chunks = code_chunks();
    let texts: Vec<&str> = chunks.iter().map(String::as_str).take(512).collect();
    let tokens = embedder.embed_counted(&texts)?.tokens;
    let mut rates = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        embedder.embed(&texts)?;
        rates.push(texts.len() as f64 / t.elapsed().as_secs_f64());
    }
    println!(
        "{} code chunks ({} tokens, {:.0} per text), batch {batch}: {:.1} embeddings/s (median of {runs})",
        texts.len(),
        tokens,
        tokens as f64 / texts.len() as f64,
        median(rates)
    );
    Ok(())
}
