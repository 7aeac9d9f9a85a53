//! Why a shard or the worker itself failed, and whether trying again can help.

/// A worker failure.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The shard input is invalid: retrying will not help.
    #[error("shard input {key}: {message}")]
    Input {
        /// The object or input concerned.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The model could not be loaded or run.
    #[error("model {model}: {source}")]
    Engine {
        /// The model's name.
        model: String,
        /// The underlying error.
        source: codesweep_engine::EngineError,
    },
    /// The store failed (possibly transient).
    #[error(transparent)]
    Store(#[from] codesweep_store::StoreError),
    /// The coordinator could not be reached or refused a call.
    #[error("coordinator {address}: {message}")]
    Rpc {
        /// The address.
        address: String,
        /// What is wrong.
        message: String,
    },
    /// An inference server the worker was told to wait for never became ready.
    #[error("the inference server at {url} was not ready after {seconds} s (last answer: {last}); check the sidecar container's log")]
    NotReady {
        /// The URL.
        url: String,
        /// How long it waited.
        seconds: f64,
        /// The last answer or error.
        last: String,
    },
    /// Not a failure: the coordinator is unreachable and the store says the run ended (the
    /// state it ended in), so the worker has nothing left to do; `run_worker` reports it as
    /// a success.
    #[error("the run has already ended ({state})")]
    RunEnded {
        /// The state the run ended in.
        state: String,
    },
    /// The run was cancelled or the lease lost while the shard ran.
    #[error("shard stopped: {0}")]
    Stopped(String),
}

impl WorkerError {
    /// Whether another attempt (maybe on another worker) could succeed.
    pub fn retryable(&self) -> bool {
        match self {
            WorkerError::Input { .. } => false,
            // A bad request (prompt over the context) or an unsupported model fails the same
            // way on every worker.
            WorkerError::Engine { source, .. } => !matches!(
                source,
                codesweep_engine::EngineError::UnsupportedArchitecture { .. } | codesweep_engine::EngineError::Request { .. }
            ),
            _ => true,
        }
    }
}
