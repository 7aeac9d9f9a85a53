//! GGUF K-quant weights (Q4_K, Q6_K), repacked in tiles of 16 weight rows, and the 256-value
//! Q8_K activations they multiply with.
//!
//! A tile keeps, for each group of four consecutive values, the 16 rows' four values side by
//! side (64 bytes), so one `vpdpbusd` with four broadcast activations gives 16 outputs and no
//! horizontal sums are needed. Per super-block and output the kernels form two exact integers,
//! `S = Σ_sub scale · Σ q·a` and (Q4_K) `M = Σ_sub min · Σ a`, then `acc += (d_x·d_w)·S` and
//! `acc −= (d_x·dmin_w)·M` in f32: the same float operations on every instruction set, so AVX2
//! and AVX-512 give the same bits.

use std::sync::Mutex;

use super::{gguf_blocks_per_row, TILE};

/// Values per super-block.
pub const SUPER_BLOCK: usize = 256;

/// The K-quant formats the kernels take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KQuantFormat {
    /// 4-bit values with a 6-bit scale and minimum per 32: `d·sc·q − dmin·m`.
    Q4K,
    /// 6-bit values with a signed 8-bit scale per 16: `d·sc·(q − 32)`.
    Q6K,
}

impl KQuantFormat {
    /// Bytes of one super-block in a GGUF file.
    fn gguf_block_bytes(self) -> usize {
        match self {
            Self::Q4K => 144,
            Self::Q6K => 210,
        }
    }

    /// Sub-blocks (one scale each) per super-block.
    pub(super) fn sub_blocks(self) -> usize {
        match self {
            Self::Q4K => 8,
            Self::Q6K => 16,
        }
    }

    /// 64-byte registers per sub-block in a tile: Q4_K 4 (two groups of four as nibbles each),
    /// Q6_K 3 (low nibbles of groups 0/1 and 2/3, then the four groups' high bit pairs).
    pub(super) fn registers_per_sub_block(self) -> usize {
        match self {
            Self::Q4K => 4,
            Self::Q6K => 3,
        }
    }

    /// f16 float steps per super-block of one tile: `d` (and Q4_K's `dmin`) of each row.
    pub(super) fn steps_per_block(self) -> usize {
        match self {
            Self::Q4K => 2 * TILE,
            Self::Q6K => TILE,
        }
    }

    /// Bytes of one super-block of one tile.
    pub(super) fn tile_block_bytes(self) -> usize {
        self.sub_blocks() * self.registers_per_sub_block() * 64
    }
}

/// One GGUF super-block unpacked: values (Q4_K 0..=15, Q6_K 0..=63 before the −32), scales,
/// minimums, `d`, `dmin`.
struct Unpacked {
    q: [u8; SUPER_BLOCK],
    scales: [i32; 16],
    mins: [i32; 8],
    d: f32,
    dmin: f32,
}

fn unpack(format: KQuantFormat, block: &[u8]) -> Unpacked {
    let f16 = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f32();
    let mut u = Unpacked { q: [0; SUPER_BLOCK], scales: [0; 16], mins: [0; 8], d: 0.0, dmin: 0.0 };
    match format {
        // d, dmin (f16), 12 bytes of packed 6-bit scales and minimums, then per 64 values 32
        // bytes: low nibbles the first 32 values, high nibbles the next 32.
        KQuantFormat::Q4K => {
            u.d = f16(&block[0..2]);
            u.dmin = f16(&block[2..4]);
            let packed = &block[4..16];
            for j in 0..8 {
                let (sc, m) = if j < 4 {
                    (packed[j] & 63, packed[j + 4] & 63)
                } else {
                    ((packed[j + 4] & 0xf) | ((packed[j - 4] >> 6) << 4), (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4))
                };
                u.scales[j] = sc as i32;
                u.mins[j] = m as i32;
            }
            for (e, q) in u.q.iter_mut().enumerate() {
                let byte = block[16 + (e / 64) * 32 + e % 32];
                *q = if e % 64 < 32 { byte & 0xf } else { byte >> 4 };
            }
        }
        // 128 low-nibble bytes, 64 high-pair bytes, 16 signed scales, d (f16). Per 128 values:
        // 64 low bytes (values l and l+64 share byte l < 32, values l+32 and l+96 byte l+32) and
        // 32 pair bytes (value l + 32·k takes pair k of byte l).
        KQuantFormat::Q6K => {
            for (e, q) in u.q.iter_mut().enumerate() {
                let (half, within) = (e / 128, e % 128);
                let (quarter, l) = (within / 32, within % 32);
                let low = block[half * 64 + (quarter % 2) * 32 + l];
                let low = if quarter < 2 { low & 0xf } else { low >> 4 };
                let high = (block[128 + half * 32 + l] >> (2 * quarter)) & 3;
                *q = low | (high << 4);
            }
            for (s, &b) in u.scales.iter_mut().zip(&block[192..208]) {
                *s = b as i8 as i32;
            }
            u.d = f16(&block[208..210]);
        }
    }
    u
}

/// A (rows, cols) K-quant matrix in tiles of [`TILE`] rows (the last padded with zero rows).
#[derive(Debug, Clone)]
pub struct KQuantWeights {
    format: KQuantFormat,
    rows: usize,
    cols: usize,
    /// tiles × blocks × tile_block_bytes.
    data: Vec<u8>,
    /// tiles × blocks × sub_blocks × TILE, as bytes (Q4_K unsigned, Q6_K signed) to keep the
    /// bytes read per weight near GGUF's; the kernels widen them in registers.
    scales: Vec<u8>,
    /// Q4_K only: tiles × blocks × 8 × TILE.
    mins: Vec<u8>,
    /// tiles × blocks × (TILE values of `d`, then for Q4_K TILE of `dmin`), as the file's f16
    /// bits: one stream, no more bytes than GGUF's; the kernels widen them exactly.
    steps: Vec<u16>,
}

impl KQuantWeights {
    /// Repacks GGUF super-blocks (`rows · cols / 256`, in row order). Errors say what does not fit.
    pub fn from_gguf(format: KQuantFormat, rows: usize, cols: usize, raw: &[u8]) -> Result<Self, String> {
        let blocks = gguf_blocks_per_row(&format!("{format:?}"), rows, cols, SUPER_BLOCK, format.gguf_block_bytes(), raw)?;
        let tiles = rows.div_ceil(TILE);
        let (subs, tbb) = (format.sub_blocks(), format.tile_block_bytes());
        let q4k = format == KQuantFormat::Q4K;
        let mut w = Self {
            format,
            rows,
            cols,
            data: vec![0; tiles * blocks * tbb],
            scales: vec![0; tiles * blocks * subs * TILE],
            mins: vec![0; if q4k { tiles * blocks * 8 * TILE } else { 0 }],
            steps: vec![0; tiles * blocks * format.steps_per_block()],
        };
        let per = format.steps_per_block();
        for (r, row) in raw.chunks_exact(blocks * format.gguf_block_bytes()).enumerate() {
            let (t, lane) = (r / TILE, r % TILE);
            for (b, block) in row.chunks_exact(format.gguf_block_bytes()).enumerate() {
                let u = unpack(format, block);
                let tb = t * blocks + b;
                w.steps[tb * per + lane] = half::f16::from_f32(u.d).to_bits();
                for s in 0..subs {
                    w.scales[(tb * subs + s) * TILE + lane] = u.scales[s] as u8;
                }
                let data = &mut w.data[tb * tbb..(tb + 1) * tbb];
                if q4k {
                    w.steps[tb * per + TILE + lane] = half::f16::from_f32(u.dmin).to_bits();
                    for s in 0..8 {
                        w.mins[(tb * 8 + s) * TILE + lane] = u.mins[s] as u8;
                    }
                    // Register j of sub-block s: group j in the low nibbles, group j + 4 high.
                    for s in 0..8 {
                        for j in 0..4 {
                            for i in 0..4 {
                                let low = u.q[s * 32 + 4 * j + i];
                                let high = u.q[s * 32 + 16 + 4 * j + i];
                                data[(s * 4 + j) * 64 + lane * 4 + i] = low | (high << 4);
                            }
                        }
                    }
                } else {
                    // Sub-block s: groups 0/1 as nibbles, groups 2/3 as nibbles, high pairs of
                    // group g at bits 2g..2g+1.
                    for s in 0..16 {
                        for i in 0..4 {
                            let q = |g: usize| u.q[s * 16 + 4 * g + i];
                            let at = |reg: usize| (s * 3 + reg) * 64 + lane * 4 + i;
                            data[at(0)] = (q(0) & 0xf) | ((q(1) & 0xf) << 4);
                            data[at(1)] = (q(2) & 0xf) | ((q(3) & 0xf) << 4);
                            data[at(2)] = (0..4).fold(0, |bits, g| bits | ((q(g) >> 4) << (2 * g)));
                        }
                    }
                }
            }
        }
        Ok(w)
    }

    /// The storage format.
    pub fn format(&self) -> KQuantFormat {
        self.format
    }

    /// Output width (number of weight rows).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Super-blocks per row.
    pub fn blocks(&self) -> usize {
        self.cols / SUPER_BLOCK
    }

    /// Tile `t`'s super-block `b`: its registers.
    pub(super) fn tile_data(&self, t: usize, b: usize) -> *const u8 {
        self.data[(t * self.blocks() + b) * self.format.tile_block_bytes()..].as_ptr()
    }

    /// Tile `t`'s super-block `b`: sub_blocks × TILE scales.
    pub(super) fn tile_scales(&self, t: usize, b: usize) -> *const u8 {
        self.scales[(t * self.blocks() + b) * self.format.sub_blocks() * TILE..].as_ptr()
    }

    /// Q4_K only: 8 × TILE minimums.
    pub(super) fn tile_mins(&self, t: usize, b: usize) -> *const u8 {
        self.mins[(t * self.blocks() + b) * 8 * TILE..].as_ptr()
    }

    /// Tile `t`'s super-block `b`: TILE values of `d` then (Q4_K) TILE of `dmin`, as f16 bits;
    /// the next super-block's follow after [`KQuantFormat::steps_per_block`].
    pub(super) fn tile_steps(&self, t: usize, b: usize) -> *const u16 {
        self.steps[(t * self.blocks() + b) * self.format.steps_per_block()..].as_ptr()
    }

    /// `d` (`dmin` when `min`) of weight row `lane` of tile-block `tb`, widened.
    fn step(&self, tb: usize, lane: usize, min: bool) -> f32 {
        let at = tb * self.format.steps_per_block() + if min { TILE } else { 0 } + lane;
        half::f16::from_bits(self.steps[at]).to_f32()
    }

    /// Value `c` of row `r` dequantized from the tiles (tests and reference).
    pub fn value(&self, r: usize, c: usize) -> f32 {
        let (t, lane, b, e) = (r / TILE, r % TILE, c / SUPER_BLOCK, c % SUPER_BLOCK);
        let tb = t * self.blocks() + b;
        let data = &self.data[tb * self.format.tile_block_bytes()..];
        match self.format {
            KQuantFormat::Q4K => {
                let (s, within) = (e / 32, e % 32);
                let (j, i, high) = ((within % 16) / 4, within % 4, within >= 16);
                let byte = data[(s * 4 + j) * 64 + lane * 4 + i];
                let q = if high { byte >> 4 } else { byte & 0xf };
                self.step(tb, lane, false) * self.scales[(tb * 8 + s) * TILE + lane] as f32 * q as f32
                    - self.step(tb, lane, true) * self.mins[(tb * 8 + s) * TILE + lane] as f32
            }
            KQuantFormat::Q6K => {
                let (s, g, i) = (e / 16, (e % 16) / 4, e % 4);
                let nibbles = data[(s * 3 + g / 2) * 64 + lane * 4 + i];
                let low = if g % 2 == 0 { nibbles & 0xf } else { nibbles >> 4 };
                let high = (data[(s * 3 + 2) * 64 + lane * 4 + i] >> (2 * g)) & 3;
                let q = (low | (high << 4)) as i32 - 32;
                self.step(tb, lane, false) * self.scales[(tb * 16 + s) * TILE + lane] as i8 as f32 * q as f32
            }
        }
    }
}

/// Super-blocks ahead of the one being multiplied whose weights a one-row product asks the memory
/// for (`prefetch_data`): one activation row leaves the cores waiting on the weight stream, and
/// the hardware prefetchers alone kept a 2-thread product at 0.7–0.85 of plain read bandwidth on
/// an EPYC Zen 5, 0.85–0.95 with this (`examples/bench_kernels.rs`).
const PREFETCH_BLOCKS_AHEAD: usize = 2;

/// Asks for the weight data of sub-blocks `subs` of the super-block [`PREFETCH_BLOCKS_AHEAD`]
/// after the one at `data` (its tile's data is contiguous, and so are a task's tiles).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_data(data: *const u8, format: KQuantFormat, subs: std::ops::Range<usize>) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let sub_bytes = format.registers_per_sub_block() * 64;
    let ahead = data.wrapping_add(PREFETCH_BLOCKS_AHEAD * format.tile_block_bytes());
    for line in (subs.start * sub_bytes..subs.end * sub_bytes).step_by(64) {
        // SAFETY: a prefetch is a hint; an address past the operands is not read and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast()) };
    }
}

/// Asks for the scales, minimums, `d` and `dmin` (one 64-byte line) of tile `t`'s super-block `b + 1`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_side_streams(w: &KQuantWeights, t: usize, b: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY (every prefetch): a hint; an address past the operands is not read and cannot fault.
    let prefetch = |p: *const u8| unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    let next = t * w.blocks() + b + 1;
    let scale_bytes = w.format().sub_blocks() * TILE;
    let scales = w.scales.as_ptr().wrapping_add(next * scale_bytes);
    (0..scale_bytes).step_by(64).for_each(|line| prefetch(scales.wrapping_add(line)));
    prefetch(w.steps.as_ptr().wrapping_add(next * w.format().steps_per_block()).cast());
    if w.format() == KQuantFormat::Q4K {
        let mins = w.mins.as_ptr().wrapping_add(next * 8 * TILE);
        (0..8 * TILE).step_by(64).for_each(|line| prefetch(mins.wrapping_add(line)));
    }
}

/// (rows, cols) activations as GGUF Q8_K: per 256 values an f32 scale and signed bytes, plus
/// the sums of each 16 (Q6_K's offset) and each 32 (Q4_K's minimums).
#[derive(Debug, Clone)]
pub struct Q8KRows {
    rows: usize,
    cols: usize,
    /// rows × cols.
    quants: Vec<i8>,
    /// rows × blocks.
    d: Vec<f32>,
    /// rows × blocks × 16.
    sums16: Vec<i32>,
    /// rows × blocks × 8.
    sums32: Vec<i32>,
}

/// Rows quantized per pool task.
const ROWS_PER_TASK: usize = 16;

impl Q8KRows {
    /// Quantizes `x` (rows × cols, row-major; cols a multiple of 256) as llama.cpp's
    /// `quantize_row_q8_K` does: scale −127 / (the value of largest magnitude), rounded to nearest
    /// with ties to even, and `d` = 1 / scale.
    pub fn quantize(x: &[f32], cols: usize) -> Self {
        debug_assert!(cols.is_multiple_of(SUPER_BLOCK));
        let rows = x.len().checked_div(cols).unwrap_or(0);
        let blocks = cols / SUPER_BLOCK;
        let mut quants = vec![0i8; rows * cols];
        let mut d = vec![0f32; rows * blocks];
        let mut sums16 = vec![0i32; rows * blocks * 16];
        let mut sums32 = vec![0i32; rows * blocks * 8];
        let quantize_rows = |first: usize, q: &mut [i8], d: &mut [f32], s16: &mut [i32], s32: &mut [i32]| {
            let values = &x[first * cols..][..q.len()];
            for ((((values, q), d), s16), s32) in values
                .chunks_exact(SUPER_BLOCK)
                .zip(q.chunks_exact_mut(SUPER_BLOCK))
                .zip(d.iter_mut())
                .zip(s16.chunks_exact_mut(16))
                .zip(s32.chunks_exact_mut(8))
            {
                // The first value of largest magnitude (NaNs ignored), in two passes the
                // compiler vectorizes rather than one with a branch per value.
                let amax = values.iter().fold(0f32, |m, v| m.max(v.abs()));
                if amax == 0.0 {
                    continue;
                }
                let max = values.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
                let inverse = -127.0 / max;
                for (q, &v) in q.iter_mut().zip(values) {
                    *q = nearest_int(inverse * v).min(127) as i8;
                }
                for (sum, group) in s16.iter_mut().zip(q.chunks_exact(16)) {
                    *sum = group.iter().map(|&v| v as i32).sum();
                }
                for (sum, pair) in s32.iter_mut().zip(s16.chunks_exact(2)) {
                    *sum = pair[0] + pair[1];
                }
                *d = 1.0 / inverse;
            }
        };
        if rows > ROWS_PER_TASK {
            let chunks: Vec<Mutex<_>> = quants
                .chunks_mut(ROWS_PER_TASK * cols)
                .zip(d.chunks_mut(ROWS_PER_TASK * blocks))
                .zip(sums16.chunks_mut(ROWS_PER_TASK * blocks * 16))
                .zip(sums32.chunks_mut(ROWS_PER_TASK * blocks * 8))
                .map(Mutex::new)
                .collect();
            candle_core::utils::barrier_pool().execute_chunked(chunks.len(), |range| {
                for chunk in range {
                    let mut guard = chunks[chunk].lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    let (((q, d), s16), s32) = &mut *guard;
                    quantize_rows(chunk * ROWS_PER_TASK, q, d, s16, s32);
                }
            });
        } else {
            quantize_rows(0, &mut quants, &mut d, &mut sums16, &mut sums32);
        }
        Self { rows, cols, quants, d, sums16, sums32 }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Value `c` of row `r` dequantized (tests and reference).
    pub fn value(&self, r: usize, c: usize) -> f32 {
        self.quants[r * self.cols + c] as f32 * self.d[(r * self.cols + c) / SUPER_BLOCK]
    }

    /// Row `r`'s values.
    pub(super) fn row_quants(&self, r: usize) -> *const i8 {
        self.quants[r * self.cols..].as_ptr()
    }

    /// Row `r`'s scales, one per super-block.
    pub(super) fn row_d(&self, r: usize) -> *const f32 {
        self.d[r * self.cols / SUPER_BLOCK..].as_ptr()
    }

    /// Sums of each 16 values of row `r`.
    pub(super) fn row_sums16(&self, r: usize) -> *const i32 {
        self.sums16[r * self.cols / SUPER_BLOCK * 16..].as_ptr()
    }

    /// Sums of each 32 values of row `r`.
    pub(super) fn row_sums32(&self, r: usize) -> *const i32 {
        self.sums32[r * self.cols / SUPER_BLOCK * 8..].as_ptr()
    }
}

/// ggml's `nearest_int`: round to nearest, ties to even, for |v| < 2²², by adding 1.5·2²³.
#[inline(always)]
fn nearest_int(v: f32) -> i32 {
    ((v + 12_582_912.0).to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

#[cfg(test)]
mod tests {
    use super::{nearest_int, Q8KRows, SUPER_BLOCK};

    /// llama.cpp's choice: the first value of largest magnitude sets the scale and its sign;
    /// NaNs are passed over; an all-zero block stays zero.
    #[test]
    fn the_first_value_of_largest_magnitude_sets_the_scale() {
        let mut x = vec![0.25f32; 3 * SUPER_BLOCK];
        x[10] = f32::NAN;
        x[20] = -2.0;
        x[30] = 2.0;
        x[SUPER_BLOCK + 5] = 4.0;
        x[SUPER_BLOCK + 6] = -4.0;
        x[2 * SUPER_BLOCK..].fill(0.0);
        let q = Q8KRows::quantize(&x, SUPER_BLOCK);
        // d = 1 / (−127 / max): the sign follows the first extreme value.
        assert_eq!(q.value(0, 20), -2.0);
        assert_eq!(q.value(0, 30), 2.0);
        assert_eq!(q.d[0], 1.0 / (-127.0 / -2.0));
        assert_eq!(q.d[1], 1.0 / (-127.0 / 4.0));
        assert_eq!(q.quants[SUPER_BLOCK + 5], -127);
        assert_eq!((q.d[2], q.sums16[32], q.value(2, 7)), (0.0, 0, 0.0));
        assert_eq!(q.sums32[0], q.sums16[0] + q.sums16[1]);
    }

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        for (v, want) in [(0.5f32, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (126.5, 126), (-127.0, -127), (3.4999, 3)] {
            assert_eq!(nearest_int(v), want, "{v}");
        }
        for i in -130_000..130_000 {
            let v = i as f32 / 1000.0;
            assert_eq!(nearest_int(v), v.round_ties_even() as i32, "{v}");
        }
    }
}
