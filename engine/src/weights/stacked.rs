//! Several linear layers of one input as one product (a layer's query, key and value; an MLP's
//! gate and up): one quantization of the input and one job on the thread pool instead of one
//! each, the same values as applying the layers one by one.

use candle_core::{Tensor, D};

use super::{cpu_product, CpuWeights, Linear, LinearWeight};
use crate::kernels::{self, Isa, KQuantWeights, Q8KRows};

/// Most input rows (tokens in a step) stacked: decode steps. A prefill's products are long enough
/// that a wait per matrix costs nothing, while copying each layer's part out of the stacked
/// result would (about 3% of a 1.5B's prefill).
const MOST_STACKED_ROWS: usize = 64;

impl Linear {
    /// `layers` applied to `x` (…, in): one output (…, outᵢ) per layer, each contiguous. Our
    /// K-quant CPU kernels compute them in one product when every layer has them and `x` has at
    /// most [`MOST_STACKED_ROWS`] rows; otherwise the layers are applied one by one.
    pub fn forward_stacked(layers: &[&Linear], x: &Tensor) -> candle_core::Result<Vec<Tensor>> {
        let rows = x.elem_count() / x.dims().last().copied().unwrap_or(1).max(1);
        let stacked = if rows <= MOST_STACKED_ROWS { stacked_kquant(layers) } else { None };
        let Some((isa, weights)) = stacked else {
            return layers.iter().map(|l| l.forward(x)).collect();
        };
        let all = x.contiguous()?.apply_op1_no_bwd(&StackedMatmul { weights: &weights, isa })?;
        let mut start = 0;
        let mut outputs = Vec::with_capacity(layers.len());
        for (layer, w) in layers.iter().zip(&weights) {
            let y = all.narrow(D::Minus1, start, w.rows())?;
            start += w.rows();
            outputs.push(match &layer.bias {
                Some(b) => y.broadcast_add(b)?,
                None => y.contiguous()?,
            });
        }
        Ok(outputs)
    }
}

/// The layers' K-quant matrices and their common instruction set, when they can be stacked.
fn stacked_kquant<'a>(layers: &[&'a Linear]) -> Option<(Isa, Vec<&'a KQuantWeights>)> {
    let mut isa = None;
    let mut weights = Vec::with_capacity(layers.len());
    for layer in layers {
        let LinearWeight::Packed(w, layer_isa) = &layer.weight else { return None };
        let CpuWeights::KQuant(w) = w.as_ref() else { return None };
        if isa.is_some_and(|i| i != *layer_isa) {
            return None;
        }
        isa = Some(*layer_isa);
        weights.push(w);
    }
    kernels::stackable(&weights).then_some((isa?, weights))
}

/// `x` (…, in) f32 on the CPU times stacked K-quant matrices: (…, Σ outᵢ).
struct StackedMatmul<'a> {
    weights: &'a [&'a KQuantWeights],
    isa: Isa,
}

impl candle_core::CustomOp1 for StackedMatmul<'_> {
    fn name(&self) -> &'static str {
        "stacked-k-quant-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let rows: usize = self.weights.iter().map(|w| w.rows()).sum();
        let cols = self.weights[0].cols();
        cpu_product(storage, layout, cols, rows, |x| {
            let mut out = vec![0f32; x.len() / cols.max(1) * rows];
            kernels::matmul_kquant_stacked(self.isa, self.weights, &Q8KRows::quantize(x, cols), &mut out);
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::super::{CpuWeights, Linear, LinearWeight};
    use crate::kernels::kquant_tests::gguf_bytes;
    use crate::kernels::{Isa, KQuantFormat, KQuantWeights};

    fn packed(format: KQuantFormat, rows: usize, cols: usize, seed: u64, isa: Isa, bias: bool) -> Linear {
        let raw = gguf_bytes(format, rows, cols, &mut StdRng::seed_from_u64(seed));
        let w = KQuantWeights::from_gguf(format, rows, cols, &raw).unwrap();
        let bias = bias.then(|| Tensor::arange(0f32, rows as f32, &Device::Cpu).unwrap());
        Linear { weight: LinearWeight::Packed(std::sync::Arc::new(CpuWeights::KQuant(w)), isa), bias }
    }

    /// Stacked or one by one, with or without biases, mixed formats, several rows: the same
    /// bits; a layer that cannot be stacked (rows not whole tiles before the last) falls back.
    #[test]
    fn stacked_products_equal_the_layers_applied_one_by_one() {
        let x = Tensor::arange(0f32, 3.0 * 512.0, &Device::Cpu).unwrap().reshape((1, 3, 512)).unwrap();
        let x = ((x * 0.37).unwrap().sin().unwrap() * 2.0).unwrap();
        let long = x.repeat((1, 30, 1)).unwrap();
        for isa in Isa::supported() {
            let q = packed(KQuantFormat::Q4K, 64, 512, 1, isa, true);
            let k = packed(KQuantFormat::Q6K, 32, 512, 2, isa, false);
            let v = packed(KQuantFormat::Q4K, 40, 512, 3, isa, true);
            let odd = packed(KQuantFormat::Q4K, 24, 512, 4, isa, false);
            assert!(super::stacked_kquant(&[&q, &k, &v]).is_some() && super::stacked_kquant(&[&q, &odd]).is_some());
            assert!(super::stacked_kquant(&[&odd, &q]).is_none(), "a tile would straddle two matrices");
            let cases = [vec![&q, &k, &v], vec![&k, &q], vec![&odd, &q], vec![&q, &odd], vec![&v]];
            for (layers, x) in cases.iter().map(|l| (l, &x)).chain([(&cases[0], &long)]) {
                let stacked = Linear::forward_stacked(layers, x).unwrap();
                assert_eq!(stacked.len(), layers.len());
                for (layer, got) in layers.iter().zip(stacked) {
                    let want = layer.forward(x).unwrap();
                    assert_eq!(got.dims(), want.dims());
                    assert!(got.is_contiguous());
                    let (got, want) = (got.flatten_all().unwrap(), want.flatten_all().unwrap());
                    let (got, want) = (got.to_vec1::<f32>().unwrap(), want.to_vec1::<f32>().unwrap());
                    assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{isa:?}");
                    assert!(want.iter().any(|&v| v != 0.0));
                }
            }
        }
        assert!(super::stacked_kquant(&[]).is_none());
    }
}
