//! AVX-512 (BW, VNNI) kernels for Q4_K / Q6_K tiles × Q8_K: one `vpdpbusd` multiplies 16 weight
//! rows' four values by four broadcast activations; the per-super-block integers and float steps
//! are those described in `kquant`.

// The kernels index fixed-size register arrays by activation row on purpose.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use super::kquant::{prefetch_data, prefetch_side_streams, KQuantFormat, KQuantWeights, Q8KRows, SUPER_BLOCK};
use super::{for_each_micro_tile, TILE};

/// Activation rows per micro-tile.
const MR: usize = 2;

/// Computes `out[i·ld + j]` for `i` in `rows`, `j` in `cols`; `cols.start` is a multiple of
/// [`TILE`].
///
/// # Safety
/// AVX-512 F/BW/VNNI must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn tile(w: &KQuantWeights, x: &Q8KRows, rows: Range<usize>, cols: Range<usize>, out: *mut f32, ld: usize) {
    for_each_micro_tile(rows, cols, MR, |i, run, t, width| {
        // SAFETY: rows i..i + run and tile t are within the operands.
        unsafe {
            match (w.format(), run) {
                (KQuantFormat::Q4K, 2) => micro::<false, 2>(w, x, i, t, out, ld, width),
                (KQuantFormat::Q4K, _) => micro::<false, 1>(w, x, i, t, out, ld, width),
                (KQuantFormat::Q6K, 2) => micro::<true, 2>(w, x, i, t, out, ld, width),
                (KQuantFormat::Q6K, _) => micro::<true, 1>(w, x, i, t, out, ld, width),
            }
        }
    });
}

/// Four activation bytes broadcast to every lane.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn four(p: *const i8) -> __m512i {
    unsafe { _mm512_set1_epi32((p as *const i32).read_unaligned()) }
}

/// `R` activation rows from `i0` times tile `t`, written to the first `width` outputs.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn micro<const Q6: bool, const R: usize>(
    w: &KQuantWeights,
    x: &Q8KRows,
    i0: usize,
    t: usize,
    out: *mut f32,
    ld: usize,
    width: usize,
) {
    let format = w.format();
    let (subs, block_bytes) = (format.sub_blocks(), format.tile_block_bytes());
    let nibble = _mm512_set1_epi8(0x0f);
    let pair_bits = _mm512_set1_epi8(0x30);
    let mut acc = [_mm512_setzero_ps(); R];
    // SAFETY: pointers start at the operands' rows and tile and stay within `blocks` super-blocks.
    unsafe {
        let (data0, scales0, steps0) = (w.tile_data(t, 0), w.tile_scales(t, 0), w.tile_steps(t, 0));
        let mins0 = if Q6 { std::ptr::null() } else { w.tile_mins(t, 0) };
        let widen = |p: *const u16| _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()));
        let xq: [*const i8; R] = std::array::from_fn(|r| x.row_quants(i0 + r));
        let xd: [*const f32; R] = std::array::from_fn(|r| x.row_d(i0 + r));
        let xs: [*const i32; R] = std::array::from_fn(|r| if Q6 { x.row_sums16(i0 + r) } else { x.row_sums32(i0 + r) });
        for b in 0..w.blocks() {
            let data = data0.add(b * block_bytes);
            let scales = scales0.add(b * subs * TILE);
            let mut whole = [_mm512_setzero_si512(); R];
            let mut minimums = [_mm512_setzero_si512(); R];
            // Two sub-blocks at a time, each in its own accumulators, so that the `vpdpbusd`
            // chains are short even for one activation row.
            if R == 1 {
                prefetch_side_streams(w, t, b);
            }
            for s in (0..subs).step_by(2) {
                if R == 1 {
                    prefetch_data(data, format, s..s + 2);
                }
                let mut sums = [[_mm512_setzero_si512(); 4]; R];
                for (k, sub) in [s, s + 1].into_iter().enumerate() {
                    if Q6 {
                        let base = data.add(sub * 3 * 64);
                        let low01 = _mm512_loadu_si512(base.cast());
                        let low23 = _mm512_loadu_si512(base.add(64).cast());
                        let high = _mm512_loadu_si512(base.add(128).cast());
                        let groups = [
                            _mm512_or_si512(_mm512_and_si512(low01, nibble), _mm512_and_si512(_mm512_slli_epi16(high, 4), pair_bits)),
                            _mm512_or_si512(
                                _mm512_and_si512(_mm512_srli_epi16(low01, 4), nibble),
                                _mm512_and_si512(_mm512_slli_epi16(high, 2), pair_bits),
                            ),
                            _mm512_or_si512(_mm512_and_si512(low23, nibble), _mm512_and_si512(high, pair_bits)),
                            _mm512_or_si512(
                                _mm512_and_si512(_mm512_srli_epi16(low23, 4), nibble),
                                _mm512_and_si512(_mm512_srli_epi16(high, 2), pair_bits),
                            ),
                        ];
                        for r in 0..R {
                            let a = xq[r].add(b * SUPER_BLOCK + sub * 16);
                            for (g, weights) in groups.iter().enumerate() {
                                sums[r][2 * k + g % 2] = _mm512_dpbusd_epi32(sums[r][2 * k + g % 2], *weights, four(a.add(4 * g)));
                            }
                        }
                    } else {
                        for j in 0..4 {
                            let packed = _mm512_loadu_si512(data.add((sub * 4 + j) * 64).cast());
                            let low = _mm512_and_si512(packed, nibble);
                            let high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
                            for r in 0..R {
                                let a = xq[r].add(b * SUPER_BLOCK + sub * 32 + 4 * j);
                                sums[r][2 * k] = _mm512_dpbusd_epi32(sums[r][2 * k], low, four(a));
                                sums[r][2 * k + 1] = _mm512_dpbusd_epi32(sums[r][2 * k + 1], high, four(a.add(16)));
                            }
                        }
                    }
                }
                for (k, sub) in [s, s + 1].into_iter().enumerate() {
                    let bytes = _mm_loadu_si128(scales.add(sub * TILE).cast());
                    let scale = if Q6 { _mm512_cvtepi8_epi32(bytes) } else { _mm512_cvtepu8_epi32(bytes) };
                    for r in 0..R {
                        let mut dot = _mm512_add_epi32(sums[r][2 * k], sums[r][2 * k + 1]);
                        let activation_sum = *xs[r].add(b * subs + sub);
                        if Q6 {
                            // Values are stored as q + 32.
                            dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(32 * activation_sum));
                        } else {
                            let min = _mm512_cvtepu8_epi32(_mm_loadu_si128(mins0.add((b * 8 + sub) * TILE).cast()));
                            minimums[r] = _mm512_add_epi32(minimums[r], _mm512_mullo_epi32(min, _mm512_set1_epi32(activation_sum)));
                        }
                        whole[r] = _mm512_add_epi32(whole[r], _mm512_mullo_epi32(dot, scale));
                    }
                }
            }
            let steps = steps0.add(b * format.steps_per_block());
            let d = widen(steps);
            for r in 0..R {
                let dx = _mm512_set1_ps(*xd[r].add(b));
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(whole[r]), acc[r]);
                if !Q6 {
                    let dmin = widen(steps.add(TILE));
                    acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(dx, dmin), _mm512_cvtepi32_ps(minimums[r]), acc[r]);
                }
            }
        }
        for r in 0..R {
            let mut lanes = [0f32; TILE];
            _mm512_storeu_ps(lanes.as_mut_ptr(), acc[r]);
            std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add((i0 + r) * ld + t * TILE), width);
        }
    }
}
