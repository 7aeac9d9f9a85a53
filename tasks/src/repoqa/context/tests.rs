//! Context construction on a three-file repository; every expected value was produced by
//! the reference `make_code_context` (evalplus/repoqa `ae876de`, tree-sitter-languages
//! 1.10.2) with the stand-in tokenizer.

use super::*;

const A: &str = "// Module a: helpers.\n/// Adds one.\nfn inc(x: u32) -> u32 {\n    x + 1 // plus\n}\n\n/* block\n   comment */\nfn dec(x: u32) -> u32 { x - 1 }\n";
// `é` (two bytes) before the needle: the byte offsets used as character indices shift it.
const B: &str = "use crate::a::inc; // é import\n/// Doubles.\nfn double(x: u32) -> u32 {\n    inc(x) * 2\n}\n// trailing\nfn triple(x: u32) -> u32 { x * 3 }\n";
const C: &str = "// c comment\nfn square(x: u32) -> u32 {\n    // mult\n    x * x\n}\nfn cube(x: u32) -> u32 { x * x * x }\n";

/// Files in the order `topological_sort({"c.rs": ["b.rs"], "b.rs": ["a.rs"], "a.rs": []})` gives.
fn files() -> Vec<SourceFile> {
    [("a.rs", A), ("b.rs", B), ("c.rs", C)].iter().map(|(path, text)| SourceFile { path: path.to_string(), text: text.to_string() }).collect()
}

fn needle(name: &str) -> SourceNeedle {
    let (path, start_byte, end_byte) = match name {
        "inc" => ("a.rs", 36, 79),
        "double" => ("b.rs", 45, 88),
        "square" => ("c.rs", 13, 63),
        "cube" => ("c.rs", 64, 100),
        _ => unreachable!("test needles only"),
    };
    SourceNeedle { name: name.into(), path: path.into(), start_byte, end_byte, description: "d".into() }
}

/// The reference's grammars: newer ones recover from the unterminated comments of cut
/// contexts differently (tree-sitter-rust 0.23 takes `/* block\n...` as a comment).
fn grammars() -> RepoqaGrammars {
    let path = RepoqaGrammars::default_reference_path().unwrap_or_default();
    RepoqaGrammars::load_reference(&path).unwrap_or_else(|e| panic!("{e}"))
}

const NEEDLES: [&str; 4] = ["inc", "double", "square", "cube"];

fn build(size: usize, mode: CommentMode, name: &str) -> CodeContext {
    let index = NEEDLES.iter().position(|n| *n == name).unwrap_or_default();
    let mut builder = ContextBuilder::new(Language::Rust, size, mode, &StandInTokenizer, &grammars());
    builder.build(&files(), &needle(name), position_ratio(index, NEEDLES.len())).unwrap()
}

#[test]
fn token_positions_match_the_reference() {
    use CommentMode::{NoPadding, None as Keep, PositionalPadding as Pad};
    #[rustfmt::skip]
    let expected = [
        (16, Keep, "inc", 0, 18, 24), (16, Keep, "double", 0, 18, 21), (16, Keep, "square", 0, 18, 21), (16, Keep, "cube", 4, 21, 24),
        (16, NoPadding, "inc", 0, 15, 21), (16, NoPadding, "double", 0, 18, 21), (16, NoPadding, "square", 0, 15, 18), (16, NoPadding, "cube", 4, 21, 24),
        (16, Pad, "inc", 0, 15, 26), (16, Pad, "double", 0, 18, 21), (16, Pad, "square", 0, 15, 23), (16, Pad, "cube", 4, 21, 24),
        (30, Keep, "inc", 0, 18, 27), (30, Keep, "double", 1, 19, 25), (30, Keep, "square", 4, 22, 25), (30, Keep, "cube", 7, 24, 27),
        (30, NoPadding, "inc", 0, 15, 18), (30, NoPadding, "double", 1, 19, 22), (30, NoPadding, "square", 0, 15, 18), (30, NoPadding, "cube", 4, 21, 24),
        (30, Pad, "inc", 0, 15, 28), (30, Pad, "double", 1, 19, 27), (30, Pad, "square", 5, 20, 28), (30, Pad, "cube", 9, 26, 29),
        (60, Keep, "inc", 0, 18, 62), (60, Keep, "double", 6, 24, 56), (60, Keep, "square", 21, 39, 42), (60, Keep, "cube", 39, 56, 59),
        (60, NoPadding, "inc", 0, 15, 25), (60, NoPadding, "double", 1, 19, 40), (60, NoPadding, "square", 26, 41, 44), (60, NoPadding, "cube", 41, 58, 61),
        (60, Pad, "inc", 0, 15, 65), (60, Pad, "double", 6, 24, 55), (60, Pad, "square", 26, 41, 49), (60, Pad, "cube", 41, 58, 61),
    ];
    for (size, mode, name, start, end, total) in expected {
        let context = build(size, mode, name);
        let got = (context.needle_token_start, context.needle_token_end, context.code_context_ntokens);
        assert_eq!(got, (start, end, total), "{size} {mode} {name}");
        assert_eq!(context.needle_slice_byte_char_mismatch, name == "double", "{name}");
    }
}

#[test]
fn needle_in_the_first_file_larger_than_its_share() {
    // 16 * 0.125 - 18 / 2 < 0: no prefix at all, not even the path comment.
    let context = build(16, CommentMode::None, "inc");
    assert_eq!(context.code_context, "fn inc(x: u32) -> u32 {\n    x + 1 // plus\n}\n\n/* block\n...\n");
}

#[test]
fn needle_in_the_last_file_takes_earlier_files_from_their_top() {
    let context = build(60, CommentMode::None, "cube");
    assert_eq!(
        context.code_context,
        "// Path: b.rs\n...\n// Path: c.rs\n// c comment\nfn square(x: u32) -> u32 {\n    // mult\n    x * x\n}\n\nfn cube(x: u32) -> u32 { x * x * x }...\n"
    );
}

#[test]
fn byte_offsets_are_character_indices() {
    let context = build(30, CommentMode::None, "double");
    assert_eq!(context.code_context, "f\nn double(x: u32) -> u32 {\n    inc(x) * 2\n}\n// trailing\n...\n");
}

#[test]
fn whole_context_spans_three_files() {
    let context = build(200, CommentMode::None, "double");
    assert_eq!(
        context.code_context,
        "// Path: a.rs\n// Module a: helpers.\n/// Adds one.\nfn inc(x: u32) -> u32 {\n    x + 1 // plus\n}\n\n...\n// Path: b.rs\n\
         use crate::a::inc; // é import\n/// Doubles.\nf\nn double(x: u32) -> u32 {\n    inc(x) * 2\n}\n// trailing\n\
         fn triple(x: u32) -> u32 { x * 3 }\n\n// Path: c.rs\n// c comment\nfn square(x: u32) -> u32 {\n    // mult\n    x * x\n}\n\
         fn cube(x: u32) -> u32 { x * x * x }\n\n"
    );
    assert_eq!((context.needle_token_start, context.needle_token_end, context.code_context_ntokens), (67, 85, 149));
}

#[test]
fn cleaning_rebuilds_a_multi_file_suffix_from_the_prefix_lines() {
    // The reference's slip: the rest of a.rs is dropped and b.rs's path comment is glued
    // to the needle.
    let context = build(60, CommentMode::NoPadding, "inc");
    assert_eq!(context.code_context, "fn inc(x: u32) -> u32 {\n    x + 1 \n}// Path: b.rs\n...\n");
    let context = build(200, CommentMode::NoPadding, "double");
    assert_eq!(
        context.code_context,
        "// Path: a.rs\n\n\nfn inc(x: u32) -> u32 {\n    x + 1 \n}\n\n...\n// Path: b.rs\nuse crate::a::inc; \n\nf\nn double(x: u32) -> u32 {\n    \
         inc(x) * 2\n}\n// Path: c.rs\n\nfn square(x: u32) -> u32 {\n    \n    x * x\n}\nfn cube(x: u32) -> u32 { x * x * x }\n...\n"
    );
}

#[test]
fn positional_padding_adds_numbered_comment_lines() {
    let context = build(60, CommentMode::PositionalPadding, "double");
    assert_eq!(
        context.code_context,
        "// Line Number 0\n\n\nf\nn double(x: u32) -> u32 {\n    inc(x) * 2\n}\n// Path: c.rs\n\nfn square(x: u32) -> u32 {...\n// Line Number 1\n// Line Number 2\n\n"
    );
}

#[test]
fn a_needle_outside_the_files_is_an_error() {
    let mut builder = ContextBuilder::new(Language::Rust, 60, CommentMode::None, &StandInTokenizer, &RepoqaGrammars::Bundled);
    let mut lost = needle("inc");
    lost.path = "z.rs".into();
    let err = builder.build(&files(), &lost, 0.5).unwrap_err();
    assert_eq!(err.to_string(), "needle `inc`: its file `z.rs` is not among the repository's files (ordered by `dependency`)");
}

#[test]
fn token_counter_failures_are_reported() {
    let failing = |_: &str| -> Result<usize, TokenizeError> { Err("no vocabulary".into()) };
    let mut builder = ContextBuilder::new(Language::Rust, 60, CommentMode::None, &failing, &RepoqaGrammars::Bundled);
    let err = builder.build(&files(), &needle("inc"), 0.5).unwrap_err();
    assert_eq!(err.to_string(), "token counter: no vocabulary");
}

#[test]
fn python_slices_clamp_and_count_characters() {
    assert_eq!(py_slice("aéb", 1, 2), "é");
    assert_eq!(py_slice("aéb", 2, 99), "b");
    assert_eq!(py_slice("abc", 2, 1), "");
    assert_eq!(py_slice("abc", 5, usize::MAX), "");
}

#[test]
fn comment_modes_use_the_official_names() {
    for mode in CommentMode::ALL {
        assert_eq!(mode.name().parse::<CommentMode>(), Ok(mode));
    }
    assert!("clean".parse::<CommentMode>().is_err());
    assert_eq!(position_ratio(0, 10), 0.05);
    assert_eq!(position_ratio(9, 10), 0.95);
}
