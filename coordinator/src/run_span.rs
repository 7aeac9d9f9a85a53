//! The coordinator's `run` spans: one per submitted (or recovered) run, from submission until
//! the run ends, so a trace shows a run's whole life with its workers' `shard` spans inside.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use codesweep_proto::{RunState, RunStatus};
use tracing::field::Empty;

use crate::plan::Plan;
use crate::schedule::Schedule;

/// Open `run` spans by run id; cheap to clone (shared).
#[derive(Clone, Default)]
pub struct RunSpans {
    open: Arc<Mutex<HashMap<String, tracing::Span>>>,
}

impl RunSpans {
    /// Starts the span of `plan`'s run; a resubmitted run's earlier span ends here.
    pub fn open(&self, plan: &Plan, already_done: u32) {
        // Integers as i64: the OpenTelemetry bridge exports other integer types as strings.
        let examples: i64 = plan.shards.iter().map(|s| s.examples as i64).sum();
        let span = tracing::info_span!(
            parent: None,
            "run",
            run.id = %plan.run_id,
            run.shards = plan.shards.len() as i64,
            run.examples = examples,
            run.shards_already_done = i64::from(already_done),
            run.state = Empty,
            run.shards_done = Empty,
            run.shards_failed = Empty,
            run.examples_done = Empty,
            otel.status_code = Empty,
        );
        if let Ok(mut open) = self.open.lock() {
            if span.is_disabled() {
                // No subscriber wants it (telemetry off, quiet logs): nothing to keep or end.
                open.remove(&plan.run_id);
            } else {
                open.insert(plan.run_id.clone(), span);
            }
        }
    }

    /// The W3C traceparent of a run's span ("" when telemetry is off or the run has none).
    pub fn trace_parent(&self, run_id: &str) -> String {
        let open = self.open.lock();
        open.ok().and_then(|o| o.get(run_id).map(codesweep_telemetry::trace_parent)).unwrap_or_default()
    }

    /// Ends the spans of runs that are no longer running (or no longer known). Called on every
    /// lease and heartbeat, so a running run costs only the cheap state check.
    pub fn close_ended(&self, schedule: &Schedule, now: Instant) {
        self.close_where(schedule, now, |state| state != RunState::Running);
    }

    /// Ends every open span, whatever its run's state.
    pub fn close_all(&self, schedule: &Schedule, now: Instant) {
        self.close_where(schedule, now, |_| true);
    }

    fn close_where(&self, schedule: &Schedule, now: Instant, ended: impl Fn(RunState) -> bool) {
        let Ok(mut open) = self.open.lock() else { return };
        open.retain(|run_id, span| match schedule.run_state(run_id) {
            Some(state) if !ended(state) => true,
            Some(_) => {
                if let Some(status) = schedule.status(run_id, now) {
                    record_end(span, &status);
                }
                false
            }
            None => false,
        });
    }
}

fn record_end(span: &tracing::Span, status: &RunStatus) {
    let state = RunState::try_from(status.state).map(|s| s.as_str_name()).unwrap_or("RUN_STATE_UNSPECIFIED");
    // As `codesweep status` prints it: succeeded, finished_with_failures, cancelled, running.
    span.record("run.state", state.trim_start_matches("RUN_STATE_").to_lowercase());
    span.record("run.shards_done", i64::from(status.shards_done));
    span.record("run.shards_failed", i64::from(status.shards_failed));
    span.record("run.examples_done", status.examples_done as i64);
    span.record("otel.status_code", if status.state == RunState::Succeeded as i32 { "OK" } else { "ERROR" });
}
