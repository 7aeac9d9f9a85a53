//! Why running a sweep failed (as opposed to how it ended: see [`crate::Ending`]).

use codesweep_coordinator::report::ReportError;
use codesweep_store::StoreError;
use codesweep_worker::WorkerError;

/// A failure of the runner itself: the port, the store, the report or the coordinator.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The coordinator's port could not be opened.
    #[error("cannot listen on {address}: {source}; is another coordinator using the port?")]
    Listen {
        /// The address.
        address: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The store could not be opened or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A run's report could not be built or written.
    #[error("run {run_id}: {source}")]
    Report {
        /// The run.
        run_id: String,
        /// The underlying error.
        source: ReportError,
    },
    /// The coordinator refused a call or went away.
    #[error("the coordinator: {0}")]
    Coordinator(String),
    /// The gRPC server failed.
    #[error("the gRPC server failed: {0}")]
    Server(String),
    /// A local worker could not run.
    #[error(transparent)]
    Worker(#[from] WorkerError),
}
