//! Ranking functions of the official builder (`rerank_utils.lexical_ranking`): BM25Okapi
//! (rank-bm25 0.2.2), TF-IDF cosine (scikit-learn defaults), Jaccard similarity, and a dense
//! cosine ranker over caller-supplied embeddings; plus the builder's tie-breaking sort.

use std::cmp::Ordering;
use std::collections::HashMap;

/// Distinct terms of `tokens` with their counts, in order of first occurrence (the order
/// of a Python dict filled while counting).
pub fn term_counts(tokens: &[u32]) -> Vec<(u32, u32)> {
    let mut counts: Vec<(u32, u32)> = Vec::new();
    let mut index: HashMap<u32, usize> = HashMap::new();
    for &t in tokens {
        match index.get(&t) {
            Some(&i) => counts[i].1 += 1,
            None => {
                index.insert(t, counts.len());
                counts.push((t, 1));
            }
        }
    }
    counts
}

/// `rank_bm25.BM25Okapi(docs).get_scores(query)` with k1 = 1.5, b = 0.75, epsilon = 0.25,
/// evaluated in rank-bm25's order so that the float64 results are identical.
/// `counts[d]` is [`term_counts`] of document `d`; `lengths[d]` its token count.
pub fn bm25(query: &[u32], counts: &[&[(u32, u32)]], lengths: &[usize]) -> Vec<f64> {
    const K1: f64 = 1.5;
    const B: f64 = 0.75;
    const EPSILON: f64 = 0.25;
    let n = counts.len();
    if n == 0 {
        return Vec::new();
    }
    // Term ids are dense per repository: plain arrays instead of Python's dicts.
    let size = vocabulary_size(counts);
    // Document frequencies, and the words in first-occurrence order (dict insertion order).
    let mut df = vec![0u32; size];
    let mut order: Vec<u32> = Vec::new();
    for doc in counts {
        for &(t, _) in *doc {
            let e = &mut df[t as usize];
            if *e == 0 {
                order.push(t);
            }
            *e += 1;
        }
    }
    let total: usize = lengths.iter().sum();
    let avgdl = total as f64 / n as f64;
    let mut idf = vec![0f64; size];
    let mut idf_sum = 0.0;
    let mut negative = Vec::new();
    for &t in &order {
        let freq = df[t as usize] as f64;
        let value = (n as f64 - freq + 0.5).ln() - (freq + 0.5).ln();
        idf[t as usize] = value;
        idf_sum += value;
        if value < 0.0 {
            negative.push(t);
        }
    }
    let eps = EPSILON * (idf_sum / order.len() as f64);
    for t in negative {
        idf[t as usize] = eps;
    }
    // Query terms with their idf, in query order (unknown words add exactly 0).
    let query: Vec<(u32, f64)> =
        query.iter().filter(|&&q| df.get(q as usize).is_some_and(|&d| d > 0)).map(|&q| (q, idf[q as usize])).collect();
    let mut tf_of = vec![0u32; size];
    counts
        .iter()
        .zip(lengths)
        .map(|(doc, &len)| {
            let norm = K1 * ((1.0 - B) + B * len as f64 / avgdl);
            doc.iter().for_each(|&(t, c)| tf_of[t as usize] = c);
            let mut score = 0.0;
            for &(q, q_idf) in &query {
                // A zero frequency adds a (signed) zero, which cannot change a sum that
                // started at +0.0, so absent terms are skipped.
                let tf = tf_of[q as usize];
                if tf > 0 {
                    let tf = tf as f64;
                    score += q_idf * (tf * (K1 + 1.0) / (tf + norm));
                }
            }
            doc.iter().for_each(|&(t, _)| tf_of[t as usize] = 0);
            score
        })
        .collect()
}

/// One more than the largest term id in the documents.
fn vocabulary_size(counts: &[&[(u32, u32)]]) -> usize {
    counts.iter().flat_map(|d| d.iter()).map(|&(t, _)| t as usize + 1).max().unwrap_or(0)
}

/// `|set(q) & set(d)| / |set(q) | set(d)|` for each document (`counts` as for [`bm25`]).
pub fn jaccard(query: &[u32], counts: &[&[(u32, u32)]]) -> Vec<f64> {
    let mut q: Vec<u32> = query.to_vec();
    q.sort_unstable();
    q.dedup();
    counts
        .iter()
        .map(|doc| {
            let inter = doc.iter().filter(|(t, _)| q.binary_search(t).is_ok()).count();
            let union = q.len() + doc.len() - inter;
            inter as f64 / union as f64
        })
        .collect()
}

/// scikit-learn `TfidfVectorizer` fitted on the documents (raw counts, smooth idf
/// `ln((1+N)/(1+df)) + 1`, l2-normalised rows) and `cosine_similarity(X, y)` with the
/// transformed query. Token ids must come from lowercased text (`lowercase=True`) and be
/// numbered in string order (scikit-learn's column order), as [`super::chunks::RepoIndex`]
/// numbers them. The first normalisation sums in first-occurrence order (scikit-learn's
/// sparse row order), the second one and the dot product in column order; BLAS blocks its
/// sums differently, so results agree with scikit-learn to within a few ulps, and identical
/// documents always get identical scores.
pub fn tfidf(query: &[u32], counts: &[&[(u32, u32)]]) -> Vec<f64> {
    let n = counts.len() as f64;
    let mut df: HashMap<u32, u32> = HashMap::new();
    for doc in counts {
        for &(t, _) in *doc {
            *df.entry(t).or_insert(0) += 1;
        }
    }
    let idf: HashMap<u32, f64> = df.iter().map(|(&t, &d)| (t, ((1.0 + n) / (1.0 + d as f64)).ln() + 1.0)).collect();
    let vector = |counts: &[(u32, u32)]| {
        let v: Vec<(u32, f64)> = counts.iter().filter_map(|&(t, c)| idf.get(&t).map(|w| (t, c as f64 * w))).collect();
        unit_twice(v)
    };
    let q = vector(&term_counts(query));
    counts
        .iter()
        .map(|doc| {
            let d = vector(doc);
            let (mut i, mut j, mut dot) = (0, 0, 0.0);
            while i < d.len() && j < q.len() {
                match d[i].0.cmp(&q[j].0) {
                    Ordering::Less => i += 1,
                    Ordering::Greater => j += 1,
                    Ordering::Equal => {
                        dot += d[i].1 * q[j].1;
                        i += 1;
                        j += 1;
                    }
                }
            }
            dot
        })
        .collect()
}

/// l2-normalises `v` (first-occurrence order), sorts it by term, and normalises it again.
fn unit_twice(mut v: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
    let scale = |v: &mut Vec<(u32, f64)>| {
        let mut sum = 0.0;
        for (_, x) in v.iter() {
            sum += x * x;
        }
        let norm = sum.sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|(_, x)| *x /= norm);
        }
    };
    scale(&mut v);
    v.sort_unstable_by_key(|(t, _)| *t);
    scale(&mut v);
    v
}

/// Cosine similarity of `query` with each document vector, as
/// `torch.nn.functional.cosine_similarity` computes it (norms clamped at 1e-8).
pub fn cosine(query: &[f32], docs: &[Vec<f32>]) -> Vec<f64> {
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt().max(1e-8);
    let qn = norm(query);
    docs.iter()
        .map(|d| {
            let dot: f64 = query.iter().zip(d).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
            dot / (qn * norm(d))
        })
        .collect()
}

/// Python's ordering of two floats where equal values (0.0 and -0.0 included) tie.
fn cmp_score(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Indices sorted as `sorted(zip(scores, keys), reverse=True)` orders them (stable for
/// equal pairs, like Python's sort with `reverse=True`).
pub fn sort_desc<K: Ord>(scores: &[f64], keys: &[K]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| cmp_score(scores[b], scores[a]).then_with(|| keys[b].cmp(&keys[a])));
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(d: &[Vec<u32>]) -> (Vec<Vec<(u32, u32)>>, Vec<usize>) {
        (d.iter().map(|t| term_counts(t)).collect(), d.iter().map(Vec::len).collect())
    }

    #[test]
    fn bm25_matches_rank_bm25() {
        // rank_bm25 0.2.2: BM25Okapi([[0,1,1],[1,2],[3]]).get_scores([1,3,9])
        let (c, l) = docs(&[vec![0, 1, 1], vec![1, 2], vec![3]]);
        let refs: Vec<&[(u32, u32)]> = c.iter().map(Vec::as_slice).collect();
        let s = bm25(&[1, 3, 9], &refs, &l);
        // idf(1) = ln(1.5) - ln(2.5) < 0 -> 0.25 * mean idf; the mean runs over 0,1,2,3.
        let idf0 = (2.5f64).ln() - (1.5f64).ln();
        let idf1 = (1.5f64).ln() - (2.5f64).ln();
        let mean = (((idf0 + idf1) + idf0) + idf0) / 4.0;
        let eps = 0.25 * mean;
        let avgdl = 6.0 / 3.0;
        let term = |idf: f64, tf: f64, dl: f64| idf * (tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * dl / avgdl)));
        assert_eq!(s[0], term(eps, 2.0, 3.0));
        assert_eq!(s[1], term(eps, 1.0, 2.0));
        assert_eq!(s[2], term(idf0, 1.0, 1.0));
    }

    #[test]
    fn bm25_repeated_query_terms_count_twice() {
        let (c, l) = docs(&[vec![0, 1], vec![2, 3], vec![4, 5]]);
        let refs: Vec<&[(u32, u32)]> = c.iter().map(Vec::as_slice).collect();
        let once = bm25(&[0], &refs, &l)[0];
        let twice = bm25(&[0, 0], &refs, &l)[0];
        assert!(once > 0.0);
        assert_eq!(twice, once + once);
    }

    #[test]
    fn jaccard_is_set_overlap() {
        let (c, _) = docs(&[vec![1, 2, 2, 3], vec![7]]);
        let refs: Vec<&[(u32, u32)]> = c.iter().map(Vec::as_slice).collect();
        assert_eq!(jaccard(&[2, 3, 4, 4], &refs), vec![2.0 / 4.0, 0.0]);
    }

    #[test]
    fn tfidf_cosine_of_identical_text_is_one() {
        let (c, _) = docs(&[vec![1, 2, 2], vec![3, 4]]);
        let refs: Vec<&[(u32, u32)]> = c.iter().map(Vec::as_slice).collect();
        let s = tfidf(&[1, 2, 2], &refs);
        assert!((s[0] - 1.0).abs() < 1e-15);
        assert_eq!(s[1], 0.0);
        assert_eq!(tfidf(&[99], &refs), vec![0.0, 0.0], "a query outside the vocabulary scores 0");
    }

    #[test]
    fn ties_break_by_key_descending() {
        let ids = ["f.py|10", "f.py|9", "a.py|0"];
        assert_eq!(sort_desc(&[1.0, 1.0, 2.0], &ids), vec![2, 1, 0], "'f.py|9' > 'f.py|10' as strings");
        assert_eq!(sort_desc(&[0.0, -0.0], &["a", "b"]), vec![1, 0], "0.0 and -0.0 tie");
    }

    #[test]
    fn cosine_of_parallel_vectors() {
        let s = cosine(&[1.0, 2.0], &[vec![2.0, 4.0], vec![-2.0, 1.0], vec![0.0, 0.0]]);
        assert!((s[0] - 1.0).abs() < 1e-12);
        assert_eq!(s[1], 0.0);
        assert_eq!(s[2], 0.0);
    }
}
