//! Activations quantized per call: 8-bit integers per 32-value block with a scale (of f16 precision,
//! held as f32), plus the per-block correction that undoes the weights' unsigned offset.

use std::sync::Mutex;

use super::{BlockFormat, BLOCK};

/// (rows, cols) activations as blocks of signed 8-bit integers.
#[derive(Debug, Clone)]
pub struct QuantizedRows {
    rows: usize,
    cols: usize,
    format: BlockFormat,
    /// rows × cols, each in −127..=127.
    quants: Vec<i8>,
    /// rows × blocks.
    scales: Vec<f32>,
    /// rows × blocks: `−offset · Σ quants` of each block, which turns the product with the
    /// weights' unsigned bytes into the exact signed dot product.
    corrections: Vec<i32>,
}

/// Rows quantized per rayon task.
const ROWS_PER_TASK: usize = 16;

impl QuantizedRows {
    /// Quantizes `x` (rows × cols, row-major) exactly as GGUF Q8_0 does (scale = max |x| / 127,
    /// values rounded half away from zero, the scale kept at f16 precision); `format` is the
    /// weights' (it sets the correction).
    pub fn quantize(x: &[f32], cols: usize, format: BlockFormat) -> Self {
        let offset = format.offset();
        debug_assert!(cols.is_multiple_of(BLOCK));
        let rows = x.len().checked_div(cols).unwrap_or(0);
        let blocks = cols / BLOCK;
        let mut quants = vec![0i8; rows * cols];
        let mut scales = vec![0f32; rows * blocks];
        let mut corrections = vec![0i32; rows * blocks];
        let quantize_rows = |chunk: usize, q: &mut [i8], d: &mut [f32], c: &mut [i32]| {
            let first = chunk * ROWS_PER_TASK;
            for (r, ((q, d), c)) in
                q.chunks_mut(cols).zip(d.chunks_mut(blocks)).zip(c.chunks_mut(blocks)).enumerate()
            {
                let row = &x[(first + r) * cols..(first + r + 1) * cols];
                for (b, values) in row.chunks_exact(BLOCK).enumerate() {
                    let amax = values.iter().fold(0f32, |m, v| m.max(v.abs()));
                    let scale = amax / 127.0;
                    let inverse = if scale != 0.0 { 1.0 / scale } else { 0.0 };
                    for (dst, v) in q[b * BLOCK..(b + 1) * BLOCK].iter_mut().zip(values) {
                        *dst = round_half_away(v * inverse).clamp(-127, 127) as i8;
                    }
                    // Stored rounded to f16 as GGUF's Q8_0 does, so products equal llama.cpp's.
                    d[b] = half::f16::from_f32(scale).to_f32();
                }
                for (block, c) in q.chunks_exact(BLOCK).zip(c.iter_mut()) {
                    *c = -offset * block.iter().map(|&v| v as i32).sum::<i32>();
                }
            }
        };
        if rows > ROWS_PER_TASK {
            // One lock per chunk, each taken once: disjoint mutable chunks for candle's pool.
            let chunks: Vec<Mutex<_>> = quants
                .chunks_mut(ROWS_PER_TASK * cols)
                .zip(scales.chunks_mut(ROWS_PER_TASK * blocks))
                .zip(corrections.chunks_mut(ROWS_PER_TASK * blocks))
                .map(Mutex::new)
                .collect();
            candle_core::utils::barrier_pool().execute_chunked(chunks.len(), |range| {
                for chunk in range {
                    let mut guard = chunks[chunk].lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    let ((q, d), c) = &mut *guard;
                    quantize_rows(chunk, q, d, c);
                }
            });
        } else {
            quantize_rows(0, &mut quants, &mut scales, &mut corrections);
        }
        Self { rows, cols, format, quants, scales, corrections }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The weight format these rows were quantized for.
    pub fn format(&self) -> BlockFormat {
        self.format
    }

    /// Value `c` of row `r` and its block's scale (tests and reference).
    pub fn value(&self, r: usize, c: usize) -> (i32, f32) {
        (self.quants[r * self.cols + c] as i32, self.scales[r * self.cols / BLOCK + c / BLOCK])
    }

    /// Row `r`'s values.
    pub(super) fn row_quants(&self, r: usize) -> *const i8 {
        self.quants[r * self.cols..].as_ptr()
    }

    /// Row `r`'s block scales.
    pub(super) fn row_scales(&self, r: usize) -> *const f32 {
        self.scales[r * self.cols / BLOCK..].as_ptr()
    }

    /// Row `r`'s block corrections.
    pub(super) fn row_corrections(&self, r: usize) -> *const i32 {
        self.corrections[r * self.cols / BLOCK..].as_ptr()
    }
}

/// `t.round()` (half away from zero, like C's `roundf`) for |t| < 2²³, in instructions the
/// compiler can vectorize rather than a libm call: truncation and the fraction are exact.
#[inline(always)]
fn round_half_away(t: f32) -> i32 {
    let magnitude = t.abs();
    let whole = magnitude as i32;
    let rounded = whole + ((magnitude - whole as f32) >= 0.5) as i32;
    if t < 0.0 {
        -rounded
    } else {
        rounded
    }
}

#[cfg(test)]
mod tests {
    use super::round_half_away;

    #[test]
    fn rounding_equals_roundf() {
        let edges = [0.0f32, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 126.5, -126.5, 127.49999, 0.49999997, -0.49999997];
        let sweep = (-140_000..=140_000).map(|i| i as f32 / 1000.0 + 0.0005);
        for t in edges.into_iter().chain(sweep) {
            assert_eq!(round_half_away(t), t.round() as i32, "{t}");
        }
    }
}
