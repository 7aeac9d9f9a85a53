//! Fixtures the worker's integration tests share.

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
