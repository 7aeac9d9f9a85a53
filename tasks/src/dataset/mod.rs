//! Building benchmark datasets from source repositories (pure logic: callers read the files).

pub mod cceval;
