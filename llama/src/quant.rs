//! Quantized weight matrices and the products the model runs on them.
//!
//! Weights stay in the blocks the GGUF file holds them in (llama.cpp's
//! layout): Q4_1, 32 four-bit values with a scale and a minimum, or Q8_0,
//! 32 bytes with a scale. Other formats are turned into Q8_0 when the file
//! is read. Activations are quantized to eight bits per product (llama.cpp's
//! Q8_1: the scale, the scale times the sum, 32 bytes), so the inner loop
//! is integer multiply-adds, as in llama.cpp.
//!
//! A decode step reads every weight once, so its speed is the speed of
//! memory: keeping four-bit weights four-bit is what makes it fast. The
//! AVX2 kernels are chosen at run time; the portable ones give the same
//! sums up to the order of float additions.

use rayon::prelude::*;

/// Values per block, in every format.
pub const BLOCK: usize = 32;

/// How a matrix's blocks are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// f16 scale, f16 minimum, 16 bytes of two four-bit values each
    /// (value `i` in the low half of byte `i`, value `i + 16` in its high half).
    Q4_1,
    /// f16 scale, 32 signed bytes.
    Q8_0,
}

impl Format {
    pub const fn block_bytes(self) -> usize {
        match self {
            Format::Q4_1 => 20,
            Format::Q8_0 => 34,
        }
    }
}

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

/// Quantizes `values` (a multiple of [`BLOCK`] long) into `blocks`.
pub fn quantize(values: &[f32], blocks: &mut [Q8Block]) {
    debug_assert_eq!(values.len(), blocks.len() * BLOCK);
    for (values, block) in values.chunks_exact(BLOCK).zip(blocks) {
        let max = values.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = max / 127.0;
        let inverse = if scale == 0.0 { 0.0 } else { 1.0 / scale };
        let mut sum = 0i32;
        for (q, v) in block.quants.iter_mut().zip(values) {
            // Half away from zero, as `round` (which is a library call
            // without SSE4.1); a value a hair below a half may go up.
            let scaled = v * inverse;
            *q = (scaled + 0.5f32.copysign(scaled)) as i8;
            sum += i32::from(*q);
        }
        // Kept as llama.cpp keeps it, in f16: the engine's products then
        // round as llama.cpp's do.
        let scale = half::f16::from_f32(scale).to_f32();
        block.scale = scale;
        block.scaled_sum = scale * sum as f32;
    }
}

/// The scales and scaled sums of four inputs' blocks, side by side: a
/// kernel scales the four products of a weight block in one step.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
pub struct Four {
    scales: [f32; 4],
    scaled_sums: [f32; 4],
}

impl Four {
    /// Fills `out` from four inputs, `blocks` blocks each, one after another.
    fn of(inputs: &[Q8Block], blocks: usize, out: &mut Vec<Four>) {
        out.clear();
        out.extend((0..blocks).map(|b| Four {
            scales: std::array::from_fn(|n| inputs[n * blocks + b].scale),
            scaled_sums: std::array::from_fn(|n| inputs[n * blocks + b].scaled_sum),
        }));
    }
}

/// A matrix of `rows` × `columns` weights, row after row, in blocks.
pub struct Matrix {
    format: Format,
    rows: usize,
    columns: usize,
    bytes: Vec<u8>,
}

impl Matrix {
    pub fn new(
        format: Format,
        rows: usize,
        columns: usize,
        bytes: Vec<u8>,
    ) -> Result<Self, String> {
        if !columns.is_multiple_of(BLOCK) {
            return Err(format!(
                "a row of {columns} values is not a whole number of {BLOCK}-value blocks"
            ));
        }
        let expected = rows * columns / BLOCK * format.block_bytes();
        if bytes.len() != expected {
            return Err(format!(
                "a {rows}×{columns} {format:?} matrix takes {expected} bytes, not {}",
                bytes.len()
            ));
        }
        Ok(Matrix {
            format,
            rows,
            columns,
            bytes,
        })
    }

    /// Rows of `parts` one after another, as one matrix: one product
    /// instead of several.
    pub fn stacked(parts: Vec<Matrix>) -> Result<Self, String> {
        let first = parts.first().ok_or("no matrix to stack")?;
        let (format, columns) = (first.format, first.columns);
        if parts
            .iter()
            .any(|part| part.format != format || part.columns != columns)
        {
            return Err("stacked matrices differ in format or width".into());
        }
        let rows = parts.iter().map(|part| part.rows).sum();
        let bytes = parts.into_iter().flat_map(|part| part.bytes).collect();
        Matrix::new(format, rows, columns, bytes)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn columns(&self) -> usize {
        self.columns
    }

    fn row(&self, row: usize) -> &[u8] {
        let row_bytes = self.columns / BLOCK * self.format.block_bytes();
        &self.bytes[row * row_bytes..][..row_bytes]
    }

    /// Writes row `row`'s values into `out`.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        let bytes = self.row(row);
        for (block, out) in bytes
            .chunks_exact(self.format.block_bytes())
            .zip(out.chunks_exact_mut(BLOCK))
        {
            let scale = f16_at(block, 0);
            match self.format {
                Format::Q4_1 => {
                    let min = f16_at(block, 2);
                    for (i, byte) in block[4..].iter().enumerate() {
                        out[i] = f32::from(byte & 0x0F) * scale + min;
                        out[i + 16] = f32::from(byte >> 4) * scale + min;
                    }
                }
                Format::Q8_0 => {
                    for (out, &q) in out.iter_mut().zip(&block[2..]) {
                        *out = f32::from(q as i8) * scale;
                    }
                }
            }
        }
    }

    /// `out[t][r]` = row `r` · input `t`, for the `tokens` inputs in
    /// `inputs` (each `columns / BLOCK` blocks). Rows are shared out among
    /// the thread pool's threads; `scratch` holds the products row by row
    /// when there is more than one input.
    pub fn multiply(
        &self,
        inputs: &[Q8Block],
        tokens: usize,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
    ) {
        let blocks = self.columns / BLOCK;
        assert_eq!(inputs.len(), tokens * blocks, "inputs of the wrong width");
        assert_eq!(out.len(), tokens * self.rows, "output of the wrong size");
        let kernels = Kernels::detect();
        // Enough pieces for the threads to even out, few enough that
        // handing them out costs little.
        let pieces = rayon::current_num_threads() * 4;
        let rows_per_piece = self.rows.div_ceil(pieces).max(16);
        let by_row = |first_row: usize, piece: &mut [f32]| {
            let mut side_by_side = Vec::new();
            // Four inputs at a time against every row of the piece: the
            // four stay in the nearest cache while the rows stream past
            // (the piece's rows fit in the core's second-level cache).
            for first_token in (0..tokens).step_by(4) {
                let group = (tokens - first_token).min(4);
                let group_inputs = &inputs[first_token * blocks..][..group * blocks];
                let four = (group == 4).then(|| {
                    Four::of(group_inputs, blocks, &mut side_by_side);
                    [
                        &group_inputs[..blocks],
                        &group_inputs[blocks..2 * blocks],
                        &group_inputs[2 * blocks..3 * blocks],
                        &group_inputs[3 * blocks..],
                    ]
                });
                for (offset, products) in piece.chunks_exact_mut(tokens).enumerate() {
                    let row = self.row(first_row + offset);
                    let products = &mut products[first_token..][..group];
                    match four {
                        Some(four) => products.copy_from_slice(&kernels.four(
                            self.format,
                            row,
                            four,
                            &side_by_side,
                        )),
                        None => {
                            for (input, product) in group_inputs.chunks_exact(blocks).zip(products)
                            {
                                *product = kernels.dot(self.format, row, [input])[0];
                            }
                        }
                    }
                }
            }
        };
        if tokens == 1 {
            out.par_chunks_mut(rows_per_piece)
                .enumerate()
                .for_each(|(piece, out)| by_row(piece * rows_per_piece, out));
            return;
        }
        scratch.resize(tokens * self.rows, 0.0);
        scratch
            .par_chunks_mut(rows_per_piece * tokens)
            .enumerate()
            .for_each(|(piece, out)| by_row(piece * rows_per_piece, out));
        for (token, out) in out.chunks_exact_mut(self.rows).enumerate() {
            for (row, out) in out.iter_mut().enumerate() {
                *out = scratch[row * tokens + token];
            }
        }
    }
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// The dot products this CPU runs fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernels {
    Portable,
    /// AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// Those and AVX-512 VNNI on 256-bit registers.
    #[cfg(target_arch = "x86_64")]
    Vnni,
}

impl Kernels {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") && has!("f16c") {
                if has!("avx512vnni") && has!("avx512vl") {
                    return Kernels::Vnni;
                }
                return Kernels::Avx2;
            }
        }
        Kernels::Portable
    }

    /// Every kind this CPU can run, for tests that compare them.
    #[cfg(test)]
    fn available() -> Vec<Self> {
        let mut kinds = vec![Kernels::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            let best = Kernels::detect();
            if best != Kernels::Portable {
                kinds.push(Kernels::Avx2);
            }
            if best == Kernels::Vnni {
                kinds.push(Kernels::Vnni);
            }
        }
        kinds
    }

    /// Row `row` times four inputs, whose scales are also `side_by_side`.
    fn four(
        self,
        format: Format,
        row: &[u8],
        inputs: [&[Q8Block]; 4],
        side_by_side: &[Four],
    ) -> [f32; 4] {
        // SAFETY (each x86 arm): as in `dot`; `side_by_side` has a `Four`
        // per block of the inputs.
        match (self, format) {
            #[cfg(target_arch = "x86_64")]
            (Kernels::Avx2, Format::Q4_1) => unsafe {
                x86::avx2::q4_1_four(row, inputs, side_by_side)
            },
            #[cfg(target_arch = "x86_64")]
            (Kernels::Vnni, Format::Q4_1) => unsafe {
                x86::vnni::q4_1_four(row, inputs, side_by_side)
            },
            _ => self.dot(format, row, inputs),
        }
    }

    fn dot<const N: usize>(self, format: Format, row: &[u8], inputs: [&[Q8Block]; N]) -> [f32; N] {
        // SAFETY (each x86 arm): `detect` found the CPU features the
        // kernel names; the kernels read `row` and `inputs` within bounds.
        match (self, format) {
            (Kernels::Portable, Format::Q4_1) => portable::q4_1(row, inputs),
            (Kernels::Portable, Format::Q8_0) => portable::q8_0(row, inputs),
            #[cfg(target_arch = "x86_64")]
            (Kernels::Avx2, Format::Q4_1) => unsafe { x86::avx2::q4_1(row, inputs) },
            #[cfg(target_arch = "x86_64")]
            (Kernels::Avx2, Format::Q8_0) => unsafe { x86::avx2::q8_0(row, inputs) },
            #[cfg(target_arch = "x86_64")]
            (Kernels::Vnni, Format::Q4_1) => unsafe { x86::vnni::q4_1(row, inputs) },
            #[cfg(target_arch = "x86_64")]
            (Kernels::Vnni, Format::Q8_0) => unsafe { x86::vnni::q8_0(row, inputs) },
        }
    }
}

mod portable {
    use super::{BLOCK, Format, Q8Block, f16_at};

    pub fn q4_1<const N: usize>(row: &[u8], inputs: [&[Q8Block]; N]) -> [f32; N] {
        let mut sums = [0f32; N];
        for (b, block) in row.chunks_exact(Format::Q4_1.block_bytes()).enumerate() {
            let (scale, min) = (f16_at(block, 0), f16_at(block, 2));
            for (sum, input) in sums.iter_mut().zip(inputs) {
                let input = &input[b];
                let mut dot = 0i32;
                for (i, byte) in block[4..].iter().enumerate() {
                    dot += i32::from(byte & 0x0F) * i32::from(input.quants[i])
                        + i32::from(byte >> 4) * i32::from(input.quants[i + BLOCK / 2]);
                }
                *sum += scale * input.scale * dot as f32 + min * input.scaled_sum;
            }
        }
        sums
    }

    pub fn q8_0<const N: usize>(row: &[u8], inputs: [&[Q8Block]; N]) -> [f32; N] {
        let mut sums = [0f32; N];
        for (b, block) in row.chunks_exact(Format::Q8_0.block_bytes()).enumerate() {
            let scale = f16_at(block, 0);
            for (sum, input) in sums.iter_mut().zip(inputs) {
                let input = &input[b];
                let dot: i32 = block[2..]
                    .iter()
                    .zip(&input.quants)
                    .map(|(&w, &x)| i32::from(w as i8) * i32::from(x))
                    .sum();
                *sum += scale * input.scale * dot as f32;
            }
        }
        sums
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Format, Four, Q8Block};
    use std::arch::x86_64::*;

    /// The f16 at `at` as an f32.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn f16_at(at: *const u8) -> f32 {
        let bits = unsafe { std::ptr::read_unaligned(at as *const u16) };
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn sum_of(v: __m256) -> f32 {
        let quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)))
    }

    /// Unsigned bytes `u` times signed bytes `s`, summed in fours: with
    /// AVX2, two multiply-adds through 16-bit sums.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn products_avx2(u: __m256i, s: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }

    /// The same in one instruction (AVX-512 VNNI on 256-bit registers).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
    fn products_vnni(u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
    }

    /// Defines the kernels for one way of multiplying bytes.
    macro_rules! kernels {
        ($module:ident, $features:literal, $products:ident) => {
            pub mod $module {
                use super::*;

                /// # Safety
                /// The CPU has the features named; each input has a block
                /// per 20 bytes of `row`.
                #[target_feature(enable = $features)]
                pub unsafe fn q4_1<const N: usize>(
                    row: &[u8],
                    inputs: [&[Q8Block]; N],
                ) -> [f32; N] {
                    let blocks = row.len() / Format::Q4_1.block_bytes();
                    for input in inputs {
                        assert!(input.len() >= blocks);
                    }
                    let low_nibbles = _mm256_set1_epi8(0x0F);
                    let mut accumulators = [_mm256_setzero_ps(); N];
                    let mut minimums = [0f32; N];
                    for b in 0..blocks {
                        // SAFETY: block `b` lies within `row`.
                        let (scale, min, weights) = unsafe {
                            let block = row.as_ptr().add(b * Format::Q4_1.block_bytes());
                            let packed = _mm_loadu_si128(block.add(4) as *const __m128i);
                            let weights = _mm256_and_si256(
                                _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                low_nibbles,
                            );
                            (f16_at(block), f16_at(block.add(2)), weights)
                        };
                        for n in 0..N {
                            let input = &inputs[n][b];
                            // SAFETY: `quants` is 32 bytes.
                            let x = unsafe {
                                _mm256_loadu_si256(input.quants.as_ptr() as *const __m256i)
                            };
                            accumulators[n] = _mm256_fmadd_ps(
                                _mm256_set1_ps(scale * input.scale),
                                _mm256_cvtepi32_ps($products(weights, x)),
                                accumulators[n],
                            );
                            minimums[n] += min * input.scaled_sum;
                        }
                    }
                    std::array::from_fn(|n| sum_of(accumulators[n]) + minimums[n])
                }

                /// Row times four inputs: the four products of each block
                /// are summed side by side and scaled in one step.
                ///
                /// # Safety
                /// The CPU has the features named; each input, and
                /// `side_by_side`, has an entry per 20 bytes of `row`.
                #[target_feature(enable = $features)]
                pub unsafe fn q4_1_four(
                    row: &[u8],
                    inputs: [&[Q8Block]; 4],
                    side_by_side: &[Four],
                ) -> [f32; 4] {
                    let blocks = row.len() / Format::Q4_1.block_bytes();
                    for input in inputs {
                        assert!(input.len() >= blocks);
                    }
                    assert!(side_by_side.len() >= blocks);
                    let low_nibbles = _mm256_set1_epi8(0x0F);
                    // Lanes 0-3: the four inputs' sums over half of each
                    // block; lanes 4-7: over the other half.
                    let mut products = _mm256_setzero_ps();
                    let mut minimums = _mm_setzero_ps();
                    for b in 0..blocks {
                        // SAFETY: block `b` lies within `row`, and `b` within
                        // each input and `side_by_side`; `Four` is 16-aligned.
                        unsafe {
                            let block = row.as_ptr().add(b * Format::Q4_1.block_bytes());
                            let packed = _mm_loadu_si128(block.add(4) as *const __m128i);
                            let weights = _mm256_and_si256(
                                _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                low_nibbles,
                            );
                            let x = |n: usize| {
                                _mm256_loadu_si256(
                                    inputs[n].get_unchecked(b).quants.as_ptr() as *const __m256i
                                )
                            };
                            let sums = _mm256_hadd_epi32(
                                _mm256_hadd_epi32(
                                    $products(weights, x(0)),
                                    $products(weights, x(1)),
                                ),
                                _mm256_hadd_epi32(
                                    $products(weights, x(2)),
                                    $products(weights, x(3)),
                                ),
                            );
                            let four = side_by_side.get_unchecked(b);
                            let scales =
                                _mm256_broadcast_ps(&*(four.scales.as_ptr() as *const __m128));
                            products = _mm256_fmadd_ps(
                                _mm256_cvtepi32_ps(sums),
                                _mm256_mul_ps(scales, _mm256_set1_ps(f16_at(block))),
                                products,
                            );
                            minimums = _mm_fmadd_ps(
                                _mm_load_ps(four.scaled_sums.as_ptr()),
                                _mm_set1_ps(f16_at(block.add(2))),
                                minimums,
                            );
                        }
                    }
                    let total = _mm_add_ps(
                        _mm_add_ps(
                            _mm256_castps256_ps128(products),
                            _mm256_extractf128_ps(products, 1),
                        ),
                        minimums,
                    );
                    let mut out = [0f32; 4];
                    // SAFETY: `out` holds four floats.
                    unsafe { _mm_storeu_ps(out.as_mut_ptr(), total) };
                    out
                }

                /// # Safety
                /// The CPU has the features named; each input has a block
                /// per 34 bytes of `row`.
                #[target_feature(enable = $features)]
                pub unsafe fn q8_0<const N: usize>(
                    row: &[u8],
                    inputs: [&[Q8Block]; N],
                ) -> [f32; N] {
                    let blocks = row.len() / Format::Q8_0.block_bytes();
                    for input in inputs {
                        assert!(input.len() >= blocks);
                    }
                    let mut accumulators = [_mm256_setzero_ps(); N];
                    for b in 0..blocks {
                        // SAFETY: block `b` lies within `row`.
                        let (scale, weights) = unsafe {
                            let block = row.as_ptr().add(b * Format::Q8_0.block_bytes());
                            (
                                f16_at(block),
                                _mm256_loadu_si256(block.add(2) as *const __m256i),
                            )
                        };
                        // The byte products take unsigned times signed:
                        // the weights' signs move onto the inputs.
                        let magnitudes = _mm256_sign_epi8(weights, weights);
                        for n in 0..N {
                            let input = &inputs[n][b];
                            // SAFETY: `quants` is 32 bytes.
                            let x = unsafe {
                                _mm256_loadu_si256(input.quants.as_ptr() as *const __m256i)
                            };
                            let signed = _mm256_sign_epi8(x, weights);
                            accumulators[n] = _mm256_fmadd_ps(
                                _mm256_set1_ps(scale * input.scale),
                                _mm256_cvtepi32_ps($products(magnitudes, signed)),
                                accumulators[n],
                            );
                        }
                    }
                    std::array::from_fn(|n| sum_of(accumulators[n]))
                }
            }
        };
    }

    kernels!(avx2, "avx2,fma,f16c", products_avx2);
    kernels!(vnni, "avx2,fma,f16c,avx512vnni,avx512vl", products_vnni);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1).
    fn values(count: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).max(1);
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn random_matrix(format: Format, rows: usize, columns: usize, seed: u32) -> Matrix {
        let mut bytes = Vec::new();
        let noise = values(rows * columns, seed);
        for block in noise.chunks_exact(BLOCK) {
            let scale = half::f16::from_f32(0.01 + block[0].abs() * 0.05);
            bytes.extend(scale.to_bits().to_le_bytes());
            match format {
                Format::Q4_1 => {
                    bytes.extend(half::f16::from_f32(block[1] * 0.1).to_bits().to_le_bytes());
                    bytes.extend(block[..16].iter().zip(&block[16..]).map(|(a, b)| {
                        ((a.abs() * 16.0) as u8).min(15) | (((b.abs() * 16.0) as u8).min(15) << 4)
                    }));
                }
                Format::Q8_0 => bytes.extend(block.iter().map(|v| (v * 127.0) as i8 as u8)),
            }
        }
        Matrix::new(format, rows, columns, bytes).unwrap()
    }

    /// The product in f32 from dequantized weights and inputs.
    fn reference(matrix: &Matrix, inputs: &[Q8Block], tokens: usize) -> Vec<f32> {
        let blocks = matrix.columns / BLOCK;
        let mut row = vec![0f32; matrix.columns];
        let mut out = vec![0f32; tokens * matrix.rows];
        for r in 0..matrix.rows {
            matrix.dequantize_row(r, &mut row);
            for t in 0..tokens {
                let input = inputs[t * blocks..][..blocks]
                    .iter()
                    .flat_map(|b| b.quants.map(|q| f32::from(q) * b.scale));
                out[t * matrix.rows + r] = row.iter().zip(input).map(|(w, x)| w * x).sum();
            }
        }
        out
    }

    #[test]
    fn products_match_the_dequantized_weights() {
        for format in [Format::Q4_1, Format::Q8_0] {
            // 7 inputs: a group of four and a remainder of three.
            for tokens in [1, 7] {
                let matrix = random_matrix(format, 40, 96, 7);
                let mut inputs = vec![Q8Block::default(); tokens * 3];
                quantize(&values(tokens * 96, 11), &mut inputs);
                let expected = reference(&matrix, &inputs, tokens);
                for kernels in Kernels::available() {
                    let mut out = vec![0f32; tokens * 40];
                    let blocks = 3;
                    let input = |t: usize| &inputs[t * blocks..][..blocks];
                    for r in 0..40 {
                        let row = matrix.row(r);
                        for t in 0..tokens {
                            out[t * 40 + r] = kernels.dot(format, row, [input(t)])[0];
                        }
                        if tokens >= 4 {
                            let mut side_by_side = Vec::new();
                            Four::of(&inputs[..4 * blocks], blocks, &mut side_by_side);
                            let inputs = [input(0), input(1), input(2), input(3)];
                            let four = kernels.four(format, row, inputs, &side_by_side);
                            let generic = kernels.dot(format, row, inputs);
                            for t in 0..4 {
                                let want = expected[t * 40 + r];
                                for got in [four[t], generic[t]] {
                                    assert!((got - want).abs() <= 1e-3 * want.abs().max(1.0));
                                }
                            }
                        }
                    }
                    for (got, want) in out.iter().zip(&expected) {
                        assert!(
                            (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                            "{format:?}: {got} != {want}"
                        );
                    }
                }
                let mut out = vec![0f32; tokens * 40];
                matrix.multiply(&inputs, tokens, &mut out, &mut Vec::new());
                for (got, want) in out.iter().zip(&expected) {
                    assert!((got - want).abs() <= 1e-3 * want.abs().max(1.0));
                }
            }
        }
    }

    #[test]
    fn quantized_activations_keep_their_values() {
        let input = values(64, 3);
        let mut blocks = vec![Q8Block::default(); 2];
        quantize(&input, &mut blocks);
        for (block, values) in blocks.iter().zip(input.chunks_exact(BLOCK)) {
            let sum: i32 = block.quants.iter().map(|&q| i32::from(q)).sum();
            assert!((block.scaled_sum - block.scale * sum as f32).abs() < 1e-6);
            for (q, v) in block.quants.iter().zip(values) {
                assert!((f32::from(*q) * block.scale - v).abs() <= block.scale / 2.0 + 1e-6);
            }
        }
    }

    #[test]
    fn matrices_of_the_wrong_size_are_refused() {
        assert!(Matrix::new(Format::Q8_0, 2, 30, vec![0; 68]).is_err());
        assert!(Matrix::new(Format::Q8_0, 2, 32, vec![0; 67]).is_err());
        let stacked = Matrix::stacked(vec![
            random_matrix(Format::Q4_1, 3, 64, 1),
            random_matrix(Format::Q4_1, 5, 64, 2),
        ])
        .unwrap();
        assert_eq!((stacked.rows(), stacked.columns()), (8, 64));
        assert!(
            Matrix::stacked(vec![
                random_matrix(Format::Q4_1, 3, 64, 1),
                random_matrix(Format::Q8_0, 3, 64, 2),
            ])
            .is_err()
        );
    }
}
