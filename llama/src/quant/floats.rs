//! F16 and BF16 weights on CPUs with AVX-512: sixteen float lanes a
//! register, and for BF16 the CPU's own pair products (`vdpbf16ps`, 32
//! products an instruction, where it has AVX-512 BF16).
//!
//! A decode step reads each row once ([`row`]): its speed is memory's,
//! as long as the sums do not wait on each other, so each token keeps
//! several running sums. A prompt's products run in tiles ([`multiply`]):
//! sixteen rows (one register, a lane each) times 24 tokens, 24 registers
//! of sums, each column of the rows multiplied by each token's value
//! broadcast, so each weight loaded serves 24 tokens and nothing is summed
//! across lanes. For that the rows are converted to f32 and turned column
//! by column a band at a time ([`pack`]), and the inputs are laid out 24
//! tokens side by side ([`lay_out`]). A row's values must be whole runs of
//! [`STEP`].
//!
//! The inputs are as llama.cpp makes them for these weights: rounded to
//! f16 for F16, to bf16 for BF16; each product is exact in f32 and the
//! sums are f32 (in another order than the portable kernel's).

use super::format::Format;
use std::arch::x86_64::*;

/// Rows a tile: one register's sixteen lanes.
const ROWS: usize = 16;
/// Tokens a tile: a register of sums each, 24 of the 32. (Of the shapes
/// that fit, 16 × 24 ran fastest here: about 57 of the 66 GMAC/s a core's
/// multiply-adds allow, against 47-50 for 32 × 12, 48 × 8 or 64 × 6.)
pub const TOKENS: usize = 24;
/// Values a row's length is a multiple of: one `vdpbf16ps` takes 32.
pub const STEP: usize = 32;

/// Whether this CPU has the AVX-512 the tiles take.
fn wide() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("f16c") && has!("fma")
}

/// Whether this CPU runs [`row`] for `format`: F16 with AVX-512, BF16
/// with AVX-512 BF16.
pub fn rows_run(format: Format) -> bool {
    match format {
        Format::F16 => wide(),
        Format::BF16 => wide() && std::arch::is_x86_feature_detected!("avx512bf16"),
        _ => false,
    }
}

/// Whether this CPU runs [`multiply`] for `format` (F16 or BF16).
pub fn tiles_run(format: Format) -> bool {
    matches!(format, Format::F16 | Format::BF16) && wide()
}

/// A prompt's inputs (`halves`, f16 for F16 or bf16 for BF16, `tokens`
/// rows of `columns`) as [`multiply`] takes them: widened to f32, in
/// groups of [`TOKENS`] tokens, each column's values of the group side by
/// side (`out[(group * columns + k) * TOKENS + j]`); a short last group's
/// missing tokens are zeros.
pub fn lay_out(format: Format, halves: &[u16], tokens: usize, columns: usize, out: &mut Vec<f32>) {
    assert_eq!(halves.len(), tokens * columns);
    let groups = tokens.div_ceil(TOKENS);
    out.clear();
    out.resize(groups * columns * TOKENS, 0.0);
    for (t, values) in halves.chunks_exact(columns).enumerate() {
        let (group, j) = (t / TOKENS, t % TOKENS);
        let places = out[group * columns * TOKENS + j..]
            .iter_mut()
            .step_by(TOKENS);
        match format {
            Format::BF16 => places
                .zip(values)
                .for_each(|(place, &h)| *place = half::bf16::from_bits(h).to_f32()),
            _ => places
                .zip(values)
                .for_each(|(place, &h)| *place = half::f16::from_bits(h).to_f32()),
        }
    }
}

/// Each input's product with `row` (values of `format`, the inputs the
/// row's format as bytes too).
///
/// # Safety
/// [`rows_run`]`(format)`; each input is as long as `row`, whole runs of
/// [`STEP`] values.
pub unsafe fn row<const N: usize>(format: Format, row: &[u8], inputs: [&[u8]; N]) -> [f32; N] {
    let values = row.len() / 2;
    assert!(values.is_multiple_of(STEP) && inputs.iter().all(|x| x.len() >= row.len()));
    let (w, x) = (
        row.as_ptr() as *const u16,
        inputs.map(|x| x.as_ptr() as *const u16),
    );
    // SAFETY: the caller's CPU runs `format`; the lengths are checked.
    unsafe {
        match format {
            Format::BF16 => bf16_row(w, x, values),
            _ => f16_row(w, x, values),
        }
    }
}

/// An F16 row times f16 inputs, four running sums a token (64 values a
/// step; a last 32 to the first two).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
unsafe fn f16_row<const N: usize>(w: *const u16, x: [*const u16; N], values: usize) -> [f32; N] {
    let mut sums = [[_mm512_setzero_ps(); 4]; N];
    let in_twos = values / (2 * STEP) * (2 * STEP);
    for i in (0..in_twos).step_by(2 * STEP) {
        // SAFETY: values `i` to `i + 63` lie within the row and each input.
        unsafe {
            // (Not asked ahead: F16 rows came a fifth slower so, BF16
            // ones a tenth faster.)
            let weights = [
                f16s(w.add(i)),
                f16s(w.add(i + 16)),
                f16s(w.add(i + 32)),
                f16s(w.add(i + 48)),
            ];
            for n in 0..N {
                for c in 0..4 {
                    let input = f16s(x[n].add(i + 16 * c));
                    sums[n][c] = _mm512_fmadd_ps(weights[c], input, sums[n][c]);
                }
            }
        }
    }
    if in_twos < values {
        // SAFETY: the last 32 values lie within the row and each input.
        unsafe {
            let weights = [f16s(w.add(in_twos)), f16s(w.add(in_twos + 16))];
            for n in 0..N {
                for c in 0..2 {
                    let input = f16s(x[n].add(in_twos + 16 * c));
                    sums[n][c] = _mm512_fmadd_ps(weights[c], input, sums[n][c]);
                }
            }
        }
    }
    sums.map(|[a, b, c, d]| {
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)))
    })
}

/// A BF16 row times bf16 inputs, each 32 values one pair product a lane,
/// two running sums a token in turn.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn bf16_row<const N: usize>(w: *const u16, x: [*const u16; N], values: usize) -> [f32; N] {
    let mut sums = [[_mm512_setzero_ps(); 2]; N];
    // Two runs of 32 at a time, one sum each; a last odd run to the first.
    let in_twos = values / (2 * STEP) * (2 * STEP);
    for i in (0..in_twos).step_by(2 * STEP) {
        // SAFETY: values `i` to `i + 63` lie within the row and each input.
        unsafe {
            super::x86::ask_ahead(w.add(i) as *const u8, 128);
            let weights = [pairs(w.add(i)), pairs(w.add(i + STEP))];
            for n in 0..N {
                for c in 0..2 {
                    let input = pairs(x[n].add(i + c * STEP));
                    sums[n][c] = _mm512_dpbf16_ps(sums[n][c], weights[c], input);
                }
            }
        }
    }
    if in_twos < values {
        // SAFETY: the last 32 values lie within the row and each input.
        unsafe {
            let weights = pairs(w.add(in_twos));
            for n in 0..N {
                sums[n][0] = _mm512_dpbf16_ps(sums[n][0], weights, pairs(x[n].add(in_twos)));
            }
        }
    }
    sums.map(|[a, b]| _mm512_reduce_add_ps(_mm512_add_ps(a, b)))
}

/// The products of rows of `format` (`bytes`, each `columns` values)
/// and `tokens` inputs laid out by [`lay_out`], `put(token, first_row,
/// products)` for each run of rows: the rows are converted a few hundred
/// kilobytes at a time, in bands of [`ROWS`] ([`pack`]), and every group
/// of tokens passes over them while they are in the core's second-level
/// cache.
///
/// # Safety
/// [`tiles_run`]`(format)`; `columns` whole runs of [`STEP`].
pub unsafe fn multiply(
    format: Format,
    bytes: &[u8],
    columns: usize,
    tokens: usize,
    laid_out: &[f32],
    mut put: impl FnMut(usize, usize, &[f32]),
) {
    let row_bytes = 2 * columns;
    let rows = bytes.len() / row_bytes;
    let groups = tokens.div_ceil(TOKENS);
    assert!(columns.is_multiple_of(STEP) && rows > 0 && tokens > 0);
    assert!(
        laid_out.len() >= groups * columns * TOKENS,
        "inputs not laid out"
    );
    let rows_at_once = ((512 << 10) / (4 * columns)).max(1).next_multiple_of(ROWS);
    PACKED.with_borrow_mut(|packed| {
        for first_row in (0..rows).step_by(rows_at_once) {
            let chunk_rows = (rows - first_row).min(rows_at_once);
            let bands = chunk_rows.div_ceil(ROWS);
            // A band's first row and how many rows it has.
            let rows_of = |band: usize| {
                (
                    first_row + band * ROWS,
                    (chunk_rows - band * ROWS).min(ROWS),
                )
            };
            packed.resize(bands * ROWS * columns, 0.0);
            for (band, packed) in packed.chunks_exact_mut(ROWS * columns).enumerate() {
                let (first, count) = rows_of(band);
                // SAFETY: the caller's CPU runs `format`; the band's rows
                // and its place are whole.
                unsafe {
                    pack(
                        format,
                        &bytes[first * row_bytes..][..count * row_bytes],
                        columns,
                        packed,
                    )
                };
            }
            let mut products = [[0f32; ROWS]; TOKENS];
            for group in 0..groups {
                let first_token = group * TOKENS;
                let token_count = (tokens - first_token).min(TOKENS);
                let inputs = &laid_out[group * columns * TOKENS..][..columns * TOKENS];
                for (band, packed) in packed.chunks_exact(ROWS * columns).enumerate() {
                    let (first, count) = rows_of(band);
                    // SAFETY: the CPU has AVX-512 (`tiles_run`); the band
                    // and the group hold `columns` columns.
                    unsafe { tile(packed, inputs, columns, &mut products) };
                    for (j, products) in products.iter().enumerate().take(token_count) {
                        put(first_token + j, first, &products[..count]);
                    }
                }
            }
        }
    });
}

thread_local! {
    /// Each thread's rows converted and laid out for [`tile`], kept from
    /// one product to the next (half a megabyte, allocated once).
    static PACKED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `band` (up to [`ROWS`] rows of `format`, `columns` values each) as f32,
/// column by column: `packed[k * ROWS + r]` = row `r`'s value `k`; the
/// missing rows are zeros. Sixteen values of each row at a time, turned
/// in registers ([`transpose`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
unsafe fn pack(format: Format, band: &[u8], columns: usize, packed: &mut [f32]) {
    let rows = band.len() / (2 * columns);
    assert!(rows <= ROWS && packed.len() >= ROWS * columns && columns.is_multiple_of(16));
    let first = band.as_ptr() as *const u16;
    for k in (0..columns).step_by(16) {
        let mut values = [_mm512_setzero_ps(); ROWS];
        for (r, values) in values.iter_mut().enumerate().take(rows) {
            // SAFETY: values `k` to `k + 15` lie within row `r`.
            *values = unsafe { sixteen(format, first.add(r * columns + k)) };
        }
        for (c, column) in transpose(values).into_iter().enumerate() {
            // SAFETY: the sixteen places from `(k + c) * ROWS` lie within
            // `packed` (checked).
            unsafe { _mm512_storeu_ps(packed.as_mut_ptr().add((k + c) * ROWS), column) };
        }
    }
}

/// Sixteen values of `format` (F16 or BF16) from `at`, as f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
unsafe fn sixteen(format: Format, at: *const u16) -> __m512 {
    // SAFETY: the caller's sixteen values.
    unsafe {
        match format {
            Format::BF16 => {
                let halves = _mm256_loadu_si256(at as *const __m256i);
                _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16))
            }
            _ => f16s(at),
        }
    }
}

/// Sixteen rows of sixteen values as sixteen columns: the pairs, the
/// fours, then the eights of 128-bit lanes interleaved.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose(rows: [__m512; 16]) -> [__m512; 16] {
    let zeros = [_mm512_setzero_ps(); 16];
    let (mut pairs, mut fours, mut eights, mut columns) = (zeros, zeros, zeros, zeros);
    for i in 0..16 {
        let (a, b) = (rows[i / 2 * 2], rows[i / 2 * 2 + 1]);
        pairs[i] = match i % 2 {
            0 => _mm512_unpacklo_ps(a, b),
            _ => _mm512_unpackhi_ps(a, b),
        };
    }
    for i in 0..16 {
        let (a, b) = (
            pairs[i / 4 * 4 + i % 4 / 2],
            pairs[i / 4 * 4 + 2 + i % 4 / 2],
        );
        fours[i] = match i % 2 {
            0 => _mm512_shuffle_ps::<0x44>(a, b),
            _ => _mm512_shuffle_ps::<0xEE>(a, b),
        };
    }
    for i in 0..16 {
        let (a, b) = (fours[i / 8 * 8 + i % 4], fours[i / 8 * 8 + 4 + i % 4]);
        eights[i] = match i % 8 < 4 {
            true => _mm512_shuffle_f32x4::<0x88>(a, b),
            false => _mm512_shuffle_f32x4::<0xDD>(a, b),
        };
    }
    for i in 0..16 {
        let (a, b) = (eights[i % 8], eights[8 + i % 8]);
        columns[i] = match i < 8 {
            true => _mm512_shuffle_f32x4::<0x88>(a, b),
            false => _mm512_shuffle_f32x4::<0xDD>(a, b),
        };
    }
    columns
}

/// A tile: a packed band's [`ROWS`] rows times a group of [`TOKENS`]
/// laid-out inputs, each column of the rows (a register) multiplied by
/// each token's value broadcast: each sum is one lane, and nothing is
/// summed across lanes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn tile(band: &[f32], inputs: &[f32], columns: usize, out: &mut [[f32; ROWS]; TOKENS]) {
    assert!(band.len() >= ROWS * columns && inputs.len() >= TOKENS * columns);
    let mut sums = [_mm512_setzero_ps(); TOKENS];
    let (w, x) = (band.as_ptr(), inputs.as_ptr());
    for k in 0..columns {
        // SAFETY: column `k` of the band and of the inputs lie within them
        // (checked).
        unsafe {
            let weights = _mm512_loadu_ps(w.add(k * ROWS));
            for (j, sum) in sums.iter_mut().enumerate() {
                *sum = _mm512_fmadd_ps(weights, _mm512_set1_ps(*x.add(k * TOKENS + j)), *sum);
            }
        }
    }
    for (out, sum) in out.iter_mut().zip(sums) {
        // SAFETY: `out` holds sixteen floats.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), sum) };
    }
}

/// Sixteen f16 values from `at`, as f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
unsafe fn f16s(at: *const u16) -> __m512 {
    // SAFETY: the caller's sixteen values.
    unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(at as *const __m256i)) }
}

/// Thirty-two bf16 values from `at`, as pairs for `vdpbf16ps`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn pairs(at: *const u16) -> __m512bh {
    // SAFETY: the caller's 32 values; a bf16 vector is 32 u16 bit patterns.
    unsafe { std::mem::transmute(_mm512_loadu_si512(at as *const __m512i)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_bytes(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect()
    }

    fn bf16_bytes(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
            .collect()
    }

    /// Values about 1 in size, different for each seed.
    fn values(count: usize, seed: u32) -> Vec<f32> {
        (0..count as u32)
            .map(|i| {
                ((i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 2001) as f32 / 1000.0
                    - 1.0
            })
            .collect()
    }

    /// The value of each stored float, as the row's format rounds it.
    fn stored(format: Format, values: &[f32]) -> Vec<f64> {
        values
            .iter()
            .map(|&v| match format {
                Format::F16 => f64::from(half::f16::from_f32(v).to_f32()),
                _ => f64::from(half::bf16::from_f32(v).to_f32()),
            })
            .collect()
    }

    fn bytes(format: Format, values: &[f32]) -> Vec<u8> {
        match format {
            Format::F16 => f16_bytes(values),
            _ => bf16_bytes(values),
        }
    }

    /// Close, for sums of a few hundred products about 1 in size: f32
    /// sums in another order than f64's.
    fn close(got: f32, expected: f64) {
        assert!(
            (f64::from(got) - expected).abs() <= 1e-4 * (1.0 + expected.abs()),
            "{got} against {expected}"
        );
    }

    /// 400 rows (two runs of rows converted at once, the last band of
    /// each short) times 29 tokens (the last group of tokens short), and
    /// one row times one and four tokens, against the products of the
    /// stored values in f64.
    #[test]
    fn rows_and_tiles_give_the_products_of_the_stored_values() {
        let (rows, columns, tokens) = (400, 352, 29);
        for format in [Format::F16, Format::BF16] {
            if !tiles_run(format) {
                eprintln!("{format:?} does not run in tiles here");
                continue;
            }
            let weights = values(rows * columns, 3);
            let inputs: Vec<Vec<f32>> = (0..tokens)
                .map(|t| values(columns, 10 + t as u32))
                .collect();
            let stored_weights = stored(format, &weights);
            let stored_inputs: Vec<Vec<f64>> = inputs.iter().map(|x| stored(format, x)).collect();
            let expected = |r: usize, t: usize| -> f64 {
                let w = &stored_weights[r * columns..][..columns];
                w.iter().zip(&stored_inputs[t]).map(|(w, x)| w * x).sum()
            };
            let weight_bytes = bytes(format, &weights);
            // What the node hands a tile: the inputs in the format, laid
            // out.
            let halves: Vec<u16> = bytes(format, &inputs.concat())
                .chunks_exact(2)
                .map(|h| u16::from_le_bytes([h[0], h[1]]))
                .collect();
            let mut laid_out = Vec::new();
            lay_out(format, &halves, tokens, columns, &mut laid_out);
            let mut seen = vec![0usize; rows * tokens];
            // SAFETY: `tiles_run(format)`; 352 values are eleven runs of
            // 32.
            unsafe {
                multiply(
                    format,
                    &weight_bytes,
                    columns,
                    tokens,
                    &laid_out,
                    |t, first, p| {
                        for (r, &p) in (first..).zip(p) {
                            seen[t * rows + r] += 1;
                            close(p, expected(r, t));
                        }
                    },
                )
            };
            assert!(
                seen.iter().all(|&n| n == 1),
                "each product put once: {seen:?}"
            );
            if !rows_run(format) {
                eprintln!("{format:?} rows do not run here");
                continue;
            }
            let row_inputs: Vec<Vec<u8>> = inputs.iter().map(|x| bytes(format, x)).collect();
            let fifth_row = &weight_bytes[5 * 2 * columns..][..2 * columns];
            // SAFETY: `rows_run(format)`; eleven runs of 32.
            let one = unsafe { row(format, fifth_row, [&row_inputs[0][..]]) };
            close(one[0], expected(5, 0));
            let four = unsafe {
                row(
                    format,
                    fifth_row,
                    std::array::from_fn::<_, 4, _>(|t| &row_inputs[t][..]),
                )
            };
            for (t, p) in four.into_iter().enumerate() {
                close(p, expected(5, t));
            }
        }
    }
}
