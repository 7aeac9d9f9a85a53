//! Every RPC of a coordinator with a token refuses callers without it or with another one, over
//! real loopback gRPC, and serves the caller that has it.

use std::time::Duration;

use codesweep_coordinator::service::{bind, serve, CoordinatorOptions, CoordinatorService};
use codesweep_proto::client::{connect, Client};
use codesweep_proto::{
    CancelRunRequest, CompleteShardRequest, FailShardRequest, GetRunRequest, HeartbeatRequest, LeaseShardRequest,
    RegisterWorkerRequest, SubmitRunRequest,
};
use tonic::Code;

const TOKEN: &str = "the-right-token";

/// The code each of the nine RPCs answers `client` with.
async fn codes(client: &mut Client) -> Vec<(&'static str, Code)> {
    let code = |r: Result<(), tonic::Status>| r.err().map_or(Code::Ok, |s| s.code());
    vec![
        ("RegisterWorker", code(client.register_worker(RegisterWorkerRequest::default()).await.map(drop))),
        ("LeaseShard", code(client.lease_shard(LeaseShardRequest::default()).await.map(drop))),
        ("Heartbeat", code(client.heartbeat(HeartbeatRequest::default()).await.map(drop))),
        ("CompleteShard", code(client.complete_shard(CompleteShardRequest::default()).await.map(drop))),
        ("FailShard", code(client.fail_shard(FailShardRequest::default()).await.map(drop))),
        ("SubmitRun", code(client.submit_run(SubmitRunRequest::default()).await.map(drop))),
        ("GetRun", code(client.get_run(GetRunRequest::default()).await.map(drop))),
        ("WatchRun", code(client.watch_run(GetRunRequest::default()).await.map(drop))),
        ("CancelRun", code(client.cancel_run(CancelRunRequest::default()).await.map(drop))),
    ]
}

#[tokio::test]
async fn every_rpc_needs_the_token() {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let service = CoordinatorService::new(CoordinatorOptions::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(service, listener, Some(TOKEN), None, async {
        let _ = stopped.await;
    }));

    for token in [None, Some("the-wrong-token"), Some("the-right-token-and-more")] {
        let mut client = connect(&address, token, None, Duration::from_secs(5)).await.unwrap();
        for (rpc, code) in codes(&mut client).await {
            assert_eq!(code, Code::Unauthenticated, "{rpc} with token {token:?}");
        }
    }
    // With the token every call reaches the service (whatever it then says of the empty request).
    let mut client = connect(&address, Some(TOKEN), None, Duration::from_secs(5)).await.unwrap();
    for (rpc, code) in codes(&mut client).await {
        assert_ne!(code, Code::Unauthenticated, "{rpc} refused the right token");
    }
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
