//! Edit similarity: fuzzywuzzy's `fuzz.ratio` over two interchangeable backends.
//!
//! fuzzywuzzy uses `difflib.SequenceMatcher` unless python-Levenshtein is installed, in which
//! case it uses `Levenshtein.ratio`. The official requirements install no Levenshtein, so
//! [`EditSimBackend::Difflib`] is the default; both are exact ports.

use std::collections::HashMap;

use crate::pycompat::num::py_round;
use crate::pycompat::text::py_strip;

/// Which `fuzz.ratio` implementation to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EditSimBackend {
    /// fuzzywuzzy alone: `difflib.SequenceMatcher(None, pred, target).ratio()`, autojunk on.
    #[default]
    Difflib,
    /// fuzzywuzzy with python-Levenshtein: `Levenshtein.ratio` (Indel-normalised similarity).
    Levenshtein,
}

impl EditSimBackend {
    /// The backend's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Difflib => "difflib",
            Self::Levenshtein => "levenshtein",
        }
    }
}

impl std::str::FromStr for EditSimBackend {
    type Err = String;

    /// `difflib` or `levenshtein`, the names [`EditSimBackend::name`] gives.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Difflib, Self::Levenshtein]
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown edit similarity backend `{s}`; expected difflib or levenshtein"))
    }
}

/// The official `cal_edit_sim([target], [pred])`: `fuzz.ratio(pred.strip(), target.strip())`,
/// an integer 0..=100 returned as a float.
pub fn edit_similarity(pred: &str, target: &str, backend: EditSimBackend) -> f64 {
    fuzz_ratio(py_strip(pred), py_strip(target), backend) as f64
}

/// fuzzywuzzy `fuzz.ratio(s1, s2)`: 100 for equal strings, 0 when one is empty, otherwise
/// `int(round(100 * ratio))` with Python's half-to-even rounding.
pub fn fuzz_ratio(s1: &str, s2: &str, backend: EditSimBackend) -> u32 {
    if s1 == s2 {
        return 100;
    }
    if s1.is_empty() || s2.is_empty() {
        return 0;
    }
    let a: Vec<char> = s1.chars().collect();
    let b: Vec<char> = s2.chars().collect();
    let ratio = match backend {
        EditSimBackend::Difflib => difflib_ratio(&a, &b),
        EditSimBackend::Levenshtein => indel_ratio(&a, &b),
    };
    py_round(100.0 * ratio) as u32
}

/// `difflib.SequenceMatcher(None, a, b).ratio()` with the default `autojunk=True`.
pub fn difflib_ratio(a: &[char], b: &[char]) -> f64 {
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    let matcher = SequenceMatcher::new(b);
    2.0 * matcher.matching_characters(a) as f64 / total as f64
}

/// The `b` side of a `SequenceMatcher`: positions of each element, minus "popular" ones.
struct SequenceMatcher<'b> {
    b: &'b [char],
    b2j: HashMap<char, Vec<usize>>,
}

impl<'b> SequenceMatcher<'b> {
    fn new(b: &'b [char]) -> Self {
        let mut b2j: HashMap<char, Vec<usize>> = HashMap::new();
        for (j, c) in b.iter().enumerate() {
            b2j.entry(*c).or_default().push(j);
        }
        // autojunk: in sequences of 200+ items, items seen more than 1% (+1) are "popular"
        // and cannot start a match (they can still extend one).
        if b.len() >= 200 {
            let ntest = b.len() / 100 + 1;
            b2j.retain(|_, positions| positions.len() <= ntest);
        }
        Self { b, b2j }
    }

    /// Sum of the sizes of `get_matching_blocks()`.
    fn matching_characters(&self, a: &[char]) -> usize {
        let mut total = 0;
        let mut queue = vec![(0, a.len(), 0, self.b.len())];
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let (i, j, k) = self.find_longest_match(a, alo, ahi, blo, bhi);
            if k > 0 {
                total += k;
                if alo < i && blo < j {
                    queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        total
    }

    /// `find_longest_match`: the longest block (earliest in `a`, then in `b`) in the ranges,
    /// extended over equal neighbours. With no `isjunk` there is no junk to extend over.
    fn find_longest_match(
        &self,
        a: &[char],
        alo: usize,
        ahi: usize,
        blo: usize,
        bhi: usize,
    ) -> (usize, usize, usize) {
        let b = self.b;
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0);
        // j2len[j] = length of the longest match ending at a[i-1], b[j].
        let mut j2len: HashMap<usize, usize> = HashMap::new();
        let mut next: HashMap<usize, usize> = HashMap::new();
        for (i, item) in a.iter().enumerate().take(ahi).skip(alo) {
            next.clear();
            if let Some(positions) = self.b2j.get(item) {
                for &j in positions {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = j.checked_sub(1).and_then(|p| j2len.get(&p)).copied().unwrap_or(0) + 1;
                    next.insert(j, k);
                    if k > bestsize {
                        besti = i + 1 - k;
                        bestj = j + 1 - k;
                        bestsize = k;
                    }
                }
            }
            std::mem::swap(&mut j2len, &mut next);
        }
        while besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1] {
            besti -= 1;
            bestj -= 1;
            bestsize += 1;
        }
        while besti + bestsize < ahi && bestj + bestsize < bhi && a[besti + bestsize] == b[bestj + bestsize] {
            bestsize += 1;
        }
        (besti, bestj, bestsize)
    }
}

/// python-Levenshtein `ratio` (RapidFuzz `Indel.normalized_similarity`):
/// `1 - indel_distance / (len(a) + len(b))`, computed in that order.
pub fn indel_ratio(a: &[char], b: &[char]) -> f64 {
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    let distance = total - 2 * lcs_length(a, b);
    1.0 - distance as f64 / total as f64
}

/// Length of the longest common subsequence (row-by-row dynamic programming).
fn lcs_length(a: &[char], b: &[char]) -> usize {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let mut row = vec![0usize; short.len() + 1];
    for &c in long {
        let mut diagonal = 0;
        for (j, &s) in short.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if c == s { diagonal + 1 } else { above.max(row[j]) };
            diagonal = above;
        }
    }
    row[short.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn special_cases_of_fuzz_ratio() {
        for backend in [EditSimBackend::Difflib, EditSimBackend::Levenshtein] {
            assert_eq!(fuzz_ratio("", "", backend), 100);
            assert_eq!(fuzz_ratio("abc", "abc", backend), 100);
            assert_eq!(fuzz_ratio("", "abc", backend), 0);
            assert_eq!(fuzz_ratio("abc", "", backend), 0);
            assert_eq!(edit_similarity("  x\n", "x", backend), 100.0);
            assert_eq!(edit_similarity("\t", "x", backend), 0.0);
        }
    }

    #[test]
    fn difflib_values_match_python() {
        // difflib.SequenceMatcher(None, a, b).ratio() in CPython 3.11.
        assert_eq!(difflib_ratio(&chars("abcd"), &chars("bcde")), 0.75);
        assert_eq!(difflib_ratio(&chars("foo(bar)"), &chars("foo(baz)")), 0.875);
        // "qabxcd" vs "abycdf": blocks "ab" and "cd" -> 8/12.
        assert_eq!(difflib_ratio(&chars("qabxcd"), &chars("abycdf")), 2.0 * 4.0 / 12.0);
        // Crossed matches: only one of the two characters can be matched.
        assert_eq!(difflib_ratio(&chars("ab"), &chars("ba")), 0.5);
        assert_eq!(indel_ratio(&chars("ab"), &chars("ba")), 0.5);
    }

    #[test]
    fn autojunk_applies_to_the_target_side_only() {
        // Values from CPython 3.11. In b (217 chars) 'a' and 'b' are popular, so the run of
        // 'b's cannot start a match; only "y" is found. Swapped, nothing is popular.
        let b: Vec<char> = format!("x{}{}y", "a".repeat(150), "b".repeat(60)).chars().collect();
        let a = chars("bbbzy");
        assert_eq!(difflib_ratio(&a, &b), 0.009216589861751152);
        assert_eq!(difflib_ratio(&b, &a), 0.03686635944700461);
    }

    #[test]
    fn rounding_is_half_even() {
        // 2*LCS/(len) = 2*5/16 = 0.625 -> 62.5 -> 62 under half-to-even.
        let (p, t) = ("abcdefgh", "abcdexyz");
        assert_eq!(indel_ratio(&chars(p), &chars(t)), 0.625);
        assert_eq!(fuzz_ratio(p, t, EditSimBackend::Levenshtein), 62);
        assert_eq!(fuzz_ratio("é中文x", "é中文y", EditSimBackend::Difflib), 75);
    }
}
