//! AVX2 kernels for Q8_0 / Q5_0 tiles: each 64-byte tile register as two halves of eight weight
//! rows, `vpmaddubsw` + `vpmaddwd` in place of `vpdpbusd`. Q8_0's unsigned bytes (≤ 255) times
//! activations (|a| ≤ 127) could saturate `vpmaddubsw`'s 16-bit pair sums, so Q8_0 is made signed
//! and multiplied as |w| · (a with w's sign). Two activation rows share each decoded weight
//! register; Q5_0's pair sums (≤ 2 · 31 · 127) are added four groups at a time in 16 bits before
//! one `vpmaddwd` widens them. The exact integers and the float steps are lane for lane those of
//! the AVX-512 kernel.

// The kernels index fixed-size register arrays by row and half on purpose.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use super::{for_each_micro_tile, BlockFormat, PackedWeights, QuantizedRows, BLOCK, TILE};

/// Activation rows per micro-tile.
const MR: usize = 2;

/// Computes `out[i·ld + j]` for `i` in `rows`, `j` in `cols`; `cols.start` is a multiple of
/// [`TILE`].
///
/// # Safety
/// AVX2, FMA and F16C must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile(w: &PackedWeights, x: &QuantizedRows, rows: Range<usize>, cols: Range<usize>, out: *mut f32, ld: usize) {
    for_each_micro_tile(rows, cols, MR, |i, run, t, width| {
        // SAFETY: rows i..i + run and tile t are within the operands.
        unsafe {
            match (w.format(), run) {
                (BlockFormat::Q8, 2) => micro::<false, 2>(w, x, i, t, out, ld, width),
                (BlockFormat::Q8, _) => micro::<false, 1>(w, x, i, t, out, ld, width),
                (BlockFormat::Q5, 2) => micro::<true, 2>(w, x, i, t, out, ld, width),
                (BlockFormat::Q5, _) => micro::<true, 1>(w, x, i, t, out, ld, width),
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
unsafe fn micro<const Q5: bool, const R: usize>(
    w: &PackedWeights,
    x: &QuantizedRows,
    i0: usize,
    t: usize,
    out: *mut f32,
    ld: usize,
    width: usize,
) {
    let block_bytes = w.format().tile_block_bytes();
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    // SAFETY: pointers start at the operands' rows and tile and stay within `blocks` blocks.
    unsafe {
        let (data0, scales0) = (w.tile_data(t, 0), w.tile_scales(t, 0));
        let xq: [*const i8; R] = std::array::from_fn(|r| x.row_quants(i0 + r));
        let xd: [*const f32; R] = std::array::from_fn(|r| x.row_scales(i0 + r));
        let xc: [*const i32; R] = std::array::from_fn(|r| x.row_corrections(i0 + r));
        for b in 0..w.blocks() {
            let data = data0.add(b * block_bytes);
            for half in 0..2 {
                // Q5_0 products are of the unsigned bytes: start from the correction.
                let mut dots: [__m256i; R] =
                    std::array::from_fn(|r| if Q5 { _mm256_set1_epi32(*xc[r].add(b)) } else { _mm256_setzero_si256() });
                if Q5 {
                    for quarter in 0..2 {
                        let weights: [__m256i; 4] = std::array::from_fn(|k| group::<true>(data, 4 * quarter + k, half));
                        for r in 0..R {
                            let a = xq[r].add(b * BLOCK + 16 * quarter);
                            let mut pairs = _mm256_maddubs_epi16(weights[0], four(a));
                            for k in 1..4 {
                                pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(weights[k], four(a.add(4 * k))));
                            }
                            dots[r] = _mm256_add_epi32(dots[r], _mm256_madd_epi16(pairs, ones));
                        }
                    }
                } else {
                    for g in 0..BLOCK / 4 {
                        // The stored byte minus 128 is the signed value itself.
                        let signed = _mm256_xor_si256(group::<false>(data, g, half), _mm256_set1_epi8(-128));
                        let magnitude = _mm256_sign_epi8(signed, signed);
                        for r in 0..R {
                            let pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(four(xq[r].add(b * BLOCK + 4 * g)), signed));
                            dots[r] = _mm256_add_epi32(dots[r], _mm256_madd_epi16(pairs, ones));
                        }
                    }
                }
                let scale = _mm256_cvtph_ps(_mm_loadu_si128(scales0.add(b * TILE + 8 * half).cast()));
                for r in 0..R {
                    let both = _mm256_mul_ps(_mm256_set1_ps(*xd[r].add(b)), scale);
                    acc[r][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[r]), both, acc[r][half]);
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
