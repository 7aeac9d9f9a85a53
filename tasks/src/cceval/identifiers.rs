//! Identifier extraction and matching, as the official `extract_identifiers` and
//! `compute_id_match` do them.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::Language;

/// The official string-literal pattern: double- or single-quoted with backslash escapes.
static STRING_LITERAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""([^"\\]*(\\.[^"\\]*)*)"|'([^'\\]*(\\.[^'\\]*)*)'"#).expect("static regex")
});

/// NLTK `RegexpTokenizer(r'\w+')`. NLTK 3.10 compiles it with the third-party `regex`
/// engine, whose `\w` is the Unicode word class (letters, marks, decimal digits, connector
/// punctuation) — the same as Rust's `\w`, and unlike stdlib `re` (`x²` is one `re` token,
/// two `regex` tokens).
static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\w+").expect("static regex"));

/// Python's `keyword.kwlist` (3.11) without `True` and `False`.
const PYTHON_KEYWORDS: &[&str] = &[
    "None", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
    "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or",
    "pass", "raise", "return", "try", "while", "with", "yield",
];

/// The official `keywords/java.txt`.
const JAVA_KEYWORDS: &[&str] = &[
    "abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "continue", "default", "do",
    "double", "else", "enum", "extends", "final", "finally", "float", "for", "if", "implements", "import",
    "instanceof", "int", "interface", "long", "native", "new", "package", "private", "protected", "public",
    "return", "short", "static", "strictfp", "super", "switch", "synchronized", "this", "throw", "throws",
    "transient", "try", "void", "volatile", "while", "var", "const", "goto",
];

/// The official `keywords/typescript.txt`.
const TYPESCRIPT_KEYWORDS: &[&str] = &[
    "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete", "do", "else", "export",
    "extends", "finally", "for", "function", "if", "import", "in", "instanceof", "new", "return", "super", "switch",
    "this", "throw", "try", "typeof", "var", "void", "while", "with", "yield", "enum", "implements", "interface",
    "let", "package", "private", "protected", "public", "static",
];

/// The official `keywords/csharp.txt` (its `using static` line can never equal a `\w+` token).
const CSHARP_KEYWORDS: &[&str] = &[
    "abstract", "as", "base", "bool", "break", "byte", "case", "catch", "char", "checked", "class", "const",
    "continue", "decimal", "default", "delegate", "do", "double", "else", "enum", "event", "explicit", "extern",
    "finally", "fixed", "float", "for", "foreach", "goto", "if", "implicit", "in", "int", "interface", "internal",
    "is", "lock", "long", "namespace", "new", "null", "object", "operator", "out", "override", "params", "private",
    "protected", "public", "readonly", "ref", "return", "sbyte", "sealed", "short", "sizeof", "stackalloc",
    "static", "string", "struct", "switch", "this", "throw", "try", "typeof", "uint", "ulong", "unchecked",
    "unsafe", "ushort", "using", "using static", "virtual", "void", "volatile", "while",
];

fn keywords(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => PYTHON_KEYWORDS,
        Language::Java => JAVA_KEYWORDS,
        Language::TypeScript => TYPESCRIPT_KEYWORDS,
        Language::CSharp => CSHARP_KEYWORDS,
    }
}

/// The official `extract_identifiers`: drop string literals, take `\w+` tokens, keep those
/// that start like an ASCII identifier and are not keywords. Ordered, with duplicates.
pub fn extract_identifiers(code: &str, language: Language) -> Vec<String> {
    let without_strings = STRING_LITERAL.replace_all(code, "");
    let keywords = keywords(language);
    WORD.find_iter(&without_strings)
        .map(|m| m.as_str())
        .filter(|token| {
            token.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic()) && !keywords.contains(token)
        })
        .map(str::to_string)
        .collect()
}

/// True positives, false positives and false negatives of predicted vs target identifiers,
/// compared as sets (the official `compute_id_match`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentifierMatch {
    /// Identifiers in both.
    pub true_positives: usize,
    /// Predicted identifiers not in the target.
    pub false_positives: usize,
    /// Target identifiers not predicted.
    pub false_negatives: usize,
}

impl IdentifierMatch {
    /// Compares the distinct identifiers of prediction and target.
    pub fn new(pred_ids: &[String], target_ids: &[String]) -> Self {
        let pred: HashSet<&str> = pred_ids.iter().map(String::as_str).collect();
        let target: HashSet<&str> = target_ids.iter().map(String::as_str).collect();
        let true_positives = pred.intersection(&target).count();
        Self {
            true_positives,
            false_positives: pred.len() - true_positives,
            false_negatives: target.len() - true_positives,
        }
    }

    /// `tp / (tp + fp)`, or `None` where the official script writes the integer `0`.
    pub fn precision(&self) -> Option<f64> {
        ratio(self.true_positives, self.true_positives + self.false_positives)
    }

    /// `tp / (tp + fn)`, or `None` where the official script writes the integer `0`.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.true_positives, self.true_positives + self.false_negatives)
    }

    /// `2tp / (2tp + fp + fn)`, or `None` where the official script writes the integer `0`.
    pub fn f1(&self) -> Option<f64> {
        ratio(2 * self.true_positives, 2 * self.true_positives + self.false_positives + self.false_negatives)
    }
}

fn ratio(numerator: usize, denominator: usize) -> Option<f64> {
    (denominator != 0).then(|| numerator as f64 / denominator as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(code: &str, language: Language) -> Vec<String> {
        extract_identifiers(code, language)
    }

    #[test]
    fn strings_keywords_and_numbers_are_not_identifiers() {
        assert_eq!(ids("return self.foo(x, 'a b', \"c\\\"d\") + 1", Language::Python), ["self", "foo", "x"]);
        assert_eq!(ids("if True: None", Language::Python), ["True"]);
        assert_eq!(ids("new Foo<Bar>(this.x); // 2abc", Language::Java), ["Foo", "Bar", "x"]);
        assert_eq!(ids("let y: string = `t${z}`", Language::TypeScript), ["y", "string", "t", "z"]);
        assert_eq!(ids("string s = null; var v;", Language::CSharp), ["s", "var", "v"]);
    }

    #[test]
    fn unicode_and_unbalanced_quotes() {
        // A token must start with an ASCII letter or underscore; later characters may be anything \w.
        assert_eq!(ids("naïve = _ü + über + x² + e\u{301}x", Language::Python), ["naïve", "_ü", "x", "e\u{301}x"]);
        // An unterminated quote removes nothing; the escaped quote keeps the literal open.
        assert_eq!(ids("f('a, b) + g(\"x\\\"y\")", Language::Python), ["f", "a", "b", "g"]);
        assert_eq!(ids("", Language::Python), Vec::<String>::new());
        // Values from the official extract_identifiers.
        assert_eq!(ids("f(a, \"b", Language::Python), ["f", "a", "b"]);
        assert_eq!(ids("s = \"it\\\"s\" + x", Language::Python), ["s", "x"]);
        assert_eq!(ids("g('x\\\\') + y", Language::Python), ["g", "y"]);
        // Literal spanning a newline is removed as a whole.
        assert_eq!(ids("a = 'x\ny' + b", Language::Python), ["a", "b"]);
    }

    #[test]
    fn matching_uses_sets() {
        let pred: Vec<String> = ["a", "a", "b", "c"].map(String::from).to_vec();
        let target: Vec<String> = ["a", "d"].map(String::from).to_vec();
        let m = IdentifierMatch::new(&pred, &target);
        assert_eq!((m.true_positives, m.false_positives, m.false_negatives), (1, 2, 1));
        assert_eq!(m.precision(), Some(1.0 / 3.0));
        assert_eq!(m.recall(), Some(0.5));
        assert_eq!(m.f1(), Some(0.4));
        let none = IdentifierMatch::new(&[], &[]);
        assert_eq!((none.precision(), none.recall(), none.f1()), (None, None, None));
    }
}

