//! `codesweep coordinator` and `codesweep worker`: the two long-running processes of a cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use codesweep_coordinator::service::CoordinatorOptions;
use codesweep_coordinator::spec::{expand_home, SweepSpec};
use codesweep_proto::tls::ServerTls;
use codesweep_runner::{run_coordinator, run_worker_process, CoordinatorProcess};
use codesweep_store::split_run_uri;
use codesweep_worker::{RunRef, WorkerConfig};

use crate::cluster::{read_token, runtime, CoordinatorFlags};
use crate::exit::{self, ending_to_result, exit_with};
use crate::telemetry::{start_telemetry, telemetry_config, TelemetryFlags};

/// Arguments of `codesweep coordinator`.
#[derive(clap::Args)]
pub struct CoordinatorArgs {
    /// Address to listen on (`0.0.0.0:50051` in a cluster; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Store(s) whose unfinished runs are reloaded at start (repeatable).
    #[arg(long)]
    store: Vec<String>,
    /// Environment variable holding the bearer token every RPC must carry (unset: no auth).
    #[arg(long, default_value = "CODESWEEP_TOKEN")]
    token_env: String,
    /// Heartbeat interval told to workers, in seconds.
    #[arg(long, default_value_t = 2.0)]
    heartbeat_seconds: f64,
    /// Exit once every run has ended and tell idle workers to exit too (batch jobs).
    #[arg(long)]
    exit_when_done: bool,
    /// With --exit-when-done: a spec file (TOML/YAML/JSON) to submit at start; its
    /// `[telemetry]` section applies to this coordinator.
    #[arg(long)]
    submit: Option<PathBuf>,
    /// Serve TLS only, with this PEM certificate chain (leaf first); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Seconds a run's hold outlives this coordinator's last renewal: another coordinator
    /// refuses the run until then (renewed every third of it; released on a clean exit).
    #[arg(long, default_value_t = 30.0)]
    hold_seconds: f64,
    #[command(flatten)]
    telemetry: TelemetryFlags,
}

/// Runs the coordinator until SIGTERM / Ctrl-C (or, with --exit-when-done, until its runs end).
pub fn coordinator(args: CoordinatorArgs) -> Result<()> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(ServerTls::from_files(cert, key)?),
        _ => None,
    };
    let submit = args.submit.as_deref().map(SweepSpec::load).transpose()?;
    let runtime = runtime()?;
    let section = submit.as_ref().and_then(|s| s.telemetry.as_ref());
    let mut telemetry = start_telemetry(&runtime, &telemetry_config("coordinator", &args.telemetry, section), "info")?;
    let process = CoordinatorProcess {
        listen: args.listen,
        stores: args.store,
        token: read_token(&args.token_env),
        tls,
        options: CoordinatorOptions {
            heartbeat_interval: Duration::from_secs_f64(args.heartbeat_seconds.max(0.05)),
            exit_when_done: args.exit_when_done,
            hold_ttl: Duration::from_secs_f64(args.hold_seconds.max(0.1)),
        },
        submit,
    };
    // A batch job's exit status says how its runs ended (see `exit`), so a Job that lost
    // shards, or was stopped early, never looks successful to Kubernetes.
    let ending = runtime.block_on(run_coordinator(process));
    telemetry.shutdown();
    ending_to_result(ending?)
}

/// Arguments of `codesweep worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    coordinator: CoordinatorFlags,
    /// Default device for local models: `cpu`, or `cuda:N` in a build with `--features cuda`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// A name for logs (default: the host name).
    #[arg(long)]
    name: Option<String>,
    /// Where models given as object-store URLs are downloaded.
    #[arg(long, default_value = "~/.cache/codesweep/models")]
    model_cache: String,
    /// Seconds to keep trying to reach the coordinator at start.
    #[arg(long, default_value_t = 60.0)]
    connect_timeout: f64,
    /// Seconds to keep retrying when the coordinator becomes unreachable later (it restarts and
    /// rebuilds its state from the store; the shard in hand keeps running and is re-adopted).
    #[arg(long, default_value_t = 300.0)]
    reconnect_seconds: f64,
    /// The worker pool this worker serves: it leases only shards of models whose `pool` (in
    /// the spec's [[models]]) is this name. Models without `pool` are in the pool "default".
    #[arg(long, env = "CODESWEEP_POOL", default_value = codesweep_coordinator::pools::DEFAULT_POOL)]
    pool: String,
    /// Run only these models of the pool (comma-separated names; default: all of them).
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// The run this worker serves, as <store>/<run id> (what `codesweep report` takes): when the
    /// coordinator is unreachable and the run has ended, the worker exits 0 at once instead of
    /// waiting out --connect-timeout (a late or replacement pod of a batch Job).
    #[arg(long, value_name = "STORE/RUN")]
    run: Option<String>,
    /// Wait until this URL answers GET with a 2xx status before leasing (an inference
    /// sidecar's readiness, e.g. http://127.0.0.1:8000/health).
    #[arg(long, value_name = "URL")]
    wait_for: Option<String>,
    /// Seconds to wait for --wait-for (loading a big model into a server takes a while).
    #[arg(long, default_value_t = 1800.0)]
    wait_for_timeout: f64,
    /// A file that must be readable before leasing (a local model of the pool); otherwise the
    /// worker exits with status 78 before leasing. Repeatable.
    #[arg(long, value_name = "PATH")]
    require_file: Vec<std::path::PathBuf>,
    #[command(flatten)]
    telemetry: TelemetryFlags,
}

/// Why a worker cannot work here, found before it leases anything: a device this build or
/// machine lacks, or a model file it cannot read.
fn worker_preflight(args: &WorkerArgs) -> Result<(), String> {
    if let Err(e) = codesweep_engine::Placement::parse(&args.device, None) {
        return Err(format!("--device {}: {e}", args.device));
    }
    if let Err(e) = codesweep_coordinator::pools::check_pool_name(&args.pool) {
        return Err(format!("--pool: {e}"));
    }
    for path in &args.require_file {
        let readable = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut [0u8; 1]));
        if let Err(e) = readable {
            return Err(format!("--require-file {}: cannot read it: {e}; is the models volume mounted?", path.display()));
        }
    }
    Ok(())
}

/// The default worker name: `$HOSTNAME` (the pod name on Kubernetes) or "worker".
pub fn default_worker_name() -> String {
    std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "worker".into())
}

/// Runs a worker until the coordinator says to stop or a signal arrives.
pub fn worker(args: WorkerArgs) -> Result<()> {
    let runtime = runtime()?;
    let mut telemetry = start_telemetry(&runtime, &telemetry_config("worker", &args.telemetry, None), "info")?;
    // A device this build or machine lacks, or a model it cannot read, would fail every shard
    // it leased: refuse before connecting, with a status that tells a Job not to retry.
    if let Err(e) = worker_preflight(&args) {
        telemetry.shutdown();
        return Err(exit_with(exit::CONFIG, format!("{e}; this worker leases nothing")));
    }
    let run = match args.run.as_deref().map(split_run_uri).transpose() {
        Ok(run) => run.map(|(store_url, run_id)| RunRef { store_url, run_id }),
        Err(e) => {
            telemetry.shutdown();
            return Err(exit_with(exit::CONFIG, format!("--run: {e:#}")));
        }
    };
    let result = runtime.block_on(async move {
        let config = WorkerConfig {
            coordinator: args.coordinator.coordinator.clone(),
            token: args.coordinator.token(),
            tls: args.coordinator.tls()?,
            name: args.name.unwrap_or_else(default_worker_name),
            device: args.device,
            model_cache: expand_home(std::path::Path::new(&args.model_cache)),
            connect_timeout: Duration::from_secs_f64(args.connect_timeout.max(0.0)),
            reconnect_for: Duration::from_secs_f64(args.reconnect_seconds.max(0.0)),
            pool: args.pool,
            models: args.models,
            run,
            wait_for: args.wait_for.map(|url| (url, Duration::from_secs_f64(args.wait_for_timeout.max(0.0)))),
        };
        run_worker_process(config).await.map_err(anyhow::Error::from)
    });
    telemetry.shutdown();
    ending_to_result(result?)
}
