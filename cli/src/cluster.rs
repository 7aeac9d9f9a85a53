//! The distributed commands' shared pieces: runtime, signals, coordinator clients,
//! run URIs and the progress display.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use codesweep_proto::{RunState, RunStatus};
use codesweep_worker::StopMode;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;

pub use codesweep_proto::client::Client;
use codesweep_proto::tls::ClientTls;

/// Flags naming the coordinator and its token.
#[derive(clap::Args, Clone)]
pub struct CoordinatorFlags {
    /// The coordinator's address.
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    pub coordinator: String,
    /// Environment variable holding the bearer token (the token itself never goes on the
    /// command line or into logs).
    #[arg(long, default_value = "CODESWEEP_TOKEN")]
    pub token_env: String,
    /// PEM CA bundle to check an `https://` coordinator's certificate with (default: the public
    /// web roots).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Name to check the coordinator's certificate against, when it differs from the address's
    /// host (e.g. connecting by IP to a certificate issued for a service name).
    #[arg(long)]
    pub tls_domain: Option<String>,
}

impl CoordinatorFlags {
    /// The token, if the variable is set and not empty.
    pub fn token(&self) -> Option<String> {
        read_token(&self.token_env)
    }

    /// The TLS settings the flags ask for (None when there are none).
    pub fn tls(&self) -> Result<Option<ClientTls>> {
        if self.tls_ca.is_none() && self.tls_domain.is_none() {
            return Ok(None);
        }
        let mut tls = ClientTls::default();
        if let Some(ca) = &self.tls_ca {
            tls = tls.with_ca_file(ca)?;
        }
        if let Some(domain) = &self.tls_domain {
            tls = tls.with_domain(domain.clone());
        }
        Ok(Some(tls))
    }

    /// Connects to the coordinator.
    pub async fn connect(&self) -> Result<Client> {
        let tls = self.tls()?;
        codesweep_proto::client::connect(&self.coordinator, self.token().as_deref(), tls.as_ref(), Duration::ZERO)
            .await
            .map_err(anyhow::Error::msg)
    }
}

/// The token in environment variable `name`, if set and not empty.
pub fn read_token(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|t| !t.is_empty())
}

/// Connects to a plain (loopback) coordinator at `address` (once, no retries).
pub async fn connect(address: &str, token: Option<&str>) -> Result<Client> {
    codesweep_proto::client::connect(address, token, None, Duration::ZERO).await.map_err(anyhow::Error::msg)
}

/// A multi-threaded tokio runtime.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}

/// A stop channel driven by SIGTERM / Ctrl-C: the first signal drains (finish the shard in
/// hand), the second stops at once (release it). SIGTERM is caught from the moment this returns
/// (not from whenever the task first runs), so a signal right after start still shuts down
/// cleanly and flushes telemetry.
pub fn stop_on_signals() -> watch::Receiver<StopMode> {
    let (sender, receiver) = watch::channel(StopMode::Run);
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::spawn(async move {
        let mut mode = StopMode::Run;
        loop {
            #[cfg(unix)]
            wait_for_signal(term.as_mut()).await;
            #[cfg(not(unix))]
            wait_for_signal().await;
            mode = if mode == StopMode::Run { StopMode::Drain } else { StopMode::Now };
            eprintln!(
                "{}",
                if mode == StopMode::Drain {
                    "stopping after the current shard (signal again to release it and stop now)"
                } else {
                    "stopping now; the current shard is released"
                }
            );
            if sender.send(mode).is_err() || mode == StopMode::Now {
                break;
            }
        }
    });
    receiver
}

#[cfg(unix)]
async fn wait_for_signal(term: Option<&mut tokio::signal::unix::Signal>) {
    match term {
        Some(term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

/// Splits a run URI (`runs/demo`, `file:///data/runs/demo`, `s3://bucket/runs/demo`) into the
/// store URL and the run id.
pub fn split_run_uri(uri: &str) -> Result<(String, String)> {
    let trimmed = uri.trim_end_matches('/');
    let (store, run) = trimmed
        .rsplit_once('/')
        .filter(|(store, run)| !store.is_empty() && !run.is_empty() && !store.ends_with(':') && !store.ends_with(":/"))
        .with_context(|| format!("run URI {uri:?} must be <store>/<run id>, e.g. runs/my-sweep or s3://bucket/runs/my-sweep"))?;
    Ok((store.to_string(), run.to_string()))
}

/// Follows a run's progress with a bar until it ends; returns the last status.
pub async fn follow(client: &mut Client, run_id: &str, show_bar: bool) -> Result<RunStatus> {
    let mut stream = client
        .watch_run(codesweep_proto::GetRunRequest { run_id: run_id.to_string() })
        .await
        .context("cannot watch the run")?
        .into_inner();
    let bar = if show_bar { ProgressBar::new(0) } else { ProgressBar::hidden() };
    let style = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} examples [{elapsed_precise}] {prefix}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(250));
    let mut last = None;
    while let Some(status) = stream.message().await.context("lost the coordinator while watching the run")? {
        bar.set_length(status.examples_total);
        bar.set_position(status.examples_done);
        bar.set_message(format!("shards {}/{}", status.shards_done, status.shards_total));
        let eta = if status.eta_seconds >= 0.0 { format!("eta {:.0}s", status.eta_seconds) } else { "eta –".into() };
        let failed = if status.shards_failed > 0 { format!(", {} failed", status.shards_failed) } else { String::new() };
        bar.set_prefix(format!("{:.1} ex/s, {:.0} tok/s, {eta}{failed}", status.examples_per_second, status.tokens_per_second));
        last = Some(status);
    }
    bar.finish_and_clear();
    last.context("the coordinator sent no status")
}

/// A one-line summary of a status.
pub fn describe(status: &RunStatus) -> String {
    let state = RunState::try_from(status.state).map(|s| s.as_str_name()).unwrap_or("UNKNOWN");
    format!(
        "run {}: {} — shards {}/{} done, {} running, {} failed; examples {}/{}; generated tokens {}; {:.1} ex/s, {:.1} tok/s; retries {}, lease expirations {}",
        status.run_id,
        state.trim_start_matches("RUN_STATE_").to_lowercase(),
        status.shards_done,
        status.shards_total,
        status.shards_running,
        status.shards_failed,
        status.examples_done,
        status.examples_total,
        status.generated_tokens,
        status.examples_per_second,
        status.tokens_per_second,
        status.retries,
        status.lease_expirations
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_uris_split_into_store_and_run() {
        assert_eq!(split_run_uri("runs/demo").unwrap(), ("runs".into(), "demo".into()));
        assert_eq!(split_run_uri("s3://b/runs/demo/").unwrap(), ("s3://b/runs".into(), "demo".into()));
        assert_eq!(split_run_uri("file:///data/demo").unwrap(), ("file:///data".into(), "demo".into()));
        assert!(split_run_uri("demo").is_err());
        assert!(split_run_uri("s3://demo").is_err());
    }
}
