//! Fixtures the worker's integration tests share (each test binary uses some of them).
#![allow(dead_code)]

use std::path::PathBuf;

/// The Code Llama tokenizer that scripts/fetch-codellama-tokenizer.sh builds from registry
/// packages, in codesweep's cache (`$CODESWEEP_CACHE`, else `~/.cache/codesweep`).
pub fn codellama_tokenizer_file() -> PathBuf {
    let cache = std::env::var_os("CODESWEEP_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/codesweep"));
    let path = cache.join("tokenizers/codellama-7b-instruct-standin/tokenizer.json");
    assert!(path.is_file(), "{} is missing: run scripts/fetch-codellama-tokenizer.sh", path.display());
    path
}

/// The golden vectors: `$CODESWEEP_GOLDEN`, else the repository's `tests/golden`.
pub fn golden_dir() -> PathBuf {
    let dir = std::env::var_os("CODESWEEP_GOLDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/golden"));
    assert!(dir.is_dir(), "golden vectors not found at {}; set CODESWEEP_GOLDEN", dir.display());
    dir
}
