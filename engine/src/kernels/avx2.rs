//! AVX2 micro-kernels: one block per 256-bit register. `vpmaddubsw` needs one unsigned operand,
//! so weights are made signed and the product is |w| · (a with w's sign), as 16-bit pair sums that
//! cannot overflow (|w|, |a| ≤ 127), then widened to 32 bits.

// The micro-kernels index fixed-size register arrays by row and column on purpose.
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use super::{BlockFormat, PackedWeights, QuantizedRows};

/// Activation rows per micro-tile.
const MR: usize = 4;
/// Weight rows per micro-tile (AVX2 has 16 vector registers).
const NR: usize = 2;

/// Block `b` of a Q8 row as 32 signed bytes.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn q8_block(row: *const u8, b: usize) -> __m256i {
    unsafe { _mm256_xor_si256(_mm256_loadu_si256(row.add(32 * b).cast()), _mm256_set1_epi8(-128)) }
}

/// Block `b` of a Q5 row as 32 signed bytes in −16..=15.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn q5_block(row: *const u8, b: usize) -> __m256i {
    unsafe {
        let p = row.add(20 * b);
        let nibbles = _mm_loadu_si128(p.cast());
        let low_mask = _mm_set1_epi8(0x0f);
        let lo = _mm_and_si128(nibbles, low_mask);
        let hi = _mm_and_si128(_mm_srli_epi16(nibbles, 4), low_mask);
        let high_bits = (p.add(16) as *const u32).read_unaligned() as i32;
        // Byte k gets byte k/8 of the high bits, then is tested against bit k%8.
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(high_bits),
            _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
            ),
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        let fifth = _mm256_and_si256(set, _mm256_set1_epi8(0x10));
        let unsigned = _mm256_or_si256(_mm256_set_m128i(hi, lo), fifth);
        _mm256_sub_epi8(unsigned, _mm256_set1_epi8(16))
    }
}

/// Computes `out[i·ld + j]` for `i` in `rows`, `j` in `cols`.
///
/// # Safety
/// AVX2 and FMA must be present; `out` valid for those writes; ranges within the operands.
#[target_feature(enable = "avx2,fma")]
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
            BlockFormat::Q5 => tile_of::<true>(w, x, rows, cols, out, ld),
            BlockFormat::Q5Pairs => unreachable!("Q5Pairs is packed for AVX-512 only"),
        }
    }
}

#[target_feature(enable = "avx2,fma")]
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
                    (4, 2) => micro::<Q5, 4, 2>(w, x, i, j, out, ld),
                    (4, _) => micro::<Q5, 4, 1>(w, x, i, j, out, ld),
                    (3, 2) => micro::<Q5, 3, 2>(w, x, i, j, out, ld),
                    (3, _) => micro::<Q5, 3, 1>(w, x, i, j, out, ld),
                    (2, 2) => micro::<Q5, 2, 2>(w, x, i, j, out, ld),
                    (2, _) => micro::<Q5, 2, 1>(w, x, i, j, out, ld),
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
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn micro<const Q5: bool, const R: usize, const C: usize>(
    w: &PackedWeights,
    x: &QuantizedRows,
    i0: usize,
    j0: usize,
    out: *mut f32,
    ld: usize,
) {
    let blocks = w.padded_blocks();
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); C]; R];
    let mut w_rows = [std::ptr::null::<u8>(); C];
    let mut w_scales = [std::ptr::null::<f32>(); C];
    for c in 0..C {
        w_rows[c] = w.row_data(j0 + c);
        w_scales[c] = w.row_scales(j0 + c);
    }
    let mut x_rows = [std::ptr::null::<i8>(); R];
    let mut x_scales = [std::ptr::null::<f32>(); R];
    for r in 0..R {
        x_rows[r] = x.row_quants(i0 + r);
        x_scales[r] = x.row_scales(i0 + r);
    }
    // SAFETY: every pointer is a row start of the operands, read within `blocks` blocks.
    unsafe {
        for b in 0..blocks {
            let mut signed = [_mm256_setzero_si256(); C];
            let mut magnitude = [_mm256_setzero_si256(); C];
            let mut ws = [0f32; C];
            for c in 0..C {
                signed[c] = if Q5 { q5_block(w_rows[c], b) } else { q8_block(w_rows[c], b) };
                magnitude[c] = _mm256_sign_epi8(signed[c], signed[c]);
                ws[c] = *w_scales[c].add(b);
            }
            for r in 0..R {
                let a = _mm256_loadu_si256(x_rows[r].add(32 * b).cast());
                let xs = *x_scales[r].add(b);
                for c in 0..C {
                    let pairs = _mm256_maddubs_epi16(magnitude[c], _mm256_sign_epi8(a, signed[c]));
                    let dot = _mm256_madd_epi16(pairs, ones);
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(xs * ws[c]), acc[r][c]);
                }
            }
        }
        for r in 0..R {
            for c in 0..C {
                *out.add((i0 + r) * ld + j0 + c) = sum8(acc[r][c]);
            }
        }
    }
}

/// The sum of eight lanes, in a fixed order (candle's and llama.cpp's for AVX2).
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) fn sum8(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}
