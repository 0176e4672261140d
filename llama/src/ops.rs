//! The steps of a forward pass between the matrix products: norms, rotary
//! embeddings, attention over the cache, activations.

use crate::arch::{Activation, Rope};
use crate::ggml;
#[cfg(target_arch = "x86_64")]
use crate::query_lanes;
use crate::team::Disjoint;
#[cfg(target_arch = "x86_64")]
use crate::vector::Avx2Fma;
use crate::vector::{Lanes, Loops, Portable};
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
        // Scaled, then weighted: two roundings, as llama.cpp's two steps.
        for (x, w) in row.iter_mut().zip(weight) {
            *x = *x * scale * w;
        }
    }
}

/// As llama.cpp: the squares summed in f64, the mean rounded to f32.
fn rms_scale(row: &[f32], epsilon: f32) -> f32 {
    let sum: f64 = row.iter().map(|x| (x * x) as f64).sum();
    let mean_square = (sum / row.len() as f64) as f32;
    1.0 / (mean_square + epsilon).sqrt()
}

/// How a set of rotary angles grows from pair to pair.
#[derive(Clone, Debug)]
pub struct Rotary {
    /// `base^(-2 / rotary dimensions)`: each pair's angle is the one
    /// before it times this.
    pub step: f32,
    /// A linear scaling's 1 / factor (1 without one).
    pub scale: f32,
    /// Llama 3's `rope_freqs`: each pair's angle divided by its own.
    pub factors: Option<Vec<f32>>,
    pub pairs: usize,
}

/// The cosine and sine of each rotary pair's angle, for `count` positions
/// from `start`. Computed as llama.cpp computes them: the position times
/// the step once per pair before it, rounded at each multiplication (not
/// the position times the pair's frequency, which is nearer the true
/// angle but parts from llama.cpp's by an ulp per pair, a divergence that
/// grows with the position).
pub fn rotations(rotary: &Rotary, start: usize, count: usize, out: &mut Vec<(f32, f32)>) {
    out.clear();
    for position in start..start + count {
        let mut theta = position as f32;
        for pair in 0..rotary.pairs {
            let factor = rotary.factors.as_ref().map_or(1.0, |f| f[pair]);
            let angle = rotary.scale * (theta / factor);
            out.push((angle.cos(), angle.sin()));
            theta *= rotary.step;
        }
    }
}

/// Turns each head of `x` (heads `head_width` wide) by `turns`, one per
/// pair of its first `2 × turns.len()` dimensions, paired as `rope` says.
/// As GCC compiles llama.cpp's rotation: of `a cos − b sin`, `b sin` is
/// rounded and `a cos` fused into the difference (and so for the sum).
pub fn rotate(x: &mut [f32], head_width: usize, rope: Rope, turns: &[(f32, f32)]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA.
        return unsafe { rotate_with_fma(x, head_width, rope, turns) };
    }
    rotate_fused(x, head_width, rope, turns)
}

/// [`rotate`] with FMA instructions (without them, `mul_add` is a call).
///
/// # Safety
/// The CPU has FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn rotate_with_fma(x: &mut [f32], head_width: usize, rope: Rope, turns: &[(f32, f32)]) {
    rotate_fused(x, head_width, rope, turns)
}

#[inline(always)]
fn rotate_fused(x: &mut [f32], head_width: usize, rope: Rope, turns: &[(f32, f32)]) {
    let half = turns.len();
    for head in x.chunks_exact_mut(head_width) {
        for (pair, &(cos, sin)) in turns.iter().enumerate() {
            let (i, j) = match rope {
                Rope::Adjacent => (2 * pair, 2 * pair + 1),
                Rope::Halves => (pair, pair + half),
            };
            let (a, b) = (head[i], head[j]);
            head[i] = a.mul_add(cos, -(b * sin));
            head[j] = a.mul_add(sin, b * cos);
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
/// per token): a prompt's queries sixteen at a time where the CPU has
/// AVX-512 ([`query_lanes`]), one at a time otherwise.
pub fn attend(
    how: &Attention,
    start: usize,
    qkv: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
) {
    let tokens = out.len() / (how.heads * how.head_width);
    let queries = Queries {
        how,
        start,
        qkv,
        keys,
        values,
    };
    #[cfg(target_arch = "x86_64")]
    if tokens == 1 && as_ggml::available() {
        return as_ggml::attend_one(&queries, out);
    }
    #[cfg(target_arch = "x86_64")]
    if tokens * (how.heads / how.kv_heads) >= LEAST_IN_LANES
        && how.head_width.is_multiple_of(16)
        && query_lanes::available()
    {
        return attend_in_lanes(&queries, out);
    }
    attend_query_by_query(&queries, out)
}

/// Tokens' queries (in `qkv`, at positions from `start`) and the cache
/// they attend over.
#[derive(Clone, Copy)]
struct Queries<'a> {
    how: &'a Attention,
    start: usize,
    qkv: &'a [f32],
    keys: &'a [f32],
    values: &'a [f32],
}

/// [`attend`] one query at a time, shared out by key-value head and block
/// of tokens: the queries of a block's tokens, of all the heads that share
/// the key-value head, read each key and value once between them (one
/// query at a time, each key came from the second-level cache once per
/// query, 4 KiB past the last, where the prefetcher does not follow: a
/// fifth of a prompt's time).
fn attend_query_by_query(queries: &Queries, out: &mut [f32]) {
    let Queries {
        how,
        start,
        qkv,
        keys,
        values,
    } = *queries;
    /// Tokens a piece: its queries' outputs and scores stay in the
    /// nearest cache.
    const BLOCK: usize = 8;
    thread_local! {
        /// A block's scores, one buffer a thread.
        static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }
    let tokens = out.len() / (how.heads * how.head_width);
    let blocks = tokens.div_ceil(BLOCK);
    let lanes = Lanes::detect();
    let shared = Disjoint::of(out);
    crate::team::team().run(how.kv_heads * blocks, &|piece| {
        let (kv_head, block) = (piece % how.kv_heads, piece / how.kv_heads);
        let block = Block {
            how,
            start,
            tokens: block * BLOCK..tokens.min((block + 1) * BLOCK),
            kv_head,
            qkv,
            keys,
            values,
        };
        SCORES.with_borrow_mut(|scores| match lanes {
            Lanes::Portable => block.attend(Portable, scores, &shared),
            // SAFETY: `detect` found AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            Lanes::Avx2Fma => unsafe { block.attend_avx2_fma(scores, &shared) },
        })
    });
}

/// The fewest queries of a key-value head attended in lanes: below, most
/// of the sixteen lanes would be padding (one token's two to four queries
/// run faster one by one).
#[cfg(target_arch = "x86_64")]
const LEAST_IN_LANES: usize = 8;

/// [`attend`] sixteen queries at a time ([`query_lanes`]): the queries of
/// each key-value head, token by token and head by head, in pieces of
/// sixteen.
#[cfg(target_arch = "x86_64")]
fn attend_in_lanes(queries: &Queries, out: &mut [f32]) {
    let Queries { how, start, .. } = *queries;
    use query_lanes::LANES;
    thread_local! {
        static SCRATCH: RefCell<query_lanes::Scratch> = RefCell::default();
    }
    let (width, group) = (how.head_width, how.heads / how.kv_heads);
    let kv_width = how.kv_heads * width;
    let tokens = out.len() / (how.heads * width);
    let per_head = (tokens * group).div_ceil(LANES);
    assert!(start + tokens < i32::MAX as usize, "positions past 32 bits");
    let shared = Disjoint::of(out);
    crate::team::team().run(how.kv_heads * per_head, &|piece| {
        // The last tokens first: they see the most positions, and a long
        // piece handed out last keeps the others waiting.
        let kv_head = piece % how.kv_heads;
        let first_query = (per_head - 1 - piece / how.kv_heads) * LANES;
        let count = (tokens * group - first_query).min(LANES);
        let mut lanes = query_lanes::Queries {
            rows: [&[]; LANES],
            count,
            first: [0; LANES],
            end: [0; LANES],
            width,
            scale: how.scale,
            cap: how.cap,
        };
        // What any of them sees (the first query's, widened below).
        let mut seen = seen_by(how, start, first_query / group);
        for lane in 0..count {
            // Query `i` of this key-value head: token `i / group`, head
            // `i % group` of those sharing it.
            let i = first_query + lane;
            let (t, h) = (i / group, kv_head * group + i % group);
            lanes.rows[lane] = &queries.qkv[t * how.qkv_width + h * width..][..width];
            let sees = seen_by(how, start, t);
            (lanes.first[lane], lanes.end[lane]) = (sees.start as i32, sees.end as i32);
            seen = seen.start.min(sees.start)..seen.end.max(sees.end);
        }
        // SAFETY: each query's head of its token is this piece's alone
        // (pieces differ in key-value head or in queries).
        let mut outs: Vec<&mut [f32]> = (first_query..first_query + count)
            .map(|i| unsafe {
                shared.slice(
                    (i / group * how.heads + kv_head * group + i % group) * width,
                    width,
                )
            })
            .collect();
        let at = |p: usize| p * kv_width + kv_head * width;
        SCRATCH.with_borrow_mut(|scratch| {
            // SAFETY: `available` found AVX-512 F; the head's width is a
            // multiple of 16 (checked by `attend`), every slice that wide.
            unsafe {
                query_lanes::attend(
                    &lanes,
                    seen,
                    |p| &queries.keys[at(p)..][..width],
                    |p| &queries.values[at(p)..][..width],
                    scratch,
                    &mut outs,
                )
            }
        });
    });
}

/// The positions token `t` (of a prompt from `start`) sees.
fn seen_by(how: &Attention, start: usize, t: usize) -> std::ops::Range<usize> {
    let end = start + t + 1;
    how.window.map_or(0, |window| end.saturating_sub(window))..end
}

/// One token's attention as llama.cpp computes it on x86 (see `ggml`):
/// each score a [`ggml::dot`] of the key and the query, times the scale;
/// the softmax over the positions from a whole step of 64 at or before
/// the first one seen; each output dimension a [`ggml::dot`] over those
/// positions. Built with AVX-512 and FMA, where llama.cpp's numbers are
/// its x86 build's and the fused multiply-adds are instructions.
#[cfg(target_arch = "x86_64")]
mod as_ggml {
    use super::{Disjoint, Queries, ggml, seen_by};
    use std::cell::RefCell;

    pub fn available() -> bool {
        use std::arch::is_x86_feature_detected as has;
        has!("avx512f") && has!("fma")
    }

    /// [`super::attend`] of one token, head by head.
    pub fn attend_one(queries: &Queries, out: &mut [f32]) {
        let how = queries.how;
        let shared = Disjoint::of(out);
        crate::team::team().run(how.heads, &|head| {
            // SAFETY: `available` found AVX-512 F and FMA; each head
            // writes its own part of `out`.
            unsafe {
                let out = shared.slice(head * how.head_width, how.head_width);
                attend_head(queries, head, out)
            }
        });
    }

    thread_local! {
        static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }

    /// # Safety
    /// The CPU has AVX-512 F and FMA.
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn attend_head(queries: &Queries, head: usize, out: &mut [f32]) {
        let Queries {
            how,
            start,
            qkv,
            keys,
            values,
        } = *queries;
        let width = how.head_width;
        let kv_head = head / (how.heads / how.kv_heads);
        let at = |p: usize| p * how.kv_heads * width + kv_head * width;
        let seen = seen_by(how, start, 0);
        // ggml's lanes count positions from 0: a step before the first
        // seen, the unseen ones between weigh nothing.
        let first = seen.start / ggml::STEP * ggml::STEP;
        let query = &qkv[head * width..][..width];
        SCORES.with_borrow_mut(|scores| {
            scores.clear();
            scores.resize(seen.end - first, f32::NEG_INFINITY);
            for p in seen.clone() {
                // llama.cpp caps the product, then scales it.
                let product = ggml::avx512::dot(&keys[at(p)..][..width], query);
                let capped = how
                    .cap
                    .map_or(product, |cap| (product * (1.0 / cap)).tanh() * cap);
                scores[p - first] = capped * how.scale;
            }
            ggml::avx512::softmax(scores);
            let value = |i: usize| &values[at(first + i)..][..width];
            match width.is_multiple_of(16) {
                true => ggml::avx512::weighted_sum(out, scores, value),
                false => ggml::weighted_sum(out, scores, value),
            }
        });
    }
}

/// A block of tokens' queries of the heads that share one key-value head.
struct Block<'a> {
    how: &'a Attention,
    /// The position of token 0.
    start: usize,
    tokens: std::ops::Range<usize>,
    kv_head: usize,
    qkv: &'a [f32],
    keys: &'a [f32],
    values: &'a [f32],
}

impl Block<'_> {
    /// The positions token `t` sees.
    fn seen_by(&self, t: usize) -> std::ops::Range<usize> {
        seen_by(self.how, self.start, t)
    }

    /// Each query's softmax of its scaled (and capped) scores, the values
    /// summed by it into its head of `out`; generic over the loops' way,
    /// so that each way's loops inline into it.
    #[inline(always)]
    fn attend<L: Loops>(&self, loops: L, scores: &mut Vec<f32>, out: &Disjoint) {
        let how = self.how;
        let (width, group) = (how.head_width, how.heads / how.kv_heads);
        let kv_width = how.kv_heads * width;
        let heads = self.kv_head * group..(self.kv_head + 1) * group;
        // Queries token by token, head by head; their scores row by row,
        // over the positions any of them sees.
        let queries: Vec<(usize, usize)> = self
            .tokens
            .clone()
            .flat_map(|t| heads.clone().map(move |h| (t, h)))
            .collect();
        let positions =
            self.seen_by(self.tokens.start).start..self.seen_by(self.tokens.end - 1).end;
        let span = positions.len();
        scores.clear();
        scores.resize(queries.len() * span, 0.0);
        let at = |p: usize| p * kv_width + self.kv_head * width;
        for p in positions.clone() {
            let key = &self.keys[at(p)..][..width];
            for (i, &(t, h)) in queries.iter().enumerate() {
                let score = match self.seen_by(t).contains(&p) {
                    true => {
                        let query = &self.qkv[t * how.qkv_width + h * width..][..width];
                        let score = loops.dot(query, key) * how.scale;
                        how.cap.map_or(score, |cap| cap * (score / cap).tanh())
                    }
                    false => f32::NEG_INFINITY,
                };
                scores[i * span + p - positions.start] = score;
            }
        }
        for row in scores.chunks_exact_mut(span) {
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
            let mut total = 0.0;
            for score in row.iter_mut() {
                *score = (*score - max).exp();
                total += *score;
            }
            for score in row.iter_mut() {
                *score /= total;
            }
        }
        // SAFETY: each query's head of its token is this piece's alone
        // (pieces differ in key-value head or in tokens), and apart from
        // the others of the piece.
        let mut outs: Vec<&mut [f32]> = queries
            .iter()
            .map(|&(t, h)| unsafe { out.slice((t * how.heads + h) * width, width) })
            .collect();
        for out in outs.iter_mut() {
            out.fill(0.0);
        }
        // Values a tile at a time, each query's sum over the tile kept in
        // registers: a tile of values stays in the nearest cache.
        const TILE: usize = 32;
        let mut tile = Vec::with_capacity(TILE);
        for first in positions.clone().step_by(TILE) {
            let end = positions.end.min(first + TILE);
            tile.clear();
            tile.extend((first..end).map(|p| &self.values[at(p)..][..width]));
            let (from, to) = (first - positions.start, end - positions.start);
            for (i, out) in outs.iter_mut().enumerate() {
                loops.add_weighted(out, &scores[i * span..][from..to], &tile);
            }
        }
    }

    /// [`Block::attend`] with AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU has them.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn attend_avx2_fma(&self, scores: &mut Vec<f32>, out: &Disjoint) {
        // SAFETY: as this function's.
        self.attend(unsafe { Avx2Fma::new() }, scores, out)
    }
}

/// The gated feed-forward's middle: `activation(gate) × up`, row by row of
/// `gate_up` (gate then up, `width` each).
///
/// A prompt's rows are shared out among the model's team: one thread
/// computing the activations of 64 tokens left the others waiting.
pub fn gated(activation: Activation, gate_up: &[f32], width: usize, out: &mut [f32]) {
    let tokens_per_piece = 4;
    #[cfg(target_arch = "x86_64")]
    let wide = std::arch::is_x86_feature_detected!("avx512f");
    let one_piece = |piece: usize, out: &mut [f32]| {
        let first = piece * tokens_per_piece;
        for (gate_up, out) in gate_up[first * 2 * width..]
            .chunks_exact(2 * width)
            .zip(out.chunks_exact_mut(width))
        {
            let (gate, up) = gate_up.split_at(width);
            #[cfg(target_arch = "x86_64")]
            if activation == Activation::Silu && wide {
                // SAFETY: `wide`: the CPU has AVX-512 F.
                unsafe { silu_times_avx512(gate, up, out) };
                continue;
            }
            for ((out, &g), u) in out.iter_mut().zip(gate).zip(up) {
                let activated = match activation {
                    Activation::Silu => silu(g),
                    Activation::GeluTanh => gelu(g),
                };
                *out = activated * u;
            }
        }
    };
    match out.len() > tokens_per_piece * width {
        true => crate::team::team().for_each_chunk(out, tokens_per_piece * width, one_piece),
        false => one_piece(0, out),
    }
}

/// `out = silu(gate) × up`, sixteen at a time: the library's `exp`, a
/// call a value, was a fortieth of a prompt.
///
/// # Safety
/// The CPU has AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn silu_times_avx512(gate: &[f32], up: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(gate.len() == out.len() && up.len() == out.len());
    let whole = out.len() / 16 * 16;
    for at in (0..whole).step_by(16) {
        // SAFETY: `at + 16 <= whole`, of each.
        unsafe {
            let g = _mm512_loadu_ps(gate.as_ptr().add(at));
            let e = ggml::exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
            let silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0), e));
            let product = _mm512_mul_ps(silu, _mm512_loadu_ps(up.as_ptr().add(at)));
            _mm512_storeu_ps(out.as_mut_ptr().add(at), product);
        }
    }
    for ((out, &g), u) in out[whole..]
        .iter_mut()
        .zip(&gate[whole..])
        .zip(&up[whole..])
    {
        *out = silu(g) * u;
    }
}

/// SiLU of one value: `g / (1 + e^−g)`.
fn silu(g: f32) -> f32 {
    g / (1.0 + (-g).exp())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::tests::values as random_values;

    #[test]
    fn rotation_turns_pairs_by_their_frequency() {
        // Pair 0 turns by the position, pair 1 by position / base^(2/4).
        let rotary = Rotary {
            step: 100f32.powf(-0.5),
            scale: 1.0,
            factors: None,
            pairs: 2,
        };
        let mut turns = Vec::new();
        rotations(&rotary, 3, 1, &mut turns);
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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn attention_in_lanes_is_attention_query_by_query() {
        if !query_lanes::available() {
            return;
        }
        // (heads, key-value heads, head width, tokens, start, window, cap):
        // SmolLM2's three queries a key-value head, Qwen3's two, Gemma 3's
        // four with its windows, one a head, 16- to 256-wide heads.
        let cases = [
            (9, 3, 64, 21, 0, None, None),
            (4, 2, 128, 64, 70, None, None),
            (4, 1, 256, 13, 5, Some(4), None),
            (2, 2, 16, 40, 3, Some(17), Some(5.0)),
            (3, 1, 48, 9, 0, None, None),
        ];
        for (heads, kv_heads, head_width, tokens, start, window, cap) in cases {
            let how = Attention {
                heads,
                kv_heads,
                head_width,
                qkv_width: (heads + 2 * kv_heads) * head_width,
                scale: 1.0 / (head_width as f32).sqrt(),
                cap,
                window,
            };
            let seed = (heads * head_width + tokens) as u32;
            let qkv: Vec<f32> = random_values(tokens * how.qkv_width, seed)
                .into_iter()
                .map(|q| 3.0 * q)
                .collect();
            let cache = (start + tokens) * kv_heads * head_width;
            let keys = random_values(cache, seed + 1);
            let values = random_values(cache, seed + 2);
            let mut want = vec![0.0; tokens * heads * head_width];
            let mut got = vec![f32::NAN; want.len()];
            let queries = Queries {
                how: &how,
                start,
                qkv: &qkv,
                keys: &keys,
                values: &values,
            };
            attend_query_by_query(&queries, &mut want);
            attend_in_lanes(&queries, &mut got);
            for (i, (want, got)) in want.iter().zip(&got).enumerate() {
                assert!(
                    (want - got).abs() <= 2e-6 + 2e-5 * want.abs(),
                    "{heads} heads of {head_width}, {tokens} tokens from {start}: \
                     value {i} {got}, query by query {want}"
                );
            }
        }
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
    fn silu_of_a_row_is_the_library_s_within_rounding() {
        let gate: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.07).collect();
        let up: Vec<f32> = (0..1000).map(|i| 1.0 + i as f32 * 0.001).collect();
        let gate_up: Vec<f32> = gate.iter().chain(&up).copied().collect();
        let mut out = vec![0.0; 1000];
        gated(Activation::Silu, &gate_up, 1000, &mut out);
        for ((out, g), u) in out.iter().zip(&gate).zip(&up) {
            let want = g / (1.0 + (-g).exp()) * u;
            assert!(
                (out - want).abs() <= 1e-6 * want.abs().max(1e-3),
                "silu({g}) × {u}: {out}, want {want}"
            );
        }
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
