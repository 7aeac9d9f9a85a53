//! Weights repacked for the CPU kernels: per row, the blocks' integer payloads back to back and
//! their scales as f32, rows padded with zero blocks to an even count (AVX-512 reads two at a time).

use super::BLOCK;

/// How a block's 32 integers are stored. Each is kept as an unsigned byte `q = value + offset`,
/// which `vpdpbusd` multiplies directly; the kernels subtract `offset · Σ activation` per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockFormat {
    /// GGUF Q8_0: 32 bytes, `value + 128`, values in −127..=127.
    Q8,
    /// GGUF Q5_0: 16 bytes of low nibbles (elements j and j+16 share byte j) and 4 bytes holding
    /// the fifth bit of element j at bit j; `value + 16`, values in −16..=15.
    Q5,
    /// Q5_0 for 512-bit registers, per pair of blocks: 32 nibble bytes (the first block's 16,
    /// then the second's) and a 64-bit mask of fifth bits in register order, so unpacking is a
    /// split of nibbles and one masked add. Activations are stored in the same order
    /// ([`register_position`]).
    Q5Pairs,
}

/// Where value `k` (0..64) of a pair of blocks sits in a 512-bit register once a
/// [`BlockFormat::Q5Pairs`] pair is unpacked: low nibbles (elements 0–15 of each block) fill the
/// first 32 bytes, high nibbles (elements 16–31) the last 32.
pub fn register_position(k: usize) -> usize {
    let (block, e) = (k / BLOCK, k % BLOCK);
    if e < 16 {
        block * 16 + e
    } else {
        32 + block * 16 + e - 16
    }
}

impl BlockFormat {
    /// Bytes of one block's integers.
    pub fn block_bytes(self) -> usize {
        match self {
            Self::Q8 => 32,
            Self::Q5 | Self::Q5Pairs => 20,
        }
    }

    /// What is added to each value to store it unsigned.
    pub fn offset(self) -> i32 {
        match self {
            Self::Q8 => 128,
            Self::Q5 | Self::Q5Pairs => 16,
        }
    }

    /// Bytes of one block in a GGUF file: an f16 scale, then the integers.
    fn gguf_block_bytes(self) -> usize {
        2 + self.block_bytes()
    }

    /// Whether activations are stored in [`register_position`] order for this format.
    pub fn register_order(self) -> bool {
        self == Self::Q5Pairs
    }
}

/// A (rows, cols) weight matrix in one [`BlockFormat`], ready for [`super::matmul`].
#[derive(Debug, Clone)]
pub struct PackedWeights {
    format: BlockFormat,
    rows: usize,
    cols: usize,
    /// Blocks per row, rounded up to even.
    padded_blocks: usize,
    /// rows × padded_blocks × block_bytes.
    data: Vec<u8>,
    /// rows × padded_blocks; 0 for padding.
    scales: Vec<f32>,
}

impl PackedWeights {
    /// Repacks GGUF block data (`rows · cols / 32` blocks of an f16 scale and the integers, in
    /// row order). Errors say what does not fit.
    pub fn from_gguf(format: BlockFormat, rows: usize, cols: usize, raw: &[u8]) -> Result<Self, String> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(format!("{cols} columns is not a whole number of {BLOCK}-value blocks"));
        }
        let blocks = cols / BLOCK;
        let expected = rows * blocks * format.gguf_block_bytes();
        if raw.len() != expected {
            return Err(format!("{} bytes of {format:?} data, expected {expected} for ({rows}, {cols})", raw.len()));
        }
        let padded_blocks = blocks.next_multiple_of(2);
        let bb = format.block_bytes();
        let mut data = vec![0u8; rows * padded_blocks * bb];
        let mut scales = vec![0f32; rows * padded_blocks];
        for (r, src_row) in raw.chunks_exact(blocks * format.gguf_block_bytes()).enumerate() {
            let dst_row = &mut data[r * padded_blocks * bb..(r + 1) * padded_blocks * bb];
            for (b, src) in src_row.chunks_exact(format.gguf_block_bytes()).enumerate() {
                scales[r * padded_blocks + b] = half::f16::from_le_bytes([src[0], src[1]]).to_f32();
                let dst = &mut dst_row[b * bb..(b + 1) * bb];
                match format {
                    // i8 → u8 with +128 is flipping the top bit.
                    BlockFormat::Q8 => dst.iter_mut().zip(&src[2..]).for_each(|(d, s)| *d = s ^ 0x80),
                    // GGUF stores the high bits first, then the nibbles; we keep nibbles first
                    // (pairs are rearranged below).
                    BlockFormat::Q5 | BlockFormat::Q5Pairs => {
                        dst[..16].copy_from_slice(&src[6..22]);
                        dst[16..20].copy_from_slice(&src[2..6]);
                    }
                }
            }
            // Padding blocks hold value 0 with scale 0.
            for b in blocks..padded_blocks {
                let dst = &mut dst_row[b * bb..(b + 1) * bb];
                match format {
                    BlockFormat::Q8 => dst.fill(0x80),
                    BlockFormat::Q5 | BlockFormat::Q5Pairs => {
                        dst[..16].fill(0);
                        dst[16..20].fill(0xff);
                    }
                }
            }
            if format == BlockFormat::Q5Pairs {
                dst_row.chunks_exact_mut(40).for_each(pair_in_register_order);
            }
        }
        Ok(Self { format, rows, cols, padded_blocks, data, scales })
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

    /// Input width including padding blocks.
    pub fn padded_cols(&self) -> usize {
        self.padded_blocks * BLOCK
    }

    /// Blocks per row including padding (even).
    pub fn padded_blocks(&self) -> usize {
        self.padded_blocks
    }

    /// Start of row `r`'s block integers.
    pub(super) fn row_data(&self, r: usize) -> *const u8 {
        self.data[r * self.padded_blocks * self.format.block_bytes()..].as_ptr()
    }

    /// Start of row `r`'s scales.
    pub(super) fn row_scales(&self, r: usize) -> *const f32 {
        self.scales[r * self.padded_blocks..].as_ptr()
    }

    /// Value `c` of row `r` as a signed integer, and its block's scale (tests and reference).
    pub fn value(&self, r: usize, c: usize) -> (i32, f32) {
        let (b, e) = (c / BLOCK, c % BLOCK);
        let bb = self.format.block_bytes();
        let block = &self.data[(r * self.padded_blocks + b) * bb..][..bb];
        let stored = match self.format {
            BlockFormat::Q8 => block[e] as i32,
            BlockFormat::Q5 => {
                let nibble = if e < 16 { block[e] & 0x0f } else { block[e - 16] >> 4 };
                let high = u32::from_le_bytes([block[16], block[17], block[18], block[19]]);
                (nibble | ((((high >> e) & 1) as u8) << 4)) as i32
            }
            BlockFormat::Q5Pairs => {
                let pair = &self.data[(r * self.padded_blocks + b / 2 * 2) * bb..][..2 * bb];
                let position = register_position((b % 2) * BLOCK + e);
                let byte = pair[position % 32];
                let nibble = if position < 32 { byte & 0x0f } else { byte >> 4 };
                let mask = u64::from_le_bytes(pair[32..40].try_into().unwrap_or_default());
                (nibble | ((((mask >> position) & 1) as u8) << 4)) as i32
            }
        };
        (stored - self.format.offset(), self.scales[r * self.padded_blocks + b])
    }

}

/// Rearranges two [`BlockFormat::Q5`] blocks (nibbles, high bits; 40 bytes) into a
/// [`BlockFormat::Q5Pairs`] pair: both blocks' nibble bytes, then the fifth bits as a 64-bit
/// mask whose bit p belongs to register byte p.
fn pair_in_register_order(pair: &mut [u8]) {
    let high = |block: &[u8]| u32::from_le_bytes([block[16], block[17], block[18], block[19]]);
    let (h0, h1) = (high(&pair[..20]), high(&pair[20..]));
    let mut mask = 0u64;
    for k in 0..2 * BLOCK {
        let bits = if k < BLOCK { h0 } else { h1 };
        if (bits >> (k % BLOCK)) & 1 == 1 {
            mask |= 1 << register_position(k);
        }
    }
    let mut nibbles = [0u8; 32];
    nibbles[..16].copy_from_slice(&pair[..16]);
    nibbles[16..].copy_from_slice(&pair[20..36]);
    pair[..32].copy_from_slice(&nibbles);
    pair[32..40].copy_from_slice(&mask.to_le_bytes());
}
