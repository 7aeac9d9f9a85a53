//! Parsing the official JSON / JSONL inputs into records, with errors that name file, line and field.
//!
//! One bad line never hides the others: parsing collects every good record and every
//! error, and the caller decides whether to stop or skip.

use std::fmt;

use serde_json::Value;

/// A problem with one record of an input file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct RecordError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line number; 0 when the file is one JSON document.
    pub line: usize,
    /// Dotted path of the offending field, when one field is to blame.
    pub field: Option<String>,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        match &self.field {
            Some(field) => write!(f, ": field `{field}`: {}", self.message),
            None => write!(f, ": {}", self.message),
        }
    }
}

/// A field that is missing or has the wrong type, before we know the file and line.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Dotted path of the field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    /// Attaches the file and line the field came from.
    pub fn at(self, file: &str, line: usize) -> RecordError {
        RecordError { file: file.to_string(), line, field: Some(self.field), message: self.message }
    }
}

/// A record together with the 1-based line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    /// 1-based line number in the source file.
    pub line: usize,
    /// The parsed record.
    pub value: T,
}

/// Everything parsed from one file: good records and the errors of the bad ones.
#[derive(Debug, Clone)]
pub struct Parsed<T> {
    /// Records that parsed, in file order.
    pub records: Vec<Located<T>>,
    /// One error per bad line, in file order.
    pub errors: Vec<RecordError>,
}

/// Parses JSON Lines: one JSON value per line, blank lines ignored, `\r\n` accepted.
///
/// `decode` turns one line's JSON value into a record; invalid UTF-8, malformed JSON and
/// decode failures become [`RecordError`]s naming `file` and the line.
pub fn parse_jsonl<T>(
    file: &str,
    bytes: &[u8],
    decode: impl Fn(&Value) -> Result<T, FieldError>,
) -> Parsed<T> {
    let mut parsed = Parsed { records: Vec::new(), errors: Vec::new() };
    for (index, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = index + 1;
        let error = |message: String| RecordError { file: file.to_string(), line, field: None, message };
        let text = match std::str::from_utf8(raw) {
            Ok(text) => text,
            Err(e) => {
                parsed.errors.push(error(format!(
                    "invalid UTF-8 at byte {} of the line; the file must be UTF-8 encoded",
                    e.valid_up_to()
                )));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                parsed.errors.push(error(format!("malformed JSON at column {}: {e}", e.column())));
                continue;
            }
        };
        match decode(&value) {
            Ok(record) => parsed.records.push(Located { line, value: record }),
            Err(e) => parsed.errors.push(e.at(file, line)),
        }
    }
    parsed
}

/// Parses a whole-file JSON document, naming the line and column of a syntax error.
pub fn parse_json_document(file: &str, bytes: &[u8]) -> Result<Value, RecordError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|b| **b == b'\n').count() + 1;
        RecordError {
            file: file.to_string(),
            line,
            field: None,
            message: "invalid UTF-8; the file must be UTF-8 encoded".into(),
        }
    })?;
    serde_json::from_str(text).map_err(|e| RecordError {
        file: file.to_string(),
        line: e.line(),
        field: None,
        message: format!("malformed JSON at column {}: {e}", e.column()),
    })
}

/// Looks up a dotted path (`metadata.task_id`) in a JSON object.
pub fn field<'a>(value: &'a Value, path: &str) -> Result<&'a Value, FieldError> {
    let mut current = value;
    for part in path.split('.') {
        current = match current {
            Value::Object(map) => map.get(part).ok_or_else(|| FieldError {
                field: path.to_string(),
                message: "missing".into(),
            })?,
            other => {
                return Err(FieldError {
                    field: path.to_string(),
                    message: format!("expected an object around `{part}`, found {}", kind(other)),
                })
            }
        };
    }
    Ok(current)
}

/// A required string field.
pub fn str_field<'a>(value: &'a Value, path: &str) -> Result<&'a str, FieldError> {
    let found = field(value, path)?;
    found.as_str().ok_or_else(|| FieldError {
        field: path.to_string(),
        message: format!("expected a string, found {}", kind(found)),
    })
}

/// A required number field.
pub fn f64_field(value: &Value, path: &str) -> Result<f64, FieldError> {
    let found = field(value, path)?;
    found.as_f64().ok_or_else(|| FieldError {
        field: path.to_string(),
        message: format!("expected a number, found {}", kind(found)),
    })
}

/// A required integer field.
pub fn i64_field(value: &Value, path: &str) -> Result<i64, FieldError> {
    let found = field(value, path)?;
    found.as_i64().ok_or_else(|| FieldError {
        field: path.to_string(),
        message: format!("expected an integer, found {}", kind(found)),
    })
}

/// Names a JSON value's type for error messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(v: &Value) -> Result<String, FieldError> {
        str_field(v, "meta.id").map(str::to_string)
    }

    #[test]
    fn every_bad_line_is_reported_and_good_lines_kept() {
        let bytes = b"{\"meta\": {\"id\": \"a\"}}\n{\"meta\": {}}\n{oops\n\xff\xfe\n\n{\"meta\": {\"id\": 3}}\r\n{\"meta\": {\"id\": \"b\"}}\r\n";
        let parsed = parse_jsonl("p.jsonl", bytes, decode);
        let ids: Vec<_> = parsed.records.iter().map(|r| (r.line, r.value.as_str())).collect();
        assert_eq!(ids, vec![(1, "a"), (7, "b")]);
        let shown: Vec<String> = parsed.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(shown[0], "p.jsonl:2: field `meta.id`: missing");
        assert!(shown[1].starts_with("p.jsonl:3: malformed JSON at column 2"), "{}", shown[1]);
        assert!(shown[2].starts_with("p.jsonl:4: invalid UTF-8 at byte 0"), "{}", shown[2]);
        assert_eq!(shown[3], "p.jsonl:6: field `meta.id`: expected a string, found a number");
        assert_eq!(parsed.errors.len(), 4);
    }

    /// A 50 MB line, NUL bytes and a BOM: each line is judged on its own, nothing panics.
    #[test]
    fn huge_lines_nul_bytes_and_a_bom_are_named_or_read() {
        let huge = format!("{{\"meta\": {{\"id\": \"{}\"}}}}", "x".repeat(50 << 20));
        let mut bytes = huge.into_bytes();
        bytes.extend_from_slice(b"\n{\"meta\": {\"id\": \"a\\u0000b\"}}\n\0\0\0\n\xef\xbb\xbf{\"meta\": {\"id\": \"c\"}}\n");
        let parsed = parse_jsonl("big.jsonl", &bytes, decode);
        let lines: Vec<usize> = parsed.records.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1, 2]);
        assert_eq!(parsed.records[0].value.len(), 50 << 20);
        assert_eq!(parsed.records[1].value, "a\0b");
        let shown: Vec<String> = parsed.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert!(shown[0].starts_with("big.jsonl:3: malformed JSON"), "{}", shown[0]);
        assert!(shown[1].starts_with("big.jsonl:4: malformed JSON"), "{}", shown[1]);
    }

    #[test]
    fn document_errors_name_the_line() {
        let err = parse_json_document("d.json", b"{\n\"a\": 1,\n}").unwrap_err();
        assert_eq!(err.line, 3);
        let err = parse_json_document("d.json", b"{\"a\":\n\"\xff\"}").unwrap_err();
        assert_eq!((err.line, err.message.as_str()), (2, "invalid UTF-8; the file must be UTF-8 encoded"));
    }
}

/// Key of the stand-in the planner writes for a data record it could not use (malformed JSON,
/// invalid UTF-8, a missing field): the shard holding it fails with this error instead of the
/// whole run being refused, so every other shard still runs.
pub const INVALID_RECORD: &str = "codesweep_invalid_record";

/// The stand-in for an unusable data record; `error` names the data file, line and field.
pub fn invalid_record(error: &str) -> Value {
    serde_json::json!({ INVALID_RECORD: error })
}

/// The error of an [`invalid_record`] stand-in, if `record` is one.
pub fn invalid_record_error(record: &Value) -> Option<&str> {
    record.get(INVALID_RECORD).and_then(Value::as_str)
}
