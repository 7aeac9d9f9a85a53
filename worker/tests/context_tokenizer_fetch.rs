//! The default RepoQA context tokenizer (`context_tokenizer = "codellama"`) end to end against
//! a loopback stand-in for the Hugging Face hub: the pinned revision is asked for, the file is
//! checked by its vocabulary and cached, and a file with another vocabulary is refused. Its own
//! test binary: it sets process-wide variables (`HF_ENDPOINT`, `CODESWEEP_CACHE`).

use codesweep_test_support::golden as common;

use codesweep_worker::context_tokenizer::{self, ContextTokenizer, OFFICIAL_REPO, OFFICIAL_REVISION};
use common::codellama_tokenizer_file;

/// Serves `body` at every path over loopback HTTP for `requests` requests; returns the base URL
/// and the paths asked for.
fn serve(body: Vec<u8>, requests: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut paths = Vec::new();
        for _ in 0..requests {
            let Ok((mut stream, _)) = listener.accept() else { break };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && std::io::Read::read(&mut stream, &mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
            paths.push(line.split(' ').nth(1).unwrap_or_default().to_string());
            let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
            let _ = std::io::Write::write_all(&mut stream, answer.as_bytes());
            let _ = std::io::Write::write_all(&mut stream, &body);
        }
        paths
    });
    (url, handle)
}

/// The default choice, end to end, against a loopback stand-in for the hub (`HF_ENDPOINT`):
/// the pinned revision is asked for, the file is checked and cached, and a file with another
/// vocabulary is refused and never cached.
#[test]
fn the_default_fetches_the_pinned_revision_and_checks_its_vocabulary() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let real_tokenizer = std::fs::read(codellama_tokenizer_file()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    // SAFETY: the only test of this binary that reads these variables.
    unsafe {
        std::env::set_var("CODESWEEP_CACHE", cache.path());
    }

    // A tokenizer with another vocabulary: refused, nothing left under the cached name.
    let other = r#"{"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,
        "model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,
        "fuse_unk":false,"byte_fallback":false,"vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}"#;
    let (url, server) = serve(other.as_bytes().to_vec(), 1);
    unsafe {
        std::env::set_var("HF_ENDPOINT", &url);
    }
    let refused = runtime.block_on(context_tokenizer::resolve("codellama", "shard-key", cache.path()));
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("has 3 tokens, Code Llama's has 32016") && message.contains("shard-key"), "{message}");
    server.join().unwrap();
    let cached = context_tokenizer::official_tokenizer_file().path;
    assert!(!cached.exists(), "a refused file was cached");

    // The real vocabulary: fetched from the pinned revision, checked, loaded.
    let (url, server) = serve(real_tokenizer, 1);
    unsafe {
        std::env::set_var("HF_ENDPOINT", &url);
    }
    let resolved = runtime.block_on(context_tokenizer::resolve("codellama", "shard-key", cache.path())).unwrap();
    let ContextTokenizer::Loaded(tokenizer) = resolved else { panic!("codellama resolved to the model's tokenizer") };
    assert_eq!(tokenizer.vocab_size(), 32016);
    assert_eq!(server.join().unwrap(), vec![format!("/{OFFICIAL_REPO}/resolve/{OFFICIAL_REVISION}/tokenizer.json")]);
    assert!(cached.is_file());
    // `model` defers to the evaluated model's tokenizer.
    let model = runtime.block_on(context_tokenizer::resolve("model", "k", cache.path())).unwrap();
    assert!(matches!(model, ContextTokenizer::Model));
}
