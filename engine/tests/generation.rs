//! Batched generation on tiny random-weight models of every architecture, in GGUF (quantized) and
//! safetensors (f32): batching, padding, the KV cache, stop rules and seeded sampling.

use codesweep_test_support::models as common;

use std::sync::{Arc, OnceLock};

use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};
use codesweep_engine::generate::batch::step_inputs;
use codesweep_engine::KvCache;
use codesweep_engine::{GenerateOptions, Generator, Model, Request, Sampling, StopReason};
use common::{Arch, ALL_ARCHS};

fn tokenizer_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| common::trained_tokenizer_json(400))
}

/// Every architecture in both formats: (label, model). The files live as long as the test process.
fn models() -> Vec<(String, Model)> {
    let dir = tempfile::tempdir().unwrap().keep();
    let mut out = Vec::new();
    for arch in ALL_ARCHS {
        let gguf = common::write_gguf(&dir, arch, GgmlDType::Q8_0, tokenizer_json());
        out.push((format!("{arch:?} gguf q8_0"), Model::load(&gguf, &Device::Cpu, None).unwrap()));
        let hf = common::write_hf(&dir, arch, tokenizer_json());
        out.push((format!("{arch:?} safetensors f32"), Model::load(&hf, &Device::Cpu, None).unwrap()));
    }
    let q5 = dir.join("q5");
    std::fs::create_dir_all(&q5).unwrap();
    let gguf = common::write_gguf(&q5, Arch::Qwen2, GgmlDType::Q5_0, tokenizer_json());
    out.push(("Qwen2 gguf q5_0".into(), Model::load(&gguf, &Device::Cpu, None).unwrap()));
    out
}

fn greedy_requests(max_new: usize) -> Vec<Request> {
    common::code_prompts().into_iter().enumerate().map(|(i, p)| Request::greedy(format!("p{i}"), p, max_new)).collect()
}

fn opts(batch_size: usize, prefill_chunk: usize) -> GenerateOptions {
    GenerateOptions { batch_size, max_tokens_in_flight: 1 << 20, prefill_chunk }
}

#[test]
fn batched_greedy_equals_one_at_a_time() {
    for (label, model) in models() {
        let requests = greedy_requests(12);
        let batched = Generator::new(&model, opts(4, 16)).generate(&requests, |_| {}).unwrap();
        assert_eq!(batched.completions.len(), requests.len());
        assert!(batched.stats.batches >= 2, "{label}: expected several batches");
        for (req, got) in requests.iter().zip(&batched.completions) {
            let alone = Generator::new(&model, opts(1, 512)).generate(std::slice::from_ref(req), |_| {}).unwrap();
            let alone = &alone.completions[0];
            assert_eq!(got.id, req.id);
            assert_eq!(got.token_ids, alone.token_ids, "{label}: request {}", req.id);
            assert_eq!(got.text, alone.text, "{label}: request {}", req.id);
            assert!(got.generated_tokens >= 1);
        }
    }
}

fn sixteen_real_prompts() -> Vec<Request> {
    common::sixteen_code_prompts().into_iter().enumerate().map(|(i, p)| Request::greedy(format!("p{i:02}"), p, 16)).collect()
}

/// The same prompt gives the same tokens and the same log-probabilities, bit for bit, alone and
/// in batches of 2, 5 and 16 (with the prefill chunk split over the rows, as the default does),
/// on the models whose products run on the engine's own kernels: quantized GGUF. (The f32
/// safetensors models multiply through candle's gemm, whose blocking follows the batch shape; for
/// them `batched_greedy_equals_one_at_a_time` checks the tokens.)
#[test]
fn greedy_output_is_independent_of_batch_composition() {
    let requests = sixteen_real_prompts();
    let chosen = |label: &str| label.contains("gguf") && !label.contains("Llama") && !label.contains("GptBigcode");
    for (label, model) in models().into_iter().filter(|(label, _)| chosen(label)) {
        let lengths: Vec<usize> = requests.iter().map(|r| model.tokenizer.encode(&r.prompt).unwrap().len()).collect();
        assert!(lengths.iter().max().unwrap() / lengths.iter().min().unwrap() >= 20, "{label}: prompt lengths {lengths:?}");
        let alone: Vec<_> = requests
            .iter()
            .map(|r| Generator::new(&model, opts(1, 512)).generate(std::slice::from_ref(r), |_| {}).unwrap().completions.remove(0))
            .collect();
        for batch in [2, 5, 16] {
            let options = GenerateOptions { batch_size: batch, ..GenerateOptions::default() };
            let together = Generator::new(&model, options).generate(&requests, |_| {}).unwrap();
            assert_eq!(together.stats.batches, 16usize.div_ceil(batch), "{label}: batch size {batch}");
            for (one, got) in alone.iter().zip(&together.completions) {
                assert_eq!(got.id, one.id);
                assert_eq!(got.token_ids, one.token_ids, "{label}: {} in batches of {batch}", one.id);
                let bits = |c: &codesweep_engine::Completion| c.token_logprobs.iter().map(|l| l.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(got), bits(one), "{label}: {} log-probabilities in batches of {batch}", one.id);
            }
        }
    }
}

/// Last-position logits of `ids` computed in one pass from an empty cache.
fn full_logits(model: &Model, ids: &[u32]) -> Vec<f32> {
    let mut cache = KvCache::new(model.config.num_layers, model.kv_cache);
    let step = step_inputs(&[ids.to_vec()], &[0], 0, model.config.windows(), DType::F32, &Device::Cpu).unwrap();
    let l = model.network.forward(&step, &mut cache).unwrap();
    l.squeeze(0).unwrap().to_vec1().unwrap()
}

/// f32 models must agree to 1e-4. Quantized GGUF matmuls also quantize each activation row to
/// 8 bits: a last-ulp difference in an attention sum can move one activation across a rounding
/// step, which shifts logits by ~1e-2. Such models get a tolerance that still catches real bugs
/// (a wrong position or mask moves logits by whole units).
fn tolerance(label: &str) -> f32 {
    if label.contains("safetensors f32") { 1e-4 } else { 0.1 }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn kv_cache_decoding_equals_full_recomputation() {
    for (label, model) in models() {
        let mut ids = model.tokenizer.encode(&common::code_prompts()[2]).unwrap();
        let mut cache = KvCache::new(model.config.num_layers, model.kv_cache);
        let step = step_inputs(&[ids.clone()], &[0], 0, model.config.windows(), DType::F32, &Device::Cpu).unwrap();
        let mut logits: Vec<f32> =
            model.network.forward(&step, &mut cache).unwrap().squeeze(0).unwrap().to_vec1().unwrap();
        for _ in 0..8 {
            let full = full_logits(&model, &ids);
            let diff = max_diff(&logits, &full);
            assert!(diff <= tolerance(&label), "{label}: incremental vs full differ by {diff} at {} tokens", ids.len());
            let next = codesweep_engine::generate::sampling::argmax(&logits) as u32;
            ids.push(next);
            let start = cache.columns();
            let step = step_inputs(&[vec![next]], &[0], start, model.config.windows(), DType::F32, &Device::Cpu).unwrap();
            logits = model.network.forward(&step, &mut cache).unwrap().squeeze(0).unwrap().to_vec1().unwrap();
        }
    }
}

#[test]
fn left_padding_does_not_change_a_sequence() {
    for (label, model) in models() {
        let prompts = common::code_prompts();
        let short = model.tokenizer.encode(&prompts[1]).unwrap();
        let long = model.tokenizer.encode(&prompts[3]).unwrap();
        assert!(long.len() > short.len() + 5);
        let pad = long.len() - short.len();
        let mut padded = vec![0u32; pad];
        padded.extend(&short);
        let mut cache = KvCache::new(model.config.num_layers, model.kv_cache);
        let step = step_inputs(&[long.clone(), padded], &[0, pad], 0, model.config.windows(), DType::F32, &Device::Cpu).unwrap();
        let both: Vec<Vec<f32>> = model.network.forward(&step, &mut cache).unwrap().to_vec2().unwrap();
        let d_short = max_diff(&both[1], &full_logits(&model, &short));
        let d_long = max_diff(&both[0], &full_logits(&model, &long));
        let tol = tolerance(&label);
        assert!(d_short <= tol && d_long <= tol, "{label}: padded {d_short}, unpadded {d_long}");
    }
}

#[test]
fn finished_sequences_leave_the_batch() {
    for (label, model) in models() {
        let prompts = common::code_prompts();
        let requests = vec![Request::greedy("short", prompts[0].clone(), 2), Request::greedy("long", prompts[1].clone(), 10)];
        let g = Generator::new(&model, opts(8, 512)).generate(&requests, |_| {}).unwrap();
        assert_eq!(g.stats.batches, 1);
        // Each decode step runs only the rows still going: Σ (generated − 1), not rows × steps.
        let expected: usize = g.completions.iter().map(|c| c.generated_tokens - 1).sum();
        assert_eq!(g.stats.decode_rows, expected, "{label}");
        let short = &g.completions[0];
        assert!(short.generated_tokens <= 2);
        if g.completions[1].generated_tokens == 10 && short.generated_tokens == 2 {
            assert_eq!(g.stats.decode_rows, 1 + 9);
        }
    }
}

#[test]
fn stop_strings_and_predicates_end_at_the_right_token() {
    let mut checked = 0;
    for (label, model) in models() {
        let prompt = common::code_prompts()[2].clone();
        let base = Generator::new(&model, opts(1, 512)).generate(&[Request::greedy("x", prompt.clone(), 24)], |_| {}).unwrap();
        let base = &base.completions[0];
        if base.stop_reason == StopReason::Eos || base.text.chars().count() < 6 {
            continue; // too short to cut; other models cover this
        }
        // Text after k tokens, to find the token at which a stop string first appears.
        let text_after = |k: usize| model.tokenizer.decode(&base.token_ids[..k]).unwrap();
        let chars: Vec<char> = base.text.chars().collect();
        let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
        let cut = base.text.find(&stop).unwrap();
        let first_k = (1..=base.token_ids.len()).find(|&k| text_after(k).contains(&stop)).unwrap();
        let mut req = Request::greedy("x", prompt.clone(), 24);
        req.stop = vec![stop.clone()];
        let got = Generator::new(&model, opts(1, 512)).generate(&[req], |_| {}).unwrap();
        let got = &got.completions[0];
        assert_eq!(got.stop_reason, StopReason::StopString, "{label}");
        assert_eq!(got.text, base.text[..cut], "{label}");
        assert_eq!(got.generated_tokens, first_k, "{label}");

        let limit = base.text.len() / 2;
        let mut req = Request::greedy("x", prompt, 24);
        req.predicate = Some(Arc::new(move |t: &str| (t.len() >= limit).then_some(limit)));
        let got = Generator::new(&model, opts(1, 512)).generate(&[req], |_| {}).unwrap();
        let got = &got.completions[0];
        let first_k = (1..=base.token_ids.len()).find(|&k| text_after(k).len() >= limit).unwrap();
        assert_eq!(got.stop_reason, StopReason::Predicate, "{label}");
        assert_eq!(got.generated_tokens, first_k, "{label}");
        // The predicate saw the text decoded after `first_k` tokens, which may end in U+FFFD
        // where a character's bytes continue in the next token: compare with that text, not
        // with the whole completion's (where those bytes make a different character).
        let seen = text_after(first_k);
        assert!(seen.starts_with(&got.text) && got.text.len() <= limit, "{label}: {:?} is no cut of {seen:?}", got.text);
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} models produced text long enough to cut");
}

#[test]
fn seeded_sampling_is_reproducible_and_batch_independent() {
    for (label, model) in models().into_iter().step_by(3) {
        let prompts = common::code_prompts();
        let sampled = |id: &str, p: &str, seed| Request {
            sampling: Sampling::Nucleus { temperature: 1.3, top_p: 0.95, seed },
            n: 3,
            ..Request::greedy(id, p, 10)
        };
        let a = sampled("a", &prompts[0], 42);
        let b = sampled("b", &prompts[3], 42);
        let alone = Generator::new(&model, opts(8, 512)).generate(std::slice::from_ref(&a), |_| {}).unwrap().completions;
        let again = Generator::new(&model, opts(8, 512)).generate(std::slice::from_ref(&a), |_| {}).unwrap().completions;
        let mixed = Generator::new(&model, opts(2, 512)).generate(&[b, a.clone()], |_| {}).unwrap().completions;
        let ids = |cs: &[codesweep_engine::Completion]| cs.iter().map(|c| c.token_ids.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&alone), ids(&again), "{label}: same seed, same samples");
        assert_eq!(ids(&alone), ids(&mixed[3..]), "{label}: batch composition must not matter");
        assert_eq!(alone.iter().map(|c| c.sample).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(alone.iter().all(|c| c.mean_logprob < 0.0 && c.mean_logprob.is_finite()));
        let other = Generator::new(&model, opts(8, 512)).generate(&[sampled("a", &prompts[0], 7)], |_| {}).unwrap().completions;
        assert_ne!(ids(&alone), ids(&other), "{label}: another seed should give other samples");
    }
}

#[test]
fn bad_requests_are_rejected_before_any_work() {
    let (_, model) = models().into_iter().next().unwrap();
    let too_long = "x ".repeat(common::MAX_POS * 2);
    let err = Generator::new(&model, opts(4, 512)).generate(&[Request::greedy("big", too_long, 4)], |_| {}).unwrap_err();
    assert!(err.to_string().contains("request `big`") && err.to_string().contains("context"), "{err}");
    let bad = Request { sampling: Sampling::Nucleus { temperature: 0.0, top_p: 0.9, seed: 1 }, ..Request::greedy("t0", "x", 4) };
    let err = Generator::new(&model, opts(4, 512)).generate(&[bad], |_| {}).unwrap_err();
    assert!(err.to_string().contains("temperature"), "{err}");
    let _ = Tensor::zeros(1, DType::F32, &Device::Cpu);
}


/// The tiny Gemma 3 as GGUF (f32, llama.cpp's names, norms with the 1 added) and as safetensors
/// (Hugging Face's names, norms stored as `w - 1`): one model, so equal logits, on a prompt longer
/// than the local window.
#[test]
fn gemma3_gguf_and_safetensors_are_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = Model::load(&common::write_gguf(dir.path(), Arch::Gemma3, GgmlDType::F32, tokenizer_json()), &Device::Cpu, None).unwrap();
    let hf = Model::load(&common::write_hf(dir.path(), Arch::Gemma3, tokenizer_json()), &Device::Cpu, None).unwrap();
    assert_eq!(gguf.config.windows(), hf.config.windows());
    assert_eq!(gguf.config.local_attention, hf.config.local_attention);
    let ids = gguf.tokenizer.encode(&common::code_prompts()[3]).unwrap();
    assert!(ids.len() > 3 * common::GEMMA_WINDOW, "{} tokens", ids.len());
    let diff = max_diff(&full_logits(&gguf, &ids), &full_logits(&hf, &ids));
    assert!(diff < 1e-4, "GGUF and safetensors differ by {diff}");
}

/// Local layers see only the last `GEMMA_WINDOW` positions: widening the window changes nothing
/// for a prompt that fits in it and changes the logits of one that does not.
#[test]
fn gemma3_local_layers_see_only_their_window() {
    let dir = tempfile::tempdir().unwrap();
    let narrow_dir = common::write_hf(dir.path(), Arch::Gemma3, tokenizer_json());
    let wide_dir = dir.path().join("wide");
    std::fs::create_dir_all(&wide_dir).unwrap();
    for f in ["model.safetensors", "tokenizer.json"] {
        std::fs::copy(narrow_dir.join(f), wide_dir.join(f)).unwrap();
    }
    let mut config: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(narrow_dir.join("config.json")).unwrap()).unwrap();
    config["sliding_window"] = serde_json::json!(4096);
    std::fs::write(wide_dir.join("config.json"), config.to_string()).unwrap();
    let (narrow, wide) = (Model::load(&narrow_dir, &Device::Cpu, None).unwrap(), Model::load(&wide_dir, &Device::Cpu, None).unwrap());
    let ids = narrow.tokenizer.encode(&common::code_prompts()[3]).unwrap();
    let fits = &ids[..common::GEMMA_WINDOW];
    assert_eq!(full_logits(&narrow, fits), full_logits(&wide, fits), "a prompt within the window");
    let diff = max_diff(&full_logits(&narrow, &ids), &full_logits(&wide, &ids));
    assert!(diff > 1e-3, "a prompt of {} tokens past a window of {}: logits differ by only {diff}", ids.len(), common::GEMMA_WINDOW);
}

/// Layers with a sliding window (Gemma 3's local ones, every StarCoder2 layer) forget keys and
/// values behind it during a long decode, two rows of different lengths in one left-padded batch:
/// every step's logits are the same bits as with a cache that keeps everything, a windowed layer
/// holds at most its window plus two growth steps of columns, and Gemma's global layer holds all.
#[test]
fn windowed_layers_forget_behind_their_window() {
    let dir = tempfile::tempdir().unwrap();
    let load = |path: std::path::PathBuf| Model::load(&path, &Device::Cpu, None).unwrap();
    let starcoder2 = dir.path().join("starcoder2");
    std::fs::create_dir_all(&starcoder2).unwrap();
    let models = [
        ("Gemma3 safetensors f32", load(common::write_hf(dir.path(), Arch::Gemma3, tokenizer_json()))),
        ("Gemma3 gguf q8_0", load(common::write_gguf(dir.path(), Arch::Gemma3, GgmlDType::Q8_0, tokenizer_json()))),
        ("Starcoder2 safetensors f32", load(common::write_hf(&starcoder2, Arch::Starcoder2, tokenizer_json()))),
    ];
    let growth = codesweep_engine::kv_cache::KV_GROWTH;
    let tokenizer = &models[0].1.tokenizer;
    let prompts = common::code_prompts();
    let long: Vec<u32> = prompts.iter().cycle().flat_map(|p| tokenizer.tokenize(p).unwrap()).take(common::MAX_POS - 8).collect();
    for (label, model) in &models {
        let windows = model.config.windows();
        let window = windows.local.or(windows.all).expect("a windowed model");
        // Long enough for the windowed layers to forget once (they wait for KV_GROWTH dead columns).
        assert!(long.len() > window + growth + 64, "{label}: {} tokens", long.len());
        let rows = [&long[7..], &long[..]];
        let (pads, prompts) = ([7, 0], [20, 27]);
        let mut forgetting = KvCache::new(model.config.num_layers, model.kv_cache);
        let mut keeping = KvCache::new(model.config.num_layers, model.kv_cache).keeping_everything();
        let mut step = (0..2).map(|r| [vec![0; pads[r]], rows[r][..prompts[r]].to_vec()].concat()).collect::<Vec<_>>();
        let mut fed = prompts;
        while fed[0] < rows[0].len() {
            let inputs = step_inputs(&step, &pads, forgetting.columns(), windows, DType::F32, &Device::Cpu).unwrap();
            let a: Vec<Vec<f32>> = model.network.forward(&inputs, &mut forgetting).unwrap().to_vec2().unwrap();
            let b: Vec<Vec<f32>> = model.network.forward(&inputs, &mut keeping).unwrap().to_vec2().unwrap();
            assert!(a == b, "{label}: logits after {fed:?} tokens differ from a cache that keeps everything");
            step = (0..2).map(|r| vec![rows[r][fed[r]]]).collect();
            fed = [fed[0] + 1, fed[1] + 1];
        }
        let columns = forgetting.columns();
        assert_eq!((columns, keeping.columns()), (rows[1].len() - 1, rows[1].len() - 1));
        let windowed = forgetting.kept_columns(0);
        assert!(windowed.start > 0 && windowed.len() <= window + 2 * growth, "{label}: a windowed layer keeps {windowed:?}");
        assert_eq!(windowed.end, columns);
        assert_eq!(keeping.kept_columns(0), 0..columns);
        if windows.local.is_some() {
            assert_eq!(forgetting.kept_columns(model.config.num_layers - 1), 0..columns, "{label}: the global layer keeps every column");
        }
        assert!(forgetting.bytes() < keeping.bytes(), "{label}: {} bytes, not fewer than {}", forgetting.bytes(), keeping.bytes());
    }
}
