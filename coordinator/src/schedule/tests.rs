use super::*;
use codesweep_store::records::Benchmark;

fn plan(run_id: &str, models: &[&str], shards_per_model: usize) -> Plan {
    let mut shards = Vec::new();
    for model in models {
        for index in 0..shards_per_model {
            shards.push(PlannedShard {
                shard_id: codesweep_store::shard_id(model, "cceval", "python", "in_file", index),
                model: model.to_string(),
                benchmark: Benchmark::Cceval,
                language: "python".into(),
                setting: "in_file".into(),
                index,
                examples: 10,
            });
        }
    }
    Plan { run_id: run_id.into(), shards }
}

fn timings() -> Timings {
    Timings { lease_ttl: Duration::from_secs(10), max_attempts: 2, retry_backoff: Duration::from_secs(1) }
}

fn schedule_with(plan: &Plan, now: Instant) -> Schedule {
    let mut schedule = Schedule::new();
    schedule.add_run(plan, "memory://t", timings(), &HashMap::new(), &HashSet::new(), &HashMap::new(), now);
    schedule
}

#[test]
fn shards_already_in_the_store_are_not_leased_again() {
    let now = Instant::now();
    let plan = plan("r", &["a"], 3);
    let done: HashSet<String> = [plan.shards[0].shard_id.clone(), plan.shards[2].shard_id.clone()].into();
    let mut schedule = Schedule::new();
    schedule.add_run(&plan, "memory://t", timings(), &HashMap::new(), &done, &HashMap::new(), now);
    let w = schedule.register_worker(now);
    let grant = schedule.lease(&w, "", now).unwrap();
    assert_eq!(grant.shard_id, plan.shards[1].shard_id);
    assert_eq!(grant.result_key, format!("r/shards/{}.jsonl", plan.shards[1].shard_id));
    assert!(schedule.lease(&w, "", now).is_none());
    assert!(schedule.mark_done("r", &grant.shard_id, 0));
    let status = schedule.status("r", now).unwrap();
    assert_eq!((status.shards_done, status.state), (3, RunState::Succeeded as i32));
}

#[test]
fn an_expired_lease_returns_to_the_queue_then_fails_for_good() {
    let t0 = Instant::now();
    let plan = plan("r", &["a"], 1);
    let mut schedule = schedule_with(&plan, t0);
    let (w1, w2) = (schedule.register_worker(t0), schedule.register_worker(t0));
    let first = schedule.lease(&w1, "a", t0).unwrap();
    // Heartbeats keep it alive past the original TTL.
    assert!(schedule.heartbeat(&w1, &first.lease_id, None, 4, 30, t0 + Duration::from_secs(8)).valid);
    assert!(schedule.lease(&w2, "a", t0 + Duration::from_secs(15)).is_none());
    assert_eq!(schedule.status("r", t0 + Duration::from_secs(15)).unwrap().examples_done, 4);
    // Silence: expired at 18 s, retried after the 1 s backoff.
    let t1 = t0 + Duration::from_secs(19);
    assert!(schedule.lease(&w2, "a", t1).is_none(), "backoff not honoured");
    let second = schedule.lease(&w2, "a", t1 + Duration::from_secs(1)).unwrap();
    assert_eq!(second.attempt, 2);
    assert!(!schedule.heartbeat(&w1, &first.lease_id, Some(("r", &first.shard_id)), 5, 40, t1).valid, "stale lease accepted");
    assert_eq!(schedule.lease_expirations, 1);
    // Second expiry exhausts max_attempts = 2.
    let t2 = t1 + Duration::from_secs(30);
    schedule.expire(t2);
    let status = schedule.status("r", t2).unwrap();
    assert_eq!(status.state, RunState::FinishedWithFailures as i32);
    assert_eq!(status.failures.len(), 1);
    assert!(status.failures[0].error.contains("lease expired"));
    let failures = schedule.take_final_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].attempts, 2);
}

#[test]
fn failures_back_off_exponentially_and_fatal_ones_are_not_retried() {
    let t0 = Instant::now();
    let plan = plan("r", &["a"], 2);
    let mut schedule = Schedule::new();
    let timings = Timings { max_attempts: 3, ..timings() };
    schedule.add_run(&plan, "memory://t", timings, &HashMap::new(), &HashSet::new(), &HashMap::new(), t0);
    let w = schedule.register_worker(t0);
    let g = schedule.lease(&w, "a", t0).unwrap();
    assert!(schedule.fail(&w, &g.lease_id, "oom".into(), true, t0));
    let other = schedule.lease(&w, "a", t0).unwrap();
    assert_eq!(other.shard_id, plan.shards[1].shard_id, "the failed shard must wait for its backoff");
    assert!(!schedule.fail(&w, &other.lease_id, "bad input".into(), false, t0));
    let g = schedule.lease(&w, "a", t0 + Duration::from_secs(1)).unwrap();
    assert_eq!((g.shard_id.as_str(), g.attempt), (plan.shards[0].shard_id.as_str(), 2));
    assert!(schedule.fail(&w, &g.lease_id, "oom".into(), true, t0 + Duration::from_secs(1)));
    // Second retry waits 2 s.
    assert!(schedule.lease(&w, "a", t0 + Duration::from_millis(2900)).is_none());
    assert!(schedule.lease(&w, "a", t0 + Duration::from_secs(3)).is_some());
    assert_eq!(schedule.retries, 2);
}

#[test]
fn workers_keep_their_model_and_spread_over_the_others() {
    let now = Instant::now();
    let plan = plan("r", &["small", "medium", "large"], 4);
    let mut schedule = schedule_with(&plan, now);
    let workers: Vec<String> = (0..3).map(|_| schedule.register_worker(now)).collect();
    let models: Vec<String> = workers.iter().map(|w| schedule.lease(w, "", now).unwrap().model).collect();
    let distinct: HashSet<&String> = models.iter().collect();
    assert_eq!(distinct.len(), 3, "three idle workers should take three different models: {models:?}");
    // A worker with a model loaded stays on it while its shards remain.
    for _ in 0..3 {
        assert_eq!(schedule.lease(&workers[0], &models[0], now).unwrap().model, models[0]);
    }
    // Its model is exhausted (all leased): it moves to another model.
    let next = schedule.lease(&workers[0], &models[0], now).unwrap();
    assert_ne!(next.model, models[0]);
}

#[test]
fn cancelled_runs_stop_leasing_and_tell_heartbeats() {
    let now = Instant::now();
    let plan = plan("r", &["a"], 2);
    let mut schedule = schedule_with(&plan, now);
    let w = schedule.register_worker(now);
    let g = schedule.lease(&w, "a", now).unwrap();
    assert!(schedule.cancel("r"));
    assert!(schedule.lease(&w, "a", now).is_none());
    assert_eq!(schedule.heartbeat(&w, &g.lease_id, None, 1, 8, now), HeartbeatAnswer { valid: true, cancel: true });
    assert_eq!(schedule.status("r", now).unwrap().state, RunState::Cancelled as i32);
    assert!(schedule.all_finished());
    assert!(!schedule.cancel("nope"));
}

#[test]
fn a_released_shard_is_leased_again_without_losing_an_attempt() {
    let now = Instant::now();
    let plan = plan("r", &["a"], 1);
    let mut schedule = schedule_with(&plan, now);
    let (w1, w2) = (schedule.register_worker(now), schedule.register_worker(now));
    let g = schedule.lease(&w1, "a", now).unwrap();
    assert!(!schedule.release(&w2, &g.lease_id, now), "only the holder may release");
    assert!(schedule.release(&w1, &g.lease_id, now));
    let again = schedule.lease(&w2, "a", now).unwrap();
    assert_eq!((again.shard_id, again.attempt), (g.shard_id, 1));
    assert_eq!(schedule.retries, 0);
}

#[test]
fn a_restarted_coordinator_adopts_leases_granted_before_the_restart() {
    let now = Instant::now();
    let plan = plan("r", &["a", "b"], 2);
    let mut before = schedule_with(&plan, now);
    let w = before.register_worker(now);
    let old = before.lease(&w, "a", now).unwrap();
    // The coordinator restarts: a new schedule rebuilt from the store, the shard queued again.
    let mut after = schedule_with(&plan, now);
    let target = Some(("r", old.shard_id.as_str()));
    assert!(after.heartbeat(&w, &old.lease_id, target, 3, 0, now).valid, "the running shard was not adopted");
    assert_eq!(after.status("r", now).unwrap().shards_running, 1);
    // Nobody else gets it, and the adopted lease completes like any other.
    let other = after.register_worker(now);
    let next = after.lease(&other, "a", now).unwrap();
    assert_ne!(next.shard_id, old.shard_id);
    assert_eq!(after.lease_target(&w, &old.lease_id), Some(("r".to_string(), old.shard_id.clone())));
    // A second worker claiming the same foreign lease, or a shard that is leased already, is refused.
    assert!(!after.heartbeat(&other, &old.lease_id, target, 1, 0, now).valid);
    assert!(!after.heartbeat(&w, "lease-feedbeef-9", Some(("r", next.shard_id.as_str())), 1, 0, now).valid);
    // Our own expired lease is never adopted back (the stale-lease rule above).
    let own = after.lease(&w, "b", now).unwrap();
    let later = now + Duration::from_secs(60);
    after.expire(later);
    assert!(!after.heartbeat(&w, &own.lease_id, Some(("r", own.shard_id.as_str())), 1, 0, later).valid);
}

#[test]
fn queued_shards_leave_the_queue_when_done_elsewhere_or_cancelled() {
    let t0 = Instant::now();
    let plan = plan("r", &["a"], 3);
    let mut schedule = schedule_with(&plan, t0);
    let w = schedule.register_worker(t0);
    // A result that appears for a queued shard (a worker of a previous coordinator) takes it
    // out of the queue.
    assert!(schedule.mark_done("r", &plan.shards[0].shard_id, 0));
    let g = schedule.lease(&w, "a", t0).unwrap();
    assert_eq!(g.shard_id, plan.shards[1].shard_id);
    // A shard waiting out its backoff when the run is cancelled never comes back.
    assert!(schedule.fail(&w, &g.lease_id, "oom".into(), true, t0));
    assert!(schedule.cancel("r"));
    let later = t0 + Duration::from_secs(30);
    assert!(schedule.lease(&w, "a", later).is_none());
    assert_eq!(schedule.status("r", later).unwrap().state, RunState::Cancelled as i32);
}

#[test]
fn tokens_per_second_count_running_heartbeats_and_finished_totals_only() {
    let t0 = Instant::now();
    let plan = plan("r", &["a"], 2);
    let mut schedule = schedule_with(&plan, t0);
    let (w1, w2) = (schedule.register_worker(t0), schedule.register_worker(t0));
    let (g1, g2) = (schedule.lease(&w1, "a", t0).unwrap(), schedule.lease(&w2, "a", t0).unwrap());
    let t1 = t0 + Duration::from_secs(2);
    assert!(schedule.heartbeat(&w1, &g1.lease_id, None, 3, 50, t1).valid);
    assert!(schedule.heartbeat(&w2, &g2.lease_id, None, 1, 20, t1).valid);
    let status = schedule.status("r", t1).unwrap();
    assert_eq!((status.generated_tokens, status.tokens_per_second), (70, 35.0));
    // The finished shard counts its reported total; the failed attempt counts nothing.
    assert!(schedule.mark_done("r", &g1.shard_id, 90));
    assert!(schedule.fail(&w2, &g2.lease_id, "boom".into(), true, t1));
    let t2 = t0 + Duration::from_secs(4);
    let status = schedule.status("r", t2).unwrap();
    assert_eq!((status.generated_tokens, status.tokens_per_second), (90, 22.5));
}

#[test]
fn workers_lease_only_their_pools_models_and_status_counts_per_pool() {
    let t0 = Instant::now();
    let plan = plan("r", &["small", "big"], 2);
    let pools: HashMap<String, String> = [("big".to_string(), "vllm".to_string())].into();
    let mut schedule = Schedule::new();
    schedule.add_run(&plan, "memory://t", timings(), &pools, &HashSet::new(), &HashMap::new(), t0);
    let cpu = schedule.register_worker(t0);
    let gpu = schedule.register_worker_serving(Serves::announced("vllm", &[]), t0);
    let picky = schedule.register_worker_serving(Serves::announced("", &["other".into()]), t0);
    // The model filter leaves `picky` nothing, and it is told to poll slowly, not spin.
    assert!(schedule.lease(&picky, "", t0).is_none());
    assert!(schedule.retry_after(&picky, t0) >= Duration::from_millis(500));
    let mut by_worker: HashMap<&str, Vec<String>> = HashMap::new();
    for _ in 0..2 {
        for worker in [&cpu, &gpu] {
            let grant = schedule.lease(worker, "", t0).unwrap();
            by_worker.entry(worker.as_str()).or_default().push(grant.model.clone());
        }
    }
    assert_eq!(by_worker[cpu.as_str()], ["small", "small"]);
    assert_eq!(by_worker[gpu.as_str()], ["big", "big"]);
    assert!(schedule.lease(&cpu, "small", t0).is_none() && schedule.lease(&gpu, "big", t0).is_none());
    let status = schedule.status("r", t0).unwrap();
    let pools: Vec<(&str, Vec<String>, u32, u32)> =
        status.pools.iter().map(|p| (p.pool.as_str(), p.models.clone(), p.shards_running, p.workers)).collect();
    assert_eq!(pools, vec![("default", vec!["small".to_string()], 2, 2), ("vllm", vec!["big".to_string()], 2, 1)]);
    let models: Vec<(&str, &str, u32)> =
        status.models.iter().map(|m| (m.model.as_str(), m.pool.as_str(), m.shards_running)).collect();
    assert_eq!(models, vec![("small", "default", 2), ("big", "vllm", 2)]);
}

#[test]
fn a_restarted_coordinator_learns_a_workers_pool_from_its_lease_request() {
    let t0 = Instant::now();
    let plan = plan("r", &["big"], 1);
    let pools: HashMap<String, String> = [("big".to_string(), "vllm".to_string())].into();
    let mut schedule = Schedule::new();
    schedule.add_run(&plan, "memory://t", timings(), &pools, &HashSet::new(), &HashMap::new(), t0);
    // A worker id this coordinator never registered, announcing the default pool: nothing.
    assert!(schedule.lease_as("worker-old-1", Some(&Serves::default()), "", t0).is_none());
    let grant = schedule.lease_as("worker-old-2", Some(&Serves::announced("vllm", &[])), "", t0).unwrap();
    assert_eq!(grant.model, "big");
}
