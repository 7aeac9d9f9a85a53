//! The one-machine sweep: a coordinator on a loopback port, local workers leasing from it over
//! gRPC exactly as a cluster's do, the spec's store, and the report at the end. Running it again
//! resumes: shards whose results are in the store are not run twice.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use codesweep_coordinator::report::{build_report, write_report, Report, Scoring};
use codesweep_coordinator::service::{serve, CoordinatorOptions, CoordinatorService};
use codesweep_coordinator::spec::SweepSpec;
use codesweep_proto::{RunState, RunStatus, SubmitRunRequest};
use codesweep_store::{RunLayout, RunStore};
use codesweep_worker::{run_worker, StopMode, WorkerConfig};
use tokio::sync::watch;

use crate::progress::{describe, follow};
use crate::{Ending, RunnerError};

/// How to run a sweep on this machine.
#[derive(Debug, Clone)]
pub struct StandaloneOptions {
    /// Local workers (at least one is started).
    pub workers: usize,
    /// Draw a progress bar on stderr.
    pub show_progress: bool,
    /// Where models given as object-store URLs are downloaded.
    pub model_cache: PathBuf,
}

/// What a finished one-machine sweep leaves: its last status, its report and how it ended.
#[derive(Debug)]
pub struct StandaloneOutcome {
    /// The run's id (the spec's run name).
    pub run_id: String,
    /// The coordinator's last status of the run.
    pub status: RunStatus,
    /// The tables, built from the stored results and written back to the store.
    pub report: Report,
    /// Where the report files are, as `<store>/<run>/report/`.
    pub report_url: String,
    /// How the run ended.
    pub ending: Ending,
}

/// Runs `spec` on this machine until its run ends or `stop` says otherwise, writes the report,
/// and says how it ended. Every model goes to the local workers (pools are ignored here).
/// Progress lines go to stderr.
pub async fn run_standalone(
    mut spec: SweepSpec,
    options: &StandaloneOptions,
    stop: watch::Receiver<StopMode>,
) -> Result<StandaloneOutcome, RunnerError> {
    // Placement is no part of a run's identity: on one machine every model is in one pool.
    for model in &mut spec.models {
        model.pool = None;
    }
    let service = CoordinatorService::new(CoordinatorOptions {
        heartbeat_interval: Duration::from_millis(500),
        exit_when_done: true,
        ..Default::default()
    });
    let spans = service.clone();
    let outcome = sweep(spec, options, service, stop).await;
    // Also on errors: end the run's span so telemetry exports it.
    spans.close_run_spans();
    outcome
}

async fn sweep(
    spec: SweepSpec,
    options: &StandaloneOptions,
    service: CoordinatorService,
    stop: watch::Receiver<StopMode>,
) -> Result<StandaloneOutcome, RunnerError> {
    let started = Instant::now();
    let store = RunStore::open(&spec.run.store)?;
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let listen_error = |source| RunnerError::Listen { address: loopback.to_string(), source };
    let listener = tokio::net::TcpListener::bind(loopback).await.map_err(listen_error)?;
    let address = format!("http://{}", listener.local_addr().map_err(listen_error)?);
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
    let mut client = codesweep_proto::client::connect(&address, Some(&token), None, Duration::ZERO)
        .await
        .map_err(RunnerError::Coordinator)?;
    let spec_json = serde_json::to_string(&spec).map_err(|e| RunnerError::Coordinator(format!("cannot encode the spec: {e}")))?;
    let submitted = client
        .submit_run(SubmitRunRequest { spec: spec_json, format: "json".into(), run_id: spec.run.name.clone() })
        .await
        .map_err(|s| RunnerError::Coordinator(s.message().to_string()))?
        .into_inner();
    let workers = options.workers.max(1);
    eprintln!(
        "run {}: {} shards ({} already done) on {workers} local worker(s); results in {}",
        submitted.run_id,
        submitted.shards,
        submitted.already_done,
        store.url()
    );
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let config = local_worker(&address, &token, i, &spec, options);
            tokio::spawn(run_worker(config, stop.clone()))
        })
        .collect();
    let status = follow(&mut client, &submitted.run_id, options.show_progress).await?;
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
    let run_id = submitted.run_id;
    let report_error = |source| RunnerError::Report { run_id: run_id.clone(), source };
    let report = build_report(&store, &run_id, Scoring::Stored).await.map_err(report_error)?;
    write_report(&store, &report).await.map_err(report_error)?;
    let ending = ending(&status, *stop.borrow());
    let report_url = format!("{}/{}", store.url(), RunLayout::new(&run_id).report(""));
    Ok(StandaloneOutcome { run_id, status, report, report_url, ending })
}

/// Local worker `i`: it serves every model, on the spec's device.
fn local_worker(address: &str, token: &str, i: usize, spec: &SweepSpec, options: &StandaloneOptions) -> WorkerConfig {
    WorkerConfig {
        coordinator: address.to_string(),
        token: Some(token.to_string()),
        tls: None,
        name: format!("local-{i}"),
        device: spec.workers.device.clone(),
        model_cache: options.model_cache.clone(),
        connect_timeout: Duration::from_secs(10),
        reconnect_for: Duration::from_secs(10),
        pool: String::new(),
        models: Vec::new(),
        run: None,
        wait_for: None,
    }
}

/// How the run ended, from its last state and whether a signal stopped it.
fn ending(status: &RunStatus, stop: StopMode) -> Ending {
    match RunState::try_from(status.state) {
        Ok(RunState::Succeeded) => Ending::Succeeded,
        _ if stop != StopMode::Run => Ending::Stopped("stopped by signal; run the same command again to resume".into()),
        Ok(RunState::Cancelled) => Ending::Stopped("the run was cancelled; run the same command again to resume".into()),
        _ => Ending::ShardsFailed(format!(
            "{} shard(s) failed; fix the cause and run the same command again to retry them",
            status.shards_failed
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_outranks_the_state_and_success_outranks_the_signal() {
        let with = |state: RunState, failed| RunStatus { state: state as i32, shards_failed: failed, ..Default::default() };
        assert_eq!(ending(&with(RunState::Succeeded, 0), StopMode::Drain), Ending::Succeeded);
        assert!(matches!(ending(&with(RunState::Running, 0), StopMode::Drain), Ending::Stopped(m) if m.contains("signal")));
        assert!(matches!(ending(&with(RunState::Cancelled, 0), StopMode::Run), Ending::Stopped(m) if m.contains("cancelled")));
        assert!(matches!(ending(&with(RunState::FinishedWithFailures, 2), StopMode::Run), Ending::ShardsFailed(m) if m.starts_with("2 shard(s)")));
    }
}
