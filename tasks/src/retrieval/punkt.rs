//! NLTK's Punkt sentence splitter as `nltk.word_tokenize` uses it (nltk 3.10
//! `PunktSentenceTokenizer.span_tokenize` with realigned boundaries): inference only, with
//! the learned tables loaded from a `punkt_tab` directory.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use crate::pycompat::text::{py_rstrip, py_strip};

/// Orthographic-context flags of the Punkt model (bit values of NLTK's `_ORTHO_*`).
const ORTHO_BEG_UC: u32 = 1 << 1;
const ORTHO_MID_UC: u32 = 1 << 2;
const ORTHO_UNK_UC: u32 = 1 << 3;
const ORTHO_BEG_LC: u32 = 1 << 4;
const ORTHO_MID_LC: u32 = 1 << 5;
const ORTHO_UNK_LC: u32 = 1 << 6;
const ORTHO_UC: u32 = ORTHO_BEG_UC + ORTHO_MID_UC + ORTHO_UNK_UC;
const ORTHO_LC: u32 = ORTHO_BEG_LC + ORTHO_MID_LC + ORTHO_UNK_LC;

/// A Punkt model file that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
#[error("Punkt model {path}: {message}")]
pub struct PunktError {
    /// The file (or directory) at fault.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// The learned parameters of a Punkt model: abbreviations, collocations, sentence starters
/// and orthographic contexts (NLTK `PunktParameters`).
#[derive(Debug, Clone, Default)]
pub struct PunktParams {
    abbrev_types: HashSet<String>,
    collocations: HashSet<(String, String)>,
    sent_starters: HashSet<String>,
    ortho_context: HashMap<String, u32>,
}

fn table_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
}

impl PunktParams {
    /// Parameters from the four files of an NLTK `punkt_tab/<language>` directory
    /// (`abbrev_types.txt`, `collocations.tab`, `sent_starters.txt`, `ortho_context.tab`).
    pub fn load(dir: &Path) -> Result<Self, PunktError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map_err(|e| PunktError { path: path.display().to_string(), message: e.to_string() })
        };
        Self::from_tables(
            &read("abbrev_types.txt")?,
            &read("collocations.tab")?,
            &read("sent_starters.txt")?,
            &read("ortho_context.tab")?,
        )
        .map_err(|message| PunktError { path: dir.display().to_string(), message })
    }

    /// Parameters from the contents of the four `punkt_tab` files.
    pub fn from_tables(abbrevs: &str, collocations: &str, starters: &str, ortho: &str) -> Result<Self, String> {
        let mut params = Self {
            abbrev_types: table_lines(abbrevs).map(str::to_string).collect(),
            sent_starters: table_lines(starters).map(str::to_string).collect(),
            ..Self::default()
        };
        for line in table_lines(collocations) {
            let (a, b) = line
                .split_once('\t')
                .ok_or_else(|| format!("collocations.tab: line `{line}` is not two tab-separated words"))?;
            params.collocations.insert((a.to_string(), b.to_string()));
        }
        for line in table_lines(ortho) {
            let (word, flags) = line
                .split_once('\t')
                .ok_or_else(|| format!("ortho_context.tab: line `{line}` is not `word<TAB>flags`"))?;
            let flags = flags
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("ortho_context.tab: `{flags}` is not an integer"))?;
            params.ortho_context.insert(word.to_string(), flags);
        }
        Ok(params)
    }

    /// Number of (abbreviations, sentence starters, collocations, orthographic contexts).
    pub fn sizes(&self) -> (usize, usize, usize, usize) {
        (self.abbrev_types.len(), self.sent_starters.len(), self.collocations.len(), self.ortho_context.len())
    }

    fn ortho(&self, typ: &str) -> u32 {
        self.ortho_context.get(typ).copied().unwrap_or(0)
    }
}

/// `regex`-module `\s` (Unicode White_Space), which Punkt's patterns use.
fn is_space(c: char) -> bool {
    c.is_whitespace()
}

/// Python's `string.whitespace`, which `_get_last_whitespace_index` tests.
fn is_ascii_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{0b}' | '\u{0c}')
}

/// `_re_non_word_chars`: characters that cannot appear within words.
fn is_non_word(c: char) -> bool {
    matches!(
        c,
        ')' | '"' | ';' | '}' | ']' | '*' | ':' | '@' | '\'' | '(' | '{' | '['
            | '\u{2018}' | '\u{2019}' | '\u{201c}' | '\u{201d}' | '\u{ab}' | '\u{bb}' | '?' | '!'
    )
}

/// `_re_word_start` excludes these characters from starting a word token.
fn is_not_word_start(c: char) -> bool {
    matches!(c, '(' | '"' | '`' | '{' | '[' | ':' | ';' | '&' | '#' | '*' | '@' | ')' | '}' | ']' | '-' | ',')
}

fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|rest| rest.chars().next())
}

/// Length of `_re_multi_char_punct` (`\-{2,}|\.{2,}|(?:\.\s){2,}\.`) matched at byte `i`.
fn multi_char_len(s: &str, i: usize) -> Option<usize> {
    let rest = &s[i..];
    for run in ['-', '.'] {
        let n = rest.chars().take_while(|&c| c == run).count();
        if n >= 2 {
            return Some(n);
        }
    }
    // (?:\.\s){2,}\. — greedy repetitions, backing off while no final dot follows.
    let mut ends = Vec::new();
    let mut pos = 0;
    loop {
        let mut it = rest[pos..].chars();
        match (it.next(), it.next()) {
            (Some('.'), Some(c)) if is_space(c) => {
                pos += 1 + c.len_utf8();
                ends.push(pos);
            }
            _ => break,
        }
    }
    (2..=ends.len()).rev().map(|k| ends[k - 1]).find(|&end| rest[end..].starts_with('.')).map(|end| end + 1)
}

/// The lookahead that ends a word token at byte `j` of `s`.
fn word_ends_at(s: &str, j: usize) -> bool {
    let Some(c) = char_at(s, j) else { return true };
    if is_space(c) || is_non_word(c) || multi_char_len(s, j).is_some() {
        return true;
    }
    if c == ',' {
        let k = j + 1;
        return match char_at(s, k) {
            None => true,
            Some(d) => is_space(d) || is_non_word(d) || multi_char_len(s, k).is_some(),
        };
    }
    false
}

/// `PunktLanguageVars.word_tokenize`: the words of one line.
fn punkt_words(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(c) = char_at(line, i) {
        if is_space(c) {
            i += c.len_utf8();
            continue;
        }
        let end = if let Some(n) = multi_char_len(line, i) {
            i + n
        } else if !is_not_word_start(c) {
            let mut j = i + c.len_utf8();
            while !word_ends_at(line, j) {
                j += char_at(line, j).map_or(1, char::len_utf8);
            }
            j
        } else {
            i + c.len_utf8()
        };
        out.push(&line[i..end]);
        i = end;
    }
    out
}

static NUMERIC: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^-?[.,]?\d[\d,.\-]*\.?$").expect("static regex"));
static INITIAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[^\W\d]\.$").expect("static regex"));

/// One annotated word (NLTK `PunktToken`).
struct Token<'a> {
    tok: &'a str,
    typ: String,
    period_final: bool,
    sentbreak: bool,
    abbr: bool,
    ellipsis: bool,
}

#[derive(PartialEq)]
enum Ortho {
    True,
    False,
    Unknown,
}

impl<'a> Token<'a> {
    fn new(tok: &'a str) -> Self {
        let lower = tok.to_lowercase();
        let typ = if NUMERIC.is_match(&lower) { "##number##".to_string() } else { lower };
        Self { tok, typ, period_final: tok.ends_with('.'), sentbreak: false, abbr: false, ellipsis: false }
    }

    fn type_no_period(&self) -> &str {
        if self.typ.chars().count() > 1 && self.typ.ends_with('.') {
            &self.typ[..self.typ.len() - 1]
        } else {
            &self.typ
        }
    }

    fn type_no_sentperiod(&self) -> &str {
        if self.sentbreak {
            self.type_no_period()
        } else {
            &self.typ
        }
    }

    fn first_upper(&self) -> bool {
        self.tok.chars().next().is_some_and(char::is_uppercase)
    }

    fn first_lower(&self) -> bool {
        self.tok.chars().next().is_some_and(char::is_lowercase)
    }

    fn is_ellipsis(&self) -> bool {
        self.tok.len() >= 2 && self.tok.bytes().all(|b| b == b'.')
    }

    fn is_initial(&self) -> bool {
        INITIAL.is_match(self.tok)
    }
}

/// A Punkt sentence splitter with a loaded model.
#[derive(Debug, Clone, Default)]
pub struct Punkt {
    params: PunktParams,
}

struct EndContext {
    start: usize,
    after_end: usize,
    next_tok: Option<usize>,
}

impl Punkt {
    /// A splitter using `params`.
    pub fn new(params: PunktParams) -> Self {
        Self { params }
    }

    fn first_pass(&self, t: &mut Token) {
        let tok = t.tok;
        if matches!(tok, "." | "?" | "!") {
            t.sentbreak = true;
        } else if t.is_ellipsis() {
            t.ellipsis = true;
        } else if t.period_final && !tok.ends_with("..") {
            let base = tok[..tok.len() - 1].to_lowercase();
            let last = base.rsplit('-').next().unwrap_or("");
            if self.params.abbrev_types.contains(&base) || self.params.abbrev_types.contains(last) {
                t.abbr = true;
            } else {
                t.sentbreak = true;
            }
        }
    }

    fn ortho_heuristic(&self, t: &Token) -> Ortho {
        if matches!(t.tok, ";" | ":" | "," | "." | "!" | "?") {
            return Ortho::False;
        }
        let ctx = self.params.ortho(t.type_no_sentperiod());
        if t.first_upper() && ctx & ORTHO_LC != 0 && ctx & ORTHO_MID_UC == 0 {
            return Ortho::True;
        }
        if t.first_lower() && (ctx & ORTHO_UC != 0 || ctx & ORTHO_BEG_LC == 0) {
            return Ortho::False;
        }
        Ortho::Unknown
    }

    fn second_pass(&self, t1: &mut Token, t2: &Token) {
        if !t1.period_final {
            return;
        }
        let typ = t1.type_no_period().to_string();
        let next_typ = t2.type_no_sentperiod();
        let initial = t1.is_initial();
        if self.params.collocations.contains(&(typ.clone(), next_typ.to_string())) {
            t1.sentbreak = false;
            t1.abbr = true;
            return;
        }
        if (t1.abbr || t1.ellipsis) && !initial {
            if self.ortho_heuristic(t2) == Ortho::True {
                t1.sentbreak = true;
                return;
            }
            if t2.first_upper() && self.params.sent_starters.contains(next_typ) {
                t1.sentbreak = true;
                return;
            }
        }
        if initial || typ == "##number##" {
            let starter = self.ortho_heuristic(t2);
            if starter == Ortho::False {
                t1.sentbreak = false;
                t1.abbr = true;
                return;
            }
            if starter == Ortho::Unknown && initial && t2.first_upper() && self.params.ortho(next_typ) & ORTHO_LC == 0 {
                t1.sentbreak = false;
                t1.abbr = true;
            }
        }
    }

    /// `text_contains_sentbreak`: whether a token after a sentence break exists in `text`.
    fn contains_sentbreak(&self, text: &str) -> bool {
        let mut tokens: Vec<Token> = text
            .split('\n')
            .filter(|line| !py_strip(line).is_empty())
            .flat_map(punkt_words)
            .map(Token::new)
            .collect();
        for t in &mut tokens {
            self.first_pass(t);
        }
        let mut found = false;
        for i in 0..tokens.len() {
            if let [t1, t2, ..] = &mut tokens[i..] {
                self.second_pass(t1, t2);
            }
            if found {
                return true;
            }
            if tokens[i].sentbreak {
                found = true;
            }
        }
        false
    }

    /// `period_context_re().finditer`: every `.`, `?`, `!` followed by non-word punctuation
    /// or by whitespace and another token.
    fn end_contexts(text: &str) -> Vec<EndContext> {
        let mut out = Vec::new();
        for (i, c) in text.char_indices() {
            if !matches!(c, '.' | '?' | '!') {
                continue;
            }
            let j = i + 1;
            match char_at(text, j) {
                Some(d) if is_non_word(d) => out.push(EndContext { start: i, after_end: j + d.len_utf8(), next_tok: None }),
                Some(d) if is_space(d) => {
                    let k = j + text[j..].find(|c: char| !is_space(c)).unwrap_or(text.len() - j);
                    if k < text.len() {
                        let end = k + text[k..].find(is_space).unwrap_or(text.len() - k);
                        out.push(EndContext { start: i, after_end: end, next_tok: Some(k) });
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// `_slices_from_text`: candidate sentence slices before realignment.
    fn slices(&self, text: &str) -> Vec<(usize, usize)> {
        let contexts = Self::end_contexts(text);
        let mut decisions: Vec<(&EndContext, String)> = Vec::new();
        let mut prev_slice = (0usize, 0usize);
        let mut prev: Option<&EndContext> = None;
        let context_text = |slice: (usize, usize), m: &EndContext| {
            let mut s = String::from(text.get(slice.0..slice.1).unwrap_or(""));
            s.push_str(&text[m.start..m.after_end]);
            s
        };
        for m in &contexts {
            let before = text.get(prev_slice.1..m.start).unwrap_or("");
            let last_ws = before.char_indices().rev().find(|&(_, c)| is_ascii_space(c)).map_or(0, |(i, _)| i);
            let start = if last_ws != 0 { last_ws + prev_slice.1 + 1 } else { prev_slice.0 };
            let word_slice = (start, m.start);
            if let Some(p) = prev {
                if prev_slice.1 <= word_slice.0 {
                    decisions.push((p, context_text(prev_slice, p)));
                }
            }
            prev = Some(m);
            prev_slice = word_slice;
        }
        if let Some(p) = prev {
            decisions.push((p, context_text(prev_slice, p)));
        }
        let mut slices = Vec::new();
        let mut last_break = 0;
        for (m, context) in decisions {
            if self.contains_sentbreak(&context) {
                slices.push((last_break, m.start + 1));
                last_break = m.next_tok.unwrap_or(m.start + 1);
            }
        }
        slices.push((last_break, py_rstrip(text).len()));
        slices
    }

    /// Byte spans of the sentences of `text`, as `PunktSentenceTokenizer.span_tokenize`
    /// (realign_boundaries=True) gives them; empty sentences are left out as NLTK does.
    pub fn sentence_spans(&self, text: &str) -> Vec<(usize, usize)> {
        let slices = self.slices(text);
        let mut out = Vec::new();
        let mut realign = 0;
        for (i, &(s1, e1)) in slices.iter().enumerate() {
            let s1 = s1 + realign;
            let nonempty = s1 < e1.min(text.len());
            let Some(&(s2, e2)) = slices.get(i + 1) else {
                if nonempty {
                    out.push((s1, e1));
                }
                continue;
            };
            let second = text.get(s2..e2.min(text.len())).unwrap_or("");
            match realignment(second) {
                Some(len) => {
                    out.push((s1, s2 + py_rstrip(&second[..len]).len()));
                    realign = len;
                }
                None => {
                    realign = 0;
                    if nonempty {
                        out.push((s1, e1));
                    }
                }
            }
        }
        out
    }
}

/// `re_boundary_realignment.match`: closing quotes/brackets that belong to the previous
/// sentence, with the whitespace after them; returns the match length in bytes.
fn realignment(s: &str) -> Option<usize> {
    let closing = |c: char| {
        matches!(c, '"' | '\'' | ')' | ']' | '}' | '\u{2018}' | '\u{2019}' | '\u{201c}' | '\u{201d}' | '\u{ab}' | '\u{bb}')
    };
    let mut pos = 0;
    loop {
        let c = char_at(s, pos).filter(|&c| closing(c))?;
        pos += c.len_utf8();
        match char_at(s, pos) {
            Some(d) if is_space(d) => {
                return Some(pos + s[pos..].find(|c: char| !is_space(c)).unwrap_or(s.len() - pos));
            }
            None => return Some(pos),
            Some(_) if s[pos..].starts_with("--") => return Some(pos),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentences<'a>(p: &Punkt, text: &'a str) -> Vec<&'a str> {
        p.sentence_spans(text).into_iter().map(|(s, e)| &text[s..e]).collect()
    }

    fn english_like() -> Punkt {
        let params = PunktParams::from_tables("mr\nu.s\ne.g", "", "the\nbut", "smith\t4\nbut\t34").unwrap();
        Punkt::new(params)
    }

    #[test]
    fn splits_at_periods_but_not_after_abbreviations() {
        let p = english_like();
        assert_eq!(sentences(&p, "Mr. Smith went. But why?  He left."), vec!["Mr. Smith went.", "But why?", "He left."]);
    }

    #[test]
    fn collocations_prevent_a_break() {
        let with = Punkt::new(PunktParams::from_tables("", "xyz\tnext", "", "").unwrap());
        assert_eq!(sentences(&with, "see xyz. Next one"), vec!["see xyz. Next one"]);
        assert_eq!(sentences(&Punkt::default(), "see xyz. Next one"), vec!["see xyz.", "Next one"]);
    }

    #[test]
    fn initials_and_numbers_use_the_orthographic_heuristic() {
        // A lowercase word that is known to appear lowercase mid-sentence: no break after an
        // initial or a number.
        let p = Punkt::new(PunktParams::from_tables("", "", "", "walter\t32").unwrap());
        assert_eq!(sentences(&p, "J. walter 3. walter"), vec!["J. walter 3. walter"]);
        assert_eq!(sentences(&p, "see. walter"), vec!["see.", "walter"]);
    }

    #[test]
    fn realigns_closing_quotes_and_brackets() {
        let p = Punkt::default();
        assert_eq!(sentences(&p, "(He went.) Then x."), vec!["(He went.)", "Then x."]);
        assert_eq!(sentences(&p, "\"Go.\" Now"), vec!["\"Go.\"", "Now"]);
    }

    #[test]
    fn multi_char_punctuation() {
        assert_eq!(multi_char_len("--x", 0), Some(2));
        assert_eq!(multi_char_len("...", 0), Some(3));
        assert_eq!(multi_char_len(". . . x", 0), Some(5));
        assert_eq!(multi_char_len(". . x", 0), None);
        assert_eq!(multi_char_len(". x", 0), None);
    }

    #[test]
    fn punkt_word_tokens() {
        assert_eq!(punkt_words("Hello, world... (x) a.b. c,d"), vec!["Hello", ",", "world", "...", "(", "x", ")", "a.b.", "c,d"]);
    }

    #[test]
    fn trailing_whitespace_is_not_a_sentence() {
        let p = Punkt::default();
        assert_eq!(sentences(&p, "x = 1.  \n"), vec!["x = 1."]);
        assert!(sentences(&p, "   ").is_empty());
    }
}
