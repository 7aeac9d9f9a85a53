//! Logs and telemetry of the long-running commands (`run`, `coordinator`, `worker`): where the
//! OTLP endpoint comes from, and starting the exporters inside the command's runtime.

use anyhow::{Context, Result};
use codesweep_coordinator::spec::TelemetrySection;
use codesweep_telemetry::{LogFormat, Telemetry, TelemetryConfig};
use std::time::Duration;

/// Flags turning telemetry on.
#[derive(clap::Args, Clone, Default)]
pub struct TelemetryFlags {
    /// OTLP/gRPC collector for spans and metrics, e.g. http://127.0.0.1:4317. Default: the
    /// spec's `telemetry.otlp_endpoint`, else $OTEL_EXPORTER_OTLP_ENDPOINT; none: telemetry off.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Log lines on stderr: `text` (coloured only on a terminal; `NO_COLOR` turns colour off)
    /// or `json`, one object per line for log collectors.
    #[arg(long, value_name = "FORMAT", env = "CODESWEEP_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

/// The telemetry settings of a command: the flag over the spec's `[telemetry]` over the
/// standard `OTEL_*` variables.
pub fn telemetry_config(role: &str, flags: &TelemetryFlags, section: Option<&TelemetrySection>) -> TelemetryConfig {
    let mut config = TelemetryConfig::from_env(role);
    if let Some(section) = section {
        if let Some(endpoint) = &section.otlp_endpoint {
            config.endpoint = Some(endpoint.clone());
        }
        if let Some(name) = &section.service_name {
            config.service_name = name.clone();
        }
        if let Some(seconds) = section.export_interval_seconds {
            config.export_interval = Duration::from_secs_f64(seconds);
        }
    }
    if let Some(endpoint) = flags.otlp_endpoint.as_ref().filter(|e| !e.is_empty()) {
        config.endpoint = Some(endpoint.clone());
    }
    config.log_format = flags.log_format;
    config
}

/// Starts logs and telemetry inside `runtime` (the OTLP channel lives there).
pub fn start_telemetry(runtime: &tokio::runtime::Runtime, config: &TelemetryConfig, default_level: &str) -> Result<Telemetry> {
    let _in_runtime = runtime.enter();
    codesweep_telemetry::init(config, default_level).context("cannot start telemetry")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_beats_the_spec_which_beats_the_defaults() {
        let section = TelemetrySection {
            otlp_endpoint: Some("http://spec:4317".into()),
            service_name: Some("sweeps".into()),
            export_interval_seconds: Some(0.5),
        };
        let config = telemetry_config("run", &TelemetryFlags::default(), Some(&section));
        assert_eq!(config.endpoint.as_deref(), Some("http://spec:4317"));
        assert_eq!((config.service_name.as_str(), config.export_interval), ("sweeps", Duration::from_millis(500)));
        let flags = TelemetryFlags { otlp_endpoint: Some("http://flag:4317".into()), ..TelemetryFlags::default() };
        assert_eq!(telemetry_config("run", &flags, Some(&section)).endpoint.as_deref(), Some("http://flag:4317"));
        assert_eq!(telemetry_config("worker", &flags, None).role, "worker");
    }
}
