//! The gRPC `Coordinator` service: the schedule behind a lock, the store beside it.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use codesweep_proto::coordinator_server::{Coordinator, CoordinatorServer};
use codesweep_proto::{
    CancelRunRequest, CancelRunResponse, CompleteShardRequest, CompleteShardResponse, FailShardRequest,
    FailShardResponse, GetRunRequest, HeartbeatRequest, HeartbeatResponse, Lease, LeaseShardRequest,
    LeaseShardResponse, RegisterWorkerRequest, RegisterWorkerResponse, RunState, RunStatus, SubmitRunRequest,
    SubmitRunResponse,
};
use codesweep_store::{RunLayout, RunStore, StoreError};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use codesweep_proto::auth::RequireToken;
use codesweep_proto::tls::ServerTls;
use crate::holds::{RunHolds, DEFAULT_HOLD_TTL};
use crate::plan::{load_plan, load_spec, plan_run, Plan, PlanError};
use crate::pools::{model_pools, Serves};
use crate::report::{done_shards, failed_shards};
use crate::run_span::RunSpans;
use crate::schedule::{Schedule, Timings};
use crate::spec::{SpecFormat, SweepSpec};

/// Options of a coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorOptions {
    /// Heartbeat interval told to workers.
    pub heartbeat_interval: Duration,
    /// Tell idle workers to exit once every run has ended (local runs, batch jobs).
    pub exit_when_done: bool,
    /// How long this coordinator's hold on a run outlives its last renewal.
    pub hold_ttl: Duration,
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        Self { heartbeat_interval: Duration::from_secs(2), exit_when_done: false, hold_ttl: DEFAULT_HOLD_TTL }
    }
}

/// The service state shared by all RPCs.
#[derive(Clone)]
pub struct CoordinatorService {
    schedule: Arc<Mutex<Schedule>>,
    stores: Arc<Mutex<HashMap<String, RunStore>>>,
    options: CoordinatorOptions,
    default_ttl: Duration,
    run_spans: RunSpans,
    holds: RunHolds,
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

fn timings(spec: &SweepSpec) -> Timings {
    Timings {
        lease_ttl: Duration::from_secs_f64(spec.run.lease_ttl_seconds),
        max_attempts: spec.run.max_attempts,
        retry_backoff: Duration::from_secs_f64(spec.run.retry_backoff_seconds),
    }
}

impl CoordinatorService {
    /// A coordinator with no runs.
    pub fn new(options: CoordinatorOptions) -> Self {
        Self {
            schedule: Arc::new(Mutex::new(Schedule::new())),
            stores: Arc::default(),
            holds: RunHolds::new(options.hold_ttl),
            options,
            default_ttl: Duration::from_secs(60),
            run_spans: RunSpans::default(),
        }
    }

    /// Records the address this coordinator serves on: it names the coordinator in the holds
    /// it takes on runs (set before submitting or recovering, so a refusal can name it).
    pub fn set_listen_address(&self, address: SocketAddr) {
        self.holds.set_address(&address.to_string());
    }

    /// Takes the hold of a run before serving it; refuses when another coordinator holds it.
    async fn take_hold(&self, store: &RunStore, run_id: &str) -> Result<(), Status> {
        self.holds.take(store, run_id).await.map_err(|e| match e {
            codesweep_store::hold::HoldError::Store(e) => internal(e),
            other => Status::failed_precondition(other.to_string()),
        })
    }

    /// Renews the holds of running runs and releases those of ended ones, every third of the
    /// hold's length, until the task is dropped. A run whose hold another coordinator took is
    /// cancelled here (no more leases), since that one serves it now.
    pub async fn keep_holds(self) {
        loop {
            tokio::time::sleep(self.holds.renew_interval()).await;
            let ended = |run: &str| {
                self.schedule.lock().ok().and_then(|s| s.status(run, Instant::now())).is_none_or(|s| s.state != RunState::Running as i32)
            };
            for run in self.holds.renew_all(ended).await {
                if let Ok(mut schedule) = self.schedule.lock() {
                    schedule.cancel(&run);
                }
            }
        }
    }

    /// Releases every hold (the coordinator stops).
    pub async fn release_holds(&self) {
        self.holds.release_all().await;
    }

    fn schedule(&self) -> Result<MutexGuard<'_, Schedule>, Status> {
        self.schedule.lock().map_err(|_| Status::internal("schedule lock poisoned"))
    }

    fn store(&self, url: &str) -> Result<RunStore, Status> {
        let mut stores = self.stores.lock().map_err(|_| Status::internal("store cache lock poisoned"))?;
        if let Some(store) = stores.get(url) {
            return Ok(store.clone());
        }
        let store = RunStore::open(url).map_err(|e| Status::invalid_argument(e.to_string()))?;
        stores.insert(url.to_string(), store.clone());
        Ok(store)
    }

    /// Plans (or resumes) a run from a validated spec and queues its unfinished shards.
    /// `retry_failed`: shards with a final failure record are queued again.
    pub async fn submit(&self, spec: &SweepSpec, retry_failed: bool) -> Result<SubmitRunResponse, Status> {
        let store = self.store(&spec.run.store)?;
        self.take_hold(&store, &spec.run.name).await?;
        let plan = plan_run(spec, &store).await.map_err(|e| match e {
            PlanError::Store(e) => internal(e),
            other => Status::failed_precondition(other.to_string()),
        })?;
        let layout = RunLayout::new(&plan.run_id);
        let (done, failed) = stored_outcomes(&store, &layout).await.map_err(internal)?;
        let failed = if retry_failed { HashMap::new() } else { failed };
        let already_done = plan.shards.iter().filter(|s| done.contains(&s.shard_id)).count() as u32;
        self.schedule()?.add_run(&plan, store.url(), timings(spec), &model_pools(spec), &done, &failed, Instant::now());
        self.open_run_span(&plan, already_done);
        tracing::info!(run = %plan.run_id, shards = plan.shards.len(), already_done, "run submitted");
        Ok(SubmitRunResponse { run_id: plan.run_id, shards: plan.shards.len() as u32, already_done })
    }

    /// Reloads every run found in the store at `url` (a restarted coordinator): plans are read
    /// back, shards with result objects count as done, the rest are queued again.
    pub async fn recover(&self, url: &str) -> Result<Vec<String>, Status> {
        let store = self.store(url)?;
        let mut recovered = Vec::new();
        for key in store.list("").await.map_err(internal)? {
            let Some(run_id) = key.strip_suffix("/spec.json").filter(|r| !r.contains('/')) else { continue };
            let layout = RunLayout::new(run_id);
            if let Err(e) = self.holds.take(&store, run_id).await {
                // Another live coordinator serves it (or the hold is unreadable): leave it be.
                tracing::warn!(store = %url, run = %run_id, error = %e, "not recovering a run");
                continue;
            }
            let (Some(spec), Some(plan)) = (
                load_spec(&store, &layout).await.map_err(internal)?,
                load_plan(&store, &layout).await.map_err(internal)?,
            ) else {
                continue;
            };
            let (done, failed) = stored_outcomes(&store, &layout).await.map_err(internal)?;
            let pools = model_pools(&spec);
            self.schedule()?.add_run(&plan, store.url(), timings(&spec), &pools, &done, &failed, Instant::now());
            let already_done = plan.shards.iter().filter(|s| done.contains(&s.shard_id)).count() as u32;
            self.open_run_span(&plan, already_done);
            recovered.push(run_id.to_string());
        }
        if !recovered.is_empty() {
            // Workers of the previous coordinator may still be running shards: give them a few
            // heartbeats to re-adopt their leases before anything is leased again.
            let grace = self.options.heartbeat_interval.saturating_mul(3) + Duration::from_secs(1);
            self.schedule()?.hold_leases_until(Instant::now() + grace);
        }
        Ok(recovered)
    }

    /// Starts the `run` span of a (re)submitted run, and ends it at once if nothing is left to do.
    fn open_run_span(&self, plan: &Plan, already_done: u32) {
        self.run_spans.open(plan, already_done);
        self.close_ended_run_spans();
    }

    /// Ends the `run` spans of runs that have ended, recording how they ended.
    fn close_ended_run_spans(&self) {
        if let Ok(schedule) = self.schedule.lock() {
            self.run_spans.close_ended(&schedule, Instant::now());
        }
    }

    /// Ends every open `run` span (the coordinator is stopping): a span that is never ended is
    /// never exported. Unfinished runs end with `run.state = "running"`.
    pub fn close_run_spans(&self) {
        if let Ok(schedule) = self.schedule.lock() {
            self.run_spans.close_all(&schedule, Instant::now());
        }
    }

    /// Whether this coordinator has runs and every one has ended.
    pub fn all_finished(&self) -> bool {
        self.schedule.lock().map(|s| s.all_finished()).unwrap_or(true)
    }

    /// Every run this coordinator serves: its id, store URL and state (what a batch job's exit
    /// status is made of).
    pub fn run_states(&self) -> Vec<(String, String, RunState)> {
        let Ok(schedule) = self.schedule.lock() else { return Vec::new() };
        let now = Instant::now();
        schedule
            .run_ids()
            .into_iter()
            .filter_map(|id| {
                let url = schedule.store_url(&id)?.to_string();
                let state = schedule.status(&id, now).and_then(|s| RunState::try_from(s.state).ok())?;
                Some((id, url, state))
            })
            .collect()
    }

    /// A snapshot of a run.
    pub fn run_status(&self, run_id: &str) -> Result<RunStatus, Status> {
        self.schedule()?
            .status(run_id, Instant::now())
            .ok_or_else(|| Status::not_found(format!("no run {run_id:?} on this coordinator")))
    }

    /// The store of a known run.
    fn run_store(&self, run_id: &str) -> Result<RunStore, Status> {
        let url = self.schedule()?.store_url(run_id).map(str::to_string);
        self.store(&url.ok_or_else(|| Status::not_found(format!("no run {run_id:?} on this coordinator")))?)
    }

    /// Writes the final failure records the schedule produced.
    async fn record_failures(&self) -> Result<(), Status> {
        let failures = self.schedule()?.take_final_failures();
        for failure in failures {
            let store = self.run_store(&failure.run_id)?;
            let record = serde_json::json!({
                "shard_id": failure.shard_id, "attempts": failure.attempts, "error": failure.error,
            });
            let key = RunLayout::new(&failure.run_id).failure(&failure.shard_id);
            store.put(&key, record.to_string()).await.map_err(internal)?;
            tracing::warn!(run = %failure.run_id, shard = %failure.shard_id, error = %failure.error, "shard failed for good");
        }
        Ok(())
    }

    /// The tonic server for this service, with bearer-token checks when `token` is set.
    pub fn into_server(
        self,
        token: Option<&str>,
    ) -> tonic::service::interceptor::InterceptedService<CoordinatorServer<Self>, RequireToken> {
        CoordinatorServer::with_interceptor(self, RequireToken::new(token))
    }
}

/// Result objects present (done shards) and final failure records of a run.
async fn stored_outcomes(
    store: &RunStore,
    layout: &RunLayout,
) -> Result<(HashSet<String>, HashMap<String, String>), StoreError> {
    let done = done_shards(store, layout).await?;
    let failed = failed_shards(store, layout, &done).await?.into_iter().map(|f| (f.shard_id, f.error)).collect();
    Ok((done, failed))
}

type StatusStream = Pin<Box<dyn Stream<Item = Result<RunStatus, Status>> + Send>>;

#[tonic::async_trait]
impl Coordinator for CoordinatorService {
    async fn register_worker(
        &self,
        request: Request<RegisterWorkerRequest>,
    ) -> Result<Response<RegisterWorkerResponse>, Status> {
        let request = request.into_inner();
        let serves = Serves::announced(&request.pool, &request.models);
        let models = if serves.models.is_empty() { "all".to_string() } else { serves.models.join(",") };
        let pool = serves.pool.clone();
        let worker_id = self.schedule()?.register_worker_serving(serves, Instant::now());
        tracing::info!(worker = %worker_id, name = %request.name, device = %request.device, %pool, %models, "worker registered");
        Ok(Response::new(RegisterWorkerResponse {
            worker_id,
            lease_ttl_ms: self.default_ttl.as_millis() as u64,
            heartbeat_interval_ms: self.options.heartbeat_interval.as_millis() as u64,
        }))
    }

    async fn lease_shard(&self, request: Request<LeaseShardRequest>) -> Result<Response<LeaseShardResponse>, Status> {
        let request = request.into_inner();
        let now = Instant::now();
        let (grant, retry_after, finished) = {
            let mut schedule = self.schedule()?;
            let serves = Serves::announced(&request.pool, &request.models);
            let grant = schedule.lease_as(&request.worker_id, Some(&serves), &request.loaded_model, now);
            (grant, schedule.retry_after(&request.worker_id, now), schedule.all_finished())
        };
        self.record_failures().await?;
        self.close_ended_run_spans();
        let lease = grant.map(|g| {
            tracing::info!(shard = %g.shard_id, worker = %request.worker_id, attempt = g.attempt, "shard leased");
            Lease {
                trace_parent: self.run_spans.trace_parent(&g.run_id),
                lease_id: g.lease_id,
                run_id: g.run_id,
                shard_id: g.shard_id,
                store_url: g.store_url,
                input_key: g.input_key,
                result_key: g.result_key,
                attempt: g.attempt,
                model: g.model,
            }
        });
        let shutdown = lease.is_none() && finished && self.options.exit_when_done;
        Ok(Response::new(LeaseShardResponse { lease, retry_after_ms: retry_after.as_millis() as u64, shutdown }))
    }

    async fn heartbeat(&self, request: Request<HeartbeatRequest>) -> Result<Response<HeartbeatResponse>, Status> {
        let request = request.into_inner();
        let shard = (!request.shard_id.is_empty()).then_some((request.run_id.as_str(), request.shard_id.as_str()));
        let answer = self.schedule()?.heartbeat(
            &request.worker_id,
            &request.lease_id,
            shard,
            request.examples_done,
            request.generated_tokens,
            Instant::now(),
        );
        self.record_failures().await?;
        self.close_ended_run_spans();
        Ok(Response::new(HeartbeatResponse { lease_valid: answer.valid, cancel: answer.cancel }))
    }

    async fn complete_shard(
        &self,
        request: Request<CompleteShardRequest>,
    ) -> Result<Response<CompleteShardResponse>, Status> {
        let request = request.into_inner();
        let tokens = request.stats.map_or(0, |s| s.generated_tokens);
        let target = self.schedule()?.lease_target(&request.worker_id, &request.lease_id);
        let (run_id, shard_id) = target.unwrap_or((request.run_id, request.shard_id));
        let exists = self.run_store(&run_id)?.exists(&RunLayout::new(&run_id).result(&shard_id)).await.map_err(internal)?;
        if exists {
            self.schedule()?.mark_done(&run_id, &shard_id, tokens);
            tracing::info!(shard = %shard_id, worker = %request.worker_id, "shard done");
            self.close_ended_run_spans();
        }
        Ok(Response::new(CompleteShardResponse { accepted: exists }))
    }

    async fn fail_shard(&self, request: Request<FailShardRequest>) -> Result<Response<FailShardResponse>, Status> {
        let request = request.into_inner();
        if request.release {
            let released = self.schedule()?.release(&request.worker_id, &request.lease_id, Instant::now());
            tracing::info!(lease = %request.lease_id, released, "shard released by a stopping worker");
            return Ok(Response::new(FailShardResponse { will_retry: released }));
        }
        tracing::warn!(lease = %request.lease_id, error = %request.error, "shard attempt failed");
        let will_retry = self.schedule()?.fail(
            &request.worker_id,
            &request.lease_id,
            request.error,
            request.retryable,
            Instant::now(),
        );
        self.record_failures().await?;
        self.close_ended_run_spans();
        Ok(Response::new(FailShardResponse { will_retry }))
    }

    async fn submit_run(&self, request: Request<SubmitRunRequest>) -> Result<Response<SubmitRunResponse>, Status> {
        let request = request.into_inner();
        let format = SpecFormat::from_name(&request.format)
            .ok_or_else(|| Status::invalid_argument(format!("unknown spec format {:?}", request.format)))?;
        let spec = SweepSpec::parse_with_env("submitted spec", &request.spec, format, false)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if !request.run_id.is_empty() && request.run_id != spec.run.name {
            return Err(Status::invalid_argument(format!(
                "run id {:?} differs from the spec's run.name {:?}",
                request.run_id, spec.run.name
            )));
        }
        Ok(Response::new(self.submit(&spec, !request.run_id.is_empty()).await?))
    }

    async fn get_run(&self, request: Request<GetRunRequest>) -> Result<Response<RunStatus>, Status> {
        Ok(Response::new(self.run_status(&request.into_inner().run_id)?))
    }

    type WatchRunStream = StatusStream;

    async fn watch_run(&self, request: Request<GetRunRequest>) -> Result<Response<Self::WatchRunStream>, Status> {
        let run_id = request.into_inner().run_id;
        self.run_status(&run_id)?;
        let service = self.clone();
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            loop {
                let status = service.run_status(&run_id);
                let ended = status.as_ref().map_or(true, |s| s.state != RunState::Running as i32);
                if sender.send(status).await.is_err() || ended {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(receiver)) as StatusStream))
    }

    async fn cancel_run(&self, request: Request<CancelRunRequest>) -> Result<Response<CancelRunResponse>, Status> {
        let run_id = request.into_inner().run_id;
        let cancelled = self.schedule()?.cancel(&run_id);
        self.close_ended_run_spans();
        Ok(Response::new(CancelRunResponse { cancelled }))
    }
}

/// Serves `service` on `listener` until `shutdown` resolves; with `tls`, only TLS connections
/// are accepted. The service's run holds are renewed meanwhile and released at the end.
pub async fn serve(
    service: CoordinatorService,
    listener: tokio::net::TcpListener,
    token: Option<&str>,
    tls: Option<&ServerTls>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    if let Ok(address) = listener.local_addr() {
        service.set_listen_address(address);
    }
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls.config())?;
    }
    let holds = service.clone();
    let renewals = tokio::spawn(service.clone().keep_holds());
    let served = builder
        .add_service(service.into_server(token))
        .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), shutdown)
        .await;
    renewals.abort();
    holds.release_holds().await;
    served
}

/// Binds a listener, e.g. `127.0.0.1:0` for a free loopback port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}
