//! Choosing the next token: greedy or nucleus sampling, with the model's log-probability of the choice.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How to pick tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The most likely token (the lowest id among equals).
    Greedy,
    /// Nucleus sampling: temperature, then the smallest set of tokens whose probability reaches `top_p`.
    Nucleus {
        /// Softmax temperature (> 0).
        temperature: f64,
        /// Probability mass kept (0 < top_p ≤ 1).
        top_p: f64,
        /// Seed; each (request id, sample) pair derives its own stream from it.
        seed: u64,
    },
}

/// Index of the largest logit; the first one among equals (NaNs never win).
pub fn argmax(logits: &[f32]) -> usize {
    crate::kernels::math::argmax(logits)
}

/// `log softmax(logits)[token]` at temperature 1: the denominator summed in f64 from f32
/// exponentials (within ~1e-6 of the all-f64 formula; the same bits on every CPU).
pub fn log_prob(logits: &[f32], token: usize) -> f64 {
    log_probs(&[logits], &[token])[0]
}

/// [`log_prob`] of `tokens[i]` in `rows[i]` for every row, the vocabulary-wide sums spread over
/// the thread pool; each value the same bits as [`log_prob`] gives it.
pub fn log_probs<R: AsRef<[f32]>>(rows: &[R], tokens: &[usize]) -> Vec<f64> {
    let with_max: Vec<(&[f32], f32)> = rows.iter().map(|row| (row.as_ref(), crate::kernels::math::lane_max(row.as_ref()))).collect();
    let sums = crate::kernels::math::log_sum_exp_rows(&with_max);
    with_max.iter().zip(tokens).zip(sums).map(|(((row, max), &token), sum)| row[token] as f64 - *max as f64 - sum).collect()
}

/// A per-sequence random stream, the same for the same (seed, request id, sample) whatever the batch.
pub fn sequence_rng(seed: u64, request_id: &str, sample: usize) -> StdRng {
    // FNV-1a over the id, then mixed with the seed and sample index.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in request_id.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mixed = h ^ seed.rotate_left(17) ^ (sample as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    StdRng::seed_from_u64(mixed)
}

/// Samples from `softmax(logits / temperature)` restricted to the top-`top_p` nucleus.
pub fn sample_nucleus(logits: &[f32], temperature: f64, top_p: f64, rng: &mut StdRng) -> usize {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let weights: Vec<f64> = logits.iter().map(|&v| ((v as f64 - max) / temperature).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut order: Vec<usize> = (0..logits.len()).collect();
    // Descending probability, ties by id: deterministic.
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    let mut kept = 0;
    let mut mass = 0.0;
    for &i in &order {
        kept += 1;
        mass += weights[i];
        if mass / total >= top_p {
            break;
        }
    }
    let mut r = rng.random::<f64>() * mass;
    for &i in &order[..kept] {
        r -= weights[i];
        if r < 0.0 {
            return i;
        }
    }
    order[kept - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_first_of_equals() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
    }

    #[test]
    fn log_prob_matches_softmax() {
        let lp = log_prob(&[0.0, 0.0], 1);
        assert!((lp - 0.5f64.ln()).abs() < 1e-12);
        let logits = [2.0f32, -1.5, 0.25, 7.0, 3.0];
        let exact = 3.0 - logits.iter().map(|&v| (v as f64).exp()).sum::<f64>().ln();
        assert!((log_prob(&logits, 4) - exact).abs() < 1e-6);
        let rows = vec![logits.to_vec(), vec![0.0, 0.0], (0..70_000).map(|i| (i as f32 * 0.37).cos() * 5.0).collect()];
        let one_by_one: Vec<u64> = [(0, 4), (1, 1), (2, 123)].iter().map(|&(r, t)| log_prob(&rows[r], t).to_bits()).collect();
        let together: Vec<u64> = log_probs(&rows, &[4, 1, 123]).iter().map(|v| v.to_bits()).collect();
        assert_eq!(together, one_by_one);
    }

    #[test]
    fn tiny_top_p_is_greedy() {
        let mut rng = sequence_rng(1, "x", 0);
        for _ in 0..50 {
            assert_eq!(sample_nucleus(&[0.1, 2.0, 1.9], 1.0, 1e-9, &mut rng), 1);
        }
    }

    #[test]
    fn nucleus_never_leaves_the_nucleus() {
        // p ≈ [0.665, 0.245, 0.090]; top_p 0.8 keeps the first two.
        let logits = [2.0f32, 1.0, 0.0];
        let mut rng = sequence_rng(7, "req", 3);
        let mut seen = [0usize; 3];
        for _ in 0..2000 {
            seen[sample_nucleus(&logits, 1.0, 0.8, &mut rng)] += 1;
        }
        assert_eq!(seen[2], 0);
        assert!(seen[0] > seen[1] && seen[1] > 300, "{seen:?}");
    }

    #[test]
    fn streams_depend_on_id_and_sample_only() {
        let draw = |id: &str, s| sequence_rng(5, id, s).random::<u64>();
        assert_eq!(draw("a", 0), draw("a", 0));
        assert_ne!(draw("a", 0), draw("a", 1));
        assert_ne!(draw("a", 0), draw("b", 0));
    }
}
