//! The K-quant kernels against candle's dequantization and matmul, an f64 reference, and each
//! other on every instruction set this CPU has.

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QMatMul};
use candle_core::{Device, Module, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// GGUF bytes of a (rows, cols) matrix in `format` with random scales and integers.
pub(crate) fn gguf_bytes(format: KQuantFormat, rows: usize, cols: usize, rng: &mut StdRng) -> Vec<u8> {
    let mut out = Vec::new();
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    for _ in 0..rows * cols / kquant::SUPER_BLOCK {
        match format {
            KQuantFormat::Q4K => {
                out.extend_from_slice(&f16(rng.random_range(0.0005f32..0.003)));
                out.extend_from_slice(&f16(rng.random_range(0.0005f32..0.003)));
                (0..12 + 128).for_each(|_| out.push(rng.random::<u8>()));
            }
            KQuantFormat::Q6K => {
                (0..192).for_each(|_| out.push(rng.random::<u8>()));
                (0..16).for_each(|_| out.push(rng.random_range(-127i8..=127) as u8));
                out.extend_from_slice(&f16(rng.random_range(0.0002f32..0.001)));
            }
        }
    }
    out
}

fn ggml_dtype(format: KQuantFormat) -> GgmlDType {
    match format {
        KQuantFormat::Q4K => GgmlDType::Q4K,
        KQuantFormat::Q6K => GgmlDType::Q6K,
    }
}

fn activations(rows: usize, cols: usize, rng: &mut StdRng) -> Vec<f32> {
    (0..rows * cols).map(|_| rng.random_range(-3.0f32..3.0)).collect()
}

fn product(isa: Isa, w: &KQuantWeights, x: &[f32]) -> (Q8KRows, Vec<f32>) {
    let q = Q8KRows::quantize(x, w.cols());
    let mut out = vec![f32::NAN; q.rows() * w.rows()];
    matmul_kquant(isa, w, &q, &mut out);
    (q, out)
}

const FORMATS: [KQuantFormat; 2] = [KQuantFormat::Q4K, KQuantFormat::Q6K];

#[test]
fn unpacking_equals_candle_dequantization() -> candle_core::Result<()> {
    let mut rng = StdRng::seed_from_u64(11);
    let (rows, cols) = (3, 512);
    for format in FORMATS {
        let raw = gguf_bytes(format, rows, cols, &mut rng);
        let ours = KQuantWeights::from_gguf(format, rows, cols, &raw).map_err(candle_core::Error::msg)?;
        let theirs = qtensor_from_ggml(ggml_dtype(format), &raw, vec![rows, cols], &Device::Cpu)?;
        let theirs = theirs.dequantize(&Device::Cpu)?.to_vec2::<f32>()?;
        for (r, row) in theirs.iter().enumerate() {
            for (c, &value) in row.iter().enumerate() {
                assert_eq!(ours.value(r, c), value, "{format:?} ({r}, {c})");
            }
        }
    }
    Ok(())
}

#[test]
fn products_equal_reference_and_candle_on_every_isa() -> candle_core::Result<()> {
    let mut rng = StdRng::seed_from_u64(12);
    // Rows off the micro-tile sizes, more activation rows than one task.
    let (n, k) = (7, 768);
    for format in FORMATS {
        let raw = gguf_bytes(format, n, k, &mut rng);
        let w = KQuantWeights::from_gguf(format, n, k, &raw).map_err(candle_core::Error::msg)?;
        let candle_w = QMatMul::from_qtensor(qtensor_from_ggml(ggml_dtype(format), &raw, vec![n, k], &Device::Cpu)?)?;
        for m in [1, 5, 71] {
            let x = activations(m, k, &mut rng);
            let theirs = candle_w.forward(&Tensor::from_vec(x.clone(), (m, k), &Device::Cpu)?)?.to_vec2::<f32>()?;
            let mut first: Option<Vec<f32>> = None;
            for isa in Isa::supported() {
                let (q, out) = product(isa, &w, &x);
                for i in 0..m {
                    for j in 0..n {
                        let (mut exact, mut magnitude) = (0f64, 0f64);
                        for c in 0..k {
                            let term = q.value(i, c) as f64 * w.value(j, c) as f64;
                            exact += term;
                            magnitude += term.abs();
                        }
                        let got = out[i * n + j] as f64;
                        assert!((got - exact).abs() <= 1e-5 * magnitude, "{format:?} {isa:?} m={m} ({i}, {j}): {got} vs {exact}");
                        let candle = theirs[i][j] as f64;
                        assert!((got - candle).abs() <= 1e-4 * magnitude, "{format:?} {isa:?} vs candle: {got} vs {candle}");
                    }
                }
                match &first {
                    None => first = Some(out),
                    Some(earlier) => assert_eq!(earlier, &out, "{format:?}: {isa:?} differs in bits from the first ISA"),
                }
            }
        }
    }
    Ok(())
}

#[test]
fn a_row_gets_the_same_bits_alone_and_in_a_batch() {
    let mut rng = StdRng::seed_from_u64(13);
    let (n, k) = (9, 512);
    for format in FORMATS {
        let w = KQuantWeights::from_gguf(format, n, k, &gguf_bytes(format, n, k, &mut rng)).expect("valid blocks");
        let batch = activations(37, k, &mut rng);
        for isa in Isa::supported() {
            let (_, all) = product(isa, &w, &batch);
            for i in [0, 17, 36] {
                let (_, alone) = product(isa, &w, &batch[i * k..(i + 1) * k]);
                assert_eq!(alone, all[i * n..(i + 1) * n], "{format:?} {isa:?} row {i}");
            }
        }
    }
}

#[test]
fn malformed_k_quant_data_is_refused() {
    let err = KQuantWeights::from_gguf(KQuantFormat::Q4K, 2, 256, &[0u8; 100]).expect_err("short data");
    assert!(err.contains("100 bytes") && err.contains("expected 288"), "{err}");
    let err = KQuantWeights::from_gguf(KQuantFormat::Q6K, 2, 100, &[0u8; 420]).expect_err("odd width");
    assert!(err.contains("100 columns"), "{err}");
}
