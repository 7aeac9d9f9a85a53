//! Q8_0 / Q5_0 weights repacked for the CPU kernels in tiles of 16 rows: for each group of four
//! consecutive values, the 16 rows' four values side by side (64 bytes), so one `vpdpbusd` with
//! four broadcast activations gives 16 outputs and no horizontal sums are needed.

use super::{gguf_blocks_per_row, BLOCK, TILE};

/// How a block's 32 integers are stored. Each is kept as an unsigned byte `q = value + offset`,
/// which `vpdpbusd` multiplies directly; the kernels subtract `offset · Σ activation` per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockFormat {
    /// GGUF Q8_0: values in −127..=127, stored `value + 128`, one 64-byte register per group of
    /// four (8 per block).
    Q8,
    /// GGUF Q5_0: values in −16..=15, stored `value + 16`: four registers of nibbles (groups 2k
    /// and 2k + 1 in the low and high nibbles of register k), then one register whose byte for
    /// value i of a group has the fifth bit of group g at bit g.
    Q5,
}

impl BlockFormat {
    /// Bytes of one block of one tile.
    pub(super) fn tile_block_bytes(self) -> usize {
        match self {
            Self::Q8 => 8 * 64,
            Self::Q5 => 5 * 64,
        }
    }

    /// What is added to each value to store it unsigned.
    pub fn offset(self) -> i32 {
        match self {
            Self::Q8 => 128,
            Self::Q5 => 16,
        }
    }

    /// Bytes of one block in a GGUF file: an f16 scale, then the integers.
    fn gguf_block_bytes(self) -> usize {
        match self {
            Self::Q8 => 34,
            Self::Q5 => 22,
        }
    }
}

/// A (rows, cols) weight matrix in one [`BlockFormat`], ready for [`super::matmul`].
#[derive(Debug, Clone)]
pub struct PackedWeights {
    format: BlockFormat,
    rows: usize,
    cols: usize,
    /// tiles × blocks × tile_block_bytes; rows past `rows` are zero values.
    data: Vec<u8>,
    /// tiles × blocks × TILE scales as f16 bits (GGUF's precision; widened in registers).
    scales: Vec<u16>,
}

impl PackedWeights {
    /// Repacks GGUF block data (`rows · cols / 32` blocks of an f16 scale and the integers, in
    /// row order). Errors say what does not fit.
    pub fn from_gguf(format: BlockFormat, rows: usize, cols: usize, raw: &[u8]) -> Result<Self, String> {
        let blocks = gguf_blocks_per_row(&format!("{format:?}"), rows, cols, BLOCK, format.gguf_block_bytes(), raw)?;
        let tiles = rows.div_ceil(TILE);
        let tbb = format.tile_block_bytes();
        let zero = format.offset() as u8;
        let mut w = Self { format, rows, cols, data: vec![0; tiles * blocks * tbb], scales: vec![0; tiles * blocks * TILE] };
        // Padding rows hold value 0 (stored as the offset) with scale 0.
        if format == BlockFormat::Q8 {
            w.data.fill(zero);
        } else {
            for block in w.data.chunks_exact_mut(tbb) {
                block[..256].fill(0);
                block[256..].fill(0xff);
            }
        }
        for (r, row) in raw.chunks_exact(blocks * format.gguf_block_bytes()).enumerate() {
            let (t, lane) = (r / TILE, r % TILE);
            for (b, src) in row.chunks_exact(format.gguf_block_bytes()).enumerate() {
                let tb = t * blocks + b;
                w.scales[tb * TILE + lane] = u16::from_le_bytes([src[0], src[1]]);
                let mut q = [0u8; BLOCK];
                match format {
                    // i8 → u8 with +128 is flipping the top bit.
                    BlockFormat::Q8 => q.iter_mut().zip(&src[2..]).for_each(|(q, s)| *q = s ^ 0x80),
                    // A 32-bit word of fifth bits (element j at bit j), then element j's low
                    // nibble in byte j (j < 16) or in the high nibble of byte j − 16.
                    BlockFormat::Q5 => {
                        let high = u32::from_le_bytes([src[2], src[3], src[4], src[5]]);
                        for (j, q) in q.iter_mut().enumerate() {
                            let nibble = if j < 16 { src[6 + j] & 0xf } else { src[6 + j - 16] >> 4 };
                            *q = nibble | ((((high >> j) & 1) as u8) << 4);
                        }
                    }
                }
                let data = &mut w.data[tb * tbb..(tb + 1) * tbb];
                for (g, group) in q.chunks_exact(4).enumerate() {
                    for (i, &v) in group.iter().enumerate() {
                        match format {
                            BlockFormat::Q8 => data[g * 64 + lane * 4 + i] = v,
                            BlockFormat::Q5 => {
                                let at = (g / 2) * 64 + lane * 4 + i;
                                data[at] = if g % 2 == 0 { (data[at] & 0xf0) | (v & 0xf) } else { (data[at] & 0x0f) | ((v & 0xf) << 4) };
                                let bits = &mut data[256 + lane * 4 + i];
                                *bits = (*bits & !(1 << g)) | ((v >> 4) << g);
                            }
                        }
                    }
                }
            }
        }
        Ok(w)
    }

    /// The storage format.
    pub fn format(&self) -> BlockFormat {
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

    /// Blocks per row.
    pub fn blocks(&self) -> usize {
        self.cols / BLOCK
    }

    /// Tile `t`'s block `b`: its registers.
    pub(super) fn tile_data(&self, t: usize, b: usize) -> *const u8 {
        self.data[(t * self.blocks() + b) * self.format.tile_block_bytes()..].as_ptr()
    }

    /// Tile `t`'s block `b`: TILE scales as f16 bits.
    pub(super) fn tile_scales(&self, t: usize, b: usize) -> *const u16 {
        self.scales[(t * self.blocks() + b) * TILE..].as_ptr()
    }

    /// Value `c` of row `r` as a signed integer, and its block's scale (tests and reference).
    pub fn value(&self, r: usize, c: usize) -> (i32, f32) {
        let (t, lane, b, e) = (r / TILE, r % TILE, c / BLOCK, c % BLOCK);
        let tb = t * self.blocks() + b;
        let data = &self.data[tb * self.format.tile_block_bytes()..][..self.format.tile_block_bytes()];
        let (g, i) = (e / 4, e % 4);
        let stored = match self.format {
            BlockFormat::Q8 => data[g * 64 + lane * 4 + i],
            BlockFormat::Q5 => {
                let byte = data[(g / 2) * 64 + lane * 4 + i];
                let nibble = if g % 2 == 0 { byte & 0xf } else { byte >> 4 };
                nibble | (((data[256 + lane * 4 + i] >> g) & 1) << 4)
            }
        };
        (stored as i32 - self.format.offset(), half::f16::from_bits(self.scales[tb * TILE + lane]).to_f32())
    }
}
