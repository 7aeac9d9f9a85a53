//! Errors of the store: which URL or object, and what went wrong.

/// What can go wrong talking to the store or reading its objects.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store URL could not be understood or opened.
    #[error("store URL {url:?}: {message}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The object store failed (I/O, network, permissions).
    #[error("store object {key}: {source}")]
    Object {
        /// The object or input concerned.
        key: String,
        /// The underlying error.
        source: object_store::Error,
    },
    /// The store cannot create an object only if it is absent, which write-once results need.
    #[error(
        "store {url}: cannot create {key} only if it is absent (conditional put is off); write-once shard results \
         need it: on S3 unset AWS_CONDITIONAL_PUT=disabled and use a server that honours `If-None-Match: *`"
    )]
    NoConditionalCreate {
        /// The URL.
        url: String,
        /// The object or input concerned.
        key: String,
    },
    /// An object exists but is not what codesweep wrote.
    #[error("store object {key}, line {line}: {message}")]
    Format {
        /// The object or input concerned.
        key: String,
        /// The line, counted from 1 (0: the whole object).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A name used in object keys has characters that are not allowed.
    #[error("{what} {name:?}: {message}")]
    Name {
        /// What the name names.
        what: &'static str,
        /// The name.
        name: String,
        /// What is wrong.
        message: String,
    },
}
