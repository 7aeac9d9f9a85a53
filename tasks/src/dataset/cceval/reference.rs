//! Where an example's cursor goes and where its reference ends, and the measures the filters
//! use (tokens, non-import prompt lines).

use tree_sitter::Tree;

use super::uses::walk;
use crate::cceval::postprocess::{PythonCut, PythonStatementCutter};
use crate::cceval::Language;
use crate::pycompat::text::py_rstrip;

/// A token of the file: a tree-sitter leaf that is not a comment or the inside of a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// Byte offset where it starts.
    pub start: usize,
    /// Byte offset where it ends.
    pub end: usize,
    /// `true` for `;`, `{` and `}`, the statement ends of Java, TypeScript and C#.
    pub terminator: bool,
    /// +1 for `(` and `[`, -1 for `)` and `]`, else 0.
    pub nesting: i8,
}

/// The tokens of a parsed file in source order.
pub fn tokens(tree: &Tree) -> Vec<Token> {
    let mut found = Vec::new();
    walk(tree, |node| {
        if node.child_count() > 0 || node.start_byte() == node.end_byte() {
            return;
        }
        let kind = node.kind();
        if kind.contains("comment") || matches!(kind, "string_content" | "string_fragment" | "escape_sequence") {
            return;
        }
        let nesting = match kind {
            "(" | "[" => 1,
            ")" | "]" => -1,
            _ => 0,
        };
        found.push(Token {
            start: node.start_byte(),
            end: node.end_byte(),
            terminator: !node.is_extra() && matches!(kind, ";" | "{" | "}"),
            nesting,
        });
    });
    found.sort_by_key(|t| t.start);
    found.dedup_by_key(|t| t.start);
    found
}

/// Indices of the tokens where the cursor may go for an entity at byte `entity`: tokens that
/// start on the entity's line, at or before it, and (Java, TypeScript, C#) after the last
/// statement end before it, so the reference reaches the entity.
pub fn cursor_choices(text: &str, tokens: &[Token], entity: usize, language: Language) -> std::ops::Range<usize> {
    let line_start = text[..entity].rfind('\n').map_or(0, |p| p + 1);
    let first = tokens.partition_point(|t| t.start < line_start);
    let end = tokens.partition_point(|t| t.start <= entity);
    let mut start = first;
    if language != Language::Python {
        if let Some(last_terminator) = tokens[first..end].iter().rposition(|t| t.terminator) {
            start = first + last_terminator + 1;
        }
    }
    start..end.max(start)
}

/// The reference from token `cursor`: Python to the end of the statement (the official
/// tree-sitter cut: the first newline where `prompt + reference` parses without an error
/// node; the prompt is parsed incrementally from the file's `tree`), the others through the
/// first `;`, `{` or `}` token, or for TypeScript to the end of a line whose brackets balance.
/// `None` when no end is found.
pub fn reference_end(
    tree: &Tree,
    text: &str,
    tokens: &[Token],
    cursor: usize,
    language: Language,
    cutter: &mut PythonStatementCutter,
) -> Option<usize> {
    let start = tokens[cursor].start;
    if language == Language::Python {
        let rest = &text[start..];
        return match cutter.find_cut_in(tree, text, start) {
            PythonCut::At(end) => Some(start + py_rstrip(&rest[..end]).len()),
            PythonCut::Unchanged => None,
        };
    }
    let mut depth = 0i32;
    for (index, token) in tokens.iter().enumerate().skip(cursor) {
        if token.terminator {
            return Some(token.end);
        }
        depth += i32::from(token.nesting);
        if language == Language::TypeScript && depth <= 0 {
            let next_on_later_line =
                tokens.get(index + 1).is_none_or(|next| text[token.end..next.start].contains('\n'));
            if next_on_later_line {
                return Some(token.end);
            }
        }
    }
    None
}

/// Tokens of a reference as the filters count them: runs of word characters and single
/// other non-space characters.
pub fn count_tokens(text: &str) -> usize {
    let mut count = 0;
    let mut in_word = false;
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            if !in_word {
                count += 1;
            }
            in_word = true;
        } else {
            in_word = false;
            if !c.is_whitespace() {
                count += 1;
            }
        }
    }
    count
}

/// True when `line` is an import (Python `import`/`from .. import`, Java `import`/`package`,
/// TypeScript `import`, C# `using` directives).
pub fn is_import_line(line: &str, language: Language) -> bool {
    let line = line.trim_start();
    match language {
        Language::Python => line.starts_with("import ") || (line.starts_with("from ") && line.contains(" import")),
        Language::Java => line.starts_with("import ") || line.starts_with("package "),
        Language::TypeScript => line.starts_with("import ") || line.starts_with("import{"),
        Language::CSharp => {
            line.starts_with("using ") && !line["using ".len()..].trim_start().starts_with('(') && line.contains(';')
        }
    }
}

/// Complete, non-blank, non-import lines of a prompt (the partial cursor line is not counted).
pub fn code_lines(prompt: &str, language: Language) -> usize {
    let complete = prompt.rfind('\n').map_or("", |p| &prompt[..p]);
    complete.lines().filter(|l| !l.trim().is_empty() && !is_import_line(l, language)).count()
}

/// A small seeded generator (SplitMix64): the same seed gives the same cursors on every
/// platform and in any thread order.
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator for one entity: the user's seed mixed with a stable hash of where it is
    /// (file path and offset, so the cursor depends on neither processing order nor on which
    /// repository folder holds the file).
    pub fn for_entity(seed: u64, file: &str, offset: usize) -> Self {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for byte in file.bytes().chain([0]).chain(offset.to_le_bytes()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        Self(seed ^ hash)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform pick from `range` (which must not be empty).
    pub fn pick(&mut self, range: std::ops::Range<usize>) -> usize {
        range.start + (self.next_u64() % (range.len() as u64)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_words_and_single_punctuation() {
        assert_eq!(count_tokens("foo.bar(x, 12);"), 9);
        assert_eq!(count_tokens("  a_b  "), 1);
        assert_eq!(count_tokens(""), 0);
    }

    #[test]
    fn import_lines_per_language() {
        assert!(is_import_line("from .a import b", Language::Python));
        assert!(!is_import_line("from_x = 1", Language::Python));
        assert!(is_import_line("using System.IO;", Language::CSharp));
        assert!(!is_import_line("using (var s = Open()) {", Language::CSharp));
        assert_eq!(code_lines("import os\n\nx = 1\ny = os.", Language::Python), 1);
    }
}
