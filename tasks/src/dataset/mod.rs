//! Building benchmark datasets from source repositories on disk (pure logic: callers read the
//! files): CrossCodeEval line-completion examples ([`cceval`]) and RepoQA needle-function
//! entries ([`repoqa`]).

pub mod cceval;
pub mod repoqa;
