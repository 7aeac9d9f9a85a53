//! `codesweep dataset repoqa`: builds a RepoQA "Searching Needle Function" dataset entry from a
//! repository on disk (paper §3.1, evalplus/repoqa's curation scripts) and writes it in the
//! official dataset layout, with descriptions from an annotator model or, offline, from the
//! functions' own docstrings (labelled as such).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser;
use codesweep_fetch::grammars::choose_grammars;
use codesweep_engine::{ChatMessage, ChatTemplate, GenerateOptions, Placement, Request, TextModel};
use codesweep_tasks::dataset::repoqa::{add_to_dataset, curate, AnnotateError, Annotator, CurateOptions, CuratedRepo, SelectOptions};
use codesweep_tasks::repoqa::{Language, RepoqaGrammars};

use crate::files::{output_dir, read_input, write_atomic};

/// Build a RepoQA dataset entry from a repository.
#[derive(clap::Args)]
pub struct Args {
    /// The repository (or unpacked package) folder.
    #[arg(long, value_name = "DIR")]
    repo: PathBuf,
    /// Language of the files taken: python (.py), cpp (.c .h .cc .hh .cpp .hpp .cxx .hxx),
    /// java (.java), typescript (.ts .js), rust (.rs).
    #[arg(long, value_parser = language_parser())]
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

fn language_parser() -> impl TypedValueParser<Value = Language> {
    clap::builder::PossibleValuesParser::new(Language::ALL.map(Language::name)).try_map(|name| name.parse::<Language>())
}

/// A model (local, in its chat template; or an endpoint's chat API) answering annotation
/// prompts greedily.
struct ModelAnnotator {
    model: TextModel,
    template: Option<ChatTemplate>,
    label: String,
    max_new_tokens: usize,
}

impl Annotator for ModelAnnotator {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn annotate(&self, prompts: &[String]) -> Result<Vec<String>, AnnotateError> {
        let requests = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let prompt = match &self.template {
                    Some(t) => t.render(&[ChatMessage::new("user", p.clone())])?,
                    None => p.clone(),
                };
                Ok(Request::greedy(format!("needle-{i}"), prompt, self.max_new_tokens))
            })
            .collect::<Result<Vec<_>, AnnotateError>>()?;
        let started = Instant::now();
        let mut done = 0;
        let generation = self.model.for_instructions().generate(&requests, GenerateOptions::default(), |_| {
            done += 1;
            eprintln!("  described {done}/{} ({:.0} s)", requests.len(), started.elapsed().as_secs_f64());
        })?;
        in_request_order(&requests, generation.completions.into_iter().map(|c| (c.id, c.text)))
    }
}

fn in_request_order(requests: &[Request], answers: impl Iterator<Item = (String, String)>) -> Result<Vec<String>, AnnotateError> {
    let mut by_id: std::collections::HashMap<String, String> = answers.collect();
    requests.iter().map(|r| by_id.remove(&r.id).ok_or_else(|| format!("no answer for {}", r.id).into())).collect()
}

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
    let template = model.chat_template().context("the model's chat template")?;
    if template.is_none() && matches!(model, TextModel::Local(_)) {
        eprintln!("warning: {label} has no chat template; the annotation prompt is sent as plain text");
    }
    Ok(Some(Box::new(ModelAnnotator { model, template, label, max_new_tokens: args.max_new_tokens })))
}

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
    let dir = match args.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    output_dir(&dir)?;
    let file_name = args.out.file_name().and_then(|n| n.to_str()).context("--out needs a file name")?;
    write_atomic(&dir, file_name, &dataset.to_string())?;
    print_summary(&repo, &grammars);
    eprintln!("wrote {} ({} {}) in {:.1} s", args.out.display(), args.language, repo.options.name, started.elapsed().as_secs_f64());
    Ok(())
}

/// The repository's figures and the needles chosen, one line each.
fn print_summary(repo: &CuratedRepo, grammars: &RepoqaGrammars) {
    let functions: usize = repo.functions.iter().map(|(_, f)| f.len()).sum();
    let edges: usize = repo.dependency.iter().map(|(_, d)| d.len()).sum();
    let chars: usize = repo.files.iter().map(|f| f.text.chars().count()).sum();
    println!(
        "{} {} (entry `{}`): {} files, {} characters, {} import edges, {} functions, {} candidates, {} needles [{}]",
        repo.options.language,
        repo.options.name,
        repo.options.entry,
        repo.files.len(),
        chars,
        edges,
        functions,
        repo.candidates,
        repo.needles.len(),
        grammars.describe()
    );
    for (i, n) in repo.needles.iter().enumerate() {
        let f = &n.function;
        println!(
            "  {i}. {} {}:{}-{} ({} bytes, global byte {}) description: {}",
            f.name,
            n.path,
            f.start_line + 1,
            f.end_line,
            f.end_byte - f.start_byte,
            f.global_start_byte,
            n.source
        );
    }
}
