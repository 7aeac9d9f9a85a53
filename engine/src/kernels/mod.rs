//! CPU matrix products for block-quantized weights (GGUF Q8_0, Q5_0, Q4_K, Q6_K), our own
//! instead of candle's, plus attention on the CPU (prefill and decode, independent of the batch).
//!
//! Weights are repacked once at load in tiles of 16 rows, four values of each row side by side, so
//! one integer multiply-add instruction (`vpdpbusd` on AVX-512 VNNI, `vpmaddubsw` + `vpmaddwd` on
//! AVX2) with four broadcast activations serves 16 outputs. Each call quantizes the activations to
//! 8 bits (per 32-value block as GGUF Q8_0 for Q8_0/Q5_0, per 256 as GGUF Q8_K for the K-quants).
//! Per block each output's exact integer dot product is scaled into its own f32 lane; every output
//! goes through the same operations whatever the batch, the tiling or the instruction set, so a
//! sequence's result depends neither on what else is in the batch nor on the CPU. Without AVX2,
//! FMA and F16C the caller keeps candle's kernels.

// Off x86 the SIMD kernels are not built, so their layouts' accessors go unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_variables, unused_mut))]

// Files are named `<format>.rs` (layout and quantization), `<format>_<isa>.rs` (its kernels) and
// `<format>_tests.rs`; `block` is Q8_0/Q5_0 (32-value blocks), `kquant` is Q4_K/Q6_K.
mod activations;
pub mod attention;
#[cfg(target_arch = "x86_64")]
mod attention_avx2;
mod block;
#[cfg(target_arch = "x86_64")]
mod block_avx2;
#[cfg(target_arch = "x86_64")]
mod block_avx512;
mod kquant;
#[cfg(target_arch = "x86_64")]
mod kquant_avx2;
#[cfg(target_arch = "x86_64")]
mod kquant_avx512;
pub mod math;

pub use activations::QuantizedRows;
pub use block::{BlockFormat, PackedWeights};
pub use kquant::{KQuantFormat, KQuantWeights, Q8KRows};

use std::ops::Range;

/// Values per quantization block (Q8_0, Q5_0).
pub const BLOCK: usize = 32;
/// Weight rows per tile of every packed layout (the 32-bit lanes of a 512-bit register).
pub const TILE: usize = 16;

/// The instruction set a product runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 with VNNI: 16 weight rows per register, `vpdpbusd`.
    Avx512Vnni,
    /// AVX2 with FMA and F16C: 8 weight rows per register, `vpmaddubsw` + `vpmaddwd`.
    Avx2,
}

impl Isa {
    /// The best instruction set this CPU has, unless `CODESWEEP_CPU_KERNEL` says otherwise
    /// (`avx512`, `avx2`, or `candle` to use candle's kernels); `None` means use candle's.
    pub fn detect() -> Option<Self> {
        let forced = std::env::var("CODESWEEP_CPU_KERNEL").ok();
        let best = Self::supported().into_iter().next();
        match forced.as_deref() {
            Some("candle") => None,
            Some("avx2") => Self::supported().into_iter().find(|&i| i == Self::Avx2),
            Some("avx512") => Self::supported().into_iter().find(|&i| i == Self::Avx512Vnni),
            _ => best,
        }
    }

    /// Every instruction set this CPU can run, best first.
    pub fn supported() -> Vec<Self> {
        let mut found = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni")
            {
                found.push(Self::Avx512Vnni);
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
                found.push(Self::Avx2);
            }
        }
        found
    }
}

/// Rows of activations per tile of a task; a task's activation rows stay in L2 while its weight
/// rows stream past.
const ROWS_PER_TASK: usize = 64;
/// Most weight rows per task.
const MAX_COLUMNS_PER_TASK: usize = 256;

/// `out` (m, n) = `x` (m, k) · `w`ᵀ, with `w` (n, k) packed; `out` is overwritten.
///
/// Runs on candle's CPU thread pool (see [`schedule`]). Panics only on mismatched lengths,
/// which callers check.
pub fn matmul(isa: Isa, w: &PackedWeights, x: &QuantizedRows, out: &mut [f32]) {
    assert_eq!(x.cols(), w.cols(), "activation and weight widths differ");
    assert_eq!(x.format(), w.format(), "activations quantized for another format");
    schedule(x.rows(), w.rows(), TILE, out, |rows, cols, out, ld| match isa {
        // SAFETY: `schedule` hands out disjoint rectangles within `out`; the ISA was detected.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => unsafe { block_avx512::tile(w, x, rows, cols, out, ld) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { block_avx2::tile(w, x, rows, cols, out, ld) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("no SIMD kernels on this architecture; Isa::detect returns None"),
    });
}

/// `out` (m, n) = `x` (m, k) · `w`ᵀ for K-quant weights `w` (n, k); `out` is overwritten.
pub fn matmul_kquant(isa: Isa, w: &KQuantWeights, x: &Q8KRows, out: &mut [f32]) {
    matmul_kquant_stacked(isa, &[w], x, out);
}

/// Whether [`matmul_kquant_stacked`] takes these matrices: one input width, and every matrix but
/// the last a whole number of tiles tall (so no tile straddles two matrices).
pub fn stackable(ws: &[&KQuantWeights]) -> bool {
    let Some((last, rest)) = ws.split_last() else { return false };
    rest.iter().all(|w| w.cols() == last.cols() && w.rows().is_multiple_of(TILE))
}

/// `out` (m, Σ nᵢ) = `x` (m, k) · [w₀; w₁; …]ᵀ: the products of one input with several K-quant
/// matrices (a layer's query, key and value, or gate and up) side by side in each output row, as
/// one job on the pool: one wait for the threads instead of one per matrix. Each output goes
/// through the same operations as in [`matmul_kquant`], so the values are the same bits.
/// Panics unless [`stackable`] and the lengths agree, which callers check.
pub fn matmul_kquant_stacked(isa: Isa, ws: &[&KQuantWeights], x: &Q8KRows, out: &mut [f32]) {
    assert!(stackable(ws), "matrices that cannot be stacked");
    assert_eq!(x.cols(), ws[0].cols(), "activation and weight widths differ");
    let starts: Vec<usize> = ws.iter().scan(0, |next, w| Some(std::mem::replace(next, *next + w.rows()))).collect();
    let n = ws.iter().map(|w| w.rows()).sum();
    schedule(x.rows(), n, TILE, out, |rows, cols, out, ld| {
        for (w, &start) in ws.iter().zip(&starts) {
            let (first, end) = (cols.start.max(start), cols.end.min(start + w.rows()));
            if first >= end {
                continue;
            }
            // Matrix-local columns; `first - start` is a multiple of TILE as `start` is.
            let (local, out) = (first - start..end - start, out.wrapping_add(start));
            match isa {
                // SAFETY: `schedule` hands out disjoint rectangles within `out`, and this matrix's
                // columns start at `start` in each row; the ISA was detected.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512Vnni => unsafe { kquant_avx512::tile(w, x, rows.clone(), local, out, ld) },
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { kquant_avx2::tile(w, x, rows.clone(), local, out, ld) },
                #[cfg(not(target_arch = "x86_64"))]
                _ => unreachable!("no SIMD kernels on this architecture; Isa::detect returns None"),
            }
        }
    });
}

/// Splits an (m, n) product into tasks of up to 64 activation rows × up to 256 weight rows on
/// candle's CPU thread pool (the one its own ops use: a second pool would compete with its
/// spinning workers for the cores) and calls `tile(rows, cols, out, ld)` for each, which writes
/// `out[i·ld + j]` for `i` in `rows`, `j` in `cols`; column ranges start at multiples of `granule`.
fn schedule<F>(m: usize, n: usize, granule: usize, out: &mut [f32], tile: F)
where
    F: Fn(std::ops::Range<usize>, std::ops::Range<usize>, *mut f32, usize) + Sync,
{
    assert_eq!(out.len(), m * n, "output buffer of the wrong length");
    if m == 0 || n == 0 {
        return;
    }
    let pool = candle_core::utils::barrier_pool();
    let threads = pool.n_workers() + 1;
    let row_tasks = m.div_ceil(ROWS_PER_TASK);
    // Enough column tasks to keep every thread busy, in whole micro-tiles.
    let want = (threads * 8).div_ceil(row_tasks).max(1);
    let columns = n.div_ceil(want).next_multiple_of(granule).clamp(granule, MAX_COLUMNS_PER_TASK);
    let col_tasks = n.div_ceil(columns);
    let out_ptr = SharedOut(out.as_mut_ptr());
    pool.execute_chunked(row_tasks * col_tasks, |tasks| {
        for task in tasks {
            let (rt, ct) = (task / col_tasks, task % col_tasks);
            let rows = rt * ROWS_PER_TASK..((rt + 1) * ROWS_PER_TASK).min(m);
            let cols = ct * columns..((ct + 1) * columns).min(n);
            // Tasks cover disjoint (row, column) rectangles of `out`, which outlives the call.
            tile(rows, cols, out_ptr.get(), n);
        }
    });
}

#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: only used to write disjoint elements from pool tasks (see `matmul`).
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The pointer; a method so that closures capture the whole (`Send`) wrapper.
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// Checks that `raw` is GGUF data of a (`rows`, `cols`) matrix in blocks of `block_values`
/// values taking `block_bytes` bytes each (`what` names the format in errors); returns the
/// blocks per row.
fn gguf_blocks_per_row(what: &str, rows: usize, cols: usize, block_values: usize, block_bytes: usize, raw: &[u8]) -> Result<usize, String> {
    if !cols.is_multiple_of(block_values) {
        return Err(format!("{cols} columns is not a whole number of {block_values}-value blocks"));
    }
    let blocks = cols / block_values;
    let expected = rows * blocks * block_bytes;
    if raw.len() != expected {
        return Err(format!("{} bytes of {what} data, expected {expected} for ({rows}, {cols})", raw.len()));
    }
    Ok(blocks)
}

/// The tile driver every kernel shares: for each weight tile `t` (of [`TILE`] rows) that meets
/// `cols`, and each run of up to `mr` activation rows from `i` within `rows`, calls
/// `micro(i, rows_in_run, t, width)`, `width` being the tile's columns inside `cols`. Inlined
/// into each kernel's `#[target_feature]` function, so the micro-kernels inline too.
#[inline(always)]
fn for_each_micro_tile(rows: Range<usize>, cols: Range<usize>, mr: usize, mut micro: impl FnMut(usize, usize, usize, usize)) {
    for t in cols.start / TILE..cols.end.div_ceil(TILE) {
        let width = (cols.end - t * TILE).min(TILE);
        let mut i = rows.start;
        while i < rows.end {
            let run = (rows.end - i).min(mr);
            micro(i, run, t, width);
            i += run;
        }
    }
}

#[cfg(test)]
mod block_tests;
#[cfg(test)]
pub(crate) mod kquant_tests;
