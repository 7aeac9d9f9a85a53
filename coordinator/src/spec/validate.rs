//! The rules a parsed sweep spec must meet beyond its schema, each refusal naming its key.

use std::path::Path;

use codesweep_store::validate_name;
use codesweep_tasks::cceval::Language;

use super::{SpecError, SweepSpec};

impl SweepSpec {
    /// Checks every value the schema cannot.
    pub fn validate(&self, source_name: &str) -> Result<(), SpecError> {
        let invalid = |key: String, message: String| {
            Err(SpecError::Invalid { source_name: source_name.to_string(), key, message })
        };
        if let Err(e) = validate_name("run name", &self.run.name) {
            return invalid("run.name".into(), e.to_string());
        }
        if self.run.shard_size == 0 {
            return invalid("run.shard_size".into(), "must be at least 1".into());
        }
        if self.run.max_attempts == 0 {
            return invalid("run.max_attempts".into(), "must be at least 1".into());
        }
        if self.run.lease_ttl_seconds.is_nan() || self.run.lease_ttl_seconds <= 0.0 {
            return invalid("run.lease_ttl_seconds".into(), "must be > 0".into());
        }
        if self.run.retry_backoff_seconds.is_nan() || self.run.retry_backoff_seconds < 0.0 {
            return invalid("run.retry_backoff_seconds".into(), "must be ≥ 0".into());
        }
        if self.models.is_empty() {
            return invalid("models".into(), "no models; add a [[models]] table with `name` and `path`".into());
        }
        let mut names = std::collections::HashSet::new();
        for (i, model) in self.models.iter().enumerate() {
            let key = |field: &str| format!("models[{i}].{field}");
            if let Err(e) = validate_name("model name", &model.name) {
                return invalid(key("name"), e.to_string());
            }
            if !names.insert(&model.name) {
                return invalid(key("name"), format!("{:?} names two models; names must be unique", model.name));
            }
            match (&model.path, &model.endpoint) {
                (Some(_), Some(_)) => return invalid(key("path"), "give `path` or `endpoint`, not both".into()),
                (None, None) => {
                    return invalid(key("path"), "missing: give a model `path` (GGUF or HF directory) or an `endpoint`".into())
                }
                _ => {}
            }
            if model.endpoint.is_none() && model.tokenizer.is_some() {
                return invalid(key("tokenizer"), "only for `endpoint` models; a local model brings its own tokenizer".into());
            }
            let sized_by_model = self.repoqa.as_ref().is_some_and(|r| r.options.context_tokenizer == "model");
            if sized_by_model && model.endpoint.is_some() && model.tokenizer.is_none() {
                return invalid(
                    key("tokenizer"),
                    "missing: `repoqa.context_tokenizer = \"model\"` sizes contexts in the model's tokens; give the endpoint's tokenizer.json".into(),
                );
            }
            if model.endpoint.is_none() && model.chat {
                return invalid(key("chat"), "only for `endpoint` models; local models use their own chat template".into());
            }
            if let Err(e) = model.pool.as_deref().map_or(Ok(()), crate::pools::check_pool_name) {
                return invalid(key("pool"), e);
            }
            match (&model.sha256, &model.path) {
                (Some(_), None) => return invalid(key("sha256"), "only for models given by `path`".into()),
                (Some(sha), Some(_)) => crate::pools::check_sha256(sha).or_else(|e| invalid(key("sha256"), e))?,
                _ => {}
            }
            if let Some(p) = model.parameters {
                if p.is_nan() || p <= 0.0 {
                    return invalid(key("parameters"), "must be a positive parameter count".into());
                }
            }
        }
        let g = &self.generation;
        if g.max_new_tokens == 0 {
            return invalid("generation.max_new_tokens".into(), "must be at least 1".into());
        }
        if g.batch_size == 0 {
            return invalid("generation.batch_size".into(), "must be at least 1".into());
        }
        if g.temperature.is_nan() || g.temperature < 0.0 {
            return invalid("generation.temperature".into(), "must be ≥ 0 (0 = greedy)".into());
        }
        if g.top_p.is_nan() || g.top_p <= 0.0 || g.top_p > 1.0 {
            return invalid("generation.top_p".into(), "must be in (0, 1]".into());
        }
        if self.cceval.is_none() && self.repoqa.is_none() {
            return invalid("cceval".into(), "no benchmark: add a [cceval] or [repoqa] section".into());
        }
        if let Some(repoqa) = &self.repoqa {
            for (i, language) in repoqa.languages.iter().enumerate() {
                if let Err(e) = language.parse::<codesweep_tasks::repoqa::Language>() {
                    return invalid(format!("repoqa.languages[{i}]"), e);
                }
            }
            if let Err(e) = repoqa.options.comment_mode.parse::<codesweep_tasks::repoqa::context::CommentMode>() {
                return invalid("repoqa.comment_mode".into(), e.to_string());
            }
            if repoqa.options.code_context_size == 0 || repoqa.options.max_new_tokens == 0 {
                return invalid("repoqa.code_context_size".into(), "code_context_size and max_new_tokens must be at least 1".into());
            }
            let tokenizer = &repoqa.options.context_tokenizer;
            if tokenizer.is_empty() {
                return invalid(
                    "repoqa.context_tokenizer".into(),
                    "empty: use codellama (the official harness's), model (the evaluated model's), or a tokenizer.json path or URL".into(),
                );
            }
            if !["codellama", "model"].contains(&tokenizer.as_str()) && !tokenizer.contains("://") && !Path::new(tokenizer).is_file() {
                return invalid(
                    "repoqa.context_tokenizer".into(),
                    format!("{tokenizer} is not a file; use codellama, model, or a tokenizer.json path or URL"),
                );
            }
            if !repoqa.dataset.is_file() {
                return invalid("repoqa.dataset".into(), format!("{} is not a file; point it at a RepoQA dataset JSON", repoqa.dataset.display()));
            }
        }
        if let Some(telemetry) = &self.telemetry {
            if let Some(endpoint) = &telemetry.otlp_endpoint {
                if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                    return invalid(
                        "telemetry.otlp_endpoint".into(),
                        format!("{endpoint:?} must be an http:// or https:// URL of an OTLP/gRPC collector"),
                    );
                }
            }
            if let Some(name) = &telemetry.service_name {
                if name.trim().is_empty() {
                    return invalid("telemetry.service_name".into(), "must not be empty".into());
                }
            }
            if let Some(seconds) = telemetry.export_interval_seconds {
                if !(seconds.is_finite() && seconds > 0.0) {
                    return invalid("telemetry.export_interval_seconds".into(), "must be > 0".into());
                }
            }
        }
        let Some(cceval) = &self.cceval else { return Ok(()) };
        for (i, language) in cceval.languages.iter().enumerate() {
            if let Err(e) = language.parse::<Language>() {
                return invalid(format!("cceval.languages[{i}]"), e);
            }
        }
        for (i, setting) in cceval.settings.iter().enumerate() {
            if let Err(e) = validate_name("setting", setting) {
                return invalid(format!("cceval.settings[{i}]"), e.to_string());
            }
        }
        if let Err(e) = cceval.edit_sim.parse::<codesweep_tasks::cceval::EditSimBackend>() {
            return invalid("cceval.edit_sim".into(), e);
        }
        if !cceval.data_dir.is_dir() {
            return invalid(
                "cceval.data_dir".into(),
                format!("{} is not a directory; point it at the folder holding <language>/line_completion*.jsonl", cceval.data_dir.display()),
            );
        }
        Ok(())
    }
}
