//! Optional TLS (rustls with the ring provider) for the coordinator's gRPC port and its clients.
//!
//! The server presents a PEM certificate chain and key; clients trust a PEM CA bundle given to
//! them, or the public web roots when none is given (a coordinator behind a public certificate).

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// What went wrong setting up TLS; the message names the file and what to check.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read the TLS {what} {}: {source}", path.display())]
    Read {
        /// Which file: "certificate", "key" or "CA bundle".
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A PEM file holds no PEM block.
    #[error("the TLS {what} {} holds no PEM block (expected `-----BEGIN …-----`)", path.display())]
    NotPem {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
}

fn read_pem(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read { what, path: path.to_path_buf(), source })?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(TlsError::NotPem { what, path: path.to_path_buf() });
    }
    Ok(bytes)
}

/// Makes ring rustls' process-wide crypto provider (once; later calls are no-ops), so TLS works
/// even when another dependency enables a second provider.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The coordinator's certificate chain and private key (PEM).
#[derive(Debug, Clone)]
pub struct ServerTls {
    identity: Identity,
}

impl ServerTls {
    /// Reads `cert` (the chain, leaf first) and `key` (PKCS#8, PKCS#1 or SEC1).
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let identity = Identity::from_pem(read_pem("certificate", cert)?, read_pem("key", key)?);
        Ok(Self { identity })
    }

    /// The tonic server configuration.
    pub fn config(&self) -> ServerTlsConfig {
        install_crypto_provider();
        ServerTlsConfig::new().identity(self.identity.clone())
    }
}

/// How a client checks the coordinator's certificate.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    ca_pem: Option<Vec<u8>>,
    domain: Option<String>,
}

impl ClientTls {
    /// Trust the certificates in `ca` (PEM) instead of the public web roots.
    pub fn with_ca_file(mut self, ca: &Path) -> Result<Self, TlsError> {
        self.ca_pem = Some(read_pem("CA bundle", ca)?);
        Ok(self)
    }

    /// Check the certificate against `domain` instead of the address's host name.
    pub fn with_domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    /// The tonic client configuration.
    pub fn config(&self) -> ClientTlsConfig {
        install_crypto_provider();
        let mut config = ClientTlsConfig::new();
        config = match &self.ca_pem {
            Some(pem) => config.ca_certificate(Certificate::from_pem(pem)),
            None => config.with_webpki_roots(),
        };
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        config
    }
}
