//! Elementwise functions in operations the compiler can vectorize and that round the same on
//! every CPU: `exp` (attention's softmax), the tanh-approximated GELU (Gemma's GeGLU), and the
//! reductions over a vocabulary's logits that sampling needs (largest entry, log-sum-exp).

use candle_core::{CpuStorage, DType, Layout, Shape, Tensor};

/// `e^x` to within ~2 ulp for `x ≤ 88`, -inf included (below -87 an exact zero; above 88, e^88):
/// Cody–Waite reduction by ln 2 (n rounded by the 1.5·2²³ trick, so 2ⁿ is built from the bits
/// without a float-to-int conversion) and Cephes' degree-6 polynomial.
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5·2²³: adding it rounds to an integer in the low bits.
    let clamped = x.clamp(-87.0, 88.0);
    let shifted = clamped.mul_add(std::f32::consts::LOG2_E, ROUND);
    let n = shifted - ROUND;
    let r = n.mul_add(-0.693_359_4, clamped);
    let r = n.mul_add(2.121_944_4e-4, r);
    let mut p = 1.987_569_1e-4f32;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 0.5); // Cephes' 5.0000001e-1, which rounds to 0.5 in f32
    let y = p.mul_add(r * r, r) + 1.0;
    // The low bits of `shifted` hold n (two's complement); n + 127 is the exponent of 2ⁿ.
    let two_to_n = f32::from_bits(shifted.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    if x < -87.0 {
        0.0
    } else {
        y * two_to_n
    }
}

/// GELU, tanh approximation: `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))` in candle's order of
/// operations, with `tanh |u| = 1 − 2 / (e^(2|u|) + 1)`.
#[inline(always)]
fn gelu_tanh_one(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x);
    let magnitude = 1.0 - 2.0 / (exp(2.0 * u.abs()) + 1.0);
    0.5 * x * (1.0 + magnitude.copysign(u))
}

fn gelu_tanh_slice(x: &[f32]) -> Vec<f32> {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the features were just detected.
        return unsafe { gelu_tanh_avx2(x) };
    }
    x.iter().map(|&v| gelu_tanh_one(v)).collect()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_tanh_avx2(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| gelu_tanh_one(v)).collect()
}

/// Index of the largest value, the first among equals; NaNs never win (0 when all are NaN).
/// The maximum is found eight lanes at a time, then its first position.
pub fn argmax(values: &[f32]) -> usize {
    let largest = lane_max(values);
    values.iter().position(|&v| v == largest).unwrap_or(0)
}

/// `ln Σ e^(v − max)` over `values`, with `max` their largest: e^x by [`exp`], summed in a fixed
/// order (see [`sum_exp_lanes`]), so the result is the same bits on every CPU. With
/// `max + log_sum_exp_shifted` this is a log-softmax denominator (the vocabulary of Gemma 3 is
/// 262,144 entries a sequence a step; libm's `exp` took ~3 % of a decode step).
pub fn log_sum_exp_shifted(values: &[f32], max: f32) -> f64 {
    log_sum_exp_rows(&[(values, max)])[0]
}

/// [`log_sum_exp_shifted`] of each `(row, its max)`, the rows' fixed parts spread over candle's
/// thread pool: a step's batch of vocabulary-wide sums no longer waits on one thread. A row's
/// parts are added in order whichever thread summed them, so its result is the same bits alone
/// or beside others.
pub fn log_sum_exp_rows(rows: &[(&[f32], f32)]) -> Vec<f64> {
    // (row, part) tasks in row order; part sums land in their own slots.
    let tasks: Vec<(usize, usize)> =
        rows.iter().enumerate().flat_map(|(r, (values, _))| (0..values.len().div_ceil(SUM_PART)).map(move |p| (r, p))).collect();
    let slots: Vec<std::sync::OnceLock<[f64; 8]>> = tasks.iter().map(|_| std::sync::OnceLock::new()).collect();
    candle_core::utils::barrier_pool().execute_chunked(tasks.len(), |range| {
        for task in range {
            let (r, p) = tasks[task];
            let (values, max) = rows[r];
            let end = ((p + 1) * SUM_PART).min(values.len());
            let lanes = sum_exp_part(&values[p * SUM_PART..end], max);
            // Each task runs once, so its slot is empty.
            let _ = slots[task].set(lanes);
        }
    });
    let parts: Vec<[f64; 8]> = slots.into_iter().map(|slot| slot.into_inner().unwrap_or_default()).collect();
    let mut first = 0;
    rows.iter()
        .map(|(values, _)| {
            let n = values.len().div_ceil(SUM_PART);
            let total = add_parts(&parts[first..first + n]);
            first += n;
            total.ln()
        })
        .collect()
}

/// Vocabulary entries per part of a log-sum-exp: a multiple of [`sum_exp_lanes`]' runs, and
/// small enough that one row gives every thread some (Gemma 3: 8 parts, Qwen2.5: 5).
const SUM_PART: usize = 32_768;

/// [`sum_exp_lanes`] of one part, compiled for AVX2 and FMA where the CPU has them (same bits).
fn sum_exp_part(values: &[f32], max: f32) -> [f64; 8] {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the features were just detected.
        return unsafe { sum_exp_avx2(values, max) };
    }
    sum_exp_lanes(values, max)
}

/// The parts' eight f64 lanes added part by part in order, then the lanes in a fixed order.
fn add_parts(parts: &[[f64; 8]]) -> f64 {
    let mut total = [0f64; 8];
    for part in parts {
        for (t, &l) in total.iter_mut().zip(part) {
            *t += l;
        }
    }
    ((total[0] + total[1]) + (total[2] + total[3])) + ((total[4] + total[5]) + (total[6] + total[7]))
}

/// The largest non-NaN value, eight lanes at a time (-inf when there is none).
pub fn lane_max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut chunks = values.chunks_exact(8);
    for chunk in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = if v > *lane { v } else { *lane };
        }
    }
    for (lane, &v) in lanes.iter_mut().zip(chunks.remainder()) {
        *lane = if v > *lane { v } else { *lane };
    }
    lanes.iter().copied().fold(f32::NEG_INFINITY, |m, v| if v > m { v } else { m })
}

/// Σ e^(v − max) in eight f64 lanes: eight f32 lanes over runs of 256 values (the form the
/// compiler vectorizes), each run's lanes then added into the f64 lanes.
#[inline(always)]
fn sum_exp_lanes(values: &[f32], max: f32) -> [f64; 8] {
    let mut total = [0f64; 8];
    for run in values.chunks(256) {
        let mut lanes = [0f32; 8];
        let mut chunks = run.chunks_exact(8);
        for chunk in &mut chunks {
            for (lane, &v) in lanes.iter_mut().zip(chunk) {
                *lane += exp(v - max);
            }
        }
        for (lane, &v) in lanes.iter_mut().zip(chunks.remainder()) {
            *lane += exp(v - max);
        }
        for (t, &l) in total.iter_mut().zip(&lanes) {
            *t += l as f64;
        }
    }
    total
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sum_exp_avx2(values: &[f32], max: f32) -> [f64; 8] {
    sum_exp_lanes(values, max)
}

struct GeluTanh;

impl candle_core::CustomOp1 for GeluTanh {
    fn name(&self) -> &'static str {
        "gelu-tanh"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(data), Some((start, end))) = (storage, layout.contiguous_offsets()) else {
            candle_core::bail!("gelu-tanh takes contiguous f32");
        };
        Ok((CpuStorage::F32(gelu_tanh_slice(&data[start..end])), layout.shape().clone()))
    }
}

/// The tanh-approximated GELU of `x`: our vectorizable form for f32 on the CPU (libm's `tanhf`
/// was ~6 % of a Gemma 3 forward pass), candle's `gelu` elsewhere.
pub fn gelu_tanh(x: &Tensor) -> candle_core::Result<Tensor> {
    if x.device().is_cpu() && x.dtype() == DType::F32 {
        x.contiguous()?.apply_op1_no_bwd(&GeluTanh)
    } else {
        x.gelu()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exp_is_close_to_libm() {
        let mut worst = 0f32;
        // From -87, where e^x is ~1.6e-38, to 88; below -87 (and at -inf) an exact zero.
        for i in 0..=1_750_000 {
            let x = 88.0 - (i as f32) / 10_000.0;
            let (ours, libm) = (super::exp(x), x.exp());
            worst = worst.max(((ours - libm) / libm).abs());
        }
        assert!(worst < 5e-7, "relative error {worst}");
        assert_eq!(super::exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(super::exp(-87.5), 0.0);
        assert_eq!(super::exp(0.0), 1.0);
    }

    /// Log-sum-exp against the f64 formula, and the same bits from the portable and AVX2 builds;
    /// argmax takes the first of equals and skips NaNs.
    #[test]
    fn vocabulary_reductions() {
        let logits: Vec<f32> = (0..262_147).map(|i| ((i as f32) * 0.618).sin() * 9.0 - (i % 7) as f32).collect();
        let max = super::lane_max(&logits);
        assert_eq!(max, logits.iter().copied().fold(f32::NEG_INFINITY, f32::max));
        let exact = logits.iter().map(|&v| (v as f64 - max as f64).exp()).sum::<f64>().ln();
        let ours = super::log_sum_exp_shifted(&logits, max);
        assert!((ours - exact).abs() < 1e-6, "{ours} vs {exact}");
        let portable: Vec<[f64; 8]> = logits.chunks(super::SUM_PART).map(|part| super::sum_exp_lanes(part, max)).collect();
        assert_eq!(super::add_parts(&portable).ln().to_bits(), ours.to_bits(), "portable and AVX2 builds differ");
        // Rows through the thread pool: each the bits it has alone, a short row and an empty one too.
        let short = &logits[..1000];
        let short_max = super::lane_max(short);
        let rows = super::log_sum_exp_rows(&[(&logits, max), (short, short_max), (&[], f32::NEG_INFINITY), (&logits, max)]);
        let alone = [ours, super::log_sum_exp_shifted(short, short_max), super::log_sum_exp_shifted(&[], f32::NEG_INFINITY), ours];
        assert_eq!(rows.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), alone.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        assert_eq!(super::argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
        let mut tied = vec![0.5f32; 37];
        tied[3] = f32::NAN;
        tied[20] = 2.0;
        tied[33] = 2.0;
        assert_eq!(super::argmax(&tied), 20);
        assert_eq!(super::argmax(&[f32::NAN, 1.0]), 1);
        assert_eq!(super::argmax(&[f32::NAN; 3]), 0);
    }

    /// Against the formula in f64 and candle's `gelu` over the range activations take: absolute
    /// errors within 1e-6 of max(1, |x|) (for x ≪ 0 the formula's `1 + tanh` cancels in f32,
    /// candle's and ours alike, so relative errors of the tiny results are not the measure).
    #[test]
    fn gelu_is_close_to_the_f64_formula() {
        let exact = |x: f64| 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh());
        let xs: Vec<f32> = (0..=400_000).map(|i| -20.0 + i as f32 / 10_000.0).collect();
        let got = super::gelu_tanh_slice(&xs);
        let candle: Vec<f32> = candle_core::Tensor::new(xs.as_slice(), &candle_core::Device::Cpu).unwrap().gelu().unwrap().to_vec1().unwrap();
        let (mut worst, mut worst_candle) = (0f64, 0f64);
        for ((&x, &y), &c) in xs.iter().zip(&got).zip(&candle) {
            let bound = (x.abs() as f64).max(1.0);
            worst = worst.max((y as f64 - exact(x as f64)).abs() / bound);
            worst_candle = worst_candle.max((y - c).abs() as f64 / bound);
        }
        assert!(worst < 1e-6 && worst_candle < 1e-6, "error {worst} against f64, {worst_candle} against candle");
        let far = super::gelu_tanh_slice(&[-200.0, 0.0, 200.0]);
        assert!(far[0] <= 0.0 && far[0] > -1e-30, "gelu(-200) = {}", far[0]);
        assert_eq!(&far[1..], &[0.0, 200.0]);
    }
}
