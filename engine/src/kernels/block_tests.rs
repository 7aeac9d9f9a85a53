//! The kernels against an exact integer reference, on every instruction set this CPU has.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// GGUF bytes of a (rows, cols) matrix in `format` with random scales and integers.
fn gguf_bytes(format: BlockFormat, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rows * cols / BLOCK {
        let scale = half::f16::from_f32(rng.random_range(0.001f32..0.05));
        out.extend_from_slice(&scale.to_le_bytes());
        match format {
            BlockFormat::Q8 => (0..32).for_each(|_| out.push(rng.random_range(-127i8..=127) as u8)),
            BlockFormat::Q5 => (0..20).for_each(|_| out.push(rng.random::<u8>())),
        }
    }
    out
}

fn activations(rows: usize, cols: usize, rng: &mut StdRng) -> Vec<f32> {
    (0..rows * cols).map(|_| rng.random_range(-3.0f32..3.0)).collect()
}

/// Σ over blocks of scale_x · scale_w · Σ qx·qw in f64, and Σ |scale_x · scale_w · qx · qw| (what
/// f32 rounding of partial sums is relative to).
fn reference(w: &PackedWeights, x: &QuantizedRows, cols: usize) -> Vec<(f64, f64)> {
    let mut out = vec![(0f64, 0f64); x.rows() * w.rows()];
    for i in 0..x.rows() {
        for j in 0..w.rows() {
            let (mut total, mut magnitude) = (0f64, 0f64);
            for b in 0..cols / BLOCK {
                let (mut dot, mut dot_magnitude) = (0i64, 0i64);
                let (mut xs, mut ws) = (0f32, 0f32);
                for e in 0..BLOCK {
                    let (qx, sx) = x.value(i, b * BLOCK + e);
                    let (qw, sw) = w.value(j, b * BLOCK + e);
                    dot += (qx * qw) as i64;
                    dot_magnitude += (qx * qw).abs() as i64;
                    (xs, ws) = (sx, sw);
                }
                total += xs as f64 * ws as f64 * dot as f64;
                magnitude += (xs as f64 * ws as f64).abs() * dot_magnitude as f64;
            }
            out[i * w.rows() + j] = (total, magnitude);
        }
    }
    out
}

/// The formats `isa` multiplies.
fn formats(_isa: Isa) -> Vec<BlockFormat> {
    vec![BlockFormat::Q8, BlockFormat::Q5]
}

fn product(isa: Isa, w: &PackedWeights, x: &[f32], cols: usize) -> (QuantizedRows, Vec<f32>) {
    let q = QuantizedRows::quantize(x, cols, w.format());
    let mut out = vec![f32::NAN; q.rows() * w.rows()];
    matmul(isa, w, &q, &mut out);
    (q, out)
}

#[test]
fn q5_unpacking_matches_the_gguf_layout() {
    // One block: scale 1.0, element j has value j - 16 (fifth bit from the high word).
    let mut raw = half::f16::from_f32(1.0).to_le_bytes().to_vec();
    let values: Vec<u8> = (0..32u8).collect();
    let mut high = 0u32;
    for (j, v) in values.iter().enumerate() {
        high |= ((*v as u32 >> 4) & 1) << j;
    }
    raw.extend_from_slice(&high.to_le_bytes());
    for j in 0..16 {
        raw.push((values[j] & 0x0f) | ((values[j + 16] & 0x0f) << 4));
    }
    let w = PackedWeights::from_gguf(BlockFormat::Q5, 1, 32, &raw).unwrap();
    let decoded: Vec<i32> = (0..32).map(|c| w.value(0, c).0).collect();
    assert_eq!(decoded, (0..32).map(|j| j - 16).collect::<Vec<i32>>());
    assert_eq!(w.value(0, 0).1, 1.0);
    // The 15 padding rows of the tile read as zeros.
    assert!((1..16).all(|r| (0..32).all(|c| w.value(r, c) == (0, 0.0))));
}

#[test]
fn every_instruction_set_equals_the_integer_reference() {
    let isas = Isa::supported();
    if isas.is_empty() {
        eprintln!("no AVX2 on this CPU: the kernels are not used here, nothing to check");
        return;
    }
    let mut rng = StdRng::seed_from_u64(7);
    // Odd block counts (96 = 3 blocks), rows and columns off the micro-tile sizes, and more rows
    // than one task holds.
    for (m, n, cols) in [(1, 1, 32), (3, 7, 96), (5, 9, 320), (70, 13, 64), (8, 300, 128)] {
        for &isa in &isas {
            for format in formats(isa) {
                let w = PackedWeights::from_gguf(format, n, cols, &gguf_bytes(format, n, cols, &mut rng)).unwrap();
                let x = activations(m, cols, &mut rng);
                let (q, out) = product(isa, &w, &x, cols);
                let expected = reference(&w, &q, cols);
                for (k, (got, (want, magnitude))) in out.iter().zip(&expected).enumerate() {
                    let tolerance = 1e-6 * magnitude.max(1e-3);
                    assert!(
                        (*got as f64 - want).abs() <= tolerance,
                        "{isa:?} {format:?} ({m}, {n}, {cols}) element {k}: {got} vs {want} (magnitude {magnitude})"
                    );
                }
            }
        }
    }
}

#[test]
fn quantized_product_is_close_to_the_float_product() {
    let mut rng = StdRng::seed_from_u64(11);
    let (m, n, cols) = (4, 6, 256);
    let w = PackedWeights::from_gguf(BlockFormat::Q8, n, cols, &gguf_bytes(BlockFormat::Q8, n, cols, &mut rng)).unwrap();
    let x = activations(m, cols, &mut rng);
    for isa in Isa::supported() {
        let (_, out) = product(isa, &w, &x, cols);
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..cols)
                    .map(|c| {
                        let (q, s) = w.value(j, c);
                        x[i * cols + c] as f64 * q as f64 * s as f64
                    })
                    .sum();
                let scale: f64 = (0..cols).map(|c| (x[i * cols + c] as f64 * w.value(j, c).1 as f64 * 127.0).abs()).sum();
                // Activation rounding errs by at most half a step per value.
                assert!((out[i * n + j] as f64 - exact).abs() <= scale / 254.0, "{isa:?} ({i}, {j})");
            }
        }
    }
}

#[test]
fn a_row_gets_the_same_bits_alone_and_in_any_batch() {
    let mut rng = StdRng::seed_from_u64(3);
    let (n, cols) = (37, 160);
    for isa in Isa::supported() {
        for format in formats(isa) {
            let w = PackedWeights::from_gguf(format, n, cols, &gguf_bytes(format, n, cols, &mut rng)).unwrap();
            let x = activations(71, cols, &mut rng);
            let (_, batch) = product(isa, &w, &x, cols);
            for i in [0, 5, 63, 64, 70] {
                let (_, alone) = product(isa, &w, &x[i * cols..(i + 1) * cols], cols);
                let in_batch: Vec<u32> = batch[i * n..(i + 1) * n].iter().map(|v| v.to_bits()).collect();
                let single: Vec<u32> = alone.iter().map(|v| v.to_bits()).collect();
                assert_eq!(in_batch, single, "{isa:?} {format:?} row {i}");
            }
        }
    }
}

#[test]
fn malformed_weight_data_is_refused_with_the_reason() {
    let err = PackedWeights::from_gguf(BlockFormat::Q8, 2, 32, &[0u8; 10]).unwrap_err();
    assert!(err.contains("10 bytes") && err.contains("expected 68"), "{err}");
    let err = PackedWeights::from_gguf(BlockFormat::Q5, 1, 40, &[0u8; 22]).unwrap_err();
    assert!(err.contains("40 columns"), "{err}");
}

#[test]
fn avx2_and_avx512_give_the_same_bits() {
    let isas = Isa::supported();
    if !isas.contains(&Isa::Avx512Vnni) || !isas.contains(&Isa::Avx2) {
        eprintln!("this CPU lacks one of AVX2 and AVX-512 VNNI: nothing to compare");
        return;
    }
    let mut rng = StdRng::seed_from_u64(5);
    let (m, n, cols) = (9, 11, 416);
    for format in [BlockFormat::Q8, BlockFormat::Q5] {
        let w = PackedWeights::from_gguf(format, n, cols, &gguf_bytes(format, n, cols, &mut rng)).unwrap();
        let x = activations(m, cols, &mut rng);
        let (_, a) = product(Isa::Avx512Vnni, &w, &x, cols);
        let (_, b) = product(Isa::Avx2, &w, &x, cols);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b), "{format:?}");
    }
}

#[test]
fn products_equal_candles_on_matrices_candle_quantized() -> candle_core::Result<()> {
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};
    let mut rng = StdRng::seed_from_u64(17);
    for (dtype, format) in [(GgmlDType::Q8_0, BlockFormat::Q8), (GgmlDType::Q5_0, BlockFormat::Q5)] {
        for (m, n, k) in [(1, 20, 64), (5, 400, 64), (9, 33, 128)] {
            let dense = Tensor::from_vec(activations(n, k, &mut rng), (n, k), &Device::Cpu)?;
            let q = QTensor::quantize(&dense, dtype)?;
            let w = PackedWeights::from_gguf(format, n, k, &q.data()?).map_err(candle_core::Error::msg)?;
            let x = activations(m, k, &mut rng);
            let theirs = QMatMul::from_qtensor(q)?.forward(&Tensor::from_vec(x.clone(), (m, k), &Device::Cpu)?)?;
            let theirs = theirs.flatten_all()?.to_vec1::<f32>()?;
            for isa in Isa::supported() {
                let (_, ours) = product(isa, &w, &x, k);
                let spread = theirs.iter().fold(0f32, |a, v| a.max(v.abs()));
                let diff = theirs.iter().zip(&ours).fold(0f32, |a, (t, o)| a.max((t - o).abs()));
                assert!(diff <= 1e-5 * spread, "{dtype:?} {isa:?} ({m}, {n}, {k}): differs from candle by {diff} of {spread}");
            }
        }
    }
    Ok(())
}
