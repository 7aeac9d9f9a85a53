//! The official builder's `tokenize_nltk`: `nltk.word_tokenize` (Punkt sentences, then NLTK's
//! improved Treebank word tokenizer per sentence) followed by `re.findall(r"\w+", token)`.

use std::sync::LazyLock;

use regex::Regex;

use super::punkt::Punkt;
use crate::pycompat::text::PY_WORD_CLASS;

fn rule(pattern: &str, replacement: &'static str) -> (Regex, &'static str) {
    (Regex::new(pattern).expect("static regex"), replacement)
}

/// Treebank rules that run before the sentence is padded with spaces (`STARTING_QUOTES` but
/// its lookaround rule, `PUNCTUATION`, `PARENS_BRACKETS`, `DOUBLE_DASHES`), in NLTK's order.
/// `$` of Python's patterns becomes `\z` (every `$` here follows a `\s*` that can eat a final
/// newline, except `([:,])$`, which is written out).
static BEFORE_PAD: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    vec![
        rule("([«“‘„]|`+)", " ${1} "),
        rule("^\"", "``"),
        rule("(``)", " ${1} "),
        rule(r#"([ (\[{<])("|'{2})"#, "${1} `` "),
    ]
});

static PUNCTUATION: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    vec![
        rule(r#"([^.])(\.)([\])}>"'»”’ ]*)\s*\z"#, "${1} ${2} ${3} "),
        rule(r"([:,])([^\d])", " ${1} ${2}"),
        rule(r"([:,])(\n?)\z", " ${1} ${2}"),
        rule(r"\.{2,}", " ${0} "),
        rule(r"[;@#$%&]", " ${0} "),
        rule(r"[\x{2012}-\x{2015}]", " ${0} "),
        rule(r#"([^.])(\.)([\])}>"']*)\s*\z"#, "${1} ${2}${3} "),
        rule(r"[?!]", " ${0} "),
        rule(r"([^'])' ", "${1} ' "),
        rule(r"[*]", " ${0} "),
        rule(r"[\]\[(){}<>]", " ${0} "),
        rule(r"--", " -- "),
    ]
});

/// `ENDING_QUOTES`, which run on the space-padded sentence (on the `regex` engine).
static ENDING_QUOTES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    vec![
        rule("([»”’])", " ${1} "),
        rule("''", " '' "),
        rule("\"", " '' "),
        rule(r"\s+", " "),
        rule(r"([^' ])('[sS]|'[mM]|'[dD]|') ", "${1} ${2} "),
        rule(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", "${1} ${2} "),
    ]
});

/// What a MacIntyre contraction pattern requires around its two parts.
#[derive(Clone, Copy)]
enum Edge {
    /// `\b`: a word boundary as Python's `re` sees it.
    Boundary,
    /// The pattern starts with a literal space (`" ('t)(is)"`), already in the match.
    Space,
    /// `(?=\s)`: Python `re` whitespace follows.
    FollowedBySpace,
}

/// `CONTRACTIONS2` and `CONTRACTIONS3`: (case-insensitive parts, edge before, edge after),
/// each rewritten to `" \1 \2 "`. NLTK compiles these with Python's `re`, whose `\w` (and so
/// `\b`) differs from the `regex` engine's: digits like `²` are word characters, combining
/// marks are not; so the edges are checked by hand.
static CONTRACTIONS: LazyLock<Vec<(Regex, Edge, Edge)>> = LazyLock::new(|| {
    use Edge::{Boundary, FollowedBySpace, Space};
    [
        ("(can)(not)", Boundary, Boundary),
        ("(d)('ye)", Boundary, Boundary),
        ("(gim)(me)", Boundary, Boundary),
        ("(gon)(na)", Boundary, Boundary),
        ("(got)(ta)", Boundary, Boundary),
        ("(lem)(me)", Boundary, Boundary),
        ("(more)('n)", Boundary, Boundary),
        ("(wan)(na)", Boundary, FollowedBySpace),
        (" ('t)(is)", Space, Boundary),
        (" ('t)(was)", Space, Boundary),
    ]
    .into_iter()
    .map(|(pattern, before, after)| (Regex::new(&format!("(?i){pattern}")).expect("static regex"), before, after))
    .collect()
});

static PY_WORD_CHAR: LazyLock<Regex> = LazyLock::new(|| Regex::new(&format!("^{PY_WORD_CLASS}$")).expect("static regex"));

/// Python `re`'s `\w` for one character.
fn is_py_word(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    let mut buf = [0u8; 4];
    PY_WORD_CHAR.is_match(c.encode_utf8(&mut buf))
}

/// Python `re.sub(pattern, r" \1 \2 ", text)` for one contraction rule.
fn split_contraction(text: &str, regex: &Regex, before: Edge, after: Edge) -> Option<String> {
    let mut out = String::new();
    let mut last = 0;
    for caps in regex.captures_iter(text) {
        let (m, first, second) = (caps.get(0)?, caps.get(1)?, caps.get(2)?);
        let prev = text[..m.start()].chars().next_back();
        let next = text[m.end()..].chars().next();
        // The patterns' parts start and end with word characters (or a quote after a space).
        let ok_before = match before {
            Edge::Boundary => !prev.is_some_and(is_py_word),
            Edge::Space | Edge::FollowedBySpace => true,
        };
        let ok_after = match after {
            Edge::Boundary => !next.is_some_and(is_py_word),
            Edge::FollowedBySpace => next.is_some_and(crate::pycompat::text::is_py_space),
            Edge::Space => true,
        };
        if !(ok_before && ok_after) {
            continue;
        }
        out.push_str(&text[last..m.start()]);
        out.push(' ');
        out.push_str(first.as_str());
        out.push(' ');
        out.push_str(second.as_str());
        out.push(' ');
        last = m.end();
    }
    if last == 0 {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

/// Everything that can make NLTK split inside a run of word characters: the contraction
/// words and the quote contractions (`n't`, `N'T`, `'t`, `'n`, `'ye`). Every other rule of
/// Punkt and the Treebank tokenizer only adds spaces next to punctuation or drops whitespace,
/// so a text without these has exactly the tokens of `re.findall(r"\w+", text)`.
static SPLITS_WORDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)cannot|gimme|gonna|gotta|lemme|wanna|'t|'n|'ye").expect("static regex"));

static PY_WORDS: LazyLock<Regex> = LazyLock::new(|| Regex::new(&format!("{PY_WORD_CLASS}+")).expect("static regex"));

/// `regex`-module `\w` (the engine NLTK's Treebank patterns run on): Unicode word characters.
fn is_word(c: char) -> bool {
    regex_syntax::is_word_character(c)
}

/// The `STARTING_QUOTES` rule `(?i)(?<!\w)(\')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)` -> `"\1 "`:
/// a quote that opens a word, unless it starts a contraction, gets a space after it.
fn space_opening_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        out.push(c);
        if c == '\'' && !prev.is_some_and(is_word) {
            let rest = &text[i + 1..];
            let opens_word = rest.chars().next().is_some_and(is_word);
            let contraction = ["re", "ve", "ll", "m", "t", "s", "d", "n"].iter().any(|alt| {
                let mut chars = rest.chars();
                let matched = alt.chars().all(|a| chars.next().is_some_and(|c| c.to_lowercase().eq(a.to_lowercase())));
                // \b after the alternative: its last letter is a word character.
                matched && !chars.next().is_some_and(is_word)
            });
            if opens_word && !contraction {
                out.push(' ');
            }
        }
        prev = Some(c);
    }
    out
}

fn apply(rules: &[(Regex, &'static str)], mut text: String) -> String {
    for (regex, replacement) in rules {
        if let std::borrow::Cow::Owned(replaced) = regex.replace_all(&text, *replacement) {
            text = replaced;
        }
    }
    text
}

/// `NLTKWordTokenizer().tokenize(sentence)` joined by spaces (the token list is its
/// whitespace split).
pub fn treebank(sentence: &str) -> String {
    let text = apply(&BEFORE_PAD, sentence.to_string());
    let text = space_opening_quotes(&text);
    let text = apply(&PUNCTUATION, text);
    let mut text = apply(&ENDING_QUOTES, format!(" {text} "));
    for (regex, before, after) in CONTRACTIONS.iter() {
        if let Some(split) = split_contraction(&text, regex, *before, *after) {
            text = split;
        }
    }
    text
}

/// `tokenize_nltk`: the official builder's tokenizer.
#[derive(Debug, Clone, Default)]
pub struct Tokenizer {
    punkt: Punkt,
}

impl Tokenizer {
    /// A tokenizer whose sentence splitter uses `punkt` (NLTK's English model for parity).
    pub fn new(punkt: Punkt) -> Self {
        Self { punkt }
    }

    /// The `\w+` tokens of `nltk.word_tokenize(text)`, in order.
    pub fn tokenize(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_token(text, |t| out.push(t.to_string()));
        out
    }

    /// Calls `f` with each token of [`Tokenizer::tokenize`], without allocating them.
    pub fn for_each_token(&self, text: &str, mut f: impl FnMut(&str)) {
        if !SPLITS_WORDS.is_match(text) {
            for m in PY_WORDS.find_iter(text) {
                f(m.as_str());
            }
            return;
        }
        for (start, end) in self.punkt.sentence_spans(text) {
            let words = treebank(&text[start..end]);
            for m in PY_WORDS.find_iter(&words) {
                f(m.as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        Tokenizer::default().tokenize(text)
    }

    #[test]
    fn contractions_split_like_nltk() {
        assert_eq!(tokens("x.cannot()"), ["x", "can", "not"]);
        assert_eq!(tokens("I don't know"), ["I", "do", "n", "t", "know"]);
        assert_eq!(tokens("it can't be"), ["it", "ca", "n", "t", "be"]);
        assert_eq!(tokens("you won't, gonna"), ["you", "wo", "n", "t", "gon", "na"]);
        assert_eq!(tokens("wanna go; wanna"), ["wan", "na", "go", "wan", "na"]);
    }

    #[test]
    fn nt_needs_a_following_space() {
        // `doesn't.` ends the text, so the final period is split off and n't follows.
        assert_eq!(tokens("it doesn't."), ["it", "does", "n", "t"]);
        assert_eq!(tokens("doesn't()"), ["does", "n", "t"]);
        assert_eq!(tokens("doesn'tX"), ["doesn", "tX"]);
        assert_eq!(tokens("a.doesn't.b"), ["a", "doesn", "t", "b"]);
    }

    #[test]
    fn sentence_ends_expose_nt() {
        // Without the sentence split the inner `doesn't.` would stay `doesn`, `t`.
        assert_eq!(tokens("but it doesn't. Next one"), ["but", "it", "does", "n", "t", "Next", "one"]);
    }

    #[test]
    fn opening_quote_blocks_tis() {
        assert_eq!(tokens("say 'tis"), ["say", "tis"]);
        assert_eq!(tokens("x = 'abc'"), ["x", "abc"]);
    }

    #[test]
    fn contraction_boundaries_follow_python_re() {
        // `²` is a word character for Python's `re`, so `x²d'ye` has no boundary before `d`.
        assert_eq!(tokens("x²d'ye d'ye"), ["x²d", "ye", "d", "ye"]);
        assert_eq!(tokens("wanna\u{1c}x"), ["wan", "na", "x"], "\\x1c is whitespace for Python");
        // The opening-quote rule spaces out `'twas` first, so CONTRACTIONS3 never fires.
        assert_eq!(tokens("twas 'twas"), ["twas", "twas"]);
    }

    #[test]
    fn fast_path_agrees_with_the_full_pipeline() {
        // Texts without contraction triggers skip Punkt and the Treebank rules.
        let t = Tokenizer::default();
        for text in ["x = f(a, b);  // done. Next: y...", "He said \"go.\" (Then) left!", "a--b ``c'' «d» e.g. x"] {
            let mut full = Vec::new();
            for (s, e) in t.punkt.sentence_spans(text) {
                full.extend(PY_WORDS.find_iter(&treebank(&text[s..e])).map(|m| m.as_str().to_string()));
            }
            assert!(!SPLITS_WORDS.is_match(text));
            assert_eq!(t.tokenize(text), full, "{text}");
        }
        assert!(SPLITS_WORDS.is_match("DON'T"));
    }

    #[test]
    fn words_follow_python_re() {
        assert_eq!(tokens("café_1 x² a\u{301}b"), ["café_1", "x²", "a", "b"]);
        assert!(tokens("  ;; ").is_empty());
    }
}
