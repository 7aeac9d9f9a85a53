//! Run holds: which coordinator serves a run, as one small object in the run's folder.
//!
//! A coordinator takes the hold with a conditional create before it leases any of the run's
//! shards, renews it while it lives, and releases it when the run ends or the coordinator
//! stops. A second coordinator finds the object, sees a live holder and refuses; once the
//! holder stops renewing (killed, node lost) the hold expires and may be taken over. A
//! coordinator restarted in place takes its hold back at once, without waiting out the expiry:
//! on the same host, a hold whose process is gone, or that names this process or this listen
//! address (which no live process can share with it), is a previous incarnation's.
//!
//! Take-overs and renewals are compare-and-swap where the store has it (S3 `If-Match`,
//! memory). Local files have no conditional replace: there a take-over is delete then create
//! (the create stays atomic, so of two racing take-overs at most one create wins each round),
//! and a renewal re-reads the object first and gives the run up if another holder is in it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::UpdateVersion;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::store::{ReplaceOutcome, RunStore, WriteOutcome};

/// Who holds a run: a coordinator process, by host, process id and listen address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The host name (the pod name on Kubernetes).
    pub host: String,
    /// The process id on that host.
    pub pid: u32,
    /// The address the coordinator listens on.
    pub address: String,
}

impl Holder {
    /// This process, listening on `address`; the host from `$HOSTNAME`, else `/etc/hostname`.
    pub fn this_process(address: &str) -> Self {
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        Self { host, pid: std::process::id(), address: address.to_string() }
    }

    /// Whether `other` is this holder or a dead predecessor of it on the same host.
    fn succeeds(&self, other: &Holder) -> bool {
        self.host == other.host && (other.pid == self.pid || other.address == self.address || !process_alive(other.pid))
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the coordinator at {} on host {} (pid {})", self.address, self.host, self.pid)
    }
}

/// Whether a process with this id runs on this host (Linux `/proc`; elsewhere assumed alive).
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// The hold object's contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldRecord {
    /// Who holds the run.
    pub holder: Holder,
    /// A value unique to one taking of the hold, so a holder can tell its hold from a later one.
    pub nonce: String,
    /// When the hold lapses unless renewed, in milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
    /// The hold's length in milliseconds, for messages.
    pub ttl_ms: u64,
}

/// Why a hold could not be taken or kept.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// Another live coordinator holds the run.
    #[error(
        "run {run:?} is served by {holder}: its hold {key} lapses in {expires_in_s:.0} s unless renewed. Only one \
         coordinator may serve a run; stop that one first (or wait for the hold to lapse if it is gone), or use \
         another run name"
    )]
    HeldBy {
        /// The run.
        run: String,
        /// The hold object.
        key: String,
        /// The other holder.
        holder: Holder,
        /// Seconds until its hold lapses if it is not renewed.
        expires_in_s: f64,
    },
    /// This coordinator's hold was taken over by another one.
    #[error("run {run:?}: the hold {key} was taken over by {holder}; this coordinator no longer serves the run")]
    Lost {
        /// The run.
        run: String,
        /// The hold object.
        key: String,
        /// The new holder.
        holder: Holder,
    },
    /// The hold object is not what a coordinator writes.
    #[error("run {run:?}: the hold {key} is unreadable ({message}); if no coordinator serves the run, delete it")]
    Corrupt {
        /// The run.
        run: String,
        /// The hold object.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// Several rounds of take-over raced with other coordinators.
    #[error("run {run:?}: could not take the hold {key}: other coordinators kept changing it")]
    Contended {
        /// The run.
        run: String,
        /// The hold object.
        key: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A taken hold on one run.
#[derive(Debug)]
pub struct RunHold {
    store: RunStore,
    run: String,
    key: String,
    holder: Holder,
    nonce: String,
    ttl: Duration,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn new_nonce(holder: &Holder) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}/{}/{nanos:x}/{count}", holder.host, holder.pid)
}

/// How many read–decide–write rounds a take-over tries before giving up.
const TAKE_ROUNDS: usize = 5;

impl RunHold {
    /// Takes the hold of `run` (object `key`) for `holder`, for `ttl` unless renewed. Refuses
    /// with [`HoldError::HeldBy`] while another holder's hold is live; takes over a lapsed hold
    /// or a predecessor's (a restart in place).
    pub async fn acquire(
        store: &RunStore,
        run: &str,
        key: &str,
        holder: &Holder,
        ttl: Duration,
    ) -> Result<Self, HoldError> {
        let hold = Self {
            store: store.clone(),
            run: run.to_string(),
            key: key.to_string(),
            holder: holder.clone(),
            nonce: new_nonce(holder),
            ttl,
        };
        for _ in 0..TAKE_ROUNDS {
            if hold.store.put_once(key, hold.record_text()).await? == WriteOutcome::Created {
                return Ok(hold);
            }
            let Some((current, version)) = hold.read().await? else { continue };
            let now = now_ms();
            if !holder.succeeds(&current.holder) && current.expires_at_ms > now {
                return Err(HoldError::HeldBy {
                    run: run.to_string(),
                    key: key.to_string(),
                    holder: current.holder,
                    expires_in_s: (current.expires_at_ms - now) as f64 / 1000.0,
                });
            }
            if hold.replace(&version).await? {
                return Ok(hold);
            }
        }
        Err(HoldError::Contended { run: run.to_string(), key: key.to_string() })
    }

    /// The holder.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// The run held.
    pub fn run(&self) -> &str {
        &self.run
    }

    /// Pushes the expiry `ttl` ahead; [`HoldError::Lost`] when another holder took the run.
    pub async fn renew(&self) -> Result<(), HoldError> {
        for _ in 0..TAKE_ROUNDS {
            match self.read().await? {
                Some((current, version)) if current.nonce == self.nonce => {
                    if self.replace(&version).await? {
                        return Ok(());
                    }
                }
                Some((current, _)) => {
                    return Err(HoldError::Lost { run: self.run.clone(), key: self.key.clone(), holder: current.holder })
                }
                // Deleted by hand or by a lapsed take-over that then lost its create: ours again.
                None => {
                    if self.store.put_once(&self.key, self.record_text()).await? == WriteOutcome::Created {
                        return Ok(());
                    }
                }
            }
        }
        Err(HoldError::Contended { run: self.run.clone(), key: self.key.clone() })
    }

    /// Gives the hold up (the run ended, or the coordinator stops), if it is still ours.
    pub async fn release(&self) -> Result<(), HoldError> {
        if let Some((current, _)) = self.read().await? {
            if current.nonce == self.nonce {
                self.store.delete(&self.key).await?;
            }
        }
        Ok(())
    }

    fn record_text(&self) -> String {
        let ttl_ms = self.ttl.as_millis() as u64;
        let record = HoldRecord {
            holder: self.holder.clone(),
            nonce: self.nonce.clone(),
            expires_at_ms: now_ms().saturating_add(ttl_ms),
            ttl_ms,
        };
        serde_json::to_string(&record).unwrap_or_default()
    }

    async fn read(&self) -> Result<Option<(HoldRecord, UpdateVersion)>, HoldError> {
        let Some((text, version)) = self.store.get_versioned(&self.key).await? else { return Ok(None) };
        let record = serde_json::from_str(&text).map_err(|e| HoldError::Corrupt {
            run: self.run.clone(),
            key: self.key.clone(),
            message: e.to_string(),
        })?;
        Ok(Some((record, version)))
    }

    /// Writes our record over the version read; false when someone else changed it first.
    async fn replace(&self, version: &UpdateVersion) -> Result<bool, HoldError> {
        match self.store.put_if_unchanged(&self.key, self.record_text(), version).await? {
            ReplaceOutcome::Replaced => Ok(true),
            ReplaceOutcome::Changed => Ok(false),
            ReplaceOutcome::Unsupported => {
                self.store.delete(&self.key).await?;
                Ok(self.store.put_once(&self.key, self.record_text()).await? == WriteOutcome::Created)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(host: &str, address: &str) -> Holder {
        Holder { host: host.into(), pid: std::process::id(), address: address.into() }
    }

    /// A holder on another host, so liveness and address rules do not apply.
    fn elsewhere(host: &str) -> Holder {
        Holder { host: host.into(), pid: 1, address: "10.0.0.1:50051".into() }
    }

    async fn both_stores(name: &str) -> Vec<(RunStore, Option<tempfile::TempDir>)> {
        let dir = tempfile::tempdir().unwrap();
        let local = RunStore::open(dir.path().to_str().unwrap()).unwrap();
        let memory = RunStore::open(&format!("memory://hold-{name}")).unwrap();
        vec![(local, Some(dir)), (memory, None)]
    }

    #[tokio::test]
    async fn a_live_hold_refuses_others_and_names_its_holder() {
        for (store, _dir) in both_stores("live").await {
            let ttl = Duration::from_secs(30);
            let first = RunHold::acquire(&store, "r", "r/coordinator.json", &elsewhere("host-a"), ttl).await.unwrap();
            let refused = RunHold::acquire(&store, "r", "r/coordinator.json", &elsewhere("host-b"), ttl).await;
            let message = refused.unwrap_err().to_string();
            assert!(message.contains("on host host-a (pid 1)") && message.contains("r/coordinator.json"), "{message}");
            first.renew().await.unwrap();
            first.release().await.unwrap();
            let second = RunHold::acquire(&store, "r", "r/coordinator.json", &elsewhere("host-b"), ttl).await.unwrap();
            assert_eq!(second.holder().host, "host-b");
        }
    }

    #[tokio::test]
    async fn a_lapsed_hold_is_taken_over_and_the_old_holder_learns_it_lost() {
        for (store, _dir) in both_stores("lapsed").await {
            let old = RunHold::acquire(&store, "r", "r/h.json", &elsewhere("a"), Duration::from_millis(50)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(120)).await;
            let new = RunHold::acquire(&store, "r", "r/h.json", &elsewhere("b"), Duration::from_secs(30)).await.unwrap();
            let lost = old.renew().await.unwrap_err();
            assert!(matches!(lost, HoldError::Lost { ref holder, .. } if holder.host == "b"), "{lost}");
            // Releasing a hold that is no longer ours leaves the new holder's in place.
            old.release().await.unwrap();
            new.renew().await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_predecessor_on_the_same_host_is_taken_over_at_once() {
        for (store, _dir) in both_stores("same").await {
            let ttl = Duration::from_secs(30);
            // Same address (a restart in place), even from a live process id.
            let before = RunHold::acquire(&store, "r", "r/h.json", &holder("h", "127.0.0.1:7"), ttl).await.unwrap();
            let after = RunHold::acquire(&store, "r", "r/h.json", &holder("h", "127.0.0.1:7"), ttl).await.unwrap();
            assert!(before.renew().await.is_err(), "the earlier incarnation must see it lost the hold");
            after.renew().await.unwrap();
            // A dead process on the same host, another address.
            let dead = Holder { host: "h".into(), pid: u32::MAX - 1, address: "127.0.0.1:8".into() };
            RunHold::acquire(&store, "q", "q/h.json", &dead, ttl).await.unwrap();
            RunHold::acquire(&store, "q", "q/h.json", &Holder { pid: 1, ..holder("h", "127.0.0.1:9") }, ttl)
                .await
                .unwrap();
            // A live process on the same host, another address: refused.
            let live = Holder { host: "h".into(), pid: std::process::id(), address: "127.0.0.1:10".into() };
            RunHold::acquire(&store, "p", "p/h.json", &live, ttl).await.unwrap();
            let other = Holder { pid: 1, ..holder("h", "127.0.0.1:11") };
            assert!(RunHold::acquire(&store, "p", "p/h.json", &other, ttl).await.is_err());
        }
    }

    #[tokio::test]
    async fn a_corrupt_hold_is_named() {
        let (store, _dir) = both_stores("corrupt").await.remove(0);
        store.put("r/h.json", "not json".into()).await.unwrap();
        let error = RunHold::acquire(&store, "r", "r/h.json", &elsewhere("a"), Duration::from_secs(1)).await.unwrap_err();
        assert!(error.to_string().contains("r/h.json") && error.to_string().contains("delete it"), "{error}");
    }
}
