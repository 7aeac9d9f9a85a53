//! `codesweep retrieve`: the official CrossCodeEval prompt builder (cross-file context by
//! BM25, TF-IDF, Jaccard or a dense embedder), writing the official output files.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use codesweep_fetch::punkt::english_tables_dir;
use codesweep_tasks::cceval::Language;
use codesweep_tasks::input::parse_jsonl;
use codesweep_tasks::retrieval::punkt::{Punkt, PunktParams};
use codesweep_tasks::retrieval::run::{render_jsonl, status_line};
use codesweep_tasks::retrieval::{retrieve, ExampleRecord, Options, QueryType, RankingFn, Tokenizer};

use crate::dense::EmbedderArgs;
use crate::files::{choice, handle_invalid, read_input, thread_pool, write_file};

/// Ranking function.
#[derive(Clone, Copy, ValueEnum)]
enum RetrieverArg {
    /// rank-bm25 BM25Okapi (k1 1.5, b 0.75, epsilon 0.25).
    Bm25,
    /// scikit-learn TF-IDF cosine similarity (scores written as one-element lists).
    Tfidf,
    /// Jaccard similarity of token sets (the official `jaccard_sim`).
    #[value(alias = "jaccard_sim")]
    Jaccard,
    /// Cosine similarity of mean-pooled embeddings (the official `cosine_sim`); needs
    /// --embedder DIR or --embedder-endpoint URL.
    Dense,
}

/// How the query is formed.
#[derive(Clone, Copy, ValueEnum)]
enum QueryArg {
    /// The last 10 non-blank prompt lines (RG-1).
    #[value(name = "last_n_lines", alias = "last-n-lines")]
    LastNLines,
    /// The last 10 non-blank lines of prompt + groundtruth (oracle).
    Groundtruth,
}

/// Retrieve cross-file context for CrossCodeEval examples.
#[derive(clap::Args)]
pub struct Args {
    /// Official example file (`line_completion.jsonl`): `prompt`, `groundtruth`,
    /// `metadata.repository`, `metadata.file`.
    #[arg(long, value_name = "FILE")]
    examples: PathBuf,
    /// Folder with one subfolder per `metadata.repository` (the builder's
    /// `<repository_root>/<language>`); `scripts/fetch-retrieval-sources.sh` builds one.
    #[arg(long, value_name = "DIR")]
    repos: PathBuf,
    /// Language of the examples: selects the files read (`**/*.py`, `**/*.java`, `**/*.cs`,
    /// TypeScript `src/**/*.ts[x]`) and the comment marker of the context text.
    #[arg(long, value_parser = choice::<Language>(Language::ALL.map(Language::name)))]
    language: Language,
    /// Ranking function (`--ranking_fn`).
    #[arg(long, value_enum)]
    retriever: RetrieverArg,
    /// Query formation (`--query_type`).
    #[arg(long, value_enum, default_value = "last_n_lines")]
    query: QueryArg,
    /// Return the chunk after each top-ranked one (`--use_next_chunk_as_cfc True`, the RG-1
    /// setting of run.sh); not with `--query groundtruth`.
    #[arg(long)]
    next_chunk: bool,
    /// Chunks returned per example (`--maximum_cross_file_chunk`).
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Largest directory distance of a cross file (`--crossfile_distance`).
    #[arg(long, default_value_t = 100)]
    max_distance: usize,
    /// Cross files kept, nearest first (`--maximum_cross_files`).
    #[arg(long, default_value_t = 1000)]
    max_files: usize,
    /// Chunks ranked, nearest files first (`--maximum_chunk_to_rerank`).
    #[arg(long, default_value_t = 1000)]
    max_chunks: usize,
    /// NLTK's English punkt_tab folder; default $CODESWEEP_PUNKT_DIR, else
    /// <cache>/punkt_tab/english, fetched there (pinned, checksummed) when missing.
    #[arg(long, value_name = "DIR")]
    punkt: Option<PathBuf>,
    /// Output: a `.jsonl` file, or a folder that gets the official name
    /// (`line_completion_<rg1|oracle>_<bm25|tfidf|jaccard_sim>.jsonl`; dense:
    /// `line_completion_<rg1|oracle>_<ranker>_cosine_sim.jsonl`, e.g. `..._rg1_unixcoder_cosine_sim.jsonl`).
    #[arg(long, value_name = "DIR_OR_FILE")]
    out: PathBuf,
    /// Retrieve for the valid records and report the invalid ones (with file, line and field),
    /// leaving them out of the output, instead of stopping at the first malformed line.
    #[arg(long)]
    skip_invalid: bool,
    /// Worker threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    #[command(flatten)]
    dense: EmbedderArgs,
}

/// Retrieves cross-file context for every example and writes the official output file.
pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let ranking = match args.retriever {
        RetrieverArg::Bm25 => RankingFn::Bm25,
        RetrieverArg::Tfidf => RankingFn::Tfidf,
        RetrieverArg::Jaccard => RankingFn::JaccardSim,
        RetrieverArg::Dense => RankingFn::Dense,
    };
    let query = match args.query {
        QueryArg::LastNLines => QueryType::LastNLines,
        QueryArg::Groundtruth => QueryType::Groundtruth,
    };
    if args.next_chunk && query == QueryType::Groundtruth {
        bail!("--next-chunk cannot be combined with --query groundtruth (the official builder forbids it too)");
    }
    let options = Options {
        ranking,
        query,
        use_next_chunk: args.next_chunk,
        top_k: args.top_k,
        max_distance: args.max_distance,
        max_files: args.max_files,
        max_chunks: args.max_chunks,
    };
    if !args.repos.is_dir() {
        bail!("--repos {}: not a folder", args.repos.display());
    }
    let punkt = english_tables_dir(args.punkt).context("NLTK's English Punkt tables are needed for word_tokenize")?;
    let params = PunktParams::load(&punkt).with_context(|| {
        format!("NLTK's English Punkt tables are needed for word_tokenize; {} does not hold them (pass --punkt DIR)", punkt.display())
    })?;
    let tokenizer = Tokenizer::new(Punkt::new(params));
    let dense = if ranking == RankingFn::Dense { Some(args.dense.load()?) } else { None };

    let examples_name = args.examples.display().to_string();
    let parsed = parse_jsonl(&examples_name, &read_input(&args.examples)?, ExampleRecord::from_json);
    handle_invalid(&parsed.errors, args.skip_invalid)?;
    let records: Vec<ExampleRecord> = parsed.records.into_iter().map(|r| r.value).collect();
    if records.is_empty() {
        bail!("{examples_name}: no example to retrieve for");
    }
    let mut missing: Vec<&str> = records.iter().map(|r| r.repository.as_str()).filter(|name| !args.repos.join(name).is_dir()).collect();
    missing.sort_unstable();
    missing.dedup();
    for name in &missing {
        eprintln!("warning: repository not found: {} (its examples get an empty context, as officially)", args.repos.join(name).display());
    }

    let pool = thread_pool(args.threads)?;
    let retrieving = Instant::now();
    let results = pool
        .install(|| {
            let embedder = dense.as_ref().map(|(e, _)| e as &dyn codesweep_tasks::retrieval::Embedder);
            retrieve(&records, &args.repos, args.language, &options, &tokenizer, embedder)
        })
        .context("retrieval failed")?;
    let elapsed = retrieving.elapsed();

    let official = match &dense {
        Some((_, ranker)) => options.ranker_output_file_name(ranker),
        None => options.output_file_name(),
    };
    let is_file = args.out.extension().is_some_and(|e| e == "jsonl") && !args.out.is_dir();
    let target = if is_file { args.out.clone() } else { args.out.join(&official) };
    write_file(&target, &render_jsonl(&records, &results, args.language))?;

    eprintln!("{}", status_line(&results));
    eprintln!(
        "retrieved in {:.3} s ({:.1} examples/s, {} threads); {:.3} s in all; wrote {}",
        elapsed.as_secs_f64(),
        results.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        pool.current_num_threads(),
        started.elapsed().as_secs_f64(),
        target.display()
    );
    Ok(())
}
