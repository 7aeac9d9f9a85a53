//! A sweep over an OpenAI-compatible endpoint (`codesweep serve` in another process) with the
//! served model's tokenizer named in the spec: RepoQA contexts and CrossCodeEval prompt budgets
//! are sized with it, RepoQA goes through `/v1/chat/completions`, and every table equals the
//! one of the same model run locally.

mod support;

use candle_core::quantized::GgmlDType;
use serde_json::Value;
use support::*;

#[test]
fn an_endpoint_model_with_its_tokenizer_gives_the_local_tables() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let repoqa = write_repoqa_dataset(dir.path());
    let tokenizer = common::trained_tokenizer_json(400);
    let tokenizer_file = dir.path().join("tokenizer.json");
    std::fs::write(&tokenizer_file, &tokenizer).unwrap();
    let model = common::write_gguf_chat(dir.path(), common::Arch::Qwen2, GgmlDType::Q8_0, &tokenizer, common::CHATML);

    let (server, url) = start_serve(&["--model", model.to_str().unwrap(), "--served-name", "tiny"]);

    let store = dir.path().join("store");
    let spec = format!(
        r#"[run]
name = "endpoint"
store = "{store}"
shard_size = 5

[[models]]
name = "local"
path = "{model}"

[[models]]
name = "served"
endpoint = "{url}"
api_model = "tiny"
chat = true
tokenizer = "tokenizer.json"

[generation]
max_new_tokens = 8
{budgets}

[cceval]
data_dir = "{data}"
languages = ["python"]

{repoqa_section}"#,
        store = store.display(),
        model = model.display(),
        data = data.display(),
        budgets = TINY_BUDGETS,
        repoqa_section = tiny_repoqa_section(&repoqa),
    );
    let spec_file = dir.path().join("endpoint.toml");
    std::fs::write(&spec_file, spec).unwrap();
    let out = codesweep().args(["run", spec_file.to_str().unwrap(), "--quiet", "--workers", "2"]).output().unwrap();
    assert!(out.status.success(), "run failed: {}", String::from_utf8_lossy(&out.stderr));

    let (cells, rows) = report_cells(&store, "endpoint");
    let strip = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("model");
        v
    };
    let by_model = |list: &[Value], model: &str| -> Vec<Value> { list.iter().filter(|c| c["model"] == model).map(strip).collect() };
    assert_eq!(by_model(&cells, "served"), by_model(&cells, "local"), "CrossCodeEval tables differ");
    assert_eq!(by_model(&rows, "served"), by_model(&rows, "local"), "RepoQA tables differ");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["tasks"], 8, "{}", rows[0]);
    // The answers themselves are the same text.
    let answers = |model: &str| {
        std::fs::read_to_string(store.join(format!("endpoint/report/exports/repoqa/{model}/ctx64_none/outputs.jsonl"))).unwrap()
    };
    assert_eq!(answers("served"), answers("local"));
    drop(server);
}
