//! AVX-512 VNNI micro-kernels: two blocks per 512-bit register; `vpdpbusd` multiplies the
//! unsigned weight bytes by the signed activation bytes, each lane starting from its four values'
//! correction so that it holds their exact signed dot product.
//!
//! Each 32-bit lane belongs to one block of the pair; the blocks are then accumulated one after
//! the other in eight f32 lanes, exactly as the AVX2 kernel does, so both give the same bits.

// The micro-kernels index fixed-size register arrays by row and column on purpose.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use super::{BlockFormat, PackedWeights, QuantizedRows};

/// Activation rows per micro-tile.
const MR: usize = 4;
/// Weight rows per micro-tile.
const NR: usize = 4;

/// Pair `pair` of a Q8 row as 64 unsigned bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn q8_pair(row: *const u8, pair: usize) -> __m512i {
    unsafe { _mm512_loadu_si512(row.add(64 * pair).cast()) }
}

/// Pair `pair` of a Q5Pairs row as 64 unsigned bytes in register order: low nibbles, high
/// nibbles, plus 16 where the fifth-bit mask is set.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn q5_pair(row: *const u8, pair: usize) -> __m512i {
    unsafe {
        let p = row.add(40 * pair);
        let nibbles = _mm256_loadu_si256(p.cast());
        let low_mask = _mm256_set1_epi8(0x0f);
        let lo = _mm256_and_si256(nibbles, low_mask);
        let hi = _mm256_and_si256(_mm256_srli_epi16(nibbles, 4), low_mask);
        let joined = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        let fifth: __mmask64 = (p.add(32) as *const u64).read_unaligned();
        _mm512_mask_add_epi8(joined, fifth, joined, _mm512_set1_epi8(16))
    }
}

/// Computes `out[i·ld + j]` for `i` in `rows`, `j` in `cols`.
///
/// # Safety
/// AVX-512 F/BW/VL/VNNI must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn tile(
    w: &PackedWeights,
    x: &QuantizedRows,
    rows: Range<usize>,
    cols: Range<usize>,
    out: *mut f32,
    ld: usize,
) {
    unsafe {
        match w.format() {
            BlockFormat::Q8 => tile_of::<false>(w, x, rows, cols, out, ld),
            BlockFormat::Q5Pairs => tile_of::<true>(w, x, rows, cols, out, ld),
            BlockFormat::Q5 => unreachable!("AVX-512 takes Q5_0 as Q5Pairs; Linear packs it so"),
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile_of<const Q5: bool>(
    w: &PackedWeights,
    x: &QuantizedRows,
    rows: Range<usize>,
    cols: Range<usize>,
    out: *mut f32,
    ld: usize,
) {
    let mut j = cols.start;
    while j < cols.end {
        let nr = (cols.end - j).min(NR);
        let mut i = rows.start;
        while i < rows.end {
            let mr = (rows.end - i).min(MR);
            // SAFETY: i + mr ≤ rows.end and j + nr ≤ cols.end, within the operands.
            unsafe {
                match (mr, nr) {
                    (4, 4) => micro::<Q5, 4, 4>(w, x, i, j, out, ld),
                    (4, 3) => micro::<Q5, 4, 3>(w, x, i, j, out, ld),
                    (4, 2) => micro::<Q5, 4, 2>(w, x, i, j, out, ld),
                    (4, _) => micro::<Q5, 4, 1>(w, x, i, j, out, ld),
                    (3, 4) => micro::<Q5, 3, 4>(w, x, i, j, out, ld),
                    (3, 3) => micro::<Q5, 3, 3>(w, x, i, j, out, ld),
                    (3, 2) => micro::<Q5, 3, 2>(w, x, i, j, out, ld),
                    (3, _) => micro::<Q5, 3, 1>(w, x, i, j, out, ld),
                    (2, 4) => micro::<Q5, 2, 4>(w, x, i, j, out, ld),
                    (2, 3) => micro::<Q5, 2, 3>(w, x, i, j, out, ld),
                    (2, 2) => micro::<Q5, 2, 2>(w, x, i, j, out, ld),
                    (2, _) => micro::<Q5, 2, 1>(w, x, i, j, out, ld),
                    (_, 4) => micro::<Q5, 1, 4>(w, x, i, j, out, ld),
                    (_, 3) => micro::<Q5, 1, 3>(w, x, i, j, out, ld),
                    (_, 2) => micro::<Q5, 1, 2>(w, x, i, j, out, ld),
                    (_, _) => micro::<Q5, 1, 1>(w, x, i, j, out, ld),
                }
            }
            i += mr;
        }
        j += nr;
    }
}

/// `R`×`C` outputs from activation rows `i0..` and weight rows `j0..`, over the whole width.
/// Every output goes through the same instructions whatever `R` and `C` are.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn micro<const Q5: bool, const R: usize, const C: usize>(
    w: &PackedWeights,
    x: &QuantizedRows,
    i0: usize,
    j0: usize,
    out: *mut f32,
    ld: usize,
) {
    let pairs = w.padded_blocks() / 2;
    // Lanes 0–7 take element 0 of the source, lanes 8–15 element 1.
    let spread = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    // Q5Pairs lanes hold [block 0 low, block 1 low, block 0 high, block 1 high] × 4 lanes; this
    // puts each block's eight lanes together in element order, as Q8 has them.
    let block_order = _mm512_set_epi32(15, 14, 13, 12, 7, 6, 5, 4, 11, 10, 9, 8, 3, 2, 1, 0);
    let mut acc = [[_mm256_setzero_ps(); C]; R];
    let mut w_rows = [std::ptr::null::<u8>(); C];
    let mut w_scales = [std::ptr::null::<f32>(); C];
    for c in 0..C {
        w_rows[c] = w.row_data(j0 + c);
        w_scales[c] = w.row_scales(j0 + c);
    }
    let mut x_rows = [std::ptr::null::<i8>(); R];
    let mut x_scales = [std::ptr::null::<f32>(); R];
    let mut x_corr = [std::ptr::null::<i32>(); R];
    for r in 0..R {
        x_rows[r] = x.row_quants(i0 + r);
        x_scales[r] = x.row_scales(i0 + r);
        x_corr[r] = x.row_corrections(i0 + r);
    }
    // SAFETY: every pointer is a row start of the operands, read within `pairs` block pairs.
    unsafe {
        for p in 0..pairs {
            let mut wv = [_mm512_setzero_si512(); C];
            let mut ws = [_mm512_setzero_ps(); C];
            for c in 0..C {
                wv[c] = if Q5 { q5_pair(w_rows[c], p) } else { q8_pair(w_rows[c], p) };
                ws[c] = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(two_f32(w_scales[c].add(2 * p))));
            }
            for r in 0..R {
                let a = _mm512_loadu_si512(x_rows[r].add(64 * p).cast());
                let xs = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(two_f32(x_scales[r].add(2 * p))));
                let start = _mm512_loadu_si512(x_corr[r].add(16 * p).cast());
                for c in 0..C {
                    let dot = _mm512_dpbusd_epi32(start, wv[c], a);
                    let dot = if Q5 { _mm512_permutexvar_epi32(block_order, dot) } else { dot };
                    let (dot, scale) = (_mm512_cvtepi32_ps(dot), _mm512_mul_ps(xs, ws[c]));
                    // One block after the other into eight lanes: the AVX2 kernel's (and
                    // candle's and llama.cpp's AVX2) order of float operations, so results are
                    // bit-identical whichever kernel a machine runs.
                    acc[r][c] = _mm256_fmadd_ps(low_half(dot), low_half(scale), acc[r][c]);
                    acc[r][c] = _mm256_fmadd_ps(high_half(dot), high_half(scale), acc[r][c]);
                }
            }
        }
        for r in 0..R {
            for c in 0..C {
                *out.add((i0 + r) * ld + j0 + c) = super::avx2::sum8(acc[r][c]);
            }
        }
    }
}

/// Two consecutive f32 in the low half of a register.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn two_f32(p: *const f32) -> __m128 {
    unsafe { _mm_castpd_ps(_mm_load_sd(p.cast())) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn low_half(v: __m512) -> __m256 {
    _mm512_castps512_ps256(v)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn high_half(v: __m512) -> __m256 {
    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))
}
