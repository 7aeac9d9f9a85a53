//! Telemetry end to end: an OTLP/gRPC collector in this process (the generated
//! `opentelemetry-proto` services) receives what a real `codesweep run` subprocess exports —
//! `run`, `shard` and `batch` spans in one trace, and counters whose totals equal what the run
//! did by its own account (result files, its final status line). Separate coordinator and
//! worker processes share one trace through the lease's traceparent; a coordinator stopped by
//! SIGTERM still exports its open run span. With telemetry off nothing may connect to the
//! collector at all.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use candle_core::quantized::GgmlDType;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{MetricsService, MetricsServiceServer};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::{status, Span};
use serde_json::Value;
use support::{common, golden};
use tokio_stream::StreamExt;

const EXAMPLES: usize = 10;
const SHARD_SIZE: usize = 5;
const MAX_ATTEMPTS: u64 = 2;

/// Everything the collector received, and how many connections it accepted.
#[derive(Clone, Default)]
struct Collector {
    traces: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    connections: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.traces.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl MetricsService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.metrics.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse { partial_success: None }))
    }
}

impl Collector {
    /// Serves on a free loopback port in `runtime`; returns the endpoint URL.
    fn start(&self, runtime: &tokio::runtime::Runtime) -> String {
        let listener = runtime.block_on(tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))).unwrap();
        let address = listener.local_addr().unwrap();
        let connections = self.connections.clone();
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(move |connection| {
            connections.fetch_add(1, Ordering::SeqCst);
            connection
        });
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(self.clone()))
            .add_service(MetricsServiceServer::new(self.clone()))
            .serve_with_incoming(incoming);
        runtime.spawn(server);
        format!("http://{address}")
    }

    /// Every span received, with its resource's attributes.
    fn spans(&self) -> Vec<(Vec<KeyValue>, Span)> {
        let mut spans = Vec::new();
        for request in self.traces.lock().unwrap().iter() {
            for resource_spans in &request.resource_spans {
                let resource = resource_spans.resource.as_ref().map(|r| r.attributes.clone()).unwrap_or_default();
                for scope in &resource_spans.scope_spans {
                    spans.extend(scope.spans.iter().map(|s| (resource.clone(), s.clone())));
                }
            }
        }
        spans
    }

    /// A counter's total: the latest cumulative point of each attribute set, added up
    /// (0 when it was never exported, i.e. never incremented).
    fn counter_total(&self, name: &str) -> i64 {
        let mut latest: HashMap<String, (u64, i64)> = HashMap::new();
        for request in self.metrics.lock().unwrap().iter() {
            for scope in request.resource_metrics.iter().flat_map(|r| &r.scope_metrics) {
                for m in scope.metrics.iter().filter(|m| m.name == name) {
                    let Some(metric::Data::Sum(sum)) = &m.data else { panic!("{name} is not a sum: {:?}", m.data) };
                    assert!(sum.is_monotonic, "{name} must be a counter");
                    for point in &sum.data_points {
                        let value = match point.value {
                            Some(number_data_point::Value::AsInt(v)) => v,
                            other => panic!("{name}: not an integer point: {other:?}"),
                        };
                        let key = format!("{:?}", point.attributes);
                        let entry = latest.entry(key).or_insert((0, 0));
                        if point.time_unix_nano >= entry.0 {
                            *entry = (point.time_unix_nano, value);
                        }
                    }
                }
            }
        }
        latest.values().map(|(_, v)| v).sum()
    }

    /// A histogram's latest cumulative count over all attribute sets.
    fn histogram_count(&self, name: &str) -> u64 {
        let mut latest: HashMap<String, (u64, u64)> = HashMap::new();
        for request in self.metrics.lock().unwrap().iter() {
            for scope in request.resource_metrics.iter().flat_map(|r| &r.scope_metrics) {
                for m in scope.metrics.iter().filter(|m| m.name == name) {
                    let Some(metric::Data::Histogram(histogram)) = &m.data else { panic!("{name} is not a histogram") };
                    for point in &histogram.data_points {
                        let entry = latest.entry(format!("{:?}", point.attributes)).or_insert((0, 0));
                        if point.time_unix_nano >= entry.0 {
                            *entry = (point.time_unix_nano, point.count);
                        }
                    }
                }
            }
        }
        latest.values().map(|(_, c)| c).sum()
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

fn text(attributes: &[KeyValue], key: &str) -> String {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        other => panic!("attribute {key}: expected a string, got {other:?} in {attributes:?}"),
    }
}

fn int(attributes: &[KeyValue], key: &str) -> i64 {
    match attribute(attributes, key) {
        Some(any_value::Value::IntValue(v)) => *v,
        other => panic!("attribute {key}: expected an integer, got {other:?} in {attributes:?}"),
    }
}

/// A tiny model, a file that is not a model, and the first golden Python examples.
struct Fixture {
    dir: tempfile::TempDir,
    model: PathBuf,
    broken: PathBuf,
    data: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let model = common::write_gguf(dir.path(), common::Arch::Qwen2, GgmlDType::Q8_0, &common::trained_tokenizer_json(400));
    let broken = dir.path().join("broken.gguf");
    std::fs::write(&broken, b"this is not a GGUF file").unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("python")).unwrap();
    let examples = std::fs::read_to_string(golden().join("cceval/python/examples.jsonl")).unwrap();
    let lines: Vec<&str> = examples.lines().take(EXAMPLES).collect();
    assert_eq!(lines.len(), EXAMPLES);
    std::fs::write(data.join("python/line_completion.jsonl"), lines.join("\n") + "\n").unwrap();
    Fixture { dir, model, broken, data }
}

impl Fixture {
    /// A spec for run `name`: the tiny model (and the broken one if asked), in-file setting,
    /// one example per engine batch, and `extra` TOML at the end.
    fn spec(&self, name: &str, with_broken: bool, extra: &str) -> PathBuf {
        let broken = if with_broken {
            format!("[[models]]\nname = \"broken\"\npath = \"{}\"\n", self.broken.display())
        } else {
            String::new()
        };
        let text = format!(
            r#"[run]
name = "{name}"
store = "{store}"
shard_size = {SHARD_SIZE}
max_attempts = {MAX_ATTEMPTS}
retry_backoff_seconds = 0.05

[[models]]
name = "tiny"
path = "{model}"

{broken}
[generation]
max_new_tokens = 8
batch_size = 1
model_max_tokens = 400
buffer = 16

[cceval]
data_dir = "{data}"
settings = ["in_file"]

{extra}
"#,
            store = self.store().display(),
            model = self.model.display(),
            data = self.data.display(),
        );
        let path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    /// (examples, prompt tokens, generated tokens) over a run's result files.
    fn result_totals(&self, run: &str) -> (i64, i64, i64) {
        let mut totals = (0, 0, 0);
        let mut folders = vec![self.store().join(run).join("shards")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
                let t = &header["header"]["totals"];
                totals.0 += t["examples"].as_i64().unwrap();
                totals.1 += t["prompt_tokens"].as_i64().unwrap();
                totals.2 += t["generated_tokens"].as_i64().unwrap();
            }
        }
        totals
    }
}

/// `codesweep ARGS` with quiet logs and none of this process's OpenTelemetry variables.
fn codesweep(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_codesweep"));
    command.args(args).env("RUST_LOG", "warn").env_remove("CODESWEEP_TOKEN");
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("OTEL_")) {
        command.env_remove(name);
    }
    command
}

/// `codesweep run SPEC` with no OpenTelemetry variables but those in `env`.
fn codesweep_run(spec: &Path, env: &[(&str, &str)]) -> Output {
    codesweep(&["run", spec.to_str().unwrap(), "--quiet"]).envs(env.iter().copied()).output().unwrap()
}

/// The figure after `label ` in the run's final status line (`…; retries 2, lease expirations 0`).
fn reported(stderr: &str, label: &str) -> i64 {
    let line = stderr.lines().find(|l| l.contains("lease expirations")).unwrap_or_else(|| panic!("no status line in {stderr}"));
    let at = line.find(&format!("{label} ")).unwrap_or_else(|| panic!("no {label:?} in {line}")) + label.len() + 1;
    line[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn a_run_exports_its_spans_and_counters_to_the_configured_collector() {
    let runtime = runtime();
    let collector = Collector::default();
    let endpoint = collector.start(&runtime);
    let fixture = fixture();
    let telemetry = format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\nservice_name = \"sweep-test\"\nexport_interval_seconds = 0.2\n");
    let spec = fixture.spec("traced", true, &telemetry);
    let out = codesweep_run(&spec, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    // The broken model's shards fail for good, so the run fails; telemetry is still flushed.
    assert!(!out.status.success(), "the broken model must fail the run: {stderr}");
    let broken_shards = EXAMPLES.div_ceil(SHARD_SIZE);
    assert!(stderr.contains(&format!("{broken_shards} shard(s) failed")), "{stderr}");

    let spans = collector.spans();
    let named = |name: &str| spans.iter().filter(|(_, s)| s.name == name).collect::<Vec<_>>();
    for (resource, _) in &spans {
        assert_eq!(text(resource, "service.name"), "sweep-test");
        assert_eq!(text(resource, "codesweep.role"), "run");
    }

    let runs = named("run");
    assert_eq!(runs.len(), 1, "one run span: {runs:?}");
    let run = &runs[0].1;
    assert_eq!(text(&run.attributes, "run.id"), "traced");
    assert_eq!(int(&run.attributes, "run.shards"), 2 * broken_shards as i64);
    assert_eq!(int(&run.attributes, "run.examples"), 2 * EXAMPLES as i64);
    assert_eq!(text(&run.attributes, "run.state"), "finished_with_failures");
    assert_eq!(int(&run.attributes, "run.shards_done"), broken_shards as i64);
    assert_eq!(int(&run.attributes, "run.shards_failed"), broken_shards as i64);
    assert!(run.parent_span_id.is_empty(), "the run span is a root");

    // Every shard attempt is a child of the run span, in the run's trace.
    let shards = named("shard");
    for (_, shard) in &shards {
        assert_eq!((&shard.trace_id, &shard.parent_span_id), (&run.trace_id, &run.span_id), "{shard:?}");
        assert_eq!(text(&shard.attributes, "run.id"), "traced");
        assert_eq!(text(&shard.attributes, "benchmark"), "cceval");
        assert_eq!(text(&shard.attributes, "language"), "python");
        assert_eq!(text(&shard.attributes, "setting"), "in_file");
    }
    let ok = |s: &Span| s.status.as_ref().is_some_and(|st| st.code == status::StatusCode::Ok as i32);
    let (done, failed): (Vec<_>, Vec<_>) = shards.iter().map(|(_, s)| s).partition(|s| ok(s));
    assert_eq!(done.len(), broken_shards, "one finished attempt per good shard");
    assert!(done.iter().all(|s| text(&s.attributes, "model") == "tiny"));
    let examples: i64 = done.iter().map(|s| int(&s.attributes, "examples")).sum();
    assert_eq!(examples, EXAMPLES as i64);
    let mut done_ids: Vec<String> = done.iter().map(|s| text(&s.attributes, "shard.id")).collect();
    done_ids.sort();
    done_ids.dedup();
    assert_eq!(done_ids.len(), broken_shards, "{done_ids:?}");
    assert_eq!(failed.len(), broken_shards * MAX_ATTEMPTS as usize, "every attempt of the broken model");
    for shard in &failed {
        assert_eq!(text(&shard.attributes, "model"), "broken");
        assert_eq!(shard.status.as_ref().map(|s| s.code), Some(status::StatusCode::Error as i32));
        assert!(!text(&shard.attributes, "error").is_empty());
    }

    // Batches sit inside the finished shards and add up to the result files.
    let (result_examples, result_prompt, result_generated) = fixture.result_totals("traced");
    assert_eq!(result_examples, EXAMPLES as i64);
    let batches = named("batch");
    let mut per_shard: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for (_, batch) in &batches {
        assert_eq!(batch.trace_id, run.trace_id);
        assert!(done.iter().any(|s| s.span_id == batch.parent_span_id), "a batch outside a finished shard: {batch:?}");
        *per_shard.entry(batch.parent_span_id.clone()).or_default() += int(&batch.attributes, "batch.requests");
    }
    for shard in &done {
        assert_eq!(per_shard.get(&shard.span_id).copied(), Some(int(&shard.attributes, "examples")), "batch requests of a shard");
    }
    let sum = |key: &str| batches.iter().map(|(_, b)| int(&b.attributes, key)).sum::<i64>();
    assert_eq!(sum("batch.prompt_tokens"), result_prompt);
    assert_eq!(sum("batch.generated_tokens"), result_generated);
    assert!(result_generated > 0);
    // batch_size 1 → engine calls of 4 requests: a 5-example shard takes two.
    assert_eq!(batches.len(), broken_shards * SHARD_SIZE.div_ceil(4));

    // Counters equal what the run did by its own account.
    assert_eq!(collector.counter_total("codesweep.examples.completed"), EXAMPLES as i64);
    assert_eq!(collector.counter_total("codesweep.examples.generated"), EXAMPLES as i64);
    assert_eq!(collector.counter_total("codesweep.tokens.prompt"), result_prompt);
    assert_eq!(collector.counter_total("codesweep.tokens.generated"), result_generated);
    assert_eq!(collector.counter_total("codesweep.shards.completed"), broken_shards as i64);
    assert_eq!(collector.counter_total("codesweep.shard.failures"), broken_shards as i64);
    let retries = reported(&stderr, "retries");
    assert_eq!(retries, broken_shards as i64 * (MAX_ATTEMPTS as i64 - 1));
    assert_eq!(collector.counter_total("codesweep.shard.retries"), retries);
    assert_eq!(collector.counter_total("codesweep.lease.expirations"), reported(&stderr, "lease expirations"));
    assert_eq!(collector.histogram_count("codesweep.shard.duration"), broken_shards as u64);
    // The status line's token count (from CompleteShard stats) agrees too.
    assert_eq!(reported(&stderr, "generated tokens"), result_generated);
    assert_eq!(collector.histogram_count("codesweep.batch.duration"), batches.len() as u64);
}

#[test]
fn the_standard_endpoint_variable_turns_telemetry_on() {
    let runtime = runtime();
    let collector = Collector::default();
    let endpoint = collector.start(&runtime);
    let fixture = fixture();
    let out = codesweep_run(&fixture.spec("from-env", false, ""), &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let spans = collector.spans();
    let run = spans.iter().find(|(_, s)| s.name == "run").expect("a run span");
    assert_eq!(text(&run.1.attributes, "run.id"), "from-env");
    assert_eq!(text(&run.1.attributes, "run.state"), "succeeded");
    assert_eq!(text(&run.0, "service.name"), "codesweep");
    assert_eq!(collector.counter_total("codesweep.examples.completed"), EXAMPLES as i64);
}

#[test]
fn with_telemetry_off_nothing_connects() {
    let runtime = runtime();
    let collector = Collector::default();
    let endpoint = collector.start(&runtime);
    let fixture = fixture();
    // The signal-specific variables alone do not turn telemetry on; an exporter built by
    // mistake would send to them.
    let env = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.as_str()), ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", &endpoint)];
    let out = codesweep_run(&fixture.spec("untraced", false, ""), &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fixture.result_totals("untraced").0, EXAMPLES as i64, "the run did its work");
    // A spec asking for telemetry is overruled by OTEL_SDK_DISABLED=true.
    let spec = fixture.spec("disabled", false, &format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n"));
    let out = codesweep_run(&spec, &[("OTEL_SDK_DISABLED", "true")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(collector.connections.load(Ordering::SeqCst), 0, "telemetry off or disabled: no connection");
    assert!(collector.traces.lock().unwrap().is_empty() && collector.metrics.lock().unwrap().is_empty());
    // The collector was there all along: the same spec without the veto reaches it.
    let out = codesweep_run(&spec, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(collector.connections.load(Ordering::SeqCst) > 0);
    assert!(collector.spans().iter().any(|(_, s)| s.name == "run"));
}

#[cfg(unix)]
#[test]
fn a_coordinator_stopped_by_sigterm_still_exports_its_open_run_span() {
    use std::io::{BufRead, BufReader};
    let runtime = runtime();
    let collector = Collector::default();
    let endpoint = collector.start(&runtime);
    let fixture = fixture();
    // The flag beats the spec: nothing listens on the spec's endpoint.
    let spec = fixture.spec("interrupted", false, "[telemetry]\notlp_endpoint = \"http://127.0.0.1:9\"\n");
    let mut child = codesweep(&["coordinator", "--listen", "127.0.0.1:0", "--otlp-endpoint", &endpoint])
        .args(["--submit", spec.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("listening on "), "{line:?}");
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = wait_child(&mut child, 60);
    assert!(status.success(), "a coordinator without --exit-when-done stops cleanly: {status:?}");
    let spans = collector.spans();
    let (resource, run) = spans.iter().find(|(_, s)| s.name == "run").expect("the open run span was exported at shutdown");
    assert_eq!(text(resource, "codesweep.role"), "coordinator");
    assert_eq!(text(&run.attributes, "run.id"), "interrupted");
    assert_eq!(text(&run.attributes, "run.state"), "running");
    assert_eq!(int(&run.attributes, "run.shards_done"), 0);
    assert_eq!(int(&run.attributes, "run.shards"), EXAMPLES.div_ceil(SHARD_SIZE) as i64);
}

/// Waits for a child process, killing it after `seconds`.
fn wait_child(child: &mut std::process::Child, seconds: u64) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("process did not finish within {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_worker_process_continues_the_coordinators_trace() {
    use std::io::{BufRead, BufReader};
    let runtime = runtime();
    let collector = Collector::default();
    let endpoint = collector.start(&runtime);
    let fixture = fixture();
    let spec = fixture.spec("cluster", false, "");
    let mut coordinator = codesweep(&["coordinator", "--listen", "127.0.0.1:0", "--exit-when-done", "--otlp-endpoint", &endpoint])
        .args(["--submit", spec.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(coordinator.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let address = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    let mut worker = codesweep(&["worker", "--coordinator", &address, "--name", "w1", "--otlp-endpoint", &endpoint]).spawn().unwrap();
    assert!(wait_child(&mut worker, 120).success());
    assert!(wait_child(&mut coordinator, 60).success());

    let spans = collector.spans();
    let runs: Vec<_> = spans.iter().filter(|(_, s)| s.name == "run").collect();
    assert_eq!(runs.len(), 1);
    let (coordinator_resource, run) = runs[0];
    assert_eq!(text(coordinator_resource, "codesweep.role"), "coordinator");
    assert_eq!(text(&run.attributes, "run.state"), "succeeded");
    let shards: Vec<_> = spans.iter().filter(|(_, s)| s.name == "shard").collect();
    assert_eq!(shards.len(), EXAMPLES.div_ceil(SHARD_SIZE));
    for (resource, shard) in shards {
        assert_eq!(text(resource, "codesweep.role"), "worker");
        assert_eq!(text(&shard.attributes, "worker"), "w1");
        assert_eq!((&shard.trace_id, &shard.parent_span_id), (&run.trace_id, &run.span_id), "the lease's traceparent");
    }
    assert_eq!(collector.counter_total("codesweep.examples.completed"), EXAMPLES as i64);
}
