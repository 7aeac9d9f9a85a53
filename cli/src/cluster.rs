//! The distributed commands' shared flags: the coordinator's address, token and TLS, and the
//! runtime they run in.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

pub use codesweep_proto::client::Client;
use codesweep_proto::tls::ClientTls;

/// Flags naming the coordinator and its token.
#[derive(clap::Args, Clone)]
pub struct CoordinatorFlags {
    /// The coordinator's address.
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    pub coordinator: String,
    /// Environment variable holding the bearer token (the token itself never goes on the
    /// command line or into logs).
    #[arg(long, default_value = "CODESWEEP_TOKEN")]
    pub token_env: String,
    /// PEM CA bundle to check an `https://` coordinator's certificate with (default: the public
    /// web roots).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Name to check the coordinator's certificate against, when it differs from the address's
    /// host (e.g. connecting by IP to a certificate issued for a service name).
    #[arg(long)]
    pub tls_domain: Option<String>,
}

impl CoordinatorFlags {
    /// The token, if the variable is set and not empty.
    pub fn token(&self) -> Option<String> {
        read_token(&self.token_env)
    }

    /// The TLS settings the flags ask for (None when there are none).
    pub fn tls(&self) -> Result<Option<ClientTls>> {
        if self.tls_ca.is_none() && self.tls_domain.is_none() {
            return Ok(None);
        }
        let mut tls = ClientTls::default();
        if let Some(ca) = &self.tls_ca {
            tls = tls.with_ca_file(ca)?;
        }
        if let Some(domain) = &self.tls_domain {
            tls = tls.with_domain(domain.clone());
        }
        Ok(Some(tls))
    }

    /// Connects to the coordinator.
    pub async fn connect(&self) -> Result<Client> {
        let tls = self.tls()?;
        codesweep_proto::client::connect(&self.coordinator, self.token().as_deref(), tls.as_ref(), Duration::ZERO)
            .await
            .map_err(anyhow::Error::msg)
    }
}

/// The token in environment variable `name`, if set and not empty.
pub fn read_token(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|t| !t.is_empty())
}

/// A multi-threaded tokio runtime.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}
