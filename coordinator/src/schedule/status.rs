//! Progress snapshots of a run (what `codesweep status` shows) and a run's overall state.

use std::time::Instant;

use codesweep_proto::{ModelProgress, PoolProgress, RunState, RunStatus, ShardFailure};

use super::{RunEntry, Schedule, ShardState, WORKER_SILENCE};

impl Schedule {
    /// A run's state alone; cheap while it runs (stops at its first unfinished shard), unlike
    /// [`Schedule::status`], which walks every shard.
    pub fn run_state(&self, run_id: &str) -> Option<RunState> {
        self.runs.iter().find(|r| r.layout.run_id() == run_id).map(run_state)
    }

    /// A snapshot of a run's progress.
    pub fn status(&self, run_id: &str, now: Instant) -> Option<RunStatus> {
        let run = self.runs.iter().find(|r| r.layout.run_id() == run_id)?;
        let count = |f: fn(&ShardState) -> bool| run.shards.iter().filter(|s| f(&s.state)).count() as u32;
        let examples_total: u64 = run.shards.iter().map(|s| s.planned.examples as u64).sum();
        let examples_done: u64 = run
            .shards
            .iter()
            .map(|s| match s.state {
                ShardState::Done => s.planned.examples as u64,
                ShardState::Leased { .. } => s.progress,
                _ => 0,
            })
            .sum();
        let elapsed = now.saturating_duration_since(run.added).as_secs_f64();
        let rate = if elapsed > 0.0 { examples_done.saturating_sub(run.done_when_added) as f64 / elapsed } else { 0.0 };
        let generated_tokens: u64 = run
            .shards
            .iter()
            .filter(|s| matches!(s.state, ShardState::Done | ShardState::Leased { .. }))
            .map(|s| s.tokens)
            .sum();
        let tokens_per_second = if elapsed > 0.0 { generated_tokens as f64 / elapsed } else { 0.0 };
        let failed_examples: u64 =
            run.shards.iter().filter(|s| s.state == ShardState::Failed).map(|s| s.planned.examples as u64).sum();
        let left = examples_total.saturating_sub(examples_done + failed_examples);
        let eta = if left == 0 { 0.0 } else if rate > 0.0 { left as f64 / rate } else { -1.0 };
        let (models, pools) = self.placement_progress(run, now);
        Some(RunStatus {
            run_id: run_id.to_string(),
            state: run_state(run) as i32,
            shards_total: run.shards.len() as u32,
            shards_done: count(|s| *s == ShardState::Done),
            shards_running: count(|s| matches!(s, ShardState::Leased { .. })),
            shards_failed: count(|s| *s == ShardState::Failed),
            examples_total,
            examples_done,
            examples_per_second: rate,
            eta_seconds: eta,
            failures: run
                .shards
                .iter()
                .filter(|s| s.state == ShardState::Failed)
                .map(|s| ShardFailure {
                    shard_id: s.planned.shard_id.clone(),
                    attempts: s.attempts,
                    error: s.last_error.clone().unwrap_or_default(),
                })
                .collect(),
            models,
            pools,
            store_url: run.store_url.clone(),
            retries: self.retries,
            lease_expirations: self.lease_expirations,
            generated_tokens,
            tokens_per_second,
        })
    }
}

impl Schedule {
    /// Shards per model and per pool, with the live workers on each.
    fn placement_progress(&self, run: &RunEntry, now: Instant) -> (Vec<ModelProgress>, Vec<PoolProgress>) {
        let live: Vec<_> =
            self.workers.values().filter(|w| now.saturating_duration_since(w.last_seen) < WORKER_SILENCE).collect();
        let mut models: Vec<ModelProgress> = Vec::new();
        for shard in &run.shards {
            let model = &shard.planned.model;
            let pool = run.pool_of(model);
            let m = match models.iter().position(|m| &m.model == model) {
                Some(i) => i,
                None => {
                    let workers =
                        live.iter().filter(|w| w.serves.pool == pool && &w.loaded_model == model).count() as u32;
                    models.push(ModelProgress { model: model.clone(), pool: pool.to_string(), workers, ..Default::default() });
                    models.len() - 1
                }
            };
            let m = &mut models[m];
            m.shards_total += 1;
            match shard.state {
                ShardState::Done => m.shards_done += 1,
                ShardState::Leased { .. } => m.shards_running += 1,
                ShardState::Failed => m.shards_failed += 1,
                ShardState::Pending { .. } => {}
            }
        }
        // A pool's figures are its models' sums.
        let mut pools: Vec<PoolProgress> = Vec::new();
        for m in &models {
            let p = match pools.iter().position(|p| p.pool == m.pool) {
                Some(i) => i,
                None => {
                    let workers = live.iter().filter(|w| w.serves.pool == m.pool).count() as u32;
                    pools.push(PoolProgress { pool: m.pool.clone(), workers, ..Default::default() });
                    pools.len() - 1
                }
            };
            let p = &mut pools[p];
            p.models.push(m.model.clone());
            p.shards_total += m.shards_total;
            p.shards_done += m.shards_done;
            p.shards_running += m.shards_running;
            p.shards_failed += m.shards_failed;
        }
        (models, pools)
    }
}

pub(super) fn run_state(run: &RunEntry) -> RunState {
    if run.cancelled {
        return RunState::Cancelled;
    }
    let mut failed = false;
    for shard in &run.shards {
        match shard.state {
            ShardState::Done => {}
            ShardState::Failed => failed = true,
            _ => return RunState::Running,
        }
    }
    if failed {
        RunState::FinishedWithFailures
    } else {
        RunState::Succeeded
    }
}
