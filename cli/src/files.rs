//! Reading inputs and writing outputs: atomic writes, progress bars, thread pools, and the
//! report of invalid records.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use codesweep_tasks::input::RecordError;
use indicatif::{ProgressBar, ProgressStyle};

/// Flags every scoring command shares.
#[derive(clap::Args)]
pub struct ScoringFlags {
    /// Score the valid records and report how many were skipped (with file, line and field),
    /// instead of stopping at malformed lines, missing fields or records that match nothing.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// A flag's parser that offers `names` in `--help` and parses with `FromStr` (languages,
/// edit-similarity backends).
pub fn choice<T>(names: impl IntoIterator<Item = &'static str>) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).try_map(|name| name.parse::<T>())
}

/// Which model to load and where: the flags `generate` and `serve` share.
#[derive(clap::Args)]
pub struct ModelArgs {
    /// A `.gguf` file or a Hugging Face directory (config.json, *.safetensors, tokenizer.json).
    #[arg(long)]
    pub model: std::path::PathBuf,
    /// `cpu`, or `cuda:N` in a build with `--features cuda`.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Activation/weight dtype for safetensors models: f32, f16 or bf16 (default: f32 on CPU, f16 on GPU).
    #[arg(long)]
    pub dtype: Option<String>,
}

impl ModelArgs {
    /// Loads the model onto the chosen device.
    pub fn load(&self) -> Result<codesweep_engine::Model> {
        let placement = self.placement()?;
        codesweep_engine::Model::load(&self.model, &placement.device, placement.dtype)
            .with_context(|| format!("cannot load {}", self.model.display()))
    }

    /// The device and dtype the flags name.
    pub fn placement(&self) -> Result<codesweep_engine::Placement> {
        Ok(codesweep_engine::Placement::parse(&self.device, self.dtype.as_deref())?)
    }
}

/// Reads a whole input file, naming it in the error.
pub fn read_input(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Writes `contents` to `dir/name` atomically (temporary file, then rename), so an
/// interrupted run never leaves a half-written result.
pub fn write_atomic(dir: &Path, name: &str, contents: &str) -> Result<()> {
    let target = dir.join(name);
    let temporary = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&temporary, contents).with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, &target).with_context(|| format!("cannot move {} into place", target.display()))
}

/// Writes `contents` to the file `path` atomically, creating its folder first.
pub fn write_file(path: &Path, contents: &str) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    output_dir(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).with_context(|| format!("{} does not name a file", path.display()))?;
    write_atomic(dir, name, contents)
}

/// Creates the output directory.
pub fn output_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create output directory {}", dir.display()))
}

/// Stops on invalid records unless `skip_invalid`; with it, reports how many were skipped.
pub fn handle_invalid(errors: &[RecordError], skip_invalid: bool) -> Result<()> {
    if errors.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 10;
    let listing: Vec<String> = errors.iter().take(SHOWN).map(|e| format!("  {e}")).collect();
    let more = if errors.len() > SHOWN { format!("\n  … and {} more", errors.len() - SHOWN) } else { String::new() };
    if skip_invalid {
        eprintln!("warning: skipped {} invalid record(s):\n{}{more}", errors.len(), listing.join("\n"));
        return Ok(());
    }
    bail!(
        "{} invalid record(s):\n{}{more}\nFix the input, or pass --skip-invalid to score the valid records and count the rest.",
        errors.len(),
        listing.join("\n")
    )
}

/// A progress bar on stderr for `total` items; hidden for small inputs and when stderr is
/// not a terminal.
pub fn progress(total: usize, label: &str) -> ProgressBar {
    if total < 500 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total as u64);
    let style = ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} [{elapsed_precise}, {per_sec}, eta {eta}]")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(label.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A thread pool of `threads` workers (0 = one per core).
pub fn thread_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().context("cannot start worker threads")
}

/// Prints to stdout; a closed pipe (`codesweep … | head`) ends output quietly instead of
/// panicking like `println!`.
pub fn print_stdout(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to stdout"),
    }
}
