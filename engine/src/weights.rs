//! Weight loading by name from a GGUF file (kept quantized) or Hugging Face safetensors (dense).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::{gguf_file, GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Module, Tensor};

use crate::error::{EngineError, Result};

mod stacked;
use crate::kernels::{self, BlockFormat, Isa, KQuantFormat, KQuantWeights, PackedWeights, Q8KRows, QuantizedRows};

/// `model.safetensors`, or the shards named by `model.safetensors.index.json`.
pub(crate) fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if index.exists() {
        let text = std::fs::read_to_string(&index).map_err(|source| EngineError::Io { path: index.clone(), source })?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| EngineError::Model { path: index.clone(), message: format!("not valid JSON: {e}") })?;
        let map = json.get("weight_map").and_then(|m| m.as_object()).ok_or_else(|| EngineError::Metadata {
            path: index.clone(),
            key: "weight_map".into(),
            message: "missing or not an object".into(),
        })?;
        let mut files: Vec<PathBuf> = map.values().filter_map(|v| v.as_str()).map(|f| dir.join(f)).collect();
        files.sort();
        files.dedup();
        for f in &files {
            if !f.exists() {
                return Err(EngineError::Model { path: f.clone(), message: "shard listed in the index is missing".into() });
            }
        }
        return Ok(files);
    }
    let single = dir.join("model.safetensors");
    if single.exists() {
        Ok(vec![single])
    } else {
        Err(EngineError::Model {
            path: dir.to_path_buf(),
            message: "no model.safetensors or model.safetensors.index.json in this directory".into(),
        })
    }
}

/// A tensor's name in both layouts: llama.cpp's GGUF name and the Hugging Face name, without the
/// `.weight` / `.bias` suffix.
#[derive(Debug, Clone)]
pub struct Name {
    gguf: String,
    hf: String,
}

impl Name {
    /// Names a parameter group, e.g. `Name::new("blk.0.attn_q", "model.layers.0.self_attn.q_proj")`.
    pub fn new(gguf: impl Into<String>, hf: impl Into<String>) -> Self {
        Self { gguf: gguf.into(), hf: hf.into() }
    }
}

/// A linear layer `y = x·Wᵀ + b`; `W` is (out, in), quantized or dense.
#[derive(Debug, Clone)]
pub struct Linear {
    weight: LinearWeight,
    bias: Option<Tensor>,
}

/// Where a linear layer's product is computed.
#[derive(Debug, Clone)]
enum LinearWeight {
    /// candle's quantized or dense matmul (any device, any type).
    Candle(QMatMul),
    /// Our CPU kernels (see [`crate::kernels`]).
    Packed(Arc<CpuWeights>, Isa),
}

/// A matrix repacked for our CPU kernels.
#[derive(Debug)]
pub enum CpuWeights {
    /// Q8_0 / Q5_0, 32-value blocks.
    Blocks(PackedWeights),
    /// Q4_K / Q6_K, 256-value super-blocks.
    KQuant(KQuantWeights),
}

impl CpuWeights {
    /// (out, in).
    fn shape(&self) -> (usize, usize) {
        match self {
            Self::Blocks(w) => (w.rows(), w.cols()),
            Self::KQuant(w) => (w.rows(), w.cols()),
        }
    }

    /// Row `r` dequantized into `out` (in values), exactly as GGUF's dequantization gives it.
    fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        match self {
            Self::Blocks(w) => out.iter_mut().enumerate().for_each(|(c, v)| {
                let (q, scale) = w.value(r, c);
                *v = q as f32 * scale;
            }),
            Self::KQuant(w) => out.iter_mut().enumerate().for_each(|(c, v)| *v = w.value(r, c)),
        }
    }

    /// `x` (m, in) row-major times the matrix transposed: (m, out).
    fn multiply(&self, isa: Isa, x: &[f32]) -> Vec<f32> {
        let (rows, cols) = self.shape();
        let mut out = vec![0f32; x.len() / cols.max(1) * rows];
        match self {
            Self::Blocks(w) => {
                let x = QuantizedRows::quantize(x, cols, w.format());
                kernels::matmul(isa, w, &x, &mut out);
            }
            Self::KQuant(w) => kernels::matmul_kquant(isa, w, &Q8KRows::quantize(x, cols), &mut out),
        }
        out
    }
}

impl Linear {
    /// Applies the layer to `x` of shape (…, in), giving (…, out).
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = match &self.weight {
            LinearWeight::Candle(w) => w.forward(x)?,
            LinearWeight::Packed(w, isa) => x.contiguous()?.apply_op1_no_bwd(&PackedMatmul { weights: w, isa: *isa })?,
        };
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }

    /// Packs a GGUF Q8_0 / Q5_0 / Q4_K / Q6_K (out, in) matrix for our CPU kernels when this CPU
    /// has them.
    fn packed(q: &QTensor, device: &Device) -> Option<candle_core::Result<LinearWeight>> {
        enum Format {
            Blocks(BlockFormat),
            KQuant(KQuantFormat),
        }
        let isa = Isa::detect().filter(|_| device.is_cpu())?;
        let format = match (q.dtype(), isa) {
            (GgmlDType::Q8_0, _) => Format::Blocks(BlockFormat::Q8),
            (GgmlDType::Q5_0, _) => Format::Blocks(BlockFormat::Q5),
            (GgmlDType::Q4K, _) => Format::KQuant(KQuantFormat::Q4K),
            (GgmlDType::Q6K, _) => Format::KQuant(KQuantFormat::Q6K),
            _ => return None,
        };
        let &[rows, cols] = q.shape().dims() else { return None };
        Some(q.data().and_then(|raw| {
            let packed = match format {
                Format::Blocks(f) => PackedWeights::from_gguf(f, rows, cols, &raw).map(CpuWeights::Blocks),
                Format::KQuant(f) => KQuantWeights::from_gguf(f, rows, cols, &raw).map(CpuWeights::KQuant),
            };
            Ok(LinearWeight::Packed(Arc::new(packed.map_err(candle_core::Error::msg)?), isa))
        }))
    }
}

/// `x` (…, in) f32 on the CPU times packed weights (out, in)ᵀ.
struct PackedMatmul<'a> {
    weights: &'a CpuWeights,
    isa: Isa,
}

impl candle_core::CustomOp1 for PackedMatmul<'_> {
    fn name(&self) -> &'static str {
        "packed-quantized-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let (rows, cols) = self.weights.shape();
        cpu_product(storage, layout, cols, rows, |x| self.weights.multiply(self.isa, x))
    }
}

/// The body of our CPU matmul ops: `x` (…, `cols`) must be contiguous f32; `product` maps its
/// values to the (…, `out_width`) output's.
fn cpu_product(
    storage: &candle_core::CpuStorage,
    layout: &candle_core::Layout,
    cols: usize,
    out_width: usize,
    product: impl FnOnce(&[f32]) -> Vec<f32>,
) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
    use candle_core::backend::BackendStorage;
    let candle_core::CpuStorage::F32(data) = storage else {
        candle_core::bail!("packed quantized matmul needs f32 activations, got {:?}", storage.dtype());
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("packed quantized matmul needs contiguous activations");
    };
    let mut dims = layout.shape().dims().to_vec();
    let width = dims.last().copied().unwrap_or(0);
    if width != cols {
        candle_core::bail!("activations of width {width} for a product with {out_width} outputs of width {cols}");
    }
    let out = product(&data[start..end]);
    if let Some(last) = dims.last_mut() {
        *last = out_width;
    }
    Ok((candle_core::CpuStorage::F32(out), candle_core::Shape::from(dims)))
}

/// A token-embedding table, kept quantized when the file stores it so.
#[derive(Debug, Clone)]
pub enum Embedding {
    /// Rows are dequantized on lookup.
    Quantized(Arc<QTensor>),
    /// A tied table held once, packed for our kernels: the output head multiplies by it and
    /// lookups dequantize its rows (the same values as the file's).
    Packed(Arc<CpuWeights>, Isa),
    /// A dense (vocab, hidden) table.
    Dense(Tensor),
}

impl Embedding {
    /// Looks up `ids` of shape (b, t), giving (b, t, hidden) in `dtype`.
    pub fn forward(&self, ids: &Tensor, dtype: DType) -> candle_core::Result<Tensor> {
        match self {
            Self::Quantized(q) => q.embedding(ids)?.to_dtype(dtype),
            Self::Packed(w, _) => {
                let (b, t) = ids.dims2()?;
                let (vocab, hidden) = w.shape();
                let ids = ids.flatten_all()?.to_vec1::<u32>()?;
                let mut out = vec![0f32; ids.len() * hidden];
                for (&id, row) in ids.iter().zip(out.chunks_exact_mut(hidden.max(1))) {
                    if id as usize >= vocab {
                        candle_core::bail!("token id {id} is outside the vocabulary of {vocab}");
                    }
                    w.dequantize_row(id as usize, row);
                }
                Tensor::from_vec(out, (b, t, hidden), &Device::Cpu)?.to_dtype(dtype)
            }
            Self::Dense(table) => {
                let (b, t) = ids.dims2()?;
                let hidden = table.dim(1)?;
                table.index_select(&ids.flatten_all()?, 0)?.reshape((b, t, hidden))
            }
        }
    }

    /// The same table as an output projection (tied embeddings).
    pub fn as_linear(&self) -> candle_core::Result<Linear> {
        let weight = match self {
            Self::Quantized(q) => match Linear::packed(q, &q.device()) {
                Some(packed) => packed?,
                None => LinearWeight::Candle(QMatMul::from_arc(q.clone())?),
            },
            Self::Packed(w, isa) => LinearWeight::Packed(w.clone(), *isa),
            Self::Dense(t) => LinearWeight::Candle(QMatMul::Tensor(t.clone())),
        };
        Ok(Linear { weight, bias: None })
    }

    /// Number of rows (the vocabulary size).
    pub fn rows(&self) -> candle_core::Result<usize> {
        match self {
            Self::Quantized(q) => q.shape().dim(0),
            Self::Packed(w, _) => Ok(w.shape().0),
            Self::Dense(t) => t.dim(0),
        }
    }
}

enum Source {
    Gguf { content: gguf_file::Content, reader: BufReader<File> },
    Safetensors { tensors: MmapedSafetensors },
}

/// Reads named weights from one model, onto one device, in one compute dtype.
pub struct Weights {
    path: PathBuf,
    source: Source,
    device: Device,
    dtype: DType,
}

impl Weights {
    /// Opens a GGUF file whose header has already been parsed; checks the file is long enough for
    /// every tensor the header lists, so a truncated download fails here with a clear message.
    pub fn gguf(path: &Path, content: gguf_file::Content, device: &Device) -> Result<Self> {
        let file = File::open(path).map_err(|source| EngineError::Io { path: path.to_path_buf(), source })?;
        let len = file.metadata().map_err(|source| EngineError::Io { path: path.to_path_buf(), source })?.len();
        let mut needed = content.tensor_data_offset;
        for (name, info) in &content.tensor_infos {
            let elems = info.shape.elem_count();
            let block = info.ggml_dtype.block_size();
            if elems % block != 0 {
                return Err(EngineError::Tensor {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    message: format!("{elems} elements is not a whole number of {:?} blocks", info.ggml_dtype),
                });
            }
            let bytes = (elems / block * info.ggml_dtype.type_size()) as u64;
            needed = needed.max(content.tensor_data_offset + info.offset + bytes);
        }
        if len < needed {
            return Err(EngineError::Model {
                path: path.to_path_buf(),
                message: format!(
                    "the file is truncated: its tensors need {needed} bytes but it has {len}; download it again"
                ),
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
            source: Source::Gguf { content, reader: BufReader::new(file) },
            device: device.clone(),
            dtype: DType::F32,
        })
    }

    /// Memory-maps safetensors files (one, or the shards of an index) of a Hugging Face directory.
    pub fn safetensors(dir: &Path, files: &[PathBuf], device: &Device, dtype: DType) -> Result<Self> {
        // SAFETY: the files are opened read-only; like every mmap reader we assume nobody truncates
        // them while the model is loaded.
        let tensors = unsafe { MmapedSafetensors::multi(files) }.map_err(|e| EngineError::Model {
            path: dir.to_path_buf(),
            message: format!("cannot read safetensors ({e}); the files may be truncated or not safetensors"),
        })?;
        Ok(Self { path: dir.to_path_buf(), source: Source::Safetensors { tensors }, device: device.clone(), dtype })
    }

    /// The device tensors are loaded onto.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The dtype activations are computed in.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Whether the file is GGUF (llama.cpp layout conventions apply).
    pub fn is_gguf(&self) -> bool {
        matches!(self.source, Source::Gguf { .. })
    }

    fn full_name(&self, name: &Name, suffix: &str) -> String {
        match self.source {
            Source::Gguf { .. } => format!("{}.{suffix}", name.gguf),
            Source::Safetensors { .. } => format!("{}.{suffix}", name.hf),
        }
    }

    /// Whether the model has `<name>.weight`.
    pub fn has(&self, name: &Name) -> bool {
        let full = self.full_name(name, "weight");
        match &self.source {
            Source::Gguf { content, .. } => content.tensor_infos.contains_key(&full),
            Source::Safetensors { tensors } => tensors.get(&full).is_ok(),
        }
    }

    fn missing(&self, full: &str, e: impl std::fmt::Display) -> EngineError {
        EngineError::Tensor { path: self.path.clone(), name: full.to_string(), message: e.to_string() }
    }

    /// `full` as candle will compute with it (Q5_0 re-encoded as Q8_0 on the CPU).
    fn qtensor(&mut self, full: &str) -> Result<QTensor> {
        let q = self.stored_qtensor(full)?;
        self.for_candle(full, q)
    }

    fn for_candle(&self, full: &str, q: QTensor) -> Result<QTensor> {
        if q.dtype() == GgmlDType::Q5_0 && self.device.is_cpu() {
            return q5_0_as_q8_0(&q, &self.device).map_err(|e| self.missing(full, e));
        }
        Ok(q)
    }

    /// `full` as the file stores it.
    fn stored_qtensor(&mut self, full: &str) -> Result<QTensor> {
        let Source::Gguf { content, reader } = &mut self.source else {
            return Err(self.missing(full, "not a GGUF model"));
        };
        if !content.tensor_infos.contains_key(full) {
            return Err(EngineError::Tensor {
                path: self.path.clone(),
                name: full.to_string(),
                message: "missing from the file".into(),
            });
        }
        let device = self.device.clone();
        let q = content.tensor(reader, full, &device).map_err(|e| EngineError::Tensor {
            path: self.path.clone(),
            name: full.to_string(),
            message: format!("cannot read: {e}"),
        })?;
        Ok(q)
    }

    fn dense(&mut self, full: &str) -> Result<Tensor> {
        let tensor = match &self.source {
            Source::Gguf { .. } => {
                let q = self.qtensor(full)?;
                q.dequantize(&self.device).map_err(|e| self.missing(full, e))?
            }
            Source::Safetensors { tensors } => {
                tensors.load(full, &self.device).map_err(|e| self.missing(full, format!("missing or unreadable: {e}")))?
            }
        };
        tensor.to_dtype(self.dtype).map_err(|e| self.missing(full, e))
    }

    /// Loads `<name>.weight` as a (out, in) matrix (quantized when the file is) and `<name>.bias` if
    /// `with_bias`; checks the shape is (`out`, `in_`).
    pub fn linear(&mut self, name: &Name, out: usize, in_: usize, with_bias: bool) -> Result<Linear> {
        let full = self.full_name(name, "weight");
        let weight = if self.is_gguf() {
            let q = self.stored_qtensor(&full)?;
            self.check_shape(&full, q.shape().dims(), &[out, in_])?;
            match Linear::packed(&q, &self.device) {
                Some(packed) => packed.map_err(|e| self.missing(&full, e))?,
                None => {
                    let q = self.for_candle(&full, q)?;
                    LinearWeight::Candle(QMatMul::from_qtensor(q).map_err(|e| self.missing(&full, e))?)
                }
            }
        } else {
            let t = self.dense(&full)?;
            self.check_shape(&full, t.dims(), &[out, in_])?;
            LinearWeight::Candle(QMatMul::Tensor(t))
        };
        let bias = if with_bias { Some(self.vector(name, "bias", out)?) } else { None };
        Ok(Linear { weight, bias })
    }

    /// Loads the 1-D tensor `<name>.<suffix>` of length `len` (norm weights, biases).
    pub fn vector(&mut self, name: &Name, suffix: &str, len: usize) -> Result<Tensor> {
        let full = self.full_name(name, suffix);
        let t = self.dense(&full)?;
        self.check_shape(&full, t.dims(), &[len])?;
        Ok(t)
    }

    /// The output projection: `output` / `lm_head` when the file has one, else the tied embedding.
    pub fn output_head(&mut self, embed: &Embedding, hidden: usize) -> Result<Linear> {
        let name = output_name();
        if self.has(&name) {
            let vocab = embed.rows().map_err(|e| self.missing("embedding", e))?;
            self.linear(&name, vocab, hidden, false)
        } else {
            embed.as_linear().map_err(|e| self.missing("embedding", e))
        }
    }

    /// Loads a (rows, cols) table as an embedding.
    pub fn embedding(&mut self, name: &Name, cols: usize) -> Result<Embedding> {
        let full = self.full_name(name, "weight");
        if self.is_gguf() {
            let q = self.stored_qtensor(&full)?;
            let dims = q.shape().dims().to_vec();
            if dims.len() != 2 || dims[1] != cols {
                return Err(self.missing(&full, format!("expected shape (vocab, {cols}), found {dims:?}")));
            }
            // A table the output head shares (no `output` tensor) is held once, packed, when our
            // kernels run here, rather than once for lookups and once for the head.
            if !self.has(&output_name()) {
                if let Some(packed) = Linear::packed(&q, &self.device) {
                    if let LinearWeight::Packed(w, isa) = packed.map_err(|e| self.missing(&full, e))? {
                        return Ok(Embedding::Packed(w, isa));
                    }
                }
            }
            let q = self.for_candle(&full, q)?;
            if cols.is_multiple_of(q.dtype().block_size()) && !matches!(q.dtype(), GgmlDType::F32) {
                return Ok(Embedding::Quantized(Arc::new(q)));
            }
            let t = q.dequantize(&self.device).map_err(|e| self.missing(&full, e))?;
            return Ok(Embedding::Dense(t.to_dtype(self.dtype).map_err(|e| self.missing(&full, e))?));
        }
        let t = self.dense(&full)?;
        if t.rank() != 2 || t.dims()[1] != cols {
            return Err(self.missing(&full, format!("expected shape (vocab, {cols}), found {:?}", t.dims())));
        }
        Ok(Embedding::Dense(t))
    }

    /// The file it reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_shape(&self, full: &str, found: &[usize], expected: &[usize]) -> Result<()> {
        if found == expected {
            Ok(())
        } else {
            Err(self.missing(full, format!("expected shape {expected:?}, found {found:?}")))
        }
    }
}

/// The output projection's name; a model without it ties the head to the embedding.
fn output_name() -> Name {
    Name::new("output", "lm_head")
}

/// Bytes of one ggml Q5_0 block: f16 scale, 32 high bits, 16 bytes of low nibbles.
const Q5_0_BLOCK: usize = 22;
/// Bytes of one ggml Q8_0 block: f16 scale, 32 signed bytes.
const Q8_0_BLOCK: usize = 34;

/// Re-encodes Q5_0 weights as Q8_0 without changing a single value.
///
/// A Q5_0 weight is `d · (q − 16)` with `q` in 0..32, which is exactly the Q8_0 weight with the same
/// scale `d` and signed byte `q − 16`. Both multiply activations quantized to Q8_0, so results are
/// bit-identical; candle's CPU backend has a SIMD kernel for Q8_0 but only a scalar one for Q5_0
/// (about 8× slower here), and the Qwen2.5-Coder GGUFs store most matrices as Q5_0.
fn q5_0_as_q8_0(q: &QTensor, device: &Device) -> candle_core::Result<QTensor> {
    let src = q.data()?;
    if src.len() % Q5_0_BLOCK != 0 {
        candle_core::bail!("Q5_0 data of {} bytes is not whole blocks", src.len());
    }
    let mut out = Vec::with_capacity(src.len() / Q5_0_BLOCK * Q8_0_BLOCK);
    for block in src.chunks_exact(Q5_0_BLOCK) {
        let (scale, rest) = block.split_at(2);
        let (high, low) = rest.split_at(4);
        let high = u32::from_le_bytes([high[0], high[1], high[2], high[3]]);
        out.extend_from_slice(scale);
        let mut values = [0u8; 32];
        for (j, byte) in low.iter().enumerate() {
            let lo = (byte & 0x0f) | ((((high >> j) & 1) as u8) << 4);
            let hi = (byte >> 4) | ((((high >> (j + 16)) & 1) as u8) << 4);
            values[j] = (lo as i8 - 16) as u8;
            values[j + 16] = (hi as i8 - 16) as u8;
        }
        out.extend_from_slice(&values);
    }
    let storage = QStorage::from_data(std::borrow::Cow::Owned(out), device, GgmlDType::Q8_0)?;
    QTensor::new(storage, q.shape().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q5_0_re_encoding_keeps_every_value() {
        let values: Vec<f32> = (0..4096).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let t = candle_core::Tensor::from_vec(values, (32, 128), &Device::Cpu).unwrap();
        let q5 = QTensor::quantize(&t, GgmlDType::Q5_0).unwrap();
        let q8 = q5_0_as_q8_0(&q5, &Device::Cpu).unwrap();
        assert_eq!(q8.dtype(), GgmlDType::Q8_0);
        let a: Vec<f32> = q5.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let b: Vec<f32> = q8.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(a, b);
        // And the products with activations agree to the bit.
        let x = candle_core::Tensor::from_vec((0..256).map(|i| (i as f32).sin()).collect::<Vec<_>>(), (2, 128), &Device::Cpu).unwrap();
        let ya: Vec<Vec<f32>> = QMatMul::from_qtensor(q5).unwrap().forward(&x).unwrap().to_vec2().unwrap();
        let yb: Vec<Vec<f32>> = QMatMul::from_qtensor(q8).unwrap().forward(&x).unwrap().to_vec2().unwrap();
        for (ra, rb) in ya.iter().zip(&yb) {
            for (va, vb) in ra.iter().zip(rb) {
                assert!((va - vb).abs() <= 1e-5 * va.abs().max(1.0), "{va} vs {vb}");
            }
        }
    }

    /// A tied table held once, packed: lookups give the file's dequantized rows bit for bit, in
    /// every format the kernels pack, and an id past the vocabulary is an error, not a panic.
    #[test]
    fn packed_embedding_rows_equal_the_files_values() {
        if Isa::detect().is_none() {
            return; // candle's kernels and the quantized table serve this CPU
        }
        let values: Vec<f32> = (0..40 * 512).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
        let t = candle_core::Tensor::from_vec(values, (40, 512), &Device::Cpu).unwrap();
        let ids = candle_core::Tensor::new(&[[0u32, 39, 17], [16, 15, 1]], &Device::Cpu).unwrap();
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q5_0, GgmlDType::Q4K, GgmlDType::Q6K] {
            let q = QTensor::quantize(&t, dtype).unwrap();
            let Some(Ok(LinearWeight::Packed(w, isa))) = Linear::packed(&q, &Device::Cpu) else { panic!("{dtype:?} not packed") };
            let table = Embedding::Packed(w, isa);
            assert_eq!(table.rows().unwrap(), 40);
            let got: Vec<f32> = table.forward(&ids, DType::F32).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            let want: Vec<f32> = q.dequantize(&Device::Cpu).unwrap().index_select(&ids.flatten_all().unwrap(), 0).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            assert_eq!(got, want, "{dtype:?}");
            let outside = candle_core::Tensor::new(&[[40u32]], &Device::Cpu).unwrap();
            assert!(table.forward(&outside, DType::F32).unwrap_err().to_string().contains("outside the vocabulary"));
        }
    }
}
