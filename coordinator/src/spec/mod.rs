//! The sweep spec: which models, which benchmarks, how to generate, where results go.
//!
//! Read with the `config` crate from TOML (or YAML/JSON), then overridden by environment
//! variables `CODESWEEP__SECTION__KEY` (e.g. `CODESWEEP__RUN__SHARD_SIZE=50`). Every problem
//! is reported with its key path before anything runs.

use std::path::{Path, PathBuf};

use codesweep_store::records::{GenerationSpec, ModelSpec, RepoqaOptions};
use serde::{Deserialize, Serialize};

mod validate;

/// A problem with a spec, with the key path it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The text could not be parsed or did not fit the schema.
    #[error("sweep spec {source_name}: {message}")]
    Parse {
        /// Where the text came from.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// A value is present but wrong.
    #[error("sweep spec {source_name}: `{key}`: {message}")]
    Invalid {
        /// Where the text came from.
        source_name: String,
        /// The object or input concerned.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// Format of a spec's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecFormat {
    /// TOML (the default).
    Toml,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

impl SpecFormat {
    /// The format named by a file extension or a `SubmitRun.format` value (`""` means TOML).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "" | "toml" => Some(SpecFormat::Toml),
            "yaml" | "yml" => Some(SpecFormat::Yaml),
            "json" => Some(SpecFormat::Json),
            _ => None,
        }
    }

    /// The name `from_name` accepts.
    pub fn name(self) -> &'static str {
        match self {
            SpecFormat::Toml => "toml",
            SpecFormat::Yaml => "yaml",
            SpecFormat::Json => "json",
        }
    }
}

/// `path` with a leading `~` replaced by the home folder (`$HOME`); otherwise unchanged.
pub fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_path_buf(),
    }
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Run-wide settings.
    pub run: RunSection,
    /// The models to evaluate.
    pub models: Vec<ModelSpec>,
    /// Generation parameters shared by all models.
    #[serde(default)]
    pub generation: GenerationSpec,
    /// CrossCodeEval, if it is part of the sweep.
    #[serde(default)]
    pub cceval: Option<CcevalSection>,
    /// RepoQA Searching Needle Function, if it is part of the sweep.
    #[serde(default)]
    pub repoqa: Option<RepoqaSection>,
    /// Settings of the workers `codesweep run` starts.
    #[serde(default)]
    pub workers: WorkersSection,
    /// OpenTelemetry export of the process that reads this file (`codesweep run`,
    /// `codesweep coordinator --submit`); absent: off. Not part of the run's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<TelemetrySection>,
}

/// `[run]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// The run id: results go to `<store>/<name>/`; submitting the same spec again resumes it.
    pub name: String,
    /// Store URL (path, `file://`, `memory://`, `s3://`, `gs://`, `az://`).
    #[serde(default = "default_store")]
    pub store: String,
    /// Examples per shard.
    #[serde(default = "default_shard_size")]
    pub shard_size: usize,
    /// Attempts per shard before it is marked failed.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// A lease not renewed by a heartbeat within this many seconds returns to the queue.
    #[serde(default = "default_lease_ttl")]
    pub lease_ttl_seconds: f64,
    /// First retry delay in seconds; doubles with each attempt, capped at 60 s.
    #[serde(default = "default_retry_backoff")]
    pub retry_backoff_seconds: f64,
}

fn default_store() -> String {
    "runs".into()
}
fn default_shard_size() -> usize {
    100
}
fn default_max_attempts() -> u32 {
    3
}
fn default_lease_ttl() -> f64 {
    60.0
}
fn default_retry_backoff() -> f64 {
    1.0
}

/// `[cceval]`: CrossCodeEval line completion from data in the official layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CcevalSection {
    /// Folder with `<language>/line_completion*.jsonl` (the official `crosscodeeval_data`).
    pub data_dir: PathBuf,
    /// Languages to run (default: every language folder present).
    #[serde(default)]
    pub languages: Vec<String>,
    /// Settings: `in_file`, or the suffix of a `line_completion_<setting>.jsonl` file such as
    /// `rg1_bm25` or `oracle_bm25` (default: `in_file` plus every file present).
    #[serde(default)]
    pub settings: Vec<String>,
    /// Use only the first N examples of each file (smoke runs).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Edit similarity backend: `difflib` (the paper's) or `levenshtein` (the repository's).
    #[serde(default = "default_edit_sim")]
    pub edit_sim: String,
}

fn default_edit_sim() -> String {
    codesweep_tasks::cceval::shard::DEFAULT_EDIT_SIM.into()
}

/// `[repoqa]`: RepoQA Searching Needle Function on a dataset in the official layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoqaSection {
    /// The dataset JSON (`{language: [repo, …]}` with `content`, `dependency`, `needles`).
    pub dataset: PathBuf,
    /// Languages to run (default: every language of the dataset).
    #[serde(default)]
    pub languages: Vec<String>,
    /// Context, generation and scoring settings.
    #[serde(flatten)]
    pub options: RepoqaOptions,
}

/// `[workers]`: local workers of `codesweep run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkersSection {
    /// How many worker processes `codesweep run` starts.
    pub count: usize,
    /// Device of the local workers.
    pub device: String,
}

impl Default for WorkersSection {
    fn default() -> Self {
        Self { count: 1, device: "cpu".into() }
    }
}

/// `[telemetry]`: spans and metrics over OTLP/gRPC.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySection {
    /// The OTLP/gRPC collector, e.g. `http://127.0.0.1:4317`; unset: `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// if that is set, else telemetry stays off.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute (default: `OTEL_SERVICE_NAME`, else `codesweep`).
    pub service_name: Option<String>,
    /// Seconds between metric exports (default: `OTEL_METRIC_EXPORT_INTERVAL`, else 10).
    pub export_interval_seconds: Option<f64>,
}

/// Where `CODESWEEP__…` overrides are read from.
enum Overrides {
    /// None: a stored, already resolved spec.
    None,
    /// This process's environment.
    Process,
    /// The given variables instead of the environment (tests, which run in parallel in one
    /// process and must not see each other's variables).
    #[cfg_attr(not(test), allow(dead_code))]
    Given(config::Map<String, String>),
}

impl SweepSpec {
    /// Parses `text`, applies `CODESWEEP__…` environment overrides, and validates.
    /// `source_name` (a file name) appears in every error.
    pub fn parse(source_name: &str, text: &str, format: SpecFormat) -> Result<Self, SpecError> {
        Self::parse_with_env(source_name, text, format, true)
    }

    /// As [`SweepSpec::parse`], optionally without environment overrides (a coordinator
    /// resuming a stored, already resolved spec).
    pub fn parse_with_env(source_name: &str, text: &str, format: SpecFormat, env: bool) -> Result<Self, SpecError> {
        let overrides = if env { Overrides::Process } else { Overrides::None };
        let spec = Self::parse_unvalidated(source_name, text, format, overrides)?;
        spec.validate(source_name)?;
        Ok(spec)
    }

    fn parse_unvalidated(
        source_name: &str,
        text: &str,
        format: SpecFormat,
        overrides: Overrides,
    ) -> Result<Self, SpecError> {
        let parse = |message: String| SpecError::Parse { source_name: source_name.to_string(), message };
        let file_format = match format {
            SpecFormat::Toml => config::FileFormat::Toml,
            SpecFormat::Yaml => config::FileFormat::Yaml,
            SpecFormat::Json => config::FileFormat::Json,
        };
        let mut builder = config::Config::builder().add_source(config::File::from_str(text, file_format));
        // `source(None)` reads the process environment.
        let environment = |variables| {
            config::Environment::with_prefix("CODESWEEP").prefix_separator("__").separator("__").try_parsing(true).source(variables)
        };
        builder = match overrides {
            Overrides::None => builder,
            Overrides::Process => builder.add_source(environment(None)),
            Overrides::Given(variables) => builder.add_source(environment(Some(variables))),
        };
        let config = builder.build().map_err(|e| parse(e.to_string()))?;
        let spec: Self = config.clone().try_deserialize().map_err(|e| parse(e.to_string()))?;
        // `config` rounds a number with a fraction into an integer field (1.5 attempts become
        // 2); refuse it instead, naming the key.
        let raw: serde_json::Value = config.try_deserialize().map_err(|e| parse(e.to_string()))?;
        let parsed = serde_json::to_value(&spec).map_err(|e| parse(e.to_string()))?;
        if let Some((key, value)) = rounded_into_integer(&raw, &parsed, String::new()) {
            return Err(parse(format!("`{key}`: must be a whole number, got {value}")));
        }
        Ok(spec)
    }

    /// Reads and parses a spec file; the format follows the extension (TOML by default).
    pub fn load(path: &Path) -> Result<Self, SpecError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| SpecError::Parse { source_name: name.clone(), message: format!("cannot read: {e}") })?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("toml");
        let format = SpecFormat::from_name(ext).unwrap_or(SpecFormat::Toml);
        let mut spec = Self::parse_unvalidated(&name, &text, format, Overrides::Process)?;
        spec.resolve_paths(path.parent().unwrap_or(Path::new(".")));
        spec.validate(&name)?;
        Ok(spec)
    }

    /// Makes relative data and model paths relative to `base` (the spec file's folder), so a
    /// spec means the same thing from any working directory; a leading `~/` is the home folder.
    pub fn resolve_paths(&mut self, base: &Path) {
        let absolute = |p: &Path| {
            let p = expand_home(p);
            if p.is_absolute() {
                p
            } else {
                base.join(p)
            }
        };
        // A local store is a path like any other (object-store URLs are left alone).
        let local_store = match self.run.store.split_once("://") {
            None => Some(self.run.store.as_str()),
            Some(("file", path)) => Some(path),
            Some(_) => None,
        };
        if let Some(path) = local_store {
            self.run.store = absolute(Path::new(path)).display().to_string();
        }
        if let Some(cceval) = &mut self.cceval {
            cceval.data_dir = absolute(&cceval.data_dir);
        }
        if let Some(repoqa) = &mut self.repoqa {
            repoqa.dataset = absolute(&repoqa.dataset);
            let tokenizer = &mut repoqa.options.context_tokenizer;
            if !["codellama", "model"].contains(&tokenizer.as_str()) && !tokenizer.contains("://") {
                *tokenizer = absolute(Path::new(tokenizer.as_str())).display().to_string();
            }
        }
        for model in &mut self.models {
            for path in [&mut model.path, &mut model.tokenizer].into_iter().flatten() {
                if !path.contains("://") {
                    *path = absolute(Path::new(path.as_str())).display().to_string();
                }
            }
        }
    }
}

/// The first key where `raw` (the spec as written) holds a number with a fraction, or a
/// negative one, and `parsed` (the spec as read) an integer: the key path and the number written.
fn rounded_into_integer(raw: &serde_json::Value, parsed: &serde_json::Value, path: String) -> Option<(String, f64)> {
    use serde_json::Value;
    let at = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match (raw, parsed) {
        (Value::Object(raw), Value::Object(parsed)) => {
            raw.iter().find_map(|(key, r)| parsed.get(key).and_then(|p| rounded_into_integer(r, p, at(key))))
        }
        (Value::Array(raw), Value::Array(parsed)) => raw
            .iter()
            .zip(parsed)
            .enumerate()
            .find_map(|(i, (r, p))| rounded_into_integer(r, p, format!("{path}[{i}]"))),
        (Value::Number(r), Value::Number(p)) if !p.is_f64() => {
            let written = r.as_f64()?;
            (written.fract() != 0.0 || (written < 0.0 && p.is_u64())).then_some((path, written))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_text(extra: &str) -> String {
        let dir = env!("CARGO_MANIFEST_DIR");
        format!(
            "[run]\nname = \"r1\"\n{extra}\n[[models]]\nname = \"tiny\"\npath = \"/m.gguf\"\n[cceval]\ndata_dir = \"{dir}\"\nlanguages = [\"python\"]\n"
        )
    }

    #[test]
    fn defaults_are_the_official_ones() {
        let spec = SweepSpec::parse_with_env("s.toml", &spec_text(""), SpecFormat::Toml, false).unwrap();
        assert_eq!(spec.generation, GenerationSpec::default());
        assert_eq!(spec.generation.max_new_tokens, 50);
        assert_eq!(spec.run.shard_size, 100);
        assert_eq!(spec.cceval.unwrap().edit_sim, "difflib");
    }

    #[test]
    fn errors_name_the_key() {
        let err = SweepSpec::parse_with_env("s.toml", &spec_text("shard_size = 0"), SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("s.toml: `run.shard_size`"), "{err}");
        let text = spec_text("").replace("\"python\"", "\"cobol\"");
        let err = SweepSpec::parse_with_env("s.toml", &text, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`cceval.languages[0]`"), "{err}");
        let text = spec_text("").replace("name = \"tiny\"", "name = \"a/b\"");
        let err = SweepSpec::parse_with_env("s.toml", &text, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`models[0].name`"), "{err}");
        let err = SweepSpec::parse_with_env("s.toml", &spec_text("colour = 1"), SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
    }

    #[test]
    fn endpoint_only_keys_are_checked() {
        let endpoint = spec_text("").replace("path = \"/m.gguf\"", "endpoint = \"http://h/v1\"\nchat = true");
        let spec = SweepSpec::parse_with_env("s.toml", &endpoint, SpecFormat::Toml, false).unwrap();
        assert!(spec.models[0].chat && spec.models[0].tokenizer.is_none());
        let local_chat = spec_text("").replace("path = \"/m.gguf\"", "path = \"/m.gguf\"\nchat = true");
        let err = SweepSpec::parse_with_env("s.toml", &local_chat, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`models[0].chat`"), "{err}");
        let local_tokenizer = spec_text("").replace("path = \"/m.gguf\"", "path = \"/m.gguf\"\ntokenizer = \"/t.json\"");
        let err = SweepSpec::parse_with_env("s.toml", &local_tokenizer, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`models[0].tokenizer`"), "{err}");
        let dir = env!("CARGO_MANIFEST_DIR");
        // The official context tokenizer needs nothing from the endpoint; the model's does.
        let repoqa = format!("{endpoint}[repoqa]\ndataset = \"{dir}/Cargo.toml\"\n");
        let spec = SweepSpec::parse_with_env("s.toml", &repoqa, SpecFormat::Toml, false).unwrap();
        assert_eq!(spec.repoqa.unwrap().options.context_tokenizer, "codellama");
        let by_model = format!("{repoqa}context_tokenizer = \"model\"\n");
        let err = SweepSpec::parse_with_env("s.toml", &by_model, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`models[0].tokenizer`: missing: `repoqa.context_tokenizer = \"model\"`"), "{err}");
        let missing = format!("{repoqa}context_tokenizer = \"/no/such/tokenizer.json\"\n");
        let err = SweepSpec::parse_with_env("s.toml", &missing, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`repoqa.context_tokenizer`: /no/such/tokenizer.json is not a file"), "{err}");
        let empty = format!("{repoqa}context_tokenizer = \"\"\n");
        assert!(SweepSpec::parse_with_env("s.toml", &empty, SpecFormat::Toml, false).is_err());
    }

    #[test]
    fn local_paths_are_relative_to_the_spec_file() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let text = "[run]\nname = \"r\"\nstore = \"out\"\n[[models]]\nname = \"m\"\npath = \"m.gguf\"\n[cceval]\ndata_dir = \"data\"\n";
        std::fs::write(dir.path().join("s.toml"), text).unwrap();
        let spec = SweepSpec::load(&dir.path().join("s.toml")).unwrap();
        assert_eq!(spec.run.store, dir.path().join("out").display().to_string());
        assert_eq!(spec.cceval.unwrap().data_dir, data);
        assert_eq!(spec.models[0].path.as_deref(), Some(dir.path().join("m.gguf").display().to_string().as_str()));
        let text = text.replace("store = \"out\"", "store = \"s3://bucket/runs\"");
        std::fs::write(dir.path().join("s.toml"), text).unwrap();
        assert_eq!(SweepSpec::load(&dir.path().join("s.toml")).unwrap().run.store, "s3://bucket/runs");
    }

    #[test]
    fn telemetry_is_off_unless_configured_and_checked() {
        let spec = SweepSpec::parse_with_env("s.toml", &spec_text(""), SpecFormat::Toml, false).unwrap();
        assert_eq!(spec.telemetry, None);
        assert!(!serde_json::to_string(&spec).unwrap().contains("telemetry"), "an absent section stays absent");
        let text = format!("{}[telemetry]\notlp_endpoint = \"http://127.0.0.1:4317\"\nexport_interval_seconds = 2\n", spec_text(""));
        let spec = SweepSpec::parse_with_env("s.toml", &text, SpecFormat::Toml, false).unwrap();
        let telemetry = spec.telemetry.unwrap();
        assert_eq!(telemetry.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4317"));
        assert_eq!(telemetry.export_interval_seconds, Some(2.0));
        let bad = text.replace("http://127.0.0.1:4317", "127.0.0.1:4317");
        let err = SweepSpec::parse_with_env("s.toml", &bad, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`telemetry.otlp_endpoint`"), "{err}");
        let bad = text.replace("export_interval_seconds = 2", "export_interval_seconds = 0");
        let err = SweepSpec::parse_with_env("s.toml", &bad, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`telemetry.export_interval_seconds`"), "{err}");
        let bad = text.replace("export_interval_seconds", "interval");
        let err = SweepSpec::parse_with_env("s.toml", &bad, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("interval"), "{err}");
    }

    /// Specs a user could write by mistake: each is refused before anything runs, naming the
    /// file and the key, never a panic.
    #[test]
    fn mistaken_specs_are_refused_naming_the_key() {
        let cases = [
            (spec_text("shard_size = \"ten\""), "shard_size"),
            (spec_text("shard_size = -1"), "shard_size"),
            (spec_text("shard_size = 0"), "`run.shard_size`"),
            (spec_text("max_attempts = 1.5"), "max_attempts"),
            (spec_text("").replace("name = \"r1\"", "name = \"a/b\""), "`run.name`"),
            (spec_text("").replace("name = \"r1\"", "name = \"..\""), "`run.name`"),
            (spec_text("").replace("name = \"r1\"", "name = \"my run\""), "`run.name`"),
            (format!("{}[generation]\nmax_new_tokens = -5\n", spec_text("")), "max_new_tokens"),
            (format!("{}[generation]\nmax_new_tokens = 0\n", spec_text("")), "`generation.max_new_tokens`"),
            (format!("{}[generation]\nbatch_size = 0\n", spec_text("")), "`generation.batch_size`"),
            (format!("{}[generation]\ntop_p = 2.0\n", spec_text("")), "`generation.top_p`"),
            (spec_text("").replace("languages = [\"python\"]", "languages = \"python\""), "languages"),
            (spec_text("").replace("[[models]]", "[models]"), "models"),
        ];
        for (text, key) in cases {
            let err = SweepSpec::parse_with_env("s.toml", &text, SpecFormat::Toml, false)
                .err()
                .unwrap_or_else(|| panic!("accepted:\n{text}"));
            let message = err.to_string();
            assert!(message.contains("s.toml") && message.contains(key), "{key}: {message}");
        }
        let repoqa = format!("{}[repoqa]\ndataset = \"{}/Cargo.toml\"\ncode_context_size = 0\n", spec_text(""), env!("CARGO_MANIFEST_DIR"));
        let err = SweepSpec::parse_with_env("s.toml", &repoqa, SpecFormat::Toml, false).unwrap_err();
        assert!(err.to_string().contains("`repoqa.code_context_size`"), "{err}");
        // A bad environment override names its variable's key.
        let err = parse_with_variables(&[("CODESWEEP__RUN__MAX_ATTEMPTS", "lots")]).err().map(|e| e.to_string());
        let message = err.expect("a non-numeric override was accepted");
        assert!(message.contains("max_attempts"), "{message}");
    }

    /// Parses the test spec with `variables` standing in for the environment: setting real
    /// variables would leak into `SweepSpec::load` in tests running beside this one.
    fn parse_with_variables(variables: &[(&str, &str)]) -> Result<SweepSpec, SpecError> {
        let variables = variables.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let spec = SweepSpec::parse_unvalidated("s.toml", &spec_text(""), SpecFormat::Toml, Overrides::Given(variables))?;
        spec.validate("s.toml")?;
        Ok(spec)
    }

    #[test]
    fn environment_overrides_nested_keys() {
        let spec = parse_with_variables(&[("CODESWEEP__GENERATION__MAX_NEW_TOKENS", "7")]).unwrap();
        assert_eq!(spec.generation.max_new_tokens, 7);
        let spec = parse_with_variables(&[("OTHER__GENERATION__MAX_NEW_TOKENS", "7")]).unwrap();
        assert_ne!(spec.generation.max_new_tokens, 7, "only CODESWEEP__ variables override");
    }
}
