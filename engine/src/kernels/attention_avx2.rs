//! AVX2+FMA forms of attention's two inner loops, written with intrinsics because the compiler's
//! own vectorization of the portable loops came and went with the row count. Each lane runs the
//! same fused multiply-adds in the same order as the portable loops in `attention.rs`, so the
//! results are the same bits. Keys and values are f32 or f16 (widened exactly by F16C on load).

// Register arrays are indexed by query row on purpose.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;

use super::attention::{CacheValue, DW, NR};

/// Dot products of R queries (`queries[i]`, d values each) with NR keys laid out by dimension
/// (`keys[dim · stride..][..NR]`): per lane, one chain of fused multiply-adds over the dimension.
///
/// # Safety
/// AVX2, FMA and F16C must be present; every `queries[i]` holds `d` values and `keys` holds
/// `(d - 1) · stride + NR` values.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn score_tile<E: CacheValue, const R: usize>(
    queries: &[*const f32; R],
    keys: *const E,
    stride: usize,
    d: usize,
) -> [[f32; NR]; R] {
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for dim in 0..d {
        // SAFETY: dim < d, so the loads stay inside what the caller vouched for.
        unsafe {
            let from = keys.add(dim * stride);
            // Each dimension is its own stream (keys are transposed); fetch two tiles ahead.
            _mm_prefetch::<_MM_HINT_T0>(from.wrapping_add(2 * NR).cast());
            let (k0, k1) = (load8(from), load8(from.add(8)));
            for i in 0..R {
                let x = _mm256_broadcast_ss(&*queries[i].add(dim));
                acc[i][0] = _mm256_fmadd_ps(x, k0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(x, k1, acc[i][1]);
            }
        }
    }
    // SAFETY: the caller vouched for AVX2.
    unsafe { spill(&acc) }
}

/// `Σ_c p_i(c) · value(c)` over `columns`, in column order, for DW lanes of R rows: `p_i(c)` is
/// `probabilities[i · width + c]`, `value(c)` is `values[c · stride..][..DW]`.
///
/// # Safety
/// AVX2, FMA and F16C must be present; `probabilities` holds `(R - 1) · width + end` values and
/// `values` holds `(end - 1) · stride + DW`, for `end = columns.end`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn weighted_values<E: CacheValue, const R: usize>(
    probabilities: *const f32,
    width: usize,
    columns: std::ops::Range<usize>,
    values: *const E,
    stride: usize,
) -> [[f32; DW]; R] {
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for c in columns {
        // SAFETY: c < columns.end, within what the caller vouched for.
        unsafe {
            let value = values.add(c * stride);
            _mm_prefetch::<_MM_HINT_T0>(values.wrapping_add((c + 8) * stride).cast());
            let (v0, v1) = (load8(value), load8(value.add(8)));
            for i in 0..R {
                let p = _mm256_broadcast_ss(&*probabilities.add(i * width + c));
                acc[i][0] = _mm256_fmadd_ps(p, v0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(p, v1, acc[i][1]);
            }
        }
    }
    // SAFETY: the caller vouched for AVX2.
    unsafe { spill(&acc) }
}

/// Eight values from `p` as f32: one load, or for f16 one 16-byte load widened by `vcvtph2ps`.
///
/// # Safety
/// AVX2 and F16C must be present; `p` holds eight values.
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn load8<E: CacheValue>(p: *const E) -> __m256 {
    // SAFETY: the caller vouched for eight values at `p`.
    unsafe {
        if E::HALF {
            _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
        } else {
            _mm256_loadu_ps(p.cast())
        }
    }
}

/// R rows of two eight-lane registers as R arrays of 16 floats (`NR` = `DW` = 16).
///
/// # Safety
/// AVX2 must be present.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn spill<const R: usize>(acc: &[[__m256; 2]; R]) -> [[f32; 16]; R] {
    let mut out = [[0f32; 16]; R];
    for i in 0..R {
        // SAFETY: out[i] holds 16 values.
        unsafe {
            _mm256_storeu_ps(out[i].as_mut_ptr(), acc[i][0]);
            _mm256_storeu_ps(out[i].as_mut_ptr().add(8), acc[i][1]);
        }
    }
    out
}
