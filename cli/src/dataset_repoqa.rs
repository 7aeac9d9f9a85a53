//! `codesweep dataset repoqa`: builds a RepoQA "Searching Needle Function" dataset entry from a
//! repository on disk (paper §3.1, evalplus/repoqa's curation scripts) and writes it in the
//! official dataset layout, with descriptions from an annotator model or, offline, from the
//! functions' own docstrings (labelled as such).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use codesweep_fetch::grammars::choose_grammars;
use codesweep_engine::{Placement, TextModel};
use codesweep_worker::ModelAnnotator;
use codesweep_tasks::dataset::repoqa::{add_to_dataset, curate, Annotator, CurateOptions, SelectOptions};
use codesweep_tasks::repoqa::Language;

use crate::files::{choice, print_stdout, read_input, write_file};

/// Build a RepoQA dataset entry from a repository.
#[derive(clap::Args)]
pub struct Args {
    /// The repository (or unpacked package) folder.
    #[arg(long, value_name = "DIR")]
    repo: PathBuf,
    /// Language of the files taken: python (.py), cpp (.c .h .cc .hh .cpp .hpp .cxx .hxx),
    /// java (.java), typescript (.ts .js), rust (.rs).
    #[arg(long, value_parser = choice::<Language>(Language::ALL.map(Language::name)))]
    language: Language,
    /// Dataset file to write (`{language: [repo, ...]}`).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Add the repository to the dataset already in --out (replacing one of the same name)
    /// instead of writing a new file.
    #[arg(long)]
    append: bool,
    /// Folder under the repository whose files are taken (`entrypoint_path`); default
    /// `src/main/java` or `src` for Java, `src` or `lib` otherwise, else the whole repository.
    #[arg(long, value_name = "PATH")]
    entry: Option<String>,
    /// Sub-folder of the entry to leave out (repeatable), e.g. tests or generated code.
    #[arg(long, value_name = "PATH")]
    exclude: Vec<String>,
    /// The dataset's `repo` name (default: the folder's name).
    #[arg(long)]
    name: Option<String>,
    /// The dataset's `commit_sha`: a commit or a package version.
    #[arg(long, default_value = "")]
    commit: String,
    /// Seed of the needle sample.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Needles per repository.
    #[arg(long, default_value_t = 10)]
    needles: usize,
    /// Bins the repository is cut into (one candidate each at most).
    #[arg(long, default_value_t = 64)]
    bins: usize,
    /// Longest needle in bytes.
    #[arg(long, default_value_t = 2000)]
    max_function_bytes: usize,
    /// Where descriptions come from: `docstring` (the function's own docstring or leading
    /// comment, offline, labelled in the description), `model:PATH` (a local GGUF or Hugging
    /// Face model answers the official annotation prompt, greedy, in its chat template) or
    /// `endpoint:URL` (an OpenAI-compatible chat endpoint, e.g. http://host:8000/v1).
    #[arg(long, default_value = "docstring", value_name = "docstring|model:PATH|endpoint:URL")]
    describe: String,
    /// Model name sent to a `endpoint:` annotator.
    #[arg(long, default_value = "default")]
    describe_model: String,
    /// Environment variable holding the `endpoint:` annotator's API key.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// Lines of code shown to the annotator before each needle (the script's code_prefix_lines).
    #[arg(long, default_value_t = codesweep_tasks::dataset::repoqa::describe::CODE_PREFIX_LINES)]
    code_prefix_lines: usize,
    /// Most tokens an annotator writes per description (the script's max_tokens).
    #[arg(long, default_value_t = 2048)]
    max_new_tokens: usize,
    /// `cpu`, or `cuda:N` in a build with `--features cuda` (a `model:` annotator).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Activation dtype of a safetensors `model:` annotator: f32, f16 or bf16.
    #[arg(long)]
    dtype: Option<String>,
    /// Tree-sitter grammars: `auto` (the official scorer's, fetched when missing, else
    /// bundled), `official` (fetched or fail), `bundled`, or a path to tree-sitter-languages'
    /// languages.so.
    #[arg(long, default_value = "auto")]
    grammars: String,
}

/// The annotator `--describe` names; `None` for the functions' own docstrings.
fn annotator(args: &Args) -> Result<Option<Box<dyn Annotator>>> {
    if args.describe == "docstring" {
        return Ok(None);
    }
    let (model, label) = if let Some(path) = args.describe.strip_prefix("model:") {
        let placement = Placement::parse(&args.device, args.dtype.as_deref())?;
        let model = TextModel::load(Path::new(path), &placement).with_context(|| format!("cannot load the annotator model {path}"))?;
        let name = Path::new(path).file_name().map_or_else(|| path.to_string(), |n| n.to_string_lossy().to_string());
        (model, format!("model:{name}"))
    } else if let Some(url) = args.describe.strip_prefix("endpoint:") {
        (TextModel::endpoint(url, &args.describe_model, args.api_key_env.as_deref(), true, None)?, format!("endpoint:{url}"))
    } else {
        bail!("--describe {}: expected docstring, model:PATH or endpoint:URL", args.describe)
    };
    let started = Instant::now();
    let progress = Box::new(move |done: usize, total: usize| {
        eprintln!("  described {done}/{total} ({:.0} s)", started.elapsed().as_secs_f64());
    });
    let annotator = ModelAnnotator::new(model, label, args.max_new_tokens, progress)?;
    if annotator.plain_text() {
        eprintln!("warning: {} has no chat template; the annotation prompt is sent as plain text", annotator.label());
    }
    Ok(Some(Box::new(annotator)))
}

/// Builds the entry, adds it to the dataset file (or starts one) and prints what was built.
pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    if !args.repo.is_dir() {
        bail!("--repo {}: not a folder", args.repo.display());
    }
    let annotator = annotator(&args)?;
    let grammars = choose_grammars(&args.grammars)?;
    let entry = args.entry.clone().unwrap_or_else(|| codesweep_tasks::dataset::repoqa::files::default_entry(&args.repo, args.language));
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args.repo.canonicalize().ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string())).unwrap_or_else(|| "repo".into()),
    };
    let options = CurateOptions {
        language: args.language,
        name,
        commit: args.commit.clone(),
        entry,
        exclude: args.exclude.clone(),
        select: SelectOptions { bins: args.bins, max_bytes: args.max_function_bytes, needles: args.needles, seed: args.seed },
    };
    let mut repo = curate(&args.repo, &options, &grammars).with_context(|| format!("cannot build from {}", args.repo.display()))?;
    for path in &repo.not_utf8 {
        eprintln!("warning: {path} is not UTF-8; left out");
    }
    if repo.needles.is_empty() {
        bail!("{}: no function qualifies as a needle (unique name, at most {} bytes)", args.repo.display(), args.max_function_bytes);
    }
    if let Some(annotator) = &annotator {
        eprintln!("describing {} needles with {}", repo.needles.len(), annotator.label());
        repo.annotate(annotator.as_ref(), args.code_prefix_lines)?;
    }
    let existing = if args.append && args.out.is_file() {
        let text = read_input(&args.out)?;
        Some(serde_json::from_slice(&text).with_context(|| format!("{}: not JSON", args.out.display()))?)
    } else {
        None
    };
    let dataset = add_to_dataset(existing, args.language, repo.to_json())?;
    write_file(&args.out, &dataset.to_string())?;
    print_stdout(&repo.summary(&grammars.describe()))?;
    eprintln!("wrote {} ({} {}) in {:.1} s", args.out.display(), args.language, repo.options.name, started.elapsed().as_secs_f64());
    Ok(())
}
