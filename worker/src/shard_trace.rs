//! A worker's telemetry of one shard: its `shard` span (a child of the coordinator's `run`
//! span when the lease carries a traceparent) and the shard-level metrics.

use std::time::Instant;

use codesweep_proto::{Lease, ShardStats};
use codesweep_store::records::{Benchmark, ShardHeader};
use codesweep_telemetry::{instruments, KeyValue};
use tracing::field::Empty;

use crate::error::WorkerError;

/// The span and metric attributes of the shard in hand.
pub struct ShardTrace {
    span: tracing::Span,
    started: Instant,
    attributes: Vec<KeyValue>,
}

impl ShardTrace {
    /// Starts the `shard` span of `lease`; the shard's description follows in [`Self::describe`].
    pub fn start(lease: &Lease, worker: &str) -> Self {
        let span = tracing::info_span!(
            parent: None,
            "shard",
            run.id = %lease.run_id,
            shard.id = %lease.shard_id,
            shard.attempt = i64::from(lease.attempt),
            worker = %worker,
            model = %lease.model,
            benchmark = Empty,
            language = Empty,
            setting = Empty,
            examples = Empty,
            prompt_tokens = Empty,
            generated_tokens = Empty,
            error = Empty,
            otel.status_code = Empty,
        );
        codesweep_telemetry::continue_trace(&span, &lease.trace_parent);
        Self { span, started: Instant::now(), attributes: vec![KeyValue::new("model", lease.model.clone())] }
    }

    /// The span, to run the shard's work in.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Records what the shard is, once its input is read.
    pub fn describe(&mut self, header: &ShardHeader) {
        let benchmark = match header.benchmark {
            Benchmark::Cceval => "cceval",
            Benchmark::Repoqa => "repoqa",
        };
        self.span.record("benchmark", benchmark);
        self.span.record("language", header.language.as_str());
        self.span.record("setting", header.setting.as_str());
        // Integers as i64: the OpenTelemetry bridge exports other integer types as strings.
        self.span.record("examples", header.examples as i64);
        self.attributes.extend([
            KeyValue::new("benchmark", benchmark),
            KeyValue::new("language", header.language.clone()),
            KeyValue::new("setting", header.setting.clone()),
        ]);
    }

    /// Ends the span with the shard's outcome and counts a finished shard's examples.
    pub fn finish(self, outcome: &Result<ShardStats, WorkerError>) {
        match outcome {
            Ok(stats) => {
                self.span.record("prompt_tokens", stats.prompt_tokens as i64);
                self.span.record("generated_tokens", stats.generated_tokens as i64);
                self.span.record("otel.status_code", "OK");
                let metrics = instruments();
                metrics.examples_completed.add(stats.examples, &self.attributes);
                metrics.shards_completed.add(1, &self.attributes);
                metrics.shard_duration.record(self.started.elapsed().as_secs_f64(), &self.attributes);
            }
            Err(error) => {
                self.span.record("error", tracing::field::display(error));
                self.span.record("otel.status_code", "ERROR");
            }
        }
    }
}
