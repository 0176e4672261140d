//! A prompt's products with quantized weights as tiles, on CPUs with
//! AVX-512 VNNI: eight rows of weights times sixteen tokens at a time.
//!
//! Multiplying a row by four tokens at once still spent most of its
//! instructions per token: each 32 products took a multiply-add of bytes,
//! one of 16-bit words and their scaling, all on the two ports that do
//! multiplication. Here each weight row's super-block is unpacked once into
//! one byte per weight and a float scale and minimum per sub-block ([`Band`]);
//! the tokens' eight-bit inputs are laid out four values deep for sixteen
//! tokens across a 512-bit register ([`Interleaved`]); one VNNI
//! instruction then makes 64 products: a row's four weights, broadcast,
//! times four inputs of each of sixteen tokens. Scales and minimums are
//! applied once per sub-block, in floats. (llama.cpp's `tiled` matrix
//! products are built this way, and its prompts ran 2-5 times as fast as
//! the engine's before these.)
//!
//! A weight's value is `scale × code − minimum` in each format's
//! sub-blocks: Q4_K and Q5_K of 32 values with their minimums, Q6_K of 16
//! whose codes are stored 32 up. The 32-value formats keep their blocks
//! (each with its inputs' own scale): Q4_1 and Q5_1 with a minimum, Q4_0,
//! Q5_0 and Q8_0 with codes stored 8, 16 and 128 up. What a format stores
//! its codes up by ([`bias`]) is taken off as integers, before the scale,
//! as llama.cpp's sums are.

use super::activation::{BLOCK, Q8Block, Q8KBlock, SUPER_BLOCK};
use super::format::{Format, f16_at, fifth_bits, k_scales};
use super::kernels::Kernels;

/// Weight rows a tile.
pub const ROWS: usize = 8;
/// Tokens a tile: one 32-bit lane each of a 512-bit register.
pub const TOKENS: usize = 16;
/// The fewest tokens a product multiplies in tiles: below, most of a
/// band of sixteen would be padding.
pub const LEAST_TOKENS: usize = 8;
/// Values one VNNI lane sums.
const DEPTH: usize = 4;

/// Whether a row of `format` is unpacked into a [`Band`].
pub fn tiles(format: Format) -> bool {
    !matches!(format, Format::F16 | Format::BF16 | Format::F32)
}

/// Whether `format` is one of super-blocks of 256 (its inputs Q8_K).
fn k_format(format: Format) -> bool {
    matches!(format, Format::Q4K | Format::Q5K | Format::Q6K)
}

/// Values a sub-block of `format` (one scale and minimum).
fn sub_block(format: Format) -> usize {
    match format {
        Format::Q6K => 16,
        _ => 32,
    }
}

/// Tokens' eight-bit inputs in bands of sixteen, each block's values four
/// at a time for the sixteen side by side; a band's missing tokens are
/// zeros. One layout of the Q8_K super-blocks, one of the Q8 blocks of 32.
#[derive(Default)]
pub struct Interleaved {
    k: Layout,
    small: Layout,
}

/// Inputs of one kind laid out for tiles.
#[derive(Default)]
struct Layout {
    /// Blocks a token.
    blocks: usize,
    /// Band, block, group of four values, token, value.
    codes: Vec<i8>,
    /// Band, block, token: the inputs' scales.
    scales: Vec<f32>,
    /// Band, block, run of values (16 for Q8_K, the whole 32 for Q8),
    /// token: the sums of the codes.
    sums: Vec<i32>,
    /// Band, block, token (Q8 only): the scaled sums llama.cpp takes a
    /// block's minimum times.
    scaled_sums: Vec<f32>,
}

impl Layout {
    /// Room for `tokens` tokens of `blocks` blocks of `values` values,
    /// `runs` sums a block, all zeros.
    fn clear(&mut self, tokens: usize, blocks: usize, values: usize, runs: usize) {
        let slots = tokens.div_ceil(TOKENS) * blocks * TOKENS;
        self.blocks = blocks;
        self.codes.clear();
        self.codes.resize(slots * values, 0);
        self.scales.clear();
        self.scales.resize(slots, 0.0);
        self.sums.clear();
        self.sums.resize(slots * runs, 0);
        self.scaled_sums.clear();
        self.scaled_sums.resize(slots, 0.0);
    }

    /// Token `token`'s block `block`: its four values of group `g` go at
    /// `codes_at(g)`, its scale and sums at the returned slot.
    fn slot(&self, token: usize, block: usize) -> usize {
        ((token / TOKENS) * self.blocks + block) * TOKENS + token % TOKENS
    }

    /// The inputs' codes of block `at` (of a band of tokens, counted
    /// across bands), blocks of `values`: every group's sixteen tokens.
    fn block_codes(&self, at: usize, values: usize) -> &[i8] {
        let len = values * TOKENS;
        &self.codes[at * len..][..len]
    }

    /// Where group `g` of the token in `slot` starts.
    fn codes_at(slot: usize, g: usize, groups: usize) -> usize {
        let (at, lane) = (slot / TOKENS, slot % TOKENS);
        ((at * groups + g) * TOKENS + lane) * DEPTH
    }
}

impl Interleaved {
    /// Lays out `tokens` tokens' Q8_K inputs, `blocks` super-blocks each
    /// (`inputs(t)` is token `t`'s).
    pub fn fill_k<'a>(
        &mut self,
        tokens: usize,
        blocks: usize,
        inputs: impl Fn(usize) -> &'a [Q8KBlock],
    ) {
        self.k.fill(tokens, blocks, SUPER_BLOCK, 16, |t, b| {
            let block = &inputs(t)[b];
            (&block.quants[..], block.scale, 0.0)
        });
    }

    /// Lays out `tokens` tokens' Q8 inputs, `blocks` blocks of 32 each.
    pub fn fill_small<'a>(
        &mut self,
        tokens: usize,
        blocks: usize,
        inputs: impl Fn(usize) -> &'a [Q8Block],
    ) {
        self.small.fill(tokens, blocks, BLOCK, BLOCK, |t, b| {
            let block = &inputs(t)[b];
            (&block.quants[..], block.scale, block.scaled_sum)
        });
    }
}

impl Layout {
    /// Lays out `tokens` tokens of `blocks` blocks of `values` each, the
    /// codes summed in runs of `run`: `block(t, b)` is block `b` of token
    /// `t`, its codes, scale and scaled sum.
    fn fill<'a>(
        &mut self,
        tokens: usize,
        blocks: usize,
        values: usize,
        run: usize,
        block: impl Fn(usize, usize) -> (&'a [i8], f32, f32),
    ) {
        let (groups, runs) = (values / DEPTH, values / run);
        self.clear(tokens, blocks, values, runs);
        for token in 0..tokens {
            for b in 0..blocks {
                let (quants, scale, scaled_sum) = block(token, b);
                let slot = self.slot(token, b);
                for (g, four) in quants.chunks_exact(DEPTH).enumerate() {
                    let at = Layout::codes_at(slot, g, groups);
                    self.codes[at..at + DEPTH].copy_from_slice(four);
                }
                self.scales[slot] = scale;
                self.scaled_sums[slot] = scaled_sum;
                let (band_block, lane) = (slot / TOKENS, slot % TOKENS);
                for (i, codes) in quants.chunks_exact(run).enumerate() {
                    self.sums[(band_block * runs + i) * TOKENS + lane] =
                        codes.iter().map(|&q| i32::from(q)).sum();
                }
            }
        }
    }
}

/// Up to [`ROWS`] rows of weights unpacked: a byte per weight and each
/// sub-block's scale and minimum as floats; missing rows are zeros.
#[derive(Default)]
pub struct Band {
    format: Option<Format>,
    /// The format's blocks a row.
    blocks: usize,
    /// Block, row, value: a block's rows at fixed distances from its
    /// first, which the tiles then reach from one register (a pointer a
    /// row took eight of the sixteen, and the rest spilled).
    codes: Vec<u8>,
    /// Block, row, sub-block.
    scales: Vec<f32>,
    minimums: Vec<f32>,
}

impl Band {
    /// Where row `r`'s block `b` is, in blocks (of codes, or of its
    /// sub-blocks' scales).
    fn at(b: usize, r: usize) -> usize {
        b * ROWS + r
    }

    /// Unpacks `rows` (rows of `format`, one after another, at most
    /// [`ROWS`]), each `blocks` of the format's blocks long.
    pub fn fill(&mut self, format: Format, rows: &[u8], blocks: usize) {
        #[cfg(target_arch = "x86_64")]
        if Kernels::detect() != Kernels::Portable {
            // SAFETY: the CPU has AVX2, FMA and F16C.
            return unsafe { self.fill_avx2(format, rows, blocks) };
        }
        self.fill_any(
            format,
            rows,
            blocks,
            |format, block, codes| match format {
                Format::Q6K => unpack_q6k(block, codes),
                Format::Q4K | Format::Q5K => unpack_q45k(format, block, codes),
                _ => unpack_small(format, block, codes),
            },
            scales_of,
        )
    }

    /// [`Band::fill`] with AVX2's byte shifts and masks: the build's
    /// baseline (SSE2) left the unpacking scalar, a third of a prompt.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn fill_avx2(&mut self, format: Format, rows: &[u8], blocks: usize) {
        self.fill_any(
            format,
            rows,
            blocks,
            |format, block, codes| {
                // SAFETY: the CPU has AVX2, FMA and F16C (this function's contract).
                unsafe { x86::unpack(format, block, codes) }
            },
            |format, block, scales, minimums| {
                // SAFETY: as above.
                unsafe { x86::scales_of(format, block, scales, minimums) }
            },
        )
    }

    /// Fills the band, each block's codes written by `unpack`, its
    /// sub-blocks' scales and minimums by `scales`.
    #[inline(always)]
    fn fill_any(
        &mut self,
        format: Format,
        rows: &[u8],
        blocks: usize,
        unpack: impl Fn(Format, &[u8], &mut [u8]),
        scales: impl Fn(Format, &[u8], &mut [f32], &mut [f32]),
    ) {
        assert!(tiles(format), "{format:?} rows are not unpacked into bands");
        let row_bytes = blocks * format.block_bytes();
        let count = rows.len() / row_bytes;
        assert!(count <= ROWS, "a band of {count} rows");
        let values = format.block_values();
        let subs = values / sub_block(format);
        self.format = Some(format);
        self.blocks = blocks;
        // Every value is written below but the missing rows', zeroed.
        self.codes.resize(ROWS * blocks * values, 0);
        self.scales.resize(ROWS * blocks * subs, 0.0);
        self.minimums.resize(ROWS * blocks * subs, 0.0);
        for b in 0..blocks {
            let (rows, missing) = (b * ROWS..(b + 1) * ROWS, b * ROWS + count);
            self.codes[missing * values..rows.end * values].fill(0);
            self.scales[missing * subs..rows.end * subs].fill(0.0);
            self.minimums[missing * subs..rows.end * subs].fill(0.0);
        }
        for (r, row) in rows.chunks_exact(row_bytes).enumerate() {
            for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
                let codes = &mut self.codes[Band::at(b, r) * values..][..values];
                let at = Band::at(b, r) * subs;
                scales(
                    format,
                    block,
                    &mut self.scales[at..at + subs],
                    &mut self.minimums[at..at + subs],
                );
                unpack(format, block, codes);
            }
        }
    }
}

/// A block's sub-blocks' scales and minimums (`subs` of each).
fn scales_of(format: Format, block: &[u8], scales: &mut [f32], minimums: &mut [f32]) {
    match format {
        // Its codes are stored up instead (`bias`).
        Format::Q6K => {
            q6k_scales(block, scales);
            minimums.fill(0.0);
        }
        Format::Q4K | Format::Q5K => q45k_scales(block, scales, minimums),
        _ => small_scales(format, block, &mut scales[0], &mut minimums[0]),
    }
}

/// A 32-value block's scale `d` and, for Q4_1 and Q5_1, its minimum (added,
/// not taken off: their values are `d × code + m`).
fn small_scales(format: Format, block: &[u8], scale: &mut f32, minimum: &mut f32) {
    *scale = f16_at(block, 0);
    *minimum = match format {
        Format::Q4_1 | Format::Q5_1 => f16_at(block, 2),
        _ => 0.0,
    };
}

/// A 32-value block's codes: Q4_0 and Q4_1 0-15, Q5_0 and Q5_1 0-31,
/// Q8_0 0-255 (its values plus 128).
fn unpack_small(format: Format, block: &[u8], codes: &mut [u8]) {
    let (quants, high) = match format {
        Format::Q4_0 => (&block[2..18], None),
        Format::Q4_1 => (&block[4..20], None),
        Format::Q5_0 => (&block[6..22], Some(&block[2..6])),
        Format::Q5_1 => (&block[8..24], Some(&block[4..8])),
        _ => {
            for (code, &q) in codes.iter_mut().zip(&block[2..34]) {
                *code = q ^ 0x80;
            }
            return;
        }
    };
    let high = high.map_or(0, |bytes| {
        u32::from_le_bytes(bytes.try_into().expect("four bytes"))
    });
    for (i, &byte) in quants.iter().enumerate() {
        let (low, up) = fifth_bits(high, i);
        codes[i] = byte & 0x0F | low;
        codes[i + 16] = byte >> 4 | up;
    }
}

/// A Q4_K or Q5_K super-block's eight sub-blocks of 32: each scale
/// `d × scale` and minimum `dmin × min`.
fn q45k_scales(block: &[u8], scales: &mut [f32], minimums: &mut [f32]) {
    let (d, dmin) = (f16_at(block, 0), f16_at(block, 2));
    let (packed_scales, mins) = k_scales(block[4..16].try_into().expect("12 bytes"));
    for j in 0..8 {
        scales[j] = d * f32::from(packed_scales[j]);
        minimums[j] = dmin * f32::from(mins[j]);
    }
}

/// A Q6_K super-block's sixteen sub-blocks of 16: each scale `d × scale`.
fn q6k_scales(block: &[u8], scales: &mut [f32]) {
    let d = f16_at(block, 208);
    for (s, &scale) in block[192..208].iter().enumerate() {
        scales[s] = d * f32::from(scale as i8);
    }
}

/// A Q4_K or Q5_K super-block's codes, 0-31.
fn unpack_q45k(format: Format, block: &[u8], codes: &mut [u8]) {
    // Loops without branches, so that they compile to SIMD.
    let quants = match format {
        Format::Q5K => &block[48..176],
        _ => &block[16..144],
    };
    for (quants, codes) in quants.chunks_exact(32).zip(codes.chunks_exact_mut(64)) {
        let (low, up) = codes.split_at_mut(32);
        for ((low, up), &byte) in low.iter_mut().zip(up).zip(quants) {
            (*low, *up) = (byte & 0x0F, byte >> 4);
        }
    }
    if format == Format::Q5K {
        // Value `32i + l`'s fifth bit is bit `i` of byte `l`.
        let high = &block[16..48];
        let mut runs = codes.chunks_exact_mut(32);
        let mut next = || runs.next().expect("eight runs of 32");
        fifth_bit::<0>(next(), high);
        fifth_bit::<1>(next(), high);
        fifth_bit::<2>(next(), high);
        fifth_bit::<3>(next(), high);
        fifth_bit::<4>(next(), high);
        fifth_bit::<5>(next(), high);
        fifth_bit::<6>(next(), high);
        fifth_bit::<7>(next(), high);
    }
}

/// A Q6_K super-block's codes, 0-63.
fn unpack_q6k(block: &[u8], codes: &mut [u8]) {
    // Value `l + 32k` of a half of 128: its low four bits from byte `l`
    // (k even) or `l + 32` (k odd) of the half's 64, low or high nibble,
    // its high two from bits `2k` of byte `l` of the half's 32. (Shifts by
    // constants: a byte shift by a variable does not compile to SIMD.)
    for half in 0..2 {
        let (low, high) = (&block[64 * half..][..64], &block[128 + 32 * half..][..32]);
        let (first, second) = low.split_at(32);
        let codes = &mut codes[128 * half..][..128];
        let (a, rest) = codes.split_at_mut(32);
        let (b, rest) = rest.split_at_mut(32);
        let (c, d) = rest.split_at_mut(32);
        six_bits::<0, 0>(a, first, high);
        six_bits::<0, 2>(b, second, high);
        six_bits::<4, 4>(c, first, high);
        six_bits::<4, 6>(d, second, high);
    }
}

/// Codes of six bits: four from `low` shifted by `NIBBLE`, two from `high`
/// shifted by `BITS`.
fn six_bits<const NIBBLE: u32, const BITS: u32>(codes: &mut [u8], low: &[u8], high: &[u8]) {
    for ((code, &low), &high) in codes.iter_mut().zip(low).zip(high) {
        *code = (low >> NIBBLE & 0x0F) | (high >> BITS & 3) << 4;
    }
}

/// Ors the fifth bits (bit `BIT` of each of `high`) into `codes`.
fn fifth_bit<const BIT: u32>(codes: &mut [u8], high: &[u8]) {
    for (code, &bits) in codes.iter_mut().zip(high) {
        *code |= (bits >> BIT & 1) << 4;
    }
}

/// The codes unpacked 32 bytes at a time.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Format;
    use crate::quant::x86::{bits_from as bits, bytes_of_bits, f16_splat, nibbles};
    use std::arch::x86_64::*;

    /// Four-bit codes with their fifth bits (0xFF in each byte whose bit
    /// is set) ORed in.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn fifth(codes: __m256i, set: __m256i) -> __m256i {
        _mm256_or_si256(codes, _mm256_and_si256(set, _mm256_set1_epi8(0x10)))
    }

    /// A block's sub-blocks' scales and minimums, as [`super::scales_of`]
    /// makes them: the K formats' eight or sixteen at once, their f16
    /// factors converted by the CPU (the portable conversion, a call a
    /// value, was a twentieth of a prompt); a 32-value block's one scale
    /// as the portable code takes it.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn scales_of(
        format: Format,
        block: &[u8],
        scales: &mut [f32],
        minimums: &mut [f32],
    ) {
        assert_eq!(block.len(), format.block_bytes());
        let f16 = |at: usize| {
            assert!(at + 2 <= block.len());
            // SAFETY: two bytes at `at` (asserted).
            unsafe { f16_splat(block.as_ptr().add(at)) }
        };
        // Eight bytes widened (signed or not) and scaled by `factor`.
        let scaled = |bytes: __m128i, signed: bool, factor: __m256| {
            let words = match signed {
                true => _mm256_cvtepi8_epi32(bytes),
                false => _mm256_cvtepu8_epi32(bytes),
            };
            _mm256_mul_ps(_mm256_cvtepi32_ps(words), factor)
        };
        let store = |out: &mut [f32], values: __m256| {
            assert!(out.len() >= 8);
            // SAFETY: eight floats (asserted).
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), values) }
        };
        match format {
            Format::Q6K => {
                assert_eq!((scales.len(), minimums.len()), (16, 16));
                // SAFETY: bytes 192..208 of a whole block (asserted).
                let bytes = unsafe { _mm_loadu_si128(block.as_ptr().add(192) as *const __m128i) };
                let d = f16(208);
                store(&mut scales[..8], scaled(bytes, true, d));
                store(
                    &mut scales[8..],
                    scaled(_mm_srli_si128::<8>(bytes), true, d),
                );
                minimums.fill(0.0);
            }
            Format::Q4K | Format::Q5K => {
                assert_eq!((scales.len(), minimums.len()), (8, 8));
                let (packed, mins) = super::k_scales(block[4..16].try_into().expect("12 bytes"));
                let eight = |bytes: [u8; 8]| _mm_set_epi64x(0, i64::from_le_bytes(bytes));
                store(scales, scaled(eight(packed), false, f16(0)));
                store(minimums, scaled(eight(mins), false, f16(2)));
            }
            _ => super::small_scales(format, block, &mut scales[0], &mut minimums[0]),
        }
    }

    /// A block's codes, as [`super::unpack_q45k`], [`super::unpack_q6k`]
    /// and [`super::unpack_small`] make them.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn unpack(format: Format, block: &[u8], codes: &mut [u8]) {
        assert!(block.len() == format.block_bytes() && codes.len() == format.block_values());
        if !super::k_format(format) {
            // SAFETY: a whole block (asserted), and the CPU's features.
            let bytes = unsafe {
                let at = block.as_ptr();
                match format {
                    Format::Q4_0 => nibbles(at.add(2)),
                    Format::Q4_1 => nibbles(at.add(4)),
                    Format::Q5_0 => fifth(nibbles(at.add(6)), bytes_of_bits(at.add(2))),
                    Format::Q5_1 => fifth(nibbles(at.add(8)), bytes_of_bits(at.add(4))),
                    _ => _mm256_xor_si256(
                        _mm256_loadu_si256(at.add(2) as *const __m256i),
                        _mm256_set1_epi8(0x80u8 as i8),
                    ),
                }
            };
            // SAFETY: 32 codes (asserted).
            unsafe { _mm256_storeu_si256(codes.as_mut_ptr() as *mut __m256i, bytes) };
            return;
        }
        let load = |at: usize| {
            // SAFETY: every `at` below is 32 bytes or more from the end of
            // the block (asserted whole).
            unsafe { _mm256_loadu_si256(block.as_ptr().add(at) as *const __m256i) }
        };
        let mut store = |at: usize, v: __m256i| {
            // SAFETY: every `at` below is at most 224, of 256 codes.
            unsafe { _mm256_storeu_si256(codes.as_mut_ptr().add(at) as *mut __m256i, v) }
        };
        match format {
            Format::Q6K => {
                for half in 0..2 {
                    let (low_a, low_b) = (load(64 * half), load(64 * half + 32));
                    let high = load(128 + 32 * half);
                    let six = |low: __m256i, nibble: i32, shift: i32| {
                        _mm256_or_si256(
                            bits(low, nibble, 0x0F),
                            _mm256_slli_epi16(bits(high, shift, 3), 4),
                        )
                    };
                    store(128 * half, six(low_a, 0, 0));
                    store(128 * half + 32, six(low_b, 0, 2));
                    store(128 * half + 64, six(low_a, 4, 4));
                    store(128 * half + 96, six(low_b, 4, 6));
                }
            }
            _ => {
                let (high, quants) = match format {
                    Format::Q5K => (load(16), 48),
                    _ => (_mm256_setzero_si256(), 16),
                };
                for j in 0..4 {
                    let packed = load(quants + 32 * j);
                    let j = j as i32;
                    let fifth = |bit: i32| _mm256_slli_epi16(bits(high, bit, 1), 4);
                    let low = _mm256_or_si256(bits(packed, 0, 0x0F), fifth(2 * j));
                    let up = _mm256_or_si256(bits(packed, 4, 0x0F), fifth(2 * j + 1));
                    store(64 * j as usize, low);
                    store(64 * j as usize + 32, up);
                }
            }
        }
    }
}

/// How a format's codes are stored: `bias` up (taken off each code, as an
/// integer, before the block's scale), or with a minimum per sub-block.
fn bias(format: Format) -> i32 {
    match format {
        Format::Q4_0 => 8,
        Format::Q5_0 => 16,
        Format::Q8_0 => 128,
        Format::Q6K => 32,
        _ => 0,
    }
}

/// The products of a band's rows and a band of sixteen tokens, without
/// SIMD: what the tiles must equal, for the tests.
#[cfg(test)]
pub fn portable_tile(
    band: &Band,
    inputs: &Interleaved,
    token_band: usize,
) -> [[f32; TOKENS]; ROWS] {
    let format = band.format.expect("a filled band");
    let k = k_format(format);
    let layout = if k { &inputs.k } else { &inputs.small };
    let (values, size) = (format.block_values(), sub_block(format));
    let (subs, groups) = (values / size, values / DEPTH);
    let runs = if k { 16 } else { 1 };
    let mut out = [[0f32; TOKENS]; ROWS];
    for (r, out) in out.iter_mut().enumerate() {
        for (t, out) in out.iter_mut().enumerate() {
            let mut total = 0f32;
            for b in 0..band.blocks {
                let slot = layout.slot(token_band * TOKENS + t, b);
                let mut part = 0f32;
                for sub in 0..subs {
                    let mut dot = 0i32;
                    for v in sub * size..(sub + 1) * size {
                        let code = band.codes[Band::at(b, r) * values + v];
                        let at = Layout::codes_at(slot, v / DEPTH, groups) + v % DEPTH;
                        dot += i32::from(code) * i32::from(layout.codes[at]);
                    }
                    let (band_block, lane) = (slot / TOKENS, slot % TOKENS);
                    let sum: i32 = (0..size.div_ceil(16).min(runs))
                        .map(|i| {
                            layout.sums[(band_block * runs + sub * size / 16 + i) * TOKENS + lane]
                        })
                        .sum();
                    let index = Band::at(b, r) * subs + sub;
                    let (scale, minimum) = (band.scales[index], band.minimums[index]);
                    part += match k {
                        true => (dot - bias(format) * sum) as f32 * scale - sum as f32 * minimum,
                        false => (dot - bias(format) * sum) as f32 * scale,
                    };
                    if !k {
                        part *= layout.scales[slot];
                        part += minimum * layout.scaled_sums[slot];
                    }
                }
                total += match k {
                    true => part * layout.scales[slot],
                    false => part,
                };
            }
            *out = total;
        }
    }
    out
}

/// The products of a band's rows and band `token_band` of the tokens:
/// `out[r][t]` for row `r`, token `t` of the band.
///
/// # Safety
/// The CPU has AVX-512 F and VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
pub unsafe fn tile(band: &Band, inputs: &Interleaved, token_band: usize) -> [[f32; TOKENS]; ROWS] {
    // SAFETY (each arm): as this function's.
    unsafe {
        match band.format.expect("a filled band") {
            Format::Q6K => simd::k::<16, false>(band, &inputs.k, token_band, bias(Format::Q6K)),
            Format::Q4K | Format::Q5K => simd::k::<32, true>(band, &inputs.k, token_band, 0),
            format @ (Format::Q4_1 | Format::Q5_1) => {
                simd::small::<true>(band, &inputs.small, token_band, bias(format))
            }
            format => simd::small::<false>(band, &inputs.small, token_band, bias(format)),
        }
    }
}

/// The tiles' kernels with AVX-512 VNNI.
#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{Band, DEPTH, Layout, ROWS, TOKENS, sub_block};
    use std::arch::x86_64::*;

    /// That `band` (of `subs` sub-blocks a block) and band `token_band`
    /// of `inputs` are filled and of one width.
    fn check(band: &Band, inputs: &Layout, token_band: usize, subs: usize) {
        assert_eq!(inputs.blocks, band.blocks, "inputs of another width");
        assert!(
            band.scales.len() == ROWS * band.blocks * subs,
            "a band not filled"
        );
        assert!(
            inputs.scales.len() >= (token_band + 1) * band.blocks * TOKENS,
            "no such tokens"
        );
    }

    /// Block `b`'s codes, its rows `VALUES` apart.
    fn codes_of<const VALUES: usize>(band: &Band, b: usize) -> *const u8 {
        assert_eq!(
            band.codes.len(),
            ROWS * band.blocks * VALUES,
            "a band not filled"
        );
        band.codes[Band::at(b, 0) * VALUES..][..ROWS * VALUES].as_ptr()
    }

    /// Rows `products` (one per row, sixteen tokens' lanes) plus groups
    /// `groups` of a block's codes (`weights`, rows `VALUES` apart) times
    /// the inputs'.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and VNNI; `weights` holds [`ROWS`] rows of
    /// `VALUES`, each group is within a row, `inputs` holds 64 bytes from
    /// each group's start.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn add_products<const VALUES: usize>(
        products: &mut [__m512i; ROWS],
        weights: *const u8,
        inputs: *const i8,
        groups: std::ops::Range<usize>,
    ) {
        for g in groups {
            // SAFETY: as this function's; a row's four codes of group `g`
            // are within its row.
            unsafe {
                let x = _mm512_loadu_si512(inputs.add(g * TOKENS * DEPTH) as *const _);
                for (r, products) in products.iter_mut().enumerate() {
                    let at = weights.add(r * VALUES + g * DEPTH);
                    let four = std::ptr::read_unaligned(at as *const i32);
                    *products = _mm512_dpbusd_epi32(*products, _mm512_set1_epi32(four), x);
                }
            }
        }
    }

    /// K-format rows (sub-blocks of `SIZE`) times Q8_K inputs: codes
    /// stored `bias` up, and with a minimum when `MINIMUM`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and VNNI.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub unsafe fn k<const SIZE: usize, const MINIMUM: bool>(
        band: &Band,
        inputs: &Layout,
        token_band: usize,
        bias: i32,
    ) -> [[f32; TOKENS]; ROWS] {
        let blocks = band.blocks;
        assert_eq!(SIZE, sub_block(band.format.expect("a filled band")));
        let (values, subs) = (256, 256 / SIZE);
        check(band, inputs, token_band, subs);
        // The totals are added to once a super-block, from memory: in
        // registers beside the sub-blocks' products and the block's parts
        // they were 24 of the 32, and the products spilled.
        let mut totals = [[0f32; TOKENS]; ROWS];
        for b in 0..blocks {
            let at = token_band * blocks + b;
            let codes = inputs.block_codes(at, values);
            let sums = &inputs.sums[at * 16 * TOKENS..][..16 * TOKENS];
            let weights = codes_of::<256>(band, b);
            let (scales, minimums) = (
                band.scales[Band::at(b, 0) * subs..][..ROWS * subs].as_ptr(),
                band.minimums[Band::at(b, 0) * subs..][..ROWS * subs].as_ptr(),
            );
            let mut parts = [_mm512_setzero_ps(); ROWS];
            for sub in 0..subs {
                // The sums of the inputs under the sub-block, for its
                // minimum. SAFETY: sixteen of `sums` at each.
                let input_sums = unsafe {
                    let first =
                        _mm512_loadu_si512(sums.as_ptr().add(sub * SIZE / 16 * TOKENS) as *const _);
                    match SIZE {
                        32 => _mm512_add_epi32(
                            first,
                            _mm512_loadu_si512(
                                sums.as_ptr().add((2 * sub + 1) * TOKENS) as *const _
                            ),
                        ),
                        _ => first,
                    }
                };
                // Codes stored `bias` up: the products start `bias` times
                // the inputs' sums down, as integers, so that the scale is
                // the one float multiply-add a row and sub-block.
                let start = _mm512_mullo_epi32(input_sums, _mm512_set1_epi32(-bias));
                let mut products = [start; ROWS];
                let first = sub * SIZE / DEPTH;
                // SAFETY: the groups are this sub-block's; `codes` holds
                // every group's 64 bytes.
                unsafe {
                    add_products::<256>(
                        &mut products,
                        weights,
                        codes.as_ptr(),
                        first..first + SIZE / DEPTH,
                    )
                };
                let input_sums = _mm512_cvtepi32_ps(input_sums);
                for (r, part) in parts.iter_mut().enumerate() {
                    // SAFETY: the block's scales and minimums are ROWS ×
                    // subs long.
                    let scale = unsafe { *scales.add(r * subs + sub) };
                    *part = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(products[r]),
                        _mm512_set1_ps(scale),
                        *part,
                    );
                    if MINIMUM {
                        // SAFETY: as the scale's.
                        let minimum = unsafe { *minimums.add(r * subs + sub) };
                        *part = _mm512_fnmadd_ps(input_sums, _mm512_set1_ps(minimum), *part);
                    }
                }
            }
            // SAFETY: sixteen scales at the block's.
            let input_scales =
                unsafe { _mm512_loadu_ps(inputs.scales[at * TOKENS..][..TOKENS].as_ptr()) };
            for (total, part) in totals.iter_mut().zip(parts) {
                // SAFETY: sixteen floats.
                unsafe {
                    let sum = _mm512_fmadd_ps(part, input_scales, _mm512_loadu_ps(total.as_ptr()));
                    _mm512_storeu_ps(total.as_mut_ptr(), sum);
                }
            }
        }
        totals
    }

    /// 32-value rows times Q8 inputs: codes stored `bias` up, and with a
    /// minimum when `MINIMUM`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and VNNI.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub unsafe fn small<const MINIMUM: bool>(
        band: &Band,
        inputs: &Layout,
        token_band: usize,
        bias: i32,
    ) -> [[f32; TOKENS]; ROWS] {
        let blocks = band.blocks;
        let groups = 32 / DEPTH;
        check(band, inputs, token_band, 1);
        let mut totals = [_mm512_setzero_ps(); ROWS];
        for b in 0..blocks {
            let at = token_band * blocks + b;
            let codes = inputs.block_codes(at, 32);
            let mut products = [_mm512_setzero_si512(); ROWS];
            // SAFETY: the block's eight groups; `codes` holds their bytes.
            unsafe {
                add_products::<32>(
                    &mut products,
                    codes_of::<32>(band, b),
                    codes.as_ptr(),
                    0..groups,
                )
            };
            // SAFETY (the loads): sixteen of each at the block's.
            let (input_scales, offsets, scaled_sums) = unsafe {
                let sums =
                    _mm512_loadu_si512(inputs.sums[at * TOKENS..][..TOKENS].as_ptr() as *const _);
                (
                    _mm512_loadu_ps(inputs.scales[at * TOKENS..][..TOKENS].as_ptr()),
                    _mm512_mullo_epi32(sums, _mm512_set1_epi32(bias)),
                    _mm512_loadu_ps(inputs.scaled_sums[at * TOKENS..][..TOKENS].as_ptr()),
                )
            };
            for (r, total) in totals.iter_mut().enumerate() {
                let index = Band::at(b, r);
                // SAFETY: `index` < ROWS × blocks (asserted).
                let (scale, minimum) = unsafe {
                    (
                        *band.scales.get_unchecked(index),
                        *band.minimums.get_unchecked(index),
                    )
                };
                let sums = _mm512_sub_epi32(products[r], offsets);
                let scales = _mm512_mul_ps(input_scales, _mm512_set1_ps(scale));
                *total = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scales, *total);
                if MINIMUM {
                    *total = _mm512_fmadd_ps(scaled_sums, _mm512_set1_ps(minimum), *total);
                }
            }
        }
        stored(totals)
    }

    /// Each row's sixteen lanes as floats.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn stored(totals: [__m512; ROWS]) -> [[f32; TOKENS]; ROWS] {
        let mut out = [[0f32; TOKENS]; ROWS];
        for (out, total) in out.iter_mut().zip(totals) {
            // SAFETY: sixteen floats.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), total) };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiles' test (in `quant::tests`) checks the products through
    /// the unpacking the CPU runs; here the other gives the same codes.
    #[test]
    fn the_portable_unpacking_gives_the_codes_and_scales_of_the_simd_one() {
        for format in Format::ALL.into_iter().filter(|&f| tiles(f)) {
            let mut seed = 0x9E37_79B9u32.wrapping_mul(format as u32 + 1);
            let block: Vec<u8> = (0..format.block_bytes())
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            let mut portable = vec![0u8; format.block_values()];
            match format {
                Format::Q6K => unpack_q6k(&block, &mut portable),
                Format::Q4K | Format::Q5K => unpack_q45k(format, &block, &mut portable),
                _ => unpack_small(format, &block, &mut portable),
            }
            let limit = match format {
                Format::Q4K | Format::Q4_0 | Format::Q4_1 => 16,
                Format::Q5K | Format::Q5_0 | Format::Q5_1 => 32,
                Format::Q6K => 64,
                _ => 256,
            };
            assert!(
                portable.iter().all(|&c| u32::from(c) < limit),
                "{format:?}: a code out of range"
            );
            #[cfg(target_arch = "x86_64")]
            if Kernels::detect() != Kernels::Portable {
                let mut simd = vec![0u8; format.block_values()];
                // SAFETY: the CPU has AVX2, FMA and F16C.
                unsafe { x86::unpack(format, &block, &mut simd) };
                assert_eq!(portable, simd, "{format:?}");
                let subs = format.block_values() / sub_block(format);
                let mut portable = (vec![0f32; subs], vec![0f32; subs]);
                let mut simd = (vec![1f32; subs], vec![1f32; subs]);
                scales_of(format, &block, &mut portable.0, &mut portable.1);
                // SAFETY: as above.
                unsafe { x86::scales_of(format, &block, &mut simd.0, &mut simd.1) };
                let same = |a: &[f32], b: &[f32]| {
                    a.iter()
                        .zip(b)
                        .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
                };
                assert!(
                    same(&portable.0, &simd.0) && same(&portable.1, &simd.1),
                    "{format:?}: scales {portable:?}, with SIMD {simd:?}"
                );
            }
        }
    }
}
