//! codesweep-test-support: the fixtures codesweep's tests share, in one dev-only crate instead
//! of files included across crates: tiny real models written by the test (`models`), the golden
//! vectors of the official scripts (`golden`), and an in-process S3-protocol server (`s3_server`,
//! feature `s3`).

pub mod golden;
pub mod models;
#[cfg(feature = "s3")]
pub mod s3_server;
