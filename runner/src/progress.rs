//! A run's progress as people read it: a live bar while it runs, one-line and per-pool summaries.

use std::time::Duration;

use codesweep_proto::client::Client;
use codesweep_proto::{GetRunRequest, RunState, RunStatus};
use indicatif::{ProgressBar, ProgressStyle};

use crate::RunnerError;

/// Follows a run's progress (with a bar on stderr when `show_bar`) until it ends; returns the
/// last status.
pub async fn follow(client: &mut Client, run_id: &str, show_bar: bool) -> Result<RunStatus, RunnerError> {
    let lost = |e: tonic::Status| RunnerError::Coordinator(format!("lost while watching run {run_id}: {}", e.message()));
    let mut stream = client.watch_run(GetRunRequest { run_id: run_id.to_string() }).await.map_err(lost)?.into_inner();
    let bar = if show_bar { ProgressBar::new(0) } else { ProgressBar::hidden() };
    let style = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} examples [{elapsed_precise}] {prefix}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(250));
    let mut last = None;
    while let Some(status) = stream.message().await.map_err(lost)? {
        bar.set_length(status.examples_total);
        bar.set_position(status.examples_done);
        bar.set_message(format!("shards {}/{}", status.shards_done, status.shards_total));
        let eta = if status.eta_seconds >= 0.0 { format!("eta {:.0}s", status.eta_seconds) } else { "eta –".into() };
        let failed = if status.shards_failed > 0 { format!(", {} failed", status.shards_failed) } else { String::new() };
        bar.set_prefix(format!("{:.1} ex/s, {:.0} tok/s, {eta}{failed}", status.examples_per_second, status.tokens_per_second));
        last = Some(status);
    }
    bar.finish_and_clear();
    last.ok_or_else(|| RunnerError::Coordinator(format!("sent no status for run {run_id}")))
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

/// The summary line, then each pool and its models, then each failed shard with its error
/// (what `codesweep status` prints).
pub fn status_text(status: &RunStatus) -> String {
    let mut text = describe(status) + "\n";
    for pool in &status.pools {
        let waiting = if pool.workers == 0 && pool.shards_done + pool.shards_failed < pool.shards_total {
            " (no live worker serves this pool: is its worker Job running with --pool?)"
        } else {
            ""
        };
        text.push_str(&format!(
            "  pool {}: {}/{} shards done, {} running, {} failed, {} worker(s){waiting}\n",
            pool.pool, pool.shards_done, pool.shards_total, pool.shards_running, pool.shards_failed, pool.workers
        ));
        for model in status.models.iter().filter(|m| m.pool == pool.pool) {
            text.push_str(&format!(
                "    {}: {}/{} shards done, {} running, {} failed, {} worker(s) with it loaded\n",
                model.model, model.shards_done, model.shards_total, model.shards_running, model.shards_failed, model.workers
            ));
        }
    }
    for failure in &status.failures {
        text.push_str(&format!("  failed {} after {} attempt(s): {}\n", failure.shard_id, failure.attempts, failure.error));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use codesweep_proto::{PoolProgress, ShardFailure};

    #[test]
    fn a_pool_without_workers_and_a_failed_shard_are_named() {
        let status = RunStatus {
            run_id: "demo".into(),
            state: RunState::Running as i32,
            shards_total: 4,
            shards_done: 1,
            shards_failed: 1,
            pools: vec![PoolProgress { pool: "gpu".into(), shards_total: 4, shards_done: 1, shards_failed: 1, ..Default::default() }],
            failures: vec![ShardFailure { shard_id: "s-3".into(), attempts: 3, error: "out of memory".into() }],
            ..Default::default()
        };
        let text = status_text(&status);
        assert!(text.starts_with("run demo: running — shards 1/4 done"), "{text}");
        assert!(text.contains("pool gpu: 1/4 shards done, 0 running, 1 failed, 0 worker(s) (no live worker"), "{text}");
        assert!(text.contains("failed s-3 after 3 attempt(s): out of memory"), "{text}");
    }
}
