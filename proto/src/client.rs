//! Connecting to a coordinator: one channel, the bearer token attached to every call.

use std::time::{Duration, Instant};

use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::auth::AttachToken;
use crate::tls::ClientTls;
use crate::coordinator_client::CoordinatorClient;

/// A coordinator client with the bearer token attached.
pub type Client = CoordinatorClient<InterceptedService<Channel, AttachToken>>;

/// A coordinator address with its TLS settings and token checked, ready to connect.
pub struct Target {
    address: String,
    secure: bool,
    endpoint: tonic::transport::Endpoint,
    interceptor: AttachToken,
}

impl Target {
    /// Checks the address (e.g. `http://127.0.0.1:50051`, or `https://…` for a coordinator
    /// serving TLS), the TLS settings and the token, without connecting. `tls` says which CA
    /// to trust; an `https://` address without it trusts the public web roots.
    pub fn new(address: &str, token: Option<&str>, tls: Option<&ClientTls>) -> Result<Self, String> {
        let mut endpoint =
            Channel::from_shared(address.to_string()).map_err(|e| format!("bad coordinator address {address:?}: {e}"))?;
        let secure = address.starts_with("https://");
        if tls.is_some() && !secure {
            return Err(format!("TLS settings were given but the coordinator address {address:?} is not https://"));
        }
        if secure {
            let config = tls.cloned().unwrap_or_default().config();
            endpoint = endpoint.tls_config(config).map_err(|e| format!("bad TLS settings for {address}: {e}"))?;
        }
        let interceptor = AttachToken::new(token).map_err(|s| s.message().to_string())?;
        Ok(Self { address: address.to_string(), secure, endpoint, interceptor })
    }

    /// Connects, trying again for up to `retry_for` while the coordinator is not up yet. The
    /// error says what to check.
    pub async fn connect(&self, retry_for: Duration) -> Result<Client, String> {
        let deadline = Instant::now() + retry_for;
        loop {
            match self.endpoint.connect().await {
                Ok(channel) => return Ok(CoordinatorClient::with_interceptor(channel, self.interceptor.clone())),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "cannot reach the coordinator at {}: {}; is `codesweep coordinator` running there{}?",
                        self.address,
                        error_chain(&e),
                        if self.secure { " with TLS, and does the CA (--tls-ca) sign its certificate" } else { "" }
                    ))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// Connects to the coordinator at `address`, trying again for up to `retry_for` while it is
/// not up yet (see [`Target`]).
pub async fn connect(
    address: &str,
    token: Option<&str>,
    tls: Option<&ClientTls>,
    retry_for: Duration,
) -> Result<Client, String> {
    Target::new(address, token, tls)?.connect(retry_for).await
}

/// An error with its causes, `outer: inner: …` (tonic's own text is just "transport error").
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
