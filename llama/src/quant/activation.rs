//! A product's inputs, in the form each weight format multiplies with:
//! eight-bit blocks of 32 (llama.cpp's Q8_0/Q8_1), eight-bit super-blocks
//! of 256 (Q8_K), or floats of the weights' width. Each is made as
//! llama.cpp makes it, so that the engine's products round as its do.

use super::format::Activation;

/// Values per block of [`Q8Block`].
pub const BLOCK: usize = 32;
/// Values per super-block of [`Q8KBlock`].
pub const SUPER_BLOCK: usize = 256;

/// A block of quantized activations: `value[i] ≈ scale * quants[i]`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Q8Block {
    pub scale: f32,
    /// `scale` times the sum of `quants`: what a weight block's minimum
    /// contributes to a product.
    pub scaled_sum: f32,
    pub quants: [i8; BLOCK],
}

/// A super-block of quantized activations (llama.cpp's Q8_K).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Q8KBlock {
    pub scale: f32,
    pub quants: [i8; SUPER_BLOCK],
    /// The sum of each 16 quants: what the weights' minimums and offsets
    /// contribute.
    pub sums: [i16; SUPER_BLOCK / 16],
}

impl Default for Q8KBlock {
    fn default() -> Self {
        Q8KBlock {
            scale: 0.0,
            quants: [0; SUPER_BLOCK],
            sums: [0; SUPER_BLOCK / 16],
        }
    }
}

/// Quantizes `values` (a multiple of [`BLOCK`] long) into `blocks` as
/// llama.cpp's x86 `quantize_row_q8_0`/`_q8_1` do: a multiplier of
/// 127 over the largest magnitude, rounding half to even, the scale kept in
/// f16 and the sum's scale taken from the scale before it was rounded. The
/// engine's products then round as llama.cpp's do.
pub fn quantize(values: &[f32], blocks: &mut [Q8Block]) {
    debug_assert_eq!(values.len(), blocks.len() * BLOCK);
    for (values, block) in values.chunks_exact(BLOCK).zip(blocks) {
        let max = values.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = max / 127.0;
        let inverse = if max == 0.0 { 0.0 } else { 127.0 / max };
        let mut sum = 0i32;
        for (q, v) in block.quants.iter_mut().zip(values) {
            *q = nearest(v * inverse) as i8;
            sum += i32::from(*q);
        }
        block.scale = half::f16::from_f32(scale).to_f32();
        block.scaled_sum = half::f16::from_f32(scale * sum as f32).to_f32();
    }
}

/// `value` rounded to the nearest integer, half to even, for |value| <
/// 2^22 (llama.cpp's `nearest_int`): adding 1.5 * 2^23 leaves the integer
/// in the mantissa's low bits. `round_ties_even` is a library call on CPUs
/// without SSE4.1, which the engine's portable build must run on.
fn nearest(value: f32) -> i32 {
    ((value + 12_582_912.0).to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
}

/// Quantizes `values` (a multiple of [`SUPER_BLOCK`] long) into `blocks`
/// as llama.cpp's `quantize_row_q8_K_ref`: the value of largest magnitude
/// becomes -127, the others round half to even.
pub fn quantize_k(values: &[f32], blocks: &mut [Q8KBlock]) {
    assert_eq!(values.len(), blocks.len() * SUPER_BLOCK);
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2; the lengths agree (asserted).
        return unsafe { x86::quantize_k(values, blocks) };
    }
    quantize_k_portable(values, blocks)
}

/// [`quantize_k`] a value at a time: the search for the largest, a branch
/// a value, took a twentieth of a prompt's time where the CPU has SIMD.
pub fn quantize_k_portable(values: &[f32], blocks: &mut [Q8KBlock]) {
    for (values, block) in values.chunks_exact(SUPER_BLOCK).zip(blocks) {
        let mut largest = 0f32;
        let mut magnitude = 0f32;
        for &v in values {
            if v.abs() > magnitude {
                magnitude = v.abs();
                largest = v;
            }
        }
        if magnitude == 0.0 {
            *block = Q8KBlock::default();
            continue;
        }
        let inverse = -127.0 / largest;
        for (q, v) in block.quants.iter_mut().zip(values) {
            *q = nearest(inverse * v).min(127) as i8;
        }
        for (sum, quants) in block.sums.iter_mut().zip(block.quants.chunks_exact(16)) {
            *sum = quants.iter().map(|&q| i16::from(q)).sum();
        }
        block.scale = 1.0 / inverse;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Q8KBlock, SUPER_BLOCK};
    use std::arch::x86_64::*;

    /// [`super::quantize_k`], eight values at a time, to the same bytes.
    ///
    /// # Safety
    /// The CPU has AVX2; `values` is `blocks` super-blocks long.
    #[target_feature(enable = "avx2")]
    pub unsafe fn quantize_k(values: &[f32], blocks: &mut [Q8KBlock]) {
        for (values, block) in values.chunks_exact(SUPER_BLOCK).zip(blocks) {
            // SAFETY: each `at` below is at most 248, of 256 values.
            let load = |at: usize| unsafe { _mm256_loadu_ps(values.as_ptr().add(at)) };
            let magnitude_of = |v: __m256| _mm256_andnot_ps(_mm256_set1_ps(-0.0), v);
            let mut eight = _mm256_setzero_ps();
            for at in (0..SUPER_BLOCK).step_by(8) {
                // The magnitude first: a NaN, in the first operand, is
                // passed over, as the scalar comparison passes it over.
                eight = _mm256_max_ps(magnitude_of(load(at)), eight);
            }
            let mut lanes = [0f32; 8];
            // SAFETY: eight floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), eight) };
            let magnitude = lanes.into_iter().fold(0f32, f32::max);
            if magnitude == 0.0 {
                *block = Q8KBlock::default();
                continue;
            }
            // The first value of that magnitude, as the scalar loop keeps it.
            let target = _mm256_set1_ps(magnitude);
            let largest = (0..SUPER_BLOCK)
                .step_by(8)
                .find_map(|at| {
                    let equal = _mm256_cmp_ps::<_CMP_EQ_OQ>(magnitude_of(load(at)), target);
                    match _mm256_movemask_ps(equal) {
                        0 => None,
                        mask => Some(values[at + mask.trailing_zeros() as usize]),
                    }
                })
                .expect("the largest magnitude is one of the values");
            let inverse = -127.0 / largest;
            let scaled = |at: usize| {
                // Rounded half to even (the CPU's mode), as `nearest`.
                let q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_set1_ps(inverse), load(at)));
                _mm256_min_epi32(q, _mm256_set1_epi32(127))
            };
            for at in (0..SUPER_BLOCK).step_by(32) {
                let halves = _mm256_packs_epi32(scaled(at), scaled(at + 8));
                let others = _mm256_packs_epi32(scaled(at + 16), scaled(at + 24));
                // The packs work within 128-bit lanes: put the eight
                // fours back in order.
                let bytes = _mm256_permutevar8x32_epi32(
                    _mm256_packs_epi16(halves, others),
                    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7),
                );
                // SAFETY: 32 bytes at `at`, of 256.
                unsafe {
                    _mm256_storeu_si256(block.quants.as_mut_ptr().add(at) as *mut __m256i, bytes)
                };
                // Each eight's sum, the bytes taken 128 up (unsigned).
                let eights = _mm256_sad_epu8(
                    _mm256_xor_si256(bytes, _mm256_set1_epi8(0x80u8 as i8)),
                    _mm256_setzero_si256(),
                );
                let mut sums = [0i64; 4];
                // SAFETY: four 64-bit sums.
                unsafe { _mm256_storeu_si256(sums.as_mut_ptr() as *mut __m256i, eights) };
                for (i, pair) in sums.chunks_exact(2).enumerate() {
                    block.sums[at / 16 + i] = (pair[0] + pair[1] - 16 * 128) as i16;
                }
            }
            block.scale = 1.0 / inverse;
        }
    }
}

/// bf16 of `value`, rounded to nearest even as llama.cpp rounds it.
pub fn bf16_of(value: f32) -> u16 {
    half::bf16::from_f32(value).to_bits()
}

/// Which forms of the inputs a product takes: one bit per [`Activation`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs(u8);

impl Needs {
    const fn bit(kind: Activation) -> u8 {
        1 << kind as u8
    }

    pub fn with(self, kind: Activation) -> Self {
        Needs(self.0 | Self::bit(kind))
    }

    pub fn has(self, kind: Activation) -> bool {
        self.0 & Self::bit(kind) != 0
    }
}

/// Some tokens' inputs to a product, in each form its weights take.
#[derive(Default)]
pub struct Forms {
    tokens: usize,
    columns: usize,
    q8: Vec<Q8Block>,
    q8k: Vec<Q8KBlock>,
    f16: Vec<u16>,
    bf16: Vec<u16>,
    f32: Vec<f32>,
}

impl Forms {
    /// Takes `values`, `tokens` rows of equal width, in the forms `needs`
    /// names. A K form needs the width to be whole super-blocks, which the
    /// matrices that take it check of their columns.
    pub fn prepare(&mut self, values: &[f32], tokens: usize, needs: Needs) {
        assert!(tokens > 0 && values.len().is_multiple_of(tokens));
        self.tokens = tokens;
        self.columns = values.len() / tokens;
        // A prompt's tokens quantized by the model's team, a few each.
        let team = crate::team::team();
        if needs.has(Activation::Q8) {
            self.q8.resize(values.len() / BLOCK, Q8Block::default());
            let per_piece = 4 * self.columns / BLOCK;
            match tokens > 4 {
                true => team.for_each_chunk(&mut self.q8, per_piece, |piece, blocks| {
                    quantize(
                        &values[piece * per_piece * BLOCK..][..blocks.len() * BLOCK],
                        blocks,
                    )
                }),
                false => quantize(values, &mut self.q8),
            }
        }
        if needs.has(Activation::Q8K) {
            self.q8k
                .resize(values.len() / SUPER_BLOCK, Q8KBlock::default());
            let per_piece = 4 * self.columns / SUPER_BLOCK;
            match tokens > 4 {
                true => team.for_each_chunk(&mut self.q8k, per_piece, |piece, blocks| {
                    let values = &values[piece * per_piece * SUPER_BLOCK..];
                    quantize_k(&values[..blocks.len() * SUPER_BLOCK], blocks)
                }),
                false => quantize_k(values, &mut self.q8k),
            }
        }
        if needs.has(Activation::F16) {
            self.f16.clear();
            self.f16
                .extend(values.iter().map(|&v| half::f16::from_f32(v).to_bits()));
        }
        if needs.has(Activation::BF16) {
            self.bf16.clear();
            self.bf16.extend(values.iter().map(|&v| bf16_of(v)));
        }
        if needs.has(Activation::F32) {
            self.f32.clear();
            self.f32.extend_from_slice(values);
        }
    }

    pub fn tokens(&self) -> usize {
        self.tokens
    }

    pub fn columns(&self) -> usize {
        self.columns
    }

    pub fn q8(&self, token: usize) -> &[Q8Block] {
        let blocks = self.columns / BLOCK;
        &self.q8[token * blocks..][..blocks]
    }

    pub fn q8k(&self, token: usize) -> &[Q8KBlock] {
        let blocks = self.columns / SUPER_BLOCK;
        &self.q8k[token * blocks..][..blocks]
    }

    pub fn f16(&self, token: usize) -> &[u16] {
        &self.f16[token * self.columns..][..self.columns]
    }

    pub fn bf16(&self, token: usize) -> &[u16] {
        &self.bf16[token * self.columns..][..self.columns]
    }

    pub fn f32(&self, token: usize) -> &[f32] {
        &self.f32[token * self.columns..][..self.columns]
    }

    /// The f16 inputs of every token, one token after another.
    pub fn all_f16(&self) -> &[u16] {
        &self.f16[..self.tokens * self.columns]
    }

    /// The bf16 inputs of every token, one token after another.
    pub fn all_bf16(&self) -> &[u16] {
        &self.bf16[..self.tokens * self.columns]
    }

    /// The Q8 blocks of every token, one token after another.
    pub fn all_q8(&self) -> &[Q8Block] {
        &self.q8[..self.tokens * self.columns / BLOCK]
    }
}

/// The scales and scaled sums of four inputs' blocks, side by side: a
/// kernel scales the four products of a weight block in one step.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
pub struct Four {
    pub scales: [f32; 4],
    pub scaled_sums: [f32; 4],
}

impl Four {
    /// Fills `out` from four inputs, `blocks` blocks each, one after another.
    pub fn of(inputs: &[Q8Block], blocks: usize, out: &mut Vec<Four>) {
        out.clear();
        out.extend((0..blocks).map(|b| Four {
            scales: std::array::from_fn(|n| inputs[n * blocks + b].scale),
            scaled_sums: std::array::from_fn(|n| inputs[n * blocks + b].scaled_sum),
        }));
    }
}
