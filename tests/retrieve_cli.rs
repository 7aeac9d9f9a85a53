//! `codesweep retrieve` as a user runs it: a small repository written by the test, the
//! official output layout, errors naming file/line/field, and (with the fetched sources) the
//! golden Python RG-1 BM25 file; dense retrieval with a tiny real BERT the test writes, locally
//! and through `codesweep serve`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use support::common;
use support::{run_codesweep as codesweep, start_serve, text, write};

/// A Punkt model with no learned parameters (enough for code without abbreviations).
fn empty_punkt(dir: &Path) -> PathBuf {
    let punkt = dir.join("punkt");
    for name in ["abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab"] {
        write(&punkt.join(name), "");
    }
    punkt
}

/// Repository `demo` (`pkg/util.py`, `pkg/models.py`, `other/far.py`, a hidden file) and two
/// examples in `pkg/main.py`.
fn fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let repo = dir.join("repos/demo");
    let util: String = (0..25).map(|i| format!("def helper_{i}(x):\n    return x + {i}\n")).collect();
    write(&repo.join("pkg/util.py"), &util);
    write(&repo.join("pkg/models.py"), "class Model:\n    def save(self):\n        return self\n");
    write(&repo.join("other/far.py"), "FAR = 1\n");
    write(&repo.join(".hidden/secret.py"), "def helper_3(): pass\n");
    write(&repo.join("pkg/main.py"), "import util\n");
    let examples = dir.join("examples.jsonl");
    let record = |id: &str, file: &str| {
        format!(
            r#"{{"prompt": "import util\nvalue = helper_3(", "groundtruth": "1)", "right_context": "", "metadata": {{"task_id": "{id}", "repository": "demo", "file": "{file}"}}, "crossfile_context": {{"text": "old", "list": []}}, "extra": 1}}"#
        )
    };
    write(&examples, &format!("{}\n{}\n", record("t/0", "pkg/main.py"), record("t/1", "pkg/missing.py")));
    (dir.join("repos"), examples)
}

fn run_retrieve(dir: &Path, extra: &[&str]) -> Output {
    let (repos, examples) = fixture(dir);
    let punkt = empty_punkt(dir);
    let mut args = vec![
        "retrieve", "--language", "python", "--examples", examples.to_str().unwrap(),
        "--repos", repos.to_str().unwrap(), "--punkt", punkt.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    codesweep(&args)
}

#[test]
fn writes_the_official_file_with_context_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let result = run_retrieve(dir.path(), &["--retriever", "bm25", "--query", "last_n_lines", "--next-chunk", "--out", out.to_str().unwrap()]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let written = std::fs::read_to_string(out.join("line_completion_rg1_bm25.jsonl")).unwrap();
    let rows: Vec<Value> = written.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    let keys: Vec<&str> = rows[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["prompt", "groundtruth", "right_context", "metadata", "crossfile_context", "extra"], "key order kept");
    let cfc = &rows[0]["crossfile_context"];
    let list = cfc["list"].as_array().unwrap();
    assert!(!list.is_empty() && list.len() <= 5);
    // The best chunk of util.py contains helper_3; with --next-chunk the following chunk is returned.
    assert_eq!(list[0]["filename"], "pkg/util.py");
    assert!(list[0]["retrieved_chunk"].as_str().unwrap().starts_with("def helper_5"), "{}", list[0]);
    assert!(cfc["text"].as_str().unwrap().starts_with("# Here are some relevant code fragments from other files of the repo:\n\n"));
    assert!(list.iter().all(|c| c["filename"] != ".hidden/secret.py" && c["filename"] != "pkg/main.py"));
    assert_eq!(rows[1]["crossfile_context"], serde_json::json!({}), "file not in the project -> {{}}");
    assert!(text(&result.stderr).contains("1 file_not_found_in_project"), "{}", text(&result.stderr));
}

#[test]
fn oracle_tfidf_and_file_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("custom.jsonl");
    let result = run_retrieve(dir.path(), &["--retriever", "tfidf", "--query", "groundtruth", "--out", out.to_str().unwrap()]);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let first: Value = serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().next().unwrap()).unwrap();
    let score = &first["crossfile_context"]["list"][0]["score"];
    assert!(score.as_array().is_some_and(|a| a.len() == 1), "TF-IDF scores are one-element lists: {score}");
}

#[test]
fn bad_inputs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let result = run_retrieve(dir.path(), &["--retriever", "dense", "--out", out.to_str().unwrap()]);
    assert!(!result.status.success());
    assert!(text(&result.stderr).contains("needs --embedder DIR"), "{}", text(&result.stderr));
    let nowhere = dir.path().join("no-model");
    let result = run_retrieve(dir.path(), &["--retriever", "dense", "--embedder", nowhere.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(!result.status.success());
    assert!(text(&result.stderr).contains("no-model"), "{}", text(&result.stderr));

    let result = run_retrieve(dir.path(), &["--retriever", "bm25", "--next-chunk", "--query", "groundtruth", "--out", out.to_str().unwrap()]);
    assert!(!result.status.success());
    assert!(text(&result.stderr).contains("--next-chunk cannot be combined"), "{}", text(&result.stderr));

    let examples = dir.path().join("examples.jsonl");
    let mut content = std::fs::read_to_string(&examples).unwrap();
    content.push_str("{\"prompt\": \"x\", \"groundtruth\": \"y\", \"metadata\": {\"file\": \"a.py\"}}\n");
    std::fs::write(&examples, content).unwrap();
    let punkt = dir.path().join("punkt");
    let result = codesweep(&[
        "retrieve", "--language", "python", "--retriever", "bm25", "--examples", examples.to_str().unwrap(),
        "--repos", dir.path().join("repos").to_str().unwrap(), "--punkt", punkt.to_str().unwrap(), "--out", out.to_str().unwrap(),
    ]);
    assert!(!result.status.success());
    let stderr = text(&result.stderr);
    assert!(stderr.contains("examples.jsonl:3: field `metadata.repository`"), "{stderr}");

    let result = codesweep(&[
        "retrieve", "--language", "python", "--retriever", "bm25", "--examples", examples.to_str().unwrap(),
        "--repos", dir.path().join("repos").to_str().unwrap(), "--punkt", dir.path().join("nope").to_str().unwrap(),
        "--out", out.to_str().unwrap(),
    ]);
    assert!(!result.status.success());
    let stderr = text(&result.stderr);
    assert!(stderr.contains("nope does not hold them (pass --punkt DIR)") && stderr.contains("abbrev_types.txt"), "{stderr}");
}

/// Ten short lines of code, different for each `seed`.
fn ten_lines(seed: usize) -> String {
    let words = ["alpha", "beta", "gamma", "delta", "epsilon", "omega", "sigma", "kappa"];
    (0..10).map(|i| format!("{} = {}({})", words[(seed + i) % 8], words[(seed * 3 + i * 5) % 8], i * seed)).collect::<Vec<_>>().join("\n")
}

/// Repository `dense` with three one-chunk files and an example whose last 10 prompt lines are
/// exactly the chunk of `pkg/b.py`.
fn dense_fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let repo = dir.join("repos/dense");
    for (name, seed) in [("a", 1), ("b", 2), ("c", 3)] {
        write(&repo.join(format!("pkg/{name}.py")), &format!("{}\n", ten_lines(seed)));
    }
    write(&repo.join("pkg/main.py"), "import b\n");
    let prompt = format!("import b\n{}\n", ten_lines(2));
    let record = serde_json::json!({"prompt": prompt, "groundtruth": "x", "metadata": {"task_id": "d/0", "repository": "dense", "file": "pkg/main.py"}});
    let examples = dir.join("dense.jsonl");
    write(&examples, &format!("{record}\n"));
    (dir.join("repos"), examples)
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b)).max(1e-8)
}


#[test]
fn dense_ranks_by_embedding_cosine_locally_and_through_an_endpoint() {
    use codesweep_engine::{Embedder, EmbedderOptions};
    let dir = tempfile::tempdir().unwrap();
    let written = common::encoder::write_encoder(dir.path(), common::encoder::EncoderArch::Bert, &common::encoder::wordpiece_tokenizer_json(400));
    // Named like the official ranker's model, so the file gets the official name.
    let bert = dir.path().join("unixcoder-base");
    std::fs::rename(&written, &bert).unwrap();
    let (repos, examples) = dense_fixture(dir.path());
    let punkt = empty_punkt(dir.path());
    let base = [
        "retrieve", "--language", "python", "--examples", examples.to_str().unwrap(), "--repos", repos.to_str().unwrap(),
        "--punkt", punkt.to_str().unwrap(), "--retriever", "dense", "--query", "last_n_lines",
    ];
    let out = dir.path().join("out");
    let mut local = base.to_vec();
    local.extend(["--embedder", bert.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let result = codesweep(&local);
    assert!(result.status.success(), "{}", text(&result.stderr));
    // The official file name of run.sh's `--ranker unixcoder --ranking_fn cosine_sim`.
    let written = std::fs::read_to_string(out.join("line_completion_rg1_unixcoder_cosine_sim.jsonl")).unwrap();
    let row: Value = serde_json::from_str(written.lines().next().unwrap()).unwrap();
    let list = row["crossfile_context"]["list"].as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["filename"], "pkg/b.py", "the chunk equal to the query ranks first: {list:?}");
    assert!((list[0]["score"].as_f64().unwrap() - 1.0).abs() < 1e-5, "{}", list[0]);

    // Every score is the cosine of the engine's embeddings of the stripped texts, in order.
    let embedder = Embedder::load(&bert, &candle_core::Device::Cpu, EmbedderOptions::default()).unwrap();
    let query_text = ten_lines(2);
    let chunks: Vec<String> = list.iter().map(|c| c["retrieved_chunk"].as_str().unwrap().to_string()).collect();
    let mut texts = vec![query_text.as_str()];
    texts.extend(chunks.iter().map(String::as_str));
    let vectors = embedder.embed(&texts).unwrap();
    let mut previous = f64::INFINITY;
    for (i, item) in list.iter().enumerate() {
        let expected = cosine(&vectors[0], &vectors[i + 1]);
        let score = item["score"].as_f64().unwrap();
        assert!((score - expected).abs() < 1e-5, "chunk {i}: score {score}, cosine {expected}");
        assert!(score <= previous, "scores descend");
        previous = score;
    }
    assert!(list[1]["score"].as_f64().unwrap() < 0.9999, "other chunks are not the query");

    // The same retrieval through `codesweep serve --embedder` (beside a generator) with the same
    // encoder and batch size.
    let generator = common::write_gguf(dir.path(), common::Arch::Qwen2, candle_core::quantized::GgmlDType::Q8_0, &common::trained_tokenizer_json(300));
    let (_server, url) =
        start_serve(&["--model", generator.to_str().unwrap(), "--embedder", bert.to_str().unwrap(), "--embed-batch-size", "64"]);
    let remote_out = dir.path().join("remote");
    let mut remote = base.to_vec();
    remote.extend(["--embedder-endpoint", &url, "--embedder-model", "unixcoder-base", "--out", remote_out.to_str().unwrap()]);
    let result = codesweep(&remote);
    assert!(result.status.success(), "{}", text(&result.stderr));
    let remote_written = std::fs::read_to_string(remote_out.join("line_completion_rg1_unixcoder_cosine_sim.jsonl")).unwrap();
    assert_eq!(remote_written, written, "endpoint and local embeddings give the same file");
}

#[test]
fn without_tables_or_network_the_error_says_how_to_supply_them() {
    let dir = tempfile::tempdir().unwrap();
    let (repos, examples) = fixture(dir.path());
    // A fresh cache and a proxy that refuses connections: the tables cannot be fetched.
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let proxy = format!("http://127.0.0.1:{refused}");
    let out = dir.path().join("out.jsonl");
    let result = support::codesweep()
        .args(["retrieve", "--language", "python", "--retriever", "bm25", "--examples", examples.to_str().unwrap()])
        .args(["--repos", repos.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .env("CODESWEEP_CACHE", dir.path().join("cache"))
        .env_remove("CODESWEEP_PUNKT_DIR")
        .env("HTTPS_PROXY", &proxy)
        .env("https_proxy", &proxy)
        .env("ALL_PROXY", &proxy)
        .output()
        .unwrap();
    let stderr = text(&result.stderr);
    assert!(!result.status.success() && !out.exists());
    assert!(stderr.contains("fetching NLTK's English Punkt tables"), "it says it fetches: {stderr}");
    assert!(stderr.contains("cannot fetch NLTK's English Punkt tables"), "{stderr}");
    assert!(stderr.contains("pass --punkt DIR (or set CODESWEEP_PUNKT_DIR)"), "it names the flag and the variable: {stderr}");
    assert!(!dir.path().join("cache/punkt_tab/english").exists(), "nothing half-fetched is left as the tables");
}
