//! Coordinator benchmark: lease+complete operations per second with many simulated workers
//! over real loopback gRPC, and the schedule's memory per 10^5 shards.
//!
//! `cargo run --release -p codesweep-coordinator --example bench_coordinator -- [--workers 200]
//! [--shards 100000] [--runs 3]`
//!
//! Each simulated worker has its own gRPC connection and loops: lease a shard, create its
//! result object in an in-memory store (as a real worker does, so `complete` finds it), then
//! complete it. The run is submitted through the real planner (one example per shard).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use codesweep_coordinator::plan::{Plan, PlannedShard};
use codesweep_coordinator::schedule::{Schedule, Timings};
use codesweep_coordinator::service::{bind, serve, CoordinatorOptions, CoordinatorService};
use codesweep_coordinator::spec::SweepSpec;
use codesweep_proto::{CompleteShardRequest, LeaseShardRequest, RegisterWorkerRequest};
use codesweep_store::records::Benchmark;
use codesweep_store::RunStore;

struct Args {
    workers: usize,
    shards: usize,
    runs: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { workers: 200, shards: 100_000, runs: 3 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number: usize = value.parse().map_err(|e| format!("{flag} {value:?}: {e}"))?;
        match flag.as_str() {
            "--workers" => args.workers = number,
            "--shards" => args.shards = number,
            "--runs" => args.runs = number,
            other => return Err(format!("unknown flag {other}; flags: --workers N --shards N --runs N")),
        }
    }
    Ok(args)
}

/// Resident set size of this process, in bytes (Linux).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

/// Memory the schedule holds for `shards` queued shards (RSS growth, plan dropped).
fn schedule_memory(shards: usize) -> u64 {
    let plan = Plan {
        run_id: "memory".into(),
        shards: (0..shards)
            .map(|index| PlannedShard {
                shard_id: codesweep_store::shard_id("qwen2.5-coder-1.5b", "cceval", "python", "rg1_bm25", index),
                model: "qwen2.5-coder-1.5b".into(),
                benchmark: Benchmark::Cceval,
                language: "python".into(),
                setting: "rg1_bm25".into(),
                index,
                examples: 100,
            })
            .collect(),
    };
    let timings = Timings { lease_ttl: Duration::from_secs(60), max_attempts: 3, retry_backoff: Duration::from_secs(1) };
    let before = rss_bytes();
    let mut schedule = Schedule::new();
    schedule.add_run(&plan, "memory://x", timings, &Default::default(), &Default::default(), &Default::default(), Instant::now());
    drop(plan);
    let after = rss_bytes();
    std::hint::black_box(&schedule);
    after.saturating_sub(before)
}

fn write_data(dir: &Path, examples: usize) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("python"))?;
    let mut text = String::with_capacity(examples * 96);
    for i in 0..examples {
        text.push_str(&format!(
            "{{\"prompt\": \"x{i} = \", \"groundtruth\": \"1\", \"metadata\": {{\"task_id\": \"project_cc_python/{i}\"}}}}\n"
        ));
    }
    std::fs::write(dir.join("python/line_completion.jsonl"), text)
}

/// One timed run: submit, then `workers` simulated workers drain the queue. Returns
/// (operations per second, plan seconds).
async fn one_run(data: &Path, args: &Args, run: usize) -> Result<(f64, f64), String> {
    let text = format!(
        "[run]\nname = \"bench{run}\"\nstore = \"memory://bench{run}\"\nshard_size = 1\n\
         [[models]]\nname = \"m\"\npath = \"/m.gguf\"\n\
         [cceval]\ndata_dir = \"{}\"\nlanguages = [\"python\"]\nsettings = [\"in_file\"]\n",
        data.display()
    );
    let spec = SweepSpec::parse_with_env("bench.toml", &text, codesweep_coordinator::spec::SpecFormat::Toml, false)
        .map_err(|e| e.to_string())?;
    let service = CoordinatorService::new(CoordinatorOptions { heartbeat_interval: Duration::from_secs(2), exit_when_done: true, ..Default::default() });
    let planned = Instant::now();
    service.submit(&spec, false).await.map_err(|s| s.message().to_string())?;
    let plan_seconds = planned.elapsed().as_secs_f64();
    let listener = bind("127.0.0.1:0".parse().map_err(|e| format!("{e}"))?).await.map_err(|e| e.to_string())?;
    let address = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(service.clone(), listener, Some("bench-token"), None, async {
        let _ = stopped.await;
    }));
    let store = RunStore::open(&format!("memory://bench{run}")).map_err(|e| e.to_string())?;
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..args.workers {
        let (address, store, done) = (address.clone(), store.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = codesweep_proto::client::connect(&address, Some("bench-token"), None, Duration::from_secs(10)).await?;
            let worker_id = client
                .register_worker(RegisterWorkerRequest { name: format!("sim{w}"), device: "none".into(), ..Default::default() })
                .await
                .map_err(|s| s.message().to_string())?
                .into_inner()
                .worker_id;
            loop {
                let answer = client
                    .lease_shard(LeaseShardRequest { worker_id: worker_id.clone(), loaded_model: "m".into(), ..Default::default() })
                    .await
                    .map_err(|s| s.message().to_string())?
                    .into_inner();
                let Some(lease) = answer.lease else {
                    if answer.shutdown {
                        return Ok::<(), String>(());
                    }
                    tokio::time::sleep(Duration::from_millis(answer.retry_after_ms.max(5))).await;
                    continue;
                };
                store.put_once(&lease.result_key, "{}\n".into()).await.map_err(|e| e.to_string())?;
                let accepted = client
                    .complete_shard(CompleteShardRequest {
                        worker_id: worker_id.clone(),
                        lease_id: lease.lease_id,
                        stats: None,
                        run_id: lease.run_id,
                        shard_id: lease.shard_id,
                    })
                    .await
                    .map_err(|s| s.message().to_string())?
                    .into_inner()
                    .accepted;
                if !accepted {
                    return Err("a completion was refused".into());
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let _ = stop.send(());
    let _ = server.await;
    let completed = done.load(Ordering::Relaxed);
    if completed != args.shards as u64 {
        return Err(format!("{completed} shards completed, {} planned", args.shards));
    }
    Ok((completed as f64 / seconds, plan_seconds))
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("bench_coordinator: {e}");
            std::process::exit(2);
        }
    };
    let memory = schedule_memory(100_000);
    println!("schedule memory: {:.1} MiB per 10^5 queued shards ({} bytes per shard)", memory as f64 / 1048576.0, memory / 100_000);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bench_coordinator: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let data = std::env::temp_dir().join(format!("codesweep-bench-coordinator-{}", std::process::id()));
    if let Err(e) = write_data(&data, args.shards) {
        eprintln!("bench_coordinator: cannot write {}: {e}", data.display());
        std::process::exit(1);
    }
    let (mut rates, mut plans) = (Vec::new(), Vec::new());
    for run in 0..args.runs {
        match runtime.block_on(one_run(&data, &args, run)) {
            Ok((rate, plan)) => {
                println!("run {}: {rate:.0} lease+complete/s, plan {plan:.2}s", run + 1);
                rates.push(rate);
                plans.push(plan);
            }
            Err(e) => {
                eprintln!("bench_coordinator: run {} failed: {e}", run + 1);
                let _ = std::fs::remove_dir_all(&data);
                std::process::exit(1);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&data);
    println!(
        "median over {} runs: {:.0} lease+complete operations/s with {} simulated workers on {} shards; planning {:.2}s ({:.0} shards/s)",
        args.runs,
        median(&mut rates),
        args.workers,
        args.shards,
        median(&mut plans),
        args.shards as f64 / median(&mut plans.clone())
    );
}
