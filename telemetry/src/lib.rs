//! codesweep-telemetry: OpenTelemetry spans and metrics for codesweep, off unless configured.
//!
//! Libraries (coordinator, worker) use the API half only: [`instruments`] records metrics and
//! [`trace_parent`] / [`continue_trace`] carry a run's trace to the workers that run its shards.
//! Both are no-ops until a process installs an exporter. The binary turns on the `export` feature
//! and calls [`init`], which sets up the `tracing` logs and, when an OTLP endpoint is configured,
//! an OTLP/gRPC exporter for spans (`run`, `shard`, `batch`) and metrics.

mod context;
mod instruments;

#[cfg(feature = "export")]
mod export;

pub use context::{continue_trace, trace_parent};
pub use instruments::{instruments, Instruments};
/// Metric attributes, re-exported so callers need no direct `opentelemetry` dependency.
pub use opentelemetry::KeyValue;

#[cfg(feature = "export")]
pub use export::{colour_logs, final_error_line, init, LogFormat, Telemetry, TelemetryConfig, TelemetryError};
