//! Token counting for context construction: the [`TokenCounter`] trait a model's tokenizer
//! implements, and the golden vectors' stand-in tokenizer.

/// What a token counter's failure carries.
pub type TokenizeError = Box<dyn std::error::Error + Send + Sync>;

/// Counts tokens the way the reference's `len(tokenizer.tokenize(text))` does.
///
/// `make_code_context` only ever asks how many tokens a piece of text has (a line, a
/// padding comment, a whole prefix); it never decodes token slices. Implementations
/// should count the tokens of `text` on its own, without special tokens (BOS/EOS), as
/// transformers' `tokenize` does. The engine crate implements this for model tokenizers;
/// [`StandInTokenizer`] is the golden vectors' tokenizer. A closure
/// `Fn(&str) -> Result<usize, TokenizeError>` is a counter too.
pub trait TokenCounter: Send + Sync {
    /// The number of tokens of `text`.
    fn count_tokens(&self, text: &str) -> Result<usize, TokenizeError>;
}

impl<F> TokenCounter for F
where
    F: Fn(&str) -> Result<usize, TokenizeError> + Send + Sync,
{
    fn count_tokens(&self, text: &str) -> Result<usize, TokenizeError> {
        self(text)
    }
}

/// The tokenizer the golden context files were made with (CodeLlama's could not be
/// downloaded): every maximal run of ASCII letters, digits and `_` is a token, and so is
/// every other character except ASCII whitespace (space, `\t`, `\n`, `\r`, `\f`, `\v`).
/// Python: `re.findall(r"[A-Za-z0-9_]+|[^A-Za-z0-9_ \t\n\r\f\v]", s)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StandInTokenizer;

impl StandInTokenizer {
    /// The tokens of `text`, in order.
    pub fn tokenize(text: &str) -> Vec<&str> {
        let mut tokens = Vec::new();
        let mut word_start: Option<usize> = None;
        for (at, c) in text.char_indices() {
            if is_word(c) {
                word_start.get_or_insert(at);
                continue;
            }
            if let Some(start) = word_start.take() {
                tokens.push(&text[start..at]);
            }
            if !is_ascii_space(c) {
                tokens.push(&text[at..at + c.len_utf8()]);
            }
        }
        if let Some(start) = word_start {
            tokens.push(&text[start..]);
        }
        tokens
    }

    /// `len(tokenize(text))`, without building the tokens.
    pub fn count(text: &str) -> usize {
        let mut count = 0;
        let mut in_word = false;
        for c in text.chars() {
            if is_word(c) {
                count += usize::from(!in_word);
                in_word = true;
            } else {
                in_word = false;
                count += usize::from(!is_ascii_space(c));
            }
        }
        count
    }
}

impl TokenCounter for StandInTokenizer {
    fn count_tokens(&self, text: &str) -> Result<usize, TokenizeError> {
        Ok(Self::count(text))
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The whitespace of the pattern's negated class: ` \t\n\r\f\v`.
fn is_ascii_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c' | '\x0b')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_single_other_characters() {
        // Checked against Python's re.findall with the pattern above.
        let text = "fn add_1(a: u8) -> é{x}\t\x0b//…\u{a0}";
        assert_eq!(
            StandInTokenizer::tokenize(text),
            vec!["fn", "add_1", "(", "a", ":", "u8", ")", "-", ">", "é", "{", "x", "}", "/", "/", "…", "\u{a0}"]
        );
        assert_eq!(StandInTokenizer::count(text), 17);
        assert_eq!(StandInTokenizer::count(""), 0);
        assert_eq!(StandInTokenizer::count(" \n\r\t"), 0);
        assert_eq!(StandInTokenizer::count("abc"), 1);
    }

    #[test]
    fn closures_count_tokens() {
        let chars = |text: &str| -> Result<usize, TokenizeError> { Ok(text.chars().count()) };
        assert_eq!(chars.count_tokens("héllo").ok(), Some(5));
    }
}
