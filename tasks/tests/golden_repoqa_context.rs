//! RepoQA context golden vectors: for 3 settings (16384 tokens with comments, 4096 tokens
//! with comments removed with and without positional padding) × 150 needles, the context
//! text, its sha256 and the needle's token positions equal the reference
//! `make_code_context`'s (stand-in tokenizer, reference tree-sitter grammars).

use codesweep_test_support::golden as common;

use codesweep_tasks::input::parse_json_document;
use codesweep_tasks::repoqa::context::{
    build_snf_tasks, position_ratio, CommentMode, ContextBuilder, SourceDataset, StandInTokenizer, INSTRUCTION,
};
use codesweep_tasks::repoqa::{Language, RepoqaGrammars};
use common::{golden_dir, read, read_jsonl};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The official grammars; scripts/test.sh fetches them (scripts/fetch-repoqa-grammars.sh).
fn reference_grammars() -> RepoqaGrammars {
    let path = RepoqaGrammars::default_reference_path().expect("HOME or CODESWEEP_GRAMMARS_DIR is set");
    RepoqaGrammars::load_reference(&path)
        .unwrap_or_else(|e| panic!("{e}\n(the golden tests need the reference grammars: run scripts/fetch-repoqa-grammars.sh)"))
}

fn dataset() -> SourceDataset {
    let bytes = read(&golden_dir().join("repoqa/dataset.json"));
    let document = parse_json_document("dataset.json", &bytes).unwrap();
    SourceDataset::from_json("dataset.json", &document).unwrap()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Rebuilds every context of one golden file; returns one line per difference.
fn context_failures(file: &str, size: usize, mode: CommentMode, grammars: &RepoqaGrammars) -> Vec<String> {
    let dataset = dataset();
    let expected = read_jsonl(&golden_dir().join("repoqa/context").join(file));
    assert_eq!(expected.len(), 150, "{file}");
    let mut failures = Vec::new();
    for (line, row) in expected.iter().enumerate() {
        let text = |key: &str| row[key].as_str().unwrap_or_default();
        let number = |key: &str| row[key].as_u64().unwrap_or(u64::MAX) as usize;
        let at = format!("{file}:{} ({} {} {})", line + 1, text("language"), text("repo"), text("name"));
        assert_eq!((row["code_context_size"].as_u64(), text("clean_comments")), (Some(size as u64), mode.name()), "{at}: setting");
        let language: Language = text("language").parse().unwrap();
        let repo = dataset.repos(text("language")).unwrap().iter().find(|r| r.name == text("repo")).unwrap();
        let index = repo.needles.iter().position(|n| n.name == text("name") && n.path == text("path")).unwrap();
        let ratio = position_ratio(index, repo.needles.len());
        assert_eq!(Some(ratio), row["position_ratio"].as_f64(), "{at}: position_ratio");

        let mut builder = ContextBuilder::new(language, size, mode, &StandInTokenizer, grammars);
        let ours = builder.build(&repo.files, &repo.needles[index], ratio).unwrap();
        if ours.code_context != text("code_context") {
            let common = ours.code_context.chars().zip(text("code_context").chars()).take_while(|(a, b)| a == b).count();
            failures.push(format!("{at}: code_context differs after {common} characters"));
        }
        if sha256_hex(&ours.code_context) != text("code_context_sha256") {
            failures.push(format!("{at}: code_context_sha256"));
        }
        let ours_positions = (ours.needle_token_start, ours.needle_token_end, ours.code_context_ntokens);
        let theirs = (number("needle_token_start"), number("needle_token_end"), number("code_context_ntokens"));
        if ours_positions != theirs {
            failures.push(format!("{at}: (needle_token_start, needle_token_end, code_context_ntokens) {ours_positions:?} != {theirs:?}"));
        }
        if Some(ours.needle_slice_byte_char_mismatch) != row["needle_slice_byte_char_mismatch"].as_bool() {
            failures.push(format!("{at}: needle_slice_byte_char_mismatch"));
        }
    }
    failures
}

fn check(file: &str, size: usize, mode: CommentMode) {
    let failures = context_failures(file, size, mode, &reference_grammars());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn contexts_16384_none() {
    check("contexts_16384_none.jsonl", 16384, CommentMode::None);
}

#[test]
fn contexts_4096_no_padding() {
    check("contexts_4096_no_padding.jsonl", 4096, CommentMode::NoPadding);
}

#[test]
fn contexts_4096_positional_padding() {
    check("contexts_4096_positional_padding.jsonl", 4096, CommentMode::PositionalPadding);
}

/// The golden files themselves: each context's sha256 is its text's, so the comparison
/// above cannot pass on a corrupted file.
#[test]
fn golden_hashes_are_of_their_contexts() {
    for file in ["contexts_16384_none.jsonl", "contexts_4096_no_padding.jsonl", "contexts_4096_positional_padding.jsonl"] {
        for row in read_jsonl(&golden_dir().join("repoqa/context").join(file)) {
            let context = row["code_context"].as_str().unwrap();
            assert_eq!(sha256_hex(context), row["code_context_sha256"].as_str().unwrap(), "{file} {}", row["name"]);
        }
    }
}

/// The worker's entry point gives the same contexts, in dataset order, with the
/// reference's prompt around them.
#[test]
fn snf_tasks_for_a_language() {
    let dataset = dataset();
    let expected: Vec<Value> = read_jsonl(&golden_dir().join("repoqa/context/contexts_4096_positional_padding.jsonl"))
        .into_iter()
        .filter(|row| row["language"] == "java")
        .collect();
    let tasks =
        build_snf_tasks(&dataset, Language::Java, 4096, CommentMode::PositionalPadding, &StandInTokenizer, &reference_grammars()).unwrap();
    assert_eq!(tasks.len(), 30);
    for (task, row) in tasks.iter().zip(&expected) {
        assert_eq!((task.repo.as_str(), task.name.as_str()), (row["repo"].as_str().unwrap(), row["name"].as_str().unwrap()));
        assert_eq!(task.context.code_context, row["code_context"].as_str().unwrap(), "{}", task.task_id());
        assert_eq!(Some(task.context.needle_token_start as u64), row["needle_token_start"].as_u64());
        let prompt = task.prompt();
        let description = format!("\nFunction Description:{}\n", task.description);
        assert_eq!(prompt, [INSTRUCTION, &task.context.code_context, &description, INSTRUCTION].concat());
        let json = task.to_json();
        assert_eq!(json["position_ratio"], row["position_ratio"]);
        assert_eq!(json["template"], "instruction\ncode_context\ndescription\ninstruction");
    }
    let err = build_snf_tasks(&SourceDataset::default(), Language::Rust, 4096, CommentMode::None, &StandInTokenizer, &RepoqaGrammars::Bundled)
        .unwrap_err();
    assert_eq!(err.to_string(), "the dataset has no `rust` repositories");
}

