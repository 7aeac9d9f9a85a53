//! A restarted coordinator rebuilds its state from the store: shards whose result objects
//! exist are done, shards with a final failure record stay failed, the rest are queued again.
//! The same flow runs on a local folder and on `s3://` against an S3-protocol server (s3s)
//! running in this test process.

use std::time::Duration;

use codesweep_coordinator::service::{CoordinatorOptions, CoordinatorService};
use codesweep_coordinator::spec::{SpecFormat, SweepSpec};
use codesweep_proto::coordinator_server::Coordinator;
use codesweep_proto::{LeaseShardRequest, RegisterWorkerRequest, RunState};
use codesweep_store::{RunLayout, RunStore};

fn spec(data: &std::path::Path, store: &str) -> SweepSpec {
    let text = format!(
        "[run]\nname = \"rec\"\nstore = \"{store}\"\nshard_size = 2\n\
         [[models]]\nname = \"m\"\npath = \"/m.gguf\"\n\
         [cceval]\ndata_dir = \"{}\"\nlanguages = [\"python\"]\nsettings = [\"in_file\"]\n",
        data.display()
    );
    SweepSpec::parse_with_env("rec.toml", &text, SpecFormat::Toml, false).unwrap()
}

#[tokio::test]
async fn a_restarted_coordinator_redoes_nothing_that_finished() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    restart_recovers_from(dir.path(), store_dir.to_str().unwrap()).await;
}

#[tokio::test]
async fn a_restarted_coordinator_recovers_from_s3() {
    let server = codesweep_test_support::s3_server::s3_server();
    let dir = tempfile::tempdir().unwrap();
    restart_recovers_from(dir.path(), &format!("s3://{}/recovery", codesweep_test_support::s3_server::BUCKET)).await;
    // The plan went through the server into its bucket, where DESIGN.md puts it.
    assert!(server.object_file("recovery/rec/plan.json").is_file());
    assert!(server.object_file("recovery/rec/inputs/m/cceval/python/in_file/0002.jsonl").is_file());
}

/// Plans a 3-shard run into the store at `store_url`, marks one shard done and one failed
/// there, and checks that a fresh coordinator recovering from the store agrees.
async fn restart_recovers_from(dir: &std::path::Path, store_url: &str) {
    let data = dir.join("data");
    std::fs::create_dir_all(data.join("python")).unwrap();
    let lines: Vec<String> = (0..6)
        .map(|i| {
            serde_json::json!({"prompt": format!("x{i} = "), "groundtruth": "1", "metadata": {"task_id": format!("project_cc_python/{i}")}})
                .to_string()
        })
        .collect();
    std::fs::write(data.join("python/line_completion.jsonl"), lines.join("\n")).unwrap();
    let spec = spec(&data, store_url);

    let first = CoordinatorService::new(CoordinatorOptions::default());
    let submitted = first.submit(&spec, false).await.unwrap();
    assert_eq!((submitted.shards, submitted.already_done), (3, 0));
    // Shard 0 finished (its result object exists); shard 1 failed for good.
    let store = RunStore::open(store_url).unwrap();
    let layout = RunLayout::new("rec");
    store.put_once(&layout.result("m/cceval/python/in_file/0000"), "{\"header\":{}}\n".into()).await.unwrap();
    store.put(&layout.failure("m/cceval/python/in_file/0001"), "{\"error\":\"boom\"}".into()).await.unwrap();
    drop(first);

    let second = CoordinatorService::new(CoordinatorOptions { heartbeat_interval: Duration::from_millis(100), exit_when_done: true, ..Default::default() });
    assert_eq!(second.recover(store.url()).await.unwrap(), vec!["rec".to_string()]);
    let status = second.run_status("rec").unwrap();
    assert_eq!((status.shards_done, status.shards_failed, status.shards_total), (1, 1, 3));
    assert_eq!(status.failures[0].error, "boom");
    let worker = second
        .register_worker(tonic::Request::new(RegisterWorkerRequest { name: "w".into(), device: "cpu".into(), ..Default::default() }))
        .await
        .unwrap()
        .into_inner()
        .worker_id;
    let lease = |loaded: &str| {
        tonic::Request::new(LeaseShardRequest { worker_id: worker.clone(), loaded_model: loaded.to_string(), ..Default::default() })
    };
    // For a few heartbeats after the restart nothing is leased: workers still running shards
    // of the first coordinator re-adopt them first.
    let held = second.lease_shard(lease("")).await.unwrap().into_inner();
    assert!(held.lease.is_none() && held.retry_after_ms >= 50, "leased during the adoption grace");
    tokio::time::sleep(Duration::from_millis(1400)).await;
    let only = second.lease_shard(lease("")).await.unwrap().into_inner().lease.expect("one shard left");
    assert_eq!(only.shard_id, "m/cceval/python/in_file/0002");
    assert!(second.lease_shard(lease("m")).await.unwrap().into_inner().lease.is_none());
    assert_eq!(second.run_status("rec").unwrap().state, RunState::Running as i32);

    // Resubmitting the spec (what `codesweep run` does) retries the failed shard, nothing else.
    let resumed = second.submit(&spec, true).await.unwrap();
    assert_eq!((resumed.shards, resumed.already_done), (3, 1));
    // A changed spec under the same run name is refused rather than mixed with old results.
    let mut changed = spec.clone();
    changed.run.shard_size = 3;
    let err = second.submit(&changed, false).await.unwrap_err();
    assert!(err.message().contains("different spec"), "{}", err.message());
}
