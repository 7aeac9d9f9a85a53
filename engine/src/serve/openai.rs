//! The OpenAI wire format of `codesweep serve`: request bodies to engine requests, engine results
//! to response bodies. Errors are messages for a 400 answer.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::{ChatMessage, Completion, Request, Sampling, StopReason, TextTokenizer};
use serde_json::{json, Value};

/// Parses a JSON body. Lone UTF-16 surrogate escapes (`"\ud800"`, which Python's `json`
/// writes for unpaired surrogates) become U+FFFD, as Python reads them into text it cannot
/// encode either; JSON's own errors are reported with their line and column.
pub fn body_json(body: &str) -> Result<Value, String> {
    serde_json::from_str(&replace_lone_surrogates(body)).map_err(|e| format!("the body is not JSON: {e}"))
}

/// Rewrites `\uD800`–`\uDFFF` escapes that are not a high–low pair to `\uFFFD`, inside
/// strings only; everything else is copied as is.
fn replace_lone_surrogates(body: &str) -> std::borrow::Cow<'_, str> {
    if !body.contains("\\u") {
        return std::borrow::Cow::Borrowed(body);
    }
    let bytes = body.as_bytes();
    let hex4 = |at: usize| -> Option<u16> {
        let digits = body.get(at..at + 4)?;
        u16::from_str_radix(digits, 16).ok().filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let escape_at = |at: usize| -> Option<u16> {
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u')).then(|| hex4(at + 2)).flatten()
    };
    let mut out = String::with_capacity(body.len());
    let (mut in_string, mut copied, mut i) = (false, 0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            b'\\' if in_string => match escape_at(i) {
                Some(0xD800..=0xDBFF) if matches!(escape_at(i + 6), Some(0xDC00..=0xDFFF)) => i += 12,
                Some(0xD800..=0xDFFF) => {
                    out.push_str(&body[copied..i]);
                    out.push_str("\\uFFFD");
                    i += 6;
                    copied = i;
                }
                _ => i += 2,
            },
            _ => i += 1,
        }
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(body);
    }
    out.push_str(&body[copied..]);
    std::borrow::Cow::Owned(out)
}

/// What one request may ask for, so no single request can hold the server for long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The model's context length: prompt tokens plus `max_tokens` must fit in it.
    pub context: usize,
    /// Most samples per prompt (`n`).
    pub max_n: usize,
    /// Most stop strings.
    pub max_stop: usize,
    /// Most prompts in one completions request.
    pub max_prompts: usize,
}

/// A positive integer field, or `default` when absent or null.
fn positive(v: &Value, field: &str, default: usize) -> Result<usize, String> {
    match &v[field] {
        Value::Null => Ok(default),
        x => x
            .as_u64()
            .filter(|&n| n >= 1)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("`{field}` must be a positive integer, got {x}")),
    }
}

/// The generation settings completions and chat share: `max_tokens`, `temperature`, `top_p`,
/// `n`, `seed`, `stop`, checked against `limits`; `prompt_tokens` counts a prompt's tokens.
/// Each prompt becomes one request whose id is its index.
pub fn requests(
    v: &Value,
    prompts: Vec<String>,
    limits: &Limits,
    prompt_tokens: impl Fn(&str) -> Result<usize, String>,
) -> Result<Vec<Request>, String> {
    let max_tokens = match v["max_tokens"] {
        Value::Null => positive(v, "max_completion_tokens", 16)?,
        _ => positive(v, "max_tokens", 16)?,
    };
    let temperature = match &v["temperature"] {
        Value::Null => 1.0,
        x => x.as_f64().ok_or_else(|| format!("`temperature` must be a number, got {x}"))?,
    };
    let top_p = match &v["top_p"] {
        Value::Null => 1.0,
        x => x.as_f64().ok_or_else(|| format!("`top_p` must be a number, got {x}"))?,
    };
    let n = positive(v, "n", 1)?;
    if n > limits.max_n {
        return Err(format!("`n` is {n}; this server gives at most {} samples per prompt (--max-n)", limits.max_n));
    }
    let seed = v["seed"].as_u64().unwrap_or(0);
    let stop: Vec<String> = match &v["stop"] {
        Value::Null => Vec::new(),
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|s| s.as_str().map(str::to_string).ok_or_else(|| "`stop` must be a string or a list of strings".to_string()))
            .collect::<Result<_, _>>()?,
        _ => return Err("`stop` must be a string or a list of strings".into()),
    };
    if stop.len() > limits.max_stop {
        return Err(format!("`stop` has {} strings; at most {} are accepted", stop.len(), limits.max_stop));
    }
    if !(temperature >= 0.0 && temperature.is_finite()) {
        return Err("`temperature` must be ≥ 0".into());
    }
    let sampling = if temperature == 0.0 { Sampling::Greedy } else { Sampling::Nucleus { temperature, top_p, seed } };
    if sampling == Sampling::Greedy && n > 1 {
        return Err("`n` > 1 needs `temperature` > 0".into());
    }
    if prompts.len() > limits.max_prompts {
        return Err(format!("{} prompts in one request; at most {} are accepted", prompts.len(), limits.max_prompts));
    }
    for prompt in &prompts {
        let tokens = prompt_tokens(prompt)?;
        if tokens == 0 {
            return Err("the prompt encodes to no tokens".into());
        }
        if tokens + max_tokens > limits.context {
            return Err(format!(
                "This model's maximum context length is {} tokens. However, you requested {} tokens ({tokens} in the \
                 prompt, {max_tokens} in the completion). Please reduce the length of the prompt or `max_tokens`.",
                limits.context,
                tokens + max_tokens
            ));
        }
    }
    Ok(prompts
        .into_iter()
        .enumerate()
        .map(|(i, p)| Request { stop: stop.clone(), sampling, n, ..Request::greedy(i.to_string(), p, max_tokens) })
        .collect())
}

/// `prompt` of a completions request: a string or a list of strings.
pub fn completion_prompts(v: &Value) -> Result<Vec<String>, String> {
    strings(&v["prompt"], "prompt")
}

/// `input` of an embeddings request: a string or a non-empty list of strings.
pub fn embedding_inputs(v: &Value) -> Result<Vec<String>, String> {
    if let Some(format) = v["encoding_format"].as_str() {
        if format != "float" && format != "base64" {
            return Err(format!("`encoding_format` `{format}` is not supported; use float or base64"));
        }
    }
    let texts = strings(&v["input"], "input").map_err(|e| format!("{e} (token-id inputs are not supported)"))?;
    if texts.is_empty() {
        return Err("`input` is an empty list".into());
    }
    Ok(texts)
}

fn strings(v: &Value, field: &str) -> Result<Vec<String>, String> {
    let wrong = || format!("`{field}` must be a string or a list of strings");
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) => a.iter().map(|p| p.as_str().map(str::to_string).ok_or_else(wrong)).collect(),
        _ => Err(wrong()),
    }
}

/// `messages` of a chat request; `content` is a string or a list of text parts.
pub fn chat_messages(v: &Value) -> Result<Vec<ChatMessage>, String> {
    let list = v["messages"].as_array().ok_or("`messages` must be a list of {role, content}")?;
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let role = m["role"].as_str().ok_or_else(|| format!("messages[{i}].role must be a string"))?;
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .map(|p| match (p["type"].as_str(), p["text"].as_str()) {
                        (Some("text"), Some(t)) => Ok(t),
                        _ => Err(format!("messages[{i}].content: only text parts are supported")),
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .concat(),
                Value::Null => String::new(),
                _ => return Err(format!("messages[{i}].content must be a string or a list of text parts")),
            };
            Ok(ChatMessage::new(role, content))
        })
        .collect()
}

fn created() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn finish_reason(c: &Completion) -> &'static str {
    if c.stop_reason == StopReason::Length { "length" } else { "stop" }
}

fn usage(cs: &[Completion]) -> Value {
    let prompt_tokens: usize = cs.iter().filter(|c| c.sample == 0).map(|c| c.prompt_tokens).sum();
    let completion_tokens: usize = cs.iter().map(|c| c.generated_tokens).sum();
    json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens})
}

/// The `/v1/completions` response.
pub fn completion_response(name: &str, cs: &[Completion]) -> Value {
    let choices: Vec<Value> = cs
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"index": i, "text": c.text, "finish_reason": finish_reason(c), "logprobs": {"token_logprobs": c.token_logprobs}}))
        .collect();
    let t = created();
    json!({"id": format!("cmpl-{t}"), "object": "text_completion", "created": t, "model": name, "choices": choices, "usage": usage(cs)})
}

/// The `/v1/chat/completions` response; each log-probability names its token.
pub fn chat_response(name: &str, cs: &[Completion], tokenizer: &TextTokenizer) -> Value {
    let choices: Vec<Value> = cs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            // The last log-probability may be the end-of-sequence token's, which has no text.
            let content: Vec<Value> = c
                .token_logprobs
                .iter()
                .enumerate()
                .map(|(j, lp)| {
                    let token = c.token_ids.get(j).and_then(|&id| tokenizer.decode(&[id]).ok()).unwrap_or_default();
                    json!({"token": token, "logprob": lp})
                })
                .collect();
            json!({"index": i, "message": {"role": "assistant", "content": c.text}, "finish_reason": finish_reason(c),
                   "logprobs": {"content": content}})
        })
        .collect();
    let t = created();
    json!({"id": format!("chatcmpl-{t}"), "object": "chat.completion", "created": t, "model": name, "choices": choices, "usage": usage(cs)})
}

/// The `/v1/embeddings` response: floats, or base64 of little-endian f32 when asked.
pub fn embedding_response(name: &str, vectors: &[Vec<f32>], tokens: usize, base64: bool) -> Value {
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                json!(base64_encode(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    json!({"object": "list", "data": data, "model": name, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
}

/// Standard base64 with padding (RFC 4648).
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (raw, enc) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")] {
            assert_eq!(base64_encode(raw.as_bytes()), enc);
        }
        assert_eq!(base64_encode(&1.0f32.to_le_bytes()), "AACAPw==");
    }

    #[test]
    fn chat_content_may_be_text_parts() {
        let v = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]});
        assert_eq!(chat_messages(&v).unwrap(), vec![ChatMessage::new("user", "ab")]);
        let v = json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]});
        assert!(chat_messages(&v).unwrap_err().contains("only text parts"));
        assert!(embedding_inputs(&json!({"input": [[1, 2]]})).unwrap_err().contains("token-id"));
        assert!(embedding_inputs(&json!({"input": []})).is_err());
    }

    #[test]
    fn lone_surrogates_read_as_replacement_characters() {
        // As Python's json.dumps writes them: a lone high, a lone low, a valid pair, an escaped backslash.
        let v = body_json(r#"{"prompt": "a\ud800b\udc00c\ud83d\ude00d\\ud800", "x\ud800": 1}"#).unwrap();
        assert_eq!(v["prompt"], "a\u{FFFD}b\u{FFFD}c\u{1F600}d\\ud800");
        assert_eq!(v["x\u{FFFD}"], 1);
        let v = body_json(r#"{"prompt": "\ud800"}"#).unwrap();
        assert_eq!(v["prompt"], "\u{FFFD}");
        assert!(body_json(r#"{"prompt": "\u12"}"#).unwrap_err().contains("line 1"));
    }

    fn limits() -> Limits {
        Limits { context: 100, max_n: 4, max_stop: 3, max_prompts: 2 }
    }

    fn check(body: Value) -> Result<Vec<Request>, String> {
        requests(&body, completion_prompts(&body)?, &limits(), |p| Ok(p.len()))
    }

    /// The error a body gets; panics when it is accepted.
    fn refused(body: Value) -> String {
        let shown = body.to_string();
        check(body).err().unwrap_or_else(|| panic!("accepted: {shown}"))
    }

    #[test]
    fn requests_that_would_hold_the_server_are_refused() {
        for bad in [json!(-1), json!(0), json!(1.5), json!("8")] {
            let error = refused(json!({"prompt": "abc", "max_tokens": bad}));
            assert!(error.contains("`max_tokens` must be a positive integer"), "{error}");
        }
        let error = refused(json!({"prompt": "abc", "max_tokens": 1_000_000_000u64}));
        assert!(error.contains("maximum context length is 100 tokens") && error.contains("3 in the prompt"), "{error}");
        assert!(refused(json!({"prompt": "x".repeat(101), "max_tokens": 1})).contains("maximum context length"));
        assert_eq!(check(json!({"prompt": "abc", "max_tokens": 97})).unwrap()[0].max_new_tokens, 97);
        assert!(check(json!({"prompt": "abc", "max_tokens": 98})).is_err());
        let error = refused(json!({"prompt": "abc", "n": 1000, "temperature": 1}));
        assert!(error.contains("`n` is 1000") && error.contains("--max-n"), "{error}");
        assert_eq!(check(json!({"prompt": "abc", "n": 4, "temperature": 1})).unwrap()[0].n, 4);
        assert!(refused(json!({"prompt": "abc", "n": -2})).contains("`n` must be a positive integer"));
        let stops: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        assert!(refused(json!({"prompt": "abc", "stop": stops})).contains("1000 strings"));
        assert!(refused(json!({"prompt": "abc", "stop": [1]})).contains("`stop` must be"));
        assert!(refused(json!({"prompt": ["a", "b", "c"]})).contains("3 prompts"));
        assert!(refused(json!({"prompt": "abc", "temperature": "hot"})).contains("`temperature` must be a number"));
        assert_eq!(check(json!({"prompt": "abc", "max_completion_tokens": 5})).unwrap()[0].max_new_tokens, 5);
    }
}
