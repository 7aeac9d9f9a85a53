//! A run's trace handed from the coordinator to workers as a W3C `traceparent` string, so the
//! `shard` spans of a worker are children of the coordinator's `run` span.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `traceparent` (`00-<trace id>-<span id>-<flags>`) of `span`, or "" when telemetry is
/// off (the span has no OpenTelemetry context).
pub fn trace_parent(span: &tracing::Span) -> String {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    if !span_context.is_valid() {
        return String::new();
    }
    format!("00-{}-{}-{:02x}", span_context.trace_id(), span_context.span_id(), span_context.trace_flags().to_u8())
}

/// Makes `span` (not yet entered) a child of the remote span named by `traceparent`; a no-op
/// for "" or a malformed value (a trace is a diagnostic aid, never a reason to fail work).
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    let Some(remote) = parse(traceparent) else { return };
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}

fn parse(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let context = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    context.is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_and_bad_ones_are_ignored() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = parse(good).expect("a valid traceparent");
        assert_eq!(parsed.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.span_id().to_string(), "00f067aa0ba902b7");
        assert!(parsed.is_sampled() && parsed.is_remote());
        for bad in ["", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-xyz-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-7"]
        {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_span_without_telemetry_has_no_traceparent() {
        assert_eq!(trace_parent(&tracing::info_span!("run")), "");
    }
}
