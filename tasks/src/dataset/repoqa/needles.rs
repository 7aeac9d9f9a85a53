//! Needle selection (`scripts/curate/needle_selection.py`): the repository is cut into equal
//! bins of characters; in each bin the first function (in table order) whose name is unique in
//! the repository and whose text is at most the length limit is a candidate; a seeded sample of
//! the candidates are the needles, in sample order.

use std::collections::{HashMap, HashSet};

use super::functions::Function;

/// Selection settings (the script's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectOptions {
    /// Bins the repository is cut into (`num_bins`, 64).
    pub bins: usize,
    /// Longest needle in bytes (`max_len`, 2000; longer functions are skipped).
    pub max_bytes: usize,
    /// Needles per repository (`max_fn_per_repo`, 10).
    pub needles: usize,
    /// Seed of the sample (the script draws with Python's unseeded `random.sample`).
    pub seed: u64,
}

impl Default for SelectOptions {
    fn default() -> Self {
        Self { bins: 64, max_bytes: 2000, needles: 10, seed: 0 }
    }
}

/// The candidates, one per bin at most, as `(path, function)` in table order.
pub fn candidates<'a>(tables: &'a [(String, Vec<Function>)], repo_chars: usize, options: &SelectOptions) -> Vec<(&'a str, &'a Function)> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for f in tables.iter().flat_map(|(_, fs)| fs) {
        *counts.entry(f.name.as_str()).or_default() += 1;
    }
    // The script divides by zero on a repository under `bins` characters; one character per bin then.
    let bin_size = (repo_chars / options.bins.max(1)).max(1);
    let mut taken: HashSet<usize> = HashSet::new();
    let mut out = Vec::new();
    for (path, functions) in tables {
        for f in functions {
            if counts[f.name.as_str()] != 1 || f.end_byte - f.start_byte > options.max_bytes {
                continue;
            }
            if taken.insert(f.global_start_byte / bin_size) {
                out.push((path.as_str(), f));
            }
        }
    }
    out
}

/// `min(needles, len)` candidates drawn without replacement with a seeded generator, in the
/// order drawn (a task's position in the context follows its index).
pub fn sample<T: Clone>(candidates: &[T], count: usize, seed: u64) -> Vec<T> {
    let mut rng = SplitMix64(seed);
    let mut pool: Vec<usize> = (0..candidates.len()).collect();
    let k = count.min(pool.len());
    for i in 0..k {
        let j = i + (rng.next() % (pool.len() - i) as u64) as usize;
        pool.swap(i, j);
    }
    pool[..k].iter().map(|&i| candidates[i].clone()).collect()
}

/// SplitMix64: a small, fixed, portable generator, so a seed picks the same needles on every
/// machine and version.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, start: usize, len: usize) -> Function {
        Function {
            name: name.into(),
            start_line: 0,
            end_line: 1,
            start_byte: start,
            end_byte: start + len,
            global_start_line: 0,
            global_end_line: 1,
            global_start_byte: start,
            global_end_byte: start + len,
            code_ratio: 0.0,
        }
    }

    #[test]
    fn one_candidate_per_bin_unique_names_and_short_bodies() {
        // 640 characters, 64 bins of 10.
        let tables = vec![
            ("a".to_string(), vec![function("dup", 0, 5), function("first", 1, 5), function("same_bin", 2, 5)]),
            ("b".to_string(), vec![function("dup", 20, 5), function("long", 30, 2001), function("edge", 41, 2000)]),
        ];
        let found: Vec<&str> = candidates(&tables, 640, &SelectOptions::default()).iter().map(|(_, f)| f.name.as_str()).collect();
        assert_eq!(found, ["first", "edge"]);
    }

    #[test]
    fn seeded_samples_are_stable_distinct_and_seed_dependent() {
        let items: Vec<usize> = (0..40).collect();
        let a = sample(&items, 10, 7);
        assert_eq!(a, sample(&items, 10, 7));
        assert_ne!(a, sample(&items, 10, 8));
        let distinct: HashSet<usize> = a.iter().copied().collect();
        assert_eq!(distinct.len(), 10);
        assert_eq!(sample(&items[..3], 10, 7).len(), 3);
    }
}
