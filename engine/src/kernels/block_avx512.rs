//! AVX-512 (BW, VNNI) kernels for Q8_0 / Q5_0 tiles: one `vpdpbusd` multiplies 16 weight rows'
//! four unsigned values by four broadcast activations. Per block and output the exact signed dot
//! product (the unsigned one plus the activations' correction) is scaled into an f32 lane with one
//! fused multiply-add, the same operation as the AVX2 kernel's, so both give the same bits.

// The kernels index fixed-size register arrays by activation row on purpose.
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
/// AVX-512 F/BW/VNNI must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
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

/// Group `g` (values 4g..4g+4 of a block) of a tile's block as 64 unsigned bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn group<const Q5: bool>(block: *const u8, g: usize) -> __m512i {
    unsafe {
        if Q5 {
            let nibbles = _mm512_loadu_si512(block.add((g / 2) * 64).cast());
            let nibbles = if g.is_multiple_of(2) { nibbles } else { _mm512_srli_epi16(nibbles, 4) };
            let fifth = _mm512_srl_epi16(_mm512_loadu_si512(block.add(256).cast()), _mm_cvtsi32_si128(g as i32));
            let fifth = _mm512_slli_epi16(_mm512_and_si512(fifth, _mm512_set1_epi8(1)), 4);
            _mm512_or_si512(_mm512_and_si512(nibbles, _mm512_set1_epi8(0x0f)), fifth)
        } else {
            _mm512_loadu_si512(block.add(g * 64).cast())
        }
    }
}

/// `R` activation rows from `i0` times tile `t`, written to the first `width` outputs.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
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
    let mut acc = [_mm512_setzero_ps(); R];
    // SAFETY: pointers start at the operands' rows and tile and stay within `blocks` blocks.
    unsafe {
        let (data0, scales0) = (w.tile_data(t, 0), w.tile_scales(t, 0));
        let xq: [*const i8; R] = std::array::from_fn(|r| x.row_quants(i0 + r));
        let xd: [*const f32; R] = std::array::from_fn(|r| x.row_scales(i0 + r));
        let xc: [*const i32; R] = std::array::from_fn(|r| x.row_corrections(i0 + r));
        for b in 0..w.blocks() {
            let data = data0.add(b * block_bytes);
            // Even and odd groups in their own accumulators: short `vpdpbusd` chains for one row.
            let mut sums = [[_mm512_setzero_si512(); 2]; R];
            for g in 0..BLOCK / 4 {
                let weights = group::<Q5>(data, g);
                for r in 0..R {
                    let four = _mm512_set1_epi32((xq[r].add(b * BLOCK + 4 * g) as *const i32).read_unaligned());
                    sums[r][g % 2] = _mm512_dpbusd_epi32(sums[r][g % 2], weights, four);
                }
            }
            let scale = _mm512_cvtph_ps(_mm256_loadu_si256(scales0.add(b * TILE).cast()));
            for r in 0..R {
                let dot = _mm512_add_epi32(_mm512_add_epi32(sums[r][0], sums[r][1]), _mm512_set1_epi32(*xc[r].add(b)));
                let both = _mm512_mul_ps(_mm512_set1_ps(*xd[r].add(b)), scale);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), both, acc[r]);
            }
        }
        for r in 0..R {
            let mut lanes = [0f32; TILE];
            _mm512_storeu_ps(lanes.as_mut_ptr(), acc[r]);
            std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add((i0 + r) * ld + t * TILE), width);
        }
    }
}
