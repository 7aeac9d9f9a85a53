//! The runs this coordinator holds in their stores: taken before a run is served, renewed in
//! the background, released when the run ends or the coordinator stops (see
//! [`codesweep_store::hold`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codesweep_store::hold::{HoldError, Holder, RunHold};
use codesweep_store::{RunLayout, RunStore};

/// Default length of a hold: a killed coordinator's runs can be taken over this long after
/// its last renewal (renewals come every third of it).
pub const DEFAULT_HOLD_TTL: Duration = Duration::from_secs(30);

/// This coordinator's holds, by run id.
#[derive(Clone)]
pub struct RunHolds {
    ttl: Duration,
    holder: Arc<Mutex<Holder>>,
    held: Arc<Mutex<HashMap<String, Arc<RunHold>>>>,
}

impl RunHolds {
    /// No holds yet; they will last `ttl` unless renewed.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            holder: Arc::new(Mutex::new(Holder::this_process("(not listening yet)"))),
            held: Arc::default(),
        }
    }

    /// Records the address this coordinator listens on, which names it in its holds.
    pub fn set_address(&self, address: &str) {
        if let Ok(mut holder) = self.holder.lock() {
            *holder = Holder::this_process(address);
        }
    }

    /// The interval between renewals.
    pub fn renew_interval(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(50))
    }

    /// Takes the hold of `run_id` unless this coordinator has it already.
    pub async fn take(&self, store: &RunStore, run_id: &str) -> Result<(), HoldError> {
        if self.held.lock().map(|h| h.contains_key(run_id)).unwrap_or(false) {
            return Ok(());
        }
        let holder = self.holder.lock().map(|h| h.clone()).unwrap_or_else(|e| e.into_inner().clone());
        let hold = RunHold::acquire(store, run_id, &RunLayout::new(run_id).hold(), &holder, self.ttl).await?;
        tracing::info!(run = %run_id, holder = %holder, "took the run's hold");
        if let Ok(mut held) = self.held.lock() {
            held.insert(run_id.to_string(), Arc::new(hold));
        }
        Ok(())
    }

    fn snapshot(&self) -> Vec<Arc<RunHold>> {
        self.held.lock().map(|h| h.values().cloned().collect()).unwrap_or_default()
    }

    fn forget(&self, run_id: &str) -> Option<Arc<RunHold>> {
        self.held.lock().ok().and_then(|mut h| h.remove(run_id))
    }

    /// Renews every hold of a run still in progress and releases those of ended runs
    /// (`ended(run)`). Returns the runs whose holds another coordinator took: they must no
    /// longer be served here.
    pub async fn renew_all(&self, ended: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lost = Vec::new();
        for hold in self.snapshot() {
            let run = hold.run().to_string();
            if ended(&run) {
                if let Some(hold) = self.forget(&run) {
                    if let Err(e) = hold.release().await {
                        tracing::warn!(run = %run, error = %e, "could not release the run's hold");
                    }
                }
                continue;
            }
            match hold.renew().await {
                Ok(()) => {}
                Err(e @ HoldError::Lost { .. }) => {
                    tracing::error!(run = %run, error = %e, "lost the run's hold; no longer serving it");
                    self.forget(&run);
                    lost.push(run);
                }
                // A store hiccup: try again next round; the hold lasts three rounds.
                Err(e) => tracing::warn!(run = %run, error = %e, "could not renew the run's hold"),
            }
        }
        lost
    }

    /// Releases every hold (the coordinator stops), so a successor need not wait for them to lapse.
    pub async fn release_all(&self) {
        let holds: Vec<_> = self.held.lock().map(|mut h| h.drain().map(|(_, v)| v).collect()).unwrap_or_default();
        for hold in holds {
            if let Err(e) = hold.release().await {
                tracing::warn!(run = %hold.run(), error = %e, "could not release the run's hold");
            }
        }
    }
}
