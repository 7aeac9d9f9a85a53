//! Weight-streaming speed of the K-quant kernels at small batches, against this machine's plain
//! read bandwidth measured in the same run: how close a decode step's matrix products come to the
//! memory's limit.
//!
//!   cargo run --release -p codesweep-engine --example bench_kernels -- [--rows 1,8] [--runs 5] [--mib 512]
//!
//! The matrices have the Qwen2.5-Coder-1.5B MLP's shapes ((8960, 1536) and (1536, 8960)) in
//! Q4_K and Q6_K, random but valid, enough of them (`--mib`, GGUF bytes per format) that they
//! never sit in the caches; each product reads every one once. Threads: candle's pool
//! (`RAYON_NUM_THREADS`). Prints medians of `--runs` passes in GB/s of the GGUF bytes read,
//! beside the read bandwidth of the same bytes summed by every thread.

use std::time::Instant;

use codesweep_engine::kernels::{matmul_kquant, Isa, KQuantFormat, KQuantWeights, Q8KRows};

/// A value of `--name`, or `default`.
fn option(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

/// A small deterministic generator (xorshift), so the bench needs no extra crates.
struct Bits(u64);

impl Bits {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// GGUF bytes of a (rows, cols) matrix: random integers, small positive f16 scales.
fn gguf_bytes(format: KQuantFormat, rows: usize, cols: usize, bits: &mut Bits) -> Vec<u8> {
    let scale = half::f16::from_f32(0.001).to_le_bytes();
    let mut out = Vec::new();
    for _ in 0..rows * cols / 256 {
        match format {
            KQuantFormat::Q4K => {
                out.extend_from_slice(&scale);
                out.extend_from_slice(&scale);
                (0..140).for_each(|_| out.push(bits.next() as u8));
            }
            KQuantFormat::Q6K => {
                (0..192).for_each(|_| out.push(bits.next() as u8));
                (0..16).for_each(|_| out.push((bits.next() % 255) as u8 ^ 0x80));
                out.extend_from_slice(&scale);
            }
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// GB/s of summing `data` as u64 words on every thread of candle's pool, median of `runs`.
fn read_bandwidth(data: &[u64], runs: usize) -> f64 {
    let pool = candle_core::utils::barrier_pool();
    let chunks = (pool.n_workers() + 1) * 8;
    let per = data.len().div_ceil(chunks);
    let sink = std::sync::atomic::AtomicU64::new(0);
    let times = (0..runs)
        .map(|_| {
            let start = Instant::now();
            pool.execute_chunked(chunks, |range| {
                for c in range {
                    let part = &data[(c * per).min(data.len())..((c + 1) * per).min(data.len())];
                    let sum = part.iter().fold(0u64, |a, &w| a.wrapping_add(w));
                    sink.fetch_xor(sum, std::sync::atomic::Ordering::Relaxed);
                }
            });
            start.elapsed().as_secs_f64()
        })
        .collect();
    std::hint::black_box(sink.load(std::sync::atomic::Ordering::Relaxed));
    (data.len() * 8) as f64 / median(times) / 1e9
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let batch_rows: Vec<usize> = option(&args, "--rows", "1,8").split(',').filter_map(|s| s.parse().ok()).collect();
    let runs: usize = option(&args, "--runs", "5").parse().unwrap_or(5);
    let mib: usize = option(&args, "--mib", "512").parse().unwrap_or(512);
    let Some(isa) = Isa::detect() else {
        eprintln!("no SIMD kernels on this CPU (or CODESWEEP_CPU_KERNEL=candle): nothing to measure");
        std::process::exit(2);
    };
    let threads = candle_core::utils::barrier_pool().n_workers() + 1;
    println!("kernels {isa:?}, {threads} threads, {mib} MiB of GGUF weights per format, medians of {runs}");
    let mut bits = Bits(0x9e37_79b9_7f4a_7c15);
    let shapes = [(8960, 1536), (1536, 8960)];
    for format in [KQuantFormat::Q4K, KQuantFormat::Q6K] {
        let mut matrices = Vec::new();
        let mut gguf_total = 0usize;
        while gguf_total < mib << 20 {
            let (rows, cols) = shapes[matrices.len() % 2];
            let raw = gguf_bytes(format, rows, cols, &mut bits);
            gguf_total += raw.len();
            match KQuantWeights::from_gguf(format, rows, cols, &raw) {
                Ok(w) => matrices.push(w),
                Err(e) => {
                    eprintln!("{format:?} ({rows}, {cols}): {e}");
                    std::process::exit(1);
                }
            }
        }
        let baseline: Vec<u64> = (0..gguf_total / 8).map(|_| bits.next()).collect();
        let read = read_bandwidth(&baseline, runs);
        for &m in &batch_rows {
            let inputs: Vec<Q8KRows> = shapes
                .iter()
                .map(|&(_, cols)| {
                    let x: Vec<f32> = (0..m * cols).map(|_| (bits.next() % 2001) as f32 / 1000.0 - 1.0).collect();
                    Q8KRows::quantize(&x, cols)
                })
                .collect();
            let mut out = vec![0f32; m * 8960];
            let times = (0..runs)
                .map(|_| {
                    let start = Instant::now();
                    for (i, w) in matrices.iter().enumerate() {
                        matmul_kquant(isa, w, &inputs[i % 2], &mut out[..m * w.rows()]);
                    }
                    start.elapsed().as_secs_f64()
                })
                .collect();
            let seconds = median(times);
            println!(
                "{format:?} batch {m}: {:.1} GB/s of GGUF weights ({:.0} µs per (8960, 1536) product); plain read {read:.1} GB/s; ratio {:.2}",
                gguf_total as f64 / seconds / 1e9,
                seconds / matrices.len() as f64 * 1e6,
                gguf_total as f64 / seconds / 1e9 / read,
            );
        }
    }
}
