//! Worker pools: which workers may run which model's shards.
//!
//! A model runs in one pool (`[[models]] pool`, default `default`); a worker serves one pool
//! (`codesweep worker --pool`, default `default`), optionally only some of its models
//! (`--models a,b`). A pool is a kind of worker (a GPU size, an image, an inference sidecar),
//! so a 0.5B model and a 32B model served through vLLM never share a worker.

use std::collections::HashMap;

pub use codesweep_store::records::DEFAULT_POOL;

use crate::spec::SweepSpec;

/// What one worker can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serves {
    /// The worker's pool.
    pub pool: String,
    /// Models of that pool it runs; empty: every model of the pool.
    pub models: Vec<String>,
}

impl Default for Serves {
    fn default() -> Self {
        Self { pool: DEFAULT_POOL.to_string(), models: Vec::new() }
    }
}

impl Serves {
    /// What a worker announced: an empty pool name means the default pool.
    pub fn announced(pool: &str, models: &[String]) -> Self {
        let pool = if pool.is_empty() { DEFAULT_POOL } else { pool };
        Self { pool: pool.to_string(), models: models.iter().filter(|m| !m.is_empty()).cloned().collect() }
    }

    /// Whether this worker may run `model` of pool `pool`.
    pub fn can_run(&self, pool: &str, model: &str) -> bool {
        self.pool == pool && self.allows(model)
    }

    /// Whether `model` passes the worker's model filter (the pool aside).
    pub fn allows(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|m| m == model)
    }
}

/// Each model's pool, by model name.
pub fn model_pools(spec: &SweepSpec) -> HashMap<String, String> {
    spec.models.iter().map(|m| (m.name.clone(), m.pool_name().to_string())).collect()
}

/// Checks a pool name: it names Kubernetes objects, so a DNS label of at most 40 characters
/// (lower-case letters, digits and `-`, starting and ending with a letter or digit).
pub fn check_pool_name(name: &str) -> Result<(), String> {
    let valid_chars = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let valid_ends = !name.starts_with('-') && !name.ends_with('-');
    if name.is_empty() || name.len() > 40 || !valid_chars || !valid_ends {
        return Err(format!(
            "{name:?} is not a pool name: use 1 to 40 lower-case letters, digits and `-`, starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Checks a model's expected sha256: 64 hexadecimal digits.
pub fn check_sha256(text: &str) -> Result<(), String> {
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(format!("{text:?} is not a sha256: give 64 hexadecimal digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_runs_only_its_pools_models_and_only_those_it_lists() {
        let any = Serves::announced("", &[]);
        assert_eq!(any.pool, DEFAULT_POOL);
        assert!(any.can_run(DEFAULT_POOL, "a") && !any.can_run("gpu", "a"));
        let some = Serves::announced("gpu", &["big".into(), String::new()]);
        assert_eq!(some.models, vec!["big".to_string()]);
        assert!(some.can_run("gpu", "big"));
        assert!(!some.can_run("gpu", "small") && !some.can_run(DEFAULT_POOL, "big"));
    }

    #[test]
    fn pool_names_are_dns_labels() {
        for good in ["default", "gpu-2x", "a", "h100-vllm"] {
            assert!(check_pool_name(good).is_ok(), "{good}");
        }
        for bad in ["", "GPU", "-a", "a-", "a_b", "a.b", &"x".repeat(41)] {
            let err = check_pool_name(bad).unwrap_err();
            assert!(err.contains("not a pool name"), "{err}");
        }
        assert!(check_sha256(&"ab".repeat(32)).is_ok());
        assert!(check_sha256("abc").is_err());
    }
}
