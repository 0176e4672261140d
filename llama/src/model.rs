//! A model's weights and shape, read from a GGUF file of one of the
//! families [`crate::arch`] describes.
//!
//! The layout is llama.cpp's: GGUF rows of `blk.N.attn_q` etc., grouped-query
//! attention, a gated feed-forward, RMS norms; what differs between
//! families (biases, q/k norms, post-norms, rotary pairing, windows) is
//! read as the family's description says.

use crate::arch::{self, Architecture, Dimensions, Rope};
use crate::quant::{Bytes, Format, Matrix};
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};
use std::io::Cursor;
use std::sync::Arc;

/// A GGUF file's bytes: mapped from the file, or (in tests) in memory.
pub type Source = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The shape of a model, from the file's metadata.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    /// Width of the residual stream.
    pub width: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_width: usize,
    pub feed_forward: usize,
    pub vocabulary: usize,
    /// Dimensions of each head that rotary embeddings turn.
    pub rotary_dims: usize,
    pub rope: Rope,
    pub norm_epsilon: f32,
    /// What queries are scaled by before their dot products.
    pub attention_scale: f32,
    /// Attention scores are capped to ±this by tanh (gemma2's soft-capping).
    pub attention_cap: Option<f32>,
    /// The logits are capped likewise.
    pub output_cap: Option<f32>,
}

impl Shape {
    pub fn q_width(&self) -> usize {
        self.heads * self.head_width
    }

    pub fn kv_width(&self) -> usize {
        self.kv_heads * self.head_width
    }

    /// Rows of the stacked q, k and v product.
    pub fn qkv_width(&self) -> usize {
        self.q_width() + 2 * self.kv_width()
    }
}

pub(crate) struct Layer {
    pub attention_norm: Vec<f32>,
    /// q, k and v stacked: one product gives all three.
    pub qkv: Matrix,
    /// Their biases, stacked likewise.
    pub qkv_bias: Option<Vec<f32>>,
    /// Norms of each head's query and key (one head wide).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub output: Matrix,
    pub post_attention_norm: Option<Vec<f32>>,
    pub feed_forward_norm: Vec<f32>,
    /// gate and up stacked.
    pub gate_up: Matrix,
    pub down: Matrix,
    pub post_feed_forward_norm: Option<Vec<f32>>,
    /// Positions back this layer attends to, itself included; `None`: all.
    pub window: Option<usize>,
    /// Which of the model's rotary frequency sets this layer turns by.
    pub rotary: usize,
}

/// A model's weights, shared by every request.
pub struct Model {
    pub(crate) family: &'static Architecture,
    pub(crate) shape: Shape,
    pub(crate) embeddings: Matrix,
    pub(crate) layers: Vec<Layer>,
    pub(crate) output_norm: Vec<f32>,
    /// `None`: the output shares the embeddings' weights.
    pub(crate) output: Option<Matrix>,
    /// The angle per position of each rotary pair, for each kind of layer
    /// (global, windowed).
    pub(crate) rotary: Vec<crate::ops::Rotary>,
}

/// The metadata of one family's file: keys under its name.
struct Metadata<'c> {
    content: &'c gguf_file::Content,
    family: &'static str,
}

impl Metadata<'_> {
    fn value(&self, key: &str) -> Option<&gguf_file::Value> {
        self.content.metadata.get(&format!("{}.{key}", self.family))
    }

    fn count(&self, key: &str) -> Result<usize, String> {
        self.optional_count(key)
            .ok_or_else(|| format!("its metadata has no {}.{key}", self.family))
    }

    fn optional_count(&self, key: &str) -> Option<usize> {
        self.value(key)
            .and_then(|v| v.to_u32().ok())
            .map(|n| n as usize)
    }

    fn number(&self, key: &str) -> Option<f32> {
        self.value(key).and_then(|v| v.to_f32().ok())
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.value(key)
            .and_then(|v| v.to_string().ok())
            .map(String::as_str)
    }
}

/// Why a model's weights could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The file ends before its tensors do.
    CutShort(String),
    /// The weights are not those of a model the node can run.
    Unfit(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::CutShort(why) | ReadError::Unfit(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<String> for ReadError {
    fn from(why: String) -> Self {
        ReadError::Unfit(why)
    }
}

/// Checks that every tensor the header lists lies within the file.
fn check_length(content: &gguf_file::Content, length: usize) -> Result<(), ReadError> {
    let length = length as u64;
    for (name, info) in &content.tensor_infos {
        let size = (info.shape.elem_count() / info.ggml_dtype.block_size()) as u64
            * info.ggml_dtype.type_size() as u64;
        let end = content
            .tensor_data_offset
            .saturating_add(info.offset)
            .saturating_add(size);
        if end > length {
            return Err(ReadError::CutShort(format!(
                "it is {length} bytes long, but tensor {name} ends at byte {end}"
            )));
        }
    }
    Ok(())
}

impl Model {
    /// The family of the model whose header is `content`, if the engine
    /// runs it; else why not, naming the family.
    pub fn family_of(content: &gguf_file::Content) -> Result<&'static str, String> {
        let name = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str)
            .unwrap_or("");
        arch::named(name).map(|family| family.name).ok_or_else(|| {
            format!(
                "it holds a model of the {name:?} family; the engine runs {}",
                arch::names()
            )
        })
    }

    /// The weights of the model whose header is `content`, read where
    /// `file` is mapped into memory: the pages of a weight are read from
    /// the file when a product first needs them, and the kernel may drop
    /// them again under memory pressure (they are the file's, not copies).
    pub fn map(content: &gguf_file::Content, file: &std::fs::File) -> Result<Self, ReadError> {
        // SAFETY: the mapping is read-only and private; the model files
        // are the operator's (the node's model folder), not written while
        // a node runs them. A file cut short while mapped would fault, as
        // it would under llama.cpp, which maps its files the same way.
        let mapped = unsafe { memmap2::Mmap::map(file) }
            .map_err(|e| ReadError::CutShort(format!("cannot map it: {e}")))?;
        Self::read(content, Arc::new(mapped))
    }

    /// Reads the weights of the model whose header is `content` from the
    /// file's bytes, `file`.
    pub fn read(content: &gguf_file::Content, file: Source) -> Result<Self, ReadError> {
        check_length(content, (*file).as_ref().len())?;
        let file = &file;
        let family = arch::named(Self::family_of(content)?).expect("a family the engine runs");
        let meta = Metadata {
            content,
            family: family.name,
        };
        if meta.optional_count("expert_count").unwrap_or(0) > 0 {
            return Err(ReadError::Unfit(
                "it is a mixture of experts, which the node does not run".into(),
            ));
        }
        let width = meta.count("embedding_length")?;
        let heads = meta.count("attention.head_count")?;
        let kv_heads = meta
            .optional_count("attention.head_count_kv")
            .unwrap_or(heads);
        if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 {
            return Err(ReadError::Unfit(format!(
                "its attention ({heads} heads, {kv_heads} key-value heads) does not add up"
            )));
        }
        let head_width = match meta.optional_count("attention.key_length") {
            Some(key) => key,
            None if width % heads == 0 => width / heads,
            None => {
                return Err(ReadError::Unfit(format!(
                    "its width {width} is not a whole number of its {heads} heads"
                )));
            }
        };
        if meta
            .optional_count("attention.value_length")
            .unwrap_or(head_width)
            != head_width
        {
            return Err(ReadError::Unfit(
                "its values are not as wide as its keys".into(),
            ));
        }
        let embeddings = matrix(content, file, "token_embd.weight")?.looked_up();
        let layers = meta.count("block_count")?;
        let dimensions = Dimensions {
            layers,
            width,
            heads,
            head_width,
        };
        let shape = Shape {
            width,
            heads,
            kv_heads,
            head_width,
            feed_forward: meta.count("feed_forward_length")?,
            vocabulary: embeddings.rows(),
            rotary_dims: meta
                .optional_count("rope.dimension_count")
                .unwrap_or(head_width)
                .min(head_width),
            rope: family.rope,
            norm_epsilon: meta
                .number("attention.layer_norm_rms_epsilon")
                .unwrap_or(1e-5),
            attention_scale: (family.attention_scale)(&dimensions),
            attention_cap: meta.number("attn_logit_softcapping").filter(|c| *c > 0.0),
            output_cap: meta.number("final_logit_softcapping").filter(|c| *c > 0.0),
        };
        if !head_width.is_multiple_of(2) || !shape.rotary_dims.is_multiple_of(2) {
            return Err(ReadError::Unfit(format!(
                "its heads are {head_width} wide: not pairs"
            )));
        }
        let rotary = rotary_angles(content, file, &meta, family, &shape)?;
        let window = match &family.sliding {
            Some(_) => meta
                .optional_count("attention.sliding_window")
                .filter(|w| *w > 0),
            None => None,
        };
        let windowed = windowed_layers(&meta, family, layers, window.is_some());
        let mut read_layers = Vec::with_capacity(layers);
        for (n, windowed) in windowed.into_iter().enumerate() {
            let layer = read_layer(content, file, family, n, window.filter(|_| windowed))?;
            check_layer(&shape, n, &layer)?;
            read_layers.push(layer);
        }
        let output = match content.tensor_infos.contains_key("output.weight") {
            true => Some(matrix(content, file, "output.weight")?),
            false => None,
        };
        let model = Model {
            family,
            output_norm: vector(content, file, "output_norm.weight")?,
            shape,
            embeddings,
            layers: read_layers,
            output,
            rotary,
        };
        let head = model.output_matrix();
        if head.columns() != width || model.embeddings.columns() != width {
            return Err(ReadError::Unfit(
                "its embeddings and output are not as wide as the model".into(),
            ));
        }
        if model.output_norm.len() != width {
            return Err(ReadError::Unfit(
                "output_norm.weight is not as wide as the model".into(),
            ));
        }
        Ok(model)
    }

    /// The family's name, as the file gives it.
    pub fn family(&self) -> &'static str {
        self.family.name
    }

    pub(crate) fn output_matrix(&self) -> &Matrix {
        self.output.as_ref().unwrap_or(&self.embeddings)
    }
}

/// Which layers attend within a window: as the file lists them, else the
/// family's period. None do when the file gives no window.
fn windowed_layers(
    meta: &Metadata,
    family: &Architecture,
    layers: usize,
    has_window: bool,
) -> Vec<bool> {
    let Some(sliding) = family.sliding.as_ref().filter(|_| has_window) else {
        return vec![false; layers];
    };
    match meta.value("attention.sliding_window_pattern") {
        Some(gguf_file::Value::Array(listed)) => (0..layers)
            .map(|n| {
                listed
                    .get(n)
                    .and_then(|v| v.to_bool().ok())
                    .unwrap_or(false)
            })
            .collect(),
        Some(period) => match period.to_u32() {
            Ok(0) => vec![true; layers],
            Ok(period) => (0..layers)
                .map(|n| n % period as usize != period as usize - 1)
                .collect(),
            Err(_) => (0..layers).map(|n| sliding.windowed(n)).collect(),
        },
        None => (0..layers).map(|n| sliding.windowed(n)).collect(),
    }
}

/// How each rotary pair's angle grows: the file's base (Llama 3's angles
/// divided by its `rope_freqs` factors, a linear scaling applied), then,
/// for a family with windowed layers, their own base.
fn rotary_angles(
    content: &gguf_file::Content,
    file: &Source,
    meta: &Metadata,
    family: &Architecture,
    shape: &Shape,
) -> Result<Vec<crate::ops::Rotary>, String> {
    let pairs = shape.rotary_dims / 2;
    let scale = match meta.text("rope.scaling.type") {
        None | Some("none") => 1.0,
        Some("linear") => 1.0 / meta.number("rope.scaling.factor").unwrap_or(1.0).max(1e-6),
        Some(other) => {
            return Err(format!(
                "its rotary embeddings are scaled by {other:?}, which the engine does not do"
            ));
        }
    };
    let factors = match content.tensor_infos.contains_key("rope_freqs.weight") {
        true => Some(vector(content, file, "rope_freqs.weight")?),
        false => None,
    };
    if factors.as_ref().is_some_and(|f| f.len() < pairs) {
        return Err(format!("its rope_freqs has fewer than {pairs} factors"));
    }
    let set = |base: f32, scale: f32, factors: Option<Vec<f32>>| crate::ops::Rotary {
        step: base.powf(-2.0 / shape.rotary_dims as f32),
        scale,
        factors,
        pairs,
    };
    let base = meta.number("rope.freq_base").unwrap_or(10_000.0);
    let mut sets = vec![set(base, scale, factors)];
    if let Some(sliding) = &family.sliding {
        let local = meta
            .number("rope.freq_base_swa")
            .unwrap_or(sliding.rope_base);
        sets.push(set(local, 1.0, None));
    }
    Ok(sets)
}

fn read_layer(
    content: &gguf_file::Content,
    file: &Source,
    family: &Architecture,
    n: usize,
    window: Option<usize>,
) -> Result<Layer, String> {
    let name = |part: &str| format!("blk.{n}.{part}.weight");
    let read_vector = |part: &str| vector(content, file, &name(part));
    let attention_norm = read_vector("attn_norm")?;
    let feed_forward_norm = read_vector("ffn_norm")?;
    let (q_norm, k_norm) = match family.qk_norm {
        true => (
            Some(read_vector("attn_q_norm")?),
            Some(read_vector("attn_k_norm")?),
        ),
        false => (None, None),
    };
    let (post_attention_norm, post_feed_forward_norm) = match family.post_norms {
        true => (
            Some(read_vector("post_attention_norm")?),
            Some(read_vector("post_ffw_norm")?),
        ),
        false => (None, None),
    };
    let qkv_bias = match family.qkv_bias {
        true => {
            let mut stacked = Vec::new();
            for part in ["attn_q", "attn_k", "attn_v"] {
                stacked.extend(vector(content, file, &format!("blk.{n}.{part}.bias"))?);
            }
            Some(stacked)
        }
        false => None,
    };
    let qkv = Matrix::stacked(vec![
        matrix(content, file, &name("attn_q"))?,
        matrix(content, file, &name("attn_k"))?,
        matrix(content, file, &name("attn_v"))?,
    ])?;
    let gate_up = Matrix::stacked(vec![
        matrix(content, file, &name("ffn_gate"))?,
        matrix(content, file, &name("ffn_up"))?,
    ])?;
    Ok(Layer {
        attention_norm,
        qkv,
        qkv_bias,
        q_norm,
        k_norm,
        output: matrix(content, file, &name("attn_output"))?,
        post_attention_norm,
        feed_forward_norm,
        gate_up,
        down: matrix(content, file, &name("ffn_down"))?,
        post_feed_forward_norm,
        window,
        rotary: usize::from(window.is_some()),
    })
}

fn check_layer(shape: &Shape, n: usize, layer: &Layer) -> Result<(), String> {
    let (width, q, ff) = (shape.width, shape.q_width(), shape.feed_forward);
    let expected = [
        ("attention q, k and v", &layer.qkv, shape.qkv_width(), width),
        ("attention output", &layer.output, width, q),
        ("feed-forward gate and up", &layer.gate_up, 2 * ff, width),
        ("feed-forward down", &layer.down, width, ff),
    ];
    for (what, matrix, rows, columns) in expected {
        if (matrix.rows(), matrix.columns()) != (rows, columns) {
            return Err(format!(
                "layer {n}'s {what} is {}×{}, not {rows}×{columns}",
                matrix.rows(),
                matrix.columns()
            ));
        }
    }
    let wide =
        |norm: &Option<Vec<f32>>, wanted: usize| norm.as_ref().is_none_or(|n| n.len() == wanted);
    let norms_fit = layer.attention_norm.len() == width
        && layer.feed_forward_norm.len() == width
        && wide(&layer.post_attention_norm, width)
        && wide(&layer.post_feed_forward_norm, width)
        && wide(&layer.q_norm, shape.head_width)
        && wide(&layer.k_norm, shape.head_width)
        && wide(&layer.qkv_bias, shape.qkv_width());
    if !norms_fit {
        return Err(format!(
            "layer {n}'s norms or biases are not as wide as what they apply to"
        ));
    }
    Ok(())
}

/// `values` (`rows` × `columns`, f32) quantized to Q8_0 by candle.
fn q8_0_of(values: &Tensor, rows: usize, columns: usize) -> Result<Matrix, String> {
    let quantized = QTensor::quantize(values, GgmlDType::Q8_0).map_err(|e| e.to_string())?;
    let bytes = quantized.data().map_err(|e| e.to_string())?.into_owned();
    Matrix::new(Format::Q8_0, rows, columns, Bytes::owned(bytes))
}

/// The 2-D tensor `name`, where the file holds it if the kernels take its
/// format; else (the formats of 2 and 3 bits, the IQ ones) turned into
/// Q8_0, in memory.
fn matrix(content: &gguf_file::Content, file: &Source, name: &str) -> Result<Matrix, String> {
    let info = content
        .tensor_infos
        .get(name)
        .ok_or_else(|| format!("it has no tensor {name}"))?;
    let dims = info.shape.dims();
    let &[rows, columns] = dims else {
        return Err(format!("{name} has shape {dims:?}, not a matrix"));
    };
    let bad = |e: String| format!("{name}: {e}");
    match Format::of_ggml(info.ggml_dtype) {
        Some(format) => {
            let start = usize::try_from(content.tensor_data_offset.saturating_add(info.offset))
                .map_err(|e| bad(e.to_string()))?;
            let size = rows * format.row_bytes(columns);
            let bytes =
                Bytes::within(file, start, size).ok_or_else(|| format!("{name} is cut short"))?;
            Matrix::new(format, rows, columns, bytes).map_err(bad)
        }
        None => {
            let values = content
                .tensor(&mut Cursor::new((**file).as_ref()), name, &Device::Cpu)
                .and_then(|tensor| tensor.dequantize(&Device::Cpu))
                .map_err(|e| bad(e.to_string()))?;
            q8_0_of(&values, rows, columns).map_err(bad)
        }
    }
}

/// The 1-D tensor `name` in f32.
fn vector(content: &gguf_file::Content, file: &Source, name: &str) -> Result<Vec<f32>, String> {
    content
        .tensor(&mut Cursor::new((**file).as_ref()), name, &Device::Cpu)
        .and_then(|t| t.dequantize(&Device::Cpu))
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| format!("{name}: {e}"))
}
