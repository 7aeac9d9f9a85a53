//! RepoQA contexts sized with Code Llama's tokenizer, as the official harness sizes them:
//! needle spans and context sizes for every needle of the golden RepoQA set (16384 tokens,
//! and 4096 tokens with both comment-cleaning modes) equal the official `make_code_context`'s
//! (figures in tasks/tests/data/repoqa_codellama_spans.jsonl, with their provenance beside
//! them). (`context_tokenizer_fetch.rs` tests the default's fetch.)
//!
//! The tokenizer is the one `scripts/fetch-codellama-tokenizer.sh` builds from registry
//! packages (the hub is out of reach in CI); `scripts/test.sh` runs that script first.

use codesweep_test_support::golden as common;

use std::path::Path;

use codesweep_engine::TextTokenizer;
use codesweep_tasks::input::parse_json_document;
use codesweep_tasks::repoqa::context::{build_snf_tasks, CommentMode, SourceDataset, TokenizeError};
use codesweep_tasks::repoqa::{Language, RepoqaGrammars};
use codesweep_worker::context_tokenizer;
use common::{codellama_tokenizer_file, golden_dir};
use serde_json::Value;
use sha2::{Digest, Sha256};


fn reference_spans() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/tests/data/repoqa_codellama_spans.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn needle_spans_under_codellama_equal_the_official_harness() {
    let tokenizer = TextTokenizer::from_file(&codellama_tokenizer_file(), Vec::new()).unwrap();
    context_tokenizer::check_official_vocabulary(&codellama_tokenizer_file()).unwrap();
    // What the worker counts with: the official `len(tokenizer.tokenize(text))`.
    let count = |text: &str| -> Result<usize, TokenizeError> {
        tokenizer.tokenize(text).map(|ids| ids.len()).map_err(|e| Box::new(e) as TokenizeError)
    };
    let bytes = std::fs::read(golden_dir().join("repoqa/dataset.json")).unwrap();
    let dataset = SourceDataset::from_json("dataset.json", &parse_json_document("dataset.json", &bytes).unwrap()).unwrap();
    let grammars_path = RepoqaGrammars::default_reference_path().expect("HOME or CODESWEEP_GRAMMARS_DIR is set");
    let grammars = RepoqaGrammars::load_reference(&grammars_path)
        .unwrap_or_else(|e| panic!("{e}\n(run scripts/fetch-repoqa-grammars.sh)"));

    let expected = reference_spans();
    let settings = [(16384, CommentMode::None), (4096, CommentMode::NoPadding), (4096, CommentMode::PositionalPadding)];
    let mut compared = 0;
    let mut failures = Vec::new();
    for (size, mode) in settings {
        let rows: Vec<&Value> = expected
            .iter()
            .filter(|r| r["code_context_size"].as_u64() == Some(size as u64) && r["clean_comments"] == mode.name())
            .collect();
        assert_eq!(rows.len(), 150, "reference rows for {size} {}", mode.name());
        for language in ["python", "cpp", "java", "typescript", "rust"] {
            let parsed: Language = language.parse().unwrap();
            let tasks = build_snf_tasks(&dataset, parsed, size, mode, &count, &grammars).unwrap();
            let theirs: Vec<&&Value> = rows.iter().filter(|r| r["language"] == language).collect();
            assert_eq!(tasks.len(), theirs.len(), "{language} {size} {}", mode.name());
            for (task, row) in tasks.iter().zip(theirs) {
                let at = format!("{size} {} {}", mode.name(), task.task_id());
                assert_eq!((row["repo"].as_str(), row["name"].as_str()), (Some(task.repo.as_str()), Some(task.name.as_str())), "{at}");
                assert_eq!(row["position_ratio"].as_f64(), Some(task.position_ratio), "{at}");
                let ours = (task.context.needle_token_start, task.context.needle_token_end, task.context.code_context_ntokens);
                let number = |key: &str| row[key].as_u64().unwrap_or(u64::MAX) as usize;
                let official = (number("needle_token_start"), number("needle_token_end"), number("code_context_ntokens"));
                if ours != official {
                    failures.push(format!("{at}: (start, end, ntokens) ours {ours:?}, official {official:?}"));
                }
                if sha256_hex(&task.context.code_context) != row["code_context_sha256"].as_str().unwrap_or_default() {
                    failures.push(format!("{at}: the code context differs"));
                }
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 450);
    assert!(failures.is_empty(), "{} of 450 differ:\n{}", failures.len(), failures.join("\n"));
}
