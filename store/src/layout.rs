//! The key layout of a run inside the store.
//!
//! ```text
//! <run>/spec.json                      the sweep spec as resolved (file + environment)
//! <run>/plan.json                      every shard: id, model, benchmark, language, setting, size
//! <run>/coordinator.json               the hold of the coordinator serving the run (renewed; expires)
//! <run>/inputs/<shard id>.jsonl        self-contained shard input (header line + examples)
//! <run>/shards/<shard id>.jsonl        shard result, written once by the worker that finished it
//! <run>/failures/<shard id>.json       the last error of a shard that ran out of attempts
//! <run>/report/…                       merged tables and exports
//! ```
//! A shard id is `<model>/<benchmark>/<language>/<setting>/<nnnn>`.

use crate::error::StoreError;

/// Keys of one run's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLayout {
    run_id: String,
}

impl RunLayout {
    /// The layout of run `run_id` (a validated name).
    pub fn new(run_id: &str) -> Self {
        Self { run_id: run_id.to_string() }
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The submitted spec.
    pub fn spec(&self) -> String {
        format!("{}/spec.json", self.run_id)
    }

    /// The hold naming the coordinator that serves the run (see [`crate::hold`]).
    pub fn hold(&self) -> String {
        format!("{}/coordinator.json", self.run_id)
    }

    /// The plan listing every shard.
    pub fn plan(&self) -> String {
        format!("{}/plan.json", self.run_id)
    }

    /// A shard's input object.
    pub fn input(&self, shard_id: &str) -> String {
        format!("{}/inputs/{shard_id}.jsonl", self.run_id)
    }

    /// A shard's result object.
    pub fn result(&self, shard_id: &str) -> String {
        format!("{}/shards/{shard_id}.jsonl", self.run_id)
    }

    /// The prefix under which all result objects live.
    pub fn results_prefix(&self) -> String {
        format!("{}/shards", self.run_id)
    }

    /// The record of a shard that failed for good.
    pub fn failure(&self, shard_id: &str) -> String {
        format!("{}/failures/{shard_id}.json", self.run_id)
    }

    /// The record that the run has ended (its state), written by a batch coordinator as it
    /// exits: a worker that starts later, or outlives the coordinator, reads it and exits 0.
    pub fn ended(&self) -> String {
        format!("{}/ended.json", self.run_id)
    }

    /// A report file.
    pub fn report(&self, name: &str) -> String {
        format!("{}/report/{name}", self.run_id)
    }

    /// The shard id whose result object is `key`, if `key` is one.
    pub fn shard_of_result(&self, key: &str) -> Option<String> {
        let rest = key.strip_prefix(&self.results_prefix())?.strip_prefix('/')?;
        rest.strip_suffix(".jsonl").map(str::to_string)
    }
}

/// The id of shard number `index` of one (model, benchmark, language, setting) cell.
pub fn shard_id(model: &str, benchmark: &str, language: &str, setting: &str, index: usize) -> String {
    format!("{model}/{benchmark}/{language}/{setting}/{index:04}")
}

/// Checks that `name` can be one segment of an object key: 1–100 characters of
/// `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub fn validate_name(what: &'static str, name: &str) -> Result<(), StoreError> {
    let fail = |message: &str| Err(StoreError::Name { what, name: name.to_string(), message: message.to_string() });
    if name.is_empty() || name.len() > 100 {
        return fail("must have 1 to 100 characters");
    }
    if name.starts_with('.') {
        return fail("must not start with '.'");
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return fail(&format!("has {bad:?}; use only letters, digits, '.', '_' and '-'"));
    }
    Ok(())
}

/// Splits a run URI (`runs/demo`, `file:///data/runs/demo`, `s3://bucket/runs/demo`) into the
/// store URL and the run id: what `report`, `rescore` and a worker's `--run` take.
pub fn split_run_uri(uri: &str) -> Result<(String, String), StoreError> {
    let trimmed = uri.trim_end_matches('/');
    let (store, run) = trimmed
        .rsplit_once('/')
        .filter(|(store, run)| !store.is_empty() && !run.is_empty() && !store.ends_with(':') && !store.ends_with(":/"))
        .ok_or_else(|| StoreError::Url {
            url: uri.to_string(),
            message: "a run URI must be <store>/<run id>, e.g. runs/my-sweep or s3://bucket/runs/my-sweep".into(),
        })?;
    Ok((store.to_string(), run.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_keys_round_trip_to_shard_ids() {
        let layout = RunLayout::new("r1");
        let id = shard_id("qwen-0.5b", "cceval", "python", "rg1_bm25", 3);
        assert_eq!(id, "qwen-0.5b/cceval/python/rg1_bm25/0003");
        assert_eq!(layout.shard_of_result(&layout.result(&id)), Some(id));
        assert_eq!(layout.shard_of_result("r1/inputs/x.jsonl"), None);
        assert_eq!(layout.shard_of_result("r10/shards/x.jsonl"), None);
    }

    #[test]
    fn names_with_path_characters_are_refused() {
        assert!(validate_name("model", "qwen2.5-coder_0.5b").is_ok());
        for bad in ["", "a/b", "..", ".hidden", "a b", "é"] {
            assert!(validate_name("model", bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn run_uris_split_into_store_and_run() {
        assert_eq!(split_run_uri("runs/demo").unwrap(), ("runs".into(), "demo".into()));
        assert_eq!(split_run_uri("s3://b/runs/demo/").unwrap(), ("s3://b/runs".into(), "demo".into()));
        assert_eq!(split_run_uri("file:///data/demo").unwrap(), ("file:///data".into(), "demo".into()));
        assert!(split_run_uri("demo").unwrap_err().to_string().contains("<store>/<run id>"));
        assert!(split_run_uri("s3://demo").is_err());
    }
}
