//! Attention on the CPU for every step, prefill and decode, one task per (row, key/value head,
//! run of query rows) on candle's thread pool, reading the cache buffers in place.
//!
//! A query's result depends only on the keys and values it may see: each score is one chain of
//! fused multiply-adds over the head dimension; the softmax runs over the query's own visible
//! span, aligned to its first column; the weighted sum of values adds columns in order, and
//! columns a query may not see add an exact zero. So a prompt's attention is bit-identical alone,
//! left-padded in any batch, at any prefill chunk size, and on any CPU (fused multiply-adds
//! round the same everywhere). candle's path (batched gemm, mask add, softmax, gemm) sums in an
//! order that moves with the padding and the shapes, which made greedy output depend on the
//! batch; it stays for other devices and dtypes.
//!
//! Query heads that share a key/value head form the rows of one product (`m = position · group +
//! head`), so each transposed key block and each value row is loaded once for all of them.
//!
//! Keys and values may be f32 or f16 (the KV cache's default on the CPU): f16 values are widened
//! to f32 exactly as they are loaded, and every sum runs in f32 as before.

use candle_core::{DType, Storage, Tensor, WithDType};
use half::f16;

/// Query rows (heads of a group × positions) per task.
const ROWS_PER_TASK: usize = 128;
/// Query rows per micro-tile, at most: [`attend`] has a tile for every count up to it.
const MR: usize = 6;
/// Keys per micro-tile: the transposed key buffer is laid out in blocks of this many.
pub(super) const NR: usize = 16;
/// Output lanes per pass over the values.
pub(super) const DW: usize = 16;

/// A key/value element the kernel reads: f32, or f16 widened to f32 on load (exactly).
pub(super) trait CacheValue: WithDType {
    /// Stored as IEEE half precision (widened with F16C's `vcvtph2ps` on x86).
    const HALF: bool;
    /// The value as f32, exactly.
    fn widen(self) -> f32;
}

impl CacheValue for f32 {
    const HALF: bool = false;
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
}

impl CacheValue for f16 {
    const HALF: bool = true;
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

/// Softmax attention of `q` (b, heads, t, d) over `k`, `v` (b, kv_heads, columns, d) with the
/// additive `mask` (b, 1, t or 1, columns); returns (b, t, heads·d). Query heads are grouped over
/// key/value heads. `q` and `mask` are f32; `k` and `v` both f32 or both f16. `None` when the
/// inputs are otherwise or not on the CPU, so the caller takes candle's path. `k` and `v` may be
/// strided views (the cache's filled columns). A query with every column masked gets zeros.
pub fn cpu_attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, query_scalar: f64) -> candle_core::Result<Option<Tensor>> {
    let all_cpu = [q, k, v, mask].iter().all(|t| t.device().is_cpu());
    if !all_cpu || q.dtype() != DType::F32 || mask.dtype() != DType::F32 {
        return Ok(None);
    }
    match (k.dtype(), v.dtype()) {
        (DType::F32, DType::F32) => attention_over::<f32>(q, k, v, mask, query_scalar).map(Some),
        (DType::F16, DType::F16) => attention_over::<f16>(q, k, v, mask, query_scalar).map(Some),
        _ => Ok(None),
    }
}

/// [`cpu_attention`] with keys and values of element type `E`.
fn attention_over<E: CacheValue>(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, query_scalar: f64) -> candle_core::Result<Tensor> {
    let (b, heads, t, d) = q.dims4()?;
    let (_, kv_heads, columns, _) = k.dims4()?;
    // The mask may hold one row for all query positions (encoders).
    let mask_rows = mask.dim(2)?;
    let mask_fits = mask.dims4()? == (b, 1, mask_rows, columns) && (mask_rows == t || mask_rows == 1);
    if kv_heads == 0 || heads % kv_heads != 0 || v.dims4()? != (b, kv_heads, columns, d) || !mask_fits {
        candle_core::bail!("attention shapes do not fit: q {:?}, k {:?}, v {:?}, mask {:?}", q.dims(), k.dims(), v.dims(), mask.dims());
    }
    let (q, mask) = (q.contiguous()?, mask.contiguous()?);
    let (q_store, q_layout) = q.storage_and_layout();
    let (k_store, k_layout) = k.storage_and_layout();
    let (v_store, v_layout) = v.storage_and_layout();
    let (m_store, m_layout) = mask.storage_and_layout();
    let cache_strides = |s: &[usize]| -> candle_core::Result<[usize; 3]> {
        match *s {
            [s0, s1, s2, 1] => Ok([s0, s1, s2]),
            _ => candle_core::bail!("CPU attention needs the cache's head dimension contiguous, strides {s:?}"),
        }
    };
    // Keys come either as rows (head dimension contiguous) or transposed (columns contiguous,
    // as `kv_cache::KvCache` keeps them on the CPU).
    let keys = match *k_layout.stride() {
        [s0, s1, 1, sd] if sd != 1 || d == 1 => KeyLayout::Transposed { row: s0, head: s1, dim: sd },
        [s0, s1, s2, 1] => KeyLayout::Rows { row: s0, head: s1, column: s2 },
        ref s => candle_core::bail!("CPU attention needs keys with one contiguous dimension, strides {s:?}"),
    };
    let group = heads / kv_heads;
    let inputs = Inputs {
        q: &slice::<f32>(&q_store)?[q_layout.start_offset()..],
        k: &slice::<E>(&k_store)?[k_layout.start_offset()..],
        v: &slice::<E>(&v_store)?[v_layout.start_offset()..],
        mask: &slice::<f32>(&m_store)?[m_layout.start_offset()..],
        keys,
        v_strides: cache_strides(v_layout.stride())?,
        heads,
        group,
        t,
        d,
        columns,
        mask_rows,
        // Scaled as candle's `matmul / sqrt(query_scalar)` is: a multiply by the f32 inverse.
        scale: (1.0 / query_scalar.sqrt()) as f32,
    };
    let mut out = vec![0f32; b * t * heads * d];
    let out_ptr = super::SharedOut(out.as_mut_ptr());
    // Fewer (row, head) pairs than threads (decode of one sequence with one key/value head):
    // split the query rows so every thread has some. A row's result does not depend on its task.
    let threads = candle_core::utils::get_num_threads().max(1);
    let per_task = ROWS_PER_TASK.min((group * t).div_ceil(threads.div_ceil((b * kv_heads).max(1)))).max(1);
    let runs = (group * t).div_ceil(per_task);
    candle_core::utils::barrier_pool().execute_chunked(b * kv_heads * runs, |tasks| {
        let mut work = Workspace::default();
        for task in tasks {
            let (row_kv, run) = (task / runs, task % runs);
            let rows = run * per_task..((run + 1) * per_task).min(group * t);
            // SAFETY: each (row, head, position) writes its own d outputs, all < b·t·heads·d.
            unsafe { run_task(&inputs, row_kv / kv_heads, row_kv % kv_heads, rows, &mut work, out_ptr) };
        }
    });
    drop((q_store, k_store, v_store, m_store));
    Tensor::from_vec(out, (b, t, heads * d), q.device())
}

/// The flat inputs of one call, read by every task; keys and values of element type `E`.
#[derive(Clone, Copy)]
struct Inputs<'a, E> {
    q: &'a [f32],
    k: &'a [E],
    v: &'a [E],
    mask: &'a [f32],
    keys: KeyLayout,
    v_strides: [usize; 3],
    heads: usize,
    group: usize,
    t: usize,
    d: usize,
    columns: usize,
    mask_rows: usize,
    scale: f32,
}

/// How the keys lie in memory (strides in values).
#[derive(Clone, Copy)]
enum KeyLayout {
    /// (b, kv_heads, columns, d) with the head dimension contiguous: transposed per task.
    Rows { row: usize, head: usize, column: usize },
    /// Columns contiguous, `dim` apart per dimension: read in place.
    Transposed { row: usize, head: usize, dim: usize },
}

/// A task's buffers, reused across the tasks a thread runs.
#[derive(Default)]
struct Workspace {
    /// Keys `0..width` transposed in blocks of [`NR`]: `[block][dim][NR]`.
    keys_t: Vec<f32>,
    /// Scores, then probabilities: one line of `width` per query row.
    scores: Vec<f32>,
    /// Each query row's first and last visible column.
    spans: Vec<Option<(usize, usize)>>,
}

/// Runs [`attend`] compiled for AVX2, FMA and F16C where the CPU has them. Every sum is the same
/// sequence of IEEE operations (fused multiply-adds included) either way, so are the results.
///
/// # Safety
/// `out` must hold b·t·heads·d values and no other task may write these query rows.
unsafe fn run_task<E: CacheValue>(inputs: &Inputs<E>, row: usize, kv: usize, rows: std::ops::Range<usize>, work: &mut Workspace, out: super::SharedOut) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") && !portable_only() {
        return attend_avx2(inputs, row, kv, rows, work, out);
    }
    attend::<E, false>(inputs, row, kv, rows, work, out)
}

/// Whether a test asked for the portable build.
#[cfg(test)]
fn portable_only() -> bool {
    tests::portable_only()
}

#[cfg(not(test))]
#[inline(always)]
fn portable_only() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn attend_avx2<E: CacheValue>(inputs: &Inputs<E>, row: usize, kv: usize, rows: std::ops::Range<usize>, work: &mut Workspace, out: super::SharedOut) {
    attend::<E, true>(inputs, row, kv, rows, work, out)
}

/// Query rows `rows` (`m = position · group + head in group`) of batch row `row` against key/value
/// head `kv`; writes each one's d outputs. `AVX2`: the inner loops in AVX2+FMA intrinsics (same bits).
#[inline(always)]
fn attend<E: CacheValue, const AVX2: bool>(inputs: &Inputs<E>, row: usize, kv: usize, rows: std::ops::Range<usize>, work: &mut Workspace, out: super::SharedOut) {
    let Inputs { mask, group, columns, mask_rows, d, .. } = *inputs;
    let mask_line = |m: usize| &mask[(row * mask_rows + (m / group).min(mask_rows - 1)) * columns..][..columns];
    work.spans.clear();
    work.spans.extend(rows.clone().map(|m| {
        let line = mask_line(m);
        let first = line.iter().position(|&x| x != f32::NEG_INFINITY)?;
        let last = line.iter().rposition(|&x| x != f32::NEG_INFINITY)?;
        Some((first, last))
    }));
    let width = work.spans.iter().flatten().map(|&(_, last)| last + 1).max().unwrap_or_default();
    transpose_keys(inputs, row, kv, width, &mut work.keys_t);
    work.scores.resize(rows.len() * width.max(1), 0.0);
    let mut first = rows.start;
    while first < rows.end {
        let n = (rows.end - first).min(MR);
        // A tile for each count, so a group of fewer than MR heads (Gemma's 4 in decode) still
        // loads each key block and value row once for all of them.
        match n {
            6 => attend_rows::<E, 6, AVX2>(inputs, row, kv, first, rows.start, width, work, out),
            5 => attend_rows::<E, 5, AVX2>(inputs, row, kv, first, rows.start, width, work, out),
            4 => attend_rows::<E, 4, AVX2>(inputs, row, kv, first, rows.start, width, work, out),
            3 => attend_rows::<E, 3, AVX2>(inputs, row, kv, first, rows.start, width, work, out),
            2 => attend_rows::<E, 2, AVX2>(inputs, row, kv, first, rows.start, width, work, out),
            _ => attend_rows::<E, 1, AVX2>(inputs, row, kv, first, rows.start, width, work, out),
        }
        first += n;
    }
    let _ = d;
}

/// Copies keys `0..width` of (`row`, `kv`) into `keys_t` as `[block][dim][NR]`, zeros past
/// `width`, when they come as rows; transposed keys are read in place.
#[inline(always)]
fn transpose_keys<E: CacheValue>(inputs: &Inputs<E>, row: usize, kv: usize, width: usize, keys_t: &mut Vec<f32>) {
    let Inputs { k, keys, d, .. } = *inputs;
    let KeyLayout::Rows { row: rs, head: hs, column: cs } = keys else { return };
    let blocks = width.div_ceil(NR);
    keys_t.clear();
    keys_t.resize(blocks * d * NR, 0.0);
    let base = &k[row * rs + kv * hs..];
    for c in 0..width {
        let key = &base[c * cs..][..d];
        let block = &mut keys_t[(c / NR) * d * NR..][..d * NR];
        for (dim, &x) in key.iter().enumerate() {
            block[dim * NR + c % NR] = x.widen();
        }
    }
}

/// Query rows `first..first + R`: scores, softmax over each row's span, weighted values.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn attend_rows<E: CacheValue, const R: usize, const AVX2: bool>(
    inputs: &Inputs<E>,
    row: usize,
    kv: usize,
    first: usize,
    task_first: usize,
    width: usize,
    work: &mut Workspace,
    out: super::SharedOut,
) {
    let Inputs { q, v, mask, v_strides: vs, heads, group, t, d, columns, mask_rows, scale, .. } = *inputs;
    let spans: [Option<(usize, usize)>; R] = std::array::from_fn(|i| work.spans[first + i - task_first]);
    let (Some(lo), Some(hi)) = (spans.iter().flatten().map(|s| s.0).min(), spans.iter().flatten().map(|s| s.1).max()) else {
        // Nothing visible: zeros.
        for i in 0..R {
            let m = first + i;
            let (pos, head) = (m / group, kv * group + m % group);
            let at = ((row * t + pos) * heads + head) * d;
            // SAFETY: these query rows are this task's own (see `run_task`).
            unsafe { std::ptr::write_bytes(out.get().add(at), 0, d) };
        }
        return;
    };
    let query = |i: usize| {
        let m = first + i;
        &q[((row * heads + kv * group + m % group) * t + m / group) * d..][..d]
    };
    let queries: [&[f32]; R] = std::array::from_fn(query);
    let masks: [&[f32]; R] =
        std::array::from_fn(|i| &mask[(row * mask_rows + ((first + i) / group).min(mask_rows - 1)) * columns..][..columns]);
    let line0 = (first - task_first) * width;
    let scores = &mut work.scores[line0..line0 + R * width];

    // Scores of the columns lo..=hi, in tiles of R rows × NR keys.
    for block in lo / NR..=hi / NR {
        let tile = match inputs.keys {
            KeyLayout::Rows { .. } => score_tile::<f32, R, AVX2>(&queries, &work.keys_t[block * d * NR..], NR, d),
            // Columns past the filled ones lie inside the buffer's capacity, or the row's next
            // head; their lanes are computed and dropped.
            KeyLayout::Transposed { row: rs, head: hs, dim } => {
                score_tile::<E, R, AVX2>(&queries, &inputs.k[row * rs + kv * hs + block * NR..], dim, d)
            }
        };
        let (c0, c1) = ((block * NR).max(lo), ((block + 1) * NR).min(hi + 1));
        for i in 0..R {
            for c in c0..c1 {
                scores[i * width + c] = tile[i][c - block * NR] * scale + masks[i][c];
            }
        }
    }
    // Probabilities over each row's own span, aligned to its first column; zero elsewhere.
    for (i, span) in spans.iter().enumerate() {
        let line = &mut scores[i * width..(i + 1) * width];
        match *span {
            Some((first_col, last_col)) => {
                softmax_in_place(&mut line[first_col..=last_col]);
                line[lo..first_col].fill(0.0);
                line[last_col + 1..=hi].fill(0.0);
            }
            None => line[lo..=hi].fill(0.0),
        }
    }
    // Weighted values, DW output lanes at a time, columns in order.
    let values = &v[row * vs[0] + kv * vs[1]..];
    for lane0 in (0..d).step_by(DW) {
        let lanes = (d - lane0).min(DW);
        let acc = weighted_values::<E, R, AVX2>(scores, width, lo..hi + 1, &values[lane0..], vs[2], lanes);
        for (i, acc) in acc.iter().enumerate() {
            let m = first + i;
            let (pos, head) = (m / group, kv * group + m % group);
            let at = ((row * t + pos) * heads + head) * d + lane0;
            // SAFETY: these query rows are this task's own (see `run_task`).
            unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), out.get().add(at), lanes) };
        }
    }
}

/// `Σ_c p_i(c) · value(c)` over `columns` in order, as fused multiply-adds, for `lanes` (≤ DW)
/// lanes of R rows: `p_i(c)` is `probabilities[i · width + c]`, `value(c)` is
/// `values[c · stride..][..lanes]`; lanes past `lanes` stay zero.
#[inline(always)]
fn weighted_values<E: CacheValue, const R: usize, const AVX2: bool>(
    probabilities: &[f32],
    width: usize,
    columns: std::ops::Range<usize>,
    values: &[E],
    stride: usize,
    lanes: usize,
) -> [[f32; DW]; R] {
    #[cfg(target_arch = "x86_64")]
    if AVX2
        && lanes == DW
        && !columns.is_empty()
        && probabilities.len() >= (R - 1) * width + columns.end
        && values.len() >= (columns.end - 1) * stride + DW
    {
        // SAFETY: `AVX2` is set only under `attend_avx2` (features checked); bounds checked above.
        return unsafe { super::attention_avx2::weighted_values::<E, R>(probabilities.as_ptr(), width, columns, values.as_ptr(), stride) };
    }
    let mut acc = [[0f32; DW]; R];
    for c in columns {
        let value = &values[c * stride..][..lanes];
        for (i, acc) in acc.iter_mut().enumerate() {
            let p = probabilities[i * width + c];
            for (a, &x) in acc.iter_mut().zip(value) {
                *a = p.mul_add(x.widen(), *a);
            }
        }
    }
    acc
}

/// Dot products of R queries with NR keys laid out by dimension (`keys[dim · stride..][..NR]`):
/// each a chain of fused multiply-adds over the dimension, in order.
#[inline(always)]
fn score_tile<E: CacheValue, const R: usize, const AVX2: bool>(queries: &[&[f32]; R], keys: &[E], stride: usize, d: usize) -> [[f32; NR]; R] {
    #[cfg(target_arch = "x86_64")]
    if AVX2 && d > 0 && keys.len() >= (d - 1) * stride + NR && queries.iter().all(|q| q.len() >= d) {
        let pointers: [*const f32; R] = std::array::from_fn(|i| queries[i].as_ptr());
        // SAFETY: `AVX2` is set only under `attend_avx2` (features checked); bounds checked above.
        return unsafe { super::attention_avx2::score_tile::<E, R>(&pointers, keys.as_ptr(), stride, d) };
    }
    let mut acc = [[0f32; NR]; R];
    for dim in 0..d {
        // Zeros where the storage ends inside this tile: those lanes are dropped by the caller.
        let mut lanes = [0f32; NR];
        for (lane, key) in lanes.iter_mut().zip(keys.get(dim * stride..).unwrap_or(&[])) {
            *lane = key.widen();
        }
        for (a, query) in acc.iter_mut().zip(queries) {
            let x = query[dim];
            for (a, &k) in a.iter_mut().zip(&lanes) {
                *a = x.mul_add(k, *a);
            }
        }
    }
    acc
}

/// Softmax of one row's visible span in place: masked entries (-inf) become exact zeros; the sum
/// runs in eight lanes over the span's own offsets, then adds the lanes in a fixed order.
#[inline(always)]
fn softmax_in_place(span: &mut [f32]) {
    let max = span.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    let mut lanes = [0f32; 8];
    let mut chunks = span.chunks_exact_mut(8);
    for chunk in &mut chunks {
        for (x, lane) in chunk.iter_mut().zip(lanes.iter_mut()) {
            *x = super::math::exp(*x - max);
            *lane += *x;
        }
    }
    for (x, lane) in chunks.into_remainder().iter_mut().zip(lanes.iter_mut()) {
        *x = super::math::exp(*x - max);
        *lane += *x;
    }
    let sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for x in span.iter_mut() {
        *x /= sum;
    }
}

/// The contents of a CPU storage of element type `T`.
fn slice<T: WithDType>(s: &Storage) -> candle_core::Result<&[T]> {
    match s {
        Storage::Cpu(cpu) => cpu.as_slice::<T>(),
        _ => candle_core::bail!("CPU attention reads CPU tensors only"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use candle_core::{DType, Device, Tensor};

    use super::cpu_attention;

    /// Set by a test to run the portable build of the kernel (what Arm and older x86 CPUs run).
    static PORTABLE_ONLY: AtomicBool = AtomicBool::new(false);

    pub(super) fn portable_only() -> bool {
        PORTABLE_ONLY.load(Ordering::Relaxed)
    }

    /// The portable build and the AVX2+FMA build (intrinsics) give the same bits: fused
    /// multiply-adds and the vectorized `exp` round the same everywhere. Shapes cover every tile
    /// height (groups of 1 to 7 heads), Gemma's 256-wide heads in decode (one key/value head, its
    /// rows split over the threads), a head width off the 16-lane passes, and transposed keys.
    #[test]
    fn portable_build_equals_avx2_bit_for_bit() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        for (b, heads, kv_heads, t, d, columns) in
            [(2, 6, 2, 21, 64, 40), (1, 4, 1, 1, 256, 300), (2, 14, 2, 3, 64, 70), (1, 5, 1, 9, 24, 33), (3, 3, 3, 2, 32, 17), (1, 2, 1, 5, 16, 5)]
        {
            let q = Tensor::randn(0f32, 1.0, (b, heads, t, d), &dev)?;
            let k = Tensor::randn(0f32, 1.0, (b, kv_heads, columns, d), &dev)?;
            let v = Tensor::randn(0f32, 1.0, (b, kv_heads, columns, d), &dev)?;
            let masks = (0..b).map(|r| causal_mask(r * 3 % columns.min(t + 1), columns, t)).collect::<candle_core::Result<Vec<_>>>()?;
            let mask = Tensor::cat(&masks, 0)?;
            let k_t = k.transpose(2, 3)?.contiguous()?.transpose(2, 3)?;
            let half = |t: &Tensor| t.to_dtype(DType::F16);
            let (k16, k16_t, v16) = (half(&k)?, half(&k_t)?, half(&v)?);
            for (keys, values) in [(&k, &v), (&k_t, &v), (&k16, &v16), (&k16_t, &v16)] {
                let fast = cpu_attention(&q, keys, values, &mask, d as f64)?.expect("CPU f32 queries");
                PORTABLE_ONLY.store(true, Ordering::Relaxed);
                let portable = cpu_attention(&q, keys, values, &mask, d as f64);
                PORTABLE_ONLY.store(false, Ordering::Relaxed);
                let portable = portable?.expect("CPU f32 queries");
                let what = format!("heads {heads}/{kv_heads}, t {t}, d {d}, {:?} keys", keys.dtype());
                assert_eq!(max_diff(&fast, &portable)?, 0.0, "{what}");
                let widen = |t: &Tensor| t.to_dtype(DType::F32);
                let reference = crate::layers::candle_attention(&q, &widen(keys)?, &widen(values)?, &mask, d as f64)?;
                let diff = max_diff(&fast, &reference)?;
                assert!(diff < 1e-5, "{what}: {diff} from candle's");
            }
        }
        Ok(())
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> candle_core::Result<f32> {
        (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()
    }

    /// The mask `generate::batch::step_inputs` builds: `pad` columns of left padding, then
    /// causal over the rest; (1, 1, t, width) for the last `t` of `width` positions. A padding
    /// query sees itself only.
    fn causal_mask(pad: usize, width: usize, t: usize) -> candle_core::Result<Tensor> {
        let mut m = vec![f32::NEG_INFINITY; t * width];
        for i in 0..t {
            let col = width - t + i;
            let first = if col < pad { col } else { pad };
            m[i * width + first..=i * width + col].iter_mut().for_each(|v| *v = 0.0);
        }
        Tensor::from_vec(m, (1, 1, t, width), &Device::Cpu)
    }

    /// The kernel equals candle's path (`layers::candle_attention`) on grouped heads, masked
    /// columns, strided cache views, one and many query positions.
    #[test]
    fn equals_candle_path() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        for t in [1, 2, 37] {
            let (b, heads, kv_heads, d, capacity, columns) = (3, 6, 2, 24, 80, 59);
            let q = Tensor::randn(0f32, 1.0, (b, heads, t, d), &dev)?;
            let k_buf = Tensor::randn(0f32, 1.0, (b, kv_heads, capacity, d), &dev)?;
            let v_buf = Tensor::randn(0f32, 1.0, (b, kv_heads, capacity, d), &dev)?;
            let (k, v) = (k_buf.narrow(2, 0, columns)?, v_buf.narrow(2, 0, columns)?);
            // Row r has r·5 columns of left padding.
            let masks = (0..b).map(|r| causal_mask(r * 5, columns, t)).collect::<candle_core::Result<Vec<_>>>()?;
            let mask = Tensor::cat(&masks, 0)?;
            let ours = cpu_attention(&q, &k, &v, &mask, d as f64)?.expect("f32 on the CPU takes our path");
            let reference = crate::layers::candle_attention(&q, &k.contiguous()?, &v.contiguous()?, &mask, d as f64)?;
            assert_eq!(ours.dims(), reference.dims());
            let diff = max_diff(&ours, &reference)?;
            assert!(diff < 1e-5, "t = {t}: attention differs from candle's by {diff}");
            // Keys transposed in place, as the KV cache keeps them, with a capacity that ends
            // inside a key tile: the same result, bit for bit.
            let k_t = k.transpose(2, 3)?.pad_with_zeros(3, 0, 2)?.contiguous()?.narrow(3, 0, columns)?.transpose(2, 3)?;
            assert_eq!(k_t.stride()[2], 1, "keys transposed");
            let transposed = cpu_attention(&q, &k_t, &v, &mask, d as f64)?.expect("f32 on the CPU takes our path");
            assert_eq!(max_diff(&transposed, &ours)?, 0.0, "t = {t}: transposed keys changed the result");
        }
        Ok(())
    }

    /// A sequence's attention is bit-identical alone, left-padded beside a longer row, and split
    /// into chunks of query positions against a growing cache.
    #[test]
    fn independent_of_padding_batch_and_chunking() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let (heads, kv_heads, d, len, pad) = (4, 2, 64, 45, 19);
        let q = Tensor::randn(0f32, 1.0, (1, heads, len, d), &dev)?;
        let k = Tensor::randn(0f32, 1.0, (1, kv_heads, len, d), &dev)?;
        let v = Tensor::randn(0f32, 1.0, (1, kv_heads, len, d), &dev)?;
        let alone = cpu_attention(&q, &k, &v, &causal_mask(0, len, len)?, d as f64)?.expect("CPU f32");

        // Beside a row of pad + len real columns: this row is left-padded by `pad`.
        let noise = |shape: (usize, usize, usize, usize)| Tensor::randn(0f32, 1.0, shape, &dev);
        let q_pad = Tensor::cat(&[&noise((1, heads, pad, d))?, &q], 2)?;
        let k_pad = Tensor::cat(&[&noise((1, kv_heads, pad, d))?, &k], 2)?;
        let v_pad = Tensor::cat(&[&noise((1, kv_heads, pad, d))?, &v], 2)?;
        let other = |shape| noise(shape);
        let qb = Tensor::cat(&[&other((1, heads, pad + len, d))?, &q_pad], 0)?;
        let kb = Tensor::cat(&[&other((1, kv_heads, pad + len, d))?, &k_pad], 0)?;
        let vb = Tensor::cat(&[&other((1, kv_heads, pad + len, d))?, &v_pad], 0)?;
        let mask = Tensor::cat(&[&causal_mask(0, pad + len, pad + len)?, &causal_mask(pad, pad + len, pad + len)?], 0)?;
        let batched = cpu_attention(&qb, &kb, &vb, &mask, d as f64)?.expect("CPU f32");
        let ours = batched.narrow(0, 1, 1)?.narrow(1, pad, len)?;
        assert_eq!(max_diff(&ours, &alone)?, 0.0, "padding and a neighbour changed the result");

        // Chunks of 7 query positions, each against every column so far.
        let mut parts = Vec::new();
        let mut start = 0;
        while start < len {
            let n = 7.min(len - start);
            let end = start + n;
            let (kc, vc) = (k.narrow(2, 0, end)?, v.narrow(2, 0, end)?);
            parts.push(cpu_attention(&q.narrow(2, start, n)?, &kc, &vc, &causal_mask(0, end, n)?, d as f64)?.expect("CPU f32"));
            start = end;
        }
        assert_eq!(max_diff(&Tensor::cat(&parts, 1)?, &alone)?, 0.0, "chunking changed the result");
        Ok(())
    }

    /// f16 keys and values (the KV cache's default) give the same bits as their f32 widenings:
    /// the kernel widens on load and sums in f32 either way. Mixed dtypes are left to candle.
    #[test]
    fn f16_cache_equals_its_exact_f32_widening() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let (b, heads, kv_heads, t, d, columns) = (2, 8, 2, 5, 64, 90);
        let q = Tensor::randn(0f32, 1.0, (b, heads, t, d), &dev)?;
        let k16 = Tensor::randn(0f32, 1.0, (b, kv_heads, columns, d), &dev)?.to_dtype(DType::F16)?;
        let v16 = Tensor::randn(0f32, 1.0, (b, kv_heads, columns, d), &dev)?.to_dtype(DType::F16)?;
        let mask = Tensor::cat(&[&causal_mask(0, columns, t)?, &causal_mask(11, columns, t)?], 0)?;
        let transposed = |k: &Tensor| k.transpose(2, 3)?.contiguous()?.transpose(2, 3);
        let (k32, v32) = (k16.to_dtype(DType::F32)?, v16.to_dtype(DType::F32)?);
        let from_half = cpu_attention(&q, &transposed(&k16)?, &v16, &mask, d as f64)?.expect("f16 cache on the CPU");
        let from_full = cpu_attention(&q, &transposed(&k32)?, &v32, &mask, d as f64)?.expect("f32 on the CPU");
        assert_eq!(max_diff(&from_half, &from_full)?, 0.0);
        assert!(cpu_attention(&q, &k16, &v32, &mask, d as f64)?.is_none(), "mixed key and value dtypes");
        Ok(())
    }

    #[test]
    fn fully_masked_queries_get_zeros_and_other_dtypes_decline() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let q = Tensor::ones((1, 2, 3, 8), candle_core::DType::F32, &dev)?;
        let k = Tensor::ones((1, 1, 3, 8), candle_core::DType::F32, &dev)?;
        let mask = Tensor::full(f32::NEG_INFINITY, (1, 1, 3, 3), &dev)?;
        let y = cpu_attention(&q, &k, &k, &mask, 8.0)?.expect("CPU f32");
        assert_eq!(y.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?, 0.0);
        let half = |t: &Tensor| t.to_dtype(candle_core::DType::F16);
        assert!(cpu_attention(&half(&q)?, &half(&k)?, &half(&k)?, &half(&mask)?, 8.0)?.is_none());
        Ok(())
    }
}
