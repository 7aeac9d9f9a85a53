//! codesweep-runner: a sweep as processes. The one-machine sweep (coordinator, local workers and
//! store in one process, talking gRPC over loopback, as Ballista's standalone mode), the
//! coordinator as a batch job that ends with its runs, following a run's progress, and the
//! signals that drain or stop them. The binary only turns flags into these calls.

mod batch;
mod error;
mod progress;
mod signals;
mod standalone;
mod worker_process;

pub use batch::{run_coordinator, CoordinatorProcess};
pub use error::RunnerError;
pub use progress::{describe, follow, status_text};
pub use signals::stop_on_signals;
pub use standalone::{run_standalone, StandaloneOptions, StandaloneOutcome};
pub use worker_process::run_worker_process;

/// How a sweep or a batch coordinator ended, for the caller to turn into an exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Every shard of every run is done (or the coordinator was not a batch job).
    Succeeded,
    /// Every run ended, but some shards failed for good; the reports list them.
    ShardsFailed(String),
    /// Stopped before every run ended: a signal, or a cancelled run. Starting again resumes.
    Stopped(String),
}
