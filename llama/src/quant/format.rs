//! The weight formats the kernels take, as a GGUF file (llama.cpp) lays
//! out their blocks, and how each block's values are read back.

use candle_core::quantized::GgmlDType;

/// How a matrix's values are stored: blocks of 32 values with one scale
/// (and a minimum, for Q4_1 and Q5_1); super-blocks of 256 values in eight
/// or sixteen sub-blocks with scales of their own (the K formats); or one
/// float per value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// f16 scale; 16 bytes of two four-bit values each (value `i` in the low
    /// half of byte `i`, value `i + 16` in its high half), less 8.
    Q4_0,
    /// f16 scale, f16 minimum, four-bit values as Q4_0's, not offset.
    Q4_1,
    /// f16 scale; 32 fifth bits; four-bit values as Q4_0's; less 16.
    Q5_0,
    /// f16 scale, f16 minimum, fifth bits, four-bit values; not offset.
    Q5_1,
    /// f16 scale, 32 signed bytes.
    Q8_0,
    /// Q4_K: f16 scale and minimum of the super-block; eight six-bit scales
    /// and minimums, one per 32 values; 128 bytes of four-bit values.
    Q4K,
    /// Q5_K: Q4_K's with a fifth bit per value.
    Q5K,
    /// Q6_K: 128 bytes of low four bits, 64 of high two bits, sixteen
    /// signed-byte scales (one per 16 values), an f16 scale; less 32.
    Q6K,
    F16,
    BF16,
    F32,
}

/// What a product quantizes its inputs to for a format: llama.cpp's
/// `vec_dot_type`, so that products round as llama.cpp's do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// Blocks of 32 bytes with an f16-rounded scale (Q8_0, Q8_1).
    Q8,
    /// Super-blocks of 256 bytes with an f32 scale and sums of each 16
    /// (Q8_K).
    Q8K,
    F16,
    BF16,
    F32,
}

impl Format {
    #[cfg(test)]
    pub const ALL: [Format; 11] = [
        Format::Q4_0,
        Format::Q4_1,
        Format::Q5_0,
        Format::Q5_1,
        Format::Q8_0,
        Format::Q4K,
        Format::Q5K,
        Format::Q6K,
        Format::F16,
        Format::BF16,
        Format::F32,
    ];

    /// Values per block.
    pub const fn block_values(self) -> usize {
        match self {
            Format::Q4K | Format::Q5K | Format::Q6K => 256,
            Format::F16 | Format::BF16 | Format::F32 => 1,
            _ => 32,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            Format::Q4_0 => 18,
            Format::Q4_1 => 20,
            Format::Q5_0 => 22,
            Format::Q5_1 => 24,
            Format::Q8_0 => 34,
            Format::Q4K => 144,
            Format::Q5K => 176,
            Format::Q6K => 210,
            Format::F16 | Format::BF16 => 2,
            Format::F32 => 4,
        }
    }

    pub const fn activation(self) -> Activation {
        match self {
            Format::Q4K | Format::Q5K | Format::Q6K => Activation::Q8K,
            Format::F16 => Activation::F16,
            Format::BF16 => Activation::BF16,
            Format::F32 => Activation::F32,
            _ => Activation::Q8,
        }
    }

    /// The format of a GGUF tensor type, if the kernels take it.
    pub fn of_ggml(dtype: GgmlDType) -> Option<Format> {
        Some(match dtype {
            GgmlDType::Q4_0 => Format::Q4_0,
            GgmlDType::Q4_1 => Format::Q4_1,
            GgmlDType::Q5_0 => Format::Q5_0,
            GgmlDType::Q5_1 => Format::Q5_1,
            GgmlDType::Q8_0 => Format::Q8_0,
            GgmlDType::Q4K => Format::Q4K,
            GgmlDType::Q5K => Format::Q5K,
            GgmlDType::Q6K => Format::Q6K,
            GgmlDType::F16 => Format::F16,
            GgmlDType::BF16 => Format::BF16,
            GgmlDType::F32 => Format::F32,
            _ => return None,
        })
    }

    /// Bytes of a row of `columns` values.
    pub const fn row_bytes(self, columns: usize) -> usize {
        columns / self.block_values() * self.block_bytes()
    }

    /// Writes the values of `blocks` (whole blocks of this format) into
    /// `out`, as llama.cpp's `dequantize_row_*` computes them.
    pub fn dequantize(self, blocks: &[u8], out: &mut [f32]) {
        let (per_block, block_bytes) = (self.block_values(), self.block_bytes());
        debug_assert_eq!(blocks.len() / block_bytes * per_block, out.len());
        for (block, out) in blocks
            .chunks_exact(block_bytes)
            .zip(out.chunks_exact_mut(per_block))
        {
            match self {
                Format::Q4_0 => {
                    let d = f16_at(block, 0);
                    for (i, &byte) in block[2..18].iter().enumerate() {
                        out[i] = (i32::from(byte & 0x0F) - 8) as f32 * d;
                        out[i + 16] = (i32::from(byte >> 4) - 8) as f32 * d;
                    }
                }
                Format::Q4_1 => {
                    let (d, m) = (f16_at(block, 0), f16_at(block, 2));
                    for (i, &byte) in block[4..20].iter().enumerate() {
                        out[i] = f32::from(byte & 0x0F) * d + m;
                        out[i + 16] = f32::from(byte >> 4) * d + m;
                    }
                }
                Format::Q5_0 => {
                    let d = f16_at(block, 0);
                    let high = u32_at(block, 2);
                    for (i, &byte) in block[6..22].iter().enumerate() {
                        let (low, up) = fifth_bits(high, i);
                        out[i] = (i32::from(byte & 0x0F | low) - 16) as f32 * d;
                        out[i + 16] = (i32::from(byte >> 4 | up) - 16) as f32 * d;
                    }
                }
                Format::Q5_1 => {
                    let (d, m) = (f16_at(block, 0), f16_at(block, 2));
                    let high = u32_at(block, 4);
                    for (i, &byte) in block[8..24].iter().enumerate() {
                        let (low, up) = fifth_bits(high, i);
                        out[i] = f32::from(byte & 0x0F | low) * d + m;
                        out[i + 16] = f32::from(byte >> 4 | up) * d + m;
                    }
                }
                Format::Q8_0 => {
                    let d = f16_at(block, 0);
                    for (out, &q) in out.iter_mut().zip(&block[2..]) {
                        *out = f32::from(q as i8) * d;
                    }
                }
                Format::Q4K | Format::Q5K => {
                    let (d, min) = (f16_at(block, 0), f16_at(block, 2));
                    let (scales, mins) = k_scales(block[4..16].try_into().expect("12 bytes"));
                    let (high, quants) = match self {
                        Format::Q5K => (Some(&block[16..48]), &block[48..176]),
                        _ => (None, &block[16..144]),
                    };
                    for (j, (quants, out)) in quants
                        .chunks_exact(32)
                        .zip(out.chunks_exact_mut(64))
                        .enumerate()
                    {
                        let (d1, m1) = (d * f32::from(scales[2 * j]), min * f32::from(mins[2 * j]));
                        let (d2, m2) = (
                            d * f32::from(scales[2 * j + 1]),
                            min * f32::from(mins[2 * j + 1]),
                        );
                        for (l, &byte) in quants.iter().enumerate() {
                            let (low, up) = match high {
                                Some(high) => (
                                    (high[l] >> (2 * j) & 1) << 4,
                                    (high[l] >> (2 * j + 1) & 1) << 4,
                                ),
                                None => (0, 0),
                            };
                            out[l] = d1 * f32::from(byte & 0x0F | low) - m1;
                            out[l + 32] = d2 * f32::from(byte >> 4 | up) - m2;
                        }
                    }
                }
                Format::Q6K => {
                    let d = f16_at(block, 208);
                    for half in 0..2 {
                        let low = &block[64 * half..][..64];
                        let high = &block[128 + 32 * half..][..32];
                        let scales = &block[192 + 8 * half..][..8];
                        let out = &mut out[128 * half..][..128];
                        for l in 0..32 {
                            let s = l / 16;
                            let quants = q6_quants(low, high, l);
                            for (k, q) in quants.into_iter().enumerate() {
                                let scale = f32::from(scales[s + 2 * k] as i8);
                                out[l + 32 * k] = d * scale * f32::from(q - 32);
                            }
                        }
                    }
                }
                Format::F16 => out[0] = f16_at(block, 0),
                Format::BF16 => out[0] = bf16_to_f32(u16::from_le_bytes([block[0], block[1]])),
                Format::F32 => out[0] = f32::from_le_bytes(block.try_into().expect("4 bytes")),
            }
        }
    }
}

/// The f16 at byte `at` of `bytes`, as an f32.
pub fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The fifth bits of values `i` and `i + 16` (Q5_0, Q5_1), in place (16).
pub fn fifth_bits(high: u32, i: usize) -> (u8, u8) {
    (
        ((high >> i) << 4 & 0x10) as u8,
        ((high >> (i + 12)) & 0x10) as u8,
    )
}

/// The eight six-bit scales and minimums of a Q4_K or Q5_K super-block,
/// packed in twelve bytes: the first four of each in the low six bits of
/// bytes 0-3 and 4-7, the last four in the halves of bytes 8-11 with their
/// two high bits in the top bits of bytes 0-7.
///
/// Worked four bytes at a time, as the twelve bytes are read once per 256
/// weights in the kernels' inner loop.
#[inline]
pub fn k_scales(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let word =
        |i: usize| u32::from_le_bytes([packed[i], packed[i + 1], packed[i + 2], packed[i + 3]]);
    let (first, second, third) = (word(0), word(4), word(8));
    const SIX_BITS: u32 = 0x3F3F_3F3F;
    const FOUR_BITS: u32 = 0x0F0F_0F0F;
    const TWO_BITS: u32 = 0x0303_0303;
    let scales_low = first & SIX_BITS;
    let mins_low = second & SIX_BITS;
    let scales_high = (third & FOUR_BITS) | (((first >> 6) & TWO_BITS) << 4);
    let mins_high = ((third >> 4) & FOUR_BITS) | (((second >> 6) & TWO_BITS) << 4);
    let join = |low: u32, high: u32| ((u64::from(high) << 32) | u64::from(low)).to_le_bytes();
    (join(scales_low, scales_high), join(mins_low, mins_high))
}

/// The four six-bit values (0-63) of a Q6_K half-block at `l` (0-31): at
/// positions `l`, `l + 32`, `l + 64` and `l + 96` of its 128.
pub fn q6_quants(low: &[u8], high: &[u8], l: usize) -> [i16; 4] {
    let h = high[l];
    [
        i16::from(low[l] & 0x0F | (h & 3) << 4),
        i16::from(low[l + 32] & 0x0F | (h >> 2 & 3) << 4),
        i16::from(low[l] >> 4 | (h >> 4 & 3) << 4),
        i16::from(low[l + 32] >> 4 | (h >> 6 & 3) << 4),
    ]
}

pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}
