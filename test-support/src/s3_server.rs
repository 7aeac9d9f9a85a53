//! A real S3-protocol server for tests: s3s serving an s3s-fs bucket in a temp directory,
//! started once per test process, with the `AWS_*` environment pointing object_store's
//! AmazonS3 client at it (path-style requests over plain HTTP, static credentials).
//!
//! Shared by the store and coordinator tests (feature `s3`), so `s3://` URLs in a test
//! go through the same code path as a deployment against MinIO or AWS S3.

use std::path::PathBuf;
use std::sync::OnceLock;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

/// The bucket every test uses; tests keep apart by key prefix.
pub const BUCKET: &str = "codesweep-test";
const ACCESS_KEY: &str = "codesweep-test-key";
const SECRET_KEY: &str = "codesweep-test-secret";

/// The running server: where its bucket lives on disk.
pub struct S3Server {
    /// The directory holding the bucket's objects as files (`<root>/<bucket>/<key>`).
    pub root: PathBuf,
}

impl S3Server {
    /// The file that backs object `key` of the test bucket.
    pub fn object_file(&self, key: &str) -> PathBuf {
        self.root.join(BUCKET).join(key)
    }
}

/// Starts the server on first use (a thread with its own runtime, so it outlives each
/// `#[tokio::test]` runtime) and sets the `AWS_*` variables; later calls return the same one.
pub fn s3_server() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let root = tempfile::Builder::new().prefix("codesweep-s3-").tempdir().expect("temp dir").keep();
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket dir");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let endpoint = format!("http://{}", listener.local_addr().expect("local addr"));

        let fs = s3s_fs::FileSystem::new(&root).expect("s3s-fs root");
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = builder.build();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("server runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let http = ConnBuilder::new(TokioExecutor::new());
                loop {
                    let Ok((socket, _)) = listener.accept().await else { continue };
                    let connection = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                }
            });
        });

        // Only this server's settings: a developer's own AWS_* must not leak into the tests.
        for (key, _) in std::env::vars_os() {
            if key.to_str().is_some_and(|k| k.starts_with("AWS_")) {
                std::env::remove_var(key);
            }
        }
        std::env::set_var("AWS_ENDPOINT_URL", &endpoint);
        std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_ALLOW_HTTP", "true");
        S3Server { root }
    })
}
