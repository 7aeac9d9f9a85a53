//! Comment cleaning of a built context: the reference's `clean_context_comments`,
//! `clean_segment_comments` and `clean_partial_file`, quirks included, plus the positional
//! padding that keeps the needle at its depth.

use super::{comment_prefix, path_line, ContextError, TokenCounter};
use crate::repoqa::code::{delete_spans, CodeTools};
use crate::repoqa::Language;

/// The three parts of a context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parts {
    pub prefix: String,
    pub needle: String,
    pub suffix: String,
}

/// What `clean_context_comments` needs besides the parts.
pub(super) struct CleanInput<'a> {
    pub language: Language,
    /// Paths of the files in the context, in context order.
    pub context_paths: &'a [String],
    /// The text of the first file before the needle's file (the last one the prefix
    /// loop visited), if any.
    pub top_prefix_file: Option<&'a str>,
    /// The text of the last file after the needle's file, if any.
    pub bottom_suffix_file: Option<&'a str>,
    pub position_ratio: f64,
    pub add_padding: bool,
}

/// The reference's `clean_context_comments`.
///
/// A context that starts inside the top prefix file is cleaned by parsing that whole file
/// (comments replaced by their newlines) and keeping as many lines as the prefix had.
/// The suffix is meant to get the same treatment, but the reference splits the *prefix*
/// into lines there: the line holding the last file's path comment is not found, so the
/// cleaned suffix is just the last file's path comment and its first
/// `prefix lines - 1` cleaned lines, and the rest of the needle's file is gone.
/// This reproduces that.
pub(super) fn clean_context_comments(
    tools: &mut CodeTools,
    tokens: &dyn TokenCounter,
    parts: Parts,
    input: &CleanInput<'_>,
) -> Result<Parts, ContextError> {
    let language = input.language;
    let paths = input.context_paths;
    // Python's `if top_prefix_file:` is false for an empty file too.
    let top = input.top_prefix_file.filter(|text| !text.is_empty());
    let bottom = input.bottom_suffix_file.filter(|text| !text.is_empty());

    let prefix = match (top, paths) {
        (Some(top), [top_path, second_path, ..]) => {
            let (top_lines, rest) = split_at_path_line(&parts.prefix, &path_line(language, second_path));
            clean_partial_file(tools, language, top, top_lines, top_path) + &clean_segment(tools, language, &rest, paths)
        }
        _ => clean_segment(tools, language, &parts.prefix, paths),
    };
    let needle = clean_segment(tools, language, &parts.needle, paths);
    let suffix = match (bottom, paths) {
        (Some(bottom), [.., last_path]) => {
            // The reference's slip: it searches the prefix, not the suffix.
            let (bottom_lines, before) = split_at_path_line(&parts.prefix, &path_line(language, last_path));
            clean_segment(tools, language, &before, paths) + &clean_partial_file(tools, language, bottom, bottom_lines, last_path)
        }
        _ => clean_segment(tools, language, &parts.suffix, paths),
    };

    if !input.add_padding {
        return Ok(Parts { prefix, needle, suffix });
    }
    let count = |text: &str| -> Result<i64, ContextError> { Ok(tokens.count_tokens(text).map_err(ContextError::Tokenizer)? as i64) };
    let removed_from_needle = count(&parts.needle)? - count(&needle)?;
    // Python `int(float)` truncates toward zero, as `as i64` does.
    let needle_prefix_share = (removed_from_needle as f64 * input.position_ratio) as i64;
    let needle_suffix_share = removed_from_needle - needle_prefix_share;
    let mut prefix_padding = needle_prefix_share + count(&parts.prefix)? - count(&prefix)? - 1;
    let mut suffix_padding = needle_suffix_share + count(&parts.suffix)? - count(&suffix)? - 1;

    let marker = comment_prefix(language);
    let mut line = 0usize;
    let mut prefix_dummy = String::new();
    while prefix_padding > 0 {
        let current = format!("{marker} Line Number {line}\n");
        prefix_padding -= count(&current)?;
        prefix_dummy += &current;
        line += 1;
    }
    let mut suffix_dummy = String::new();
    while suffix_padding > 0 {
        let current = format!("{marker} Line Number {line}\n");
        suffix_padding -= count(&current)?;
        suffix_dummy += &current;
        line += 1;
    }
    Ok(Parts { prefix: prefix_dummy + "\n" + &prefix, needle, suffix: suffix + &suffix_dummy + "\n" })
}

/// Splits `text` into lines and finds the first line containing `marker`: returns how many
/// lines come before it and the lines from it on, joined by `\n` (all lines before and
/// nothing after when no line has it).
fn split_at_path_line(text: &str, marker: &str) -> (usize, String) {
    let lines: Vec<&str> = text.split('\n').collect();
    match lines.iter().position(|line| line.contains(marker)) {
        Some(at) => (at, lines[at..].join("\n")),
        None => (lines.len(), String::new()),
    }
}

/// The reference's `clean_segment_comments`: parse a piece of the context on its own and
/// delete every comment except the synthetic path comments of the context's files.
fn clean_segment(tools: &mut CodeTools, language: Language, segment: &str, context_paths: &[String]) -> String {
    let path_comments: Vec<String> = context_paths.iter().map(|path| path_line(language, path)).collect();
    let spans = tools
        .comment_spans(segment)
        .into_iter()
        .filter(|&(start, end)| {
            let text = segment.as_bytes().get(start..end).map(String::from_utf8_lossy).unwrap_or_default();
            !path_comments.iter().any(|comment| *comment == text)
        })
        .collect();
    delete_spans(segment, spans)
}

/// The reference's `clean_partial_file`: the whole file with every comment replaced by
/// the newlines it contained, cut to its first `partial_lines - 1` lines (a Python slice
/// `[:partial_lines - 1]`, so `0` keeps all lines but the last), after the file's path
/// comment and followed by `...`.
fn clean_partial_file(tools: &mut CodeTools, language: Language, whole_file: &str, partial_lines: usize, path: &str) -> String {
    let mut spans = tools.comment_spans(whole_file);
    spans.sort_by_key(|span| std::cmp::Reverse(span.0));
    let mut bytes = whole_file.as_bytes().to_vec();
    for (start, end) in spans {
        let (start, end) = (start.min(bytes.len()), end.min(bytes.len()).max(start.min(bytes.len())));
        let newlines = bytes[start..end].iter().filter(|b| **b == b'\n').count();
        bytes.splice(start..end, std::iter::repeat_n(b'\n', newlines));
    }
    let cleaned = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let lines: Vec<&str> = cleaned.split('\n').collect();
    let keep = match partial_lines.checked_sub(1) {
        Some(n) => n.min(lines.len()),
        None => lines.len().saturating_sub(1),
    };
    format!("{}\n{}...\n", path_line(language, path), lines[..keep].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repoqa::RepoqaGrammars;

    #[test]
    fn partial_file_keeps_lines_and_blanks_comments() {
        let mut tools = CodeTools::new(Language::Rust, &RepoqaGrammars::Bundled);
        let file = "/* a\n b */ fn f() {}\n// c\nfn g() {}\n";
        assert_eq!(clean_partial_file(&mut tools, Language::Rust, file, 3, "x.rs"), "// Path: x.rs\n\n fn f() {}...\n");
        // Python's `[:-1]`: everything but the last line.
        assert_eq!(clean_partial_file(&mut tools, Language::Rust, file, 0, "x.rs"), "// Path: x.rs\n\n fn f() {}\n\nfn g() {}...\n");
    }

    #[test]
    fn segments_keep_path_comments_of_context_files_only() {
        let mut tools = CodeTools::new(Language::Python, &RepoqaGrammars::Bundled);
        let paths = vec!["a.py".to_string()];
        let segment = "# Path: a.py\nx = 1  # one\n# Path: b.py\n";
        assert_eq!(clean_segment(&mut tools, Language::Python, segment, &paths), "# Path: a.py\nx = 1  \n\n");
    }

    #[test]
    fn split_at_path_line_counts_lines_before_the_marker() {
        assert_eq!(split_at_path_line("a\nb\n// Path: c\nd", "// Path: c"), (2, "// Path: c\nd".to_string()));
        assert_eq!(split_at_path_line("a\nb", "// Path: c"), (2, String::new()));
    }
}
