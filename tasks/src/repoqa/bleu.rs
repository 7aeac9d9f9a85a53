//! BLEU as RepoQA computes function similarity: NLTK `sentence_bleu` with uniform 4-gram
//! weights and Chen & Cherry smoothing method 4 (NLTK 3.10 on Python 3.11, where the
//! smoothing divides by the *unreduced* n-gram count).

use std::collections::HashMap;

use crate::pycompat::num::fsum;
use crate::pycompat::text::{py_split_whitespace, py_strip};

/// NLTK's `SmoothingFunction(k=5)` constant used by method 4.
const METHOD4_K: f64 = 5.0;

/// A BLEU value as Python returns it: the integer `0` when no unigram matches, else a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bleu {
    /// No unigram of the candidate is in the reference (NLTK returns the int `0`).
    NoOverlap,
    /// The smoothed BLEU score.
    Score(f64),
}

impl Bleu {
    /// The value as a float (`NoOverlap` is 0.0).
    pub fn value(self) -> f64 {
        match self {
            Self::NoOverlap => 0.0,
            Self::Score(x) => x,
        }
    }
}

/// RepoQA `compute_function_similarity(candidate, reference)`.
pub fn function_similarity(candidate: &str, reference: &str) -> Bleu {
    sentence_bleu(&function_tokens(reference), &function_tokens(candidate))
}

/// The tokens RepoQA compares: `re.split(r"\s+", s.strip())`.
pub fn function_tokens(text: &str) -> Vec<&str> {
    py_split_whitespace(py_strip(text))
}

/// NLTK `sentence_bleu([reference], hypothesis, smoothing_function=method4)`.
pub fn sentence_bleu(reference: &[&str], hypothesis: &[&str]) -> Bleu {
    let hyp_len = hypothesis.len();
    let ref_len = reference.len();
    let precisions: Vec<(usize, usize)> = (1..=4).map(|n| modified_precision(reference, hypothesis, n)).collect();
    if precisions[0].0 == 0 {
        return Bleu::NoOverlap;
    }
    let brevity_penalty = if hyp_len > ref_len {
        1.0
    } else if hyp_len == 0 {
        0.0
    } else {
        (1.0 - ref_len as f64 / hyp_len as f64).exp()
    };
    // method4: an n-gram order without matches gets 1 / (2^m * k / ln(len)) / denominator,
    // m counting such orders from 1; orders are left as fractions otherwise.
    let mut missing_orders = 0;
    let log_terms = precisions.iter().filter_map(|&(numerator, denominator)| {
        let p = if numerator == 0 && hyp_len > 1 {
            missing_orders += 1;
            let scaled = (2u64.pow(missing_orders) as f64 * METHOD4_K) / (hyp_len as f64).ln();
            (1.0 / scaled) / denominator as f64
        } else {
            numerator as f64 / denominator as f64
        };
        (p > 0.0).then(|| 0.25 * p.ln())
    });
    Bleu::Score(brevity_penalty * fsum(log_terms.collect::<Vec<_>>()).exp())
}

/// Clipped n-gram matches and the hypothesis n-gram count (at least 1), unreduced.
fn modified_precision(reference: &[&str], hypothesis: &[&str], n: usize) -> (usize, usize) {
    let counts = ngram_counts(hypothesis, n);
    let reference_counts = ngram_counts(reference, n);
    let matched = counts
        .iter()
        .map(|(ngram, count)| (*count).min(reference_counts.get(ngram).copied().unwrap_or(0)))
        .sum();
    let total: usize = counts.values().sum();
    (matched, total.max(1))
}

fn ngram_counts<'a>(tokens: &'a [&'a str], n: usize) -> HashMap<&'a [&'a str], usize> {
    let mut counts = HashMap::new();
    if tokens.len() >= n {
        for window in tokens.windows(n) {
            *counts.entry(window).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_identical_strings_follow_nltk() {
        assert_eq!(function_similarity("x", "x"), Bleu::Score(1.0));
        let two = function_similarity("a b", "a b").value();
        assert!((two - 0.2214).abs() < 1e-4, "{two}");
        let three = function_similarity("a b c", "a b c").value();
        assert!((three - 0.5757).abs() < 1e-4, "{three}");
        assert_eq!(function_similarity("a b c d", "a b c d"), Bleu::Score(1.0));
    }

    #[test]
    fn no_overlap_and_empty_candidates_are_integer_zero() {
        assert_eq!(function_similarity("", "def f(): pass"), Bleu::NoOverlap);
        assert_eq!(function_similarity("x y", "a b"), Bleu::NoOverlap);
        // Both empty: the single "" token matches.
        assert_eq!(function_similarity("  ", ""), Bleu::Score(1.0));
    }

    #[test]
    fn brevity_penalty_applies_to_short_candidates() {
        let full = "fn add(a: i32, b: i32) -> i32 { a + b }";
        let half = "fn add(a: i32, b: i32)";
        let score = function_similarity(half, full).value();
        // 5 of 12 tokens, all n-grams match: BLEU = exp(1 - 12/5).
        assert!((score - (1.0f64 - 12.0 / 5.0).exp()).abs() < 1e-15, "{score}");
        assert!(function_similarity(full, half).value() < 1.0);
    }
}
