//! A lease's life: granting a shard to a worker, renewing it by heartbeat, adopting one a
//! restarted coordinator's predecessor granted, and ending it (done, failed or released).

use std::time::{Duration, Instant};

use crate::pools::Serves;

use super::queue::At;
use super::{Grant, HeartbeatAnswer, Schedule, ShardState, WorkerEntry, WORKER_SILENCE};

impl Schedule {
    /// Whether `lease_id` was issued by another coordinator process (one that was restarted).
    fn is_foreign_lease(&self, lease_id: &str) -> bool {
        let ours = lease_id
            .strip_prefix("lease-")
            .and_then(|rest| rest.strip_prefix(self.instance.as_str()))
            .is_some_and(|rest| rest.starts_with('-'));
        !ours
    }

    /// The next shard for `worker_id` (as registered), which has `loaded_model` loaded ("" for
    /// none); `None` when nothing it can run is ready.
    pub fn lease(&mut self, worker_id: &str, loaded_model: &str, now: Instant) -> Option<Grant> {
        self.lease_as(worker_id, None, loaded_model, now)
    }

    /// [`Schedule::lease`] for a worker that says what it `serves` with each request, so a
    /// restarted coordinator, which registers unknown workers on the fly, keeps their pools.
    pub fn lease_as(&mut self, worker_id: &str, serves: Option<&Serves>, loaded_model: &str, now: Instant) -> Option<Grant> {
        self.expire(now);
        let worker = self
            .workers
            .entry(worker_id.to_string())
            .or_insert_with(|| WorkerEntry::new(serves.cloned().unwrap_or_default(), now));
        if let Some(serves) = serves {
            worker.serves.clone_from(serves);
        }
        worker.loaded_model = loaded_model.to_string();
        worker.last_seen = now;
        if self.hold_leases_until.is_some_and(|until| now < until) {
            return None;
        }
        self.promote(now);
        let serves = &self.workers[worker_id].serves;
        let queue = self.queues.get(&serves.pool)?;
        let alive = |w: &WorkerEntry| now.saturating_duration_since(w.last_seen) < WORKER_SILENCE;
        let first_of_loaded = Some(loaded_model).filter(|m| serves.allows(m)).and_then(|m| queue.first(m));
        let chosen = match first_of_loaded {
            Some(at) => at,
            None => {
                let workers_on = |model: &str| {
                    self.workers
                        .iter()
                        .filter(|(id, w)| {
                            id.as_str() != worker_id && w.serves.pool == serves.pool && w.loaded_model == model && alive(w)
                        })
                        .count() as u64
                };
                // Most waiting examples per worker already on the model; ties go to plan order.
                let candidates = queue.models().into_iter().filter(|(model, _, _)| serves.allows(model));
                let best = candidates.fold(None::<(At, u64, u64)>, |best, (model, at, work)| {
                    let helpers = workers_on(model) + 1;
                    match best {
                        Some((_, w, h)) if work * h <= w * helpers => best,
                        _ => Some((at, work, helpers)),
                    }
                })?;
                best.0
            }
        };
        self.dequeue(chosen);
        let lease_id = self.fresh_id("lease");
        let (r, i) = chosen;
        let run = &mut self.runs[r];
        let ttl = run.timings.lease_ttl;
        let shard = &mut run.shards[i];
        shard.attempts += 1;
        shard.state = ShardState::Leased { lease_id: lease_id.clone(), worker_id: worker_id.to_string(), expires: now + ttl };
        shard.progress = 0;
        shard.tokens = 0;
        self.leases.insert(lease_id.clone(), (r, i));
        Some(Grant {
            lease_id,
            run_id: run.layout.run_id().to_string(),
            shard_id: shard.planned.shard_id.clone(),
            store_url: run.store_url.clone(),
            input_key: run.layout.input(&shard.planned.shard_id),
            result_key: run.layout.result(&shard.planned.shard_id),
            attempt: shard.attempts,
            model: shard.planned.model.clone(),
        })
    }

    /// How long a worker that got nothing should wait before asking again: until the next
    /// retry of its pool comes due, or a short poll when its pool has nothing scheduled.
    pub fn retry_after(&self, worker_id: &str, now: Instant) -> Duration {
        if let Some(until) = self.hold_leases_until.filter(|until| now < *until) {
            return until.saturating_duration_since(now).clamp(Duration::from_millis(50), Duration::from_secs(2));
        }
        let idle = Duration::from_millis(500);
        let serves = self.workers.get(worker_id).map(|w| &w.serves);
        let wait = match serves.and_then(|serves| Some((serves, self.queues.get(&serves.pool)?))) {
            Some((serves, queue)) if queue.has_ready(|model| serves.allows(model)) => Duration::ZERO,
            Some((_, queue)) => queue.next_due().map_or(idle, |due| due.saturating_duration_since(now)),
            None => idle,
        };
        wait.clamp(Duration::from_millis(50), Duration::from_secs(2))
    }

    fn leased(&mut self, lease_id: &str, worker_id: &str) -> Option<(usize, usize)> {
        let &(r, i) = self.leases.get(lease_id)?;
        match &self.runs[r].shards[i].state {
            ShardState::Leased { lease_id: l, worker_id: w, .. } if l == lease_id && w == worker_id => Some((r, i)),
            _ => None,
        }
    }

    /// Renews a lease and records progress (examples done, tokens generated so far). `shard`
    /// (run id, shard id) lets a restarted coordinator adopt a lease its predecessor granted:
    /// when `lease_id` is not one of ours and the shard is waiting in the queue, the worker keeps
    /// it instead of starting over elsewhere.
    pub fn heartbeat(
        &mut self,
        worker_id: &str,
        lease_id: &str,
        shard: Option<(&str, &str)>,
        examples_done: u64,
        generated_tokens: u64,
        now: Instant,
    ) -> HeartbeatAnswer {
        self.expire(now);
        if let Some(worker) = self.workers.get_mut(worker_id) {
            worker.last_seen = now;
        }
        if let Some((run_id, shard_id)) = shard.filter(|_| self.is_foreign_lease(lease_id)) {
            self.adopt(worker_id, lease_id, run_id, shard_id, now);
        }
        let Some((r, i)) = self.leased(lease_id, worker_id) else {
            return HeartbeatAnswer { valid: false, cancel: false };
        };
        let run = &mut self.runs[r];
        let ttl = run.timings.lease_ttl;
        let cancel = run.cancelled;
        let shard = &mut run.shards[i];
        shard.progress = examples_done.min(shard.planned.examples as u64);
        shard.tokens = generated_tokens;
        if let ShardState::Leased { expires, .. } = &mut shard.state {
            *expires = now + ttl;
        }
        HeartbeatAnswer { valid: true, cancel }
    }

    /// Takes over a lease granted before a restart if its shard is still queued.
    fn adopt(&mut self, worker_id: &str, lease_id: &str, run_id: &str, shard_id: &str, now: Instant) -> bool {
        if self.leases.contains_key(lease_id) {
            return false;
        }
        let Some((r, i)) = self.find(run_id, shard_id).filter(|&(r, _)| !self.runs[r].cancelled) else {
            return false;
        };
        if !matches!(self.runs[r].shards[i].state, ShardState::Pending { .. }) {
            return false;
        }
        self.dequeue((r, i));
        let ttl = self.runs[r].timings.lease_ttl;
        let shard = &mut self.runs[r].shards[i];
        shard.attempts += 1;
        shard.state = ShardState::Leased { lease_id: lease_id.to_string(), worker_id: worker_id.to_string(), expires: now + ttl };
        self.leases.insert(lease_id.to_string(), (r, i));
        self.workers
            .entry(worker_id.to_string())
            .or_insert_with(|| WorkerEntry::new(Serves::default(), now))
            .loaded_model
            .clone_from(&self.runs[r].shards[i].planned.model);
        true
    }

    /// The run and shard a lease is for, if the lease is still `worker_id`'s.
    pub fn lease_target(&mut self, worker_id: &str, lease_id: &str) -> Option<(String, String)> {
        let (r, i) = self.leased(lease_id, worker_id)?;
        Some((self.runs[r].layout.run_id().to_string(), self.runs[r].shards[i].planned.shard_id.clone()))
    }

    /// Marks a shard done because its result object exists (whoever wrote it), with the tokens
    /// its worker reports it generated.
    pub fn mark_done(&mut self, run_id: &str, shard_id: &str, generated_tokens: u64) -> bool {
        let Some((r, i)) = self.find(run_id, shard_id) else { return false };
        match &self.runs[r].shards[i].state {
            ShardState::Leased { lease_id, .. } => {
                self.leases.remove(lease_id);
            }
            ShardState::Pending { .. } => self.dequeue((r, i)),
            ShardState::Done | ShardState::Failed => {}
        }
        let shard = &mut self.runs[r].shards[i];
        shard.state = ShardState::Done;
        shard.progress = 0;
        shard.tokens = generated_tokens;
        true
    }

    /// Records a failed attempt; returns whether the shard will be retried.
    pub fn fail(&mut self, worker_id: &str, lease_id: &str, error: String, retryable: bool, now: Instant) -> bool {
        let Some((r, i)) = self.leased(lease_id, worker_id) else { return false };
        self.leases.remove(lease_id);
        self.retry_or_fail(r, i, error, retryable, now)
    }

    /// Returns a leased shard to the queue without counting the attempt (a worker shutting
    /// down); returns false for a lease that is not `worker_id`'s.
    pub fn release(&mut self, worker_id: &str, lease_id: &str, now: Instant) -> bool {
        let Some((r, i)) = self.leased(lease_id, worker_id) else { return false };
        self.leases.remove(lease_id);
        let shard = &mut self.runs[r].shards[i];
        shard.attempts = shard.attempts.saturating_sub(1);
        shard.progress = 0;
        shard.tokens = 0;
        shard.state = ShardState::Pending { not_before: now };
        self.enqueue((r, i), now, now);
        true
    }
}
