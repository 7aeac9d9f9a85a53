//! codesweep-store: where a run lives in object storage.
//!
//! A run is a folder of objects under a store URL (`file://`, `memory://`, `s3://`, `gs://`,
//! `az://`): its spec, its plan, one self-contained input object per shard and, once a worker
//! finishes, one result object per shard. Result objects are created once and never
//! overwritten, so "a shard is done" means exactly "its result object exists". This crate owns
//! that layout and the record formats; it knows nothing about gRPC or models.

mod download;
mod error;
pub mod hold;
mod layout;
pub mod records;
mod store;

pub use error::StoreError;
pub use layout::{shard_id, split_run_uri, validate_name, RunLayout};
pub use store::{ReplaceOutcome, RunStore, WriteOutcome};
