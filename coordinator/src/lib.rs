//! codesweep-coordinator: turns sweep specs into shards and hands them to workers.
//!
//! - [`spec`]: the sweep spec (TOML/YAML/JSON through the `config` crate, environment
//!   overrides `CODESWEEP__SECTION__KEY`), validated before anything runs.
//! - [`plan`]: expands a spec into self-contained shard inputs written once to the store.
//! - [`pools`]: which workers may run which model (a pool per model size or server).
//! - [`schedule`]: leases with TTLs, retries with backoff, model affinity — pure state, no I/O.
//! - [`holds`]: the runs this coordinator holds in their stores, so no second coordinator
//!   serves them at the same time.
//! - [`service`]: the gRPC `Coordinator` service over the schedule and the store.
//! - `run_span`: the `run` telemetry span of each run, handed to workers as a traceparent.
//! - [`report`]: merges shard results into the papers' tables and official-format exports.
//!
//! The store is the source of truth: a restarted coordinator reloads every unfinished run's
//! plan and counts a shard done exactly when its result object exists.

pub mod holds;
pub mod plan;
pub mod pools;
pub mod report;
mod run_span;
pub mod schedule;
pub mod service;
pub mod spec;
