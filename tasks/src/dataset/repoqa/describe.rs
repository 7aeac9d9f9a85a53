//! Needle descriptions: the annotator prompt of `scripts/curate/needle_annotation.py` (the
//! paper's four parts: purpose, input, output, procedure; names never revealed) and the
//! capture of its answer, or, offline, the function's own docstring or leading comment turned
//! into a description that is labelled as such.

use std::sync::LazyLock;

use regex::Regex;
use tree_sitter::Parser;

use super::functions::Function;
use crate::repoqa::{Language, RepoqaGrammars};

/// Where the annotator's description starts.
pub const CAPTURE_HEAD: &str = "<desc_start>";
/// Where it ends.
pub const CAPTURE_TAIL: &str = "<desc_end>";
/// Lines of code before the needle the annotator is shown (`code_prefix_lines`).
pub const CODE_PREFIX_LINES: usize = 100;

/// The annotator's prompt for function `name` shown in `code` (`make_prompt`).
pub fn annotation_prompt(name: &str, code: &str) -> String {
    let instruction = format!("Can you **briefly** describe the purpose, input, output, and procedure of \"{name}\"?");
    format!(
        "{instruction}\n\n```\n{code}\n```\n\n{instruction}\n\nPlease follow format to complete the skeleton below:\n\n\
         {CAPTURE_HEAD}\n1. **Purpose**: ...\n2. **Input**: ...\n3. **Output**: ...\n4. **Procedure**: ...\n{CAPTURE_TAIL}\n\n\
         {instruction}\n\nNotes:\n1. DO NOT reveal function names ({name}) and variable names\n\
         2. Start with {CAPTURE_HEAD} and end with {CAPTURE_TAIL}\n3. Customize the description to differentiate it from other functions\n"
    )
}

/// The description inside an answer: `answer.split(HEAD)[-1].split(TAIL)[0]`.
pub fn capture_annotation(answer: &str) -> &str {
    let after = answer.rsplit_once(CAPTURE_HEAD).map_or(answer, |(_, rest)| rest);
    after.split_once(CAPTURE_TAIL).map_or(after, |(inside, _)| inside)
}

/// The code the annotator sees: up to `prefix_lines` lines before the needle (the script's
/// [`CODE_PREFIX_LINES`]) and the needle, from the concatenated repository's lines (`get_code`).
pub fn annotation_code(repo_lines: &[&str], function: &Function, prefix_lines: usize) -> String {
    let end = function.global_end_line.min(repo_lines.len());
    let start = function.global_start_line.saturating_sub(prefix_lines).min(end);
    repo_lines[start..end].join("\n")
}

static STRING_PREFIX: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"^[rRuUbBfF]{0,2}("""|'''|"|')"#).expect("static regex"));

/// The function's own documentation: a Python docstring, or the comment lines right above the
/// function (past attributes, annotations, `template` lines and TypeScript overload
/// signatures of the same name) in the other languages.
pub fn docstring(language: Language, file_text: &str, function: &Function, grammars: &RepoqaGrammars) -> Option<String> {
    let raw = match language {
        Language::Python => python_docstring(file_text.get(function.start_byte..function.end_byte)?, grammars)?,
        _ => leading_comment(file_text, function.start_line, &function.name)?,
    };
    let text = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

fn python_docstring(code: &str, grammars: &RepoqaGrammars) -> Option<String> {
    let mut parser = Parser::new();
    parser.set_language(&grammars.grammar(Language::Python)).ok()?;
    let tree = parser.parse(code, None)?;
    let function = tree.root_node().named_child(0)?;
    let body = function.child_by_field_name("body")?;
    let first = body.named_child(0)?;
    if first.kind() != "expression_statement" {
        return None;
    }
    let string = first.named_child(0).filter(|n| n.kind() == "string")?;
    let literal = code.get(string.start_byte()..string.end_byte())?;
    let quote = STRING_PREFIX.captures(literal)?.get(1)?;
    let inner = literal.get(quote.end()..literal.len().checked_sub(quote.len())?)?;
    Some(inner.to_string())
}

fn leading_comment(file_text: &str, start_line: usize, name: &str) -> Option<String> {
    let lines: Vec<&str> = file_text.split('\n').collect();
    let overload = [format!("function {name}("), format!("function {name}<")];
    let mut i = start_line.min(lines.len());
    while i > 0 {
        let t = lines[i - 1].trim();
        if t.starts_with("#[") || t.starts_with('@') || t.starts_with("template") || overload.iter().any(|o| t.contains(o.as_str())) {
            i -= 1;
        } else {
            break;
        }
    }
    let end = i;
    while i > 0 {
        let t = lines[i - 1].trim();
        if t.starts_with("//") || t.starts_with("/*") || t.starts_with('*') || t.ends_with("*/") {
            i -= 1;
        } else {
            break;
        }
    }
    if i == end {
        return None;
    }
    let cleaned: Vec<&str> = lines[i..end]
        .iter()
        .map(|l| {
            let t = l.trim();
            let t = t.strip_suffix("*/").unwrap_or(t);
            let t = ["///", "//!", "//", "/**", "/*", "*"].iter().find_map(|m| t.strip_prefix(m)).unwrap_or(t);
            t.trim()
        })
        .filter(|t| !t.is_empty())
        .collect();
    Some(cleaned.join(" "))
}

/// The labelled offline description made from a docstring: the name of the function is
/// replaced so that it is not revealed; the three parts a docstring does not give say so.
pub fn docstring_description(name: &str, doc: Option<&str>) -> String {
    let missing = "not described (docstring fallback)";
    let purpose = match doc {
        Some(doc) => {
            let pattern = Regex::new(&format!(r"\b{}\b", regex::escape(name))).ok();
            let masked = pattern.map_or_else(|| doc.to_string(), |p| p.replace_all(doc, "this function").into_owned());
            format!("[from the function's own docstring/comment] {masked}")
        }
        None => "[docstring fallback: the function has no docstring or leading comment]".to_string(),
    };
    format!("\n1. **Purpose**: {purpose}\n2. **Input**: {missing}\n3. **Output**: {missing}\n4. **Procedure**: {missing}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start_line: usize, start_byte: usize, end_byte: usize) -> Function {
        Function {
            name: "f".into(),
            start_line,
            end_line: start_line + 1,
            start_byte,
            end_byte,
            global_start_line: start_line,
            global_end_line: start_line + 1,
            global_start_byte: start_byte,
            global_end_byte: end_byte,
            code_ratio: 0.0,
        }
    }

    #[test]
    fn prompt_and_capture_follow_the_script() {
        let prompt = annotation_prompt("area", "def area(w, h):\n    return w * h");
        assert!(prompt.starts_with("Can you **briefly** describe the purpose, input, output, and procedure of \"area\"?\n\n```\ndef area("));
        assert!(prompt.contains("<desc_start>\n1. **Purpose**: ...\n2. **Input**: ...\n3. **Output**: ...\n4. **Procedure**: ...\n<desc_end>"));
        assert!(prompt.ends_with("1. DO NOT reveal function names (area) and variable names\n2. Start with <desc_start> and end with <desc_end>\n3. Customize the description to differentiate it from other functions\n"));
        assert_eq!(capture_annotation("x <desc_start> a <desc_start>\nB\n<desc_end> tail"), "\nB\n");
        assert_eq!(capture_annotation("no markers"), "no markers");
    }

    #[test]
    fn docstrings_and_leading_comments() {
        let g = RepoqaGrammars::Bundled;
        let py = "def f(x):\n    \"\"\"Doubles f's\n    input.\"\"\"\n    return 2 * x\n";
        assert_eq!(docstring(Language::Python, py, &at(0, 0, py.len() - 1), &g).as_deref(), Some("Doubles f's input."));
        assert_eq!(docstring(Language::Python, "def f():\n    return 1\n", &at(0, 0, 21), &g), None);
        let rs = "/// Adds one.\n/// Really.\n#[inline]\nfn f() {}\n";
        assert_eq!(docstring(Language::Rust, rs, &at(3, 0, 0), &g).as_deref(), Some("Adds one. Really."));
        let java = "  /**\n   * Returns the size.\n   */\n  @Override\n  public int f() { return 1; }\n";
        assert_eq!(docstring(Language::Java, java, &at(3, 0, 0), &g).as_deref(), Some("Returns the size."));
        assert_eq!(docstring(Language::Cpp, "int x;\nint f() {}\n", &at(1, 0, 0), &g), None);
        let ts = "/** Freezes. */\nexport function f<T>(o: T): T\nexport function f<T>(o: any): T {\n  return o\n}\n";
        assert_eq!(docstring(Language::TypeScript, ts, &at(2, 0, 0), &g).as_deref(), Some("Freezes."));
        let described = docstring_description("f", Some("Calls f twice; f_helper stays."));
        assert!(described.contains("[from the function's own docstring/comment] Calls this function twice; f_helper stays."), "{described}");
        assert!(described.starts_with("\n1. **Purpose**: ") && described.ends_with("4. **Procedure**: not described (docstring fallback)\n"));
    }
}
