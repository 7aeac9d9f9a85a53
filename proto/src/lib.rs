//! codesweep-proto: the gRPC control plane shared by the coordinator, workers and clients.
//!
//! The messages and service are generated from `proto/codesweep.proto` at build time by protox
//! and tonic-prost-build; [`auth`] holds the bearer-token interceptors both ends of the wire use,
//! [`tls`] the optional TLS (rustls) settings of both ends.

pub mod auth;
pub mod client;
pub mod tls;

/// Messages and the `Coordinator` service of package `codesweep.v1`.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("codesweep.v1");
}

pub use v1::*;
