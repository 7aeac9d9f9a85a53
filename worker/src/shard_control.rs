//! What a running shard and its heartbeat task share: progress one way, a stop request the other.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// Shared between a running shard and its heartbeat task: progress one way, stop the other.
#[derive(Debug, Default)]
pub struct ShardControl {
    /// Examples generated so far.
    pub examples_done: AtomicU64,
    /// Tokens generated so far.
    pub generated_tokens: AtomicU64,
    stop: Mutex<Option<String>>,
}

impl ShardControl {
    /// Asks the shard to stop at its next check.
    pub fn request_stop(&self, reason: &str) {
        if let Ok(mut stop) = self.stop.lock() {
            stop.get_or_insert_with(|| reason.to_string());
        }
    }

    /// Why the shard should stop, if it should.
    pub fn stop_reason(&self) -> Option<String> {
        self.stop.lock().ok().and_then(|s| s.clone())
    }
}
