//! Embeddings on tiny real encoders the tests write: batching and padding do not change results,
//! truncation keeps `max_length` tokens, pooling is the mean of the final hidden states of the
//! tokens, RoBERTa positions start after padding_idx, and broken directories name what is wrong.

use codesweep_test_support::models as common;

use std::path::Path;

use candle_core::{DType, Device};
use codesweep_engine::embed::{is_encoder_dir, EncoderKind};
use codesweep_engine::{Embedder, EmbedderOptions};
use common::encoder::{self as enc, EncoderArch};

fn load(dir: &Path, options: EmbedderOptions) -> Embedder {
    Embedder::load(dir, &Device::Cpu, options).unwrap()
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).flat_map(|(x, y)| { assert_eq!(x.len(), y.len()); x.iter().zip(y).map(|(p, q)| (p - q).abs()) }).fold(0.0, f32::max)
}

/// Real code of several lengths, an empty text, and texts far over the tiny models' 64 positions.
fn texts() -> Vec<String> {
    let mut t = common::code_prompts();
    t.push(String::new());
    t.push("x".into());
    t.push(common::code_corpus()[5].chars().take(2000).collect());
    t
}

fn both(dir: &Path) -> Vec<(EncoderArch, std::path::PathBuf)> {
    vec![
        (EncoderArch::Bert, enc::write_encoder(dir, EncoderArch::Bert, &enc::wordpiece_tokenizer_json(400))),
        (EncoderArch::Roberta, enc::write_encoder(dir, EncoderArch::Roberta, &enc::roberta_tokenizer_json(400))),
    ]
}

#[test]
fn batched_embeddings_equal_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for (arch, path) in both(dir.path()) {
        for normalize in [false, true] {
            let batched = load(&path, EmbedderOptions { batch_size: 4, normalize, ..Default::default() });
            let single = load(&path, EmbedderOptions { batch_size: 1, normalize, ..Default::default() });
            let a = batched.embed(&refs).unwrap();
            let b: Vec<Vec<f32>> = refs.iter().map(|t| single.embed(&[t]).unwrap().remove(0)).collect();
            assert_eq!(a.len(), refs.len());
            assert!(a.iter().all(|v| v.len() == enc::E_HIDDEN && v.iter().all(|x| x.is_finite())));
            let d = max_diff(&a, &b);
            assert!(d <= 1e-5, "{arch:?} normalize={normalize}: batched differs by {d}");
            // The vectors are not all alike (the model is doing work).
            assert!(max_diff(&a[..1], &a[1..2]) > 1e-2, "{arch:?}: different texts, same vector");
            if normalize {
                for v in &a {
                    let n: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    assert!((n - 1.0).abs() < 1e-5, "norm {n}");
                }
            }
        }
        assert!(load(&path, EmbedderOptions::default()).embed(&[]).unwrap().is_empty());
    }
}

#[test]
fn padding_does_not_change_results() {
    let dir = tempfile::tempdir().unwrap();
    for (arch, path) in both(dir.path()) {
        let e = load(&path, EmbedderOptions { batch_size: 8, ..Default::default() });
        let short = "fn main() { let x = 1; }";
        let long = common::code_corpus()[2].chars().take(600).collect::<String>();
        let alone = e.embed(&[short]).unwrap();
        // Beside a long text the short one is padded by tens of positions, in either order.
        let with_long = e.embed(&[short, &long]).unwrap();
        let long_first = e.embed(&[&long, short, short]).unwrap();
        assert!(e.token_ids(&long).unwrap().len() > 3 * e.token_ids(short).unwrap().len());
        for got in [&with_long[0], &long_first[1], &long_first[2]] {
            let d = max_diff(&alone, std::slice::from_ref(got));
            assert!(d <= 1e-5, "{arch:?}: padding changed the embedding by {d}");
        }
        assert!(max_diff(&with_long[1..], &long_first[..1]) <= 1e-5);
    }
}

#[test]
fn truncation_keeps_max_length_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let long: String = common::code_corpus()[4].chars().take(3000).collect();
    let longer = format!("{long}\nfn appended_after_the_cut() {{ unreachable!() }}");
    for (arch, path) in both(dir.path()) {
        let e = load(&path, EmbedderOptions { max_length: 16, ..Default::default() });
        assert_eq!(e.max_length(), 16);
        let ids = e.token_ids(&long).unwrap();
        assert_eq!(ids.len(), 16, "{arch:?}");
        // The special tokens survive the cut: [CLS] … [SEP] / <s> … </s>.
        let (first, last) = if arch == EncoderArch::Bert { (2, 3) } else { (0, 2) };
        assert_eq!((ids[0], ids[15]), (first, last), "{arch:?}: {ids:?}");
        let a = e.embed(&[&long, &longer]).unwrap();
        assert_eq!(a[0], a[1], "{arch:?}: text past max_length changed the embedding");
        // A short text is not cut.
        let short = e.token_ids("let x = 1;").unwrap();
        assert!(short.len() < 16);
        // The default (256) is capped at the 64 positions of the tiny models; so is a huge value.
        assert_eq!(load(&path, EmbedderOptions::default()).max_length(), enc::E_POSITIONS);
        let huge = load(&path, EmbedderOptions { max_length: 100_000, ..Default::default() });
        assert_eq!(huge.max_length(), enc::E_POSITIONS);
        assert_eq!(huge.token_ids(&long).unwrap().len(), enc::E_POSITIONS);
        huge.embed(&[&long]).unwrap();
    }
}

#[test]
fn mean_pooling_is_the_mean_of_the_final_hidden_states() {
    let dir = tempfile::tempdir().unwrap();
    for (arch, path) in both(dir.path()) {
        let text = "def area(r):\n    return 3.14 * r * r";
        let e = load(&path, EmbedderOptions::default());
        let states = e.token_states(text).unwrap();
        assert_eq!(states.len(), e.token_ids(text).unwrap().len());
        let mut mean = vec![0f64; enc::E_HIDDEN];
        for row in &states {
            for (m, x) in mean.iter_mut().zip(row) {
                *m += *x as f64 / states.len() as f64;
            }
        }
        let pooled = e.embed(&[text]).unwrap().remove(0);
        for (m, p) in mean.iter().zip(&pooled) {
            assert!((*m as f32 - p).abs() <= 1e-5, "{arch:?}: {m} vs {p}");
        }
        let norm = mean.iter().map(|x| x * x).sum::<f64>().sqrt();
        let unit = load(&path, EmbedderOptions { normalize: true, ..Default::default() }).embed(&[text]).unwrap().remove(0);
        for (m, u) in mean.iter().zip(&unit) {
            assert!(((m / norm) as f32 - u).abs() <= 1e-5, "{arch:?}: normalised {} vs {u}", m / norm);
        }
        // Padded in a batch, the hidden states of the real tokens are what pooling averaged.
        let with_pad = e.embed(&[text, &"x ".repeat(40)]).unwrap();
        assert!(max_diff(&[pooled], &with_pad[..1]) <= 1e-5);
    }
}

/// RoBERTa numbers positions from padding_idx + 1: a RoBERTa equals a BERT with the same weights
/// whose position table is the RoBERTa table without its first padding_idx + 1 rows.
#[test]
fn roberta_positions_start_after_padding_idx() {
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = enc::roberta_tokenizer_json(400);
    let vocab = enc::vocab_size(&tokenizer);
    let roberta_params = enc::encoder_parameters(EncoderArch::Roberta, vocab, 5);
    let roberta = enc::write_encoder_dir(dir.path(), "r", &enc::encoder_config(EncoderArch::Roberta, vocab), roberta_params.clone(), &tokenizer);
    let shifted: Vec<(String, candle_core::Tensor)> = roberta_params
        .into_iter()
        .map(|(n, t)| if n == "embeddings.position_embeddings.weight" { let rows = t.dim(0).unwrap(); (n, t.narrow(0, 2, rows - 2).unwrap()) } else { (n, t) })
        .collect();
    let mut bert_config = enc::encoder_config(EncoderArch::Roberta, vocab);
    bert_config["model_type"] = serde_json::json!("bert");
    bert_config["max_position_embeddings"] = serde_json::json!(enc::E_POSITIONS);
    let bert = enc::write_encoder_dir(dir.path(), "b", &bert_config, shifted, &tokenizer);
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let r = load(&roberta, EmbedderOptions { batch_size: 3, ..Default::default() });
    let b = load(&bert, EmbedderOptions { batch_size: 5, ..Default::default() });
    assert_eq!((r.config().kind, b.config().kind), (EncoderKind::Roberta, EncoderKind::Bert));
    assert_eq!(r.max_length(), b.max_length());
    let d = max_diff(&r.embed(&refs).unwrap(), &b.embed(&refs).unwrap());
    assert!(d <= 1e-5, "RoBERTa positions are not padding_idx + 1 + i: differs by {d}");
    // With the unshifted table the two would differ: the check has teeth.
    let unshifted = enc::write_encoder_dir(dir.path(), "u", &{
        let mut c = bert_config.clone();
        c["max_position_embeddings"] = serde_json::json!(enc::E_POSITIONS + 2);
        c
    }, enc::encoder_parameters(EncoderArch::Roberta, vocab, 5), &tokenizer);
    let u = load(&unshifted, EmbedderOptions::default());
    assert!(max_diff(&r.embed(&refs[..2]).unwrap(), &u.embed(&refs[..2]).unwrap()) > 1e-3);
}

#[test]
fn half_precision_is_close_to_f32() {
    let dir = tempfile::tempdir().unwrap();
    for (arch, path) in both(dir.path()) {
        let texts = common::code_prompts();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let full = load(&path, EmbedderOptions { normalize: true, ..Default::default() }).embed(&refs).unwrap();
        for dtype in [DType::F16, DType::BF16] {
            let half = load(&path, EmbedderOptions { normalize: true, dtype: Some(dtype), ..Default::default() }).embed(&refs).unwrap();
            for (f, h) in full.iter().zip(&half) {
                let cos: f32 = f.iter().zip(h).map(|(a, b)| a * b).sum();
                assert!(cos > 0.99, "{arch:?} {dtype:?}: cosine to f32 {cos}");
            }
        }
    }
}

#[test]
fn broken_directories_name_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = enc::wordpiece_tokenizer_json(300);
    let good = enc::write_encoder(dir.path(), EncoderArch::Bert, &tokenizer);
    assert!(is_encoder_dir(&good));
    let err = |path: &Path| Embedder::load(path, &Device::Cpu, EmbedderOptions::default()).unwrap_err().to_string();
    let fresh = |name: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        for f in ["config.json", "model.safetensors", "tokenizer.json"] {
            std::fs::copy(good.join(f), p.join(f)).unwrap();
        }
        p
    };
    let config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(good.join("config.json")).unwrap()).unwrap();

    let p = fresh("no-config");
    std::fs::remove_file(p.join("config.json")).unwrap();
    let e = err(&p);
    assert!(e.contains("no-config/config.json") && e.contains("No such file"), "{e}");
    assert!(!is_encoder_dir(&p));

    let p = fresh("bad-json");
    std::fs::write(p.join("config.json"), "{\"model_type\": \"bert\",").unwrap();
    let e = err(&p);
    assert!(e.contains("bad-json/config.json") && e.contains("not valid JSON"), "{e}");

    let p = fresh("no-hidden");
    let mut c = config.clone();
    c.as_object_mut().unwrap().remove("hidden_size");
    std::fs::write(p.join("config.json"), c.to_string()).unwrap();
    let e = err(&p);
    assert!(e.contains("config.json") && e.contains("`hidden_size`") && e.contains("missing"), "{e}");

    let p = fresh("decoder");
    let mut c = config.clone();
    c["model_type"] = serde_json::json!("gpt2");
    std::fs::write(p.join("config.json"), c.to_string()).unwrap();
    let e = err(&p);
    assert!(e.contains("`model_type`") && e.contains("gpt2") && e.contains("bert, roberta"), "{e}");
    assert!(!is_encoder_dir(&p));

    let p = fresh("relative");
    let mut c = config.clone();
    c["position_embedding_type"] = serde_json::json!("relative_key");
    std::fs::write(p.join("config.json"), c.to_string()).unwrap();
    assert!(err(&p).contains("position_embedding_type"));

    let p = fresh("no-weights");
    std::fs::remove_file(p.join("model.safetensors")).unwrap();
    let e = err(&p);
    assert!(e.contains("no-weights") && e.contains("no model.safetensors"), "{e}");

    let p = fresh("truncated");
    let bytes = std::fs::read(p.join("model.safetensors")).unwrap();
    std::fs::write(p.join("model.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    let e = err(&p);
    assert!(e.contains("truncated") && e.contains("cannot read safetensors"), "{e}");

    let p = fresh("missing-tensor");
    let vocab = enc::vocab_size(&tokenizer);
    let params = enc::encoder_parameters(EncoderArch::Bert, vocab, 1).into_iter().filter(|(n, _)| n != "encoder.layer.1.output.dense.bias").collect();
    enc::write_encoder_dir(dir.path(), "missing-tensor", &config, params, &tokenizer);
    let e = err(&p);
    assert!(e.contains("encoder.layer.1.output.dense.bias"), "{e}");

    let p = fresh("wrong-vocab");
    let mut c = config.clone();
    c["vocab_size"] = serde_json::json!(vocab + 7);
    std::fs::write(p.join("config.json"), c.to_string()).unwrap();
    let e = err(&p);
    assert!(e.contains("embeddings.word_embeddings.weight") && e.contains("vocab_size"), "{e}");

    let p = fresh("small-vocab");
    let mut c = config.clone();
    c["vocab_size"] = serde_json::json!(10);
    std::fs::write(p.join("config.json"), c.to_string()).unwrap();
    let e = err(&p);
    assert!(e.contains("small-vocab/tokenizer.json") && e.contains("does not belong"), "{e}");

    let p = fresh("no-tokenizer");
    std::fs::remove_file(p.join("tokenizer.json")).unwrap();
    let e = err(&p);
    assert!(e.contains("no-tokenizer/tokenizer.json"), "{e}");

    let p = fresh("bad-tokenizer");
    std::fs::write(p.join("tokenizer.json"), "{\"model\": 3}").unwrap();
    let e = err(&p);
    assert!(e.contains("bad-tokenizer/tokenizer.json") && e.contains("cannot load"), "{e}");
}
