//! codesweep-worker: the loop that turns leased shards into result objects.
//!
//! A worker registers with the coordinator, leases shards (preferring the model it has
//! loaded), renews the lease with heartbeats that carry progress while it runs the model,
//! scores every example with the same `tasks` functions `codesweep score` uses, and creates
//! the shard's result object once. On shutdown it finishes the shard in hand, or releases it
//! when told to stop at once.

mod annotate;
mod backend;
mod cceval;
pub mod context_tokenizer;
mod dense;
mod error;
mod lease_loop;
mod model_filter;
pub mod reach;
mod repoqa;
mod shard_control;
mod shard_trace;

pub use annotate::ModelAnnotator;
pub use backend::load_model;
pub use cceval::{cceval_request, run_cceval_shard};
pub use dense::DenseEmbedder;
pub use error::WorkerError;
pub use repoqa::run_repoqa_shard;
pub use lease_loop::{run_worker, StopMode, WorkerConfig, WorkerReport};
pub use model_filter::solved_by_model;
pub use shard_control::ShardControl;
pub use reach::RunRef;
