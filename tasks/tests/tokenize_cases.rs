//! Differential cases for the tokenizer: 1,200 random texts made of the pieces NLTK treats
//! specially (abbreviations, initials, numbers, ellipses, quotes, contractions, sentence
//! starters), with the tokens of the official `tokenize_nltk` and NLTK's Punkt sentences
//! (`scripts/reference/make_tokenize_cases.py`, NLTK 3.10.4 with the English punkt_tab).
//!
//! Needs NLTK's English Punkt tables (`scripts/fetch-punkt-english.sh`); missing tables fail
//! the test unless `CODESWEEP_SKIP_RETRIEVAL_GOLDEN=1`.

use std::path::PathBuf;

use codesweep_tasks::retrieval::punkt::{Punkt, PunktParams};
use codesweep_tasks::retrieval::Tokenizer;
use serde_json::Value;

fn punkt() -> Option<Punkt> {
    let dir = std::env::var_os("CODESWEEP_PUNKT_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/codesweep/punkt_tab/english")
    });
    match PunktParams::load(&dir) {
        Ok(params) => Some(Punkt::new(params)),
        Err(e) if std::env::var("CODESWEEP_SKIP_RETRIEVAL_GOLDEN").is_ok_and(|v| v == "1") => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("{e}: run scripts/fetch-punkt-english.sh, or set CODESWEEP_SKIP_RETRIEVAL_GOLDEN=1"),
    }
}

#[test]
fn tokens_and_sentences_match_nltk() {
    let Some(punkt) = punkt() else { return };
    let tokenizer = Tokenizer::new(punkt.clone());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tokenize_cases.jsonl");
    let cases = std::fs::read_to_string(&path).expect("test data");
    let mut failures = Vec::new();
    let mut count = 0;
    for line in cases.lines() {
        let case: Value = serde_json::from_str(line).expect("JSON");
        let text = case["text"].as_str().expect("text");
        let sentences: Vec<&str> = punkt.sentence_spans(text).into_iter().map(|(s, e)| &text[s..e]).collect();
        let tokens = tokenizer.tokenize(text);
        if serde_json::json!(sentences) != case["sentences"] || serde_json::json!(tokens) != case["tokens"] {
            failures.push(format!("{text:?}\n ours {sentences:?} {tokens:?}\n nltk {} {}", case["sentences"], case["tokens"]));
        }
        count += 1;
    }
    assert_eq!(count, 1200);
    assert!(failures.is_empty(), "{} of {count} differ:\n{}", failures.len(), failures[..failures.len().min(5)].join("\n"));
}
