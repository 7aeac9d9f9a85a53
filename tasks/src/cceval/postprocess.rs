//! Statement truncation and comment removal, as the official `postprocess_code_lines` and
//! `remove_comments` do them.
//!
//! Python: the official loop tries every prefix `completion[:i+1]`, re-parses
//! `prompt + prefix` with tree-sitter and returns the first prefix that parses without an
//! `ERROR` node *and* is followed by `"\n"`. Only prefixes that end right before a newline
//! can be returned, so we parse only those, and we parse them incrementally: the prompt is
//! parsed once and each candidate is an edit (text appended at the end) of that tree.

use std::sync::LazyLock;

use regex::Regex;
use tree_sitter::{InputEdit, Node, Parser, Point, Tree};

use crate::pycompat::text::py_rstrip;

/// Java / TypeScript / C#: cut after the first `;`, `{` or `}`.
///
/// Official quirk kept: when that character is at index 0 the whole completion is returned
/// (`completion[:end_idx + 1] if end_idx else completion` treats index 0 as "not found").
pub fn cut_bracket_statement(completion: &str) -> &str {
    match completion.find([';', '{', '}']) {
        Some(0) | None => completion,
        Some(end) => &completion[..=end],
    }
}

static HASH_COMMENT: LazyLock<Regex> = LazyLock::new(|| Regex::new("#.*").expect("static regex"));
static SLASH_COMMENT: LazyLock<Regex> = LazyLock::new(|| Regex::new("//.*").expect("static regex"));

/// The official comment stripping: `re.sub(r'#.*', '')` then `re.sub(r'//.*', '')`, for every
/// language and even inside string literals.
pub fn remove_comments(code: &str) -> String {
    let without_hash = HASH_COMMENT.replace_all(code, "");
    SLASH_COMMENT.replace_all(&without_hash, "").into_owned()
}

/// Cuts Python completions at the end of the first complete statement.
///
/// Holds a tree-sitter parser; make one per thread.
pub struct PythonStatementCutter {
    parser: Parser,
}

/// How a Python completion was cut, for tests and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonCut {
    /// Cut at this byte offset of the completion (before `rstrip`).
    At(usize),
    /// No prefix qualified; the completion is returned unchanged.
    Unchanged,
}

impl PythonStatementCutter {
    /// A cutter with the tree-sitter-python grammar the official scorer uses (0.25.0).
    pub fn new() -> Self {
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_python::LANGUAGE.into())
            .expect("tree-sitter-python is compatible with the linked tree-sitter runtime");
        Self { parser }
    }

    /// The official `get_python_one_statement(prompt, completion)`.
    pub fn cut<'c>(&mut self, prompt: &str, completion: &'c str) -> &'c str {
        match self.find_cut(prompt, completion, true) {
            PythonCut::At(end) => py_rstrip(&completion[..end]),
            PythonCut::Unchanged => completion,
        }
    }

    /// Finds the cut; `incremental = false` re-parses `prompt + prefix` from scratch for each
    /// candidate (the reference behaviour, kept for equivalence tests).
    pub fn find_cut(&mut self, prompt: &str, completion: &str, incremental: bool) -> PythonCut {
        self.find_cut_from(prompt, completion, incremental, None)
    }

    /// [`PythonStatementCutter::find_cut`] for a prompt that is a prefix of a text already
    /// parsed as `text_tree`: the prompt is parsed incrementally from that tree (the rest of the
    /// text deleted) instead of from scratch — for many cursors in one file.
    pub fn find_cut_in(&mut self, text_tree: &Tree, text: &str, cursor: usize) -> PythonCut {
        let (prompt, completion) = text.split_at(cursor);
        let mut truncated = text_tree.clone();
        let prompt_end = end_point(Point::new(0, 0), prompt);
        truncated.edit(&InputEdit {
            start_byte: cursor,
            old_end_byte: text.len(),
            new_end_byte: cursor,
            start_position: prompt_end,
            old_end_position: end_point(Point::new(0, 0), text),
            new_end_position: prompt_end,
        });
        self.find_cut_from(prompt, completion, true, Some(&truncated))
    }

    fn find_cut_from(&mut self, prompt: &str, completion: &str, incremental: bool, base: Option<&Tree>) -> PythonCut {
        // Candidate ends: byte offsets p >= 1 with completion[p] == '\n'. The official loop
        // returns completion[:i+1] only when completion[i+1] == "\n", i.e. at such a p.
        let mut candidates = completion.match_indices('\n').map(|(p, _)| p).filter(|p| *p > 0).peekable();
        if candidates.peek().is_none() {
            return PythonCut::Unchanged;
        }
        let mut code = String::with_capacity(prompt.len() + completion.len());
        code.push_str(prompt);
        code.push_str(completion);
        let prompt_tree = if incremental { self.parser.parse(prompt, base) } else { None };
        let prompt_end = end_point(Point::new(0, 0), prompt);
        for end in candidates {
            let text = &code[..prompt.len() + end];
            let tree = match &prompt_tree {
                Some(base) => {
                    let mut edited = base.clone();
                    edited.edit(&InputEdit {
                        start_byte: prompt.len(),
                        old_end_byte: prompt.len(),
                        new_end_byte: text.len(),
                        start_position: prompt_end,
                        old_end_position: prompt_end,
                        new_end_position: end_point(prompt_end, &completion[..end]),
                    });
                    self.parser.parse(text, Some(&edited))
                }
                None => self.parser.parse(text, None),
            };
            if tree.as_ref().is_some_and(parses_without_error_node) {
                return PythonCut::At(end);
            }
        }
        PythonCut::Unchanged
    }
}

/// The end-of-statement rule as a stop condition while generating.
///
/// [`StatementEnd::stop_at`] returns a length after which more generated text can no longer
/// change the post-processed prediction, so generation may stop there and score exactly as if it
/// had run to its token limit (greedy decoding makes the shorter text a prefix of the longer).
pub struct StatementEnd {
    prompt: String,
    python: Option<PythonStatementCutter>,
    newlines_seen: usize,
}

impl StatementEnd {
    /// The rule for completions of `prompt` in `language`.
    pub fn new(language: super::Language, prompt: &str) -> Self {
        let python = (language == super::Language::Python).then(PythonStatementCutter::new);
        Self { prompt: prompt.to_string(), python, newlines_seen: 0 }
    }

    /// `Some(n)`: `text[..n]` already fixes the prediction; `None`: keep generating.
    pub fn stop_at(&mut self, text: &str) -> Option<usize> {
        match &mut self.python {
            // The official cut treats a terminator at index 0 as "not found" and keeps the
            // whole completion, so only a later terminator settles it.
            None => match text.find([';', '{', '}']) {
                Some(0) | None => None,
                Some(end) => Some(end + 1),
            },
            Some(cutter) => {
                // Candidates end at a newline; check only when a new one has arrived.
                let newlines = text.matches('\n').count();
                if newlines == self.newlines_seen {
                    return None;
                }
                self.newlines_seen = newlines;
                match cutter.find_cut(&self.prompt, text, true) {
                    PythonCut::At(end) => Some(end + 1),
                    PythonCut::Unchanged => None,
                }
            }
        }
    }
}

impl Default for PythonStatementCutter {
    fn default() -> Self {
        Self::new()
    }
}

/// The position after `text` when it starts at `start` (tree-sitter columns are bytes).
fn end_point(start: Point, text: &str) -> Point {
    match text.rfind('\n') {
        Some(last) => Point::new(start.row + text.matches('\n').count(), text.len() - last - 1),
        None => Point::new(start.row, start.column + text.len()),
    }
}

/// True when no node of the tree has type `ERROR` (the official `syntax_error` walk).
/// `MISSING` nodes are not `ERROR` nodes and do not count, as in the official check.
fn parses_without_error_node(tree: &Tree) -> bool {
    fn has_error_node(node: Node) -> bool {
        if node.is_error() {
            return true;
        }
        if !node.has_error() {
            return false;
        }
        let mut cursor = node.walk();
        let found = node.children(&mut cursor).any(has_error_node);
        found
    }
    !has_error_node(tree.root_node())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracket_cut_keeps_official_index_zero_quirk() {
        assert_eq!(cut_bracket_statement("foo(a);\nbar();"), "foo(a);");
        assert_eq!(cut_bracket_statement("if (x) {\n  y;"), "if (x) {");
        assert_eq!(cut_bracket_statement("}\nelse {"), "}\nelse {");
        assert_eq!(cut_bracket_statement(";"), ";");
        assert_eq!(cut_bracket_statement("x + y"), "x + y");
        assert_eq!(cut_bracket_statement(""), "");
        assert_eq!(cut_bracket_statement("s = \"a;b\";"), "s = \"a;");
    }

    #[test]
    fn comments_are_stripped_even_inside_strings() {
        assert_eq!(remove_comments("x = 1  # one\ny = '#no'"), "x = 1  \ny = '");
        assert_eq!(remove_comments("a(); // c\nurl = \"http://x\";"), "a(); \nurl = \"http:");
        assert_eq!(remove_comments("é # ü\r\nz"), "é \nz");
        assert_eq!(remove_comments(""), "");
    }

    #[test]
    fn stopping_at_statement_end_keeps_the_prediction() {
        use super::super::Language;
        let cases = [
            (Language::Python, "import os\nx = os.", "path.join(a,\n  b)\ny = 2\nz = 3\n"),
            (Language::Python, "def f():\n    return ", "g(1)\n    h = 2\n"),
            (Language::Java, "int x = ", "foo.bar(1); int y = 2;"),
            (Language::Java, "int x = ", ";foo.bar(1);"),
            (Language::CSharp, "if (a) ", "b(); }"),
        ];
        for (language, prompt, full) in cases {
            let mut rule = StatementEnd::new(language, prompt);
            let mut scorer = super::super::CcevalScorer::new(language, super::super::EditSimBackend::Difflib);
            let expected = scorer.truncate_statement(prompt, full).to_string();
            // Feed the completion one character at a time, as generation would.
            let mut stopped = None;
            for (i, _) in full.char_indices().skip(1).chain([(full.len(), ' ')]) {
                if let Some(n) = rule.stop_at(&full[..i]) {
                    stopped = Some(&full[..n]);
                    break;
                }
            }
            let kept = stopped.unwrap_or(full);
            assert_eq!(scorer.truncate_statement(prompt, kept), expected, "{language:?} {full:?} stopped at {kept:?}");
            if full.starts_with(';') {
                assert!(stopped.is_none(), "a leading ';' must not stop generation");
            } else {
                assert!(stopped.is_some_and(|k| k.len() < full.len()), "{full:?} should stop early");
            }
        }
    }

    #[test]
    fn python_cut_stops_at_first_complete_statement() {
        let mut cutter = PythonStatementCutter::new();
        let prompt = "import os\n\ndef f(x):\n    return os.path.";
        assert_eq!(cutter.cut(prompt, "join(x, 'a')\n    y = 2\n"), "join(x, 'a')");
        // The first newline comes before the call is closed: keep going to the next one.
        assert_eq!(cutter.cut(prompt, "join(\n        x, 'a')  \n    pass"), "join(\n        x, 'a')");
        // No newline at all, or nothing parses: unchanged.
        assert_eq!(cutter.cut(prompt, "join(x)"), "join(x)");
        assert_eq!(cutter.cut(prompt, "join((\n\n"), "join((\n\n");
        assert_eq!(cutter.cut(prompt, ""), "");
        // A leading newline is never a cut point (the prefix would be empty).
        assert_eq!(cutter.cut("x = 1", "\ny = 2\n"), "\ny = 2");
        // A prefix that is only a newline can be returned (rstripped to nothing).
        assert_eq!(cutter.cut("x = 1", "\n\ny"), "");
    }

    #[test]
    fn unbalanced_brackets_follow_the_official_error_check() {
        // Expected values from the official get_python_one_statement (tree-sitter-python 0.25.0).
        // tree-sitter repairs some gaps with MISSING nodes, which are not ERROR nodes.
        let mut cutter = PythonStatementCutter::new();
        let cases = [
            ("x = foo(", "a, b\ny = 1\n", "a, b\ny = 1\n"),
            ("x = foo(", "a, b)\ny\n", "a, b)"),
            ("d = {", "\"k\": [1, 2\n}\n", "\"k\": [1, 2\n}"),
            ("if x", ":\n    pass\n", ":"),
            ("s = ", "\"abc\ndef\"\n", "\"abc\ndef\"\n"),
            ("x = [", "]]\nz\n", "]]\nz\n"),
        ];
        for (prompt, completion, expected) in cases {
            assert_eq!(cutter.cut(prompt, completion), expected, "{prompt:?} + {completion:?}");
        }
        assert_eq!(cut_bracket_statement("foo(a[i], b"), "foo(a[i], b");
    }

    #[test]
    fn cutting_inside_a_parsed_text_agrees_with_fresh_parsing() {
        let mut cutter = PythonStatementCutter::new();
        let text = "import os\n\ndef f(x):\n    y = os.path.join(\n        x, 'a')\n    if y:\n        return g(y)\n    s = \"\"\"\nq é\n\"\"\"\n    t = [1,\n";
        let tree = cutter.parser.parse(text, None).expect("parses");
        for cursor in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
            let (prompt, completion) = text.split_at(cursor);
            assert_eq!(cutter.find_cut_in(&tree, text, cursor), cutter.find_cut(prompt, completion, false), "cursor {cursor}");
        }
    }

    #[test]
    fn incremental_and_fresh_parsing_agree() {
        let mut cutter = PythonStatementCutter::new();
        let prompt = "class A:\n    def m(self):\n        s = \"é\"\n        return self.";
        for completion in ["x\n", "x(\n1)\nz", "x[\n\n]\n", "q = '''\n'''\n", "\u{1F600}\n1\n", "x if y else\n z\n"] {
            assert_eq!(
                cutter.find_cut(prompt, completion, true),
                cutter.find_cut(prompt, completion, false),
                "{completion:?}"
            );
        }
    }
}
