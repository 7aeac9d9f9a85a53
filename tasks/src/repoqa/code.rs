//! Tree-sitter work of RepoQA scoring: `sanitize_output` (pick the function out of a model's
//! answer) and `remove_comments`, with the official queries of `repoqa/utility.py`.

use std::sync::LazyLock;

use regex::Regex;
use streaming_iterator::StreamingIterator;
use tree_sitter::{Parser, Query, QueryCursor};

use super::grammars::RepoqaGrammars;
use super::Language;
use crate::pycompat::text::{py_strip, PY_SPACE_CLASS, PY_WORD_CLASS};

/// The official fenced-block pattern ``^```(?:\w+)?\s*\n(.*?)(?=^```)``` `` (DOTALL, MULTILINE).
/// The look-ahead followed by the same literal is the literal itself.
static FENCED_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("(?ms)^```(?:{PY_WORD_CLASS}+)?{PY_SPACE_CLASS}*\n(.*?)^```")).expect("static regex")
});

/// The official `FUNCTION_QUERY`.
pub(crate) fn function_query(language: Language) -> &'static str {
    match language {
        Language::Python => "(function_definition name: (_)) @fdef",
        Language::Java => "(method_declaration name: (_)) @fdef",
        Language::TypeScript => "(function_declaration name: (_)) @fdef",
        Language::Rust => "(function_item name: (_)) @fdef",
        Language::Cpp => "(function_definition declarator: (function_declarator declarator: (identifier))) @fdef",
    }
}

/// The official `COMMENT_QUERY` (Python also removes bare strings in blocks: docstrings).
pub(crate) fn comment_queries(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => &["(block (expression_statement (string) @docstring))", "(comment) @comment"],
        Language::Java | Language::Rust => &["(line_comment) @comment", "(block_comment) @comment"],
        Language::Cpp | Language::TypeScript => &["(comment) @comment"],
    }
}

/// A parser and compiled queries for one language. Not `Sync`: make one per thread.
pub struct CodeTools {
    parser: Parser,
    function: Query,
    comments: Vec<Query>,
}

impl CodeTools {
    /// Builds the parser and queries for `language` from `grammars`.
    pub fn new(language: Language, grammars: &RepoqaGrammars) -> Self {
        let grammar = grammars.grammar(language);
        let mut parser = Parser::new();
        parser.set_language(&grammar).expect("bundled grammars match the tree-sitter runtime");
        let compile = |source: &str| Query::new(&grammar, source).expect("official queries compile for bundled grammars");
        Self {
            parser,
            function: compile(function_query(language)),
            comments: comment_queries(language).iter().map(|q| compile(q)).collect(),
        }
    }

    /// The official `sanitize_output`: strip; no fenced block → the whole text; otherwise the
    /// first function (first query capture) of the first block that has one, else the first
    /// block.
    pub fn sanitize_output(&mut self, model_output: &str) -> String {
        let output = py_strip(model_output);
        let blocks: Vec<&str> =
            FENCED_BLOCK.captures_iter(output).filter_map(|c| c.get(1)).map(|m| m.as_str()).collect();
        let Some(first) = blocks.first() else {
            return output.to_string();
        };
        for block in &blocks {
            let Some(tree) = self.parser.parse(block, None) else { continue };
            let mut cursor = QueryCursor::new();
            let mut captures = cursor.captures(&self.function, tree.root_node(), block.as_bytes());
            if let Some((found, index)) = captures.next() {
                let node = found.captures[*index].node;
                return block[node.start_byte()..node.end_byte()].to_string();
            }
        }
        first.to_string()
    }

    /// The official `remove_comments`: delete every capture of the comment queries, last
    /// first.
    pub fn remove_comments(&mut self, source: &str) -> String {
        let spans = self.comment_spans(source);
        delete_spans(source, spans)
    }

    /// Byte spans of every capture of the official `COMMENT_QUERY` queries, query by query
    /// and in document order within a query (py-tree-sitter's `captures` order). Empty when
    /// the text cannot be parsed.
    pub fn comment_spans(&mut self, source: &str) -> Vec<(usize, usize)> {
        let Some(tree) = self.parser.parse(source, None) else {
            return Vec::new();
        };
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for query in &self.comments {
            let mut cursor = QueryCursor::new();
            let mut captures = cursor.captures(query, tree.root_node(), source.as_bytes());
            while let Some((found, index)) = captures.next() {
                let node = found.captures[*index].node;
                spans.push((node.start_byte(), node.end_byte()));
            }
        }
        spans
    }
}

/// Deletes byte `spans` from `source` as the reference does: sorted by start, last first
/// (Python's stable `sort(key=start_byte, reverse=True)`), each one cut out of the text
/// left by the previous cuts with Python's clamping slices.
pub(crate) fn delete_spans(source: &str, mut spans: Vec<(usize, usize)>) -> String {
    // Python's `sort(key=start_byte, reverse=True)` is stable: equal starts keep query order.
    spans.sort_by_key(|span| std::cmp::Reverse(span.0));
    let mut bytes = source.as_bytes().to_vec();
    for (start, end) in spans {
        let (start, end) = (start.min(bytes.len()), end.min(bytes.len()));
        if start < end {
            bytes.drain(start..end);
        }
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_picks_first_function_of_first_block_with_one() {
        let mut tools = CodeTools::new(Language::Python, &RepoqaGrammars::Bundled);
        let out = "Here:\n```python\nimport os\n```\ntext\n```\n@cache\ndef f(x):\n    return x\n\ndef g(): pass\n```\nbye";
        assert_eq!(tools.sanitize_output(out), "def f(x):\n    return x");
        assert_eq!(tools.sanitize_output("  no fence here  "), "no fence here");
        assert_eq!(tools.sanitize_output("```python\nx = 1\n```"), "x = 1\n");
        // A tag with a non-word character is not a fence opener.
        assert_eq!(tools.sanitize_output("```c++\nint f() {}\n```"), "```c++\nint f() {}\n```");
    }

    #[test]
    fn typescript_drops_export_and_cpp_needs_plain_identifier() {
        let mut ts = CodeTools::new(Language::TypeScript, &RepoqaGrammars::Bundled);
        assert_eq!(ts.sanitize_output("```ts\nexport function f(a: number) { return a; }\n```"), "function f(a: number) { return a; }");
        let mut cpp = CodeTools::new(Language::Cpp, &RepoqaGrammars::Bundled);
        let method = "```cpp\nvoid A::m() {}\n```";
        assert_eq!(cpp.sanitize_output(method), "void A::m() {}\n");
        assert_eq!(cpp.sanitize_output("```cpp\nstatic int g(int x) { return x; }\n```"), "static int g(int x) { return x; }");
    }

    #[test]
    fn comments_and_docstrings_are_removed() {
        let mut py = CodeTools::new(Language::Python, &RepoqaGrammars::Bundled);
        let src = "def f():\n    \"\"\"Doc.\"\"\"\n    x = 1  # c\n    'bare'\n    return x\n";
        assert_eq!(py.remove_comments(src), "def f():\n    \n    x = 1  \n    \n    return x\n");
        let mut rust = CodeTools::new(Language::Rust, &RepoqaGrammars::Bundled);
        assert_eq!(rust.remove_comments("fn f() { /* b */ 1 } // é\n"), "fn f() {  1 } \n");
    }
}
