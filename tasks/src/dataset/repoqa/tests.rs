//! Dataset building on small repositories the tests write, one per language, whose files import
//! each other (with a cycle each): dependencies, topological order, function tables, needles,
//! and the round trip through our RepoQA context builder and scorer.

use std::path::Path;

use serde_json::{json, Value};

use super::*;
use crate::repoqa::context::{build_snf_tasks, CommentMode, SourceDataset, StandInTokenizer};
use crate::repoqa::{Dataset, ModelOutput, RepoqaScorer};

fn write_repo(root: &Path, files: &[(&str, String)]) {
    for (path, text) in files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
}

/// `count` functions named `<stem>_<i>` in the language's syntax, each with a doc comment.
fn functions(language: Language, stem: &str, count: usize) -> String {
    (0..count)
        .map(|i| match language {
            Language::Python => {
                format!("def {stem}_{i}(value):\n    \"\"\"Adds {i} to the value for {stem}.\"\"\"\n    total = value + {i}\n    return total * 2\n\n\n")
            }
            Language::Cpp => format!("// Adds {i} for {stem}.\nint {stem}_{i}(int value) {{\n  int total = value + {i};\n  return total * 2;\n}}\n\n"),
            Language::Java => format!(
                "  /** Adds {i} for {stem}. */\n  public static int {stem}_{i}(int value) {{\n    int total = value + {i};\n    return total * 2;\n  }}\n\n"
            ),
            Language::TypeScript => {
                format!("/** Adds {i} for {stem}. */\nexport function {stem}_{i}(value: number): number {{\n  const total = value + {i};\n  return total * 2;\n}}\n\n")
            }
            Language::Rust => format!("/// Adds {i} for {stem}.\npub fn {stem}_{i}(value: i64) -> i64 {{\n    let total = value + {i};\n    total * 2\n}}\n\n"),
        })
        .collect()
}

/// A small repository: its files, the entry folder and the dependencies expected.
type Fixture = (Vec<(&'static str, String)>, &'static str, Vec<(&'static str, Vec<&'static str>)>);

/// A repository per language.
fn fixture(language: Language) -> Fixture {
    let f = |stem: &str, n: usize| functions(language, stem, n);
    match language {
        Language::Python => (
            vec![
                ("src/pkg/__init__.py", "from .core import core_0\n".to_string()),
                ("src/pkg/core.py", format!("import os\nfrom . import util\nfrom pkg.models import Model\n\n{}", f("core", 4))),
                ("src/pkg/util.py", format!("import pkg.core\nfrom .sub.deep import deep_0\n\n{}", f("util", 3))),
                ("src/pkg/models.py", format!("from typing import (\n    List,\n)\n\n{}", f("models", 3))),
                ("src/pkg/sub/__init__.py", String::new()),
                ("src/pkg/sub/deep.py", format!("from ..models import models_0\n\n{}", f("deep", 2))),
                ("setup.py", "import pkg\n".to_string()),
            ],
            "src/pkg",
            vec![
                ("src/pkg/__init__.py", vec!["src/pkg/core.py"]),
                ("src/pkg/core.py", vec!["src/pkg/models.py", "src/pkg/util.py"]),
                ("src/pkg/models.py", vec![]),
                ("src/pkg/sub/__init__.py", vec![]),
                ("src/pkg/sub/deep.py", vec!["src/pkg/models.py"]),
                ("src/pkg/util.py", vec!["src/pkg/core.py", "src/pkg/sub/deep.py"]),
            ],
        ),
        Language::Cpp => (
            vec![
                ("src/a.cc", format!("#include \"a.h\"\n#include <vector>\n#include <util/b.h>\n\n{}", f("alpha", 4))),
                ("src/a.h", "#pragma once\n#include \"util/b.h\"\nint alpha_0(int value);\n".to_string()),
                ("src/util/b.h", "#pragma once\n# include \"../a.h\"\nint beta_0(int value);\n".to_string()),
                ("src/util/b.cc", format!("#include \"b.h\"\n#include \"missing.h\"\n\n{}", f("beta", 4))),
            ],
            "src",
            vec![
                ("src/a.cc", vec!["src/a.h", "src/util/b.h"]),
                ("src/a.h", vec!["src/util/b.h"]),
                ("src/util/b.cc", vec!["src/util/b.h"]),
                ("src/util/b.h", vec!["src/a.h"]),
            ],
        ),
        Language::Java => (
            vec![
                (
                    "src/main/java/com/ex/App.java",
                    format!("package com.ex;\n\nimport com.ex.util.Strings;\nimport java.util.List;\n\npublic class App {{\n  Helper helper;\n{}}}\n", f("app", 4)),
                ),
                ("src/main/java/com/ex/Helper.java", format!("package com.ex;\n\npublic class Helper {{\n{}}}\n", f("helper", 3))),
                (
                    "src/main/java/com/ex/util/Strings.java",
                    format!("package com.ex.util;\n\nimport static com.ex.App.app_0;\nimport com.ex.*;\n\npublic class Strings {{\n{}}}\n", f("strings", 3)),
                ),
            ],
            "src/main/java",
            vec![
                ("src/main/java/com/ex/App.java", vec!["src/main/java/com/ex/Helper.java", "src/main/java/com/ex/util/Strings.java"]),
                ("src/main/java/com/ex/Helper.java", vec![]),
                ("src/main/java/com/ex/util/Strings.java", vec!["src/main/java/com/ex/App.java", "src/main/java/com/ex/Helper.java"]),
            ],
        ),
        Language::TypeScript => (
            vec![
                ("src/index.ts", "export * from './a';\nimport { lib_0 } from \"./lib/b\";\nimport 'fs';\n".to_string()),
                ("src/a.ts", format!("import {{\n  lib_1,\n}} from './lib/b.js';\n\n{}", f("alpha", 4))),
                ("src/lib/b.ts", format!("import type {{ Thing }} from '../a';\nconst c = require('./c');\n\n{}", f("lib", 3))),
                ("src/lib/c.js", format!("// see './a' for more\n{}", "module.exports = 1;\n")),
            ],
            "src",
            vec![
                ("src/a.ts", vec!["src/lib/b.ts"]),
                ("src/index.ts", vec!["src/a.ts", "src/lib/b.ts"]),
                ("src/lib/b.ts", vec!["src/a.ts", "src/lib/c.js"]),
                ("src/lib/c.js", vec![]),
            ],
        ),
        Language::Rust => (
            vec![
                ("src/lib.rs", format!("mod a;\npub mod b;\nuse crate::b::helper;\nuse std::fmt;\n\n{}", f("root", 2))),
                ("src/a.rs", format!("use super::b::{{self, c::Deep as D}};\n// crate::lib_only is a comment\n\n{}", f("alpha", 4))),
                ("src/b/mod.rs", format!("pub(crate) mod c;\n\n{}", f("beta", 3))),
                ("src/b/c.rs", format!("pub fn run() -> i64 {{ crate::a::alpha_0(1) }}\n\n{}", f("gamma", 2))),
                ("src/main.rs", "fn main() { println!(\"{}\", cratename::root_0(1)); }\n".to_string()),
            ],
            "src",
            vec![
                ("src/a.rs", vec!["src/b/c.rs", "src/b/mod.rs"]),
                ("src/b/c.rs", vec!["src/a.rs"]),
                ("src/b/mod.rs", vec!["src/b/c.rs"]),
                ("src/lib.rs", vec!["src/a.rs", "src/b/mod.rs"]),
                ("src/main.rs", vec![]),
            ],
        ),
    }
}

fn options(language: Language, entry: &str) -> CurateOptions {
    CurateOptions {
        language,
        name: format!("demo-{language}"),
        commit: "1.0.0".into(),
        entry: entry.into(),
        exclude: Vec::new(),
        select: SelectOptions { seed: 3, ..SelectOptions::default() },
    }
}

fn build(language: Language, dir: &Path) -> CuratedRepo {
    let (files, entry, _) = fixture(language);
    write_repo(dir, &files);
    curate(dir, &options(language, entry), &RepoqaGrammars::Bundled).unwrap()
}

#[test]
fn dependencies_from_imports_per_language() {
    for language in Language::ALL {
        let dir = tempfile::tempdir().unwrap();
        let (_, _, expected) = fixture(language);
        let repo = build(language, dir.path());
        let found: Vec<(&str, Vec<&str>)> =
            repo.dependency.iter().map(|(p, d)| (p.as_str(), d.iter().map(String::as_str).collect())).collect();
        assert_eq!(found, expected, "{language}");
    }
}

#[test]
fn tables_follow_the_topological_order_with_global_spans() {
    let dir = tempfile::tempdir().unwrap();
    let repo = build(Language::Python, dir.path());
    let order: Vec<&str> = repo.functions.iter().map(|(p, _)| p.as_str()).collect();
    // Depth first from each key in path order; the core <-> util cycle is cut where it closes.
    assert_eq!(
        order,
        ["src/pkg/models.py", "src/pkg/sub/deep.py", "src/pkg/util.py", "src/pkg/core.py", "src/pkg/__init__.py", "src/pkg/sub/__init__.py"]
    );
    let text = |path: &str| repo.files.iter().find(|f| f.path == path).unwrap().text.clone();
    let concatenated: String = order.iter().map(|p| text(p)).collect::<Vec<_>>().join("\n");
    let lines: Vec<&str> = concatenated.split('\n').collect();
    for (path, functions) in &repo.functions {
        let file = text(path);
        for f in functions {
            let code = &file[f.start_byte..f.end_byte];
            assert!(code.starts_with(&format!("def {}(", f.name)), "{code}");
            // ASCII files: global bytes index the concatenation (files joined by the newline
            // each `count("\n") + 1` adds).
            assert_eq!(&concatenated[f.global_start_byte + order.iter().position(|p| p == path).unwrap()..][..code.len()], code);
            assert_eq!(lines[f.global_start_line], code.lines().next().unwrap());
            assert!(f.code_ratio > 0.2 && f.code_ratio < 0.6, "the docstring is counted: {}", f.code_ratio);
        }
    }
    assert_eq!(repo.functions.iter().map(|(_, f)| f.len()).sum::<usize>(), 12);
}

#[test]
fn needles_are_unique_short_seeded_and_described_from_docstrings() {
    let dir = tempfile::tempdir().unwrap();
    let repo = build(Language::Rust, dir.path());
    // 13 functions with unique names, every one in its own bin: 10 needles.
    assert_eq!(repo.candidates, 13);
    assert_eq!(repo.needles.len(), 10);
    let names: std::collections::HashSet<&str> = repo.needles.iter().map(|n| n.function.name.as_str()).collect();
    assert_eq!(names.len(), 10);
    let again = build(Language::Rust, tempfile::tempdir().unwrap().path());
    assert_eq!(again.needles, repo.needles, "the same seed picks the same needles");
    let mut other = options(Language::Rust, "src");
    other.select.seed = 4;
    let reseeded = curate(dir.path(), &other, &RepoqaGrammars::Bundled).unwrap();
    assert_ne!(reseeded.needles.iter().map(|n| &n.function.name).collect::<Vec<_>>(), repo.needles.iter().map(|n| &n.function.name).collect::<Vec<_>>());
    let needle = &repo.needles[0];
    assert_eq!(needle.source, "docstring");
    assert!(needle.description.contains("[from the function's own docstring/comment] Adds "), "{}", needle.description);
    assert!(!needle.description.contains(&needle.function.name));
    // A length limit below every function leaves no candidate.
    let mut strict = options(Language::Rust, "src");
    strict.select.max_bytes = 10;
    assert!(curate(dir.path(), &strict, &RepoqaGrammars::Bundled).unwrap().needles.is_empty());
}

struct Echo;

impl Annotator for Echo {
    fn label(&self) -> String {
        "model:echo".into()
    }
    fn annotate(&self, prompts: &[String]) -> Result<Vec<String>, AnnotateError> {
        Ok(prompts.iter().map(|p| format!("Sure.\n<desc_start>\n1. **Purpose**: {} chars shown\n<desc_end>\nDone.", p.len())).collect())
    }
}

#[test]
fn annotations_replace_descriptions_with_the_captured_part() {
    let dir = tempfile::tempdir().unwrap();
    let mut repo = build(Language::Java, dir.path());
    let prompts = repo.annotation_prompts(describe::CODE_PREFIX_LINES);
    let first = &repo.needles[0].function.name;
    assert!(prompts[0].contains(&format!("DO NOT reveal function names ({first})")));
    assert!(prompts[0].contains(&format!("public static int {first}(int value)")), "the code shown holds the needle");
    repo.annotate(&Echo, describe::CODE_PREFIX_LINES).unwrap();
    // Fewer lines before the needle, a shorter prompt.
    assert!(repo.annotation_prompts(0)[0].len() < prompts[0].len());
    assert_eq!(repo.needles[0].description, format!("\n1. **Purpose**: {} chars shown\n", prompts[0].len()));
    assert_eq!(repo.needles[0].source, "model:echo");
}

#[test]
fn built_datasets_feed_our_context_builder_and_scorer() {
    let mut dataset = None;
    let dirs: Vec<tempfile::TempDir> = Language::ALL.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    for (language, dir) in Language::ALL.into_iter().zip(&dirs) {
        let repo = build(language, dir.path());
        assert!(!repo.needles.is_empty(), "{language}");
        dataset = Some(add_to_dataset(dataset, language, repo.to_json()).unwrap());
    }
    // Round trip through text, as a file would be read.
    let dataset: Value = serde_json::from_str(&dataset.unwrap().to_string()).unwrap();
    let keys: Vec<&str> = dataset.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["python", "cpp", "java", "typescript", "rust"]);
    let repo_keys: Vec<&str> = dataset["python"][0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(repo_keys, ["repo", "commit_sha", "entrypoint_path", "topic", "content", "dependency", "functions", "needles"]);
    let source = SourceDataset::from_json("built.json", &dataset).unwrap();
    let scoring = Dataset::from_json("built.json", &dataset).unwrap();
    let mut scorer = RepoqaScorer::new(false, RepoqaGrammars::Bundled);
    for language in Language::ALL {
        let tasks = build_snf_tasks(&source, language, 16384, CommentMode::None, &StandInTokenizer, &RepoqaGrammars::Bundled).unwrap();
        let repo = scoring.repo(language.name(), &format!("demo-{language}")).unwrap();
        assert_eq!(tasks.len(), repo.needles.len());
        for (task, needle_text) in tasks.iter().zip(&repo.needle_texts) {
            // The needle's byte range (TypeScript's starts after `export`, as the reference plants it).
            let entry = &dataset[language.name()][0];
            let needle = entry["needles"].as_array().unwrap().iter().find(|n| n["name"] == task.name.as_str()).unwrap();
            let file = entry["content"][needle["path"].as_str().unwrap()].as_str().unwrap();
            let span = &file[needle["start_byte"].as_u64().unwrap() as usize..needle["end_byte"].as_u64().unwrap() as usize];
            assert!(task.context.code_context.contains(span), "{language}: the needle is in its context");
            let mut record = task.to_json();
            record["output"] = json!([format!("Here it is:\n```\n{needle_text}\n```\n")]);
            let output = ModelOutput::from_json(&record).unwrap();
            let result = scorer.score(language, repo, &output);
            assert!(result.is_best_similar && result.passes(0.8), "{language} {}: {:?}", task.name, result.best_similar_score);
        }
        // Answering with another needle fails.
        if tasks.len() > 1 {
            let mut record = tasks[0].to_json();
            record["output"] = json!([format!("```\n{}\n```", repo.needle_texts[1])]);
            assert!(!scorer.score(language, repo, &ModelOutput::from_json(&record).unwrap()).is_best_similar);
        }
    }
    // Adding a repository of the same name replaces it.
    let replaced = add_to_dataset(Some(dataset.clone()), Language::Rust, json!({"repo": "demo-rust", "x": 1})).unwrap();
    assert_eq!(replaced["rust"].as_array().unwrap().len(), 1);
    assert_eq!(replaced["rust"][0]["x"], 1);
    assert!(add_to_dataset(Some(json!([])), Language::Rust, json!({})).is_err());
}

#[test]
fn empty_and_missing_entries_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_repo(dir.path(), &[("src/readme.txt", "no code".to_string())]);
    let err = curate(dir.path(), &options(Language::Python, "src"), &RepoqaGrammars::Bundled).unwrap_err();
    assert!(err.to_string().contains("no python file (.py)"), "{err}");
    let err = curate(dir.path(), &options(Language::Python, "lib"), &RepoqaGrammars::Bundled).unwrap_err();
    assert!(err.to_string().contains("entry directory does not exist"), "{err}");
}
