//! Exit statuses of the commands a batch system runs (`run`, `coordinator`, `worker`), so a
//! Kubernetes Job, a pod failure policy or a script can tell the outcomes apart.

/// Any error not named below: bad arguments (clap's own usage errors exit 2), an invalid spec,
/// an unreachable store.
pub const ERROR: u8 = 1;
/// Every run ended, but some shards failed for good; the report, which lists them, is written.
pub const SHARDS_FAILED: u8 = 3;
/// Stopped before every run ended (a signal, or `codesweep cancel`); submitting again resumes.
pub const STOPPED: u8 = 4;
/// A worker's configuration cannot work (a device this build or machine does not have); it
/// exits before leasing anything, so retrying the same pod is pointless (BSD's `EX_CONFIG`).
pub const CONFIG: u8 = 78;

/// An error that ends the command with a chosen exit status.
#[derive(Debug)]
pub struct Exit {
    /// The exit status.
    pub code: u8,
    /// What happened, for stderr.
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// An error ending the command with `code`.
pub fn exit_with(code: u8, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit { code, message: message.into() })
}

/// The exit status for an error: its [`Exit`] code, else [`ERROR`].
pub fn code_of(error: &anyhow::Error) -> u8 {
    error.downcast_ref::<Exit>().map_or(ERROR, |e| e.code)
}

/// `Ok` for a run that succeeded, else the error with the exit status its ending calls for.
pub fn ending_to_result(ending: codesweep_runner::Ending) -> anyhow::Result<()> {
    match ending {
        codesweep_runner::Ending::Succeeded => Ok(()),
        codesweep_runner::Ending::ShardsFailed(message) => Err(exit_with(SHARDS_FAILED, message)),
        codesweep_runner::Ending::Stopped(message) => Err(exit_with(STOPPED, message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_survive_context_and_other_errors_are_one() {
        let error = exit_with(SHARDS_FAILED, "2 shards failed");
        assert_eq!(code_of(&error), 3);
        assert_eq!(code_of(&error.context("run demo")), 3);
        assert_eq!(code_of(&anyhow::anyhow!("store unreachable")), ERROR);
        assert_eq!(exit_with(CONFIG, "no GPU").to_string(), "no GPU");
    }
}
