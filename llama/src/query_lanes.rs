//! A prompt's attention with sixteen queries side by side, one in each
//! lane of an AVX-512 register.
//!
//! Query by query, each score is a dot product summed across the lanes at
//! its end and each weighted value a multiply-add eight floats wide: in
//! floats, a 256-token prompt's attention took a fifth of its time, where
//! its arithmetic is a thirtieth of the matrix products' (which run 64
//! products an instruction). Here sixteen queries of one key-value head
//! are turned so that a register holds one dimension of all of them: a
//! key's value of that dimension, broadcast, multiplies all sixteen, and
//! nothing is summed across lanes. The softmax is lane-wise too (each
//! query's maximum, exponentials and total in its own lane), and the
//! values are summed four queries and 64 dimensions at a time in
//! registers.

use crate::ggml::exp16 as exp;
use std::arch::x86_64::*;

/// Queries a register.
pub const LANES: usize = 16;

/// Whether this CPU runs attention in lanes (AVX-512 F).
pub fn available() -> bool {
    is_x86_feature_detected!("avx512f")
}

/// Up to sixteen queries of one key-value head, and where they read.
pub struct Queries<'a> {
    /// Each query's dimensions, one query after another.
    pub rows: [&'a [f32]; LANES],
    /// How many of `rows` are queries (the rest are padding).
    pub count: usize,
    /// The positions each query sees: from `first[l]` to before `end[l]`.
    pub first: [i32; LANES],
    pub end: [i32; LANES],
    pub width: usize,
    pub scale: f32,
    /// Scores capped to ±this by tanh.
    pub cap: Option<f32>,
}

/// What one thread's attention in lanes writes between its steps.
#[derive(Default)]
pub struct Scratch {
    /// Dimension, lane: the queries turned.
    turned: Vec<f32>,
    /// Position, lane: the scores, then the softmax's numerators.
    scores: Vec<f32>,
}

/// Writes each query's attention over `positions` into `outs[l]` (its
/// head's output, `width` long): `key(p)` and `value(p)` are position
/// `p`'s key and value of the queries' key-value head.
///
/// # Safety
/// The CPU has AVX-512 F; `width` is a multiple of 16; every row, key,
/// value and out is `width` long.
#[target_feature(enable = "avx512f")]
pub unsafe fn attend<'k>(
    queries: &Queries,
    positions: std::ops::Range<usize>,
    key: impl Fn(usize) -> &'k [f32],
    value: impl Fn(usize) -> &'k [f32],
    scratch: &mut Scratch,
    outs: &mut [&mut [f32]],
) {
    let width = queries.width;
    assert!(width.is_multiple_of(16), "a head {width} wide");
    assert!(queries.count <= LANES && outs.len() == queries.count);
    let span = positions.len();
    scratch.turned.clear();
    scratch.turned.resize(width * LANES, 0.0);
    for (lane, row) in queries.rows[..queries.count].iter().enumerate() {
        assert_eq!(row.len(), width, "a query of another width");
        for (d, &q) in row.iter().enumerate() {
            scratch.turned[d * LANES + lane] = q;
        }
    }
    scratch.scores.clear();
    scratch.scores.resize(span * LANES, 0.0);
    // SAFETY: sixteen of each.
    let (first, end) = unsafe {
        (
            _mm512_loadu_si512(queries.first.as_ptr() as *const _),
            _mm512_loadu_si512(queries.end.as_ptr() as *const _),
        )
    };
    // Finite, so that a padding lane, which sees nothing, stays finite.
    let mut max = _mm512_set1_ps(f32::MIN);
    let mut p = positions.start;
    let keys = |p: usize, n: usize| -> [*const f32; 8] {
        std::array::from_fn(|j| {
            let key = key(p + j.min(n - 1));
            assert_eq!(key.len(), width, "a key of another width");
            key.as_ptr()
        })
    };
    while p < positions.end {
        let n = (positions.end - p).min(8);
        // SAFETY: the turned queries and each key are `width` long.
        let sums = unsafe { scores_of(scratch.turned.as_ptr(), keys(p, n), width) };
        for (j, &sum) in sums[..n].iter().enumerate() {
            let mut score = _mm512_mul_ps(sum, _mm512_set1_ps(queries.scale));
            if let Some(cap) = queries.cap {
                score = capped(score, cap);
            }
            let at = _mm512_set1_epi32((p + j) as i32);
            let seen = _mm512_cmpge_epi32_mask(at, first) & _mm512_cmplt_epi32_mask(at, end);
            let score = _mm512_mask_mov_ps(_mm512_set1_ps(f32::NEG_INFINITY), seen, score);
            max = _mm512_max_ps(max, score);
            let row = (p + j - positions.start) * LANES;
            // SAFETY: `row + 16 <= span × 16`.
            unsafe { _mm512_storeu_ps(scratch.scores.as_mut_ptr().add(row), score) };
        }
        p += n;
    }
    let mut total = _mm512_setzero_ps();
    for row in scratch.scores.chunks_exact_mut(LANES) {
        // SAFETY: sixteen floats.
        unsafe {
            let weight = exp(_mm512_sub_ps(_mm512_loadu_ps(row.as_ptr()), max));
            total = _mm512_add_ps(total, weight);
            _mm512_storeu_ps(row.as_mut_ptr(), weight);
        }
    }
    let mut totals = [0f32; LANES];
    // SAFETY: sixteen floats.
    unsafe { _mm512_storeu_ps(totals.as_mut_ptr(), total) };
    let values: Vec<&[f32]> = positions.clone().map(&value).collect();
    assert!(
        values.iter().all(|v| v.len() == width),
        "a value of another width"
    );
    for (group, outs) in outs.chunks_mut(4).enumerate() {
        let lanes = group * 4;
        for d in (0..width).step_by(64) {
            // SAFETY: the weights are `span` rows of sixteen, each value
            // and out `width` long.
            unsafe {
                match width - d {
                    64.. => sum_values::<4>(&scratch.scores, &values, lanes, d, &totals, outs),
                    48 => sum_values::<3>(&scratch.scores, &values, lanes, d, &totals, outs),
                    32 => sum_values::<2>(&scratch.scores, &values, lanes, d, &totals, outs),
                    _ => sum_values::<1>(&scratch.scores, &values, lanes, d, &totals, outs),
                }
            }
        }
    }
}

/// The sixteen queries' dot products with eight keys (the last repeated
/// where there are fewer): one register of lanes a key.
///
/// # Safety
/// The CPU has AVX-512 F; `turned` holds `width` × 16 floats, each key
/// `width`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn scores_of(turned: *const f32, keys: [*const f32; 8], width: usize) -> [__m512; 8] {
    let mut sums = [_mm512_setzero_ps(); 8];
    for d in 0..width {
        // SAFETY: `d < width`.
        unsafe {
            let dimension = _mm512_loadu_ps(turned.add(d * LANES));
            for (sum, key) in sums.iter_mut().zip(keys) {
                *sum = _mm512_fmadd_ps(dimension, _mm512_set1_ps(*key.add(d)), *sum);
            }
        }
    }
    sums
}

/// Outs `outs` (queries `lanes..`, up to four) get `REGISTERS` × 16
/// dimensions from `d` of their weighted values, divided by their totals.
///
/// # Safety
/// The CPU has AVX-512 F; `weights` holds `values.len()` rows of sixteen;
/// every value and out has `d + 16 × REGISTERS` dimensions.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn sum_values<const REGISTERS: usize>(
    weights: &[f32],
    values: &[&[f32]],
    lanes: usize,
    d: usize,
    totals: &[f32; LANES],
    outs: &mut [&mut [f32]],
) {
    let mut sums = [[_mm512_setzero_ps(); REGISTERS]; 4];
    for (p, value) in values.iter().enumerate() {
        // SAFETY: as this function's.
        unsafe {
            let value = value.as_ptr().add(d);
            let parts: [__m512; REGISTERS] =
                std::array::from_fn(|k| _mm512_loadu_ps(value.add(16 * k)));
            let row = weights.as_ptr().add(p * LANES + lanes);
            for (q, sums) in sums.iter_mut().enumerate().take(outs.len()) {
                let weight = _mm512_set1_ps(*row.add(q));
                for (sum, part) in sums.iter_mut().zip(parts) {
                    *sum = _mm512_fmadd_ps(weight, part, *sum);
                }
            }
        }
    }
    for (q, (out, sums)) in outs.iter_mut().zip(sums).enumerate() {
        let share = _mm512_set1_ps(1.0 / totals[lanes + q]);
        for (k, sum) in sums.into_iter().enumerate() {
            // SAFETY: as this function's.
            unsafe {
                _mm512_storeu_ps(out.as_mut_ptr().add(d + 16 * k), _mm512_mul_ps(sum, share))
            };
        }
    }
}

/// `cap × tanh(score / cap)`, lane by lane (Gemma 2's soft-capping: rare
/// enough to leave to the library's tanh).
#[inline]
#[target_feature(enable = "avx512f")]
fn capped(score: __m512, cap: f32) -> __m512 {
    let mut lanes = [0f32; LANES];
    // SAFETY: sixteen floats.
    unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), score) };
    for lane in &mut lanes {
        *lane = cap * (*lane / cap).tanh();
    }
    // SAFETY: sixteen floats.
    unsafe { _mm512_loadu_ps(lanes.as_ptr()) }
}
