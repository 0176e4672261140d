//! A prompt's products with K-format weights as tiles, on CPUs with
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
//! whose codes are stored 32 up (its minimum is 32 times its scale).

use super::activation::{Q8KBlock, SUPER_BLOCK};
use super::format::{Format, f16_at, k_scales};
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
    matches!(format, Format::Q4K | Format::Q5K | Format::Q6K)
}

/// Values a sub-block of `format` (one scale and minimum).
fn sub_block(format: Format) -> usize {
    match format {
        Format::Q6K => 16,
        _ => 32,
    }
}

/// Tokens' Q8_K inputs in bands of sixteen, each super-block's values four
/// at a time for the sixteen side by side; a band's missing tokens are
/// zeros.
#[derive(Default)]
pub struct Interleaved {
    tokens: usize,
    super_blocks: usize,
    /// Band, super-block, group of four values, token, value.
    codes: Vec<i8>,
    /// Band, super-block, token: the inputs' scales.
    scales: Vec<f32>,
    /// Band, super-block, sixteen values, token: the sums of the codes.
    sums: Vec<f32>,
}

impl Interleaved {
    /// Lays out `tokens` tokens' inputs, `super_blocks` super-blocks each
    /// (`inputs(t)` is token `t`'s).
    pub fn fill<'a>(
        &mut self,
        tokens: usize,
        super_blocks: usize,
        inputs: impl Fn(usize) -> &'a [Q8KBlock],
    ) {
        let bands = tokens.div_ceil(TOKENS);
        let groups = SUPER_BLOCK / DEPTH;
        self.tokens = tokens;
        self.super_blocks = super_blocks;
        self.codes.clear();
        self.codes
            .resize(bands * super_blocks * SUPER_BLOCK * TOKENS, 0);
        self.scales.clear();
        self.scales.resize(bands * super_blocks * TOKENS, 0.0);
        self.sums.clear();
        self.sums.resize(bands * super_blocks * 16 * TOKENS, 0.0);
        for token in 0..tokens {
            let (band, lane) = (token / TOKENS, token % TOKENS);
            for (s, block) in inputs(token)[..super_blocks].iter().enumerate() {
                let at = band * super_blocks + s;
                for (g, four) in block.quants.chunks_exact(DEPTH).enumerate() {
                    let start = ((at * groups + g) * TOKENS + lane) * DEPTH;
                    self.codes[start..start + DEPTH].copy_from_slice(four);
                }
                self.scales[at * TOKENS + lane] = block.scale;
                for (i, &sum) in block.sums.iter().enumerate() {
                    self.sums[(at * 16 + i) * TOKENS + lane] = f32::from(sum);
                }
            }
        }
    }
}

/// Up to [`ROWS`] rows of K-format weights unpacked: a byte per weight and
/// each sub-block's scale and minimum as floats; missing rows are zeros.
#[derive(Default)]
pub struct Band {
    format: Option<Format>,
    super_blocks: usize,
    /// Row, value.
    codes: Vec<u8>,
    /// Row, sub-block.
    scales: Vec<f32>,
    minimums: Vec<f32>,
}

impl Band {
    /// Unpacks `rows` (rows of `format`, one after another, at most
    /// [`ROWS`]), each `super_blocks` super-blocks long.
    pub fn fill(&mut self, format: Format, rows: &[u8], super_blocks: usize) {
        #[cfg(target_arch = "x86_64")]
        if Kernels::detect() != Kernels::Portable {
            // SAFETY: the CPU has AVX2, FMA and F16C.
            return unsafe { self.fill_avx2(format, rows, super_blocks) };
        }
        self.fill_any(
            format,
            rows,
            super_blocks,
            |format, block, codes| match format {
                Format::Q6K => unpack_q6k(block, codes),
                _ => unpack_q45k(format, block, codes),
            },
        )
    }

    /// [`Band::fill`] with AVX2's byte shifts and masks: the build's
    /// baseline (SSE2) left the unpacking scalar, a third of a prompt.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn fill_avx2(&mut self, format: Format, rows: &[u8], super_blocks: usize) {
        self.fill_any(format, rows, super_blocks, |format, block, codes| {
            // SAFETY: the CPU has AVX2, FMA and F16C (this function's contract).
            unsafe { x86::unpack(format, block, codes) }
        })
    }

    /// Fills the band, each super-block's codes written by `unpack`.
    #[inline(always)]
    fn fill_any(
        &mut self,
        format: Format,
        rows: &[u8],
        super_blocks: usize,
        unpack: impl Fn(Format, &[u8], &mut [u8]),
    ) {
        assert!(tiles(format), "{format:?} rows are not unpacked into bands");
        let row_bytes = super_blocks * format.block_bytes();
        let count = rows.len() / row_bytes;
        assert!(count <= ROWS, "a band of {count} rows");
        let per_row = super_blocks * SUPER_BLOCK / sub_block(format);
        self.format = Some(format);
        self.super_blocks = super_blocks;
        // Every value is written below but the missing rows', zeroed.
        self.codes.resize(ROWS * super_blocks * SUPER_BLOCK, 0);
        self.scales.resize(ROWS * per_row, 0.0);
        self.minimums.resize(ROWS * per_row, 0.0);
        self.codes[count * super_blocks * SUPER_BLOCK..].fill(0);
        self.scales[count * per_row..].fill(0.0);
        self.minimums[count * per_row..].fill(0.0);
        for (r, row) in rows.chunks_exact(row_bytes).enumerate() {
            for (s, block) in row.chunks_exact(format.block_bytes()).enumerate() {
                let codes = &mut self.codes[(r * super_blocks + s) * SUPER_BLOCK..][..SUPER_BLOCK];
                let subs = SUPER_BLOCK / sub_block(format);
                let at = r * per_row + s * subs;
                let scales = &mut self.scales[at..at + subs];
                let minimums = &mut self.minimums[at..at + subs];
                match format {
                    Format::Q6K => q6k_scales(block, scales, minimums),
                    _ => q45k_scales(block, scales, minimums),
                }
                unpack(format, block, codes);
            }
        }
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

/// A Q6_K super-block's sixteen sub-blocks of 16: each scale `d × scale`
/// and, its codes stored 32 up, a minimum 32 times it.
fn q6k_scales(block: &[u8], scales: &mut [f32], minimums: &mut [f32]) {
    let d = f16_at(block, 208);
    for (s, &scale) in block[192..208].iter().enumerate() {
        scales[s] = d * f32::from(scale as i8);
        minimums[s] = 32.0 * scales[s];
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
    use crate::quant::x86::bits_from as bits;
    use std::arch::x86_64::*;

    /// A super-block's codes, as [`super::unpack_q45k`] and
    /// [`super::unpack_q6k`] make them.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn unpack(format: Format, block: &[u8], codes: &mut [u8]) {
        assert!(block.len() == format.block_bytes() && codes.len() == 256);
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

/// The products of a band's rows and a band of sixteen tokens, without
/// SIMD: what the tiles must equal, for the tests.
#[cfg(test)]
pub fn portable_tile(
    band: &Band,
    inputs: &Interleaved,
    token_band: usize,
) -> [[f32; TOKENS]; ROWS] {
    let format = band.format.expect("a filled band");
    let size = sub_block(format);
    let per_row = band.super_blocks * SUPER_BLOCK / size;
    let mut out = [[0f32; TOKENS]; ROWS];
    for (r, out) in out.iter_mut().enumerate() {
        for (t, out) in out.iter_mut().enumerate() {
            let mut total = 0f32;
            for s in 0..band.super_blocks {
                let at = token_band * band.super_blocks + s;
                let mut part = 0f32;
                for sub in 0..SUPER_BLOCK / size {
                    let mut dot = 0i32;
                    for v in sub * size..(sub + 1) * size {
                        let code = band.codes[(r * band.super_blocks + s) * SUPER_BLOCK + v];
                        let (g, i) = (v / DEPTH, v % DEPTH);
                        let x = inputs.codes
                            [((at * (SUPER_BLOCK / DEPTH) + g) * TOKENS + t) * DEPTH + i];
                        dot += i32::from(code) * i32::from(x);
                    }
                    let sum: f32 = (0..size / 16)
                        .map(|i| inputs.sums[(at * 16 + sub * size / 16 + i) * TOKENS + t])
                        .sum();
                    let index = r * per_row + s * (SUPER_BLOCK / size) + sub;
                    part += dot as f32 * band.scales[index] - sum * band.minimums[index];
                }
                total += part * inputs.scales[at * TOKENS + t];
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
    match band.format.expect("a filled band") {
        // SAFETY: as this function's.
        Format::Q6K => unsafe { tile_of::<16>(band, inputs, token_band) },
        _ => unsafe { tile_of::<32>(band, inputs, token_band) },
    }
}

/// [`tile`] for sub-blocks of `SIZE` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn tile_of<const SIZE: usize>(
    band: &Band,
    inputs: &Interleaved,
    token_band: usize,
) -> [[f32; TOKENS]; ROWS] {
    use std::arch::x86_64::*;
    let super_blocks = band.super_blocks;
    assert_eq!(inputs.super_blocks, super_blocks, "inputs of another width");
    assert!(
        token_band < inputs.tokens.div_ceil(TOKENS),
        "no such band of tokens"
    );
    let subs = SUPER_BLOCK / SIZE;
    let per_row = super_blocks * subs;
    let groups = SUPER_BLOCK / DEPTH;
    assert_eq!(
        band.codes.len(),
        ROWS * super_blocks * SUPER_BLOCK,
        "a band not filled"
    );
    assert_eq!(band.scales.len(), ROWS * per_row, "a band not filled");
    // Each row's products for the sixteen tokens, across the row.
    let mut totals = [_mm512_setzero_ps(); ROWS];
    for s in 0..super_blocks {
        let at = token_band * super_blocks + s;
        let codes = &inputs.codes[at * groups * TOKENS * DEPTH..][..groups * TOKENS * DEPTH];
        let sums = &inputs.sums[at * 16 * TOKENS..][..16 * TOKENS];
        let input_scales = &inputs.scales[at * TOKENS..][..TOKENS];
        // Each row's codes of this super-block, and its scales' index.
        let weights: [*const u8; ROWS] =
            std::array::from_fn(|r| band.codes[(r * super_blocks + s) * SUPER_BLOCK..].as_ptr());
        let first_scale: [usize; ROWS] = std::array::from_fn(|r| r * per_row + s * subs);
        let mut parts = [_mm512_setzero_ps(); ROWS];
        for sub in 0..subs {
            let mut products = [_mm512_setzero_si512(); ROWS];
            for g in sub * SIZE / DEPTH..(sub + 1) * SIZE / DEPTH {
                // SAFETY: group `g` of sixteen tokens' four inputs is 64
                // bytes of `codes`; each row's codes of the super-block
                // are 256 bytes from `weights[r]`, `g` < 64.
                unsafe {
                    let x = _mm512_loadu_si512(codes.as_ptr().add(g * TOKENS * DEPTH) as *const _);
                    for (products, weights) in products.iter_mut().zip(weights) {
                        let four = std::ptr::read_unaligned(weights.add(g * DEPTH) as *const i32);
                        *products = _mm512_dpbusd_epi32(*products, _mm512_set1_epi32(four), x);
                    }
                }
            }
            // The sums of the inputs under the sub-block, for its minimum.
            // SAFETY: sixteen floats of `sums` at each (of 256).
            let input_sums = unsafe {
                let first = _mm512_loadu_ps(sums.as_ptr().add(sub * SIZE / 16 * TOKENS));
                match SIZE {
                    32 => _mm512_add_ps(
                        first,
                        _mm512_loadu_ps(sums.as_ptr().add((2 * sub + 1) * TOKENS)),
                    ),
                    _ => first,
                }
            };
            for r in 0..ROWS {
                let index = first_scale[r] + sub;
                // SAFETY: `index` < ROWS × per_row, the scales' length.
                let (scale, minimum) = unsafe {
                    (
                        *band.scales.get_unchecked(index),
                        *band.minimums.get_unchecked(index),
                    )
                };
                parts[r] = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(products[r]),
                    _mm512_set1_ps(scale),
                    parts[r],
                );
                parts[r] = _mm512_fnmadd_ps(input_sums, _mm512_set1_ps(minimum), parts[r]);
            }
        }
        // SAFETY: sixteen floats.
        let input_scales = unsafe { _mm512_loadu_ps(input_scales.as_ptr()) };
        for (total, part) in totals.iter_mut().zip(parts) {
            *total = _mm512_fmadd_ps(part, input_scales, *total);
        }
    }
    let mut out = [[0f32; TOKENS]; ROWS];
    for (out, total) in out.iter_mut().zip(totals) {
        // SAFETY: sixteen floats.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), total) };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiles' test (in `quant::tests`) checks the products through
    /// the unpacking the CPU runs; here the other gives the same codes.
    #[test]
    fn the_portable_unpacking_gives_the_codes_of_the_simd_one() {
        for format in [Format::Q4K, Format::Q5K, Format::Q6K] {
            let mut seed = 0x9E37_79B9u32.wrapping_mul(format as u32 + 1);
            let block: Vec<u8> = (0..format.block_bytes())
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            let mut portable = [0u8; SUPER_BLOCK];
            match format {
                Format::Q6K => unpack_q6k(&block, &mut portable),
                _ => unpack_q45k(format, &block, &mut portable),
            }
            let limit = if format == Format::Q4K {
                16
            } else if format == Format::Q5K {
                32
            } else {
                64
            };
            assert!(
                portable.iter().all(|&c| c < limit),
                "{format:?}: a code out of range"
            );
            #[cfg(target_arch = "x86_64")]
            if Kernels::detect() != Kernels::Portable {
                let mut simd = [0u8; SUPER_BLOCK];
                // SAFETY: the CPU has AVX2, FMA and F16C.
                unsafe { x86::unpack(format, &block, &mut simd) };
                assert_eq!(portable, simd, "{format:?}");
            }
        }
    }
}
