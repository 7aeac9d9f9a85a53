//! `codesweep run SPEC`: the whole sweep on this machine — a coordinator on loopback, local
//! workers talking to it over gRPC, a filesystem store, a progress bar, and the tables.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use codesweep_coordinator::report::{build_report, write_report, Scoring};
use codesweep_coordinator::service::{serve, CoordinatorOptions, CoordinatorService};
use codesweep_coordinator::spec::{expand_home, SweepSpec};
use codesweep_proto::{RunState, SubmitRunRequest};
use codesweep_store::{RunLayout, RunStore};
use codesweep_worker::{run_worker, StopMode, WorkerConfig};

use crate::cluster::{connect, describe, follow, runtime, stop_on_signals};
use crate::exit::{self, exit_with};
use crate::files::print_stdout;
use crate::telemetry::{start_telemetry, telemetry_config, TelemetryFlags};

/// Arguments of `codesweep run`.
#[derive(clap::Args)]
pub struct Args {
    /// The sweep spec (TOML, or YAML/JSON by extension); `CODESWEEP__SECTION__KEY` variables
    /// override its values.
    spec: PathBuf,
    /// Local workers (default: the spec's `workers.count`).
    #[arg(long)]
    workers: Option<usize>,
    /// No progress bar (logs and the final tables only).
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    telemetry: TelemetryFlags,
}

/// Runs the sweep; prints the tables and where the results are.
pub fn run(args: Args) -> Result<()> {
    let mut spec = SweepSpec::load(&args.spec)?;
    // One machine runs every model: its local workers serve every pool, so all models go to
    // the one pool they serve (placement is no part of a run's identity).
    for model in &mut spec.models {
        model.pool = None;
    }
    let workers = args.workers.unwrap_or(spec.workers.count).max(1);
    let runtime = runtime()?;
    let mut telemetry = start_telemetry(&runtime, &telemetry_config("run", &args.telemetry, spec.telemetry.as_ref()), "warn")?;
    let service = CoordinatorService::new(CoordinatorOptions {
        heartbeat_interval: Duration::from_millis(500),
        exit_when_done: true,
        ..Default::default()
    });
    let spans = service.clone();
    let result = runtime.block_on(sweep(args, spec, workers, service));
    // Also on errors and signals: end the run's span and export what is left.
    spans.close_run_spans();
    telemetry.shutdown();
    result
}

/// The sweep itself, in the runtime: serve, submit, run the local workers, follow, report.
async fn sweep(args: Args, spec: SweepSpec, workers: usize, service: CoordinatorService) -> Result<()> {
    let started = Instant::now();
    let store = RunStore::open(&spec.run.store)?;
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .context("cannot listen on loopback")?;
    let address = format!("http://{}", listener.local_addr().context("no local address")?);
    // A fresh token per run: other local users cannot talk to this coordinator.
    let token = format!("{:032x}", rand::random::<u128>());
    let server_token = token.clone();
    let (stop_server, server_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        serve(service, listener, Some(&server_token), None, async {
            let _ = server_stopped.await;
        })
        .await
    });
    let mut client = connect(&address, Some(&token)).await?;
    let spec_json = serde_json::to_string(&spec).context("cannot encode the spec")?;
    let submitted = client
        .submit_run(SubmitRunRequest { spec: spec_json, format: "json".into(), run_id: spec.run.name.clone() })
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner();
    eprintln!(
        "run {}: {} shards ({} already done) on {workers} local worker(s); results in {}",
        submitted.run_id, submitted.shards, submitted.already_done, store.url()
    );
    let stop = stop_on_signals();
    let mut handles = Vec::new();
    for i in 0..workers {
        let config = WorkerConfig {
            coordinator: address.clone(),
            token: Some(token.clone()),
            tls: None,
            name: format!("local-{i}"),
            device: spec.workers.device.clone(),
            model_cache: expand_home(std::path::Path::new("~/.cache/codesweep/models")),
            connect_timeout: Duration::from_secs(10),
            reconnect_for: Duration::from_secs(10),
            pool: String::new(),
            models: Vec::new(),
            run: None,
            wait_for: None,
        };
        handles.push(tokio::spawn(run_worker(config, stop.clone())));
    }
    let status = follow(&mut client, &submitted.run_id, !args.quiet).await?;
    for handle in handles {
        match handle.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "a local worker stopped with an error"),
            Err(e) => tracing::warn!(error = %e, "a local worker panicked"),
        }
    }
    let _ = stop_server.send(());
    let _ = server.await;
    eprintln!("{} in {:.1}s", describe(&status), started.elapsed().as_secs_f64());
    let report = build_report(&store, &submitted.run_id, Scoring::Stored).await?;
    write_report(&store, &report).await?;
    print_stdout(&report.markdown())?;
    eprintln!("tables, plot and official-format exports: {}/{}", store.url(), RunLayout::new(&submitted.run_id).report(""));
    for failure in &status.failures {
        eprintln!("failed shard {} after {} attempt(s): {}", failure.shard_id, failure.attempts, failure.error);
    }
    match RunState::try_from(status.state) {
        Ok(RunState::Succeeded) => Ok(()),
        _ if *stop.borrow() != StopMode::Run => {
            Err(exit_with(exit::STOPPED, "stopped by signal; run the same command again to resume"))
        }
        Ok(RunState::Cancelled) => Err(exit_with(exit::STOPPED, "the run was cancelled; run the same command again to resume")),
        _ => Err(exit_with(
            exit::SHARDS_FAILED,
            format!("{} shard(s) failed; fix the cause and run the same command again to retry them", status.shards_failed),
        )),
    }
}
