//! The golden vectors of the official scripts (`tests/golden`) and the helpers the golden
//! tests share: locating them, reading them, comparing JSON values as the official files do.

use std::path::PathBuf;

use serde_json::Value;

/// `$CODESWEEP_GOLDEN`, else the repository's `tests/golden`. A missing folder is a
/// failure, never a skip: these tests are the proof that our numbers equal the official ones.
pub fn golden_dir() -> PathBuf {
    let dir = std::env::var_os("CODESWEEP_GOLDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/golden"));
    assert!(dir.is_dir(), "golden vectors not found at {}; set CODESWEEP_GOLDEN", dir.display());
    dir
}

/// Reads a golden file; where only `FILE.gz` is there (the largest files are kept gzipped, so
/// the checkout stays small enough to send to a GPU machine), its decompressed bytes.
pub fn read(path: &PathBuf) -> Vec<u8> {
    let mut gzipped = path.clone().into_os_string();
    gzipped.push(".gz");
    let gzipped = PathBuf::from(gzipped);
    if path.exists() || !gzipped.exists() {
        return std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    }
    let file = std::fs::File::open(&gzipped).unwrap_or_else(|e| panic!("cannot read {}: {e}", gzipped.display()));
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(file), &mut bytes)
        .unwrap_or_else(|e| panic!("cannot decompress {}: {e}", gzipped.display()));
    bytes
}

/// Reads a JSON-lines golden file into values.
pub fn read_jsonl(path: &PathBuf) -> Vec<Value> {
    String::from_utf8(read(path))
        .expect("golden files are UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("golden JSON"))
        .collect()
}

/// Equal JSON values, floats within 1e-9, and an integer never equal to a float
/// (the official files distinguish `0` from `0.0`).
pub fn assert_json_close(ours: &Value, expected: &Value, context: &str) {
    match (ours, expected) {
        (Value::Number(a), Value::Number(b)) => {
            assert_eq!(a.is_f64(), b.is_f64(), "{context}: int/float kind differs: ours {a}, expected {b}");
            let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-9, "{context}: ours {x}, expected {y}");
        }
        (Value::Object(a), Value::Object(b)) => {
            let keys_a: Vec<_> = a.keys().collect();
            let keys_b: Vec<_> = b.keys().collect();
            assert_eq!(keys_a, keys_b, "{context}: keys differ");
            for (key, value) in b {
                assert_json_close(&a[key], value, &format!("{context}.{key}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{context}: lengths differ: ours {a:?}, expected {b:?}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_json_close(x, y, &format!("{context}[{i}]"));
            }
        }
        _ => assert_eq!(ours, expected, "{context}"),
    }
}

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
