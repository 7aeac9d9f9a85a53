//! Chat prompts from a model's chat template (GGUF `tokenizer.chat_template`, Hugging Face
//! `tokenizer_config.json` `chat_template`).
//!
//! Templates are Jinja programs; rather than run Jinja, the engine recognises the ChatML family
//! (Qwen, and every template that writes `<|im_start|>`) and renders it directly:
//! `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`.
//! A template that inserts a fixed system message when the conversation has none (Qwen2.5's
//! "You are Qwen, …") has that message found and inserted too. Gemma's turn format (every
//! template that writes `<start_of_turn>`) is rendered likewise. Other templates are refused with
//! an error saying so.

use std::path::Path;

use crate::error::{EngineError, Result};

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

impl ChatMessage {
    /// A message from `role` saying `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// A chat template the engine can render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatTemplate {
    /// ChatML, with the system message the template inserts when the conversation starts
    /// without one (if it does).
    ChatMl {
        /// Inserted first when the first message is not from `system`.
        default_system: Option<String>,
    },
    /// Gemma: `<start_of_turn>{user|model}\n{trimmed content}<end_of_turn>\n` per message, a
    /// system message prefixed to the first user turn, then `<start_of_turn>model\n`. The
    /// template's `bos_token` is left to the tokenizer, which adds it.
    Gemma,
}

const START: &str = "<|im_start|>";
const END: &str = "<|im_end|>";
const TURN_START: &str = "<start_of_turn>";
const TURN_END: &str = "<end_of_turn>";

impl ChatTemplate {
    /// Recognises the Jinja `template`; an error names what is not supported.
    pub fn from_jinja(template: &str) -> Result<Self> {
        if template.contains(TURN_START) {
            return Ok(Self::Gemma);
        }
        if !template.contains(START) {
            let head: String = template.chars().take(80).collect();
            return Err(EngineError::Chat(format!(
                "the model's chat template is neither ChatML (no `{START}`) nor Gemma's (no `{TURN_START}`), the two \
                 supported; send a formatted prompt to /v1/completions instead (template starts {head:?})"
            )));
        }
        Ok(Self::ChatMl { default_system: default_system_message(template) })
    }

    /// The prompt for `messages`, ending where the assistant's reply begins. Roles other than
    /// `system`, `user` and `assistant` are refused.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String> {
        if messages.is_empty() {
            return Err(EngineError::Chat("the conversation has no messages".into()));
        }
        if let Some((i, m)) = messages.iter().enumerate().find(|(_, m)| !["system", "user", "assistant"].contains(&m.role.as_str())) {
            return Err(EngineError::Chat(format!("message {i} has role `{}`; supported roles: system, user, assistant", m.role)));
        }
        let default_system = match self {
            Self::ChatMl { default_system } => default_system,
            Self::Gemma => return render_gemma(messages),
        };
        let mut out = String::new();
        if let Some(system) = default_system {
            if messages[0].role != "system" {
                out.push_str(&format!("{START}system\n{system}{END}\n"));
            }
        }
        for m in messages {
            out.push_str(&format!("{START}{}\n{}{END}\n", m.role, m.content));
        }
        out.push_str(&format!("{START}assistant\n"));
        Ok(out)
    }
}

/// Gemma's turns: the system message (if first, untrimmed) opens the first user turn, then a blank
/// line; the assistant is `model`; contents are trimmed as the template's `| trim` does.
fn render_gemma(messages: &[ChatMessage]) -> Result<String> {
    let (system, rest) = match messages.split_first() {
        Some((first, rest)) if first.role == "system" => (Some(first.content.as_str()), rest),
        _ => (None, messages),
    };
    if let Some(i) = rest.iter().position(|m| m.role == "system") {
        let i = i + usize::from(system.is_some());
        return Err(EngineError::Chat(format!("message {i}: Gemma's template takes a system message only first")));
    }
    let mut out = String::new();
    for (i, m) in rest.iter().enumerate() {
        let role = if m.role == "assistant" { "model" } else { m.role.as_str() };
        out.push_str(&format!("{TURN_START}{role}\n"));
        if let (0, Some(system)) = (i, system) {
            out.push_str(system);
            out.push_str("\n\n");
        }
        out.push_str(m.content.trim());
        out.push_str(&format!("{TURN_END}\n"));
    }
    out.push_str(&format!("{TURN_START}model\n"));
    Ok(out)
}

/// The text of a string literal `'<|im_start|>system\n…<|im_end|>…'` with no quote or
/// concatenation inside: a fixed system message the template writes when none is given.
fn default_system_message(template: &str) -> Option<String> {
    let marker = format!("{START}system");
    template.match_indices(&marker).find_map(|(at, _)| {
        let rest = &template[at + marker.len()..];
        let rest = rest.strip_prefix("\\n").or_else(|| rest.strip_prefix('\n'))?;
        let body = &rest[..rest.find(END)?];
        let plain = !body.is_empty() && !body.contains(['\'', '"', '{', '}']);
        plain.then(|| unescape(body))
    })
}

/// Undoes the escapes of a Jinja string literal (`\n`, `\t`, `\\`, `\'`, `\"`).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The chat template of a Hugging Face directory: `chat_template.jinja`, or `chat_template` in
/// `tokenizer_config.json` (a string, or a list of `{name, template}` of which `default` is used).
pub fn hf_chat_template(dir: &Path) -> Result<Option<String>> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.exists() {
        return std::fs::read_to_string(&jinja).map(Some).map_err(|source| EngineError::Io { path: jinja, source });
    }
    let path = dir.join("tokenizer_config.json");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(None) };
    let bad = |message: String| EngineError::Metadata { path: path.clone(), key: "chat_template".into(), message };
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| EngineError::Model { path: path.clone(), message: format!("not valid JSON: {e}") })?;
    match json.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .find(|t| t["name"] == "default")
            .and_then(|t| t["template"].as_str())
            .map(|s| Some(s.to_string()))
            .ok_or_else(|| bad("a list of templates without one named `default`".into())),
        Some(other) => Err(bad(format!("expected a string, found {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of Qwen2.5's template (no-tools branch), written for this test.
    const QWEN_LIKE: &str = "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are a helpful assistant.\\nBe brief.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}\n{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

    #[test]
    fn chatml_with_a_default_system_message() {
        let t = ChatTemplate::from_jinja(QWEN_LIKE).unwrap();
        assert_eq!(t, ChatTemplate::ChatMl { default_system: Some("You are a helpful assistant.\nBe brief.".into()) });
        let got = t.render(&[ChatMessage::new("user", "def f(x):")]).unwrap();
        assert_eq!(
            got,
            "<|im_start|>system\nYou are a helpful assistant.\nBe brief.<|im_end|>\n<|im_start|>user\ndef f(x):<|im_end|>\n<|im_start|>assistant\n"
        );
        // A conversation with its own system message does not get the default one.
        let got = t
            .render(&[ChatMessage::new("system", "S"), ChatMessage::new("user", "U"), ChatMessage::new("assistant", "A"), ChatMessage::new("user", "V")])
            .unwrap();
        assert_eq!(
            got,
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nV<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn plain_chatml_has_no_default_system_message() {
        let plain = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
        let t = ChatTemplate::from_jinja(plain).unwrap();
        assert_eq!(t, ChatTemplate::ChatMl { default_system: None });
        assert_eq!(t.render(&[ChatMessage::new("user", "hi")]).unwrap(), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn other_templates_roles_and_empty_conversations_are_refused() {
        let llama2 = "{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %}";
        let err = ChatTemplate::from_jinja(llama2).unwrap_err().to_string();
        assert!(err.contains("neither ChatML") && err.contains("/v1/completions"), "{err}");
        let t = ChatTemplate::ChatMl { default_system: None };
        let err = t.render(&[ChatMessage::new("tool", "{}")]).unwrap_err().to_string();
        assert!(err.contains("role `tool`"), "{err}");
        assert!(t.render(&[]).is_err());
    }

    /// The shape of Gemma 3's template, written for this test.
    const GEMMA_LIKE: &str = "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";

    #[test]
    fn gemma_turns_with_the_system_message_in_the_first_user_turn() {
        let t = ChatTemplate::from_jinja(GEMMA_LIKE).unwrap();
        assert_eq!(t, ChatTemplate::Gemma);
        assert_eq!(t.render(&[ChatMessage::new("user", " def f(x):\n")]).unwrap(), "<start_of_turn>user\ndef f(x):<end_of_turn>\n<start_of_turn>model\n");
        let got = t
            .render(&[ChatMessage::new("system", "S"), ChatMessage::new("user", "U"), ChatMessage::new("assistant", "A"), ChatMessage::new("user", "V")])
            .unwrap();
        assert_eq!(
            got,
            "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>user\nV<end_of_turn>\n<start_of_turn>model\n"
        );
        let err = t.render(&[ChatMessage::new("user", "U"), ChatMessage::new("system", "S")]).unwrap_err().to_string();
        assert!(err.contains("system message only first"), "{err}");
        assert!(t.render(&[ChatMessage::new("tool", "{}")]).is_err());
    }

    #[test]
    fn hf_templates_are_read_from_either_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(hf_chat_template(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join("tokenizer_config.json"), r#"{"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "<|im_start|>"}]}"#).unwrap();
        assert_eq!(hf_chat_template(dir.path()).unwrap().as_deref(), Some("<|im_start|>"));
        std::fs::write(dir.path().join("tokenizer_config.json"), r#"{"chat_template": 3}"#).unwrap();
        let err = hf_chat_template(dir.path()).unwrap_err().to_string();
        assert!(err.contains("tokenizer_config.json") && err.contains("chat_template"), "{err}");
        std::fs::write(dir.path().join("chat_template.jinja"), "{{ '<|im_start|>' }}").unwrap();
        assert_eq!(hf_chat_template(dir.path()).unwrap().as_deref(), Some("{{ '<|im_start|>' }}"));
    }
}
