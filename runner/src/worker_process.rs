//! A cluster worker as a process: lease until the coordinator says the work is done, the run is
//! found ended, or a signal arrives.

use codesweep_worker::{run_worker, StopMode, WorkerConfig};

use crate::signals::stop_on_signals;
use crate::{Ending, RunnerError};

/// Runs the worker `config` describes until there is no work left or a signal stops it; a
/// signal ends it as [`Ending::Stopped`], so a batch Job replaces a worker stopped while work
/// remained.
pub async fn run_worker_process(config: WorkerConfig) -> Result<Ending, RunnerError> {
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
    Ok(if signalled {
        Ending::Stopped("stopped by signal before the coordinator reported the work done".into())
    } else {
        Ending::Succeeded
    })
}
