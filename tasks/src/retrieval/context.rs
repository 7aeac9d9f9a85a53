//! The query, the selection of chunks (with the "use next chunk" rule) and the
//! `crossfile_context` value of the official builder (`get_crossfile_context_from_chunks`).

use serde_json::{json, Map, Value};

use crate::cceval::Language;
use crate::pycompat::text::py_strip;

/// Lines of the query (`QUERY_LENGTH`).
pub const QUERY_LINES: usize = 10;

/// How the query is formed (`--query_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryType {
    /// `last_n_lines`: the last 10 non-blank lines of the prompt (RG-1).
    LastNLines,
    /// `groundtruth`: the last 10 non-blank lines of prompt + groundtruth (oracle).
    Groundtruth,
}

/// The query text: the last [`QUERY_LINES`] lines (of `prompt.split("\n")`, and for the oracle
/// also `groundtruth.split("\n")`) that are not blank after Python `strip()`, joined by `"\n"`.
pub fn query(prompt: &str, groundtruth: &str, kind: QueryType) -> String {
    let mut lines: Vec<&str> = prompt.split('\n').filter(|l| !py_strip(l).is_empty()).collect();
    if kind == QueryType::Groundtruth {
        lines.extend(groundtruth.split('\n').filter(|l| !py_strip(l).is_empty()));
    }
    lines[lines.len().saturating_sub(QUERY_LINES)..].join("\n")
}

/// Python `str.splitlines()`: splits at `\n`, `\r`, `\r\n`, `\v`, `\f`, `\x1c`-`\x1e`,
/// `\x85`, `\u2028`, `\u2029`; no empty item after a final line break.
pub fn py_splitlines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break = matches!(c, '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}');
        if !is_break {
            continue;
        }
        out.push(&s[start..i]);
        start = i + c.len_utf8();
        if c == '\r' && chars.peek().is_some_and(|&(_, d)| d == '\n') {
            chars.next();
            start += 1;
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// A ranking score as the builder writes it: a float, or (TF-IDF, from `.tolist()` of an
/// `(N, 1)` matrix) a one-element list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Score {
    /// A plain float.
    Float(f64),
    /// `[x]`.
    List(f64),
}

impl Score {
    /// The number inside.
    pub fn value(self) -> f64 {
        match self {
            Self::Float(x) | Self::List(x) => x,
        }
    }

    fn to_json(self) -> Value {
        match self {
            Self::Float(x) => json!(x),
            Self::List(x) => json!([x]),
        }
    }
}

/// One selected chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// `retrieved_chunk`.
    pub chunk: String,
    /// `filename`.
    pub filename: String,
    /// `score`.
    pub score: Score,
}

/// The `crossfile_context` value of one example.
#[derive(Debug, Clone, PartialEq)]
pub enum CrossfileContext {
    /// `""`: the repository has no source files (`project_not_found`).
    ProjectNotFound,
    /// `{}`: the example's file is not in the project, or no other file has a chunk.
    Empty,
    /// `{"text": ..., "list": [...]}`.
    Found(Vec<Selected>),
}

/// The `text` of a found context: the builder's template with `#` (Python) or `//` comments.
pub fn context_text(language: Language, selected: &[Selected]) -> String {
    let c = if language == Language::Python { "#" } else { "//" };
    let mut text = format!("{c} Here are some relevant code fragments from other files of the repo:\n\n");
    for s in selected {
        text.push_str(&format!("{c} the below code fragment can be found in:\n{c} {}\n", s.filename));
        let lines: Vec<String> = py_splitlines(s.chunk.trim_matches('\n')).iter().map(|l| format!("{c} {l}")).collect();
        text.push_str(&lines.join("\n"));
        text.push_str("\n\n");
    }
    text
}

impl CrossfileContext {
    /// The JSON value the builder stores in `crossfile_context`.
    pub fn to_json(&self, language: Language) -> Value {
        match self {
            Self::ProjectNotFound => Value::String(String::new()),
            Self::Empty => Value::Object(Map::new()),
            Self::Found(selected) => {
                let list: Vec<Value> = selected
                    .iter()
                    .map(|s| json!({"retrieved_chunk": s.chunk, "filename": s.filename, "score": s.score.to_json()}))
                    .collect();
                let mut map = Map::new();
                map.insert("text".into(), Value::String(context_text(language, selected)));
                map.insert("list".into(), Value::Array(list));
                Value::Object(map)
            }
        }
    }
}

/// A ranked candidate as selection needs it.
#[derive(Debug, Clone)]
pub struct Ranked<'a> {
    /// The chunk's file path.
    pub path: &'a str,
    /// The chunk's text.
    pub text: &'a str,
    /// The text of the next chunk of the same file (id `k + 1`), if any.
    pub next_text: Option<&'a str>,
}

/// Selection of `get_crossfile_context_from_chunks`. `by_id` are the candidates in
/// id-sorted order, `by_text` in text-sorted order, `scores` the sorted scores (the same
/// for both orders).
///
/// With `use_next_chunk`, walk `by_id`; take each one's next chunk (else itself) unless that
/// text was already taken; filename = its path, score = `scores[position]`. Without, the first
/// `top_k` of `by_text` with the paths of the first `top_k` of `by_id`.
pub fn select(by_id: &[Ranked], by_text: &[&str], scores: &[Score], top_k: usize, use_next_chunk: bool) -> Vec<Selected> {
    let top_k = top_k.min(by_id.len());
    let mut out: Vec<Selected> = Vec::new();
    if use_next_chunk {
        for (position, r) in by_id.iter().enumerate() {
            if out.len() == top_k {
                break;
            }
            let chunk = r.next_text.unwrap_or(r.text);
            if out.iter().any(|s| s.chunk == chunk) {
                continue;
            }
            out.push(Selected { chunk: chunk.to_string(), filename: r.path.to_string(), score: scores[position] });
        }
    } else {
        for i in 0..top_k {
            out.push(Selected { chunk: by_text[i].to_string(), filename: by_id[i].path.to_string(), score: scores[i] });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_keeps_last_ten_nonblank_lines() {
        let prompt = (0..15).map(|i| format!("p{i}")).collect::<Vec<_>>().join("\n\n  \n") + "\n";
        assert_eq!(query(&prompt, "", QueryType::LastNLines), (5..15).map(|i| format!("p{i}")).collect::<Vec<_>>().join("\n"));
        let q = query("a\nb\r\n", "g1\n\ng2", QueryType::Groundtruth);
        assert_eq!(q, "a\nb\r\ng1\ng2", "a trailing \\r stays in its line");
    }

    #[test]
    fn splitlines_like_python() {
        assert_eq!(py_splitlines("a\r\nb\rc\u{0c}d\u{1c}e\n"), ["a", "b", "c", "d", "e"]);
        assert!(py_splitlines("").is_empty());
        assert_eq!(py_splitlines("\n\nx"), ["", "", "x"]);
    }

    #[test]
    fn template_uses_language_comment() {
        let s = vec![Selected { chunk: "\nx = 1\ny\u{2028}z\n".into(), filename: "pkg/a.py".into(), score: Score::Float(1.5) }];
        assert_eq!(
            context_text(Language::Python, &s),
            "# Here are some relevant code fragments from other files of the repo:\n\n\
             # the below code fragment can be found in:\n# pkg/a.py\n# x = 1\n# y\n# z\n\n"
        );
        assert!(context_text(Language::Java, &s).starts_with("// Here are"));
        let v = CrossfileContext::Found(s).to_json(Language::Java);
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["text", "list"]);
        assert_eq!(v["list"][0]["score"], json!(1.5));
    }

    #[test]
    fn next_chunk_selection_skips_taken_texts() {
        let ranked = [
            Ranked { path: "a.py", text: "A0", next_text: Some("A1") },
            Ranked { path: "a.py", text: "A1", next_text: None },
            Ranked { path: "b.py", text: "B0", next_text: Some("A1") },
            Ranked { path: "b.py", text: "B1", next_text: None },
        ];
        let scores = [Score::Float(4.0), Score::Float(3.0), Score::Float(2.0), Score::Float(1.0)];
        let picked = select(&ranked, &["A0", "A1", "B0", "B1"], &scores, 5, true);
        let got: Vec<_> = picked.iter().map(|s| (s.chunk.as_str(), s.filename.as_str(), s.score.value())).collect();
        // A0 -> A1; A1 has no next -> A1 again (skipped); B0 -> "A1" (same text, skipped); B1 -> B1.
        assert_eq!(got, [("A1", "a.py", 4.0), ("B1", "b.py", 1.0)]);
    }

    #[test]
    fn oracle_selection_pairs_text_order_with_id_order() {
        let ranked = [Ranked { path: "x.py", text: "X", next_text: None }, Ranked { path: "y.py", text: "Y", next_text: None }];
        let picked = select(&ranked, &["Y", "X"], &[Score::Float(1.0), Score::Float(1.0)], 1, false);
        assert_eq!(picked, [Selected { chunk: "Y".into(), filename: "x.py".into(), score: Score::Float(1.0) }]);
    }
}
