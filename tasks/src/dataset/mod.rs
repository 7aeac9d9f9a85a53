//! Building benchmark datasets from repositories on disk: RepoQA's needle-function entries
//! ([`repoqa`]).

pub mod repoqa;
