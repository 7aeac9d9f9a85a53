//! The KV cache: every layer's keys and values for the running batch, in buffers that grow in
//! place, kept in f16 on the CPU unless `CODESWEEP_KV_CACHE=f32` says otherwise. A layer that
//! sees only a window of the past (Gemma 3's local layers) may forget the columns before it.

use candle_core::{DType, Tensor};

use crate::error::{EngineError, Result};

/// Keys and values of every layer for the running batch, written in place into buffers that
/// grow in steps of [`KV_GROWTH`] columns, so a decode step copies only its own column.
#[derive(Debug, Default)]
pub struct KvCache {
    layers: Vec<Option<LayerCache>>,
    precision: CachePrecision,
    keep_everything: bool,
}

/// The environment variable that sets the [`CachePrecision`] of a process's CPU caches.
pub const KV_CACHE_ENV: &str = "CODESWEEP_KV_CACHE";

/// What a CPU cache keeps of an f32 model's keys and values. Other devices and dtypes keep the
/// model's activation dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CachePrecision {
    /// IEEE half precision, rounded to nearest even as written (as llama.cpp's default cache):
    /// half the memory, and half the bytes each decode step reads. Attention widens them back
    /// exactly and sums in f32.
    #[default]
    F16,
    /// The f32 values the layer computed: the model's arithmetic as written, twice the memory.
    F32,
}

impl CachePrecision {
    /// Parses `f16` or `f32`.
    pub fn parse(value: &str) -> Result<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "f16" => Ok(Self::F16),
            "f32" => Ok(Self::F32),
            _ => Err(EngineError::Setting {
                name: KV_CACHE_ENV.to_string(),
                message: format!("`{value}` is not a KV cache precision; use `f16` (the default) or `f32`"),
            }),
        }
    }

    /// From [`KV_CACHE_ENV`]; [`CachePrecision::F16`] when it is unset or empty.
    pub fn from_env() -> Result<Self> {
        match std::env::var(KV_CACHE_ENV) {
            Ok(value) if !value.trim().is_empty() => Self::parse(&value),
            _ => Ok(Self::default()),
        }
    }

    /// The dtype a cache stores keys and values given as `k`.
    fn stored_dtype(self, k: &Tensor) -> DType {
        match self {
            Self::F16 if keys_transposed(k) => DType::F16,
            _ => k.dtype(),
        }
    }
}

/// Columns a cache buffer grows by when full: one copy of the cache per this many decode steps.
pub const KV_GROWTH: usize = 256;

/// One layer's buffers, of which the first `len` columns are filled, holding the batch's columns
/// `first..first + len` (`first` > 0 once the layer has forgotten older ones): values (b, kv_heads,
/// capacity, head_dim); keys the same, or (b, kv_heads, head_dim, capacity) when `keys_t` (an f32
/// model on the CPU), so attention reads a block of keys per dimension with one load and never
/// transposes. The buffers' dtype is what the cache stores (see [`CachePrecision`]).
#[derive(Debug, Clone)]
struct LayerCache {
    k: Tensor,
    v: Tensor,
    len: usize,
    keys_t: bool,
    first: usize,
}

/// Whether keys of this device and dtype are cached transposed (see [`LayerCache`]): those the
/// engine's CPU attention reads.
fn keys_transposed(k: &Tensor) -> bool {
    k.device().is_cpu() && k.dtype() == DType::F32
}

impl LayerCache {
    fn capacity(&self) -> usize {
        self.v.dims().get(2).copied().unwrap_or(0)
    }

    /// The column dimension of the key buffer.
    fn key_columns_dim(&self) -> usize {
        if self.keys_t {
            3
        } else {
            2
        }
    }

    /// The filled columns as views of the buffers, both (b, kv_heads, len, head_dim) (keys
    /// strided when transposed).
    fn filled(&self) -> candle_core::Result<(Tensor, Tensor)> {
        let k = self.k.narrow(self.key_columns_dim(), 0, self.len)?;
        let k = if self.keys_t { k.transpose(2, 3)? } else { k };
        Ok((k, self.v.narrow(2, 0, self.len)?))
    }

    /// New buffers of `capacity` columns and element type `dtype` holding columns
    /// `from..from + len` of the keys and values `k`, `v` given as (b, kv_heads, columns,
    /// head_dim) (any strides).
    fn with_capacity(k: &Tensor, v: &Tensor, from: usize, len: usize, capacity: usize, keys_t: bool, dtype: DType) -> candle_core::Result<Self> {
        let grow = |t: &Tensor, transpose: bool| -> candle_core::Result<Tensor> {
            let (b, heads, _, d) = t.dims4()?;
            let shape = if transpose { (b, heads, d, capacity) } else { (b, heads, capacity, d) };
            let buffer = Tensor::zeros(shape, dtype, t.device())?;
            if len > 0 {
                let part = t.narrow(2, from, len)?.to_dtype(dtype)?;
                let (part, dim) = if transpose { (part.transpose(2, 3)?, 3) } else { (part, 2) };
                buffer.slice_set(&part.contiguous()?, dim, 0)?;
            }
            Ok(buffer)
        };
        Ok(Self { k: grow(k, keys_t)?, v: grow(v, false)?, len, keys_t, first: 0 })
    }

    /// Buffers of `capacity` columns holding this cache's filled columns `from..len` (counted in
    /// the buffer), which start at the batch's column `self.first + from`.
    fn regrown(&self, from: usize, capacity: usize) -> candle_core::Result<Self> {
        let (k, v) = self.filled()?;
        let regrown = Self::with_capacity(&k, &v, from, self.len - from, capacity, self.keys_t, self.v.dtype())?;
        Ok(Self { first: self.first + from, ..regrown })
    }
}

impl KvCache {
    /// An empty cache for `num_layers` layers that keeps an f32 model's keys and values on the
    /// CPU at `precision`.
    pub fn new(num_layers: usize, precision: CachePrecision) -> Self {
        Self { layers: vec![None; num_layers], precision, keep_everything: false }
    }

    /// This cache, never forgetting a column ([`KvCache::forget_before`] does nothing): what a
    /// sliding window's results are compared against.
    pub fn keeping_everything(self) -> Self {
        Self { keep_everything: true, ..self }
    }

    /// Bytes held by the buffers (their whole capacity).
    pub fn bytes(&self) -> usize {
        let size = |t: &Tensor| t.elem_count() * t.dtype().size_in_bytes();
        self.layers.iter().flatten().map(|c| size(&c.k) + size(&c.v)).sum()
    }

    /// Number of columns the batch has run through the cache (0 when empty), forgotten ones
    /// included: the column the next step starts at.
    pub fn columns(&self) -> usize {
        self.layers.iter().flatten().next().map_or(0, |c| c.first + c.len)
    }

    /// The batch's columns `layer` still holds (empty before its first step); what
    /// [`KvCache::append`] returns are these plus the step's own.
    pub fn kept_columns(&self, layer: usize) -> std::ops::Range<usize> {
        match self.layers.get(layer) {
            Some(Some(c)) => c.first..c.first + c.len,
            _ => 0..0,
        }
    }

    /// Lets `layer` forget the batch's columns before `column`, which none of its queries can
    /// see any more (a sliding window's past): they go once at least [`KV_GROWTH`] of them have
    /// piled up, so the copy that moves the rest is paid once per that many steps, and the layer
    /// holds under its window plus that many columns (and a step's own). Attention's results do
    /// not change: the forgotten columns were masked, and masked columns add exact zeros.
    pub fn forget_before(&mut self, layer: usize, column: usize) -> candle_core::Result<()> {
        let Some(slot) = self.layers.get_mut(layer).filter(|_| !self.keep_everything) else { return Ok(()) };
        let Some(c) = slot.take() else { return Ok(()) };
        let dead = column.saturating_sub(c.first).min(c.len);
        *slot = Some(if dead >= KV_GROWTH { c.regrown(dead, (c.len - dead + 1).next_multiple_of(KV_GROWTH))? } else { c });
        Ok(())
    }

    /// Appends this step's keys and values of `layer`, (b, kv_heads, t, head_dim), and returns
    /// views of all of them, (b, kv_heads, columns, head_dim) each, in the stored dtype.
    pub fn append(&mut self, layer: usize, k: Tensor, v: Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let t = k.dim(2)?;
        let slot = &mut self.layers[layer];
        let needed = slot.as_ref().map_or(0, |c| c.len) + t;
        let cache = match slot.take() {
            Some(c) if c.capacity() >= needed => c,
            Some(c) => c.regrown(0, needed.next_multiple_of(KV_GROWTH))?,
            None => {
                let dtype = self.precision.stored_dtype(&k);
                LayerCache::with_capacity(&k, &v, 0, 0, needed.next_multiple_of(KV_GROWTH), keys_transposed(&k), dtype)?
            }
        };
        let (k, v) = (k.to_dtype(cache.v.dtype())?, v.to_dtype(cache.v.dtype())?);
        if cache.keys_t {
            cache.k.slice_set(&k.transpose(2, 3)?.contiguous()?, 3, cache.len)?;
        } else {
            cache.k.slice_set(&k.contiguous()?, 2, cache.len)?;
        }
        cache.v.slice_set(&v.contiguous()?, 2, cache.len)?;
        let cache = LayerCache { len: needed, ..cache };
        let filled = cache.filled()?;
        *slot = Some(cache);
        Ok(filled)
    }

    /// Keeps only the batch rows `rows` (indices into the current batch), in that order.
    pub fn retain_rows(&mut self, rows: &Tensor) -> candle_core::Result<()> {
        for slot in &mut self.layers {
            if let Some(c) = slot.take() {
                *slot = Some(LayerCache { k: c.k.index_select(rows, 0)?, v: c.v.index_select(rows, 0)?, ..c });
            }
        }
        Ok(())
    }

    /// For a step about to run: lets `layers`, which see only the last `window` positions, forget
    /// the columns no query of this step or later can see ([`KvCache::forget_before`]), and
    /// returns their `mask` (b, 1, t, columns) cut to the columns they still hold, once for all
    /// of them (they forget alike).
    pub fn slide_window(&mut self, layers: impl IntoIterator<Item = usize>, window: usize, mask: &Tensor) -> candle_core::Result<Tensor> {
        // This step's first query, at column `start`, sees nothing before `start + 1 - window`.
        let start = self.columns();
        let mut held_from = usize::MAX;
        for layer in layers {
            self.forget_before(layer, (start + 1).saturating_sub(window))?;
            held_from = held_from.min(self.kept_columns(layer).start);
        }
        match held_from {
            0 | usize::MAX => Ok(mask.clone()),
            from => mask.narrow(3, from, mask.dim(3)? - from)?.contiguous(),
        }
    }

    /// Drops the batch's first `n` columns (padding no remaining row needs): the batch's
    /// column `n` becomes column 0. A layer that had forgotten some of them drops only the rest.
    pub fn drop_front_columns(&mut self, n: usize) -> candle_core::Result<()> {
        for slot in &mut self.layers {
            if let Some(c) = slot.take() {
                let held = n.saturating_sub(c.first).min(c.len);
                let c = if held > 0 { c.regrown(held, c.capacity())? } else { c };
                *slot = Some(LayerCache { first: c.first.saturating_sub(n), ..c });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    use super::{CachePrecision, KvCache, KV_GROWTH};

    fn max_diff(a: &Tensor, b: &Tensor) -> candle_core::Result<f32> {
        (a.to_dtype(DType::F32)? - b.to_dtype(DType::F32)?)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()
    }

    /// An f16 cache holds each value rounded once to f16 (nearest even, as `to_dtype` does), keys
    /// transposed for the CPU kernel, across a buffer growth, in half the bytes of an f32 cache;
    /// a model computing in another dtype keeps its own.
    #[test]
    fn f16_cache_rounds_once_and_halves_memory() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let (mut half, mut full) = (KvCache::new(1, CachePrecision::F16), KvCache::new(1, CachePrecision::F32));
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for t in [37, 1, 300] {
            let k = Tensor::randn(0f32, 1.0, (2, 3, t, 8), &dev)?;
            let v = Tensor::randn(0f32, 3.0, (2, 3, t, 8), &dev)?;
            let (hk, hv) = half.append(0, k.clone(), v.clone())?;
            full.append(0, k.clone(), v.clone())?;
            keys.push(k);
            values.push(v);
            assert_eq!((hk.dtype(), hv.dtype()), (DType::F16, DType::F16));
            assert_eq!(hk.stride()[2], 1, "keys are kept transposed");
            let rounded = |parts: &[Tensor]| Tensor::cat(parts, 2)?.to_dtype(DType::F16);
            assert_eq!(max_diff(&hk, &rounded(&keys)?)?, 0.0);
            assert_eq!(max_diff(&hv, &rounded(&values)?)?, 0.0);
        }
        assert!(half.bytes() > 0);
        assert_eq!(half.bytes() * 2, full.bytes());
        let mut bf16_model = KvCache::new(1, CachePrecision::F16);
        let k = Tensor::randn(0f32, 1.0, (1, 1, 4, 8), &dev)?.to_dtype(DType::BF16)?;
        let (ck, _) = bf16_model.append(0, k.clone(), k)?;
        assert_eq!(ck.dtype(), DType::BF16);
        Ok(())
    }

    /// A layer forgets only once KV_GROWTH dead columns piled up, keeps counting the batch's
    /// columns, and later drops of common padding and appends line up with what went in.
    #[test]
    fn forgetting_keeps_the_tail_in_line() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let mut cache = KvCache::new(2, CachePrecision::F32);
        let k = Tensor::randn(0f32, 1.0, (2, 1, 300, 4), &dev)?;
        cache.append(0, k.clone(), k.clone())?;
        cache.append(1, k.clone(), k.clone())?;
        cache.forget_before(0, KV_GROWTH - 1)?;
        assert_eq!(cache.kept_columns(0), 0..300, "fewer than KV_GROWTH dead columns stay");
        cache.forget_before(0, 290)?;
        assert_eq!((cache.kept_columns(0), cache.kept_columns(1), cache.columns()), (290..300, 0..300, 300));
        cache.drop_front_columns(5)?;
        assert_eq!((cache.kept_columns(0), cache.kept_columns(1), cache.columns()), (285..295, 0..295, 295));
        let t = Tensor::randn(0f32, 1.0, (2, 1, 1, 4), &dev)?;
        let (local, _) = cache.append(0, t.clone(), t.clone())?;
        let (global, _) = cache.append(1, t.clone(), t.clone())?;
        let whole = Tensor::cat(&[&k.narrow(2, 5, 295)?, &t], 2)?;
        assert_eq!(max_diff(&global, &whole)?, 0.0);
        assert_eq!(max_diff(&local, &whole.narrow(2, 285, 11)?)?, 0.0);
        let mut keeping = KvCache::new(1, CachePrecision::F32).keeping_everything();
        keeping.append(0, k.clone(), k)?;
        keeping.forget_before(0, 299)?;
        assert_eq!(keeping.kept_columns(0), 0..300);
        Ok(())
    }

    #[test]
    fn precision_setting_is_parsed_or_named() {
        assert_eq!(CachePrecision::parse("F16").ok(), Some(CachePrecision::F16));
        assert_eq!(CachePrecision::parse(" f32").ok(), Some(CachePrecision::F32));
        let err = CachePrecision::parse("fp8").map(|_| ()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("CODESWEEP_KV_CACHE") && err.contains("`fp8`") && err.contains("f32"), "{err}");
    }

    /// Appends across several buffer growths, then drops rows and front columns: the views
    /// always equal the concatenation of what went in.
    #[test]
    fn cache_views_equal_concatenation_across_growth() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let mut cache = KvCache::new(2, CachePrecision::F32);
        let (mut all_k, mut all_v) = (Vec::new(), Vec::new());
        let steps = [100, 1, 200, 1, 1, KV_GROWTH, 3];
        for t in steps {
            let k = Tensor::randn(0f32, 1.0, (3, 2, t, 4), &dev)?;
            let v = Tensor::randn(0f32, 1.0, (3, 2, t, 4), &dev)?;
            cache.append(0, k.clone(), v.clone())?;
            let (ck, cv) = cache.append(1, k.clone(), v.clone())?;
            all_k.push(k);
            all_v.push(v);
            let (ek, ev) = (Tensor::cat(&all_k, 2)?, Tensor::cat(&all_v, 2)?);
            assert_eq!(ck.dims(), ek.dims());
            assert_eq!((ck - &ek)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?, 0.0);
            assert_eq!((cv - &ev)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?, 0.0);
        }
        let total: usize = steps.iter().sum();
        assert_eq!(cache.columns(), total);
        cache.retain_rows(&Tensor::new(&[2u32, 0], &dev)?)?;
        cache.drop_front_columns(7)?;
        let t = Tensor::randn(0f32, 1.0, (2, 2, 1, 4), &dev)?;
        let (ck, _) = cache.append(0, t.clone(), t.clone())?;
        let expected = Tensor::cat(&all_k, 2)?.index_select(&Tensor::new(&[2u32, 0], &dev)?, 0)?.narrow(2, 7, total - 7)?;
        let expected = Tensor::cat(&[&expected, &t], 2)?;
        assert_eq!(ck.dims(), &[2, 2, total - 7 + 1, 4]);
        assert_eq!((ck - expected)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?, 0.0);
        Ok(())
    }
}

