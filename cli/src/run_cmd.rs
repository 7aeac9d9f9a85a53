//! `codesweep run SPEC`: the whole sweep on this machine (`codesweep_runner::run_standalone`),
//! with telemetry, the tables on stdout and an exit status that says how it ended.

use std::path::PathBuf;

use anyhow::Result;
use codesweep_coordinator::spec::{expand_home, SweepSpec};
use codesweep_runner::{run_standalone, stop_on_signals, StandaloneOptions};

use crate::cluster::runtime;
use crate::exit::ending_to_result;
use crate::files::print_stdout;
use crate::telemetry::{start_telemetry, telemetry_config, TelemetryFlags};

/// Arguments of `codesweep run`.
#[derive(clap::Args)]
pub struct Args {
    /// The sweep spec (TOML, or YAML/JSON by extension); `CODESWEEP__SECTION__KEY` variables
    /// override its values.
    spec: PathBuf,
    /// Local workers (default: the spec's `workers.count`).
    #[arg(long)]
    workers: Option<usize>,
    /// No progress bar (logs and the final tables only).
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    telemetry: TelemetryFlags,
}

/// Runs the sweep; prints the tables and where the results are.
pub fn run(args: Args) -> Result<()> {
    let spec = SweepSpec::load(&args.spec)?;
    let options = StandaloneOptions {
        workers: args.workers.unwrap_or(spec.workers.count),
        show_progress: !args.quiet,
        model_cache: expand_home(std::path::Path::new("~/.cache/codesweep/models")),
    };
    let runtime = runtime()?;
    let mut telemetry = start_telemetry(&runtime, &telemetry_config("run", &args.telemetry, spec.telemetry.as_ref()), "warn")?;
    let outcome = runtime.block_on(async { run_standalone(spec, &options, stop_on_signals()).await });
    // Also on errors and signals: export what is left.
    telemetry.shutdown();
    let outcome = outcome?;
    print_stdout(&outcome.report.markdown())?;
    eprintln!("tables, plot and official-format exports: {}", outcome.report_url);
    for failure in &outcome.status.failures {
        eprintln!("failed shard {} after {} attempt(s): {}", failure.shard_id, failure.attempts, failure.error);
    }
    ending_to_result(outcome.ending)
}
