//! The OpenAI wire format of `codesweep serve`: request bodies to engine requests, engine results
//! to response bodies. Errors are messages for a 400 answer.

use std::time::{SystemTime, UNIX_EPOCH};

use codesweep_engine::{ChatMessage, Completion, Request, Sampling, StopReason, TextTokenizer};
use serde_json::{json, Value};

/// Parses a JSON body.
pub fn body_json(body: &str) -> Result<Value, String> {
    serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))
}

/// The generation settings completions and chat share: `max_tokens`, `temperature`, `top_p`,
/// `n`, `seed`, `stop`. Each prompt becomes one request whose id is its index.
pub fn requests(v: &Value, prompts: Vec<String>) -> Result<Vec<Request>, String> {
    let max_tokens = v["max_tokens"].as_u64().or_else(|| v["max_completion_tokens"].as_u64()).unwrap_or(16) as usize;
    let temperature = v["temperature"].as_f64().unwrap_or(1.0);
    let top_p = v["top_p"].as_f64().unwrap_or(1.0);
    let n = v["n"].as_u64().unwrap_or(1).max(1) as usize;
    let seed = v["seed"].as_u64().unwrap_or(0);
    let stop: Vec<String> = match &v["stop"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    };
    if temperature < 0.0 {
        return Err("`temperature` must be ≥ 0".into());
    }
    let sampling = if temperature == 0.0 { Sampling::Greedy } else { Sampling::Nucleus { temperature, top_p, seed } };
    if sampling == Sampling::Greedy && n > 1 {
        return Err("`n` > 1 needs `temperature` > 0".into());
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
}
