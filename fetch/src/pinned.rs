//! One pinned file: fetched once from an immutable URL into the cache, checked (by its sha256,
//! or by what it must contain where only the content is known), and moved into place only when
//! whole and verified.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Why a pinned file could not be had.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    /// The download failed (offline, refused, cut short).
    #[error("cannot fetch {what} from {url}: {message}. {hint}")]
    Fetch {
        /// What the file is.
        what: String,
        /// Where it was fetched from.
        url: String,
        /// What went wrong.
        message: String,
        /// How to supply the file by hand.
        hint: String,
    },
    /// The bytes fetched (or found in the cache) are not the pinned ones.
    #[error("{what}: {path} has sha256 {got}, not the pinned {expected}; delete it to fetch it again. {hint}")]
    Checksum {
        /// What the file is.
        what: String,
        /// The file checked.
        path: PathBuf,
        /// The pinned digest.
        expected: String,
        /// The digest found.
        got: String,
        /// How to supply the file by hand.
        hint: String,
    },
    /// The file fetched (or found in the cache) does not hold what it must.
    #[error("{what}: {path} is not the pinned file: {message}; delete it to fetch it again. {hint}")]
    Invalid {
        /// What the file is.
        what: String,
        /// The file checked.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
        /// How to supply the file by hand.
        hint: String,
    },
    /// Writing into the cache failed.
    #[error("{what}: cannot write {path}: {message}")]
    Io {
        /// What the file is.
        what: String,
        /// The path written.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// codesweep's cache folder: `$CODESWEEP_CACHE`, else `$HOME/.cache/codesweep`, else
/// `.codesweep-cache` in the current directory.
pub fn cache_dir() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    set("CODESWEEP_CACHE")
        .or_else(|| set("HOME").map(|home| home.join(".cache/codesweep")))
        .unwrap_or_else(|| PathBuf::from(".codesweep-cache"))
}

/// Checks a file's content; `Err` says what is wrong.
pub type ContentCheck = fn(&Path) -> Result<(), String>;

/// A file fetched once from a URL into a fixed place in the cache, checked by its sha256 and
/// by its content where those are known (a user's own URL may have neither).
#[derive(Debug, Clone)]
pub struct PinnedFile {
    /// What it is, for messages ("CodeLlama-7b-Instruct's tokenizer.json").
    pub what: String,
    /// Where to fetch it (an immutable URL: a release or a commit, never a branch).
    pub url: String,
    /// Its sha256, lower-case hex, where the exact bytes are known.
    pub sha256: Option<String>,
    /// A check of what the file must contain (e.g. a digest of a tokenizer's vocabulary),
    /// for files whose bytes are not published; run on every use, as the sha256 is.
    pub content_check: Option<ContentCheck>,
    /// Where it is kept.
    pub path: PathBuf,
    /// How to supply it without a network (the flag or variable to point at a copy).
    pub offline_hint: String,
}

/// The sha256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// An HTTP agent that trusts the system's certificate store (`SSL_CERT_FILE`/`SSL_CERT_DIR`
/// honoured), so fetching works behind a proxy with its own authority; Mozilla's roots when
/// the system has none.
fn agent() -> ureq::Agent {
    let system = rustls_native_certs::load_native_certs().certs;
    let roots = if system.is_empty() {
        ureq::tls::RootCerts::WebPki
    } else {
        let certs: Vec<ureq::tls::Certificate<'static>> =
            system.iter().map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned()).collect();
        ureq::tls::RootCerts::new_with_certs(&certs)
    };
    let tls = ureq::tls::TlsConfig::builder().root_certs(roots).build();
    ureq::Agent::config_builder().tls_config(tls).build().into()
}

impl PinnedFile {
    /// The file's path, fetching it first when the cache does not have it (saying so on
    /// stderr). A cached file is checked against the pinned digest every time.
    pub fn ensure(&self) -> Result<PathBuf, AssetError> {
        if self.path.is_file() {
            self.verify(&self.path)?;
            return Ok(self.path.clone());
        }
        let io = |path: &Path, e: std::io::Error| AssetError::Io {
            what: self.what.clone(),
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let folder = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(folder).map_err(|e| io(folder, e))?;
        eprintln!("fetching {} from {} into {}", self.what, self.url, self.path.display());
        let fetch_error = |message: String| AssetError::Fetch {
            what: self.what.clone(),
            url: self.url.clone(),
            message,
            hint: self.offline_hint.clone(),
        };
        let response = agent().get(&self.url).call().map_err(|e| fetch_error(e.to_string()))?;
        // A partial file in the same folder, renamed into place once whole and verified, so a
        // crash or a concurrent fetch never leaves a truncated file under the final name.
        let partial = folder.join(format!(
            ".{}.{}.partial",
            self.path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
            std::process::id()
        ));
        let mut file = std::fs::File::create(&partial).map_err(|e| io(&partial, e))?;
        let copied = std::io::copy(&mut response.into_body().into_reader(), &mut file);
        drop(file);
        if let Err(e) = copied {
            let _ = std::fs::remove_file(&partial);
            return Err(fetch_error(format!("the download broke off: {e}")));
        }
        if let Err(e) = self.verify(&partial) {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        std::fs::rename(&partial, &self.path).map_err(|e| io(&self.path, e))?;
        Ok(self.path.clone())
    }

    fn verify(&self, path: &Path) -> Result<(), AssetError> {
        if let Some(expected) = &self.sha256 {
            let got = sha256_file(path).map_err(|e| AssetError::Io {
                what: self.what.clone(),
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            if &got != expected {
                return Err(AssetError::Checksum {
                    what: self.what.clone(),
                    path: path.to_path_buf(),
                    expected: expected.clone(),
                    got,
                    hint: self.offline_hint.clone(),
                });
            }
        }
        if let Some(check) = self.content_check {
            check(path).map_err(|message| AssetError::Invalid {
                what: self.what.clone(),
                path: path.to_path_buf(),
                message,
                hint: self.offline_hint.clone(),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::{refused_url, serve_once};

    fn pinned(dir: &Path, url: &str, sha256: &str) -> PinnedFile {
        PinnedFile {
            what: "a test file".into(),
            url: url.into(),
            sha256: Some(sha256.into()),
            content_check: None,
            path: dir.join("sub/file.txt"),
            offline_hint: "Point --x at a copy.".into(),
        }
    }

    const HELLO_SHA256: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    #[test]
    fn a_pinned_file_is_fetched_once_and_verified() {
        let dir = tempfile::tempdir().unwrap();
        let file = pinned(dir.path(), &serve_once(b"hello"), HELLO_SHA256);
        let path = file.ensure().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
        // The server answered once; the second call reads the cache.
        assert_eq!(file.ensure().unwrap(), path);
        std::fs::write(&path, "tampered").unwrap();
        assert!(matches!(file.ensure(), Err(AssetError::Checksum { .. })));
    }

    #[test]
    fn wrong_bytes_never_reach_the_final_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = pinned(dir.path(), &serve_once(b"not hello"), HELLO_SHA256);
        let error = file.ensure().unwrap_err().to_string();
        assert!(error.contains("not the pinned") && error.contains("Point --x at a copy."), "{error}");
        assert!(!file.path.exists());
        assert_eq!(std::fs::read_dir(file.path.parent().unwrap()).unwrap().count(), 0, "no partial file left");
    }

    #[test]
    fn a_content_check_stands_in_for_unpublished_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let starts_with_hello = |path: &Path| -> Result<(), String> {
            let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
            text.starts_with("hello").then_some(()).ok_or_else(|| format!("it starts with {:?}", &text[..3.min(text.len())]))
        };
        let checked = |url: String| PinnedFile { sha256: None, content_check: Some(starts_with_hello), ..pinned(dir.path(), &url, "") };
        let error = checked(serve_once(b"bye")).ensure().unwrap_err().to_string();
        assert!(error.contains("is not the pinned file: it starts with \"bye\"") && error.ends_with("Point --x at a copy."), "{error}");
        assert!(!dir.path().join("sub/file.txt").exists());
        let path = checked(serve_once(b"hello world")).ensure().unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), "hello world");
    }

    #[test]
    fn offline_says_how_to_supply_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = pinned(dir.path(), &refused_url(), HELLO_SHA256);
        let error = file.ensure().unwrap_err().to_string();
        assert!(error.starts_with("cannot fetch a test file from http://127.0.0.1:") && error.ends_with("Point --x at a copy."), "{error}");
    }
}
