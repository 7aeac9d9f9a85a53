//! codesweep-proto: the gRPC control plane shared by the coordinator, workers and clients.
//!
//! Everything here is generated from `proto/codesweep.proto` at build time by protox and
//! tonic-prost-build; this crate has no logic of its own.

#![allow(missing_docs, clippy::all)]

/// Messages and the `Coordinator` service of package `codesweep.v1`.
pub mod v1 {
    tonic::include_proto!("codesweep.v1");
}

pub use v1::*;
