//! The coordinator as a long-running process: bind, recover unfinished runs from the stores,
//! submit a spec, serve until a signal (or, as a batch job, until every run has ended), then
//! write each ended run's report and say how the runs ended.

use std::net::SocketAddr;
use std::time::Duration;

use codesweep_coordinator::report::{build_report, write_report, Scoring};
use codesweep_coordinator::service::{serve, CoordinatorOptions, CoordinatorService};
use codesweep_coordinator::spec::SweepSpec;
use codesweep_proto::tls::ServerTls;
use codesweep_proto::RunState;
use codesweep_store::{RunLayout, RunStore};
use codesweep_worker::StopMode;

use crate::signals::stop_on_signals;
use crate::{Ending, RunnerError};

/// What a coordinator process serves and how.
pub struct CoordinatorProcess {
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Stores whose unfinished runs are reloaded at start.
    pub stores: Vec<String>,
    /// The bearer token every RPC must carry (None: no auth).
    pub token: Option<String>,
    /// Serve TLS only, with this certificate.
    pub tls: Option<ServerTls>,
    /// Heartbeats, holds, and whether to exit once every run has ended.
    pub options: CoordinatorOptions,
    /// A spec to submit at start.
    pub submit: Option<SweepSpec>,
}

/// Serves until SIGTERM / Ctrl-C or, with `exit_when_done`, until every run has ended. The
/// first line on stdout is `listening on http(s)://ADDRESS`, for scripts that start it on port 0.
/// As a batch job, the ending says whether every shard of every run is done.
pub async fn run_coordinator(process: CoordinatorProcess) -> Result<Ending, RunnerError> {
    let exit_when_done = process.options.exit_when_done;
    let service = CoordinatorService::new(process.options.clone());
    let ending = serve_until_done(process, service.clone()).await;
    // Also after a signal or an error: end the open run spans so telemetry exports them.
    service.close_run_spans();
    let stopped_early = ending?;
    if !exit_when_done {
        return Ok(Ending::Succeeded);
    }
    batch_ending(&service.run_states(), stopped_early && !service.all_finished()).await
}

/// Serves; returns whether a signal ended the serving.
async fn serve_until_done(process: CoordinatorProcess, service: CoordinatorService) -> Result<bool, RunnerError> {
    let CoordinatorProcess { listen, stores, token, tls, options, submit } = process;
    // Bound first: the address names this coordinator in the holds it takes on runs.
    let listen_error = |source| RunnerError::Listen { address: listen.to_string(), source };
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(listen_error)?;
    let address = listener.local_addr().map_err(listen_error)?;
    service.set_listen_address(address);
    for store in &stores {
        let runs = service.recover(store).await.map_err(|s| RunnerError::Coordinator(s.message().to_string()))?;
        tracing::info!(store = %store, runs = ?runs, "recovered runs from the store");
    }
    if let Some(spec) = &submit {
        let answer = match service.submit(spec, false).await {
            Ok(answer) => answer,
            Err(status) => {
                // Runs recovered above must not stay held by a coordinator that never served.
                service.release_holds().await;
                return Err(RunnerError::Coordinator(status.message().to_string()));
            }
        };
        tracing::info!(run = %answer.run_id, shards = answer.shards, already_done = answer.already_done, "submitted run");
    }
    // Signals are caught before anyone learns our address.
    let mut stop = stop_on_signals();
    println!("listening on {}://{address}", if tls.is_some() { "https" } else { "http" });
    let signalled = stop.clone();
    let watcher = service.clone();
    let shutdown = async move {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    if options.exit_when_done && watcher.all_finished() {
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
        .map_err(|e| RunnerError::Server(codesweep_proto::client::error_chain(&e)))?;
    let stopped = *signalled.borrow() != StopMode::Run;
    Ok(stopped)
}

/// Writes the report of every ended run, marks it ended in its store, and turns the runs'
/// states into the ending of a coordinator that ran as a batch job.
async fn batch_ending(runs: &[(String, String, RunState)], stopped_early: bool) -> Result<Ending, RunnerError> {
    let (mut failed, mut cancelled) = (Vec::new(), Vec::new());
    for (run_id, url, state) in runs {
        match state {
            RunState::FinishedWithFailures => failed.push(run_id.as_str()),
            RunState::Cancelled => cancelled.push(run_id.as_str()),
            RunState::Succeeded => {}
            _ => continue,
        }
        let store = RunStore::open(url)?;
        let report_error = |source| RunnerError::Report { run_id: run_id.clone(), source };
        let report = build_report(&store, run_id, Scoring::Stored).await.map_err(report_error)?;
        write_report(&store, &report).await.map_err(report_error)?;
        // Last: workers that start later (or outlive this process) read it and exit 0.
        let ended = serde_json::json!({ "state": state.as_str_name().trim_start_matches("RUN_STATE_").to_lowercase() });
        store.put(&RunLayout::new(run_id).ended(), ended.to_string()).await?;
        tracing::info!(run = %run_id, state = ?state, report = %format!("{}/{}", store.url(), RunLayout::new(run_id).report("")), "wrote the run's report");
    }
    Ok(if stopped_early {
        Ending::Stopped("stopped by signal before every run ended; start the coordinator again with --store to resume".into())
    } else if !failed.is_empty() {
        Ending::ShardsFailed(format!(
            "shards failed for good in run(s) {}; each run's report lists them with their errors",
            failed.join(", ")
        ))
    } else if !cancelled.is_empty() {
        Ending::Stopped(format!("run(s) {} were cancelled; submitting again resumes them", cancelled.join(", ")))
    } else {
        Ending::Succeeded
    })
}
