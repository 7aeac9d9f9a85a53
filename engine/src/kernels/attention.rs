//! Attention for decode steps on the CPU: a few query positions against the whole KV cache,
//! one task per (row, head) on candle's thread pool, reading the cache buffers in place.
//!
//! candle's path (batched gemm, mask add, softmax, gemm) runs each of those ops on one thread at
//! decode sizes and copies between them; at 512 cached columns it was a sixth of a 0.5B decode
//! step. Prefill keeps candle's path, where the gemms are large.

use candle_core::{DType, Storage, Tensor};

/// Most query positions per row that take this path (decode steps have one).
pub const MAX_QUERY_POSITIONS: usize = 4;

/// Softmax attention of `q` (b, heads, t, d) over `k`, `v` (b, kv_heads, columns, d) with the
/// additive `mask` (b, 1, t or 1, columns); returns (b, t, heads·d). Query heads are grouped over
/// key/value heads. `None` when the inputs are not f32 on the CPU or `t` is too large, so the
/// caller takes candle's path. `k` and `v` may be strided views (the cache's filled columns).
pub fn decode_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor) -> candle_core::Result<Option<Tensor>> {
    let all_cpu_f32 = [q, k, v, mask].iter().all(|t| t.device().is_cpu() && t.dtype() == DType::F32);
    let (b, heads, t, d) = q.dims4()?;
    if !all_cpu_f32 || t > MAX_QUERY_POSITIONS {
        return Ok(None);
    }
    let (_, kv_heads, columns, _) = k.dims4()?;
    // The mask may hold one row for all query positions (encoders).
    let mask_rows = mask.dim(2)?;
    let mask_fits = mask.dims4()? == (b, 1, mask_rows, columns) && (mask_rows == t || mask_rows == 1);
    if kv_heads == 0 || heads % kv_heads != 0 || v.dims4()? != (b, kv_heads, columns, d) || !mask_fits {
        candle_core::bail!("attention shapes do not fit: q {:?}, k {:?}, v {:?}, mask {:?}", q.dims(), k.dims(), v.dims(), mask.dims());
    }
    let group = heads / kv_heads;
    let (q, mask) = (q.contiguous()?, mask.contiguous()?);
    let (q_store, q_layout) = q.storage_and_layout();
    let (k_store, k_layout) = k.storage_and_layout();
    let (v_store, v_layout) = v.storage_and_layout();
    let (m_store, m_layout) = mask.storage_and_layout();
    let q_all = &slice(&q_store)?[q_layout.start_offset()..];
    let m_all = &slice(&m_store)?[m_layout.start_offset()..];
    let (k_all, v_all) = (&slice(&k_store)?[k_layout.start_offset()..], &slice(&v_store)?[v_layout.start_offset()..]);
    let cache_strides = |s: &[usize]| -> candle_core::Result<[usize; 3]> {
        match *s {
            [s0, s1, s2, 1] => Ok([s0, s1, s2]),
            _ => candle_core::bail!("decode attention needs the cache's head dimension contiguous, strides {s:?}"),
        }
    };
    let (ks, vs) = (cache_strides(k_layout.stride())?, cache_strides(v_layout.stride())?);
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0f32; b * t * heads * d];
    let out_ptr = super::SharedOut(out.as_mut_ptr());
    candle_core::utils::barrier_pool().execute_chunked(b * heads, |tasks| {
        let (mut scores, mut y) = (vec![0f32; columns], vec![0f32; d]);
        for task in tasks {
            let (row, head) = (task / heads, task % heads);
            let kv = head / group;
            let keys = &k_all[row * ks[0] + kv * ks[1]..];
            let values = &v_all[row * vs[0] + kv * vs[1]..];
            for pos in 0..t {
                let query = &q_all[((row * heads + head) * t + pos) * d..][..d];
                let mask_row = &m_all[(row * mask_rows + pos.min(mask_rows - 1)) * columns..][..columns];
                let mut max = f32::NEG_INFINITY;
                for (c, (s, m)) in scores.iter_mut().zip(mask_row).enumerate() {
                    // Scaled as candle's `matmul / sqrt(d)` does: a multiply by the f32 inverse.
                    *s = dot(query, &keys[c * ks[2]..][..d]) * scale as f32 + m;
                    max = max.max(*s);
                }
                let mut sum = 0f32;
                for s in scores.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                y.fill(0.0);
                for (c, s) in scores.iter().enumerate() {
                    let p = s / sum;
                    if p != 0.0 {
                        y.iter_mut().zip(&values[c * vs[2]..][..d]).for_each(|(y, v)| *y += p * v);
                    }
                }
                let at = ((row * t + pos) * heads + head) * d;
                // SAFETY: each (row, head, pos) writes its own d outputs, all < b·t·heads·d.
                unsafe { std::ptr::copy_nonoverlapping(y.as_ptr(), out_ptr.get().add(at), d) };
            }
        }
    });
    drop((q_store, k_store, v_store, m_store));
    Ok(Some(Tensor::from_vec(out, (b, t, heads * d), q.device())?))
}

/// The f32 contents of a CPU storage.
fn slice(s: &Storage) -> candle_core::Result<&[f32]> {
    match s {
        Storage::Cpu(cpu) => cpu.as_slice::<f32>(),
        _ => candle_core::bail!("decode attention reads CPU tensors only"),
    }
}

/// Dot product in eight interleaved partial sums, which the compiler keeps in vector registers.
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::decode_attention;

    /// The fused path equals candle's (`layers::attention` with the fused path bypassed) on
    /// grouped heads, masked columns and strided cache views.
    #[test]
    fn equals_candle_path() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let (b, heads, kv_heads, t, d, capacity, columns) = (3, 6, 2, 2, 24, 40, 29);
        let q = Tensor::randn(0f32, 1.0, (b, heads, t, d), &dev)?;
        let k_buf = Tensor::randn(0f32, 1.0, (b, kv_heads, capacity, d), &dev)?;
        let v_buf = Tensor::randn(0f32, 1.0, (b, kv_heads, capacity, d), &dev)?;
        let (k, v) = (k_buf.narrow(2, 0, columns)?, v_buf.narrow(2, 0, columns)?);
        // Row r has r·5 columns of left padding.
        let mask: Vec<f32> = (0..b * t * columns)
            .map(|i| if i % columns < (i / (t * columns)) * 5 { f32::NEG_INFINITY } else { 0.0 })
            .collect();
        let mask = Tensor::from_vec(mask, (b, 1, t, columns), &dev)?;
        let fused = decode_attention(&q, &k, &v, &mask)?.expect("f32 on the CPU takes the fused path");
        let reference = crate::layers::candle_attention(&q, &k.contiguous()?, &v.contiguous()?, &mask)?;
        assert_eq!(fused.dims(), reference.dims());
        let diff = (fused - reference)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        assert!(diff < 1e-5, "fused attention differs from candle's by {diff}");
        Ok(())
    }

    #[test]
    fn declines_long_queries_and_other_dtypes() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let q = Tensor::zeros((1, 2, 5, 8), candle_core::DType::F32, &dev)?;
        let k = Tensor::zeros((1, 1, 5, 8), candle_core::DType::F32, &dev)?;
        let mask = Tensor::zeros((1, 1, 5, 5), candle_core::DType::F32, &dev)?;
        assert!(decode_attention(&q, &k, &k, &mask)?.is_none());
        let half = |t: &Tensor| t.to_dtype(candle_core::DType::F16);
        let q1 = q.narrow(2, 0, 1)?;
        let m1 = mask.narrow(2, 0, 1)?;
        assert!(decode_attention(&half(&q1)?, &half(&k)?, &half(&k)?, &half(&m1)?)?.is_none());
        Ok(())
    }
}
