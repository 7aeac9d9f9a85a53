//! Stopping on SIGTERM / Ctrl-C: the first signal drains, the second stops at once.

use codesweep_worker::StopMode;
use tokio::sync::watch;

/// A stop channel driven by SIGTERM / Ctrl-C: the first signal drains (finish the shard in
/// hand), the second stops at once (release it). SIGTERM is caught from the moment this returns
/// (not from whenever the task first runs), so a signal right after start still shuts down
/// cleanly and flushes telemetry. Call it inside a tokio runtime.
pub fn stop_on_signals() -> watch::Receiver<StopMode> {
    let (sender, receiver) = watch::channel(StopMode::Run);
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::spawn(async move {
        let mut mode = StopMode::Run;
        loop {
            #[cfg(unix)]
            wait_for_signal(term.as_mut()).await;
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
            mode = if mode == StopMode::Run { StopMode::Drain } else { StopMode::Now };
            eprintln!(
                "{}",
                if mode == StopMode::Drain {
                    "stopping after the current shard (signal again to release it and stop now)"
                } else {
                    "stopping now; the current shard is released"
                }
            );
            if sender.send(mode).is_err() || mode == StopMode::Now {
                break;
            }
        }
    });
    receiver
}

#[cfg(unix)]
async fn wait_for_signal(term: Option<&mut tokio::signal::unix::Signal>) {
    match term {
        Some(term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
