//! The dot products with AVX2 (and AVX-VNNI or AVX-512 VNNI where the CPU
//! has it), for each weight format: the same integer sums as the portable
//! kernels, 32 values a step. Each module below is one way of multiplying
//! unsigned bytes by signed ones: AVX2's two multiply-adds through 16-bit
//! sums, or VNNI's one instruction.

use super::activation::{Four, Q8Block, Q8KBlock};
use super::format::{Format, k_scales};
use super::kernels::Order;
use std::arch::x86_64::*;

/// The f16 at `at` as an f32 in every lane. Broadcast from memory, where
/// a scalar conversion compiled to an insert into whatever register was
/// free, often the kernel's running sum: each block's scale then waited for
/// the sum before it (measured: Q8_0 rows at a fifth of their speed).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn f16_splat(at: *const u8) -> __m256 {
    let bits = unsafe { std::ptr::read_unaligned(at as *const i16) };
    _mm256_cvtph_ps(_mm_set1_epi16(bits))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn sum_of(v: __m256) -> f32 {
    let quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
    _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)))
}

/// 16 packed bytes of two four-bit values each as 32 bytes: the low halves
/// (values 0-15) then the high ones (16-31).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibbles(at: *const u8) -> __m256i {
    let packed = unsafe { _mm_loadu_si128(at as *const __m128i) };
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
        _mm256_set1_epi8(0x0F),
    )
}

/// Bit `i` of the 32 bits at `at` spread to byte `i`: 0xFF where it is
/// set, 0 where not.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bytes_of_bits(at: *const u8) -> __m256i {
    let bits = unsafe { std::ptr::read_unaligned(at as *const i32) };
    // Byte `i` takes byte `i / 8` of the bits ...
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    // ... and is all ones when its bit `i % 8` was.
    let others = _mm256_set1_epi64x(0x7FBF_DFEF_F7FB_FDFEu64 as i64);
    _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1))
}

/// Bits `shift` and up of each byte of `v`, masked by `mask` (the shift
/// is of 16-bit lanes; the mask keeps each byte's own bits).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn bits_from(v: __m256i, shift: i32, mask: i8) -> __m256i {
    _mm256_and_si256(
        _mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
        _mm256_set1_epi8(mask),
    )
}

/// Unsigned bytes `u` times signed bytes `s`, summed in fours: with AVX2,
/// two multiply-adds through 16-bit sums (no pair of products here
/// reaches 2^15: weights are at most 63, inputs at most 127 in size).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn products_avx2(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// `sums` plus `u` times `s` scaled: the byte products summed in pairs,
/// each pair times its 16-bit lane of `scales`, summed in pairs again
/// (no pair of products reaches 2^15: weights are at most 63, inputs at
/// most 128 in size).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scaled_sums_avx2(sums: __m256i, u: __m256i, s: __m256i, scales: __m256i) -> __m256i {
    _mm256_add_epi32(sums, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales))
}

/// The products in one instruction (AVX-512 VNNI on 256-bit registers).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
fn products_vnni512(u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
}

/// The scaled sums with VNNI's 16-bit multiply-add, which adds too.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
fn scaled_sums_vnni512(sums: __m256i, u: __m256i, s: __m256i, scales: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(sums, _mm256_maddubs_epi16(u, s), scales)
}

/// The products in one instruction (AVX-VNNI, the VEX-encoded form).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn products_avxvnni(u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn scaled_sums_avxvnni(sums: __m256i, u: __m256i, s: __m256i, scales: __m256i) -> __m256i {
    _mm256_dpwssd_avx_epi32(sums, _mm256_maddubs_epi16(u, s), scales)
}

/// The eight 16-bit lanes of `words` (in both halves), lane `i` in every
/// lane: one shuffle, where a broadcast from a general register is two.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn lane_everywhere(words: __m256i, i: usize) -> __m256i {
    let pair = ((2 * i as i16 + 1) << 8) | (2 * i as i16);
    _mm256_shuffle_epi8(words, _mm256_set1_epi16(pair))
}

/// Of sixteen signed bytes, byte `s` as eight 16-bit lanes, then byte
/// `s + 1` as eight more.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn two_scales(bytes: __m128i, s: usize) -> __m256i {
    let (low, high) = (
        s as i64 * 0x0101_0101_0101_0101,
        (s as i64 + 1) * 0x0101_0101_0101_0101,
    );
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(bytes, _mm_set_epi64x(high, low)))
}

/// How far ahead of the block they are at the row kernels ask for the
/// bytes they will read. The one-token kernels read each weight once, from
/// a mapped file in pages of 4 KiB, where the hardware's own prefetching
/// stops at each page's end: asked for two pages ahead, a Q4_0 model's
/// first tokens came 1.7 times as fast (1 KiB ahead: 1.3; 16 KiB: no
/// faster).
const AHEAD: usize = 8192;

/// Asks for the cache lines of the `bytes` from `AHEAD` bytes past `block`
/// (the lines of one block: the next block's ask covers the rest).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn ask_ahead(block: *const u8, bytes: usize) {
    for line in (0..bytes).step_by(64) {
        // Never read: an address past the row's end is only not fetched.
        _mm_prefetch::<_MM_HINT_T0>(block.wrapping_add(AHEAD + line) as *const i8);
    }
}

/// How many sums of one input a kernel adds to in turn, so that at least
/// four additions are under way at once (each waits four or five cycles
/// for the one before it to the same sum): one for each of four inputs,
/// four for one.
const fn chains<const N: usize>() -> usize {
    match N {
        0 | 1 => 4,
        2 | 3 => 2,
        _ => 1,
    }
}

/// Four integer sums as one.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn joined_integers(sums: [__m256i; 4]) -> __m256i {
    _mm256_add_epi32(
        _mm256_add_epi32(sums[0], sums[1]),
        _mm256_add_epi32(sums[2], sums[3]),
    )
}

/// The sums of the eight 32-bit lanes of `a` and of `b` (exact:
/// integers), both at once.
#[inline]
#[target_feature(enable = "avx2")]
fn integer_sums(a: __m256i, b: __m256i) -> (i32, i32) {
    // Pairs of each, in each half; then the halves; then pairs again.
    let pairs = _mm256_hadd_epi32(a, b);
    let fours = _mm_add_epi32(
        _mm256_castsi256_si128(pairs),
        _mm256_extracti128_si256::<1>(pairs),
    );
    let whole = _mm_hadd_epi32(fours, fours);
    (_mm_cvtsi128_si32(whole), _mm_extract_epi32::<1>(whole))
}

/// The 32-value formats by number, for the kernels' const parameter.
const fn small_format(number: u8) -> Format {
    match number {
        0 => Format::Q4_0,
        1 => Format::Q4_1,
        2 => Format::Q5_0,
        3 => Format::Q5_1,
        _ => Format::Q8_0,
    }
}

/// Defines the kernels for one way of multiplying bytes.
macro_rules! kernels {
    ($module:ident, $features:literal, $products:ident, $scaled_sums:ident) => {
        pub mod $module {
            use super::*;

            /// Signed bytes `w` times signed bytes `x`, summed in fours:
            /// the weights' signs move onto the inputs, for the products'
            /// unsigned-times-signed.
            #[inline]
            #[target_feature(enable = $features)]
            fn signed_products(w: __m256i, x: __m256i) -> __m256i {
                $products(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w))
            }

            /// A 32-value block's weights as bytes, its scale and minimum (in
            /// every lane).
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn small_block(format: Format, block: *const u8) -> (__m256i, __m256, __m256) {
                // SAFETY: `block` points at a whole block of `format`.
                unsafe {
                    match format {
                        Format::Q4_0 => (
                            _mm256_sub_epi8(nibbles(block.add(2)), _mm256_set1_epi8(8)),
                            f16_splat(block),
                            _mm256_setzero_ps(),
                        ),
                        Format::Q4_1 => (
                            nibbles(block.add(4)),
                            f16_splat(block),
                            f16_splat(block.add(2)),
                        ),
                        // The fifth bit, less 16: 0xF0 ORed in where it
                        // is clear makes the byte the value less 16.
                        Format::Q5_0 => (
                            _mm256_or_si256(
                                nibbles(block.add(6)),
                                _mm256_andnot_si256(
                                    bytes_of_bits(block.add(2)),
                                    _mm256_set1_epi8(0xF0u8 as i8),
                                ),
                            ),
                            f16_splat(block),
                            _mm256_setzero_ps(),
                        ),
                        Format::Q5_1 => (
                            _mm256_or_si256(
                                nibbles(block.add(8)),
                                _mm256_and_si256(
                                    bytes_of_bits(block.add(4)),
                                    _mm256_set1_epi8(0x10),
                                ),
                            ),
                            f16_splat(block),
                            f16_splat(block.add(2)),
                        ),
                        Format::Q8_0 => (
                            _mm256_loadu_si256(block.add(2) as *const __m256i),
                            f16_splat(block),
                            _mm256_setzero_ps(),
                        ),
                        _ => unreachable!("{format:?} is not a format of 32-value blocks"),
                    }
                }
            }

            /// `R` rows of Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0 times `N` Q8
            /// inputs: `[row][input]`.
            ///
            /// # Safety
            /// The CPU has the features named; the rows are alike in
            /// length and each input has a block per block of a row.
            #[target_feature(enable = $features)]
            pub unsafe fn small<const R: usize, const N: usize>(
                format: Format,
                rows: [&[u8]; R],
                inputs: [&[Q8Block]; N],
            ) -> [[f32; N]; R] {
                // SAFETY (each arm): as this function's.
                unsafe {
                    match format {
                        Format::Q4_0 => small_as::<R, N, 0>(rows, inputs),
                        Format::Q4_1 => small_as::<R, N, 1>(rows, inputs),
                        Format::Q5_0 => small_as::<R, N, 2>(rows, inputs),
                        Format::Q5_1 => small_as::<R, N, 3>(rows, inputs),
                        Format::Q8_0 => small_as::<R, N, 4>(rows, inputs),
                        _ => unreachable!("{format:?} is not a format of 32-value blocks"),
                    }
                }
            }

            /// [`small`] for the format numbered `F` (see [`small_format`]):
            /// a constant, so each block's unpacking is that format's alone.
            ///
            /// Each product's blocks are added in order, one sum a row and
            /// input, as llama.cpp adds them: a different order moves the
            /// small models' logits measurably (the families' tests). Rows
            /// side by side change only the order of the work: their sums
            /// are apart, so `R` additions are under way where one row
            /// alone waits four cycles on each, and each input block is
            /// read once for the `R` rows.
            #[target_feature(enable = $features)]
            unsafe fn small_as<const R: usize, const N: usize, const F: u8>(
                rows: [&[u8]; R],
                inputs: [&[Q8Block]; N],
            ) -> [[f32; N]; R] {
                let format = small_format(F);
                let blocks = rows[0].len() / format.block_bytes();
                for row in rows {
                    assert_eq!(row.len(), rows[0].len(), "rows of one width");
                }
                for input in inputs {
                    assert!(input.len() >= blocks);
                }
                // Q4_1 and Q5_1 weights are unsigned and have minimums;
                // the others are signed.
                let unsigned = matches!(format, Format::Q4_1 | Format::Q5_1);
                let mut sums = [[_mm256_setzero_ps(); N]; R];
                let mut minimums = [[_mm256_setzero_ps(); N]; R];
                for b in 0..blocks {
                    for row in rows {
                        ask_ahead(row.as_ptr().wrapping_add(b * format.block_bytes()), 1);
                    }
                    for r in 0..R {
                        // SAFETY: block `b` lies within each row.
                        let (weights, scale, min) = unsafe {
                            small_block(format, rows[r].as_ptr().add(b * format.block_bytes()))
                        };
                        for n in 0..N {
                            // SAFETY: `b` is within each input (checked above).
                            let input = unsafe { inputs[n].get_unchecked(b) };
                            // SAFETY: `quants` is 32 bytes.
                            let x = unsafe {
                                _mm256_loadu_si256(input.quants.as_ptr() as *const __m256i)
                            };
                            let products = match unsigned {
                                true => $products(weights, x),
                                false => signed_products(weights, x),
                            };
                            sums[r][n] = _mm256_fmadd_ps(
                                _mm256_mul_ps(scale, _mm256_set1_ps(input.scale)),
                                _mm256_cvtepi32_ps(products),
                                sums[r][n],
                            );
                            if unsigned {
                                minimums[r][n] = _mm256_fmadd_ps(
                                    min,
                                    _mm256_set1_ps(input.scaled_sum),
                                    minimums[r][n],
                                );
                            }
                        }
                    }
                }
                // Every lane of a minimum's sum is the same.
                std::array::from_fn(|r| {
                    std::array::from_fn(|n| sum_of(sums[r][n]) + _mm256_cvtss_f32(minimums[r][n]))
                })
            }

            /// Q4_1 row times four inputs: the four products of each block
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
                // Lanes 0-3: the four inputs' sums over half of each
                // block; lanes 4-7: over the other half.
                let mut products = _mm256_setzero_ps();
                let mut minimums = _mm_setzero_ps();
                for b in 0..blocks {
                    // SAFETY: block `b` lies within `row`, and `b` within
                    // each input and `side_by_side`; `Four` is 16-aligned.
                    unsafe {
                        let block = row.as_ptr().add(b * Format::Q4_1.block_bytes());
                        let weights = nibbles(block.add(4));
                        let x = |n: usize| {
                            _mm256_loadu_si256(
                                inputs[n].get_unchecked(b).quants.as_ptr() as *const __m256i
                            )
                        };
                        let sums = _mm256_hadd_epi32(
                            _mm256_hadd_epi32($products(weights, x(0)), $products(weights, x(1))),
                            _mm256_hadd_epi32($products(weights, x(2)), $products(weights, x(3))),
                        );
                        let four = side_by_side.get_unchecked(b);
                        let scales = _mm256_broadcast_ps(&*(four.scales.as_ptr() as *const __m128));
                        products = _mm256_fmadd_ps(
                            _mm256_cvtepi32_ps(sums),
                            _mm256_mul_ps(scales, f16_splat(block)),
                            products,
                        );
                        minimums = _mm_fmadd_ps(
                            _mm_load_ps(four.scaled_sums.as_ptr()),
                            _mm256_castps256_ps128(f16_splat(block.add(2))),
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

            /// Q4_K and Q5_K rows times Q8_K inputs.
            ///
            /// # Safety
            /// The CPU has the features named; each input has a
            /// super-block per super-block of `row`.
            #[target_feature(enable = $features)]
            pub unsafe fn q45k<const N: usize>(
                format: Format,
                row: &[u8],
                inputs: [&[Q8KBlock]; N],
                order: Order,
            ) -> [f32; N] {
                let blocks = row.len() / format.block_bytes();
                for input in inputs {
                    assert!(input.len() >= blocks);
                }
                let fifth = format == Format::Q5K;
                // Summed across the row as floats, eight lanes wide (one
                // horizontal sum a row), the minimums' part apart.
                let mut accumulators = [_mm256_setzero_ps(); N];
                let mut minimums = [_mm256_setzero_ps(); N];
                // Or, block by block, one float each (`Order::Blockwise`).
                let (mut total, mut total_minimums) = ([0f32; N], [0f32; N]);
                for b in 0..blocks {
                    let block = &row[b * format.block_bytes()..][..format.block_bytes()];
                    ask_ahead(block.as_ptr(), block.len());
                    let (scales, mins) = k_scales(block[4..16].try_into().expect("12 bytes"));
                    // The eight scales as 16-bit lanes, in both halves.
                    let scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(
                        i64::from_le_bytes(scales),
                    )));
                    // Each minimum twice, as 16-bit lanes: one for each of
                    // the two sums of sixteen inputs under it.
                    let mins = _mm_cvtsi64_si128(i64::from_le_bytes(mins));
                    let mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins));
                    // SAFETY: the block's bytes are all within `row`.
                    let (d, min) =
                        unsafe { (f16_splat(block.as_ptr()), f16_splat(block.as_ptr().add(2))) };
                    let (high, quants) = match fifth {
                        // SAFETY: bytes 16-47 are the fifth bits.
                        true => (
                            unsafe { _mm256_loadu_si256(block.as_ptr().add(16) as *const __m256i) },
                            &block[48..],
                        ),
                        false => (_mm256_setzero_si256(), &block[16..]),
                    };
                    // Sums being added to at once (see `chains`).
                    let sets = chains::<N>();
                    let mut sums = [[_mm256_setzero_si256(); N]; 4];
                    for j in 0..4 {
                        // SAFETY: 32 bytes of four-bit pairs per 64 values.
                        let packed = unsafe {
                            _mm256_loadu_si256(quants.as_ptr().add(32 * j) as *const __m256i)
                        };
                        let mut low = _mm256_and_si256(packed, _mm256_set1_epi8(0x0F));
                        let mut up = bits_from(packed, 4, 0x0F);
                        if fifth {
                            let j = j as i32;
                            low = _mm256_or_si256(
                                low,
                                _mm256_slli_epi16(bits_from(high, 2 * j, 1), 4),
                            );
                            up = _mm256_or_si256(
                                up,
                                _mm256_slli_epi16(bits_from(high, 2 * j + 1, 1), 4),
                            );
                        }
                        let (s_low, s_up) = (
                            lane_everywhere(scales, 2 * j),
                            lane_everywhere(scales, 2 * j + 1),
                        );
                        for n in 0..N {
                            // SAFETY: `b` is within each input, its quants
                            // 256 bytes.
                            let x =
                                unsafe { inputs[n].get_unchecked(b).quants.as_ptr().add(64 * j) };
                            let (x_low, x_up) = unsafe {
                                (
                                    _mm256_loadu_si256(x as *const __m256i),
                                    _mm256_loadu_si256(x.add(32) as *const __m256i),
                                )
                            };
                            let (first, second) = ((2 * j) % sets, (2 * j + 1) % sets);
                            sums[first][n] = $scaled_sums(sums[first][n], low, x_low, s_low);
                            sums[second][n] = $scaled_sums(sums[second][n], up, x_up, s_up);
                        }
                    }
                    for n in 0..N {
                        // SAFETY: as above.
                        let input = unsafe { inputs[n].get_unchecked(b) };
                        // SAFETY: sixteen sums of sixteen inputs, 32 bytes.
                        let input_sums =
                            unsafe { _mm256_loadu_si256(input.sums.as_ptr() as *const __m256i) };
                        let offsets = _mm256_madd_epi16(input_sums, mins);
                        if order == Order::Blockwise {
                            // The block's integers whole (exact), then one
                            // fused multiply-add each, as llama.cpp's
                            // repacked product does.
                            let (d, min) = (_mm256_cvtss_f32(d), _mm256_cvtss_f32(min));
                            let (whole, offset) =
                                integer_sums(joined_integers(sums.map(|set| set[n])), offsets);
                            total[n] = (whole as f32).mul_add(d * input.scale, total[n]);
                            total_minimums[n] =
                                (offset as f32).mul_add(min * input.scale, total_minimums[n]);
                            continue;
                        }
                        let input_scale = _mm256_set1_ps(input.scale);
                        accumulators[n] = _mm256_fmadd_ps(
                            _mm256_mul_ps(d, input_scale),
                            _mm256_cvtepi32_ps(joined_integers(sums.map(|set| set[n]))),
                            accumulators[n],
                        );
                        minimums[n] = _mm256_fmadd_ps(
                            _mm256_mul_ps(min, input_scale),
                            _mm256_cvtepi32_ps(offsets),
                            minimums[n],
                        );
                    }
                }
                match order {
                    Order::Blockwise => std::array::from_fn(|n| total[n] - total_minimums[n]),
                    Order::Lanes => {
                        std::array::from_fn(|n| sum_of(_mm256_sub_ps(accumulators[n], minimums[n])))
                    }
                }
            }

            /// Q6_K rows times Q8_K inputs.
            ///
            /// # Safety
            /// The CPU has the features named; each input has a
            /// super-block per 210 bytes of `row`.
            #[target_feature(enable = $features)]
            pub unsafe fn q6k<const N: usize>(row: &[u8], inputs: [&[Q8KBlock]; N]) -> [f32; N] {
                let blocks = row.len() / Format::Q6K.block_bytes();
                for input in inputs {
                    assert!(input.len() >= blocks);
                }
                // Each input's products, eight lanes wide, summed across
                // the row as floats: one horizontal sum a row, as
                // llama.cpp's kernel does, not one a super-block.
                let mut accumulators = [_mm256_setzero_ps(); N];
                for b in 0..blocks {
                    let block = &row[b * Format::Q6K.block_bytes()..][..Format::Q6K.block_bytes()];
                    ask_ahead(block.as_ptr(), block.len());
                    // SAFETY: bytes 192-207 are the sixteen scales, the
                    // last two the super-block's scale.
                    let (scales, d) = unsafe {
                        (
                            _mm_loadu_si128(block.as_ptr().add(192) as *const __m128i),
                            f16_splat(block.as_ptr().add(208)),
                        )
                    };
                    // Sums being added to at once (see `chains`).
                    let sets = chains::<N>();
                    let mut sums = [[_mm256_setzero_si256(); N]; 4];
                    for half in 0..2 {
                        // SAFETY: 64 bytes of low bits and 32 of high bits
                        // per half.
                        let (low_a, low_b, high) = unsafe {
                            let low = block.as_ptr().add(64 * half);
                            (
                                _mm256_loadu_si256(low as *const __m256i),
                                _mm256_loadu_si256(low.add(32) as *const __m256i),
                                _mm256_loadu_si256(
                                    block.as_ptr().add(128 + 32 * half) as *const __m256i
                                ),
                            )
                        };
                        // Values 0-31, 32-63, 64-95 and 96-127 of the half.
                        let quarters = [
                            _mm256_or_si256(
                                _mm256_and_si256(low_a, _mm256_set1_epi8(0x0F)),
                                _mm256_slli_epi16(bits_from(high, 0, 3), 4),
                            ),
                            _mm256_or_si256(
                                _mm256_and_si256(low_b, _mm256_set1_epi8(0x0F)),
                                _mm256_slli_epi16(bits_from(high, 2, 3), 4),
                            ),
                            _mm256_or_si256(
                                bits_from(low_a, 4, 0x0F),
                                _mm256_slli_epi16(bits_from(high, 4, 3), 4),
                            ),
                            _mm256_or_si256(
                                bits_from(low_b, 4, 0x0F),
                                _mm256_slli_epi16(bits_from(high, 6, 3), 4),
                            ),
                        ];
                        for (k, quarter) in quarters.into_iter().enumerate() {
                            // Sixteen values to a scale.
                            let s = two_scales(scales, 8 * half + 2 * k);
                            for n in 0..N {
                                // SAFETY: `b` is within each input, its
                                // quants 256 bytes.
                                let x = unsafe {
                                    _mm256_loadu_si256(
                                        inputs[n]
                                            .get_unchecked(b)
                                            .quants
                                            .as_ptr()
                                            .add(128 * half + 32 * k)
                                            as *const __m256i,
                                    )
                                };
                                let set = k % sets;
                                sums[set][n] = $scaled_sums(sums[set][n], quarter, x, s);
                            }
                        }
                    }
                    let scales16 = _mm256_cvtepi8_epi16(scales);
                    for n in 0..N {
                        // SAFETY: as above.
                        let input = unsafe { inputs[n].get_unchecked(b) };
                        // SAFETY: sixteen sums of sixteen inputs, 32 bytes.
                        let input_sums =
                            unsafe { _mm256_loadu_si256(input.sums.as_ptr() as *const __m256i) };
                        // The values are stored 32 up: 32 times each
                        // scaled sum of inputs comes off, lane by lane.
                        let offsets = _mm256_slli_epi32(_mm256_madd_epi16(input_sums, scales16), 5);
                        accumulators[n] = _mm256_fmadd_ps(
                            _mm256_mul_ps(d, _mm256_set1_ps(input.scale)),
                            _mm256_cvtepi32_ps(_mm256_sub_epi32(
                                joined_integers(sums.map(|set| set[n])),
                                offsets,
                            )),
                            accumulators[n],
                        );
                    }
                }
                std::array::from_fn(|n| sum_of(accumulators[n]))
            }
        }
    };
}

kernels!(avx2, "avx2,fma,f16c", products_avx2, scaled_sums_avx2);
kernels!(
    avxvnni,
    "avx2,fma,f16c,avxvnni",
    products_avxvnni,
    scaled_sums_avxvnni
);
kernels!(
    vnni512,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    products_vnni512,
    scaled_sums_vnni512
);

/// Eight floats of a row at `at`, widened to f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn eight(format: Format, at: *const u8) -> __m256 {
    // SAFETY: `at` points at eight values of `format`.
    unsafe {
        match format {
            Format::F16 => _mm256_cvtph_ps(_mm_loadu_si128(at as *const __m128i)),
            Format::BF16 => _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128(at as *const __m128i)),
                16,
            )),
            _ => _mm256_loadu_ps(at as *const f32),
        }
    }
}

/// F16 rows times f16 inputs, BF16 times bf16, F32 times f32 (the inputs
/// as the row's bytes would be), summed in f32.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; each input is as long as `row`, a
/// multiple of eight values.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn floats<const N: usize>(format: Format, row: &[u8], inputs: [&[u8]; N]) -> [f32; N] {
    let width = format.block_bytes();
    let values = row.len() / width;
    assert!(values.is_multiple_of(8));
    for input in inputs {
        assert!(input.len() >= row.len());
    }
    let mut accumulators = [_mm256_setzero_ps(); N];
    for i in (0..values).step_by(8) {
        // SAFETY: values `i` to `i + 7` lie within `row` and each input.
        let weights = unsafe { eight(format, row.as_ptr().add(i * width)) };
        for n in 0..N {
            let x = unsafe { eight(format, inputs[n].as_ptr().add(i * width)) };
            accumulators[n] = _mm256_fmadd_ps(weights, x, accumulators[n]);
        }
    }
    std::array::from_fn(|n| sum_of(accumulators[n]))
}
