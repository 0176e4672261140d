//! The float loops of a forward pass outside the matrix products (the
//! attention's dot products and weighted sums), eight lanes wide with fused
//! multiply-adds where the CPU has AVX2 and FMA. The crate is built for any
//! x86-64, whose baseline has neither: left to the compiler, these loops
//! ran four lanes wide with separate multiplies and adds, and took a third
//! of a 256-token prompt's time.

/// How this CPU runs the loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lanes {
    Portable,
    /// AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
}

impl Lanes {
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                return Lanes::Avx2Fma;
            }
        }
        Lanes::Portable
    }
}

/// The loops of one way: a caller generic over it, called from a function
/// with the way's CPU features, gets them inlined.
pub trait Loops: Copy {
    /// `a · b` (as long as each other).
    fn dot(self, a: &[f32], b: &[f32]) -> f32;
    /// `out += Σ weights[k] × rows[k]` (each row as long as `out`).
    fn add_weighted(self, out: &mut [f32], weights: &[f32], rows: &[&[f32]]);
}

/// The loops as the compiler makes them for any CPU.
#[derive(Clone, Copy)]
pub struct Portable;

impl Loops for Portable {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len(), "a dot product of unequal lengths");
        portable_dot(a, b)
    }

    #[inline(always)]
    fn add_weighted(self, out: &mut [f32], weights: &[f32], rows: &[&[f32]]) {
        assert!(
            rows.iter().all(|row| row.len() == out.len()),
            "a weighted sum of unequal lengths"
        );
        for (&weight, row) in weights.iter().zip(rows) {
            for (out, v) in out.iter_mut().zip(*row) {
                *out += weight * v;
            }
        }
    }
}

/// The loops with AVX2 and FMA: made only where the CPU has them.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub struct Avx2Fma(());

#[cfg(target_arch = "x86_64")]
impl Avx2Fma {
    /// # Safety
    /// The CPU has AVX2 and FMA.
    pub unsafe fn new() -> Self {
        Avx2Fma(())
    }
}

#[cfg(target_arch = "x86_64")]
impl Loops for Avx2Fma {
    #[inline(always)]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len(), "a dot product of unequal lengths");
        // SAFETY: an `Avx2Fma` exists only where the CPU has them.
        unsafe { x86::dot(a, b) }
    }

    #[inline(always)]
    fn add_weighted(self, out: &mut [f32], weights: &[f32], rows: &[&[f32]]) {
        assert!(
            rows.iter().all(|row| row.len() == out.len()),
            "a weighted sum of unequal lengths"
        );
        // SAFETY: as above.
        unsafe { x86::add_weighted(out, weights, rows) }
    }
}

/// A dot product in eight lanes, which the compiler turns into SIMD.
fn portable_dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (a, b) in a_chunks.zip(b_chunks) {
        for i in 0..8 {
            lanes[i] += a[i] * b[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU has AVX2 and FMA; `a` and `b` are as long as each other.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let whole = a.len() / 16 * 16;
        // Two accumulators, so that one multiply-add need not wait for
        // the one before it.
        let (mut first, mut second) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for i in (0..whole).step_by(16) {
            // SAFETY: `i + 16 <= whole <= len` for both.
            unsafe {
                let (a, b) = (a.as_ptr().add(i), b.as_ptr().add(i));
                first = _mm256_fmadd_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b), first);
                second =
                    _mm256_fmadd_ps(_mm256_loadu_ps(a.add(8)), _mm256_loadu_ps(b.add(8)), second);
            }
        }
        let sum = _mm256_add_ps(first, second);
        let quad = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
        let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        let total = _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
        total
            + a[whole..]
                .iter()
                .zip(&b[whole..])
                .map(|(x, y)| x * y)
                .sum::<f32>()
    }

    /// # Safety
    /// As [`dot`]'s, `out` and `v` as long as each other.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn add_scaled(out: &mut [f32], weight: f32, v: &[f32]) {
        let whole = out.len() / 8 * 8;
        let weight8 = _mm256_set1_ps(weight);
        for i in (0..whole).step_by(8) {
            // SAFETY: `i + 8 <= whole <= len` for both.
            unsafe {
                let at = out.as_mut_ptr().add(i);
                let sum = _mm256_fmadd_ps(
                    weight8,
                    _mm256_loadu_ps(v.as_ptr().add(i)),
                    _mm256_loadu_ps(at),
                );
                _mm256_storeu_ps(at, sum);
            }
        }
        for (out, v) in out[whole..].iter_mut().zip(&v[whole..]) {
            *out += weight * v;
        }
    }

    /// # Safety
    /// As [`dot`]'s, each row as long as `out`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn add_weighted(out: &mut [f32], weights: &[f32], rows: &[&[f32]]) {
        // Sixty-four values at a time held in registers across all the
        // rows: one store of each a call, not one a row.
        let whole = out.len() / 64 * 64;
        for start in (0..whole).step_by(64) {
            // SAFETY: `start + 64 <= whole <= len`, of `out` and each row.
            unsafe {
                let at = out.as_mut_ptr().add(start);
                let mut sums: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(at.add(8 * i)));
                for (&weight, row) in weights.iter().zip(rows) {
                    let (weight, row) = (_mm256_set1_ps(weight), row.as_ptr().add(start));
                    for (i, sum) in sums.iter_mut().enumerate() {
                        *sum = _mm256_fmadd_ps(weight, _mm256_loadu_ps(row.add(8 * i)), *sum);
                    }
                }
                for (i, sum) in sums.into_iter().enumerate() {
                    _mm256_storeu_ps(at.add(8 * i), sum);
                }
            }
        }
        if whole < out.len() {
            for (&weight, row) in weights.iter().zip(rows) {
                // SAFETY: as this function's.
                unsafe { add_scaled(&mut out[whole..], weight, &row[whole..]) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(count: usize, seed: u32) -> Vec<f32> {
        (0..count as u32)
            .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    const LENGTHS: [usize; 11] = [0, 1, 7, 8, 9, 15, 16, 17, 64, 128, 131];

    fn dots_are_exact<L: Loops>(loops: L, way: &str) {
        for len in LENGTHS {
            let (a, b) = (values(len, 1), values(len, 2));
            let exact: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum();
            let got = loops.dot(&a, &b);
            assert!(
                (f64::from(got) - exact).abs() < 1e-4,
                "{way}, {len}: {got} vs {exact}"
            );
        }
    }

    fn weighted_rows_are_summed<L: Loops>(loops: L, way: &str) {
        for len in LENGTHS.into_iter().chain([192, 200]) {
            let start = values(len, 5);
            let rows: Vec<Vec<f32>> = (0..5).map(|k| values(len, 6 + k)).collect();
            let rows: Vec<&[f32]> = rows.iter().map(Vec::as_slice).collect();
            let weights = [0.5, -0.25, 0.0, 1.5, 0.125];
            let mut out = start.clone();
            loops.add_weighted(&mut out, &weights, &rows);
            for i in 0..len {
                let want = start[i]
                    + weights
                        .iter()
                        .zip(&rows)
                        .map(|(w, r)| w * r[i])
                        .sum::<f32>();
                assert!((out[i] - want).abs() < 1e-5, "{way}, {len}, {i}");
            }
        }
    }

    #[test]
    fn each_way_sums_weighted_rows_of_any_length() {
        weighted_rows_are_summed(Portable, "portable");
        #[cfg(target_arch = "x86_64")]
        if Lanes::detect() == Lanes::Avx2Fma {
            // SAFETY: the CPU has them.
            weighted_rows_are_summed(unsafe { Avx2Fma::new() }, "AVX2 and FMA");
        }
    }

    #[test]
    fn each_way_gives_the_dot_product_of_any_length() {
        dots_are_exact(Portable, "portable");
        #[cfg(target_arch = "x86_64")]
        if Lanes::detect() == Lanes::Avx2Fma {
            // SAFETY: the CPU has them.
            dots_are_exact(unsafe { Avx2Fma::new() }, "AVX2 and FMA");
        }
    }
}
