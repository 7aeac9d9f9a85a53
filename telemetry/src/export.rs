//! The process side: `tracing` logs on stderr and, when an OTLP endpoint is configured, the
//! OpenTelemetry exporters (spans through `tracing-opentelemetry`, metrics through a periodic
//! reader), both over OTLP/gRPC. Off by default: with no endpoint no exporter is built and
//! nothing connects anywhere.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("telemetry endpoint {endpoint:?}: must be an http:// or https:// URL of an OTLP/gRPC collector")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
    },
    /// The OTLP exporter could not be built.
    #[error("telemetry endpoint {endpoint:?}: cannot build the OTLP exporter: {message}")]
    Exporter {
        /// The endpoint as given.
        endpoint: String,
        /// The exporter's error.
        message: String,
    },
}

/// How log lines on stderr are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines; coloured only when stderr is a terminal and `NO_COLOR` is unset.
    #[default]
    Text,
    /// One JSON object per line (timestamp, level, target, fields, spans), for log collectors.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("unknown log format {other:?}; expected text or json")),
        }
    }
}

/// Whether text logs should carry ANSI colours: only on a terminal, and not under `NO_COLOR`.
pub fn colour_logs(stderr_is_terminal: bool) -> bool {
    stderr_is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Where and how to export; `endpoint: None` means telemetry is off.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The OTLP/gRPC collector, e.g. `http://otel-collector:4317`; `None`: off.
    pub endpoint: Option<String>,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// How often metrics are exported (spans go in batches as they end).
    pub export_interval: Duration,
    /// What this process is (`run`, `coordinator`, `worker`): the `codesweep.role` attribute.
    pub role: String,
    /// How log lines are written.
    pub log_format: LogFormat,
}

/// The standard variable naming the collector.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

impl TelemetryConfig {
    /// Settings from the standard OpenTelemetry variables: `OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// `OTEL_SERVICE_NAME` (default `codesweep`) and `OTEL_METRIC_EXPORT_INTERVAL` (ms, default
    /// 10 000). Without the endpoint variable, telemetry is off.
    pub fn from_env(role: &str) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let interval = var("OTEL_METRIC_EXPORT_INTERVAL").and_then(|ms| ms.trim().parse::<u64>().ok()).filter(|&ms| ms > 0);
        Self {
            endpoint: var(ENDPOINT_ENV),
            service_name: var("OTEL_SERVICE_NAME").unwrap_or_else(|| "codesweep".into()),
            export_interval: Duration::from_millis(interval.unwrap_or(10_000)),
            role: role.to_string(),
            log_format: LogFormat::Text,
        }
    }

    /// Whether `OTEL_SDK_DISABLED=true` turns every exporter off whatever else is configured.
    fn disabled_by_env() -> bool {
        std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }
}

/// The installed exporters; [`Telemetry::shutdown`] (or dropping it) exports what is left.
/// Keep it alive for the whole command, and inside the Tokio runtime the exporter was built in.
#[derive(Debug, Default)]
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl Telemetry {
    /// Whether spans and metrics are exported.
    pub fn is_on(&self) -> bool {
        self.tracer.is_some()
    }

    /// Exports the spans and metrics not yet sent and stops the exporters; idempotent. Blocks:
    /// call it outside async code, while the runtime the exporters were built in still runs.
    pub fn shutdown(&mut self) {
        if let Some(tracer) = self.tracer.take() {
            if let Err(error) = tracer.shutdown() {
                eprintln!("telemetry: could not export the last spans: {error}");
            }
        }
        if let Some(meter) = self.meter.take() {
            if let Err(error) = meter.shutdown() {
                eprintln!("telemetry: could not export the last metrics: {error}");
            }
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Whether [`init`] chose JSON logs, so the last error line matches them.
static JSON_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The line a command ends with on failure: `error: …`, or with JSON logs a JSON log record,
/// so a log collector parses every line of the process.
pub fn final_error_line(message: &str) -> String {
    if JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed) {
        serde_json::json!({"level": "ERROR", "target": "codesweep", "fields": {"message": message}}).to_string()
    } else {
        format!("error: {message}")
    }
}

/// Installs the process's `tracing` subscriber: logs on stderr filtered by `RUST_LOG` (default
/// `default_level`) and, when `config.endpoint` is set (and `OTEL_SDK_DISABLED` is not `true`),
/// OTLP/gRPC export of codesweep's spans at INFO and above plus the global meter provider.
/// With an endpoint it must run inside a Tokio runtime (the gRPC channel lives there).
pub fn init(config: &TelemetryConfig, default_level: &str) -> Result<Telemetry, TelemetryError> {
    JSON_LOGS.store(config.log_format == LogFormat::Json, std::sync::atomic::Ordering::Relaxed);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    use std::io::IsTerminal;
    let logs: Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync> = match config.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(colour_logs(std::io::stderr().is_terminal()))
            .with_filter(filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_filter(filter)
            .boxed(),
    };
    let endpoint = config.endpoint.as_deref().filter(|_| !TelemetryConfig::disabled_by_env());
    let Some(endpoint) = endpoint else {
        let _ = tracing_subscriber::registry().with(logs).try_init();
        return Ok(Telemetry::default());
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(TelemetryError::Endpoint { endpoint: endpoint.to_string() });
    }
    let exporter_error = |e: opentelemetry_otlp::ExporterBuildError| TelemetryError::Exporter {
        endpoint: endpoint.to_string(),
        message: e.to_string(),
    };
    let resource = Resource::builder()
        .with_service_name(config.service_name.clone())
        .with_attribute(KeyValue::new("codesweep.role", config.role.clone()))
        .build();
    let span_exporter =
        opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(endpoint).build().map_err(exporter_error)?;
    let tracer_provider =
        SdkTracerProvider::builder().with_batch_exporter(span_exporter).with_resource(resource.clone()).build();
    let metric_exporter =
        opentelemetry_otlp::MetricExporter::builder().with_tonic().with_endpoint(endpoint).build().map_err(exporter_error)?;
    let reader = PeriodicReader::builder(metric_exporter).with_interval(config.export_interval).build();
    let meter_provider = SdkMeterProvider::builder().with_reader(reader).with_resource(resource).build();
    opentelemetry::global::set_meter_provider(meter_provider.clone());
    // Only codesweep's own spans and events, whatever RUST_LOG says about the logs.
    let ours = tracing_subscriber::filter::Targets::new().with_target("codesweep", tracing::Level::INFO);
    let spans = tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("codesweep")).with_filter(ours);
    let _ = tracing_subscriber::registry().with(logs).with(spans).try_init();
    tracing::info!(%endpoint, service = %config.service_name, "exporting spans and metrics over OTLP/gRPC");
    Ok(Telemetry { tracer: Some(tracer_provider), meter: Some(meter_provider) })
}
