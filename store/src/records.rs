//! The record formats of shard inputs and results.
//!
//! Both are JSON Lines: a header line `{"header": …}` followed by one record per line. An input
//! holds everything a worker needs (model, generation parameters, the examples verbatim), so a
//! shard can be replayed from its input object alone; a result holds, per example, the raw
//! completion, the post-processed prediction, its metrics and token counts, so metrics can be
//! recomputed without a GPU.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::StoreError;

/// Which benchmark a shard belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Benchmark {
    /// CrossCodeEval line completion.
    Cceval,
    /// RepoQA Searching Needle Function.
    Repoqa,
}

impl Benchmark {
    /// The name used in keys and tables.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Cceval => "cceval",
            Benchmark::Repoqa => "repoqa",
        }
    }
}

/// A model of the sweep: a local file/directory, or an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Display name, used in keys and tables.
    pub name: String,
    /// A `.gguf` file or a Hugging Face directory, as the workers see it.
    #[serde(default)]
    pub path: Option<String>,
    /// Base URL of an OpenAI-compatible server (`…/v1`) serving the model instead.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The model name to send to the endpoint (default: `name`).
    #[serde(default)]
    pub api_model: Option<String>,
    /// Environment variable holding the endpoint's API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// For an endpoint: the served model's `tokenizer.json` (local path or object-store URL),
    /// so prompts get the official token budgets and RepoQA contexts their exact size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// For an endpoint: send RepoQA's instructions as one user message to
    /// `/v1/chat/completions` (the server applies the chat template, as a local model's own
    /// template is applied); CrossCodeEval prompts always go to `/v1/completions`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub chat: bool,
    /// Parameter count, for tables and the scaling plot.
    #[serde(default)]
    pub parameters: Option<f64>,
    /// Device override for this model (`cpu`, `cuda:N`).
    #[serde(default)]
    pub device: Option<String>,
    /// Dtype override for safetensors models (`f32`, `f16`, `bf16`).
    #[serde(default)]
    pub dtype: Option<String>,
    /// The worker pool that runs this model (default: the pool named `default`): only workers
    /// started with `--pool` of that name lease its shards. Placement only, not part of what
    /// a shard computes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Expected sha256 (hex) of a model given as one file: a download or a cached copy that
    /// differs is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The pool of models without a `pool`, and of workers started without `--pool`.
pub const DEFAULT_POOL: &str = "default";

impl ModelSpec {
    /// The pool whose workers run this model.
    pub fn pool_name(&self) -> &str {
        self.pool.as_deref().unwrap_or(DEFAULT_POOL)
    }
}

/// Generation parameters; the defaults are the official CrossCodeEval vLLM script's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerationSpec {
    /// Most new tokens per completion (official: 50).
    pub max_new_tokens: usize,
    /// 0 means greedy (official: 0).
    pub temperature: f64,
    /// Nucleus mass when sampling (official: 0.95).
    pub top_p: f64,
    /// Seed of the sampling streams.
    pub seed: u64,
    /// Most sequences decoded together.
    pub batch_size: usize,
    /// Most tokens one batch may hold.
    pub max_tokens_in_flight: usize,
    /// Context length the prompt budget assumes (official: 16384).
    pub model_max_tokens: usize,
    /// Budget of the cross-file context (official: 12800).
    pub crossfile_max_tokens: usize,
    /// Spare tokens for tokenizers that do not round-trip (official: 100).
    pub buffer: usize,
}

impl Default for GenerationSpec {
    fn default() -> Self {
        Self {
            max_new_tokens: 50,
            temperature: 0.0,
            top_p: 0.95,
            seed: 0,
            batch_size: 8,
            max_tokens_in_flight: 32_768,
            model_max_tokens: 16_384,
            crossfile_max_tokens: 12_800,
            buffer: 100,
        }
    }
}

/// RepoQA Searching-Needle-Function settings; the defaults are the official script's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepoqaOptions {
    /// Tokens of code context around the needle (official: 16384).
    pub code_context_size: usize,
    /// Comment cleaning of the context: `none`, `positional_padding` or `no_padding`.
    pub comment_mode: String,
    /// Score with comments removed from answers and needles (official `--ignore-comments`).
    pub ignore_comments: bool,
    /// Most new tokens per answer (official: 1024).
    pub max_new_tokens: usize,
    /// Tree-sitter grammars: `auto` (the official binaries when installed), `bundled`, or a path.
    pub grammars: String,
    /// The tokenizer contexts are sized with: `codellama` (the official harness's
    /// CodeLlama-7b-Instruct tokenizer, fetched and checksummed), `model` (the evaluated
    /// model's), or a `tokenizer.json` path or URL.
    pub context_tokenizer: String,
}

impl Default for RepoqaOptions {
    fn default() -> Self {
        Self {
            code_context_size: 16_384,
            comment_mode: "none".into(),
            ignore_comments: false,
            max_new_tokens: 1024,
            grammars: "auto".into(),
            context_tokenizer: "codellama".into(),
        }
    }
}

/// The first line of a shard input: what to run and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardHeader {
    /// The run the shard belongs to.
    pub run_id: String,
    /// `<model>/<benchmark>/<language>/<setting>/<nnnn>`.
    pub shard_id: String,
    /// The model to run.
    pub model: ModelSpec,
    /// The benchmark.
    pub benchmark: Benchmark,
    /// Benchmark language (`python`, `java`, …).
    pub language: String,
    /// Setting name (`in_file`, `rg1_bm25`, `oracle_bm25`, … or a RepoQA context size).
    pub setting: String,
    /// CrossCodeEval: put the example's `crossfile_context.text` before the prompt.
    #[serde(default)]
    pub use_crossfile: bool,
    /// Generation parameters.
    pub generation: GenerationSpec,
    /// CrossCodeEval edit similarity backend (`difflib` or `levenshtein`).
    #[serde(default)]
    pub edit_sim: Option<String>,
    /// RepoQA: how contexts are built and answers scored.
    #[serde(default)]
    pub repoqa: Option<RepoqaOptions>,
    /// Number of example lines that follow.
    pub examples: usize,
}

/// A finished shard's totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardTotals {
    /// Examples in the shard.
    pub examples: usize,
    /// Prompt tokens fed to the model.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Wall time of the shard on its worker.
    pub seconds: f64,
}

/// The first line of a shard result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultHeader {
    /// The shard, copied from the input.
    pub shard: ShardHeader,
    /// The worker that wrote it.
    pub worker: String,
    /// Which attempt produced it (1 = first).
    pub attempt: u32,
    /// Totals.
    pub totals: ShardTotals,
}

/// One example's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExampleResult {
    /// The benchmark's task id.
    pub task_id: String,
    /// The model's text as generated (cut only at stop strings).
    pub completion: String,
    /// The post-processed prediction that was scored.
    pub prediction: String,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens.
    pub generated_tokens: usize,
    /// Why generation ended.
    pub stop_reason: String,
    /// Seconds from the start of its batch to its end.
    pub seconds: f64,
    /// Benchmark metrics for this example, in the official per-example field names.
    pub metrics: Value,
    /// The task as the official harness writes it beside its output (RepoQA: path,
    /// description, instruction, template, code context and its token counts), so exports
    /// can be re-checked by the official scripts; absent where the official output has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Value>,
}

#[derive(Serialize, Deserialize)]
struct HeaderLine<H> {
    header: H,
}

/// Writes a header line and one line per record.
pub fn encode<H: Serialize, R: Serialize>(header: &H, records: &[R]) -> Result<String, serde_json::Error> {
    let mut out = serde_json::to_string(&HeaderLine { header })?;
    out.push('\n');
    for record in records {
        out.push_str(&serde_json::to_string(record)?);
        out.push('\n');
    }
    Ok(out)
}

/// Reads what [`encode`] wrote, naming the object key and line of any problem.
pub fn decode<H: DeserializeOwned, R: DeserializeOwned>(key: &str, text: &str) -> Result<(H, Vec<R>), StoreError> {
    let format = |line: usize, message: String| StoreError::Format { key: key.to_string(), line, message };
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or_else(|| format(1, "empty object; expected a header line".into()))?;
    let header: HeaderLine<H> = serde_json::from_str(first).map_err(|e| format(1, format!("header: {e}")))?;
    let mut records = Vec::new();
    for (index, line) in lines {
        records.push(serde_json::from_str(line).map_err(|e| format(index + 1, e.to_string()))?);
    }
    Ok((header.header, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> ShardHeader {
        ShardHeader {
            run_id: "r".into(),
            shard_id: "m/cceval/python/in_file/0000".into(),
            model: ModelSpec {
                name: "m".into(),
                path: Some("/m.gguf".into()),
                endpoint: None,
                api_model: None,
                api_key_env: None,
                tokenizer: None,
                chat: false,
                parameters: Some(5e8),
                device: None,
                dtype: None,
                pool: None,
                sha256: None,
            },
            benchmark: Benchmark::Cceval,
            language: "python".into(),
            setting: "in_file".into(),
            use_crossfile: false,
            generation: GenerationSpec::default(),
            edit_sim: None,
            repoqa: None,
            examples: 2,
        }
    }

    #[test]
    fn inputs_round_trip() {
        let records = vec![serde_json::json!({"prompt": "a"}), serde_json::json!({"prompt": "b\n"})];
        let text = encode(&header(), &records).unwrap();
        let (h, r): (ShardHeader, Vec<Value>) = decode("k", &text).unwrap();
        assert_eq!(h, header());
        assert_eq!(r, records);
    }

    #[test]
    fn a_bad_line_is_named() {
        let text = encode(&header(), &[serde_json::json!(1)]).unwrap() + "{not json\n";
        let err = decode::<ShardHeader, Value>("runs/x.jsonl", &text).unwrap_err().to_string();
        assert!(err.contains("runs/x.jsonl, line 3"), "{err}");
        let err = decode::<ShardHeader, Value>("k", "").unwrap_err().to_string();
        assert!(err.contains("header"), "{err}");
    }
}
