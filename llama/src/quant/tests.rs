use super::activation::{
    Q8Block, Q8KBlock, SUPER_BLOCK, quantize, quantize_k, quantize_k_portable,
};
use super::format::Activation;
use super::kernels::{Order, With};
use super::*;

/// Deterministic values in [-1, 1).
pub(crate) fn values(count: usize, seed: u32) -> Vec<f32> {
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

/// Where each format keeps its f16 scales, in a block.
fn scale_offsets(format: Format) -> &'static [usize] {
    match format {
        Format::Q4_0 | Format::Q5_0 | Format::Q8_0 => &[0],
        Format::Q4_1 | Format::Q5_1 | Format::Q4K | Format::Q5K => &[0, 2],
        Format::Q6K => &[208],
        Format::F16 | Format::BF16 | Format::F32 => &[],
    }
}

/// A matrix of random blocks (every bit pattern of the quants, scales of
/// a model's size).
fn random_matrix(format: Format, rows: usize, columns: usize, seed: u32) -> Matrix {
    let noise = values(rows * format.row_bytes(columns), seed);
    let mut bytes: Vec<u8> = match format {
        Format::F16 => noise
            .chunks_exact(2)
            .flat_map(|v| half::f16::from_f32(v[0]).to_le_bytes())
            .collect(),
        Format::BF16 => noise
            .chunks_exact(2)
            .flat_map(|v| half::bf16::from_f32(v[0]).to_le_bytes())
            .collect(),
        Format::F32 => noise
            .chunks_exact(4)
            .flat_map(|v| v[0].to_le_bytes())
            .collect(),
        _ => noise.iter().map(|v| (v.to_bits() >> 9) as u8).collect(),
    };
    for (n, block) in bytes.chunks_exact_mut(format.block_bytes()).enumerate() {
        for &at in scale_offsets(format) {
            let scale = half::f16::from_f32(0.002 + 0.05 * noise[n % noise.len()].abs());
            block[at..at + 2].copy_from_slice(&scale.to_le_bytes());
        }
    }
    Matrix::new(format, rows, columns, Bytes::owned(bytes)).unwrap()
}

/// What the products should be: dequantized weights times the inputs as
/// quantized for them, in f64.
fn reference(matrix: &Matrix, inputs: &Inputs) -> Vec<f32> {
    let (rows, columns, tokens) = (matrix.rows(), matrix.columns(), inputs.tokens());
    let mut weights = vec![0f32; columns];
    let mut out = vec![0f32; tokens * rows];
    for r in 0..rows {
        let (format, _, _) = matrix.rows_from(r, 1);
        matrix.dequantize_row(r, &mut weights);
        for t in 0..tokens {
            let input = dequantized_input(format, inputs, t);
            let sum: f64 = weights
                .iter()
                .zip(&input)
                .map(|(&w, &x)| f64::from(w) * f64::from(x))
                .sum();
            out[t * rows + r] = (sum + minimum_correction(matrix, r, inputs, t)) as f32;
        }
    }
    out
}

/// What differs when a block's minimum multiplies the inputs' sum as its
/// Q8 block keeps it (`scaled_sum`, rounded to f16, as llama.cpp keeps it)
/// rather than the sum of the inputs as dequantized.
fn minimum_correction(matrix: &Matrix, row: usize, inputs: &Inputs, token: usize) -> f64 {
    let (format, bytes, _) = matrix.rows_from(row, 1);
    if !matches!(format, Format::Q4_1 | Format::Q5_1) {
        return 0.0;
    }
    let blocks = bytes.chunks_exact(format.block_bytes());
    blocks
        .zip(inputs.forms().q8(token))
        .map(|(block, q8)| {
            let minimum = half::f16::from_le_bytes([block[2], block[3]]).to_f64();
            let sum: i32 = q8.quants.iter().map(|&q| i32::from(q)).sum();
            minimum * (f64::from(q8.scaled_sum) - f64::from(q8.scale) * f64::from(sum))
        })
        .sum()
}

fn dequantized_input(format: Format, inputs: &Inputs, token: usize) -> Vec<f32> {
    match format.activation() {
        Activation::Q8 => inputs
            .forms()
            .q8(token)
            .iter()
            .flat_map(|b| b.quants.map(|q| f32::from(q) * b.scale))
            .collect(),
        Activation::Q8K => inputs
            .forms()
            .q8k(token)
            .iter()
            .flat_map(|b| b.quants.map(|q| f32::from(q) * b.scale))
            .collect(),
        Activation::F16 => inputs
            .forms()
            .f16(token)
            .iter()
            .map(|&h| half::f16::from_bits(h).to_f32())
            .collect(),
        Activation::BF16 => inputs
            .forms()
            .bf16(token)
            .iter()
            .map(|&h| half::bf16::from_bits(h).to_f32())
            .collect(),
        Activation::F32 => inputs.forms().f32(token).to_vec(),
    }
}

/// Close, for sums of a few hundred products of values about 1 in size:
/// float sums in another order differ in the last bits of the largest
/// terms.
fn close(got: f32, want: f32) -> bool {
    (got - want).abs() <= 2e-4 * want.abs().max(1.0)
}

/// Every format at 512 columns (two super-blocks), 7 tokens: one group of
/// four and three alone.
#[test]
fn every_kernel_gives_the_products_of_the_dequantized_weights() {
    let (rows, columns, tokens) = (24, 512, 7);
    for format in Format::ALL {
        let matrix = random_matrix(format, rows, columns, format as u32 + 1);
        let mut inputs = Inputs::default();
        inputs.prepare(&values(tokens * columns, 11), tokens, matrix.needs());
        let expected = reference(&matrix, &inputs);
        let (_, bytes, _) = matrix.rows_from(0, rows);
        for kernels in Kernels::available() {
            // Row by row, the four first tokens together, then each alone.
            let mut out = vec![0f32; rows * tokens];
            kernels.each_row(
                format,
                bytes,
                inputs.forms(),
                [0, 1, 2, 3],
                With::default(),
                |r, p| out[r * tokens..][..4].copy_from_slice(&p),
            );
            // One token's products in either order (llama.cpp's repacked
            // one for Q4_K): the same products, rounded apart.
            for order in [Order::Lanes, Order::Blockwise] {
                for t in 4..tokens {
                    let with = With {
                        order,
                        ..With::default()
                    };
                    kernels.each_row(format, bytes, inputs.forms(), [t], with, |r, [p]| {
                        out[r * tokens + t] = p
                    });
                }
                for r in 0..rows {
                    for t in 0..tokens {
                        let (got, want) = (out[r * tokens + t], expected[t * rows + r]);
                        assert!(
                            close(got, want),
                            "{format:?} {kernels:?} {order:?}, row {r} token {t}: {got} != {want}"
                        );
                    }
                }
            }
        }
        // One token, a few (four at a time, then alone), enough for tiles.
        for tokens in [1, tokens, 21] {
            let mut inputs = Inputs::default();
            inputs.prepare(&values(tokens * columns, 5), tokens, matrix.needs());
            let expected = reference(&matrix, &inputs);
            let mut out = vec![0f32; tokens * rows];
            matrix.multiply(&inputs, &mut out);
            for (got, want) in out.iter().zip(&expected) {
                assert!(close(*got, *want), "{format:?} multiply: {got} != {want}");
            }
        }
    }
}

/// One token's products of rows read side by side are those of each row
/// read alone (here by the kernel for two tokens, one token twice), to the
/// bit: only the order of the work changes, not of the additions.
#[test]
fn rows_side_by_side_give_each_rows_own_products() {
    let (rows, columns) = (23, 256);
    for format in Format::ALL
        .into_iter()
        .filter(|f| f.activation() == Activation::Q8)
    {
        let matrix = random_matrix(format, rows, columns, format as u32 + 7);
        let mut inputs = Inputs::default();
        inputs.prepare(&values(columns, 13), 1, matrix.needs());
        let (_, bytes, _) = matrix.rows_from(0, rows);
        for kernels in Kernels::available() {
            let (mut side_by_side, mut alone) = (vec![f32::NAN; rows], vec![f32::NAN; rows]);
            kernels.each_row(
                format,
                bytes,
                inputs.forms(),
                [0],
                With::default(),
                |r, [p]| side_by_side[r] = p,
            );
            kernels.each_row(
                format,
                bytes,
                inputs.forms(),
                [0, 0],
                With::default(),
                |r, [p, _]| alone[r] = p,
            );
            for r in 0..rows {
                assert_eq!(
                    side_by_side[r].to_bits(),
                    alone[r].to_bits(),
                    "{format:?} {kernels:?} row {r}: {} != {}",
                    side_by_side[r],
                    alone[r]
                );
            }
        }
    }
}

/// The kernel for four Q4_1 inputs at once, against the one for any.
#[test]
fn the_four_input_q4_1_kernel_agrees() {
    let (rows, columns) = (16, 256);
    let matrix = random_matrix(Format::Q4_1, rows, columns, 3);
    let mut inputs = Inputs::default();
    inputs.prepare(&values(4 * columns, 9), 4, matrix.needs());
    let mut four = Vec::new();
    Four::of(inputs.forms().all_q8(), columns / BLOCK, &mut four);
    let (_, bytes, _) = matrix.rows_from(0, rows);
    for kernels in Kernels::available() {
        let (mut together, mut apart) = (vec![[0f32; 4]; rows], vec![[0f32; 4]; rows]);
        let tokens = [0, 1, 2, 3];
        kernels.each_row(
            Format::Q4_1,
            bytes,
            inputs.forms(),
            tokens,
            With {
                four: Some(&four),
                ..With::default()
            },
            |r, p| together[r] = p,
        );
        kernels.each_row(
            Format::Q4_1,
            bytes,
            inputs.forms(),
            tokens,
            With::default(),
            |r, p| apart[r] = p,
        );
        for (r, (together, apart)) in together.iter().zip(&apart).enumerate() {
            for (a, b) in together.iter().zip(apart) {
                assert!(close(*a, *b), "{kernels:?} row {r}: {a} != {b}");
            }
        }
    }
}

/// The engine reads each format's blocks as llama.cpp does: the values of
/// random blocks, dequantized by llama.cpp's gguf package
/// (tests/fixtures/blocks/make_blocks.py), bit for bit.
#[test]
fn blocks_read_as_llama_cpp_reads_them() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/blocks");
    for (name, format) in [
        ("q4_0", Format::Q4_0),
        ("q4_1", Format::Q4_1),
        ("q5_0", Format::Q5_0),
        ("q5_1", Format::Q5_1),
        ("q8_0", Format::Q8_0),
        ("q4_k", Format::Q4K),
        ("q5_k", Format::Q5K),
        ("q6_k", Format::Q6K),
        ("f16", Format::F16),
        ("bf16", Format::BF16),
    ] {
        let blocks = std::fs::read(fixtures.join(format!("{name}.blocks"))).unwrap();
        let expected: Vec<f32> = std::fs::read(fixtures.join(format!("{name}.values")))
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let mut got = vec![0f32; expected.len()];
        format.dequantize(&blocks, &mut got);
        for (i, (got, want)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{name} value {i}: {got} != {want}"
            );
        }
        // The matrix reads its rows from the same blocks.
        let matrix = Matrix::new(format, 4, 256, Bytes::owned(blocks)).unwrap();
        let mut row = vec![0f32; 256];
        matrix.dequantize_row(3, &mut row);
        assert_eq!(row, expected[768..]);
    }
}

/// Q8_K as llama.cpp's `quantize_row_q8_K_ref`: the largest magnitude
/// becomes -127, each 16's sum is kept.
#[test]
fn super_blocks_of_inputs_keep_their_values() {
    let mut input = values(512, 4);
    input[300] = -3.0;
    let mut blocks = vec![Q8KBlock::default(); 2];
    quantize_k(&input, &mut blocks);
    assert_eq!(blocks[1].quants[44], -127);
    assert!((blocks[1].scale - 3.0 / 127.0).abs() < 1e-7);
    for (block, values) in blocks.iter().zip(input.chunks_exact(SUPER_BLOCK)) {
        for (s, sum) in block.sums.iter().enumerate() {
            let want: i16 = block.quants[16 * s..][..16]
                .iter()
                .map(|&q| i16::from(q))
                .sum();
            assert_eq!(*sum, want);
        }
        for (q, v) in block.quants.iter().zip(values) {
            assert!((f32::from(*q) * block.scale - v).abs() <= block.scale.abs() / 2.0 + 1e-6);
        }
    }
    let mut zero = vec![Q8KBlock::default(); 1];
    quantize_k(&[0.0; 256], &mut zero);
    assert_eq!((zero[0].scale, zero[0].quants[0]), (0.0, 0));
}

/// The quantizing the CPU runs gives the value-at-a-time one's bytes: the
/// first of two equal magnitudes is the largest, halves round to even.
#[test]
fn super_blocks_quantize_alike_with_simd_and_without() {
    let mut input = values(4 * SUPER_BLOCK, 9);
    // Block 1: its largest magnitude twice, the positive one first.
    input[SUPER_BLOCK + 7] = 4.0;
    input[SUPER_BLOCK + 200] = -4.0;
    // Block 2: values on the halves between codes (±127 × k.5 / 4).
    for (i, v) in input[2 * SUPER_BLOCK..3 * SUPER_BLOCK]
        .iter_mut()
        .enumerate()
    {
        *v = (i as f32 - 128.0 + 0.5) / 127.0 * 4.0;
    }
    input[2 * SUPER_BLOCK] = -4.0;
    // Block 3: zeros.
    input[3 * SUPER_BLOCK..].fill(0.0);
    let mut simd = vec![Q8KBlock::default(); 4];
    let mut portable = vec![Q8KBlock::default(); 4];
    quantize_k(&input, &mut simd);
    quantize_k_portable(&input, &mut portable);
    for (b, (simd, portable)) in simd.iter().zip(&portable).enumerate() {
        assert_eq!(simd.quants, portable.quants, "block {b}'s codes");
        assert_eq!(simd.sums, portable.sums, "block {b}'s sums");
        assert_eq!(
            simd.scale.to_bits(),
            portable.scale.to_bits(),
            "block {b}'s scale"
        );
    }
    assert_eq!(simd[1].quants[7], -127, "the first of the largest");
}

/// Eight-bit inputs as llama.cpp's x86 code makes them: half rounds to
/// even, the scale and the sum's scale in f16, the latter from the f32
/// scale.
#[test]
fn quantized_activations_round_as_llama_cpps() {
    let mut input = vec![0f32; 64];
    input[..6].copy_from_slice(&[127.0, 2.5, 3.5, -2.5, -0.5, 0.49]);
    input[32..].copy_from_slice(&values(32, 3));
    let mut blocks = vec![Q8Block::default(); 2];
    quantize(&input, &mut blocks);
    assert_eq!(blocks[0].quants[..6], [127, 2, 4, -2, 0, 0]);
    for (block, values) in blocks.iter().zip(input.chunks_exact(BLOCK)) {
        let max = values.iter().fold(0f32, |m, v| m.max(v.abs()));
        let sum: i32 = block.quants.iter().map(|&q| i32::from(q)).sum();
        let f16 = |v: f32| half::f16::from_f32(v).to_f32();
        assert_eq!(block.scale, f16(max / 127.0));
        assert_eq!(block.scaled_sum, f16(max / 127.0 * sum as f32));
        for (q, v) in block.quants.iter().zip(values) {
            assert!((f32::from(*q) - v * 127.0 / max).abs() <= 0.5 + 1e-5);
        }
    }
    let mut zero = vec![Q8Block::default(); 1];
    quantize(&[0.0; 32], &mut zero);
    assert_eq!(
        (zero[0].scale, zero[0].scaled_sum, zero[0].quants),
        (0.0, 0.0, [0; 32])
    );
}

/// q, k and v in three formats, stacked: one product, each part with its
/// own kernel, the same as three.
#[test]
fn stacked_parts_keep_their_formats() {
    let columns = 256;
    let parts = [(Format::Q4K, 8), (Format::Q6K, 4), (Format::Q8_0, 4)];
    let matrices = || {
        parts
            .iter()
            .enumerate()
            .map(|(n, &(f, rows))| random_matrix(f, rows, columns, n as u32))
    };
    let stacked = Matrix::stacked(matrices().collect()).unwrap();
    assert_eq!((stacked.rows(), stacked.columns()), (16, columns));
    let mut inputs = Inputs::default();
    inputs.prepare(&values(5 * columns, 2), 5, stacked.needs());
    let mut together = vec![0f32; 5 * 16];
    stacked.multiply(&inputs, &mut together);
    let mut first = 0;
    for matrix in matrices() {
        let rows = matrix.rows();
        let mut apart = vec![0f32; 5 * rows];
        matrix.multiply(&inputs, &mut apart);
        for t in 0..5 {
            assert_eq!(
                apart[t * rows..][..rows],
                together[t * 16 + first..][..rows]
            );
        }
        first += rows;
    }
}

#[test]
fn matrices_of_the_wrong_size_are_refused() {
    let owned = |n| Bytes::owned(vec![0; n]);
    assert!(Matrix::new(Format::Q8_0, 2, 30, owned(68)).is_err());
    assert!(Matrix::new(Format::Q8_0, 2, 32, owned(67)).is_err());
    let err = Matrix::new(Format::Q4K, 1, 640, owned(360)).err().unwrap();
    assert!(err.contains("256-value blocks"), "{err}");
    assert!(Matrix::new(Format::Q4K, 1, 512, owned(288)).is_ok());
    assert!(
        Matrix::stacked(vec![
            random_matrix(Format::Q4_1, 3, 64, 1),
            random_matrix(Format::Q8_0, 3, 96, 2)
        ])
        .is_err()
    );
    let source: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(vec![0u8; 100]);
    assert!(Bytes::within(&source, 90, 10).is_some());
    assert!(Bytes::within(&source, 91, 10).is_none());
    assert!(Bytes::within(&source, usize::MAX, 2).is_none());
}

/// Rows in tiles of eight rows and sixteen tokens, with SIMD and
/// without, against the products of the dequantized weights: 21 rows (the
/// last band short) and 19 tokens (the second band mostly padding).
#[test]
fn tiles_give_the_products_of_the_dequantized_weights() {
    let (rows, columns, tokens) = (21, 512, 19);
    for format in Format::ALL.into_iter().filter(|&f| tiles::tiles(f)) {
        let matrix = random_matrix(format, rows, columns, format as u32 + 7);
        let mut inputs = Inputs::default();
        inputs.prepare(&values(tokens * columns, 13), tokens, matrix.needs());
        let expected = reference(&matrix, &inputs);
        let mut interleaved = tiles::Interleaved::default();
        match format.block_values() {
            256 => interleaved.fill_k(tokens, columns / 256, |t| inputs.forms().q8k(t)),
            _ => interleaved.fill_small(tokens, columns / 32, |t| inputs.forms().q8(t)),
        }
        let mut band = tiles::Band::default();
        for first in (0..rows).step_by(tiles::ROWS) {
            let count = (rows - first).min(tiles::ROWS);
            let (_, bytes, _) = matrix.rows_from(first, count);
            band.fill(format, bytes, columns / format.block_values());
            for token_band in 0..tokens.div_ceil(tiles::TOKENS) {
                let mut ways = vec![(
                    "portable",
                    tiles::portable_tile(&band, &interleaved, token_band),
                )];
                #[cfg(target_arch = "x86_64")]
                if Kernels::detect().tiles() {
                    // SAFETY: the CPU has AVX-512 with VNNI.
                    ways.push(("AVX-512 VNNI", unsafe {
                        tiles::tile(&band, &interleaved, token_band)
                    }));
                }
                let present = (tokens - token_band * tiles::TOKENS).min(tiles::TOKENS);
                for (way, tile) in ways {
                    for (r, products) in tile.iter().enumerate() {
                        for (j, &got) in products.iter().enumerate() {
                            let t = token_band * tiles::TOKENS + j;
                            match r < count && j < present {
                                true => {
                                    let want = expected[t * rows + first + r];
                                    assert!(
                                        close(got, want),
                                        "{format:?} {way}, row {} token {t}: {got} != {want}",
                                        first + r
                                    );
                                }
                                false => {
                                    assert_eq!(got, 0.0, "{format:?} {way}: padding's product")
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
