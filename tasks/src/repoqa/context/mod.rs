//! RepoQA code contexts: the reference's `make_code_context` (evalplus/repoqa
//! `search_needle_function.py`), which plants a needle function at a chosen depth of a
//! window of about `code_context_size` tokens cut from the repository's files, optionally
//! with comments cleaned out.
//!
//! The reference's quirks are kept, because the published numbers were made with them:
//! needle offsets are UTF-8 byte offsets used as character indices, the files before the
//! needle's file contribute their *first* lines, and comment cleaning rebuilds a suffix
//! that spans several files from the wrong part (see [`clean`]).

mod clean;
pub mod data;
pub mod task;
pub mod tokens;

use std::fmt;
use std::str::FromStr;

use super::code::CodeTools;
use super::{Language, RepoqaGrammars};
pub use data::{topological_sort, SourceDataset, SourceFile, SourceNeedle, SourceRepo};
pub use task::{build_snf_tasks, snf_prompt, task_description, SnfTask, INSTRUCTION, TEMPLATE};
pub use tokens::{StandInTokenizer, TokenCounter, TokenizeError};

/// How comments are treated in the context (`--clean-ctx-comments`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CommentMode {
    /// `none`: the context keeps its comments (the official default).
    #[default]
    None,
    /// `positional_padding`: comments removed, then `Line Number` comment lines added
    /// before and after so the needle stays at its depth.
    PositionalPadding,
    /// `no_padding`: comments removed, nothing added.
    NoPadding,
}

impl CommentMode {
    /// All modes.
    pub const ALL: [CommentMode; 3] = [Self::None, Self::PositionalPadding, Self::NoPadding];

    /// The official name.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::PositionalPadding => "positional_padding",
            Self::NoPadding => "no_padding",
        }
    }
}

impl fmt::Display for CommentMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CommentMode {
    type Err = String;

    /// Parses an official name. (The reference's command line quietly takes any other
    /// word as `none`; here it is an error.)
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.name() == s)
            .ok_or_else(|| format!("unknown comment mode `{s}`; expected none, positional_padding or no_padding"))
    }
}

/// Why a context could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The needle's file is not among the repository's files.
    #[error("needle `{needle}`: its file `{path}` is not among the repository's files (ordered by `dependency`)")]
    NeedleFileMissing {
        /// The needle's name.
        needle: String,
        /// The needle's path.
        path: String,
    },
    /// The dataset has no repositories of the language asked for.
    #[error("the dataset has no `{0}` repositories")]
    LanguageMissing(String),
    /// The token counter failed.
    #[error("token counter: {0}")]
    Tokenizer(TokenizeError),
    /// Building the context of one task failed.
    #[error("{language} repository `{repo}`, needle `{needle}`: {source}")]
    Task {
        /// Dataset language key.
        language: String,
        /// Repository name.
        repo: String,
        /// Needle name.
        needle: String,
        /// What went wrong.
        source: Box<ContextError>,
    },
}

/// A built context and where the needle sits in it, as the reference returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeContext {
    /// The context text: prefix, needle, suffix.
    pub code_context: String,
    /// Tokens before the needle.
    pub needle_token_start: usize,
    /// `needle_token_start` plus the needle's tokens.
    pub needle_token_end: usize,
    /// `needle_token_end` plus the suffix's tokens.
    pub code_context_ntokens: usize,
    /// Whether slicing the file by the needle's byte offsets as character indices (as the
    /// reference does) gives other text than the byte range itself: true when the file has
    /// non-ASCII text before the needle's end, so the planted "needle" is shifted.
    pub needle_slice_byte_char_mismatch: bool,
}

/// The comment marker of a language (`COMMENT_PREFIX`).
pub fn comment_prefix(language: Language) -> &'static str {
    match language {
        Language::Python => "#",
        Language::Cpp | Language::Java | Language::TypeScript | Language::Rust => "//",
    }
}

/// The synthetic comment line naming a file, without newline: `// Path: src/a.rs`.
fn path_line(language: Language, path: &str) -> String {
    format!("{} Path: {path}", comment_prefix(language))
}

/// The reference's position ratio of task `index` of `count` needles: `(index + 0.5) / count`.
pub fn position_ratio(index: usize, count: usize) -> f64 {
    (index as f64 + 0.5) / count as f64
}

/// Builds contexts for one language, size and comment mode (the reference's
/// `make_code_context` with its arguments fixed). Holds a parser when comments are
/// cleaned, so make one per thread.
pub struct ContextBuilder<'t> {
    language: Language,
    size: usize,
    mode: CommentMode,
    tokens: &'t dyn TokenCounter,
    tools: Option<CodeTools>,
}

impl<'t> ContextBuilder<'t> {
    /// A builder for contexts of `size` tokens (`code_context_size`) counted by `tokens`.
    /// `grammars` parse the code when `mode` cleans comments. Only the reference's
    /// ([`RepoqaGrammars::load_reference`]) give the official contexts: with the bundled,
    /// newer grammars most Rust and a few TypeScript contexts of the golden set differ
    /// (comment node extents and error recovery on cut-off code changed).
    pub fn new(language: Language, size: usize, mode: CommentMode, tokens: &'t dyn TokenCounter, grammars: &RepoqaGrammars) -> Self {
        let tools = (mode != CommentMode::None).then(|| CodeTools::new(language, grammars));
        Self { language, size, mode, tokens, tools }
    }

    fn count(&self, text: &str) -> Result<usize, ContextError> {
        self.tokens.count_tokens(text).map_err(ContextError::Tokenizer)
    }

    /// The reference's `make_code_context` for `needle` in `files` (in
    /// [`topological_sort`] order), planted at `position_ratio` of the context.
    pub fn build(&mut self, files: &[SourceFile], needle: &SourceNeedle, position_ratio: f64) -> Result<CodeContext, ContextError> {
        let language = self.language;
        let needle_index = files
            .iter()
            .position(|file| file.path == needle.path)
            .ok_or_else(|| ContextError::NeedleFileMissing { needle: needle.name.clone(), path: needle.path.clone() })?;
        let content = files[needle_index].text.as_str();
        let needle_code = py_slice(content, needle.start_byte, needle.end_byte);
        let byte_range = needle.start_byte.min(content.len())..needle.end_byte.min(content.len());
        let mismatch = content.as_bytes().get(byte_range).map_or("".into(), String::from_utf8_lossy) != needle_code;
        let needle_tokens = self.count(needle_code)?;

        let mut context_paths = vec![needle.path.clone()];
        let mut top_prefix_file = None;
        let mut bottom_suffix_file = None;
        // Python `int(float)` truncates toward zero, as `as i64` does.
        let mut prefix_budget = (self.size as f64 * position_ratio - needle_tokens as f64 / 2.0) as i64;
        let mut suffix_budget = self.size as i64 - needle_tokens as i64 - prefix_budget;

        // The needle file's lines above the needle, bottom up.
        let above = py_slice(content, 0, needle.start_byte);
        let needle_path_line = path_line(language, &needle.path);
        let lines = std::iter::once(needle_path_line.as_str()).chain(above.split('\n'));
        let (mut code_prefix, used, mut is_break) = self.backward_lines(lines, prefix_budget)?;
        prefix_budget -= used;
        // Earlier files, nearest first, each from its top.
        for file in files[..needle_index].iter().rev() {
            if is_break || prefix_budget <= 0 {
                break;
            }
            context_paths.insert(0, file.path.clone());
            top_prefix_file = Some(file.text.as_str());
            let file_path_line = path_line(language, &file.path);
            let lines = std::iter::once(file_path_line.as_str()).chain(file.text.split('\n'));
            let (text, used, broke) = self.forward_lines(lines, prefix_budget)?;
            code_prefix = text + &code_prefix;
            prefix_budget -= used;
            is_break = broke;
        }

        // The needle file's lines below the needle, then later files from their tops.
        let below = py_slice(content, needle.end_byte, usize::MAX);
        let (mut code_suffix, used, mut is_break) = self.forward_lines(below.split('\n'), suffix_budget)?;
        suffix_budget -= used;
        for file in &files[needle_index + 1..] {
            if is_break || suffix_budget <= 0 {
                break;
            }
            context_paths.push(file.path.clone());
            bottom_suffix_file = Some(file.text.as_str());
            let file_path_line = path_line(language, &file.path);
            let lines = std::iter::once(file_path_line.as_str()).chain(file.text.split('\n'));
            let (text, used, broke) = self.forward_lines(lines, suffix_budget)?;
            code_suffix += &text;
            suffix_budget -= used;
            is_break = broke;
        }

        let mut parts = clean::Parts { prefix: code_prefix, needle: needle_code.to_string(), suffix: code_suffix };
        if let Some(tools) = self.tools.as_mut() {
            let input = clean::CleanInput {
                language,
                context_paths: &context_paths,
                top_prefix_file,
                bottom_suffix_file,
                position_ratio,
                add_padding: self.mode == CommentMode::PositionalPadding,
            };
            parts = clean::clean_context_comments(tools, self.tokens, parts, &input)?;
        }

        let needle_token_start = self.count(&parts.prefix)?;
        let needle_token_end = needle_token_start + self.count(&parts.needle)?;
        let code_context_ntokens = needle_token_end + self.count(&parts.suffix)?;
        Ok(CodeContext {
            code_context: parts.prefix + &parts.needle + &parts.suffix,
            needle_token_start,
            needle_token_end,
            code_context_ntokens,
            needle_slice_byte_char_mismatch: mismatch,
        })
    }

    /// `_backward_tokenizable_lines`: whole lines from the bottom up, each with its
    /// newline, while their tokens fit in `budget`. Returns the text, its tokens and
    /// whether a line did not fit.
    fn backward_lines<'a>(&self, lines: impl DoubleEndedIterator<Item = &'a str>, budget: i64) -> Result<(String, i64, bool), ContextError> {
        let mut taken = Vec::new();
        let mut used = 0i64;
        let mut is_break = false;
        for line in lines.rev() {
            let with_newline = format!("{line}\n");
            let tokens = self.count(&with_newline)? as i64;
            if used + tokens > budget {
                is_break = true;
                break;
            }
            taken.push(with_newline);
            used += tokens;
        }
        taken.reverse();
        Ok((taken.concat(), used, is_break))
    }

    /// `_forward_tokenizable_lines`: whole lines from the top down while they fit in
    /// `budget`; when one does not fit, `...` ends the text (its tokens counted even if
    /// they overrun the budget).
    fn forward_lines<'a>(&self, lines: impl Iterator<Item = &'a str>, budget: i64) -> Result<(String, i64, bool), ContextError> {
        let mut text = String::new();
        let mut used = 0i64;
        let mut is_break = false;
        for line in lines {
            let start = text.len();
            text.push_str(line);
            text.push('\n');
            let tokens = self.count(&text[start..])? as i64;
            if used + tokens > budget {
                text.truncate(start);
                is_break = true;
                break;
            }
            used += tokens;
        }
        if is_break {
            text.push_str("...\n");
            used += self.count("...\n")? as i64;
        }
        Ok((text, used, is_break))
    }
}

/// Python's `s[start:end]` on a `str` with non-negative bounds: character (code point)
/// indices, clamped to the length, empty when `start >= end`.
fn py_slice(s: &str, start: usize, end: usize) -> &str {
    let ascii = s.is_ascii();
    let byte_at = |index: usize| -> usize {
        if ascii {
            return index.min(s.len());
        }
        s.char_indices().nth(index).map_or(s.len(), |(at, _)| at)
    };
    let (start, end) = (byte_at(start), byte_at(end));
    if start >= end {
        ""
    } else {
        &s[start..end]
    }
}

#[cfg(test)]
mod tests;
