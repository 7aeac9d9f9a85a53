//! `codesweep coordinator` and `codesweep worker`: the two long-running processes of a cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use codesweep_coordinator::report::{build_report, write_report, Scoring};
use codesweep_coordinator::service::{serve, CoordinatorOptions, CoordinatorService};
use codesweep_coordinator::spec::expand_home;
use codesweep_proto::tls::ServerTls;
use codesweep_proto::RunState;
use codesweep_store::{RunLayout, RunStore};
use codesweep_worker::{run_worker, RunRef, StopMode, WorkerConfig};

use crate::cluster::{read_token, runtime, split_run_uri, stop_on_signals, CoordinatorFlags};
use crate::exit::{self, exit_with};
use crate::telemetry::{start_telemetry, telemetry_config, TelemetryFlags};

/// Arguments of `codesweep coordinator`.
#[derive(clap::Args)]
pub struct CoordinatorArgs {
    /// Address to listen on (`0.0.0.0:50051` in a cluster; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Store(s) whose unfinished runs are reloaded at start (repeatable).
    #[arg(long)]
    store: Vec<String>,
    /// Environment variable holding the bearer token every RPC must carry (unset: no auth).
    #[arg(long, default_value = "CODESWEEP_TOKEN")]
    token_env: String,
    /// Heartbeat interval told to workers, in seconds.
    #[arg(long, default_value_t = 2.0)]
    heartbeat_seconds: f64,
    /// Exit once every run has ended and tell idle workers to exit too (batch jobs).
    #[arg(long)]
    exit_when_done: bool,
    /// With --exit-when-done: a spec file (TOML/YAML/JSON) to submit at start; its
    /// `[telemetry]` section applies to this coordinator.
    #[arg(long)]
    submit: Option<PathBuf>,
    /// Serve TLS only, with this PEM certificate chain (leaf first); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Seconds a run's hold outlives this coordinator's last renewal: another coordinator
    /// refuses the run until then (renewed every third of it; released on a clean exit).
    #[arg(long, default_value_t = 30.0)]
    hold_seconds: f64,
    #[command(flatten)]
    telemetry: TelemetryFlags,
}

/// Runs the coordinator until SIGTERM / Ctrl-C (or, with --exit-when-done, until its runs end).
pub fn coordinator(args: CoordinatorArgs) -> Result<()> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(ServerTls::from_files(cert, key)?),
        _ => None,
    };
    let submitted = args.submit.as_deref().map(codesweep_coordinator::spec::SweepSpec::load).transpose()?;
    let runtime = runtime()?;
    let section = submitted.as_ref().and_then(|s| s.telemetry.as_ref());
    let mut telemetry = start_telemetry(&runtime, &telemetry_config("coordinator", &args.telemetry, section), "info")?;
    let options = CoordinatorOptions {
        heartbeat_interval: Duration::from_secs_f64(args.heartbeat_seconds.max(0.05)),
        exit_when_done: args.exit_when_done,
        hold_ttl: Duration::from_secs_f64(args.hold_seconds.max(0.1)),
    };
    let service = CoordinatorService::new(options);
    let spans = service.clone();
    let result = runtime.block_on(async move {
        // Bound first: the address names this coordinator in the holds it takes on runs.
        let listener = tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("cannot listen on {}", args.listen))?;
        let address = listener.local_addr().context("no local address")?;
        service.set_listen_address(address);
        for store in &args.store {
            let runs = service.recover(store).await.map_err(|s| anyhow::anyhow!(s.message().to_string()))?;
            tracing::info!(store = %store, runs = ?runs, "recovered runs from the store");
        }
        if let Some(spec) = &submitted {
            let answer = match service.submit(spec, false).await {
                Ok(answer) => answer,
                Err(status) => {
                    // Runs recovered above must not stay held by a coordinator that never served.
                    service.release_holds().await;
                    anyhow::bail!("{}", status.message());
                }
            };
            tracing::info!(run = %answer.run_id, shards = answer.shards, already_done = answer.already_done, "submitted run");
        }
        // Signals are caught before anyone learns our address.
        let mut stop = stop_on_signals();
        // The first line of stdout, for scripts and tests that start us on port 0.
        println!("listening on {}://{address}", if tls.is_some() { "https" } else { "http" });
        let token = read_token(&args.token_env);
        let signalled = stop.clone();
        let watcher = service.clone();
        let final_check = service.clone();
        let exit_when_done = args.exit_when_done;
        let shutdown = async move {
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {
                        if exit_when_done && watcher.all_finished() {
                            // Let idle workers hear "shutdown" before the port closes.
                            tokio::time::sleep(Duration::from_secs(2)).await;
                            return;
                        }
                    }
                }
            }
        };
        serve(service, listener, token.as_deref(), tls.as_ref(), shutdown)
            .await
            .map_err(|e| anyhow::anyhow!("the gRPC server failed: {}", codesweep_proto::client::error_chain(&e)))?;
        if !exit_when_done {
            return Ok(());
        }
        // A batch job's exit status says how its runs ended (see `exit`), so a Job that lost
        // shards, or was stopped early, never looks successful to Kubernetes.
        let stopped_early = *signalled.borrow() != StopMode::Run && !final_check.all_finished();
        batch_outcome(&final_check.run_states(), stopped_early).await
    });
    // Also after a signal: end the open run spans and export what is left.
    spans.close_run_spans();
    telemetry.shutdown();
    result
}

/// Writes the report of every ended run and turns the runs' states into the exit status of a
/// coordinator that ran as a batch job: 0 when every shard of every run is done, else
/// [`exit::SHARDS_FAILED`] or [`exit::STOPPED`].
async fn batch_outcome(runs: &[(String, String, RunState)], stopped_early: bool) -> Result<()> {
    let (mut failed, mut cancelled) = (Vec::new(), Vec::new());
    for (run_id, url, state) in runs {
        match state {
            RunState::FinishedWithFailures => failed.push(run_id.as_str()),
            RunState::Cancelled => cancelled.push(run_id.as_str()),
            RunState::Succeeded => {}
            _ => continue,
        }
        let store = RunStore::open(url).with_context(|| format!("cannot open the store {url} of run {run_id}"))?;
        let report = build_report(&store, run_id, Scoring::Stored).await.with_context(|| format!("run {run_id}: cannot build its report"))?;
        write_report(&store, &report).await.with_context(|| format!("run {run_id}: cannot write its report"))?;
        // Last: workers that start later (or outlive this process) read it and exit 0.
        let ended = serde_json::json!({ "state": state.as_str_name().trim_start_matches("RUN_STATE_").to_lowercase() });
        let key = RunLayout::new(run_id).ended();
        store.put(&key, ended.to_string()).await.with_context(|| format!("run {run_id}: cannot write {key}"))?;
        tracing::info!(run = %run_id, state = ?state, report = %format!("{}/{}", store.url(), RunLayout::new(run_id).report("")), "wrote the run's report");
    }
    if stopped_early {
        return Err(exit_with(exit::STOPPED, "stopped by signal before every run ended; start the coordinator again with --store to resume"));
    }
    if !failed.is_empty() {
        return Err(exit_with(
            exit::SHARDS_FAILED,
            format!("shards failed for good in run(s) {}; each run's report lists them with their errors", failed.join(", ")),
        ));
    }
    if !cancelled.is_empty() {
        return Err(exit_with(exit::STOPPED, format!("run(s) {} were cancelled; submitting again resumes them", cancelled.join(", "))));
    }
    Ok(())
}

/// Arguments of `codesweep worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    coordinator: CoordinatorFlags,
    /// Default device for local models: `cpu`, or `cuda:N` in a build with `--features cuda`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// A name for logs (default: the host name).
    #[arg(long)]
    name: Option<String>,
    /// Where models given as object-store URLs are downloaded.
    #[arg(long, default_value = "~/.cache/codesweep/models")]
    model_cache: String,
    /// Seconds to keep trying to reach the coordinator at start.
    #[arg(long, default_value_t = 60.0)]
    connect_timeout: f64,
    /// Seconds to keep retrying when the coordinator becomes unreachable later (it restarts and
    /// rebuilds its state from the store; the shard in hand keeps running and is re-adopted).
    #[arg(long, default_value_t = 300.0)]
    reconnect_seconds: f64,
    /// The worker pool this worker serves: it leases only shards of models whose `pool` (in
    /// the spec's [[models]]) is this name. Models without `pool` are in the pool "default".
    #[arg(long, env = "CODESWEEP_POOL", default_value = codesweep_coordinator::pools::DEFAULT_POOL)]
    pool: String,
    /// Run only these models of the pool (comma-separated names; default: all of them).
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// The run this worker serves, as <store>/<run id> (what `codesweep report` takes): when the
    /// coordinator is unreachable and the run has ended, the worker exits 0 at once instead of
    /// waiting out --connect-timeout (a late or replacement pod of a batch Job).
    #[arg(long, value_name = "STORE/RUN")]
    run: Option<String>,
    /// Wait until this URL answers GET with a 2xx status before leasing (an inference
    /// sidecar's readiness, e.g. http://127.0.0.1:8000/health).
    #[arg(long, value_name = "URL")]
    wait_for: Option<String>,
    /// Seconds to wait for --wait-for (loading a big model into a server takes a while).
    #[arg(long, default_value_t = 1800.0)]
    wait_for_timeout: f64,
    /// A file that must be readable before leasing (a local model of the pool); otherwise the
    /// worker exits with status 78 before leasing. Repeatable.
    #[arg(long, value_name = "PATH")]
    require_file: Vec<std::path::PathBuf>,
    #[command(flatten)]
    telemetry: TelemetryFlags,
}

/// Why a worker cannot work here, found before it leases anything: a device this build or
/// machine lacks, or a model file it cannot read.
fn worker_preflight(args: &WorkerArgs) -> Result<(), String> {
    if let Err(e) = codesweep_engine::Placement::parse(&args.device, None) {
        return Err(format!("--device {}: {e}", args.device));
    }
    if let Err(e) = codesweep_coordinator::pools::check_pool_name(&args.pool) {
        return Err(format!("--pool: {e}"));
    }
    for path in &args.require_file {
        let readable = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut [0u8; 1]));
        if let Err(e) = readable {
            return Err(format!("--require-file {}: cannot read it: {e}; is the models volume mounted?", path.display()));
        }
    }
    Ok(())
}

/// The default worker name: `$HOSTNAME` (the pod name on Kubernetes) or "worker".
pub fn default_worker_name() -> String {
    std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "worker".into())
}


/// Runs a worker until the coordinator says to stop or a signal arrives.
pub fn worker(args: WorkerArgs) -> Result<()> {
    let runtime = runtime()?;
    let mut telemetry = start_telemetry(&runtime, &telemetry_config("worker", &args.telemetry, None), "info")?;
    // A device this build or machine lacks, or a model it cannot read, would fail every shard
    // it leased: refuse before connecting, with a status that tells a Job not to retry.
    if let Err(e) = worker_preflight(&args) {
        telemetry.shutdown();
        return Err(exit_with(exit::CONFIG, format!("{e}; this worker leases nothing")));
    }
    let run = match args.run.as_deref().map(split_run_uri).transpose() {
        Ok(run) => run.map(|(store_url, run_id)| RunRef { store_url, run_id }),
        Err(e) => {
            telemetry.shutdown();
            return Err(exit_with(exit::CONFIG, format!("--run: {e:#}")));
        }
    };
    let result = runtime.block_on(async move {
        let config = WorkerConfig {
            coordinator: args.coordinator.coordinator.clone(),
            token: args.coordinator.token(),
            tls: args.coordinator.tls()?,
            name: args.name.unwrap_or_else(default_worker_name),
            device: args.device,
            model_cache: expand_home(std::path::Path::new(&args.model_cache)),
            connect_timeout: Duration::from_secs_f64(args.connect_timeout.max(0.0)),
            reconnect_for: Duration::from_secs_f64(args.reconnect_seconds.max(0.0)),
            pool: args.pool,
            models: args.models,
            run,
            wait_for: args.wait_for.map(|url| (url, Duration::from_secs_f64(args.wait_for_timeout.max(0.0)))),
        };
        let stop = stop_on_signals();
        let report = run_worker(config, stop.clone()).await?;
        let signalled = *stop.borrow() != StopMode::Run;
        let ended = report.run_ended.as_ref().map(|state| format!("the run had already ended ({state})"));
        let how = ended.as_deref().unwrap_or(if signalled { "stopped by signal" } else { "no work left" });
        tracing::info!(
            reason = how,
            shards_done = report.shards_done,
            examples = report.examples,
            failed_attempts = report.shards_failed,
            "worker exiting"
        );
        // Non-zero so a Job replaces a worker that was stopped while work remained.
        if signalled {
            return Err(exit_with(exit::STOPPED, "stopped by signal before the coordinator reported the work done"));
        }
        Ok(())
    });
    telemetry.shutdown();
    result
}
