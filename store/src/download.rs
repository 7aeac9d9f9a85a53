//! Models given as object-store URLs, copied once into a local cache that many workers may share.
//!
//! Workers of a pool can mount one cache volume (a ReadWriteMany claim): a file is fetched by
//! one of them while the others wait on its lock file, written under a name of its own and
//! renamed into place, and recorded in `<file>.complete.json` with its size, the object's ETag
//! and its sha256. A cached file is reused only when that record matches the object and the
//! file's own sha256; anything else is fetched again.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::store::RunStore;

/// What `<file>.complete.json` records of a finished download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CompleteRecord {
    size: u64,
    e_tag: Option<String>,
    sha256: String,
}

fn sidecar(target: &Path, suffix: &str) -> PathBuf {
    let mut name = target.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(suffix);
    target.with_file_name(name)
}

/// The sha256 of a file, as lower-case hex (the engine's `assets::sha256_file` does the same
/// for pinned assets; the store cannot depend on the engine).
fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Holds `<file>.lock` while one process fetches or checks the file; released on drop.
struct FileLock(std::fs::File);

impl FileLock {
    async fn acquire(target: &Path) -> std::io::Result<Self> {
        let path = sidecar(target, ".lock");
        let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path)?;
        let started = Instant::now();
        let mut told = false;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Self(file)),
                Err(std::fs::TryLockError::WouldBlock) => {
                    if !told && started.elapsed() > Duration::from_secs(2) {
                        eprintln!("waiting for another process fetching {} (lock {})", target.display(), path.display());
                        told = true;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl RunStore {
    /// Copies the object or folder at `url` to `dest` (models given as URLs): a folder's
    /// objects keep their relative paths under `dest`; a single object becomes
    /// `dest/<its name>`. Returns the local path of what was copied. Local paths and
    /// `file://` URLs are returned as they are. `expected_sha256` (a single object only) is
    /// checked on the fetched or cached file.
    pub async fn download_to(url: &str, dest: &Path, expected_sha256: Option<&str>) -> Result<PathBuf, StoreError> {
        let fail = |message: String| StoreError::Url { url: url.to_string(), message };
        match url.split_once("://") {
            None => return Ok(PathBuf::from(url)),
            Some(("file", path)) => return Ok(PathBuf::from(path)),
            _ => {}
        }
        let folder = Self::open(url)?;
        let mut keys = folder.list("").await?;
        let (store, local) = if keys.is_empty() {
            let trimmed = url.trim_end_matches('/');
            let (parent, name) = trimmed.rsplit_once('/').ok_or_else(|| fail("names no object".into()))?;
            keys = vec![name.to_string()];
            (Self::open(parent)?, dest.join(name))
        } else {
            if expected_sha256.is_some() {
                return Err(fail("a sha256 is checked for a single file, but this URL is a folder".into()));
            }
            (folder, dest.to_path_buf())
        };
        for key in &keys {
            let target = dest.join(key.trim_start_matches('/'));
            store.fetch_once(url, key, &target, expected_sha256).await?;
        }
        Ok(local)
    }

    /// Fetches one object to `target` unless a complete, matching copy is there already.
    async fn fetch_once(&self, url: &str, key: &str, target: &Path, expected: Option<&str>) -> Result<(), StoreError> {
        let fail = |message: String| StoreError::Url { url: url.to_string(), message };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail(format!("cannot create {}: {e}", parent.display())))?;
        }
        let _lock = FileLock::acquire(target).await.map_err(|e| fail(format!("cannot lock {}: {e}", target.display())))?;
        let path = self.path(key);
        let meta = self.store.head(&path).await.map_err(|e| Self::object_error(key, e))?;
        let record_path = sidecar(target, ".complete.json");
        if let Some(sha) = cached_copy(target, &record_path, meta.size, meta.e_tag.as_deref()) {
            if expected.is_none_or(|e| e.eq_ignore_ascii_case(&sha)) {
                return Ok(());
            }
        }
        let _ = std::fs::remove_file(&record_path);
        // A name of our own: another host writing the same file on a volume without working
        // locks never interleaves with this one; the rename is atomic.
        let partial = sidecar(target, &format!(".partial-{}-{:08x}", std::process::id(), rand_u32()));
        let written = self.write_object(url, key, &path, &partial).await;
        let sha = match written {
            Ok(sha) => sha,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        if let Some(expected) = expected.filter(|e| !e.eq_ignore_ascii_case(&sha)) {
            let _ = std::fs::remove_file(&partial);
            return Err(fail(format!("{key}: sha256 {sha} differs from the expected {expected}; the object changed or is corrupt")));
        }
        std::fs::rename(&partial, target).map_err(|e| fail(format!("cannot move {}: {e}", target.display())))?;
        let record = CompleteRecord { size: meta.size, e_tag: meta.e_tag.clone(), sha256: sha };
        let text = serde_json::to_string(&record).map_err(|e| fail(e.to_string()))?;
        std::fs::write(&record_path, text).map_err(|e| fail(format!("cannot write {}: {e}", record_path.display())))?;
        Ok(())
    }

    /// Streams an object into `partial`, chunk by chunk (a model never has to fit in memory),
    /// and returns its sha256.
    async fn write_object(
        &self,
        url: &str,
        key: &str,
        path: &object_store::path::Path,
        partial: &Path,
    ) -> Result<String, StoreError> {
        let write_error =
            |e: std::io::Error| StoreError::Url { url: url.to_string(), message: format!("cannot write {}: {e}", partial.display()) };
        let mut chunks = self.store.get(path).await.map_err(|e| Self::object_error(key, e))?.into_stream();
        let mut file = std::io::BufWriter::new(std::fs::File::create(partial).map_err(write_error)?);
        let mut hasher = Sha256::new();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| Self::object_error(key, e))?;
            hasher.update(&chunk);
            file.write_all(&chunk).map_err(write_error)?;
        }
        let file = file.into_inner().map_err(|e| write_error(e.into_error()))?;
        file.sync_all().map_err(write_error)?;
        Ok(hex(&hasher.finalize()))
    }
}

/// The sha256 of a cached file whose completion record matches the object (size, ETag) and
/// whose contents still hash to the recorded sha256; None when it must be fetched again.
fn cached_copy(target: &Path, record_path: &Path, size: u64, e_tag: Option<&str>) -> Option<String> {
    let record: CompleteRecord = serde_json::from_slice(&std::fs::read(record_path).ok()?).ok()?;
    let on_disk = std::fs::metadata(target).ok()?.len();
    if record.size != size || on_disk != size || record.e_tag.as_deref() != e_tag {
        return None;
    }
    let sha = file_sha256(target).ok()?;
    (sha == record.sha256).then_some(sha)
}

fn rand_u32() -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    nanos ^ std::process::id().rotate_left(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn models_given_as_urls_are_copied_once() {
        let store = RunStore::open("memory://models-test").unwrap();
        store.put("tiny.gguf", "GGUF".into()).await.unwrap();
        store.put("hf/config.json", "{}".into()).await.unwrap();
        store.put("hf/sub/x.safetensors", "xx".into()).await.unwrap();
        let cache = tempfile::tempdir().unwrap();
        let file = RunStore::download_to("memory://models-test/tiny.gguf", cache.path(), None).await.unwrap();
        assert_eq!(file, cache.path().join("tiny.gguf"));
        assert_eq!(std::fs::read(&file).unwrap(), b"GGUF");
        let folder = RunStore::download_to("memory://models-test/hf", &cache.path().join("hf"), None).await.unwrap();
        assert_eq!(std::fs::read(folder.join("sub/x.safetensors")).unwrap(), b"xx");
        assert_eq!(std::fs::read(folder.join("config.json")).unwrap(), b"{}");
        // Local paths are used where they are.
        assert_eq!(RunStore::download_to("/m/x.gguf", cache.path(), None).await.unwrap(), PathBuf::from("/m/x.gguf"));
    }

    #[tokio::test]
    async fn a_shared_cache_fetches_once_and_refetches_a_damaged_copy() {
        let store = RunStore::open("memory://cache-share-test").unwrap();
        store.put("m.gguf", "GGUF-weights".into()).await.unwrap();
        let sha = hex(&Sha256::digest(b"GGUF-weights"));
        let cache = tempfile::tempdir().unwrap();
        let url = "memory://cache-share-test/m.gguf";
        // Eight workers on one volume at once: one fetch, eight identical answers, no leftovers.
        let fetches = (0..8).map(|_| RunStore::download_to(url, cache.path(), Some(&sha)));
        for path in futures::future::join_all(fetches).await {
            assert_eq!(std::fs::read(path.unwrap()).unwrap(), b"GGUF-weights");
        }
        let mut names: Vec<String> =
            std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        names.sort();
        assert_eq!(names, ["m.gguf", "m.gguf.complete.json", "m.gguf.lock"]);
        // A copy damaged in place (same size) fails its checksum and is fetched again.
        std::fs::write(cache.path().join("m.gguf"), "GGUF-wEights").unwrap();
        let path = RunStore::download_to(url, cache.path(), Some(&sha)).await.unwrap();
        assert_eq!(std::fs::read(path).unwrap(), b"GGUF-weights");
        // A pinned checksum the object does not have is refused, and nothing is left behind.
        let other = "0".repeat(64);
        std::fs::remove_file(cache.path().join("m.gguf.complete.json")).unwrap();
        let err = RunStore::download_to(url, cache.path(), Some(&other)).await.unwrap_err().to_string();
        assert!(err.contains("differs from the expected"), "{err}");
        assert!(!std::fs::read_dir(cache.path()).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().contains("partial")));
    }
}
