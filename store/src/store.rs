//! `RunStore`: the object store behind a URL, with the few operations runs need.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::StoreError;

/// Whether a write-once put created the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The object did not exist and now holds the new contents.
    Created,
    /// The object existed already; it was left as it was.
    AlreadyExists,
}

/// What a conditional replace did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaceOutcome {
    /// The object was still at the version given and now holds the new contents.
    Replaced,
    /// The object changed (or vanished) since it was read; nothing was written.
    Changed,
    /// The store cannot replace conditionally; nothing was written.
    Unsupported,
}

/// An object store opened from a URL, with keys relative to the URL's path.
#[derive(Clone)]
pub struct RunStore {
    url: String,
    pub(crate) store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
}

impl std::fmt::Debug for RunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStore").field("url", &self.url).finish()
    }
}

fn memory_stores() -> &'static Mutex<HashMap<String, Arc<InMemory>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
}

impl RunStore {
    /// Opens the store at `url`:
    /// - a plain path or `file://PATH` (relative paths are taken from the current directory;
    ///   the directory is created),
    /// - `memory://NAME[/PREFIX]` (one store per name, shared within this process),
    /// - `s3://bucket/prefix`, `gs://…`, `az://…` in builds with the `aws`, `gcp`, `azure`
    ///   features; credentials come from the usual environment variables (`AWS_*`, …).
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let fail = |message: String| StoreError::Url { url: url.to_string(), message };
        if let Some(rest) = url.strip_prefix("memory://") {
            let (name, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let mut stores = memory_stores().lock().map_err(|_| fail("memory store registry poisoned".into()))?;
            let store = stores.entry(name.to_string()).or_insert_with(|| Arc::new(InMemory::new())).clone();
            let prefix = ObjectPath::from(prefix.trim_matches('/'));
            return Ok(Self { url: url.to_string(), store, prefix });
        }
        let local = match url.split_once("://") {
            None => Some(PathBuf::from(url)),
            Some(("file", rest)) => Some(PathBuf::from(rest)),
            Some(_) => None,
        };
        if let Some(dir) = local {
            let dir = if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir().map_err(|e| fail(format!("cannot read the current directory: {e}")))?.join(dir)
            };
            std::fs::create_dir_all(&dir).map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
            let dir = dir.canonicalize().map_err(|e| fail(format!("cannot resolve {}: {e}", dir.display())))?;
            let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                .map_err(|e| fail(e.to_string()))?
                .with_automatic_cleanup(true);
            let url = format!("file://{}", dir.display());
            return Ok(Self { url, store: Arc::new(store), prefix: ObjectPath::default() });
        }
        let parsed = url::Url::parse(url).map_err(|e| fail(e.to_string()))?;
        let prefix = ObjectPath::from(parsed.path().trim_matches('/'));
        let store = cloud_store(url, parsed.scheme()).map_err(fail)?;
        Ok(Self { url: url.to_string(), store, prefix })
    }

    /// The URL the store was opened from (local paths made absolute).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn path(&self, key: &str) -> ObjectPath {
        if self.prefix.as_ref().is_empty() {
            ObjectPath::from(key)
        } else {
            ObjectPath::from(format!("{}/{key}", self.prefix))
        }
    }

    pub(crate) fn object_error(key: &str, source: object_store::Error) -> StoreError {
        StoreError::Object { key: key.to_string(), source }
    }

    /// Reads an object as UTF-8 text; `None` when it does not exist.
    pub async fn get_text(&self, key: &str) -> Result<Option<String>, StoreError> {
        let bytes = match self.store.get(&self.path(key)).await {
            Ok(result) => result.bytes().await.map_err(|e| Self::object_error(key, e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(Self::object_error(key, e)),
        };
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|e| StoreError::Format { key: key.to_string(), line: 0, message: format!("not UTF-8: {e}") })
    }

    /// Writes an object, replacing any previous contents (plans, reports).
    pub async fn put(&self, key: &str, text: String) -> Result<(), StoreError> {
        self.store.put(&self.path(key), PutPayload::from(text)).await.map_err(|e| Self::object_error(key, e))?;
        Ok(())
    }

    /// Creates an object only if it does not exist yet, atomically (shard results). On S3 this is
    /// a PUT with `If-None-Match: *`; a server that refuses it with 412 gives `AlreadyExists`.
    /// Stores that cannot create conditionally give `StoreError::NoConditionalCreate` rather
    /// than a plain put that could overwrite another worker's result.
    pub async fn put_once(&self, key: &str, text: String) -> Result<WriteOutcome, StoreError> {
        let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match self.store.put_opts(&self.path(key), PutPayload::from(text), options).await {
            Ok(_) => Ok(WriteOutcome::Created),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(WriteOutcome::AlreadyExists),
            // S3 with AWS_CONDITIONAL_PUT=disabled: a plain put could overwrite a result.
            Err(object_store::Error::NotImplemented) => {
                Err(StoreError::NoConditionalCreate { url: self.url.clone(), key: key.to_string() })
            }
            Err(e) => Err(Self::object_error(key, e)),
        }
    }

    /// Reads an object with its version (e-tag), for a later [`RunStore::put_if_unchanged`];
    /// `None` when it does not exist.
    pub async fn get_versioned(&self, key: &str) -> Result<Option<(String, UpdateVersion)>, StoreError> {
        let result = match self.store.get(&self.path(key)).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(Self::object_error(key, e)),
        };
        let version = UpdateVersion { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
        let bytes = result.bytes().await.map_err(|e| Self::object_error(key, e))?;
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|e| StoreError::Format { key: key.to_string(), line: 0, message: format!("not UTF-8: {e}") })?;
        Ok(Some((text, version)))
    }

    /// Replaces an object only if it is still at `version` (compare-and-swap: on S3 a PUT with
    /// `If-Match`). Stores without conditional updates (local files) get `Unsupported` and
    /// nothing is written.
    pub async fn put_if_unchanged(
        &self,
        key: &str,
        text: String,
        version: &UpdateVersion,
    ) -> Result<ReplaceOutcome, StoreError> {
        let options = PutOptions { mode: PutMode::Update(version.clone()), ..PutOptions::default() };
        match self.store.put_opts(&self.path(key), PutPayload::from(text), options).await {
            Ok(_) => Ok(ReplaceOutcome::Replaced),
            Err(object_store::Error::Precondition { .. }) | Err(object_store::Error::NotFound { .. }) => {
                Ok(ReplaceOutcome::Changed)
            }
            Err(object_store::Error::NotImplemented) => Ok(ReplaceOutcome::Unsupported),
            Err(e) => Err(Self::object_error(key, e)),
        }
    }

    /// Deletes an object; deleting one that does not exist is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self.store.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(Self::object_error(key, e)),
        }
    }

    /// Whether an object exists.
    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        match self.store.head(&self.path(key)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(Self::object_error(key, e)),
        }
    }

    /// Keys of all objects under `prefix` (relative to the store), sorted.
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let base = self.path(prefix);
        let strip = if self.prefix.as_ref().is_empty() { String::new() } else { format!("{}/", self.prefix) };
        let objects: Vec<_> =
            self.store.list(Some(&base)).try_collect().await.map_err(|e| Self::object_error(prefix, e))?;
        let mut keys: Vec<String> = objects
            .into_iter()
            .map(|meta| meta.location.as_ref().strip_prefix(&strip).unwrap_or(meta.location.as_ref()).to_string())
            .collect();
        keys.sort();
        Ok(keys)
    }
}

fn cloud_store(url: &str, scheme: &str) -> Result<Arc<dyn ObjectStore>, String> {
    match scheme {
        "s3" | "s3a" => s3_store(url),
        "gs" => gcs_store(url),
        "az" | "abfs" | "abfss" | "azure" => azure_store(url),
        other => Err(format!("unknown scheme {other:?}; use a path, file://, memory://, s3://, gs:// or az://")),
    }
}

/// The error for a cloud scheme whose store feature this build lacks.
#[allow(dead_code)]
fn missing_feature(scheme: &str, feature: &str) -> String {
    format!("this build has no {scheme}:// support; rebuild codesweep with `--features {feature}`")
}

/// An S3-protocol store configured from the `AWS_*` environment variables (endpoint, keys,
/// region, `AWS_ALLOW_HTTP`, `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`, …) and the URL's bucket.
#[cfg(feature = "aws")]
fn s3_store(url: &str) -> Result<Arc<dyn ObjectStore>, String> {
    object_store::aws::AmazonS3Builder::from_env()
        .with_url(url)
        .build()
        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "aws"))]
fn s3_store(_url: &str) -> Result<Arc<dyn ObjectStore>, String> {
    Err(missing_feature("s3", "aws"))
}

/// A Google Cloud Storage store configured from the `GOOGLE_*` environment variables.
#[cfg(feature = "gcp")]
fn gcs_store(url: &str) -> Result<Arc<dyn ObjectStore>, String> {
    object_store::gcp::GoogleCloudStorageBuilder::from_env()
        .with_url(url)
        .build()
        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "gcp"))]
fn gcs_store(_url: &str) -> Result<Arc<dyn ObjectStore>, String> {
    Err(missing_feature("gs", "gcp"))
}

/// An Azure Blob Storage store configured from the `AZURE_*` environment variables.
#[cfg(feature = "azure")]
fn azure_store(url: &str) -> Result<Arc<dyn ObjectStore>, String> {
    object_store::azure::MicrosoftAzureBuilder::from_env()
        .with_url(url)
        .build()
        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "azure"))]
fn azure_store(_url: &str) -> Result<Arc<dyn ObjectStore>, String> {
    Err(missing_feature("az", "azure"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn results_are_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::open(dir.path().join("runs").to_str().unwrap()).unwrap();
        assert_eq!(store.put_once("r/shards/a.jsonl", "first".into()).await.unwrap(), WriteOutcome::Created);
        assert_eq!(store.put_once("r/shards/a.jsonl", "second".into()).await.unwrap(), WriteOutcome::AlreadyExists);
        assert_eq!(store.get_text("r/shards/a.jsonl").await.unwrap().as_deref(), Some("first"));
        assert_eq!(store.get_text("r/shards/missing.jsonl").await.unwrap(), None);
        assert!(store.exists("r/shards/a.jsonl").await.unwrap());
        assert_eq!(store.list("r/shards").await.unwrap(), vec!["r/shards/a.jsonl".to_string()]);
        assert!(dir.path().join("runs/r/shards/a.jsonl").is_file());
    }

    #[tokio::test]
    async fn memory_stores_are_shared_by_name() {
        let a = RunStore::open("memory://shared-test").unwrap();
        a.put("k", "v".into()).await.unwrap();
        let b = RunStore::open("memory://shared-test").unwrap();
        assert_eq!(b.get_text("k").await.unwrap().as_deref(), Some("v"));
        let c = RunStore::open("memory://other-test").unwrap();
        assert_eq!(c.get_text("k").await.unwrap(), None);
    }

    /// With conditional put turned off (`AWS_CONDITIONAL_PUT=disabled`) object_store cannot
    /// create-if-absent on S3; a result write must fail clearly, never fall back to overwriting.
    #[cfg(feature = "aws")]
    #[tokio::test]
    async fn s3_without_conditional_put_refuses_write_once() {
        let s3 = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name("b")
            .with_region("us-east-1")
            .with_endpoint("http://127.0.0.1:9")
            .with_allow_http(true)
            .with_access_key_id("k")
            .with_secret_access_key("s")
            .with_conditional_put(object_store::aws::S3ConditionalPut::Disabled)
            .build()
            .unwrap();
        let store = RunStore { url: "s3://b/p".into(), store: Arc::new(s3), prefix: ObjectPath::from("p") };
        let err = store.put_once("r/shards/a.jsonl", "x".into()).await.unwrap_err();
        assert!(matches!(err, StoreError::NoConditionalCreate { .. }), "{err}");
        assert!(err.to_string().contains("AWS_CONDITIONAL_PUT"), "{err}");
    }

    #[test]
    fn unknown_schemes_say_what_is_supported() {
        let err = RunStore::open("ftp://host/x").unwrap_err().to_string();
        assert!(err.contains("file://"), "{err}");
    }
}
