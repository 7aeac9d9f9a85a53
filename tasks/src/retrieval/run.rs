//! The builder's `get_cfc` over a whole example file: each repository is read, chunked and
//! tokenized once, then examples are retrieved in parallel (results in input order). For the
//! dense ranker every chunk of a repository is embedded once, in one batched call, and every
//! query in another, before any example is ranked.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;
use serde_json::Value;

use super::chunks::{cross_chunks, cross_files, read_project, RepoIndex};
use super::context::{query, select, CrossfileContext, Ranked, Score};
use super::rank::{bm25, cosine, jaccard, sort_desc, tfidf};
use super::{Embedder, Options, RankingFn, RetrievalError, Tokenizer};
use crate::cceval::Language;
use crate::input::{str_field, FieldError};
use crate::pycompat::json::dumps;

/// An official example record (`line_completion.jsonl`), kept whole so that it can be written
/// back with only `crossfile_context` changed.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleRecord {
    /// The record as read (key order preserved).
    pub value: Value,
    /// `metadata.repository`: the folder under the repositories root.
    pub repository: String,
    /// `metadata.file`: the example's file, relative to the repository root.
    pub file: String,
    /// `prompt`.
    pub prompt: String,
    /// `groundtruth`.
    pub groundtruth: String,
}

impl ExampleRecord {
    /// Decodes one line of an example file.
    pub fn from_json(value: &Value) -> Result<Self, FieldError> {
        Ok(Self {
            repository: str_field(value, "metadata.repository")?.to_string(),
            file: str_field(value, "metadata.file")?.to_string(),
            prompt: str_field(value, "prompt")?.to_string(),
            groundtruth: str_field(value, "groundtruth")?.to_string(),
            value: value.clone(),
        })
    }
}

/// The builder's status counters as one line: how many examples got context, and why the
/// others did not.
pub fn status_line(results: &[Retrieval]) -> String {
    let count = |s: Status| results.iter().filter(|r| r.status == s).count();
    format!(
        "{} examples: {} with context, {} project_not_found, {} file_not_found_in_project, {} no_crossfile_context",
        results.len(),
        count(Status::Ok),
        count(Status::ProjectNotFound),
        count(Status::FileNotFoundInProject),
        count(Status::NoCrossfileContext)
    )
}

/// Why an example has no ranked context (the builder's status counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Context found and ranked.
    Ok,
    /// The repository folder is missing or has no source file.
    ProjectNotFound,
    /// `metadata.file` is not among the project's files.
    FileNotFoundInProject,
    /// No other file within the distance has a chunk.
    NoCrossfileContext,
}

impl Status {
    /// The builder's name for the status.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ProjectNotFound => "project_not_found",
            Self::FileNotFoundInProject => "file_not_found_in_project",
            Self::NoCrossfileContext => "no_crossfile_context",
        }
    }
}

/// The result for one example, with the intermediate values the golden `debug.jsonl` records.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieval {
    /// Outcome.
    pub status: Status,
    /// The new `crossfile_context`.
    pub context: CrossfileContext,
    /// Files within the distance, after the file cap.
    pub num_cross_files: usize,
    /// Chunks of those files.
    pub num_chunks: usize,
    /// Chunks ranked.
    pub num_candidates: usize,
    /// The query text (when ranking happened).
    pub query: Option<String>,
    /// The tokens the ranking function used for the query (lowercased for TF-IDF).
    pub query_tokens: Option<Vec<String>>,
    /// The first 10 ranked chunk ids paired with the first 10 ranked scores.
    pub top10: Vec<(String, f64)>,
}

impl Retrieval {
    fn without_ranking(status: Status, context: CrossfileContext) -> Self {
        Self { status, context, num_cross_files: 0, num_chunks: 0, num_candidates: 0, query: None, query_tokens: None, top10: Vec::new() }
    }

    /// The record with `crossfile_context` set (in place when present, else appended), as
    /// the builder writes it.
    pub fn apply(&self, record: &Value, language: Language) -> Value {
        let mut value = record.clone();
        if let Value::Object(map) = &mut value {
            map.insert("crossfile_context".into(), self.context.to_json(language));
        }
        value
    }
}

/// The output file: one `json.dumps(record)` line per example, in input order.
pub fn render_jsonl(records: &[ExampleRecord], results: &[Retrieval], language: Language) -> String {
    let mut out = String::new();
    for (record, result) in records.iter().zip(results) {
        out.push_str(&dumps(&result.apply(&record.value, language)));
        out.push('\n');
    }
    out
}

struct Repo {
    index: RepoIndex,
    /// Embeddings of every chunk, per file (dense ranker only).
    dense: Vec<Vec<Vec<f32>>>,
}

/// Retrieves cross-file context for every record: repositories are read from
/// `repos_root/<metadata.repository>` (one folder per repository, as the builder's
/// `<repository_root>/<language>/<repository>`). `embedder` is needed only for
/// [`RankingFn::Dense`].
pub fn retrieve(
    records: &[ExampleRecord],
    repos_root: &Path,
    language: Language,
    options: &Options,
    tokenizer: &Tokenizer,
    embedder: Option<&dyn Embedder>,
) -> Result<Vec<Retrieval>, RetrievalError> {
    if options.ranking == RankingFn::Dense && embedder.is_none() {
        return Err(RetrievalError::NoEmbedder);
    }
    let mut names: Vec<&str> = records.iter().map(|r| r.repository.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let lowercase = options.ranking == RankingFn::Tfidf;
    let mut repos: HashMap<&str, Repo> = names
        .par_iter()
        .map(|&name| {
            let files = read_project(&repos_root.join(name), language)?;
            Ok((name, Repo { index: RepoIndex::build(files, tokenizer, lowercase), dense: Vec::new() }))
        })
        .collect::<Result<_, RetrievalError>>()?;
    let mut queries = Vec::new();
    if let Some(embedder) = embedder.filter(|_| options.ranking == RankingFn::Dense) {
        // One repository at a time: the embedder batches and parallelises within a call.
        for (name, repo) in repos.iter_mut() {
            repo.dense = embed_all(name, &repo.index, embedder)?;
        }
        let texts: Vec<String> = records.iter().map(|r| query(&r.prompt, &r.groundtruth, options.query)).collect();
        queries = embed_checked(embedder, &texts.iter().map(String::as_str).collect::<Vec<_>>(), "queries")?;
    }
    records
        .par_iter()
        .enumerate()
        .map(|(i, r)| retrieve_one(r, &repos[r.repository.as_str()], options, tokenizer, queries.get(i).map(Vec::as_slice)))
        .collect()
}

fn retrieve_one(
    record: &ExampleRecord,
    repo: &Repo,
    options: &Options,
    tokenizer: &Tokenizer,
    query_vector: Option<&[f32]>,
) -> Result<Retrieval, RetrievalError> {
    let index = &repo.index;
    if index.files.is_empty() {
        return Ok(Retrieval::without_ranking(Status::ProjectNotFound, CrossfileContext::ProjectNotFound));
    }
    if index.file(&record.file).is_none() {
        return Ok(Retrieval::without_ranking(Status::FileNotFoundInProject, CrossfileContext::Empty));
    }
    let paths: Vec<&str> = index.files.iter().map(|f| f.path.as_str()).collect();
    let cross = cross_files(&paths, &record.file, options.max_distance, options.max_files);
    let all = cross_chunks(index, &cross);
    let mut result = Retrieval::without_ranking(Status::NoCrossfileContext, CrossfileContext::Empty);
    result.num_cross_files = cross.len();
    result.num_chunks = all.len();
    if all.is_empty() {
        return Ok(result);
    }
    let candidates = &all[..all.len().min(options.max_chunks)];
    let chunk = |&(f, k): &(usize, usize)| &index.files[f].chunks[k];
    let q = query(&record.prompt, &record.groundtruth, options.query);
    let counts: Vec<&[(u32, u32)]> = candidates.iter().map(|c| chunk(c).counts.as_slice()).collect();
    let (scores, q_tokens) = match options.ranking {
        RankingFn::Bm25 | RankingFn::JaccardSim | RankingFn::Tfidf => {
            let text = if options.ranking == RankingFn::Tfidf { q.to_lowercase() } else { q.clone() };
            let tokens = tokenizer.tokenize(&text);
            let ids = index.query_ids(&tokens);
            let scores = match options.ranking {
                RankingFn::Bm25 => {
                    let lengths: Vec<usize> = candidates.iter().map(|c| chunk(c).len).collect();
                    bm25(&ids, &counts, &lengths)
                }
                RankingFn::JaccardSim => jaccard(&ids, &counts),
                _ => tfidf(&ids, &counts),
            };
            (scores, Some(tokens))
        }
        RankingFn::Dense => {
            let query_vector = query_vector.ok_or(RetrievalError::NoEmbedder)?;
            let docs: Vec<Vec<f32>> = candidates.iter().map(|&(f, k)| repo.dense[f][k].clone()).collect();
            (cosine(query_vector, &docs), None)
        }
    };
    let ids: Vec<String> = candidates.iter().map(|&(f, k)| format!("{}|{k}", index.files[f].path)).collect();
    let texts: Vec<&str> = candidates.iter().map(|c| chunk(c).text.as_str()).collect();
    let by_id = sort_desc(&scores, &ids);
    let by_text = sort_desc(&scores, &texts);
    let wrap = |x: f64| if options.ranking == RankingFn::Tfidf { Score::List(x) } else { Score::Float(x) };
    let sorted_scores: Vec<Score> = by_text.iter().map(|&i| wrap(scores[i])).collect();
    let ranked: Vec<Ranked> = by_id
        .iter()
        .map(|&i| {
            let (f, k) = candidates[i];
            let file = &index.files[f];
            Ranked { path: &file.path, text: &file.chunks[k].text, next_text: file.chunks.get(k + 1).map(|c| c.text.as_str()) }
        })
        .collect();
    let text_sorted: Vec<&str> = by_text.iter().map(|&i| texts[i]).collect();
    let selected = select(&ranked, &text_sorted, &sorted_scores, options.top_k, options.use_next_chunk);
    result.status = Status::Ok;
    result.context = CrossfileContext::Found(selected);
    result.num_candidates = candidates.len();
    result.top10 = by_id.iter().zip(&sorted_scores).take(10).map(|(&i, s)| (ids[i].clone(), s.value())).collect();
    result.query = Some(q);
    result.query_tokens = q_tokens;
    Ok(result)
}

/// Embeds every chunk of the repository in one call; the vectors come back per file.
fn embed_all(name: &str, index: &RepoIndex, embedder: &dyn Embedder) -> Result<Vec<Vec<Vec<f32>>>, RetrievalError> {
    let texts: Vec<&str> = index.files.iter().flat_map(|f| f.chunks.iter().map(|c| c.text.as_str())).collect();
    let mut vectors = embed_checked(embedder, &texts, &format!("chunks of repository {name}"))?.into_iter();
    Ok(index.files.iter().map(|f| vectors.by_ref().take(f.chunks.len()).collect()).collect())
}

/// `embedder.embed(texts)`, checking that one vector came back per text.
fn embed_checked(embedder: &dyn Embedder, texts: &[&str], what: &str) -> Result<Vec<Vec<f32>>, RetrievalError> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let vectors = embedder.embed(texts).map_err(|e| RetrievalError::Embedder(format!("{what}: {e}")))?;
    if vectors.len() != texts.len() {
        return Err(RetrievalError::Embedder(format!("{} vectors for {} {what}", vectors.len(), texts.len())));
    }
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::QueryType;
    use serde_json::json;

    /// Bag of hashed lowercase words: a deterministic stand-in for a neural embedder.
    struct HashedWords;

    impl Embedder for HashedWords {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, super::super::EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0f32; 64];
                    for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                        let h = w.to_lowercase().bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
                        v[(h % 64) as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    /// Counts the calls and texts it is given, then embeds like [`HashedWords`].
    #[derive(Default)]
    struct Counting {
        calls: std::sync::atomic::AtomicUsize,
        texts: std::sync::atomic::AtomicUsize,
    }

    impl Embedder for Counting {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, super::super::EmbedError> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.texts.fetch_add(texts.len(), std::sync::atomic::Ordering::Relaxed);
            HashedWords.embed(texts)
        }
    }

    #[test]
    fn dense_embeds_each_chunk_once_in_batches() {
        let dir = repo();
        let tokenizer = Tokenizer::default();
        let counting = Counting::default();
        let records: Vec<ExampleRecord> = (0..5).map(|_| record("demo", "lib/main.py")).collect();
        let out = retrieve(&records, dir.path(), Language::Python, &dense(), &tokenizer, Some(&counting)).unwrap();
        assert_eq!(out.len(), 5);
        // Two files with one chunk each (main.py is empty), plus five queries: two calls in all.
        assert_eq!(counting.calls.into_inner(), 2);
        assert_eq!(counting.texts.into_inner(), 2 + 5);
        assert_eq!(dense().ranker_output_file_name("unixcoder"), "line_completion_rg1_unixcoder_cosine_sim.jsonl");
    }

    /// Returns a wrong number of vectors.
    struct Broken;

    impl Embedder for Broken {
        fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, super::super::EmbedError> {
            Ok(Vec::new())
        }
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("demo");
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("lib/geometry.py"), "def area(width, height):\n    return width * height\n").unwrap();
        std::fs::write(root.join("lib/network.py"), "def fetch(url):\n    return request(url)\n").unwrap();
        std::fs::write(root.join("lib/main.py"), "").unwrap();
        dir
    }

    fn record(repository: &str, file: &str) -> ExampleRecord {
        let value = json!({"prompt": "w = width\nh = height\nprint(area(w, h", "groundtruth": "))", "metadata": {"repository": repository, "file": file}});
        ExampleRecord::from_json(&value).unwrap()
    }

    fn dense() -> Options {
        Options { query: QueryType::LastNLines, use_next_chunk: false, ..Options::rg1(RankingFn::Dense) }
    }

    #[test]
    fn dense_ranking_uses_the_embedder() {
        let dir = repo();
        let tokenizer = Tokenizer::default();
        let out = retrieve(&[record("demo", "lib/main.py")], dir.path(), Language::Python, &dense(), &tokenizer, Some(&HashedWords)).unwrap();
        let CrossfileContext::Found(selected) = &out[0].context else { panic!("{:?}", out[0].context) };
        assert_eq!(selected[0].filename, "lib/geometry.py");
        assert!(selected[0].score.value() > selected[1].score.value());
        assert_eq!(out[0].query_tokens, None, "dense ranking has no lexical tokens");
    }

    #[test]
    fn dense_ranking_errors() {
        let dir = repo();
        let tokenizer = Tokenizer::default();
        let records = [record("demo", "lib/main.py")];
        let none = retrieve(&records, dir.path(), Language::Python, &dense(), &tokenizer, None);
        assert!(matches!(none, Err(RetrievalError::NoEmbedder)));
        let broken = retrieve(&records, dir.path(), Language::Python, &dense(), &tokenizer, Some(&Broken));
        assert!(matches!(broken, Err(RetrievalError::Embedder(m)) if m.contains("0 vectors")));
    }

    #[test]
    fn statuses_and_their_contexts() {
        let dir = repo();
        let tokenizer = Tokenizer::default();
        let records = [record("demo", "lib/main.py"), record("demo", "lib/absent.py"), record("nowhere", "x.py")];
        let out = retrieve(&records, dir.path(), Language::Python, &Options::rg1(RankingFn::Bm25), &tokenizer, None).unwrap();
        let statuses: Vec<_> = out.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [Status::Ok, Status::FileNotFoundInProject, Status::ProjectNotFound]);
        assert_eq!(out[1].apply(&records[1].value, Language::Python)["crossfile_context"], json!({}));
        assert_eq!(out[2].apply(&records[2].value, Language::Python)["crossfile_context"], json!(""));
        assert_eq!(out[0].num_cross_files, 2);
        assert_eq!(out[0].top10.len(), 2);
        // With two documents every word in one of them has idf ln(1.5) - ln(1.5) = 0, so both
        // score 0 and the tie goes to the larger id; a one-chunk file gives its own chunk.
        let CrossfileContext::Found(selected) = &out[0].context else { panic!() };
        assert_eq!(out[0].top10, [("lib/network.py|0".to_string(), 0.0), ("lib/geometry.py|0".to_string(), 0.0)]);
        assert_eq!(selected[0].chunk, "def fetch(url):\n    return request(url)");
    }
}
