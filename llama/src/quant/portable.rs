//! The dot products in plain Rust, for any CPU: the reference the SIMD
//! kernels are tested against. Each sums a block's integer products
//! exactly and scales them as llama.cpp's reference code does.

use super::activation::{BLOCK, Q8Block, Q8KBlock};
use super::format::{Format, bf16_to_f32, f16_at, fifth_bits, k_scales, q6_quants};

/// A block's 32 weights as integers, and its scale and minimum (zero for
/// the formats without one).
fn small_block(format: Format, block: &[u8]) -> ([i32; BLOCK], f32, f32) {
    let mut weights = [0i32; BLOCK];
    let (scale, min) = match format {
        Format::Q4_0 => {
            for (i, &byte) in block[2..18].iter().enumerate() {
                weights[i] = i32::from(byte & 0x0F) - 8;
                weights[i + 16] = i32::from(byte >> 4) - 8;
            }
            (f16_at(block, 0), 0.0)
        }
        Format::Q4_1 => {
            for (i, &byte) in block[4..20].iter().enumerate() {
                weights[i] = i32::from(byte & 0x0F);
                weights[i + 16] = i32::from(byte >> 4);
            }
            (f16_at(block, 0), f16_at(block, 2))
        }
        Format::Q5_0 | Format::Q5_1 => {
            let (at, offset) = match format {
                Format::Q5_0 => (2, 16),
                _ => (4, 0),
            };
            let high = u32::from_le_bytes(block[at..at + 4].try_into().expect("4 bytes"));
            for (i, &byte) in block[at + 4..at + 20].iter().enumerate() {
                let (low, up) = fifth_bits(high, i);
                weights[i] = i32::from(byte & 0x0F | low) - offset;
                weights[i + 16] = i32::from(byte >> 4 | up) - offset;
            }
            let min = match format {
                Format::Q5_1 => f16_at(block, 2),
                _ => 0.0,
            };
            (f16_at(block, 0), min)
        }
        Format::Q8_0 => {
            for (w, &q) in weights.iter_mut().zip(&block[2..]) {
                *w = i32::from(q as i8);
            }
            (f16_at(block, 0), 0.0)
        }
        _ => unreachable!("{format:?} is not a format of 32-value blocks"),
    };
    (weights, scale, min)
}

/// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows times Q8 inputs.
pub fn small<const N: usize>(format: Format, row: &[u8], inputs: [&[Q8Block]; N]) -> [f32; N] {
    let mut sums = [0f32; N];
    for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
        let (weights, scale, min) = small_block(format, block);
        for (sum, input) in sums.iter_mut().zip(inputs) {
            let input = &input[b];
            let dot: i32 = weights
                .iter()
                .zip(&input.quants)
                .map(|(&w, &x)| w * i32::from(x))
                .sum();
            *sum += scale * input.scale * dot as f32 + min * input.scaled_sum;
        }
    }
    sums
}

/// Q4_K, Q5_K and Q6_K rows times Q8_K inputs.
pub fn k<const N: usize>(format: Format, row: &[u8], inputs: [&[Q8KBlock]; N]) -> [f32; N] {
    let mut sums = [0f32; N];
    for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
        // Each value's integer weight, and what each 16 of them are scaled
        // by and have subtracted (times the inputs' sums).
        let mut weights = [0i32; 256];
        let mut scales = [0i32; 16];
        let mut offsets = [0i32; 16];
        let (d, min) = match format {
            Format::Q4K | Format::Q5K => {
                let (sc, mn) = k_scales(block[4..16].try_into().expect("12 bytes"));
                let (high, quants) = match format {
                    Format::Q5K => (Some(&block[16..48]), &block[48..176]),
                    _ => (None, &block[16..144]),
                };
                for (j, quants) in quants.chunks_exact(32).enumerate() {
                    for (l, &byte) in quants.iter().enumerate() {
                        let (low, up) = high.map_or((0, 0), |h| {
                            ((h[l] >> (2 * j) & 1) << 4, (h[l] >> (2 * j + 1) & 1) << 4)
                        });
                        weights[64 * j + l] = i32::from(byte & 0x0F | low);
                        weights[64 * j + 32 + l] = i32::from(byte >> 4 | up);
                    }
                }
                for s in 0..16 {
                    scales[s] = i32::from(sc[s / 2]);
                    offsets[s] = i32::from(mn[s / 2]);
                }
                (f16_at(block, 0), f16_at(block, 2))
            }
            Format::Q6K => {
                for half in 0..2 {
                    let low = &block[64 * half..][..64];
                    let high = &block[128 + 32 * half..][..32];
                    for l in 0..32 {
                        for (k, q) in q6_quants(low, high, l).into_iter().enumerate() {
                            weights[128 * half + 32 * k + l] = i32::from(q);
                        }
                    }
                }
                for (s, scale) in scales.iter_mut().enumerate() {
                    *scale = i32::from(block[192 + s] as i8);
                    offsets[s] = 32 * *scale;
                }
                (f16_at(block, 208), 1.0)
            }
            _ => unreachable!("{format:?} is not a K format"),
        };
        for (sum, input) in sums.iter_mut().zip(inputs) {
            let input = &input[b];
            let mut dot = 0i32;
            let mut offset = 0i32;
            for s in 0..16 {
                let part: i32 = weights[16 * s..][..16]
                    .iter()
                    .zip(&input.quants[16 * s..][..16])
                    .map(|(&w, &x)| w * i32::from(x))
                    .sum();
                dot += scales[s] * part;
                offset += offsets[s] * i32::from(input.sums[s]);
            }
            // Q6_K's offset is integer, part of the one product; the
            // minimums of Q4_K and Q5_K have their own scale.
            *sum += match format {
                Format::Q6K => d * input.scale * (dot - offset) as f32,
                _ => d * input.scale * dot as f32 - min * input.scale * offset as f32,
            };
        }
    }
    sums
}

/// F16 rows times f16 inputs, BF16 times bf16, F32 times f32 (the inputs
/// as the row's bytes would be): summed in f32.
pub fn floats<const N: usize>(format: Format, row: &[u8], inputs: [&[u8]; N]) -> [f32; N] {
    let width = format.block_bytes();
    let value = |bytes: &[u8]| match format {
        Format::F16 => f16_at(bytes, 0),
        Format::BF16 => bf16_to_f32(u16::from_le_bytes([bytes[0], bytes[1]])),
        _ => f32::from_le_bytes(bytes.try_into().expect("4 bytes")),
    };
    let mut sums = [0f32; N];
    for (i, weight) in row.chunks_exact(width).enumerate() {
        let weight = value(weight);
        for (sum, input) in sums.iter_mut().zip(inputs) {
            *sum += weight * value(&input[i * width..][..width]);
        }
    }
    sums
}
