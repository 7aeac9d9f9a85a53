//! The lease loop: register, lease, heartbeat while running, write the result once, report.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use crate::shard_control::ShardControl;
use std::time::{Duration, Instant};

use codesweep_proto::client::Client;
use codesweep_proto::tls::ClientTls;
use codesweep_proto::{
    CompleteShardRequest, FailShardRequest, HeartbeatRequest, Lease, LeaseShardRequest, RegisterWorkerRequest,
    ShardStats,
};
use codesweep_store::records::{self, Benchmark, ExampleResult, ModelSpec, ResultHeader, ShardHeader};
use codesweep_store::{RunStore, WriteOutcome};
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument;

use crate::backend::load_model;
use codesweep_engine::TextModel;
use crate::cceval::run_cceval_shard;
use crate::repoqa::run_repoqa_shard;
use crate::error::WorkerError;
use crate::reach::{ended_state, reach_coordinator, wait_until_ready, RunRef};
use crate::shard_trace::ShardTrace;

/// How a worker is set up.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The coordinator's address, e.g. `http://127.0.0.1:50051`.
    pub coordinator: String,
    /// Bearer token for the coordinator, if it requires one.
    pub token: Option<String>,
    /// TLS settings for an `https://` coordinator (None: plain, or the public web roots).
    pub tls: Option<ClientTls>,
    /// A name for logs (host or pod name).
    pub name: String,
    /// Default device for local models (`cpu`, `cuda:N`).
    pub device: String,
    /// Where models given as URLs are downloaded.
    pub model_cache: PathBuf,
    /// How long to keep trying to reach the coordinator at start.
    pub connect_timeout: Duration,
    /// How long to keep retrying a call while the coordinator is unreachable later on (a
    /// restarting coordinator); the shard in hand keeps running meanwhile.
    pub reconnect_for: Duration,
    /// What the worker runs: its pool and, when not empty, only these models of it.
    pub pool: String,
    /// See `pool`.
    pub models: Vec<String>,
    /// The run this worker is for: when the coordinator cannot be reached and the store says
    /// the run ended, the worker exits successfully instead of waiting or failing.
    pub run: Option<RunRef>,
    /// An inference server (a sidecar) to wait for before leasing: a URL answering GET with
    /// 2xx once ready, and how long to wait.
    pub wait_for: Option<(String, Duration)>,
}

/// What a worker did before it exited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Shards whose results this worker wrote.
    pub shards_done: usize,
    /// Attempts that failed.
    pub shards_failed: usize,
    /// Examples in the shards it finished.
    pub examples: usize,
    /// The coordinator was gone and the run had ended (the state it ended in): nothing to do.
    pub run_ended: Option<String>,
}

/// How a worker is asked to stop (a watch channel's value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StopMode {
    /// Keep working.
    Run,
    /// Finish the shard in hand, lease no more (first SIGTERM / Ctrl-C).
    Drain,
    /// Release the shard in hand and exit (second signal).
    Now,
}

fn rpc(config: &WorkerConfig) -> impl Fn(tonic::Status) -> WorkerError + '_ {
    |status| WorkerError::Rpc { address: config.coordinator.clone(), message: status.message().to_string() }
}

/// Calls the coordinator, retrying with backoff while it is unreachable, for up to
/// `config.reconnect_for` (or until the worker is told to stop now, or the store says the run
/// ended: the coordinator exited after the end, so there is nothing left to do).
async fn call<T, F, Fut>(config: &WorkerConfig, stop: &watch::Receiver<StopMode>, mut attempt: F) -> Result<T, WorkerError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let deadline = Instant::now() + config.reconnect_for;
    let mut wait = Duration::from_millis(200);
    loop {
        match attempt().await {
            Ok(answer) => return Ok(answer.into_inner()),
            Err(status)
                if matches!(status.code(), tonic::Code::Unavailable | tonic::Code::Unknown)
                    && Instant::now() < deadline
                    && *stop.borrow() != StopMode::Now =>
            {
                if let Some(state) = match &config.run {
                    Some(run) if wait >= Duration::from_secs(1) => ended_state(run).await,
                    _ => None,
                } {
                    tracing::info!(%state, "the coordinator is gone and the run has ended; nothing left to do");
                    return Err(WorkerError::RunEnded { state });
                }
                tracing::warn!(%status, retry_in = ?wait, "the coordinator is unreachable; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
            Err(status) => return Err(rpc(config)(status)),
        }
    }
}

struct Loaded {
    name: String,
    backend: TextModel,
}

/// Runs the lease loop until the coordinator says to shut down or `stop` leaves `Run`. A
/// run found ended while the coordinator is unreachable ends it successfully.
pub async fn run_worker(config: WorkerConfig, stop: watch::Receiver<StopMode>) -> Result<WorkerReport, WorkerError> {
    let mut report = WorkerReport::default();
    match lease_until_done(&config, stop, &mut report).await {
        Err(WorkerError::RunEnded { state }) => {
            report.run_ended = Some(state);
            Ok(report)
        }
        outcome => outcome.map(|()| report),
    }
}

async fn lease_until_done(config: &WorkerConfig, stop: watch::Receiver<StopMode>, report: &mut WorkerReport) -> Result<(), WorkerError> {
    if let Some((url, timeout)) = &config.wait_for {
        tracing::info!(%url, "waiting for the inference server before leasing");
        wait_until_ready(url, *timeout).await?;
    }
    let client = reach_coordinator(&config).await?;
    let registration = RegisterWorkerRequest {
        name: config.name.clone(),
        device: config.device.clone(),
        pool: config.pool.clone(),
        models: config.models.clone(),
    };
    let registered = call(&config, &stop, || {
        let (mut client, request) = (client.clone(), registration.clone());
        async move { client.register_worker(request).await }
    })
    .await?;
    let worker_id = registered.worker_id;
    let heartbeat = Duration::from_millis(registered.heartbeat_interval_ms.max(50));
    tracing::info!(worker = %worker_id, coordinator = %config.coordinator, pool = %config.pool, "registered");
    let mut loaded: Option<Loaded> = None;
    let mut stores: HashMap<String, RunStore> = HashMap::new();
    let mut stop_rx = stop.clone();
    while *stop.borrow() == StopMode::Run {
        let loaded_model = loaded.as_ref().map(|l| l.name.clone()).unwrap_or_default();
        let request = LeaseShardRequest {
            worker_id: worker_id.clone(),
            loaded_model,
            pool: config.pool.clone(),
            models: config.models.clone(),
        };
        let answer = call(&config, &stop, || {
            let (mut client, request) = (client.clone(), request.clone());
            async move { client.lease_shard(request).await }
        })
        .await?;
        let Some(lease) = answer.lease else {
            if answer.shutdown {
                break;
            }
            let wait = Duration::from_millis(answer.retry_after_ms.max(20));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop_rx.changed() => {}
            }
            continue;
        };
        let store = match stores.get(&lease.store_url) {
            Some(store) => store.clone(),
            None => {
                let store = RunStore::open(&lease.store_url)?;
                stores.insert(lease.store_url.clone(), store.clone());
                store
            }
        };
        let control = Arc::new(ShardControl::default());
        tracing::info!(shard = %lease.shard_id, attempt = lease.attempt, "shard started");
        let beats = tokio::spawn(heartbeats(client.clone(), worker_id.clone(), lease.clone(), control.clone(), heartbeat, stop.clone()));
        let outcome = run_lease(&config, &store, &lease, &mut loaded, &worker_id, &control).await;
        beats.abort();
        match outcome {
            Ok(stats) => {
                let request = CompleteShardRequest {
                    worker_id: worker_id.clone(),
                    lease_id: lease.lease_id.clone(),
                    stats: Some(stats),
                    run_id: lease.run_id.clone(),
                    shard_id: lease.shard_id.clone(),
                };
                let answer = call(&config, &stop, || {
                    let (mut client, request) = (client.clone(), request.clone());
                    async move { client.complete_shard(request).await }
                })
                .await?;
                if answer.accepted {
                    report.shards_done += 1;
                    report.examples += stats.examples as usize;
                }
                tracing::info!(shard = %lease.shard_id, examples = stats.examples, seconds = stats.seconds, "shard done");
            }
            Err(error) => {
                let release = *stop.borrow() == StopMode::Now;
                if !release {
                    report.shards_failed += 1;
                }
                tracing::warn!(shard = %lease.shard_id, %error, release, "shard not finished");
                let request = FailShardRequest {
                    worker_id: worker_id.clone(),
                    lease_id: lease.lease_id.clone(),
                    error: error.to_string(),
                    retryable: error.retryable(),
                    release,
                };
                call(&config, &stop, || {
                    let (mut client, request) = (client.clone(), request.clone());
                    async move { client.fail_shard(request).await }
                })
                .await?;
            }
        }
    }
    Ok(())
}

async fn heartbeats(
    mut client: Client,
    worker_id: String,
    lease: Lease,
    control: Arc<ShardControl>,
    every: Duration,
    mut stop: watch::Receiver<StopMode>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() == StopMode::Now {
            control.request_stop("the worker is stopping");
        }
        let request = HeartbeatRequest {
            worker_id: worker_id.clone(),
            lease_id: lease.lease_id.clone(),
            examples_done: control.examples_done.load(Ordering::Relaxed),
            generated_tokens: control.generated_tokens.load(Ordering::Relaxed),
            run_id: lease.run_id.clone(),
            shard_id: lease.shard_id.clone(),
        };
        match client.heartbeat(request).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                if answer.cancel {
                    control.request_stop("the run was cancelled");
                } else if !answer.lease_valid {
                    control.request_stop("the lease was lost (expired and given to another worker)");
                }
            }
            // A missed heartbeat is not fatal: the lease survives until its TTL, and a restarted
            // coordinator adopts it at the next heartbeat that gets through.
            Err(status) => tracing::warn!(%status, "heartbeat failed"),
        }
    }
}

async fn ensure_model(config: &WorkerConfig, loaded: &mut Option<Loaded>, spec: &ModelSpec) -> Result<TextModel, WorkerError> {
    if let Some(l) = loaded.as_ref().filter(|l| l.name == spec.name) {
        return Ok(l.backend.clone());
    }
    // Free the old model before loading the next.
    *loaded = None;
    let local = match &spec.path {
        Some(path) => Some(RunStore::download_to(path, &config.model_cache.join(&spec.name), spec.sha256.as_deref()).await?),
        None => None,
    };
    let tokenizer = match &spec.tokenizer {
        Some(path) => Some(RunStore::download_to(path, &config.model_cache.join(format!("{}.tokenizer", spec.name)), None).await?),
        None => None,
    };
    let started = Instant::now();
    let (spec_owned, device) = (spec.clone(), config.device.clone());
    let backend = tokio::task::spawn_blocking(move || {
        load_model(&spec_owned, local.as_deref(), tokenizer.as_deref(), &device)
    })
    .await
    .map_err(|e| WorkerError::Stopped(format!("model loading panicked: {e}")))??;
    tracing::info!(model = %spec.name, seconds = started.elapsed().as_secs_f64(), "model loaded");
    *loaded = Some(Loaded { name: spec.name.clone(), backend: backend.clone() });
    Ok(backend)
}

/// Runs a leased shard inside its `shard` span.
async fn run_lease(
    config: &WorkerConfig,
    store: &RunStore,
    lease: &Lease,
    loaded: &mut Option<Loaded>,
    worker_id: &str,
    control: &Arc<ShardControl>,
) -> Result<ShardStats, WorkerError> {
    let mut trace = ShardTrace::start(lease, &config.name);
    let span = trace.span().clone();
    let outcome = run_traced_lease(config, store, lease, loaded, worker_id, control, &mut trace).instrument(span).await;
    trace.finish(&outcome);
    outcome
}

async fn run_traced_lease(
    config: &WorkerConfig,
    store: &RunStore,
    lease: &Lease,
    loaded: &mut Option<Loaded>,
    worker_id: &str,
    control: &Arc<ShardControl>,
    trace: &mut ShardTrace,
) -> Result<ShardStats, WorkerError> {
    let key = lease.input_key.clone();
    let text = store
        .get_text(&key)
        .await?
        .ok_or_else(|| WorkerError::Input { key: key.clone(), message: "the shard input object does not exist".into() })?;
    let (header, examples): (ShardHeader, Vec<Value>) = records::decode(&key, &text)?;
    trace.describe(&header);
    let backend = ensure_model(config, loaded, &header.model).await?;
    let context_tokenizer = match (&header.benchmark, &header.repoqa) {
        (Benchmark::Repoqa, options) => {
            let choice = options.as_ref().map_or(crate::context_tokenizer::OFFICIAL, |o| o.context_tokenizer.as_str());
            crate::context_tokenizer::resolve(choice, &key, &config.model_cache).await?
        }
        _ => crate::context_tokenizer::ContextTokenizer::Model,
    };
    let (job_header, job_control, job_key) = (header.clone(), control.clone(), key.clone());
    let span = trace.span().clone();
    let (results, totals) = tokio::task::spawn_blocking(move || {
        let _in_shard = span.enter();
        match job_header.benchmark {
            Benchmark::Cceval => run_cceval_shard(&backend, &job_key, &job_header, &examples, &job_control),
            Benchmark::Repoqa => {
                run_repoqa_shard(&backend, &context_tokenizer, &job_key, &job_header, &examples, &job_control)
            }
        }
    })
    .await
    .map_err(|e| WorkerError::Stopped(format!("shard execution panicked: {e}")))??;
    if let Some(reason) = control.stop_reason() {
        return Err(WorkerError::Stopped(reason));
    }
    let stats = ShardStats {
        examples: totals.examples as u64,
        prompt_tokens: totals.prompt_tokens,
        generated_tokens: totals.generated_tokens,
        seconds: totals.seconds,
    };
    let result_header = ResultHeader { shard: header, worker: format!("{}/{worker_id}", config.name), attempt: lease.attempt, totals };
    let body = records::encode::<ResultHeader, ExampleResult>(&result_header, &results)
        .map_err(|e| WorkerError::Input { key: key.clone(), message: e.to_string() })?;
    if store.put_once(&lease.result_key, body).await? == WriteOutcome::AlreadyExists {
        tracing::info!(shard = %lease.shard_id, "result already written by another attempt; keeping it");
    }
    Ok(stats)
}
