//! Connecting to a coordinator: one channel, the bearer token attached to every call.

use std::time::{Duration, Instant};

use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::auth::AttachToken;
use crate::coordinator_client::CoordinatorClient;

/// A coordinator client with the bearer token attached.
pub type Client = CoordinatorClient<InterceptedService<Channel, AttachToken>>;

/// Connects to the coordinator at `address` (e.g. `http://127.0.0.1:50051`), trying again
/// for up to `retry_for` while it is not up yet. The error says what to check.
pub async fn connect(address: &str, token: Option<&str>, retry_for: Duration) -> Result<Client, String> {
    let endpoint = Channel::from_shared(address.to_string()).map_err(|e| format!("bad coordinator address {address:?}: {e}"))?;
    let interceptor = AttachToken::new(token).map_err(|s| s.message().to_string())?;
    let deadline = Instant::now() + retry_for;
    loop {
        match endpoint.connect().await {
            Ok(channel) => return Ok(CoordinatorClient::with_interceptor(channel, interceptor)),
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("cannot reach the coordinator at {address}: {e}; is `codesweep coordinator` running there?"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
