//! AVX2 kernels for Q4_K / Q6_K tiles × Q8_K: each 64-byte tile register as two halves of eight
//! weight rows, `vpmaddubsw` + `vpmaddwd` in place of `vpdpbusd` (the same exact integers), and
//! the float steps of `kquant`, lane for lane those of the AVX-512 kernel.

// The kernel indexes its two register halves by number on purpose.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use super::kquant::{KQuantFormat, KQuantWeights, Q8KRows, SUPER_BLOCK};
use super::{for_each_micro_tile, TILE};

/// Computes `out[i·ld + j]` for `i` in `rows`, `j` in `cols`; `cols.start` is a multiple of
/// [`TILE`].
///
/// # Safety
/// AVX2 and FMA must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile(w: &KQuantWeights, x: &Q8KRows, rows: Range<usize>, cols: Range<usize>, out: *mut f32, ld: usize) {
    for_each_micro_tile(rows, cols, 1, |i, _, t, width| {
        // SAFETY: row i and tile t are within the operands.
        unsafe {
            match w.format() {
                KQuantFormat::Q4K => row_times_tile::<false>(w, x, i, t, out, ld, width),
                KQuantFormat::Q6K => row_times_tile::<true>(w, x, i, t, out, ld, width),
            }
        }
    });
}

/// `acc + Σ` over each lane's four byte products, unsigned `w` × signed `a` (what `vpdpbusd`
/// does; the 16-bit pair sums cannot saturate for 6-bit weights).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn dot4(acc: __m256i, w: __m256i, a: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)))
}

/// Activation row `i` times tile `t`, written to the first `width` outputs.
#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn row_times_tile<const Q6: bool>(
    w: &KQuantWeights,
    x: &Q8KRows,
    i: usize,
    t: usize,
    out: *mut f32,
    ld: usize,
    width: usize,
) {
    let format = w.format();
    let (subs, block_bytes) = (format.sub_blocks(), format.tile_block_bytes());
    let nibble = _mm256_set1_epi8(0x0f);
    let pair_bits = _mm256_set1_epi8(0x30);
    let mut acc = [_mm256_setzero_ps(); 2];
    // SAFETY: pointers start at the operands' row and tile and stay within `blocks` super-blocks.
    unsafe {
        let (data0, scales0, d0) = (w.tile_data(t, 0), w.tile_scales(t, 0), w.tile_d(t, 0));
        let (mins0, dmin0) = if Q6 { (std::ptr::null(), std::ptr::null()) } else { (w.tile_mins(t, 0), w.tile_dmin(t, 0)) };
        let (xq, xd) = (x.row_quants(i), x.row_d(i));
        let xs = if Q6 { x.row_sums16(i) } else { x.row_sums32(i) };
        let load = |p: *const u8, half: usize| _mm256_loadu_si256(p.add(32 * half).cast());
        for b in 0..w.blocks() {
            let data = data0.add(b * block_bytes);
            let scales = scales0.add(b * subs * TILE);
            for half in 0..2 {
                let mut whole = _mm256_setzero_si256();
                let mut minimums = _mm256_setzero_si256();
                for sub in 0..subs {
                    let mut dot = _mm256_setzero_si256();
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
                        let a = xq.add(b * SUPER_BLOCK + sub * 16);
                        for (g, weights) in groups.iter().enumerate() {
                            dot = dot4(dot, *weights, _mm256_set1_epi32((a.add(4 * g) as *const i32).read_unaligned()));
                        }
                    } else {
                        for j in 0..4 {
                            let packed = load(data.add((sub * 4 + j) * 64), half);
                            let a = xq.add(b * SUPER_BLOCK + sub * 32 + 4 * j);
                            let four = |p: *const i8| _mm256_set1_epi32((p as *const i32).read_unaligned());
                            dot = dot4(dot, _mm256_and_si256(packed, nibble), four(a));
                            dot = dot4(dot, _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble), four(a.add(16)));
                        }
                    }
                    let activation_sum = *xs.add(b * subs + sub);
                    if Q6 {
                        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(32 * activation_sum));
                    } else {
                        let min = _mm256_cvtepu8_epi32(_mm_loadl_epi64(mins0.add((b * 8 + sub) * TILE + 8 * half).cast()));
                        minimums = _mm256_add_epi32(minimums, _mm256_mullo_epi32(min, _mm256_set1_epi32(activation_sum)));
                    }
                    let bytes = _mm_loadl_epi64(scales.add(sub * TILE + 8 * half).cast());
                    let scale = if Q6 { _mm256_cvtepi8_epi32(bytes) } else { _mm256_cvtepu8_epi32(bytes) };
                    whole = _mm256_add_epi32(whole, _mm256_mullo_epi32(dot, scale));
                }
                let dx = _mm256_set1_ps(*xd.add(b));
                let d = _mm256_loadu_ps(d0.add(b * TILE + 8 * half));
                acc[half] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(whole), acc[half]);
                if !Q6 {
                    let dmin = _mm256_loadu_ps(dmin0.add(b * TILE + 8 * half));
                    acc[half] = _mm256_fnmadd_ps(_mm256_mul_ps(dx, dmin), _mm256_cvtepi32_ps(minimums), acc[half]);
                }
            }
        }
        let mut lanes = [0f32; TILE];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(lanes.as_mut_ptr().add(8), acc[1]);
        std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add(i * ld + t * TILE), width);
    }
}
