//! AVX2 kernels for Q4_K / Q6_K tiles × Q8_K: each 64-byte tile register as two halves of eight
//! weight rows, `vpmaddubsw` + `vpmaddwd` in place of `vpdpbusd` (the same exact integers), and
//! the float steps of `kquant`, lane for lane those of the AVX-512 kernel.
//!
//! Two activation rows share each decoded weight register, and `vpmaddubsw`'s 16-bit pair sums are
//! added in 16 bits as far as they cannot overflow (|activation| ≤ 128: a Q4_K sub-block's eight
//! groups, ≤ 8 · 2 · 15 · 128 = 30,720; a Q6_K pair of groups, ≤ 2 · 2 · 63 · 128 = 32,256) before
//! one `vpmaddwd` widens them, which is llama.cpp's AVX2 shape with fewer widenings.

// The kernel indexes fixed-size register arrays by row and half on purpose.
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
/// AVX2, FMA and F16C must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx2,fma,f16c")]
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

/// Four activations broadcast to every 32-bit lane.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn four(p: *const i8) -> __m256i {
    unsafe { _mm256_set1_epi32((p as *const i32).read_unaligned()) }
}

/// `R` activation rows from `i0` times tile `t`, written to the first `width` outputs.
#[target_feature(enable = "avx2,fma,f16c")]
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
    let nibble = _mm256_set1_epi8(0x0f);
    let pair_bits = _mm256_set1_epi8(0x30);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    // SAFETY: pointers start at the operands' rows and tile and stay within `blocks` super-blocks.
    unsafe {
        let (data0, scales0, steps0) = (w.tile_data(t, 0), w.tile_scales(t, 0), w.tile_steps(t, 0));
        let mins0 = if Q6 { std::ptr::null() } else { w.tile_mins(t, 0) };
        let widen = |p: *const u16| _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
        let xq: [*const i8; R] = std::array::from_fn(|r| x.row_quants(i0 + r));
        let xd: [*const f32; R] = std::array::from_fn(|r| x.row_d(i0 + r));
        let xs: [*const i32; R] = std::array::from_fn(|r| if Q6 { x.row_sums16(i0 + r) } else { x.row_sums32(i0 + r) });
        let load = |p: *const u8, half: usize| _mm256_loadu_si256(p.add(32 * half).cast());
        for b in 0..w.blocks() {
            let data = data0.add(b * block_bytes);
            let scales = scales0.add(b * subs * TILE);
            let mut whole = [[_mm256_setzero_si256(); 2]; R];
            if R == 1 {
                prefetch_side_streams(w, t, b);
            }
            for sub in 0..subs {
                if R == 1 {
                    prefetch_data(data, format, sub..sub + 1);
                }
                for half in 0..2 {
                    // dots[r]: row r's exact dot product with this sub-block, per weight row.
                    let mut dots = [_mm256_setzero_si256(); R];
                    if Q6 {
                        let base = data.add(sub * 3 * 64);
                        let (low01, low23, high) = (load(base, half), load(base.add(64), half), load(base.add(128), half));
                        let groups = [
                            _mm256_or_si256(_mm256_and_si256(low01, nibble), _mm256_and_si256(_mm256_slli_epi16(high, 4), pair_bits)),
                            _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi16(low01, 4), nibble),
                                _mm256_and_si256(_mm256_slli_epi16(high, 2), pair_bits),
                            ),
                            _mm256_or_si256(_mm256_and_si256(low23, nibble), _mm256_and_si256(high, pair_bits)),
                            _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi16(low23, 4), nibble),
                                _mm256_and_si256(_mm256_srli_epi16(high, 2), pair_bits),
                            ),
                        ];
                        for r in 0..R {
                            let a = xq[r].add(b * SUPER_BLOCK + sub * 16);
                            let p01 = _mm256_add_epi16(_mm256_maddubs_epi16(groups[0], four(a)), _mm256_maddubs_epi16(groups[1], four(a.add(4))));
                            let p23 = _mm256_add_epi16(_mm256_maddubs_epi16(groups[2], four(a.add(8))), _mm256_maddubs_epi16(groups[3], four(a.add(12))));
                            dots[r] = _mm256_add_epi32(_mm256_madd_epi16(p01, ones), _mm256_madd_epi16(p23, ones));
                        }
                    } else {
                        let packed: [__m256i; 4] = std::array::from_fn(|j| load(data.add((sub * 4 + j) * 64), half));
                        let low: [__m256i; 4] = std::array::from_fn(|j| _mm256_and_si256(packed[j], nibble));
                        let high: [__m256i; 4] = std::array::from_fn(|j| _mm256_and_si256(_mm256_srli_epi16(packed[j], 4), nibble));
                        for r in 0..R {
                            let a = xq[r].add(b * SUPER_BLOCK + sub * 32);
                            let mut pairs = _mm256_setzero_si256();
                            for j in 0..4 {
                                pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(low[j], four(a.add(4 * j))));
                                pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(high[j], four(a.add(16 + 4 * j))));
                            }
                            dots[r] = _mm256_madd_epi16(pairs, ones);
                        }
                    }
                    let bytes = _mm_loadl_epi64(scales.add(sub * TILE + 8 * half).cast());
                    let scale = if Q6 { _mm256_cvtepi8_epi32(bytes) } else { _mm256_cvtepu8_epi32(bytes) };
                    for r in 0..R {
                        let mut dot = dots[r];
                        if Q6 {
                            // Values are stored as q + 32.
                            dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(32 * *xs[r].add(b * subs + sub)));
                        }
                        whole[r][half] = _mm256_add_epi32(whole[r][half], _mm256_mullo_epi32(dot, scale));
                    }
                }
            }
            for half in 0..2 {
                let steps = steps0.add(b * format.steps_per_block() + 8 * half);
                let d = widen(steps);
                // Q4_K's minimums: Σ over sub-blocks of min · (the sub-block's activation sum).
                let mut minimums = [_mm256_setzero_si256(); R];
                if !Q6 {
                    for sub in 0..subs {
                        let min = _mm256_cvtepu8_epi32(_mm_loadl_epi64(mins0.add((b * 8 + sub) * TILE + 8 * half).cast()));
                        for r in 0..R {
                            minimums[r] = _mm256_add_epi32(minimums[r], _mm256_mullo_epi32(min, _mm256_set1_epi32(*xs[r].add(b * subs + sub))));
                        }
                    }
                }
                for r in 0..R {
                    let dx = _mm256_set1_ps(*xd[r].add(b));
                    acc[r][half] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(whole[r][half]), acc[r][half]);
                    if !Q6 {
                        let dmin = widen(steps.add(TILE));
                        acc[r][half] = _mm256_fnmadd_ps(_mm256_mul_ps(dx, dmin), _mm256_cvtepi32_ps(minimums[r]), acc[r][half]);
                    }
                }
            }
        }
        for r in 0..R {
            let mut lanes = [0f32; TILE];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r][0]);
            _mm256_storeu_ps(lanes.as_mut_ptr().add(8), acc[r][1]);
            std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add((i0 + r) * ld + t * TILE), width);
        }
    }
}
