//! Python `str` whitespace and word-character semantics.

use std::sync::LazyLock;

use regex::Regex;

/// Characters for which Python's `str.isspace()` is true; also what Python's `re` `\s` matches.
///
/// Python counts the ASCII separators U+001C..U+001F as whitespace, which Unicode's
/// `White_Space` (and so Rust's `char::is_whitespace`) does not.
pub fn is_py_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r' | '\u{1c}'..='\u{1f}' | ' ' | '\u{85}' | '\u{a0}'
            | '\u{1680}' | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}'
            | '\u{205f}' | '\u{3000}'
    )
}

/// The regex class equal to Python's `\s` for `str` patterns.
pub const PY_SPACE_CLASS: &str =
    r"[\t\n\x0B\x0C\r\x1C-\x1F \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]";

/// The regex class equal to Python's `\w` for `str` patterns: letters, numbers, underscore.
///
/// Rust's `\w` also admits combining marks (category M), which Python's does not.
pub const PY_WORD_CLASS: &str = r"[\p{L}\p{N}_]";

/// Python `s.strip()` with no arguments.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python `s.rstrip()` with no arguments.
pub fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(is_py_space)
}

static SPACE_RUNS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("{PY_SPACE_CLASS}+")).expect("static regex"));

/// Python `re.split(r"\s+", s)`: leading/trailing whitespace yields empty first/last items,
/// and an empty string yields `[""]`.
pub fn py_split_whitespace(s: &str) -> Vec<&str> {
    SPACE_RUNS.split(s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_uses_python_whitespace() {
        assert_eq!(py_strip("\u{1c}\u{a0} x \u{3000}\n"), "x");
        assert_eq!(py_strip("\u{200b}x"), "\u{200b}x", "zero-width space is not whitespace in Python");
        assert_eq!(py_rstrip("  a  \t\n"), "  a");
    }

    #[test]
    fn split_matches_re_split() {
        assert_eq!(py_split_whitespace(""), vec![""]);
        assert_eq!(py_split_whitespace("a  b\n\tc"), vec!["a", "b", "c"]);
        assert_eq!(py_split_whitespace(" a "), vec!["", "a", ""]);
        assert_eq!(py_split_whitespace("a\u{1f}b"), vec!["a", "b"]);
    }

    #[test]
    fn word_class_excludes_marks() {
        let word = Regex::new(&format!("{PY_WORD_CLASS}+")).unwrap();
        let runs: Vec<&str> = word.find_iter("cafe\u{301} x²_1").map(|m| m.as_str()).collect();
        assert_eq!(runs, vec!["cafe", "x²_1"]);
    }
}
