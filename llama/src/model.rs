//! The llama architecture's forward pass, on the node's own kernels.
//!
//! A model of 135M parameters does little work per operation: run through a
//! general tensor library, building, dispatching and allocating each
//! operation's result costs as much as the arithmetic. So this is a fixed
//! sequence of steps into buffers a [`Session`] allocates once, with the
//! weights in their quantized blocks ([`crate::quant`]), matrix products
//! shared out among the threads of one pool, and a key-value cache sized
//! for the request.
//!
//! The layout is llama.cpp's: GGUF rows of `blk.N.attn_q` etc., rotary
//! embeddings on adjacent pairs (the GGUF converter permutes q and k for
//! it), grouped-query attention, SwiGLU feed-forward, RMS norms.

use crate::quant::{BLOCK, Format, Matrix, Q8Block, quantize};
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};
use rayon::prelude::*;
use std::io::{Read, Seek, SeekFrom};

/// The shape of a model, from the file's metadata.
#[derive(Clone, Debug)]
struct Shape {
    pub layers: usize,
    /// Width of the residual stream.
    pub width: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_width: usize,
    pub feed_forward: usize,
    pub vocabulary: usize,
    /// Dimensions of each head that rotary embeddings turn.
    pub rotary_dims: usize,
    pub rope_base: f32,
    pub norm_epsilon: f32,
}

impl Shape {
    fn kv_width(&self) -> usize {
        self.kv_heads * self.head_width
    }
}

struct Layer {
    attention_norm: Vec<f32>,
    /// q, k and v stacked: one product gives all three.
    qkv: Matrix,
    output: Matrix,
    feed_forward_norm: Vec<f32>,
    /// gate and up stacked.
    gate_up: Matrix,
    down: Matrix,
}

/// A model's weights, shared by every request.
pub struct Llama {
    shape: Shape,
    embeddings: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    /// `None`: the output shares the embeddings' weights.
    output: Option<Matrix>,
}

fn metadata_u32(content: &gguf_file::Content, key: &str) -> Result<usize, String> {
    content
        .metadata
        .get(key)
        .and_then(|v| v.to_u32().ok())
        .map(|n| n as usize)
        .ok_or_else(|| format!("its metadata has no {key}"))
}

fn metadata_f32(content: &gguf_file::Content, key: &str) -> Option<f32> {
    content.metadata.get(key).and_then(|v| v.to_f32().ok())
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
fn check_length<R: Read + Seek>(
    content: &gguf_file::Content,
    file: &mut R,
) -> Result<(), ReadError> {
    let length = file
        .seek(SeekFrom::End(0))
        .map_err(|e| ReadError::CutShort(format!("cannot find its end: {e}")))?;
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

impl Llama {
    /// Reads the weights of the llama-family model whose header is `content`.
    pub fn read<R: Read + Seek>(
        content: &gguf_file::Content,
        file: &mut R,
    ) -> Result<Self, ReadError> {
        check_length(content, file)?;
        if metadata_u32(content, "llama.expert_count").unwrap_or(0) > 0 {
            return Err(ReadError::Unfit(
                "it is a mixture of experts, which the node does not run".into(),
            ));
        }
        let width = metadata_u32(content, "llama.embedding_length")?;
        let heads = metadata_u32(content, "llama.attention.head_count")?;
        let kv_heads = metadata_u32(content, "llama.attention.head_count_kv").unwrap_or(heads);
        if heads == 0 || kv_heads == 0 || width % heads != 0 || heads % kv_heads != 0 {
            return Err(ReadError::Unfit(format!(
                "its attention ({heads} heads, {kv_heads} key-value heads, width {width}) does not add up"
            )));
        }
        let head_width = width / heads;
        let embeddings = matrix(content, file, "token_embd.weight")?;
        let shape = Shape {
            layers: metadata_u32(content, "llama.block_count")?,
            width,
            heads,
            kv_heads,
            head_width,
            feed_forward: metadata_u32(content, "llama.feed_forward_length")?,
            vocabulary: embeddings.rows(),
            rotary_dims: metadata_u32(content, "llama.rope.dimension_count")
                .unwrap_or(head_width)
                .min(head_width),
            rope_base: metadata_f32(content, "llama.rope.freq_base").unwrap_or(10_000.0),
            norm_epsilon: metadata_f32(content, "llama.attention.layer_norm_rms_epsilon")
                .unwrap_or(1e-5),
        };
        if !head_width.is_multiple_of(2) || !shape.rotary_dims.is_multiple_of(2) {
            return Err(ReadError::Unfit(format!(
                "its heads are {head_width} wide: not pairs"
            )));
        }
        let mut layers = Vec::with_capacity(shape.layers);
        for n in 0..shape.layers {
            let name = |part: &str| format!("blk.{n}.{part}.weight");
            let qkv = stacked(vec![
                matrix(content, file, &name("attn_q"))?,
                matrix(content, file, &name("attn_k"))?,
                matrix(content, file, &name("attn_v"))?,
            ])?;
            let gate_up = stacked(vec![
                matrix(content, file, &name("ffn_gate"))?,
                matrix(content, file, &name("ffn_up"))?,
            ])?;
            let layer = Layer {
                attention_norm: vector(content, file, &name("attn_norm"))?,
                qkv,
                output: matrix(content, file, &name("attn_output"))?,
                feed_forward_norm: vector(content, file, &name("ffn_norm"))?,
                gate_up,
                down: matrix(content, file, &name("ffn_down"))?,
            };
            check_layer(&shape, n, &layer)?;
            layers.push(layer);
        }
        let output = match content.tensor_infos.contains_key("output.weight") {
            true => Some(matrix(content, file, "output.weight")?),
            false => None,
        };
        let model = Llama {
            output_norm: vector(content, file, "output_norm.weight")?,
            shape,
            embeddings,
            layers,
            output,
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

    fn output_matrix(&self) -> &Matrix {
        self.output.as_ref().unwrap_or(&self.embeddings)
    }
}

fn check_layer(shape: &Shape, n: usize, layer: &Layer) -> Result<(), String> {
    let (width, kv, ff) = (shape.width, shape.kv_width(), shape.feed_forward);
    let expected = [
        ("attention q, k and v", &layer.qkv, width + 2 * kv, width),
        ("attention output", &layer.output, width, width),
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
    if layer.attention_norm.len() != width || layer.feed_forward_norm.len() != width {
        return Err(format!("layer {n}'s norms are not {width} wide"));
    }
    Ok(())
}

/// Matrices in one format, stacked; in Q8_0 when their formats differ.
fn stacked(parts: Vec<Matrix>) -> Result<Matrix, String> {
    let format = parts[0].format();
    if parts.iter().all(|part| part.format() == format) {
        return Matrix::stacked(parts);
    }
    let parts = parts
        .into_iter()
        .map(to_q8_0)
        .collect::<Result<Vec<_>, _>>()?;
    Matrix::stacked(parts)
}

fn to_q8_0(matrix: Matrix) -> Result<Matrix, String> {
    if matrix.format() == Format::Q8_0 {
        return Ok(matrix);
    }
    let mut values = vec![0f32; matrix.rows() * matrix.columns()];
    for (row, out) in values.chunks_exact_mut(matrix.columns()).enumerate() {
        matrix.dequantize_row(row, out);
    }
    let tensor = Tensor::from_vec(values, (matrix.rows(), matrix.columns()), &Device::Cpu)
        .map_err(|e| e.to_string())?;
    q8_0_of(&tensor, matrix.rows(), matrix.columns())
}

/// `values` (`rows` × `columns`, f32) quantized to Q8_0 by candle.
fn q8_0_of(values: &Tensor, rows: usize, columns: usize) -> Result<Matrix, String> {
    let quantized = QTensor::quantize(values, GgmlDType::Q8_0).map_err(|e| e.to_string())?;
    let bytes = quantized.data().map_err(|e| e.to_string())?.into_owned();
    Matrix::new(Format::Q8_0, rows, columns, bytes)
}

/// The 2-D tensor `name`, as the file holds it if the kernels take its
/// format, else turned into Q8_0.
fn matrix<R: Read + Seek>(
    content: &gguf_file::Content,
    file: &mut R,
    name: &str,
) -> Result<Matrix, String> {
    let info = content
        .tensor_infos
        .get(name)
        .ok_or_else(|| format!("it has no tensor {name}"))?;
    let dims = info.shape.dims();
    let &[rows, columns] = dims else {
        return Err(format!("{name} has shape {dims:?}, not a matrix"));
    };
    let format = match info.ggml_dtype {
        GgmlDType::Q4_1 => Some(Format::Q4_1),
        GgmlDType::Q8_0 => Some(Format::Q8_0),
        _ => None,
    };
    let bad = |e: String| format!("{name}: {e}");
    match format {
        Some(format) => {
            let size = rows * columns / BLOCK * format.block_bytes();
            let start = content.tensor_data_offset.saturating_add(info.offset);
            let mut bytes = vec![0u8; size];
            file.seek(SeekFrom::Start(start))
                .and_then(|_| file.read_exact(&mut bytes))
                .map_err(|e| format!("{name} is cut short: {e}"))?;
            Matrix::new(format, rows, columns, bytes).map_err(bad)
        }
        None => {
            let values = content
                .tensor(file, name, &Device::Cpu)
                .and_then(|tensor| tensor.dequantize(&Device::Cpu))
                .map_err(|e| bad(e.to_string()))?;
            q8_0_of(&values, rows, columns).map_err(bad)
        }
    }
}

/// The 1-D tensor `name` in f32.
fn vector<R: Read + Seek>(
    content: &gguf_file::Content,
    file: &mut R,
    name: &str,
) -> Result<Vec<f32>, String> {
    content
        .tensor(file, name, &Device::Cpu)
        .and_then(|t| t.dequantize(&Device::Cpu))
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| format!("{name}: {e}"))
}

/// One request's state: its key-value cache and the buffers of each step.
pub struct Session<'m> {
    model: &'m Llama,
    /// Per layer, per position, the keys (then the values) of each kv head.
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    /// Positions filled.
    length: usize,
    /// Positions the cache may hold.
    capacity: usize,
    buffers: Buffers,
    logits: Vec<f32>,
}

/// Room for the steps of a forward pass over some tokens, reused.
#[derive(Default)]
struct Buffers {
    residual: Vec<f32>,
    normed: Vec<f32>,
    quantized: Vec<Q8Block>,
    qkv: Vec<f32>,
    attended: Vec<f32>,
    projected: Vec<f32>,
    gate_up: Vec<f32>,
    activated: Vec<f32>,
    scratch: Vec<f32>,
    rotations: Vec<(f32, f32)>,
}

impl<'m> Session<'m> {
    /// A session whose cache holds `capacity` positions.
    pub fn new(model: &'m Llama, capacity: usize) -> Self {
        let kv = capacity * model.shape.kv_width();
        Session {
            model,
            keys: (0..model.layers.len())
                .map(|_| Vec::with_capacity(kv))
                .collect(),
            values: (0..model.layers.len())
                .map(|_| Vec::with_capacity(kv))
                .collect(),
            length: 0,
            capacity,
            buffers: Buffers::default(),
            logits: vec![0.0; model.shape.vocabulary],
        }
    }

    /// The scores of each possible next token after the last forward pass.
    pub fn logits(&mut self) -> &mut [f32] {
        &mut self.logits
    }

    /// Runs `tokens` through the model after those before, leaving the
    /// [`logits`](Self::logits) of the token after the last. Runs its
    /// products on the current rayon pool.
    pub fn forward(&mut self, tokens: &[u32]) -> Result<(), String> {
        let model = self.model;
        let shape = &model.shape;
        let count = tokens.len();
        assert!(count > 0, "a forward pass over no tokens");
        if self.length + count > self.capacity {
            return Err(format!(
                "the cache holds {} positions, not {}",
                self.capacity,
                self.length + count
            ));
        }
        if let Some(&token) = tokens
            .iter()
            .find(|&&t| t as usize >= model.embeddings.rows())
        {
            return Err(format!("token {token} is not in the vocabulary"));
        }
        let (width, kv_width) = (shape.width, shape.kv_width());
        let qkv_width = width + 2 * kv_width;
        let b = &mut self.buffers;
        b.residual.resize(count * width, 0.0);
        b.normed.resize(count * width, 0.0);
        b.qkv.resize(count * qkv_width, 0.0);
        b.attended.resize(count * width, 0.0);
        b.projected.resize(count * width, 0.0);
        b.gate_up.resize(count * 2 * shape.feed_forward, 0.0);
        b.activated.resize(count * shape.feed_forward, 0.0);
        rotations(shape, self.length, count, &mut b.rotations);

        for (token, row) in tokens.iter().zip(b.residual.chunks_exact_mut(width)) {
            model.embeddings.dequantize_row(*token as usize, row);
        }
        for (n, layer) in model.layers.iter().enumerate() {
            // Attention.
            rms_norm(
                &b.residual,
                &layer.attention_norm,
                shape.norm_epsilon,
                &mut b.normed,
            );
            quantize_into(&b.normed, &mut b.quantized);
            layer
                .qkv
                .multiply(&b.quantized, count, &mut b.qkv, &mut b.scratch);
            let (keys, values) = (&mut self.keys[n], &mut self.values[n]);
            for (token, qkv) in b.qkv.chunks_exact_mut(qkv_width).enumerate() {
                let (q, kv) = qkv.split_at_mut(width);
                let (k, v) = kv.split_at_mut(kv_width);
                let turns = &b.rotations[token * shape.rotary_dims / 2..][..shape.rotary_dims / 2];
                rotate(q, shape.head_width, turns);
                rotate(k, shape.head_width, turns);
                keys.extend_from_slice(k);
                values.extend_from_slice(v);
            }
            attend(shape, self.length, &b.qkv, keys, values, &mut b.attended);
            quantize_into(&b.attended, &mut b.quantized);
            layer
                .output
                .multiply(&b.quantized, count, &mut b.projected, &mut b.scratch);
            add(&mut b.residual, &b.projected);

            // Feed-forward.
            rms_norm(
                &b.residual,
                &layer.feed_forward_norm,
                shape.norm_epsilon,
                &mut b.normed,
            );
            quantize_into(&b.normed, &mut b.quantized);
            layer
                .gate_up
                .multiply(&b.quantized, count, &mut b.gate_up, &mut b.scratch);
            for (gate_up, out) in b
                .gate_up
                .chunks_exact(2 * shape.feed_forward)
                .zip(b.activated.chunks_exact_mut(shape.feed_forward))
            {
                let (gate, up) = gate_up.split_at(shape.feed_forward);
                for ((out, g), u) in out.iter_mut().zip(gate).zip(up) {
                    *out = g / (1.0 + (-g).exp()) * u;
                }
            }
            quantize_into(&b.activated, &mut b.quantized);
            layer
                .down
                .multiply(&b.quantized, count, &mut b.projected, &mut b.scratch);
            add(&mut b.residual, &b.projected);
        }
        self.length += count;

        // Only the last token's next token is asked for.
        let last = &b.residual[(count - 1) * width..];
        let normed = &mut b.normed[..width];
        rms_norm(last, &model.output_norm, shape.norm_epsilon, normed);
        quantize_into(normed, &mut b.quantized);
        model
            .output_matrix()
            .multiply(&b.quantized, 1, &mut self.logits, &mut b.scratch);
        Ok(())
    }
}

fn quantize_into(values: &[f32], blocks: &mut Vec<Q8Block>) {
    blocks.resize(values.len() / BLOCK, Q8Block::default());
    quantize(values, blocks);
}

fn add(into: &mut [f32], other: &[f32]) {
    for (a, b) in into.iter_mut().zip(other) {
        *a += b;
    }
}

/// RMS norm of each row of `input`, scaled by `weight`.
fn rms_norm(input: &[f32], weight: &[f32], epsilon: f32, out: &mut [f32]) {
    let width = weight.len();
    for (input, out) in input.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let mean_square = input.iter().map(|x| x * x).sum::<f32>() / width as f32;
        let scale = 1.0 / (mean_square + epsilon).sqrt();
        for ((out, x), w) in out.iter_mut().zip(input).zip(weight) {
            *out = x * scale * w;
        }
    }
}

/// The cosine and sine of each rotary pair's angle, for `count` positions
/// from `start`.
fn rotations(shape: &Shape, start: usize, count: usize, out: &mut Vec<(f32, f32)>) {
    let pairs = shape.rotary_dims / 2;
    out.clear();
    for position in start..start + count {
        for pair in 0..pairs {
            let frequency = 1.0
                / shape
                    .rope_base
                    .powf(2.0 * pair as f32 / shape.rotary_dims as f32);
            let angle = position as f32 * frequency;
            out.push((angle.cos(), angle.sin()));
        }
    }
}

/// Turns each head of `x` (heads `head_width` wide) pair by pair.
fn rotate(x: &mut [f32], head_width: usize, turns: &[(f32, f32)]) {
    for head in x.chunks_exact_mut(head_width) {
        for (pair, &(cos, sin)) in head.chunks_exact_mut(2).zip(turns) {
            let (a, b) = (pair[0], pair[1]);
            pair[0] = a * cos - b * sin;
            pair[1] = a * sin + b * cos;
        }
    }
}

/// Causal grouped-query attention of the queries in `qkv` (tokens at
/// positions from `start`) over the cache, into `out`.
fn attend(shape: &Shape, start: usize, qkv: &[f32], keys: &[f32], values: &[f32], out: &mut [f32]) {
    let (width, head_width, kv_width) = (shape.width, shape.head_width, shape.kv_width());
    let qkv_width = width + 2 * kv_width;
    let group = shape.heads / shape.kv_heads;
    let scale = 1.0 / (head_width as f32).sqrt();
    // One piece per head of each token: the work is shared out by head.
    out.par_chunks_mut(head_width).enumerate().for_each_init(
        Vec::new,
        |scores: &mut Vec<f32>, (index, out)| {
            let (token, head) = (index / shape.heads, index % shape.heads);
            let query = &qkv[token * qkv_width + head * head_width..][..head_width];
            let kv_offset = head / group * head_width;
            let positions = start + token + 1;
            scores.clear();
            scores.extend(
                (0..positions)
                    .map(|p| dot(query, &keys[p * kv_width + kv_offset..][..head_width]) * scale),
            );
            let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
            let mut total = 0.0;
            for score in scores.iter_mut() {
                *score = (*score - max).exp();
                total += *score;
            }
            out.fill(0.0);
            for (p, score) in scores.iter().enumerate() {
                let value = &values[p * kv_width + kv_offset..][..head_width];
                for (out, v) in out.iter_mut().zip(value) {
                    *out += score / total * v;
                }
            }
        },
    );
}

/// A dot product in eight lanes, which the compiler turns into SIMD.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (a, b) in a_chunks.zip(b_chunks) {
        for i in 0..8 {
            lanes[i] += a[i] * b[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_turns_pairs_by_their_frequency() {
        let shape = Shape {
            layers: 1,
            width: 4,
            heads: 1,
            kv_heads: 1,
            head_width: 4,
            feed_forward: 4,
            vocabulary: 1,
            rotary_dims: 4,
            rope_base: 100.0,
            norm_epsilon: 1e-5,
        };
        let mut turns = Vec::new();
        rotations(&shape, 3, 1, &mut turns);
        // Pair 0 turns by the position, pair 1 by position / base^(2/4).
        let mut x = [1.0, 0.0, 1.0, 0.0];
        rotate(&mut x, 4, &turns);
        assert!((x[0] - 3f32.cos()).abs() < 1e-6 && (x[1] - 3f32.sin()).abs() < 1e-6);
        assert!((x[2] - 0.3f32.cos()).abs() < 1e-6 && (x[3] - 0.3f32.sin()).abs() < 1e-6);
    }

    #[test]
    fn attention_of_one_position_is_its_value() {
        let shape = Shape {
            layers: 1,
            width: 4,
            heads: 2,
            kv_heads: 1,
            head_width: 2,
            feed_forward: 4,
            vocabulary: 1,
            rotary_dims: 2,
            rope_base: 100.0,
            norm_epsilon: 1e-5,
        };
        // q (4), k (2), v (2).
        let qkv = [1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 7.0, 9.0];
        let mut out = [0.0; 4];
        attend(&shape, 0, &qkv, &qkv[4..6], &qkv[6..8], &mut out);
        assert_eq!(out, [7.0, 9.0, 7.0, 9.0]);
    }

    #[test]
    fn rms_norm_scales_to_unit_root_mean_square() {
        let mut out = [0.0; 2];
        rms_norm(&[3.0, 4.0], &[1.0, 2.0], 0.0, &mut out);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / rms).abs() < 1e-6 && (out[1] - 8.0 / rms).abs() < 1e-6);
    }
}
