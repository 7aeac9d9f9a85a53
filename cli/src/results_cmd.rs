//! `codesweep status`, `codesweep report` and `codesweep rescore`: reading a run's progress and
//! results.

use std::path::PathBuf;

use anyhow::{Context, Result};
use codesweep_coordinator::report::{build_merged_report, build_report, write_report, Report, RescoreOptions, Scoring};
use codesweep_proto::{CancelRunRequest, GetRunRequest};
use codesweep_runner::{follow, status_text};
use codesweep_store::{split_run_uri, RunStore};
use codesweep_tasks::cceval::EditSimBackend;

use crate::cluster::{runtime, CoordinatorFlags};
use crate::files::{print_stdout, write_file};

/// Arguments of `codesweep status`.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// The run id.
    run: String,
    #[command(flatten)]
    coordinator: CoordinatorFlags,
    /// Follow progress until the run ends.
    #[arg(long)]
    watch: bool,
}

/// Prints a run's progress (once, or until it ends with --watch).
pub fn status(args: StatusArgs) -> Result<()> {
    runtime()?.block_on(async move {
        let mut client = args.coordinator.connect().await?;
        let status = if args.watch {
            follow(&mut client, &args.run, true).await?
        } else {
            client
                .get_run(GetRunRequest { run_id: args.run.clone() })
                .await
                .map_err(|s| anyhow::anyhow!("{}", s.message()))?
                .into_inner()
        };
        print_stdout(&status_text(&status))
    })
}

/// Arguments of `codesweep cancel`.
#[derive(clap::Args)]
pub struct CancelArgs {
    /// The run id.
    run: String,
    #[command(flatten)]
    coordinator: CoordinatorFlags,
}

/// Cancels a run: no more shards are leased, workers stop the shards in hand at their next
/// heartbeat. Finished results stay in the store; submitting the spec again resumes the run.
pub fn cancel(args: CancelArgs) -> Result<()> {
    runtime()?.block_on(async move {
        let mut client = args.coordinator.connect().await?;
        let answer = client
            .cancel_run(CancelRunRequest { run_id: args.run.clone() })
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?
            .into_inner();
        anyhow::ensure!(answer.cancelled, "the coordinator at {} has no run {:?}", args.coordinator.coordinator, args.run);
        print_stdout(&format!(
            "run {} cancelled: no more shards are leased and running ones stop at their next heartbeat; \
             finished results stay in the store\n",
            args.run
        ))
    })
}

/// Arguments of `codesweep report`.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// `<store>/<run id>`, e.g. `runs/my-sweep` or `s3://bucket/runs/my-sweep`. Several runs
    /// (a sweep run as several releases) give one merged set of tables, written to --out.
    #[arg(required = true, num_args = 1..)]
    run_uris: Vec<String>,
    /// Also write the report files into this local folder (required with several runs).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Prints the tables; then, when stored results could not be used, names each on stderr and
/// fails (the tables are written, with those shards left out).
fn print_and_check(report: &Report) -> Result<()> {
    print_stdout(&report.markdown())?;
    for damaged in &report.unreadable {
        eprintln!("error: shard {}: {}", damaged.shard_id, damaged.error);
    }
    if !report.unreadable.is_empty() {
        anyhow::bail!(
            "{} stored result(s) could not be used and are left out of the tables (named above); restore them from a copy, \
             or delete them and submit the run again to redo those shards",
            report.unreadable.len()
        );
    }
    Ok(())
}

fn write_local(dir: &std::path::Path, report: &Report) -> Result<()> {
    for (path, body) in report.files()? {
        write_file(&dir.join(&path), &body)?;
    }
    Ok(())
}

/// Merges a run's stored results into tables, writes them to the store (and `--out`), prints
/// the Markdown table.
pub fn report(args: ReportArgs) -> Result<()> {
    if args.run_uris.len() > 1 {
        return merged_report(&args);
    }
    let (store_url, run_id) = split_run_uri(&args.run_uris[0])?;
    runtime()?.block_on(async move {
        let store = RunStore::open(&store_url)?;
        let report = build_report(&store, &run_id, Scoring::Stored).await?;
        write_report(&store, &report).await?;
        if let Some(dir) = &args.out {
            write_local(dir, &report)?;
        }
        print_and_check(&report)
    })
}

/// One report over several runs, written to `--out` (it belongs to no single run's store) and
/// printed.
fn merged_report(args: &ReportArgs) -> Result<()> {
    let out = args.out.as_ref().context("several runs make one report that belongs to none of them: give --out DIR")?;
    let mut runs = Vec::new();
    for uri in &args.run_uris {
        let (store_url, run_id) = split_run_uri(uri)?;
        runs.push((RunStore::open(&store_url)?, run_id));
    }
    runtime()?.block_on(async move {
        let report = build_merged_report(&runs, Scoring::Stored).await?;
        write_local(out, &report)?;
        print_and_check(&report)
    })
}

/// Arguments of `codesweep rescore`.
#[derive(clap::Args)]
pub struct RescoreArgs {
    /// `<store>/<run id>`.
    run_uri: String,
    /// Edit similarity backend (default: the one the run used).
    #[arg(long, value_parser = |s: &str| s.parse::<EditSimBackend>())]
    edit_sim: Option<EditSimBackend>,
    /// RepoQA: strip comments from answers and needles before matching (default: as the run
    /// did).
    #[arg(long)]
    ignore_comments: bool,
    /// Write the rescored report files here (the stored report is left as it is).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Scores every stored raw completion again with today's scoring code (no model, no GPU; shards
/// read concurrently and scored on every core) and prints the tables. Official-format prediction files from other tools are scored with
/// `codesweep score cceval`.
pub fn rescore(args: RescoreArgs) -> Result<()> {
    let (store_url, run_id) = split_run_uri(&args.run_uri)?;
    runtime()?.block_on(async move {
        let store = RunStore::open(&store_url)?;
        let options = RescoreOptions { edit_sim: args.edit_sim, ignore_comments: args.ignore_comments.then_some(true) };
        let report = build_report(&store, &run_id, Scoring::Rescore(options)).await?;
        if let Some(dir) = &args.out {
            write_local(dir, &report)?;
        }
        print_and_check(&report)
    })
}
