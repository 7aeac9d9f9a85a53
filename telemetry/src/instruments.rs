//! The metric instruments every codesweep process records, on the global meter.

use std::sync::OnceLock;

use opentelemetry::metrics::{Counter, Histogram};

/// codesweep's counters and histograms. Counters are cumulative totals; their rates are the
/// throughputs (examples/s, tokens/s).
#[derive(Debug)]
pub struct Instruments {
    /// `codesweep.examples.completed`: examples of shards whose results were written (worker).
    pub examples_completed: Counter<u64>,
    /// `codesweep.examples.generated`: examples generated, counted per batch as it ends (worker).
    pub examples_generated: Counter<u64>,
    /// `codesweep.tokens.generated`: tokens generated, per batch (worker).
    pub tokens_generated: Counter<u64>,
    /// `codesweep.tokens.prompt`: prompt tokens fed to the model, per batch (worker).
    pub tokens_prompt: Counter<u64>,
    /// `codesweep.shards.completed`: shards whose results were written (worker).
    pub shards_completed: Counter<u64>,
    /// `codesweep.shard.duration`: seconds from lease to written result (worker).
    pub shard_duration: Histogram<f64>,
    /// `codesweep.batch.duration`: seconds of one generation batch (worker).
    pub batch_duration: Histogram<f64>,
    /// `codesweep.lease.expirations`: leases whose worker stopped renewing them (coordinator).
    pub lease_expirations: Counter<u64>,
    /// `codesweep.shard.retries`: failed or expired attempts queued again (coordinator).
    pub retries: Counter<u64>,
    /// `codesweep.shard.failures`: shards failed for good after their last attempt (coordinator).
    pub shard_failures: Counter<u64>,
}

/// The process's instruments, made on first use from the global meter provider: with no
/// exporter installed they cost nothing. A binary must install its exporter ([`crate::init`])
/// before the first call, or the instruments stay no-ops.
pub fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = opentelemetry::global::meter("codesweep");
        let counter = |name: &'static str, unit: &'static str, description: &'static str| {
            meter.u64_counter(name).with_unit(unit).with_description(description).build()
        };
        let seconds = |name: &'static str, description: &'static str| {
            meter.f64_histogram(name).with_unit("s").with_description(description).build()
        };
        Instruments {
            examples_completed: counter("codesweep.examples.completed", "{example}", "examples of shards whose results were written"),
            examples_generated: counter("codesweep.examples.generated", "{example}", "examples generated, counted per batch"),
            tokens_generated: counter("codesweep.tokens.generated", "{token}", "tokens generated"),
            tokens_prompt: counter("codesweep.tokens.prompt", "{token}", "prompt tokens fed to the model"),
            shards_completed: counter("codesweep.shards.completed", "{shard}", "shards whose results were written"),
            shard_duration: seconds("codesweep.shard.duration", "seconds from lease to written result"),
            batch_duration: seconds("codesweep.batch.duration", "seconds of one generation batch"),
            lease_expirations: counter("codesweep.lease.expirations", "{lease}", "leases not renewed in time"),
            retries: counter("codesweep.shard.retries", "{attempt}", "failed or expired attempts queued again"),
            shard_failures: counter("codesweep.shard.failures", "{shard}", "shards failed for good"),
        }
    })
}
