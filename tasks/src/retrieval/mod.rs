//! CrossCodeEval cross-file context retrieval: the official prompt builder
//! (`prompt_builder/augment_with_cfc.py` of amazon-science/cceval) re-implemented so that its
//! output files are reproduced byte for byte.
//!
//! Pipeline per example: the repository's source files ([`chunks::read_project`]) -> the files
//! within a directory distance, nearest first ([`chunks::cross_files`]) -> 10-line chunks
//! ([`chunks::RepoIndex`]) -> the first 1000 chunks ranked against the query by BM25, TF-IDF,
//! Jaccard or a dense embedder ([`rank`]) -> 5 chunks selected ([`context::select`]) -> the
//! `crossfile_context` value ([`context::CrossfileContext`]). Tokenization is NLTK's
//! `word_tokenize` ([`tokenize`], [`punkt`]).
//!
//! Unlike the rest of this crate, retrieval reads the project sources from disk.

pub mod chunks;
pub mod context;
pub mod punkt;
pub mod rank;
pub mod run;
pub mod tokenize;

pub use context::{CrossfileContext, QueryType, Score, Selected};
pub use run::{render_jsonl, retrieve, ExampleRecord, Retrieval, Status};
pub use tokenize::Tokenizer;

/// Errors of retrieval.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    /// A project file or directory could not be read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The dense ranker was asked for without an embedder.
    #[error("the dense ranker needs an embedder (a BERT/RoBERTa model or an embeddings endpoint); none was given")]
    NoEmbedder,
    /// The embedder failed or returned the wrong number of vectors.
    #[error("embedder: {0}")]
    Embedder(String),
}

/// What an embedder's failure carries.
pub type EmbedError = Box<dyn std::error::Error + Send + Sync>;

/// Turns texts into vectors for the dense ranker (cosine similarity). Implemented by callers,
/// e.g. a UniXcoder/BERT model in the engine crate.
pub trait Embedder: Send + Sync {
    /// One vector per text, in order; all of the same dimension.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The ranking function (`--ranking_fn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankingFn {
    /// `bm25`: rank-bm25 `BM25Okapi`.
    Bm25,
    /// `tfidf`: scikit-learn TF-IDF cosine; scores are written as one-element lists.
    Tfidf,
    /// `jaccard_sim`: token-set Jaccard similarity.
    JaccardSim,
    /// Cosine similarity of embeddings from an [`Embedder`] (the official `cosine_sim`).
    Dense,
}

impl RankingFn {
    /// The official name, as in the output file name `line_completion_<suffix>_<name>.jsonl`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bm25 => "bm25",
            Self::Tfidf => "tfidf",
            Self::JaccardSim => "jaccard_sim",
            Self::Dense => "cosine_sim",
        }
    }
}

/// The builder's options; [`Options::rg1`] and [`Options::oracle`] are `run.sh`'s settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Ranking function.
    pub ranking: RankingFn,
    /// Query formation.
    pub query: QueryType,
    /// `--use_next_chunk_as_cfc`.
    pub use_next_chunk: bool,
    /// `--maximum_cross_file_chunk` (chunks returned).
    pub top_k: usize,
    /// `--crossfile_distance`.
    pub max_distance: usize,
    /// `--maximum_cross_files`.
    pub max_files: usize,
    /// `--maximum_chunk_to_rerank`.
    pub max_chunks: usize,
}

impl Options {
    /// `run.sh`'s RG-1 call with the given ranking function (query = last 10 prompt lines,
    /// next chunk used).
    pub fn rg1(ranking: RankingFn) -> Self {
        Self { ranking, query: QueryType::LastNLines, use_next_chunk: true, top_k: 5, max_distance: 100, max_files: 1000, max_chunks: 1000 }
    }

    /// `run.sh`'s oracle call (query includes the groundtruth, chunks themselves used).
    pub fn oracle(ranking: RankingFn) -> Self {
        Self { query: QueryType::Groundtruth, use_next_chunk: false, ..Self::rg1(ranking) }
    }

    /// The official output file name: `line_completion_<rg1|oracle>_<ranking>.jsonl`.
    pub fn output_file_name(&self) -> String {
        let suffix = if self.query == QueryType::Groundtruth { "oracle" } else { "rg1" };
        format!("line_completion_{suffix}_{}.jsonl", self.ranking.name())
    }

    /// The official output file name of a run with a neural ranker (run.sh's `--ranker`, e.g.
    /// `unixcoder`), which the builder puts before the ranking function:
    /// `line_completion_<rg1|oracle>_<ranker>_cosine_sim.jsonl`.
    pub fn ranker_output_file_name(&self, ranker: &str) -> String {
        let suffix = if self.query == QueryType::Groundtruth { "oracle" } else { "rg1" };
        format!("line_completion_{suffix}_{ranker}_{}.jsonl", self.ranking.name())
    }
}

/// The ranker's name in output file names, from the embedder's name: `unixcoder` for any
/// UniXcoder (the official run's name), else the name in lower case with every character but
/// letters, digits, `-` and `.` made `-`.
pub fn ranker_name(embedder: &str) -> String {
    let lower = embedder.to_lowercase();
    if lower.contains("unixcoder") {
        return "unixcoder".into();
    }
    lower.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranker_names_are_safe_in_file_names() {
        assert_eq!(ranker_name("microsoft/UniXcoder-base"), "unixcoder");
        assert_eq!(ranker_name("all-MiniLM-L6 v2.0"), "all-minilm-l6-v2.0");
    }
}
