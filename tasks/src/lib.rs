//! codesweep-tasks: the benchmarks codesweep runs — CrossCodeEval and RepoQA — as plain data
//! types and pure functions: record formats, post-processing and metrics that reproduce the
//! official Python scripts number for number.
//!
//! Apart from [`retrieval`] and [`dataset`], which read the project sources they work on, this crate does
//! no I/O of its own (callers hand it bytes and write what it returns); it has no async and
//! never needs a model.

pub mod cceval;
pub mod dataset;
pub mod input;
pub mod pycompat;
pub mod repoqa;
pub mod retrieval;
