//! Python `json.dumps` output (ASCII-escaped, Python float repr), so files we write are
//! byte-identical to the official scripts' files.

use serde_json::Value;

/// Python `json.dumps(value)`: separators `", "` and `": "`, `ensure_ascii=True`.
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, None, 0);
    out
}

/// Python `json.dumps(value, indent=n)`: one item per line, separators `","` and `": "`.
pub fn dumps_indent(value: &Value, indent: usize) -> String {
    let mut out = String::new();
    write_value(&mut out, value, Some(indent), 0);
    out
}

fn newline(out: &mut String, indent: Option<usize>, depth: usize) {
    if let Some(width) = indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', width * depth));
    }
}

fn write_value(out: &mut String, value: &Value, indent: Option<usize>, depth: usize) {
    let item_sep = if indent.is_some() { "," } else { ", " };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) if !n.is_f64() => out.push_str(&i.to_string()),
            (_, Some(u), _) if !n.is_f64() => out.push_str(&u.to_string()),
            (_, _, Some(f)) => out.push_str(&float_repr(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, indent, depth + 1);
                write_value(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, indent, depth + 1);
                write_string(out, key);
                out.push_str(": ");
                write_value(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// Python `repr(float)`: shortest round-trip digits, fixed notation for decimal exponents
/// in `-4 < decpt <= 16`, otherwise `1e-05` / `1e+16` style; integral values end in `.0`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    // `{:e}` gives the shortest round-trip digits, e.g. "9.5e1" or "1e-5".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let ndigits = digits.len() as i32;
    let decpt = exp + 1;
    let body = if decpt <= -4 || decpt > 16 {
        let rest = &digits[1..];
        let dot = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{}{dot}e{esign}{:02}", &digits[..1], exp.abs())
    } else if decpt <= 0 {
        format!("0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt < ndigits {
        format!("{}.{}", &digits[..decpt as usize], &digits[decpt as usize..])
    } else {
        format!("{digits}{}.0", "0".repeat((decpt - ndigits) as usize))
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_python_repr() {
        let cases = [
            (95.0, "95.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (0.6933333333333334, "0.6933333333333334"),
            (-2.5, "-2.5"),
            (0.0, "0.0"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "repr({x})");
        }
    }

    #[test]
    fn dumps_matches_python_layout() {
        let v = json!({"task_id": "a/1", "pred": "é\"\\\n\u{1F600}\u{7f}", "ids": ["x"], "es": 95.0, "n": 0, "e": []});
        assert_eq!(
            dumps(&v),
            r#"{"task_id": "a/1", "pred": "\u00e9\"\\\n\ud83d\ude00\u007f", "ids": ["x"], "es": 95.0, "n": 0, "e": []}"#
        );
        assert_eq!(dumps_indent(&json!({"em": 39.6, "total": 250}), 2), "{\n  \"em\": 39.6,\n  \"total\": 250\n}");
    }
}
