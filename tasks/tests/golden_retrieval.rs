//! CrossCodeEval retrieval golden vectors: for 4 languages x 4 configurations of the official
//! prompt builder, every output row and every debug value (query, query tokens, top 10) equal
//! the official ones; BM25 and Jaccard rows byte for byte, TF-IDF rows with scores within 1e-12.
//!
//! Needs the project sources (`scripts/fetch-retrieval-sources.sh`, read from
//! `$CODESWEEP_RETRIEVAL_SOURCES` or `~/.cache/codesweep/retrieval-sources`) and NLTK's English
//! Punkt tables (fetched by `codesweep retrieve` or `scripts/fetch-punkt-english.sh`, `$CODESWEEP_PUNKT_DIR` or
//! `~/.cache/codesweep/punkt_tab/english`). Missing data fails the test unless
//! `CODESWEEP_SKIP_RETRIEVAL_GOLDEN=1` says to skip it.

use codesweep_test_support::golden as common;

use std::path::PathBuf;

use codesweep_tasks::cceval::Language;
use codesweep_tasks::input::parse_jsonl;
use codesweep_tasks::pycompat::json::dumps;
use codesweep_tasks::retrieval::punkt::{Punkt, PunktParams};
use codesweep_tasks::retrieval::{retrieve, ExampleRecord, Options, RankingFn, Retrieval, Tokenizer};
use common::{golden_dir, read, read_jsonl};
use serde_json::{json, Value};

fn cache_dir(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/codesweep").join(default))
}

/// The sources and Punkt tables, or `None` when absent and skipping was asked for.
fn inputs() -> Option<(PathBuf, Tokenizer)> {
    let sources = cache_dir("CODESWEEP_RETRIEVAL_SOURCES", "retrieval-sources");
    let punkt = cache_dir("CODESWEEP_PUNKT_DIR", "punkt_tab/english");
    let present = sources.join("python").is_dir() && punkt.join("ortho_context.tab").is_file();
    if !present {
        if std::env::var("CODESWEEP_SKIP_RETRIEVAL_GOLDEN").is_ok_and(|v| v == "1") {
            eprintln!("skipping the retrieval golden test: no sources at {} or Punkt at {}", sources.display(), punkt.display());
            return None;
        }
        panic!(
            "retrieval golden data missing: run scripts/fetch-retrieval-sources.sh and scripts/fetch-punkt-english.sh \
             (sources: {}, punkt: {}), or set CODESWEEP_SKIP_RETRIEVAL_GOLDEN=1",
            sources.display(),
            punkt.display()
        );
    }
    let params = PunktParams::load(&punkt).expect("Punkt tables");
    assert_eq!(params.sizes(), (156, 39, 37, 20366), "NLTK's English punkt_tab");
    Some((sources, Tokenizer::new(Punkt::new(params))))
}

fn configs() -> [(&'static str, Options); 4] {
    [
        ("line_completion_rg1_bm25", Options::rg1(RankingFn::Bm25)),
        ("line_completion_oracle_bm25", Options::oracle(RankingFn::Bm25)),
        ("line_completion_rg1_jaccard_sim", Options::rg1(RankingFn::JaccardSim)),
        ("line_completion_rg1_tfidf", Options::rg1(RankingFn::Tfidf)),
    ]
}

/// Same JSON, floats within `tolerance` (TF-IDF: BLAS summation order).
fn close(a: &Value, b: &Value, tolerance: f64) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() <= tolerance,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| close(p, q, tolerance)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k1, v1), (k2, v2))| k1 == k2 && close(v1, v2, tolerance))
        }
        _ => a == b,
    }
}

fn check_debug(stem: &str, debug: &[Value], records: &[ExampleRecord], results: &[Retrieval], tolerance: f64) -> usize {
    let mut checked = 0;
    for d in debug.iter().filter(|d| d["config"] == stem) {
        let i = records.iter().position(|r| r.value["metadata"]["task_id"] == d["task_id"]).expect("debug task in examples");
        let r = &results[i];
        let context = format!("{stem} debug {}", d["task_id"]);
        assert_eq!(r.status.name(), d["status"], "{context}: status");
        assert_eq!(json!(r.num_cross_files), d["num_cross_files"], "{context}: num_cross_files");
        assert_eq!(json!(r.num_chunks), d["num_chunks"], "{context}: num_chunks");
        assert_eq!(json!(r.num_candidates), d["num_candidates"], "{context}: num_candidates");
        assert_eq!(json!(r.query), d["query"], "{context}: query");
        assert_eq!(json!(r.query_tokens), d["query_tokens"], "{context}: query_tokens");
        let top10 = json!(r.top10.iter().map(|(id, s)| json!([id, s])).collect::<Vec<_>>());
        assert!(close(&top10, &d["top10"], tolerance), "{context}: top10\n ours {top10}\n gold {}", d["top10"]);
        checked += 1;
    }
    checked
}

#[test]
fn retrieval_matches_the_official_prompt_builder() {
    let Some((sources, tokenizer)) = inputs() else { return };
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for language in Language::ALL {
        let golden = golden_dir();
        let examples_path = golden.join("cceval").join(language.name()).join("examples.jsonl");
        let parsed = parse_jsonl("examples.jsonl", &read(&examples_path), ExampleRecord::from_json);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        let records: Vec<ExampleRecord> = parsed.records.into_iter().map(|r| r.value).collect();
        let dir = golden.join("retrieval").join(language.name());
        let debug = read_jsonl(&dir.join("debug.jsonl"));
        for (stem, options) in configs() {
            assert_eq!(options.output_file_name(), format!("{stem}.jsonl"));
            let results = retrieve(&records, &sources.join(language.name()), language, &options, &tokenizer, None)
                .unwrap_or_else(|e| panic!("{language} {stem}: {e}"));
            let expected = String::from_utf8(read(&dir.join(format!("{stem}.jsonl")))).expect("UTF-8");
            let expected: Vec<&str> = expected.lines().collect();
            assert_eq!(results.len(), expected.len(), "{language} {stem}: row count");
            let tfidf = options.ranking == RankingFn::Tfidf;
            let tolerance = if tfidf { 1e-12 } else { 0.0 };
            let (mut identical, mut equivalent) = (0, 0);
            for (i, (record, result)) in records.iter().zip(&results).enumerate() {
                // The golden rows keep only metadata and crossfile_context.
                let full = result.apply(&record.value, language);
                let row = json!({"metadata": full["metadata"], "crossfile_context": full["crossfile_context"]});
                let ours = dumps(&row);
                if ours == expected[i] {
                    identical += 1;
                    continue;
                }
                let gold: Value = serde_json::from_str(expected[i]).expect("golden JSON");
                if tfidf && close(&row, &gold, tolerance) && row["crossfile_context"]["text"] == gold["crossfile_context"]["text"] {
                    equivalent += 1;
                    continue;
                }
                failures.push(format!("{language} {stem} row {i} ({}):\n ours {ours}\n gold {}", record.value["metadata"]["task_id"], expected[i]));
            }
            let debugged = check_debug(stem, &debug, &records, &results, tolerance);
            report.push(format!("{:<10} {stem:<32} {identical} identical, {equivalent} within 1e-12, {debugged} debug rows of {}", language.name(), results.len()));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{} rows differ:\n{}", failures.len(), failures.iter().take(3).cloned().collect::<Vec<_>>().join("\n"));
}
