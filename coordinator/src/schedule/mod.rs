//! The schedule: which shard each worker gets, when leases expire, when shards are retried.
//!
//! Pure state with the clock passed in, so every rule is testable without sleeping:
//! - a lease lives `lease_ttl` past its last heartbeat; an expired lease counts as a failed
//!   attempt and returns the shard to the queue;
//! - a failed attempt is retried after `retry_backoff × 2^(attempt−1)` (capped at 60 s) until
//!   `max_attempts`, then the shard is failed for good and the run finishes the rest;
//! - a worker gets only shards of its pool's models (see [`crate::pools`]);
//! - a worker gets shards of the model it has loaded while any are waiting; otherwise the
//!   model with the most waiting examples per worker already on it, so sizes finish together.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use codesweep_proto::RunState;
use codesweep_store::RunLayout;
use codesweep_telemetry::{instruments, KeyValue};

use crate::plan::{Plan, PlannedShard};
use crate::pools::{Serves, DEFAULT_POOL};

mod lease;
mod queue;
mod status;
use queue::{At, Queue};
use status::run_state;

/// Lease and retry timings of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timings {
    /// Lifetime of a lease after each heartbeat.
    pub lease_ttl: Duration,
    /// Attempts before a shard fails for good.
    pub max_attempts: u32,
    /// Delay before the first retry.
    pub retry_backoff: Duration,
}

const MAX_BACKOFF: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq)]
enum ShardState {
    Pending { not_before: Instant },
    Leased { lease_id: String, worker_id: String, expires: Instant },
    Done,
    Failed,
}

#[derive(Debug)]
struct ShardEntry {
    planned: PlannedShard,
    state: ShardState,
    attempts: u32,
    last_error: Option<String>,
    progress: u64,
    /// Tokens generated: the running attempt's last heartbeat, or the finished shard's total.
    tokens: u64,
}

#[derive(Debug)]
struct RunEntry {
    layout: RunLayout,
    /// Shard id → index in `shards`.
    index_of: HashMap<String, usize>,
    /// Model → the pool that runs it (models absent here run in the default pool).
    pools: HashMap<String, String>,
    store_url: String,
    timings: Timings,
    shards: Vec<ShardEntry>,
    cancelled: bool,
    added: Instant,
    done_when_added: u64,
}

#[derive(Debug)]
struct WorkerEntry {
    loaded_model: String,
    last_seen: Instant,
    serves: Serves,
}

impl WorkerEntry {
    fn new(serves: Serves, now: Instant) -> Self {
        Self { loaded_model: String::new(), last_seen: now, serves }
    }
}

/// A worker that has not called for this long is not counted in status (it has exited or lost
/// its node; an idle worker asks for work every few seconds, a busy one heartbeats).
const WORKER_SILENCE: Duration = Duration::from_secs(60);

/// A lease handed to a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Unique lease id.
    pub lease_id: String,
    /// The run.
    pub run_id: String,
    /// The shard.
    pub shard_id: String,
    /// The run's store.
    pub store_url: String,
    /// Key of the shard input.
    pub input_key: String,
    /// Key the result must be created at.
    pub result_key: String,
    /// 1 for the first try.
    pub attempt: u32,
    /// The shard's model.
    pub model: String,
}

/// A shard that ran out of attempts, for the caller to record in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalFailure {
    /// The run.
    pub run_id: String,
    /// The shard.
    pub shard_id: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last error.
    pub error: String,
}

/// What a heartbeat learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    /// The lease is still this worker's.
    pub valid: bool,
    /// The run was cancelled.
    pub cancel: bool,
}

/// Every run the coordinator knows, and its workers.
#[derive(Debug)]
pub struct Schedule {
    /// Random tag in every id this schedule issues, so leases granted by an earlier
    /// coordinator process (before a restart) are recognised as such.
    instance: String,
    runs: Vec<RunEntry>,
    /// Shards waiting to be leased, by pool.
    queues: HashMap<String, Queue>,
    /// No new leases before this instant (after a restart, so running workers can re-adopt theirs).
    hold_leases_until: Option<Instant>,
    leases: HashMap<String, (usize, usize)>,
    workers: HashMap<String, WorkerEntry>,
    next_id: u64,
    /// Leases that expired without a heartbeat.
    pub lease_expirations: u64,
    /// Attempts started again after a failure or an expired lease.
    pub retries: u64,
    final_failures: Vec<FinalFailure>,
}

fn backoff(timings: &Timings, attempts: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1));
    timings.retry_backoff.saturating_mul(factor).min(MAX_BACKOFF)
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            instance: format!("{:08x}", rand::random::<u32>()),
            runs: Vec::new(),
            queues: HashMap::new(),
            hold_leases_until: None,
            leases: HashMap::new(),
            workers: HashMap::new(),
            next_id: 0,
            lease_expirations: 0,
            retries: 0,
            final_failures: Vec::new(),
        }
    }
}

impl Schedule {
    /// An empty schedule.
    pub fn new() -> Self {
        Self::default()
    }

    fn fresh_id(&mut self, kind: &str) -> String {
        self.next_id += 1;
        format!("{kind}-{}-{}", self.instance, self.next_id)
    }

    /// Adds a run (or replaces one with the same id): `done` shards have result objects,
    /// `failed` ones a final failure record; the rest are queued in their model's pool
    /// (`pools`: model → pool; absent models run in the default pool).
    #[allow(clippy::too_many_arguments)]
    pub fn add_run(
        &mut self,
        plan: &Plan,
        store_url: &str,
        timings: Timings,
        pools: &HashMap<String, String>,
        done: &HashSet<String>,
        failed: &HashMap<String, String>,
        now: Instant,
    ) {
        let existing = self.runs.iter().position(|r| r.layout.run_id() == plan.run_id);
        if let Some(index) = existing {
            // Leases of the replaced run die with it; their workers learn so at the next heartbeat.
            self.leases.retain(|_, (run, _)| *run != index);
        }
        let shards: Vec<ShardEntry> = plan
            .shards
            .iter()
            .map(|planned| {
                let (state, last_error) = if done.contains(&planned.shard_id) {
                    (ShardState::Done, None)
                } else if let Some(error) = failed.get(&planned.shard_id) {
                    (ShardState::Failed, Some(error.clone()))
                } else {
                    (ShardState::Pending { not_before: now }, None)
                };
                ShardEntry { planned: planned.clone(), state, attempts: 0, last_error, progress: 0, tokens: 0 }
            })
            .collect();
        let done_when_added =
            shards.iter().filter(|s| s.state == ShardState::Done).map(|s| s.planned.examples as u64).sum();
        let index_of = shards.iter().enumerate().map(|(i, s)| (s.planned.shard_id.clone(), i)).collect();
        let entry = RunEntry {
            layout: RunLayout::new(&plan.run_id),
            index_of,
            pools: pools.clone(),
            store_url: store_url.to_string(),
            timings,
            shards,
            cancelled: false,
            added: now,
            done_when_added,
        };
        match existing {
            Some(index) => self.runs[index] = entry,
            None => self.runs.push(entry),
        }
        self.rebuild_queue(now);
    }

    /// Recomputes the queue from the shard states (after runs are added or cancelled).
    fn rebuild_queue(&mut self, now: Instant) {
        self.queues.clear();
        for r in 0..self.runs.len() {
            for i in 0..self.runs[r].shards.len() {
                if let ShardState::Pending { not_before } = self.runs[r].shards[i].state {
                    self.enqueue((r, i), not_before, now);
                }
            }
        }
    }

    /// Puts a pending shard in the queue: ready now, or when its backoff ends. Shards of
    /// cancelled runs are never queued.
    fn enqueue(&mut self, (r, i): At, not_before: Instant, now: Instant) {
        let run = &self.runs[r];
        if run.cancelled {
            return;
        }
        let planned = &run.shards[i].planned;
        let queue = self.queues.entry(run.pool_of(&planned.model).to_string()).or_default();
        if not_before <= now {
            queue.add_ready(&planned.model, (r, i), planned.examples as u64);
        } else {
            queue.delay(not_before, (r, i));
        }
    }

    /// Takes a shard out of the ready queue (it is leased or done).
    fn dequeue(&mut self, (r, i): At) {
        let run = &self.runs[r];
        let planned = &run.shards[i].planned;
        if let Some(queue) = self.queues.get_mut(run.pool_of(&planned.model)) {
            queue.remove_ready(&planned.model, (r, i), planned.examples as u64);
        }
    }

    /// Moves shards whose backoff has ended into the ready queue.
    fn promote(&mut self, now: Instant) {
        let due: Vec<(Instant, At)> = self.queues.values_mut().flat_map(|q| q.due(now)).collect();
        for (due, (r, i)) in due {
            let still_waiting = matches!(
                self.runs.get(r).and_then(|run| run.shards.get(i)).map(|s| &s.state),
                Some(ShardState::Pending { not_before }) if *not_before == due
            );
            if still_waiting {
                self.enqueue((r, i), due, now);
            }
        }
    }

    /// A shard's place by run and shard id.
    fn find(&self, run_id: &str, shard_id: &str) -> Option<At> {
        let r = self.runs.iter().position(|run| run.layout.run_id() == run_id)?;
        Some((r, *self.runs[r].index_of.get(shard_id)?))
    }

    /// Grants no new lease before `until`: a restarted coordinator waits a few heartbeats so
    /// workers still running shards of its predecessor re-adopt them instead of seeing them
    /// leased to someone else.
    pub fn hold_leases_until(&mut self, until: Instant) {
        self.hold_leases_until = Some(until);
    }

    /// Registers a worker of the default pool and returns its id.
    pub fn register_worker(&mut self, now: Instant) -> String {
        self.register_worker_serving(Serves::default(), now)
    }

    /// Registers a worker that runs what `serves` says and returns its id.
    pub fn register_worker_serving(&mut self, serves: Serves, now: Instant) -> String {
        let id = self.fresh_id("worker");
        self.workers.insert(id.clone(), WorkerEntry::new(serves, now));
        id
    }

    /// Returns expired leases to the queue (or fails their shards for good).
    pub fn expire(&mut self, now: Instant) {
        let expired: Vec<(String, (usize, usize))> = self
            .leases
            .iter()
            .filter(|(_, &(run, shard))| {
                matches!(self.runs[run].shards[shard].state, ShardState::Leased { expires, .. } if expires <= now)
            })
            .map(|(id, &at)| (id.clone(), at))
            .collect();
        for (lease_id, (run, shard)) in expired {
            self.leases.remove(&lease_id);
            self.lease_expirations += 1;
            instruments().lease_expirations.add(1, &[KeyValue::new("run", self.runs[run].layout.run_id().to_string())]);
            self.retry_or_fail(run, shard, "lease expired: the worker stopped sending heartbeats".into(), true, now);
        }
    }

    fn retry_or_fail(&mut self, run: usize, shard: usize, error: String, retryable: bool, now: Instant) -> bool {
        let entry = &mut self.runs[run];
        let timings = entry.timings;
        let cancelled = entry.cancelled;
        let s = &mut entry.shards[shard];
        s.last_error = Some(error.clone());
        s.progress = 0;
        s.tokens = 0;
        if retryable && s.attempts < timings.max_attempts && !cancelled {
            let not_before = now + backoff(&timings, s.attempts);
            s.state = ShardState::Pending { not_before };
            self.retries += 1;
            instruments().retries.add(1, &[KeyValue::new("run", entry.layout.run_id().to_string())]);
            self.enqueue((run, shard), not_before, now);
            true
        } else if cancelled {
            s.state = ShardState::Pending { not_before: now };
            false
        } else {
            s.state = ShardState::Failed;
            instruments().shard_failures.add(1, &[KeyValue::new("run", entry.layout.run_id().to_string())]);
            self.final_failures.push(FinalFailure {
                run_id: entry.layout.run_id().to_string(),
                shard_id: s.planned.shard_id.clone(),
                attempts: s.attempts,
                error,
            });
            false
        }
    }

    /// Shards that failed for good since the last call, for the caller to record.
    pub fn take_final_failures(&mut self) -> Vec<FinalFailure> {
        std::mem::take(&mut self.final_failures)
    }

    /// Stops leasing a run's shards; returns false for an unknown run.
    pub fn cancel(&mut self, run_id: &str) -> bool {
        let Some(r) = self.runs.iter().position(|run| run.layout.run_id() == run_id) else { return false };
        self.runs[r].cancelled = true;
        // Out of the ready queue; its delayed entries are dropped when they come due.
        for i in 0..self.runs[r].shards.len() {
            if matches!(self.runs[r].shards[i].state, ShardState::Pending { .. }) {
                self.dequeue((r, i));
            }
        }
        true
    }

    /// Whether there are runs and every one has ended.
    pub fn all_finished(&self) -> bool {
        !self.runs.is_empty() && self.runs.iter().all(|r| run_state(r) != RunState::Running)
    }

    /// The store URL of a run.
    pub fn store_url(&self, run_id: &str) -> Option<&str> {
        self.runs.iter().find(|r| r.layout.run_id() == run_id).map(|r| r.store_url.as_str())
    }

    /// Ids of the known runs.
    pub fn run_ids(&self) -> Vec<String> {
        self.runs.iter().map(|r| r.layout.run_id().to_string()).collect()
    }
}

impl RunEntry {
    /// The pool that runs `model`.
    fn pool_of(&self, model: &str) -> &str {
        self.pools.get(model).map_or(DEFAULT_POOL, String::as_str)
    }
}

#[cfg(test)]
mod tests;
