//! AVX2 kernels for Q8_0 / Q5_0 tiles: each 64-byte tile register as two halves of eight weight
//! rows, `vpmaddubsw` + `vpmaddwd` in place of `vpdpbusd`. Q8_0's unsigned bytes (≤ 255) times
//! activations (|a| ≤ 127) could saturate `vpmaddubsw`'s 16-bit pair sums, so Q8_0 is made signed
//! and multiplied as |w| · (a with w's sign). The exact integers and the float steps are lane for
//! lane those of the AVX-512 kernel.

use std::arch::x86_64::*;
use std::ops::Range;

use super::{for_each_micro_tile, BlockFormat, PackedWeights, QuantizedRows, BLOCK, TILE};

/// Computes `out[i·ld + j]` for `i` in `rows`, `j` in `cols`; `cols.start` is a multiple of
/// [`TILE`].
///
/// # Safety
/// AVX2, FMA and F16C must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile(w: &PackedWeights, x: &QuantizedRows, rows: Range<usize>, cols: Range<usize>, out: *mut f32, ld: usize) {
    for_each_micro_tile(rows, cols, 1, |i, _, t, width| {
        // SAFETY: row i and tile t are within the operands.
        unsafe {
            match w.format() {
                BlockFormat::Q8 => row_times_tile::<false>(w, x, i, t, out, ld, width),
                BlockFormat::Q5 => row_times_tile::<true>(w, x, i, t, out, ld, width),
            }
        }
    });
}

/// Half `half` (rows 8·half..) of group `g` of a tile's block as 32 unsigned bytes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn group<const Q5: bool>(block: *const u8, g: usize, half: usize) -> __m256i {
    unsafe {
        if Q5 {
            let nibbles = _mm256_loadu_si256(block.add((g / 2) * 64 + 32 * half).cast());
            let nibbles = if g.is_multiple_of(2) { nibbles } else { _mm256_srli_epi16(nibbles, 4) };
            let fifth = _mm256_loadu_si256(block.add(256 + 32 * half).cast());
            let fifth = _mm256_srl_epi16(fifth, _mm_cvtsi32_si128(g as i32));
            let fifth = _mm256_slli_epi16(_mm256_and_si256(fifth, _mm256_set1_epi8(1)), 4);
            _mm256_or_si256(_mm256_and_si256(nibbles, _mm256_set1_epi8(0x0f)), fifth)
        } else {
            _mm256_loadu_si256(block.add(g * 64 + 32 * half).cast())
        }
    }
}

/// Activation row `i` times tile `t`, written to the first `width` outputs.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn row_times_tile<const Q5: bool>(
    w: &PackedWeights,
    x: &QuantizedRows,
    i: usize,
    t: usize,
    out: *mut f32,
    ld: usize,
    width: usize,
) {
    let block_bytes = w.format().tile_block_bytes();
    let ones = _mm256_set1_epi16(1);
    let mut lanes = [0f32; TILE];
    // SAFETY: pointers start at the operands' row and tile and stay within `blocks` blocks.
    unsafe {
        let (data0, scales0) = (w.tile_data(t, 0), w.tile_scales(t, 0));
        let (xq, xd, xc) = (x.row_quants(i), x.row_scales(i), x.row_corrections(i));
        for half in 0..2 {
            let mut acc = _mm256_setzero_ps();
            for b in 0..w.blocks() {
                let data = data0.add(b * block_bytes);
                // Q5_0 products are of the unsigned bytes: start from the correction.
                let mut dot = if Q5 { _mm256_set1_epi32(*xc.add(b)) } else { _mm256_setzero_si256() };
                for g in 0..BLOCK / 4 {
                    let weights = group::<Q5>(data, g, half);
                    let four = _mm256_set1_epi32((xq.add(b * BLOCK + 4 * g) as *const i32).read_unaligned());
                    let pairs = if Q5 {
                        _mm256_maddubs_epi16(weights, four)
                    } else {
                        // The stored byte minus 128 is the signed value itself.
                        let signed = _mm256_xor_si256(weights, _mm256_set1_epi8(-128));
                        _mm256_maddubs_epi16(_mm256_sign_epi8(signed, signed), _mm256_sign_epi8(four, signed))
                    };
                    dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
                }
                let scale = _mm256_cvtph_ps(_mm_loadu_si128(scales0.add(b * TILE + 8 * half).cast()));
                let both = _mm256_mul_ps(_mm256_set1_ps(*xd.add(b)), scale);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), both, acc);
            }
            _mm256_storeu_ps(lanes.as_mut_ptr().add(8 * half), acc);
        }
        std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add(i * ld + t * TILE), width);
    }
}
