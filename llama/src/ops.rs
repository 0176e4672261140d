//! The steps of a forward pass between the matrix products: norms, rotary
//! embeddings, attention over the cache, activations.

use crate::arch::{Activation, Rope};
use std::cell::RefCell;

/// RMS norm of each row of `input`, scaled by `weight`.
pub fn rms_norm(input: &[f32], weight: &[f32], epsilon: f32, out: &mut [f32]) {
    let width = weight.len();
    for (input, out) in input.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let scale = rms_scale(input, epsilon);
        for ((out, x), w) in out.iter_mut().zip(input).zip(weight) {
            *out = x * scale * w;
        }
    }
}

/// [`rms_norm`] of each row of `values` in place (rows as wide as `weight`).
pub fn rms_norm_rows(values: &mut [f32], weight: &[f32], epsilon: f32) {
    for row in values.chunks_exact_mut(weight.len()) {
        let scale = rms_scale(row, epsilon);
        for (x, w) in row.iter_mut().zip(weight) {
            *x *= scale * w;
        }
    }
}

fn rms_scale(row: &[f32], epsilon: f32) -> f32 {
    let mean_square = row.iter().map(|x| x * x).sum::<f32>() / row.len() as f32;
    1.0 / (mean_square + epsilon).sqrt()
}

/// The cosine and sine of each rotary pair's angle, for `count` positions
/// from `start`; `frequencies` is each pair's angle per position.
pub fn rotations(frequencies: &[f32], start: usize, count: usize, out: &mut Vec<(f32, f32)>) {
    out.clear();
    for position in start..start + count {
        for frequency in frequencies {
            let angle = position as f32 * frequency;
            out.push((angle.cos(), angle.sin()));
        }
    }
}

/// Turns each head of `x` (heads `head_width` wide) by `turns`, one per
/// pair of its first `2 × turns.len()` dimensions, paired as `rope` says.
pub fn rotate(x: &mut [f32], head_width: usize, rope: Rope, turns: &[(f32, f32)]) {
    let half = turns.len();
    for head in x.chunks_exact_mut(head_width) {
        for (pair, &(cos, sin)) in turns.iter().enumerate() {
            let (i, j) = match rope {
                Rope::Adjacent => (2 * pair, 2 * pair + 1),
                Rope::Halves => (pair, pair + half),
            };
            let (a, b) = (head[i], head[j]);
            head[i] = a * cos - b * sin;
            head[j] = a * sin + b * cos;
        }
    }
}

/// How attention reads the cache.
pub struct Attention {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_width: usize,
    /// Rows of the stacked q, k and v.
    pub qkv_width: usize,
    pub scale: f32,
    /// Scores capped to ±this by tanh.
    pub cap: Option<f32>,
    /// Positions back a query sees, itself included; `None`: all before it.
    pub window: Option<usize>,
}

/// Causal grouped-query attention of the queries in `qkv` (tokens at
/// positions from `start`) over the cache, into `out` (heads × head width
/// per token).
pub fn attend(
    how: &Attention,
    start: usize,
    qkv: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
) {
    let head_width = how.head_width;
    let kv_width = how.kv_heads * head_width;
    let group = how.heads / how.kv_heads;
    // One piece per head of each token: the work is shared out by head.
    thread_local! {
        /// A query's scores, one buffer a thread.
        static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }
    crate::team::team().for_each_chunk(out, head_width, |index, out| {
        SCORES.with_borrow_mut(|scores| {
            let (token, head) = (index / how.heads, index % how.heads);
            let query = &qkv[token * how.qkv_width + head * head_width..][..head_width];
            let kv_offset = head / group * head_width;
            let end = start + token + 1;
            let first = how.window.map_or(0, |window| end.saturating_sub(window));
            scores.clear();
            scores.extend((first..end).map(|p| {
                let score = dot(query, &keys[p * kv_width + kv_offset..][..head_width]) * how.scale;
                match how.cap {
                    Some(cap) => cap * (score / cap).tanh(),
                    None => score,
                }
            }));
            let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
            let mut total = 0.0;
            for score in scores.iter_mut() {
                *score = (*score - max).exp();
                total += *score;
            }
            out.fill(0.0);
            for (p, score) in (first..end).zip(scores.iter()) {
                let value = &values[p * kv_width + kv_offset..][..head_width];
                for (out, v) in out.iter_mut().zip(value) {
                    *out += score / total * v;
                }
            }
        })
    });
}

/// The gated feed-forward's middle: `activation(gate) × up`, row by row of
/// `gate_up` (gate then up, `width` each).
pub fn gated(activation: Activation, gate_up: &[f32], width: usize, out: &mut [f32]) {
    for (gate_up, out) in gate_up
        .chunks_exact(2 * width)
        .zip(out.chunks_exact_mut(width))
    {
        let (gate, up) = gate_up.split_at(width);
        for ((out, &g), u) in out.iter_mut().zip(gate).zip(up) {
            let activated = match activation {
                Activation::Silu => g / (1.0 + (-g).exp()),
                Activation::GeluTanh => gelu(g),
            };
            *out = activated * u;
        }
    }
}

/// GELU in its tanh approximation, as llama.cpp computes it: of the input
/// rounded to f16, from a table of every f16's GELU (itself in f16), and
/// 0 or the input itself past ±10. Both the rounding and the table are
/// llama.cpp's; a look-up is also faster than a tanh.
fn gelu(x: f32) -> f32 {
    static TABLE: std::sync::LazyLock<Vec<f32>> = std::sync::LazyLock::new(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let x = half::f16::from_bits(bits).to_f32();
                half::f16::from_f32(gelu_exact(x)).to_f32()
            })
            .collect()
    });
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        TABLE[half::f16::from_f32(x).to_bits() as usize]
    }
}

fn gelu_exact(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

pub fn add(into: &mut [f32], other: &[f32]) {
    for (a, b) in into.iter_mut().zip(other) {
        *a += b;
    }
}

/// A dot product in eight lanes, which the compiler turns into SIMD.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
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
        // Pair 0 turns by the position, pair 1 by position / base^(2/4).
        let frequencies = [1.0, 100f32.powf(-0.5)];
        let mut turns = Vec::new();
        rotations(&frequencies, 3, 1, &mut turns);
        let mut x = [1.0, 0.0, 1.0, 0.0];
        rotate(&mut x, 4, Rope::Adjacent, &turns);
        assert!((x[0] - 3f32.cos()).abs() < 1e-6 && (x[1] - 3f32.sin()).abs() < 1e-6);
        assert!((x[2] - 0.3f32.cos()).abs() < 1e-6 && (x[3] - 0.3f32.sin()).abs() < 1e-6);
        // Halves pair dimension 0 with 2, and 1 with 3.
        let mut x = [1.0, 1.0, 0.0, 0.0];
        rotate(&mut x, 4, Rope::Halves, &turns);
        assert!((x[0] - 3f32.cos()).abs() < 1e-6 && (x[2] - 3f32.sin()).abs() < 1e-6);
        assert!((x[1] - 0.3f32.cos()).abs() < 1e-6 && (x[3] - 0.3f32.sin()).abs() < 1e-6);
    }

    fn attention(window: Option<usize>) -> Attention {
        Attention {
            heads: 2,
            kv_heads: 1,
            head_width: 2,
            qkv_width: 8,
            scale: 1.0,
            cap: None,
            window,
        }
    }

    #[test]
    fn attention_of_one_position_is_its_value() {
        // q (4), k (2), v (2).
        let qkv = [1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 7.0, 9.0];
        let mut out = [0.0; 4];
        attend(&attention(None), 0, &qkv, &qkv[4..6], &qkv[6..8], &mut out);
        assert_eq!(out, [7.0, 9.0, 7.0, 9.0]);
    }

    #[test]
    fn a_window_of_one_sees_only_its_own_position() {
        let qkv = [1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 7.0, 9.0];
        let keys = [5.0, 5.0, 0.5, 0.5];
        let values = [100.0, 100.0, 7.0, 9.0];
        let mut out = [0.0; 4];
        attend(&attention(Some(1)), 1, &qkv, &keys, &values, &mut out);
        assert_eq!(out, [7.0, 9.0, 7.0, 9.0]);
        attend(&attention(None), 1, &qkv, &keys, &values, &mut out);
        assert!(out[0] > 50.0, "{out:?}");
    }

    #[test]
    fn rms_norm_scales_to_unit_root_mean_square() {
        let mut out = [0.0; 2];
        rms_norm(&[3.0, 4.0], &[1.0, 2.0], 0.0, &mut out);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / rms).abs() < 1e-6 && (out[1] - 8.0 / rms).abs() < 1e-6);
        let mut rows = [3.0, 4.0, 3.0, 4.0];
        rms_norm_rows(&mut rows, &[1.0, 2.0], 0.0);
        assert_eq!(rows[..2], out);
        assert_eq!(rows[2..], out);
    }

    #[test]
    fn activations_are_silu_and_tanh_gelu() {
        let mut out = [0.0; 2];
        gated(Activation::Silu, &[1.0, -2.0, 2.0, 3.0], 2, &mut out);
        assert!((out[0] - 2.0 / (1.0 + (-1f32).exp())).abs() < 1e-6);
        gated(Activation::GeluTanh, &[1.0, 0.0, 1.0, 1.0], 2, &mut out);
        // GELU(1) = 0.841192, which f16 holds as 0.8413086 (llama.cpp's).
        assert_eq!(out[0], half::f16::from_f32(0.841_192).to_f32(), "{out:?}");
        assert_eq!(out[1], 0.0);
        // Past ±10: the input, or nothing.
        gated(Activation::GeluTanh, &[12.5, -11.0, 2.0, 3.0], 2, &mut out);
        assert_eq!(out, [25.0, 0.0]);
    }
}
