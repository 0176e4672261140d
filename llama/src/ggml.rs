//! llama.cpp's float arithmetic, operation for operation, for the parts of
//! one token's step where any order would do but only ggml's gives
//! llama.cpp's numbers: its exponential, its dot product's lanes and the
//! order it adds them in, its softmax. With them (and its rotary angles
//! and norms, in `ops`), a token run one at a time gives llama.cpp's
//! logits to the bit where the matrix products do, and so picks the token
//! llama.cpp picks at every near tie, not only at most.
//!
//! What ggml runs is its AVX-512 build (llama.cpp's x86 release, and the
//! anchor's build): sixteen lanes, four vectors of them in a dot product,
//! reduced as GCC reduces a vector. The portable functions here do the
//! same operations one lane at a time (fused multiply-adds as
//! `mul_add`), so every CPU gets the same numbers; the AVX-512 ones are
//! the same arithmetic, faster.

/// `f32` from its bits: ggml writes these constants in hexadecimal.
const fn bits(b: u32) -> f32 {
    f32::from_bits(b)
}

/// 1.5 × 2²³: added and taken away, it rounds to an integer.
const ROUNDER: f32 = bits(0x4b40_0000);
const LOG2_E: f32 = bits(0x3fb8_aa3b);
/// ln 2 in two parts, the first short enough that `n ×` it is exact.
const LN2_HIGH: f32 = bits(0x3f31_7200);
const LN2_LOW: f32 = bits(0x35bf_be8e);
/// The polynomial for `e^b` on ±ln 2 / 2, highest power first.
const EXP_COEFFICIENTS: [f32; 5] = [
    bits(0x3c07_2010),
    bits(0x3d2b_9f17),
    bits(0x3e2a_af33),
    bits(0x3eff_fedb),
    bits(0x3f7f_fff6),
];

/// `e^x` as ggml's vector `expf` computes each lane: `x = n ln 2 + b`,
/// `e^b` by the polynomial, times `2^n`; 0 or ∞ where `|n| > 192`.
#[cfg(test)] // the reference the vector loops are tested against
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let [c1, c2, c3, c4, c5] = EXP_COEFFICIENTS;
    let n = x.mul_add(LOG2_E, ROUNDER) - ROUNDER;
    let b = (-n).mul_add(LN2_LOW, (-n).mul_add(LN2_HIGH, x));
    let u = b * b;
    let j = c1
        .mul_add(b, c2)
        .mul_add(u, c3.mul_add(b, c4))
        .mul_add(u, c5.mul_add(b, 1.0));
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    // `j × 2^n`, rounded once (to a subnormal where it is one), as the
    // vector instruction does: exact in f64, then rounded to f32.
    (j as f64 * 2f64.powi(n as i32)) as f32
}

/// [`exp`] in sixteen lanes: the same operations as vector instructions.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub fn exp16(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let [c1, c2, c3, c4, c5] = EXP_COEFFICIENTS;
    let all = _mm512_set1_ps;
    let n = _mm512_sub_ps(_mm512_fmadd_ps(x, all(LOG2_E), all(ROUNDER)), all(ROUNDER));
    let b = _mm512_fnmadd_ps(n, all(LN2_LOW), _mm512_fnmadd_ps(n, all(LN2_HIGH), x));
    let u = _mm512_mul_ps(b, b);
    let j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(
            _mm512_fmadd_ps(all(c1), b, all(c2)),
            u,
            _mm512_fmadd_ps(all(c3), b, all(c4)),
        ),
        u,
        _mm512_fmadd_ps(all(c5), b, all(1.0)),
    );
    let scaled = _mm512_scalef_ps(j, n);
    let far = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(_mm512_abs_ps(n), all(192.0));
    if far == 0 {
        return scaled;
    }
    let below = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(n, _mm512_setzero_ps());
    let saturated = _mm512_mask_blend_ps(below, all(f32::INFINITY), _mm512_setzero_ps());
    _mm512_mask_blend_ps(far, scaled, saturated)
}

/// The sum of sixteen lanes as GCC's `_mm512_reduce_add_ps` adds them:
/// the upper eight onto the lower, then four, then pairs.
#[inline(always)]
pub fn sum16(lanes: [f32; 16]) -> f32 {
    let eight: [f32; 8] = std::array::from_fn(|i| lanes[i + 8] + lanes[i]);
    let four: [f32; 4] = std::array::from_fn(|i| eight[i + 4] + eight[i]);
    (four[2] + four[0]) + (four[3] + four[1])
}

/// Sixteen lanes a vector, four vectors a step of ggml's dot product.
pub const STEP: usize = 64;

/// The sixteen lanes ggml's dot product reduces, from its four vectors:
/// the third added to the first, the fourth to the second, then those two.
#[inline(always)]
pub fn fold_four(vectors: &[[f32; 16]; 4]) -> [f32; 16] {
    std::array::from_fn(|l| (vectors[0][l] + vectors[2][l]) + (vectors[1][l] + vectors[3][l]))
}

/// `x · y` as ggml's `ggml_vec_dot_f32`: element `i` of each step of 64
/// into lane `i % 16` of vector `i / 16 % 4` by fused multiply-adds, the
/// vectors folded and summed ([`fold_four`], [`sum16`]), then the
/// elements past the last whole step added one by one.
#[cfg(test)] // the reference the vector loops are tested against
#[inline(always)]
pub fn dot(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len(), "a dot product of unequal lengths");
    let whole = x.len() / STEP * STEP;
    let mut vectors = [[0f32; 16]; 4];
    for (xs, ys) in x[..whole].chunks_exact(STEP).zip(y.chunks_exact(STEP)) {
        for (i, (&a, &b)) in xs.iter().zip(ys).enumerate() {
            let lane = &mut vectors[i / 16][i % 16];
            *lane = a.mul_add(b, *lane);
        }
    }
    let mut sum = sum16(fold_four(&vectors));
    for (&a, &b) in x[whole..].iter().zip(&y[whole..]) {
        sum += a * b;
    }
    sum
}

/// Turns `row` (a query's scaled scores, position 0 first; −∞ where it
/// does not see) into its softmax as ggml's does: `e^(s − max)` sixteen
/// positions at a time, each sixteen summed ([`sum16`]) into an f64
/// total, then each times `1 / total` rounded to f32. Positions past the
/// row count as unseen (ggml's row is the cache's length, a multiple of
/// 256: its last positions are unseen).
#[cfg(test)] // the reference the vector loops are tested against
#[inline(always)]
pub fn softmax(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
    let mut total = 0f64;
    for chunk in row.chunks_mut(16) {
        let mut lanes = [0f32; 16];
        for (lane, score) in lanes.iter_mut().zip(chunk.iter_mut()) {
            *score = exp(*score - max);
            *lane = *score;
        }
        total += sum16(lanes) as f64;
    }
    let scale = (1.0 / total) as f32;
    for p in row {
        *p *= scale;
    }
}

/// `out[d] = Σ_p weights[p] × value(p)[d]` as ggml's product of the
/// transposed value cache by the softmax: for each `d` a [`dot`] over
/// positions from 0, the cache's length a whole number of steps (the
/// positions past `weights` weigh 0 and add nothing to any lane).
#[inline(always)]
pub fn weighted_sum<'v>(out: &mut [f32], weights: &[f32], value: impl Fn(usize) -> &'v [f32]) {
    let width = out.len();
    // Lane `p % 64` of each dimension.
    let mut lanes = vec![0f32; STEP * width];
    for (p, &w) in weights.iter().enumerate() {
        let row = value(p);
        let lane = &mut lanes[p % STEP * width..][..width];
        for (acc, &v) in lane.iter_mut().zip(row) {
            *acc = v.mul_add(w, *acc);
        }
    }
    for (d, out) in out.iter_mut().enumerate() {
        let vectors: [[f32; 16]; 4] =
            std::array::from_fn(|j| std::array::from_fn(|l| lanes[(16 * j + l) * width + d]));
        *out = sum16(fold_four(&vectors));
    }
}

/// [`dot`], [`softmax`] and [`weighted_sum`] in AVX-512 vectors: the
/// same operations on the same lanes, so the same numbers (the tests
/// compare them bit for bit).
#[cfg(target_arch = "x86_64")]
pub mod avx512 {
    use super::{STEP, sum16};
    use std::arch::x86_64::*;

    /// The sixteen lanes of `v`, summed as [`sum16`] sums them (GCC's
    /// instructions for it).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sum_lanes(v: __m512) -> f32 {
        let eight = _mm256_add_ps(
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))),
            _mm512_castps512_ps256(v),
        );
        let four = _mm_add_ps(
            _mm256_extractf128_ps::<1>(eight),
            _mm256_castps256_ps128(eight),
        );
        // Lanes 2, 3 onto 0, 1; then lane 1 onto lane 0.
        let two = _mm_add_ps(_mm_permute_ps::<0b01_00_11_10>(four), four);
        _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)))
    }

    /// [`super::dot`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub fn dot(x: &[f32], y: &[f32]) -> f32 {
        assert_eq!(x.len(), y.len(), "a dot product of unequal lengths");
        let whole = x.len() / STEP * STEP;
        let mut vectors = [_mm512_setzero_ps(); 4];
        for at in (0..whole).step_by(STEP) {
            for (j, vector) in vectors.iter_mut().enumerate() {
                // SAFETY: `at + 16 j + 16 <= whole`, of each.
                unsafe {
                    let a = _mm512_loadu_ps(x.as_ptr().add(at + 16 * j));
                    let b = _mm512_loadu_ps(y.as_ptr().add(at + 16 * j));
                    *vector = _mm512_fmadd_ps(a, b, *vector);
                }
            }
        }
        let folded = _mm512_add_ps(
            _mm512_add_ps(vectors[0], vectors[2]),
            _mm512_add_ps(vectors[1], vectors[3]),
        );
        let mut sum = sum_lanes(folded);
        for (&a, &b) in x[whole..].iter().zip(&y[whole..]) {
            sum += a * b;
        }
        sum
    }

    /// [`super::softmax`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub fn softmax(row: &mut [f32]) {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let mut total = 0f64;
        for chunk in row.chunks_mut(16) {
            // Past the row: unseen, e^−∞ = 0.
            let mut lanes = [f32::NEG_INFINITY; 16];
            lanes[..chunk.len()].copy_from_slice(chunk);
            // SAFETY: sixteen floats.
            let e = unsafe {
                let x = _mm512_loadu_ps(lanes.as_ptr());
                super::exp16(_mm512_sub_ps(x, _mm512_set1_ps(max)))
            };
            // SAFETY: sixteen floats.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), e) };
            chunk.copy_from_slice(&lanes[..chunk.len()]);
            total += sum16(lanes) as f64;
        }
        let scale = (1.0 / total) as f32;
        for p in row {
            *p *= scale;
        }
    }

    /// [`super::weighted_sum`], sixteen dimensions at a time (`out` a
    /// whole number of sixteens long). Position by position, each value
    /// row read once from its start (the cache's rows are 4 KiB apart and
    /// more: reading one sixteen of each row at a time missed the cache
    /// and its address translations at every row).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub fn weighted_sum<'v>(out: &mut [f32], weights: &[f32], value: impl Fn(usize) -> &'v [f32]) {
        let width = out.len();
        assert!(width.is_multiple_of(16), "dimensions in sixteens");
        thread_local! {
            /// Lane `p % 64` of every dimension, lane by lane.
            static LANES: std::cell::RefCell<Vec<f32>> =
                const { std::cell::RefCell::new(Vec::new()) };
        }
        LANES.with_borrow_mut(|lanes| {
            lanes.clear();
            lanes.resize(STEP * width, 0.0);
            for (p, &w) in weights.iter().enumerate() {
                let row = &value(p)[..width];
                let lane = &mut lanes[p % STEP * width..][..width];
                let w = _mm512_set1_ps(w);
                for at in (0..width).step_by(16) {
                    // SAFETY: `at + 16 <= width`, of each.
                    unsafe {
                        let v = _mm512_loadu_ps(row.as_ptr().add(at));
                        let acc = lane.as_mut_ptr().add(at);
                        _mm512_storeu_ps(acc, _mm512_fmadd_ps(v, w, _mm512_loadu_ps(acc)));
                    }
                }
            }
            for at in (0..width).step_by(16) {
                // SAFETY: lane `l`'s sixteen from `at` are within it.
                let lane =
                    |l: usize| unsafe { _mm512_loadu_ps(lanes.as_ptr().add(l * width + at)) };
                // Folded as [`super::fold_four`], then the sixteen lanes
                // of each dimension summed as [`sum16`].
                let folded: [__m512; 16] = std::array::from_fn(|l| {
                    _mm512_add_ps(
                        _mm512_add_ps(lane(l), lane(32 + l)),
                        _mm512_add_ps(lane(16 + l), lane(48 + l)),
                    )
                });
                let eight: [__m512; 8] =
                    std::array::from_fn(|i| _mm512_add_ps(folded[i + 8], folded[i]));
                let four: [__m512; 4] =
                    std::array::from_fn(|i| _mm512_add_ps(eight[i + 4], eight[i]));
                let sum = _mm512_add_ps(
                    _mm512_add_ps(four[2], four[0]),
                    _mm512_add_ps(four[3], four[1]),
                );
                // SAFETY: `at + 16 <= out.len()`.
                unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(at), sum) };
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulps_and_saturates_where_ggml_does() {
        for i in -2000..=2000 {
            let x = i as f32 * 0.04;
            let (got, want) = (exp(x), (x as f64).exp() as f32);
            let ulps = (got.to_bits() as i64 - want.to_bits() as i64).abs();
            assert!(ulps <= 2 || want == 0.0, "e^{x}: {got}, want {want}");
        }
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-200.0), 0.0);
        assert_eq!(exp(200.0), f32::INFINITY);
        // Below e^−87 the result is subnormal, as ggml's is.
        assert!(exp(-100.0) > 0.0 && exp(-100.0) < f32::MIN_POSITIVE);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn exp_in_lanes_is_exp_lane_by_lane() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        use std::arch::x86_64::*;
        let xs: Vec<f32> = (0..4096)
            .map(|i| (i as f32 - 3000.0) * 0.047)
            .chain([f32::NEG_INFINITY, f32::INFINITY, -0.0, 88.72, -103.9])
            .collect();
        for chunk in xs.chunks(16) {
            let mut lanes = [0f32; 16];
            lanes[..chunk.len()].copy_from_slice(chunk);
            let mut got = [0f32; 16];
            // SAFETY: checked above.
            unsafe { _mm512_storeu_ps(got.as_mut_ptr(), exp16(_mm512_loadu_ps(lanes.as_ptr()))) };
            for (x, got) in lanes.iter().zip(got) {
                assert_eq!(got.to_bits(), exp(*x).to_bits(), "e^{x}");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_loops_give_the_portable_ones_numbers_to_the_bit() {
        if !(std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            return;
        }
        let value = |i: usize| ((i as f32) * 0.618).sin() * (1.0 + (i % 7) as f32);
        for n in [1, 15, 16, 63, 64, 67, 130, 200] {
            let x: Vec<f32> = (0..n).map(value).collect();
            let y: Vec<f32> = (0..n).map(|i| value(i + 1000)).collect();
            // SAFETY: checked above.
            assert_eq!(
                unsafe { avx512::dot(&x, &y) }.to_bits(),
                dot(&x, &y).to_bits(),
                "{n}"
            );

            let mut row: Vec<f32> = x.iter().map(|s| s * 4.0).collect();
            row[0] = f32::NEG_INFINITY;
            let mut vectors = row.clone();
            softmax(&mut row);
            // SAFETY: checked above.
            unsafe { avx512::softmax(&mut vectors) };
            assert_eq!(
                row.iter().map(|p| p.to_bits()).collect::<Vec<_>>(),
                vectors.iter().map(|p| p.to_bits()).collect::<Vec<_>>()
            );

            let rows: Vec<Vec<f32>> = (0..n)
                .map(|p| (0..32).map(|d| value(p * 32 + d + 7)).collect())
                .collect();
            let (mut want, mut got) = ([0f32; 32], [0f32; 32]);
            weighted_sum(&mut want, &row, |p| &rows[p]);
            // SAFETY: checked above.
            unsafe { avx512::weighted_sum(&mut got, &row, |p| &rows[p]) };
            assert_eq!(want.map(f32::to_bits), got.map(f32::to_bits), "{n}");
        }
    }

    #[test]
    fn sixteen_lanes_add_in_gccs_order() {
        // Lanes 0 and 8 meet in the first step: a large value and its
        // negation there cancel before the ones are added.
        let mut lanes = [1.0f32; 16];
        (lanes[0], lanes[8]) = (1e8, -1e8);
        assert_eq!(sum16(lanes), 14.0);
        // Lanes 0 and 1 meet only in the last step: every one added to
        // either before is lost beside 10^8 (its unit in the last place
        // is 8).
        let mut lanes = [1.0f32; 16];
        (lanes[0], lanes[1]) = (1e8, -1e8);
        assert_eq!(sum16(lanes), 0.0);
    }

    #[test]
    fn a_dot_product_adds_its_steps_in_lanes_and_its_rest_in_order() {
        // 10^8 (a unit in the last place of 8) at element 5 beside 66
        // ones: its lane gains 1 + 2 (lost), its fold 4 (a tie, lost),
        // then 8 and 24 (kept); the three past the step are lost one by
        // one. In order, or exactly, it would be 100,000,066.
        let x: Vec<f32> = (0..67).map(|i| if i == 5 { 1e8 } else { 1.0 }).collect();
        assert_eq!(dot(&x, &[1.0; 67]), 100_000_056.0);
    }

    #[test]
    fn softmax_of_scores_sums_to_one_and_keeps_unseen_at_zero() {
        let mut row: Vec<f32> = (0..40).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        row[3] = f32::NEG_INFINITY;
        softmax(&mut row);
        assert_eq!(row[3], 0.0);
        let total: f32 = row.iter().sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
    }

    #[test]
    fn a_weighted_sum_is_a_dot_product_over_positions() {
        let rows: Vec<Vec<f32>> = (0..70)
            .map(|p| (0..3).map(|d| ((p * 3 + d) as f32 * 0.7).cos()).collect())
            .collect();
        let weights: Vec<f32> = (0..70).map(|p| (p as f32 * 0.11).sin().abs()).collect();
        let mut out = [0f32; 3];
        weighted_sum(&mut out, &weights, |p| &rows[p]);
        for d in 0..3 {
            // ggml's cache is longer than what is seen: padded with zeros
            // to whole steps, its dot product has no rest.
            let mut column: Vec<f32> = rows.iter().map(|r| r[d]).collect();
            let mut padded = weights.clone();
            column.resize(128, 0.0);
            padded.resize(128, 0.0);
            assert_eq!(out[d].to_bits(), dot(&column, &padded).to_bits());
        }
    }
}
