//! Function tables (`scripts/curate/function_analysis.py`): every capture of the official
//! `FUNCTION_QUERY` in each file, files in `topological_sort(dependency)` order, with line
//! and byte spans in the file and in the concatenated repository, and the share of comment
//! characters.

use serde_json::{json, Value};
use streaming_iterator::StreamingIterator;
use tree_sitter::{Parser, Query, QueryCursor};

use super::files::SourceText;
use super::CurateError;
use crate::repoqa::code::{function_query, CodeTools};
use crate::repoqa::{Language, RepoqaGrammars};

/// One function of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Name: the `name` field (C++: the function declarator's identifier).
    pub name: String,
    /// First line, 0-based.
    pub start_line: usize,
    /// Line after the last, 0-based.
    pub end_line: usize,
    /// UTF-8 byte offset of the start in the file.
    pub start_byte: usize,
    /// UTF-8 byte offset of the end in the file.
    pub end_byte: usize,
    /// `start_line` plus the lines of the files before (each file's `count("\n") + 1`).
    pub global_start_line: usize,
    /// `end_line` plus the same.
    pub global_end_line: usize,
    /// `start_byte` plus the characters (not bytes, as the reference counts) of the files before.
    pub global_start_byte: usize,
    /// `end_byte` plus the same.
    pub global_end_byte: usize,
    /// Comment bytes over all bytes of the function (parsed on its own).
    pub code_ratio: f64,
}

impl Function {
    /// The function as the dataset writes it (the reference's key order).
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name, "start_line": self.start_line, "end_line": self.end_line,
            "start_byte": self.start_byte, "end_byte": self.end_byte,
            "global_start_line": self.global_start_line, "global_end_line": self.global_end_line,
            "global_start_byte": self.global_start_byte, "global_end_byte": self.global_end_byte,
            "code_ratio": self.code_ratio,
        })
    }
}

/// The functions of every file in `ordered` (paths in topological order), keyed like it.
pub fn function_tables(
    language: Language,
    ordered: &[&SourceText],
    grammars: &RepoqaGrammars,
) -> Result<Vec<(String, Vec<Function>)>, CurateError> {
    let grammar = grammars.grammar(language);
    let mut parser = Parser::new();
    parser.set_language(&grammar).map_err(|e| CurateError::Grammar(e.to_string()))?;
    let query = Query::new(&grammar, function_query(language)).map_err(|e| CurateError::Grammar(e.to_string()))?;
    let mut comments = CodeTools::new(language, grammars);
    let (mut global_byte, mut global_line) = (0usize, 0usize);
    let mut tables = Vec::with_capacity(ordered.len());
    for file in ordered {
        let code = file.text.as_str();
        let tree = parser.parse(code, None).ok_or_else(|| CurateError::Grammar(format!("cannot parse {}", file.path)))?;
        let mut cursor = QueryCursor::new();
        let mut captures = cursor.captures(&query, tree.root_node(), code.as_bytes());
        let mut functions = Vec::new();
        while let Some((found, index)) = captures.next() {
            let node = found.captures[*index].node;
            let name_node = match language {
                Language::Cpp => node.child_by_field_name("declarator").and_then(|d| d.child_by_field_name("declarator")),
                _ => node.child_by_field_name("name"),
            };
            let Some(name_node) = name_node else { continue };
            let name = code.get(name_node.start_byte()..name_node.end_byte()).unwrap_or("").to_string();
            let body = code.get(node.start_byte()..node.end_byte()).unwrap_or("");
            let comment_bytes: usize = comments.comment_spans(body).iter().map(|(s, e)| e.saturating_sub(*s)).sum();
            functions.push(Function {
                name,
                start_line: node.start_position().row,
                end_line: node.end_position().row + 1,
                start_byte: node.start_byte(),
                end_byte: node.end_byte(),
                global_start_line: global_line + node.start_position().row,
                global_end_line: global_line + node.end_position().row + 1,
                global_start_byte: global_byte + node.start_byte(),
                global_end_byte: global_byte + node.end_byte(),
                code_ratio: if body.is_empty() { 0.0 } else { comment_bytes as f64 / body.len() as f64 },
            });
        }
        tables.push((file.path.clone(), functions));
        global_byte += code.chars().count();
        global_line += code.matches('\n').count() + 1;
    }
    Ok(tables)
}
