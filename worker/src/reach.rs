//! Before and between leases: reaching the coordinator, learning that the run already ended,
//! and waiting for an inference sidecar to be ready.
//!
//! A worker pod may start after its coordinator finished (a late or replacement pod of a
//! Kubernetes Job) or outlive it: it then finds the run's `ended.json` in the store and exits 0
//! instead of failing the Job. A coordinator that has not started yet is waited for.

use std::time::{Duration, Instant};

use codesweep_proto::client::{Client, Target};
use codesweep_store::{RunLayout, RunStore};

use crate::error::WorkerError;
use crate::lease_loop::WorkerConfig;

/// The run a worker is for, so it can tell "coordinator gone, run over" from "not started yet".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    /// The run's store URL.
    pub store_url: String,
    /// The run id.
    pub run_id: String,
}

/// How often the store is asked whether the run ended while the coordinator is unreachable.
const ENDED_CHECK_EVERY: Duration = Duration::from_secs(5);

/// The state recorded in the run's `ended.json`, if the run has ended; store errors count as
/// "not known to have ended" (the caller keeps waiting for the coordinator).
pub async fn ended_state(run: &RunRef) -> Option<String> {
    let store = RunStore::open(&run.store_url).ok()?;
    let text = match store.get_text(&RunLayout::new(&run.run_id).ended()).await {
        Ok(text) => text?,
        Err(error) => {
            tracing::warn!(%error, run = %run.run_id, "cannot read whether the run ended");
            return None;
        }
    };
    let record: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(record.get("state").and_then(|s| s.as_str()).unwrap_or("ended").to_string())
}

/// Connects within `config.connect_timeout`; meanwhile, every few seconds, checks whether the
/// run has already ended (then there is nothing to wait for: [`WorkerError::RunEnded`]).
pub async fn reach_coordinator(config: &WorkerConfig) -> Result<Client, WorkerError> {
    // A bad address or TLS setting fails now, not after the timeout.
    let target = Target::new(&config.coordinator, config.token.as_deref(), config.tls.as_ref())
        .map_err(|message| WorkerError::Rpc { address: config.coordinator.clone(), message })?;
    let deadline = Instant::now() + config.connect_timeout;
    let mut first = true;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // With a run to check: one attempt first (a late worker learns at once that the run
        // ended), then a few seconds of attempts between checks.
        let slice = match (&config.run, first) {
            (Some(_), true) => Duration::ZERO,
            (Some(_), false) => left.min(ENDED_CHECK_EVERY),
            (None, _) => left,
        };
        first = false;
        let tried = target.connect(slice).await;
        let message = match tried {
            Ok(client) => return Ok(client),
            Err(message) => message,
        };
        if let Some(state) = match &config.run {
            Some(run) => ended_state(run).await,
            None => None,
        } {
            tracing::info!(%state, "the run ended before this worker reached its coordinator; nothing to do");
            return Err(WorkerError::RunEnded { state });
        }
        if Instant::now() >= deadline {
            return Err(WorkerError::Rpc { address: config.coordinator.clone(), message });
        }
    }
}

/// Waits until `url` answers a GET with a 2xx status (an inference sidecar's health or
/// `/v1/models` route), polling every second, for up to `timeout`.
pub async fn wait_until_ready(url: &str, timeout: Duration) -> Result<(), WorkerError> {
    let deadline = Instant::now() + timeout;
    let started = Instant::now();
    let agent = ureq::Agent::new_with_config(ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5))).build());
    loop {
        let (probe, agent) = (url.to_string(), agent.clone());
        let answer = tokio::task::spawn_blocking(move || {
            agent.get(&probe).call().map(|r| r.status().as_u16()).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| WorkerError::Stopped(format!("readiness probe panicked: {e}")))?;
        let last = match answer {
            Ok(status) => {
                tracing::info!(%url, status, seconds = started.elapsed().as_secs_f64(), "inference server ready");
                return Ok(());
            }
            Err(error) => error,
        };
        if Instant::now() >= deadline {
            return Err(WorkerError::NotReady { url: url.to_string(), seconds: timeout.as_secs_f64(), last });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
