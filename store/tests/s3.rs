//! `RunStore` over `s3://` against a real S3-protocol server (s3s + s3s-fs) running in this
//! test process, reached through object_store's AmazonS3 client configured from `AWS_*`.

use codesweep_store::{shard_id, RunLayout, RunStore, WriteOutcome};
use codesweep_test_support::s3_server::{s3_server, BUCKET};

fn open(prefix: &str) -> RunStore {
    s3_server();
    RunStore::open(&format!("s3://{BUCKET}/{prefix}")).unwrap()
}

#[tokio::test]
async fn objects_round_trip_through_the_server() {
    let server = s3_server();
    let store = open("basic");
    store.put("run/plan.json", "{\"shards\":[]}".into()).await.unwrap();
    store.put("run/report/report.md", "# old".into()).await.unwrap();
    store.put("run/report/report.md", "# new".into()).await.unwrap();

    assert_eq!(store.get_text("run/plan.json").await.unwrap().as_deref(), Some("{\"shards\":[]}"));
    assert_eq!(store.get_text("run/report/report.md").await.unwrap().as_deref(), Some("# new"));
    assert_eq!(store.get_text("run/missing.json").await.unwrap(), None);
    assert!(store.exists("run/plan.json").await.unwrap());
    assert!(!store.exists("run/missing.json").await.unwrap());
    assert_eq!(store.list("run").await.unwrap(), vec!["run/plan.json", "run/report/report.md"]);
    assert_eq!(store.list("run/report").await.unwrap(), vec!["run/report/report.md"]);
    assert!(store.list("other").await.unwrap().is_empty());
    // The objects are the server's files under bucket/prefix, not a client-side cache.
    assert_eq!(std::fs::read_to_string(server.object_file("basic/run/plan.json")).unwrap(), "{\"shards\":[]}");
    assert_eq!(store.url(), format!("s3://{BUCKET}/basic"));
}

#[tokio::test]
async fn results_are_created_once() {
    let server = s3_server();
    let store = open("once");
    let key = "run/shards/m/cceval/python/in_file/0000.jsonl";
    assert_eq!(store.put_once(key, "first".into()).await.unwrap(), WriteOutcome::Created);
    // object_store sends `If-None-Match: *`; s3s-fs answers 412 for an existing object.
    assert_eq!(store.put_once(key, "second".into()).await.unwrap(), WriteOutcome::AlreadyExists);
    assert_eq!(store.get_text(key).await.unwrap().as_deref(), Some("first"));
    assert_eq!(std::fs::read_to_string(server.object_file(&format!("once/{key}"))).unwrap(), "first");
    // A different key is still free.
    let other = "run/shards/m/cceval/python/in_file/0001.jsonl";
    assert_eq!(store.put_once(other, "x".into()).await.unwrap(), WriteOutcome::Created);
}

#[tokio::test]
async fn a_run_keeps_its_layout() {
    let server = s3_server();
    let store = open("layout/runs");
    let layout = RunLayout::new("r1");
    let done = shard_id("qwen-0.5b", "cceval", "python", "rg1_bm25", 0);
    let failed = shard_id("qwen-0.5b", "cceval", "python", "rg1_bm25", 1);
    store.put(&layout.spec(), "{}".into()).await.unwrap();
    store.put(&layout.plan(), "{}".into()).await.unwrap();
    for id in [&done, &failed] {
        store.put(&layout.input(id), "{\"header\":{}}\n".into()).await.unwrap();
    }
    assert_eq!(store.put_once(&layout.result(&done), "{}\n".into()).await.unwrap(), WriteOutcome::Created);
    store.put(&layout.failure(&failed), "{\"error\":\"boom\"}".into()).await.unwrap();
    store.put(&layout.report("report.md"), "# r1".into()).await.unwrap();

    let expected = [
        "r1/failures/qwen-0.5b/cceval/python/rg1_bm25/0001.json",
        "r1/inputs/qwen-0.5b/cceval/python/rg1_bm25/0000.jsonl",
        "r1/inputs/qwen-0.5b/cceval/python/rg1_bm25/0001.jsonl",
        "r1/plan.json",
        "r1/report/report.md",
        "r1/shards/qwen-0.5b/cceval/python/rg1_bm25/0000.jsonl",
        "r1/spec.json",
    ];
    assert_eq!(store.list("").await.unwrap(), expected);
    for key in expected {
        assert!(server.object_file(&format!("layout/runs/{key}")).is_file(), "{key} not stored where DESIGN.md says");
    }
    let results = store.list(&layout.results_prefix()).await.unwrap();
    let done_ids: Vec<_> = results.iter().filter_map(|k| layout.shard_of_result(k)).collect();
    assert_eq!(done_ids, vec![done]);
}

#[tokio::test]
async fn models_given_as_s3_urls_are_downloaded() {
    let store = open("models");
    store.put("tiny.gguf", "GGUF".into()).await.unwrap();
    store.put("hf/config.json", "{}".into()).await.unwrap();
    store.put("hf/sub/x.safetensors", "xx".into()).await.unwrap();
    let cache = tempfile::tempdir().unwrap();

    let file = RunStore::download_to(&format!("s3://{BUCKET}/models/tiny.gguf"), cache.path(), None).await.unwrap();
    assert_eq!(file, cache.path().join("tiny.gguf"));
    assert_eq!(std::fs::read(&file).unwrap(), b"GGUF");
    let folder =
        RunStore::download_to(&format!("s3://{BUCKET}/models/hf"), &cache.path().join("hf"), None).await.unwrap();
    assert_eq!(std::fs::read(folder.join("config.json")).unwrap(), b"{}");
    assert_eq!(std::fs::read(folder.join("sub/x.safetensors")).unwrap(), b"xx");
}
