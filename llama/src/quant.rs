//! Weight matrices in the formats GGUF files hold them in, and the
//! products the model runs on them.
//!
//! Weights stay in the blocks the file holds them in (llama.cpp's layout,
//! [`Format`]), read where the file is mapped. A product quantizes its
//! inputs as llama.cpp does for the weights' format ([`Inputs`]): eight
//! bits per value in blocks of 32 for the 32-value formats, in super-blocks
//! of 256 for the K formats, floats for float weights; so the inner loops
//! are integer multiply-adds, and the sums round as llama.cpp's.
//!
//! A decode step reads every weight once, so its speed is the speed of
//! memory: keeping four-bit weights four-bit is what makes it fast. The
//! SIMD kernels are chosen at run time ([`kernels::Kernels`]); the portable
//! ones give the same sums up to the order of float additions.

mod activation;
#[cfg(target_arch = "x86_64")]
mod floats;
mod format;
mod inputs;
mod kernels;
mod portable;
#[cfg(test)]
pub(crate) mod tests;
mod tiles;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use format::Format;
pub use inputs::Inputs;

use activation::{BLOCK, Four, Needs};
use kernels::{Kernels, Order, With};
use std::sync::Arc;

/// Bytes a matrix reads its blocks from: part of a mapped file, or bytes
/// of its own.
#[derive(Clone)]
pub struct Bytes {
    source: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
}

impl Bytes {
    pub fn owned(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Bytes {
            source: Arc::new(bytes),
            start: 0,
            len,
        }
    }

    /// `len` bytes of `source` from `start`, if it holds them.
    pub fn within(
        source: &Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    ) -> Option<Self> {
        let end = start.checked_add(len)?;
        ((**source).as_ref().len() >= end).then(|| Bytes {
            source: source.clone(),
            start,
            len,
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        &(*self.source).as_ref()[self.start..][..self.len]
    }
}

/// Rows of one format, one after another.
struct Part {
    format: Format,
    rows: usize,
    bytes: Bytes,
    /// How one token's product adds each row's blocks: as llama.cpp's
    /// x86 build does for this part.
    order: Order,
}

/// A matrix of `rows` × `columns` weights, row after row: one or more
/// parts (q, k and v, say) each in the format the file gave it, multiplied
/// as one.
pub struct Matrix {
    parts: Vec<Part>,
    /// The first row of each part, and the number of rows.
    starts: Vec<usize>,
    columns: usize,
    needs: Needs,
}

impl Matrix {
    pub fn new(format: Format, rows: usize, columns: usize, bytes: Bytes) -> Result<Self, String> {
        let unit = format.block_values().max(BLOCK);
        if !columns.is_multiple_of(unit) {
            return Err(format!(
                "a row of {columns} values is not a whole number of {unit}-value blocks, as {format:?} needs"
            ));
        }
        let expected = rows * format.row_bytes(columns);
        if bytes.len != expected {
            return Err(format!(
                "a {rows}×{columns} {format:?} matrix takes {expected} bytes, not {}",
                bytes.len
            ));
        }
        Ok(Matrix {
            parts: vec![Part {
                format,
                rows,
                bytes,
                order: match format == Format::Q4K && rows.is_multiple_of(8) {
                    true => Order::Blockwise,
                    false => Order::Lanes,
                },
            }],
            starts: vec![0, rows],
            columns,
            needs: Needs::default().with(format.activation()),
        })
    }

    /// Rows of `matrices` one after another, as one matrix: one product
    /// instead of several, each part kept in its own format.
    pub fn stacked(matrices: Vec<Matrix>) -> Result<Self, String> {
        let columns = matrices.first().ok_or("no matrix to stack")?.columns;
        if matrices.iter().any(|m| m.columns != columns) {
            return Err("stacked matrices differ in width".into());
        }
        let mut stacked = Matrix {
            parts: Vec::new(),
            starts: vec![0],
            columns,
            needs: Needs::default(),
        };
        for part in matrices.into_iter().flat_map(|m| m.parts) {
            stacked.needs = stacked.needs.with(part.format.activation());
            stacked.starts.push(stacked.rows() + part.rows);
            stacked.parts.push(part);
        }
        Ok(stacked)
    }

    pub fn rows(&self) -> usize {
        *self.starts.last().expect("a start per part and the end")
    }

    pub fn columns(&self) -> usize {
        self.columns
    }

    /// The forms of the inputs its products take.
    pub fn needs(&self) -> Needs {
        self.needs
    }

    /// The formats of its parts.
    pub fn formats(&self) -> impl Iterator<Item = Format> + '_ {
        self.parts.iter().map(|part| part.format)
    }

    /// From row `first`, at most `count` rows of the same part: their
    /// format, their bytes and how many they are.
    fn rows_from(&self, first: usize, count: usize) -> (Format, &[u8], usize) {
        let (part, bytes, count) = self.part_rows(first, count);
        (part.format, bytes, count)
    }

    /// [`Matrix::rows_from`], with the part they are of rather than its
    /// format.
    fn part_rows(&self, first: usize, count: usize) -> (&Part, &[u8], usize) {
        let index = self.starts.partition_point(|&start| start <= first) - 1;
        let part = &self.parts[index];
        let count = count.min(self.starts[index + 1] - first);
        let row_bytes = part.format.row_bytes(self.columns);
        let offset = (first - self.starts[index]) * row_bytes;
        (
            part,
            &part.bytes.as_slice()[offset..][..count * row_bytes],
            count,
        )
    }

    /// The matrix as a table rows are looked up in (the embeddings):
    /// llama.cpp does not repack it, so its products add in lanes.
    pub fn looked_up(mut self) -> Self {
        self.parts
            .iter_mut()
            .for_each(|part| part.order = Order::Lanes);
        self
    }

    /// Writes row `row`'s values into `out`.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        let (format, bytes, _) = self.rows_from(row, 1);
        format.dequantize(bytes, out);
    }

    /// `out[t][r]` = row `r` · input `t`, for each token of `inputs`
    /// (prepared with [`Matrix::needs`], `columns` wide). Rows are shared
    /// out among the model's [team](crate::team), each piece a run of
    /// rows.
    pub fn multiply(&self, inputs: &Inputs, out: &mut [f32]) {
        let tokens = inputs.tokens();
        let rows = self.rows();
        assert_eq!(inputs.columns(), self.columns, "inputs of the wrong width");
        assert_eq!(out.len(), tokens * rows, "output of the wrong size");
        let kernels = Kernels::detect();
        // Q4_1's kernel for four tokens scales their four products of a
        // block at once: their scales side by side, for each four tokens
        // (not needed where the product runs in tiles).
        let blocks = self.columns / BLOCK;
        let four_at_once = inputs.interleaved().is_none() && tokens >= 4;
        let side_by_side: Vec<Vec<Four>> =
            match four_at_once && self.formats().any(|f| f == Format::Q4_1) {
                true => (0..tokens / 4)
                    .map(|group| {
                        let mut four = Vec::new();
                        Four::of(
                            &inputs.forms().all_q8()[group * 4 * blocks..],
                            blocks,
                            &mut four,
                        );
                        four
                    })
                    .collect(),
                false => Vec::new(),
            };
        // Enough pieces for the threads to even out, few enough that
        // handing them out costs little.
        let team = crate::team::team();
        let pieces = team.size() * 4;
        // Whole bands of tile rows (see below).
        let rows_per_piece = rows.div_ceil(pieces).max(16).next_multiple_of(tiles::ROWS);
        if tokens == 1 {
            team.for_each_chunk(out, rows_per_piece, |piece, out| {
                let mut row = piece * rows_per_piece;
                let mut out = out;
                // Part by part, all of a part's rows in one call.
                while !out.is_empty() {
                    let (part, bytes, count) = self.part_rows(row, out.len());
                    let (now, rest) = out.split_at_mut(count);
                    let with = With {
                        order: part.order,
                        ..With::default()
                    };
                    kernels.each_row(part.format, bytes, inputs.forms(), [0], with, |r, [p]| {
                        now[r] = p
                    });
                    (row, out) = (row + count, rest);
                }
            });
            return;
        }
        let products = crate::team::Disjoint::of(out);
        team.run(rows.div_ceil(rows_per_piece), &|piece| {
            let (mut row, end) = (
                piece * rows_per_piece,
                rows.min((piece + 1) * rows_per_piece),
            );
            while row < end {
                let (format, bytes, count) = self.rows_from(row, end - row);
                #[cfg(target_arch = "x86_64")]
                if inputs.float_tiles(format) {
                    // SAFETY: the inputs were widened for tiles of this
                    // format: the CPU runs them, the rows are whole runs
                    // of their step.
                    unsafe {
                        floats::multiply(
                            format,
                            bytes,
                            self.columns,
                            tokens,
                            inputs.laid_out(),
                            |t, r, p| {
                                // SAFETY: this piece's rows are its own.
                                products
                                    .slice(t * rows + row + r, p.len())
                                    .copy_from_slice(p)
                            },
                        )
                    };
                    row += count;
                    continue;
                }
                if let (Some(interleaved), true) = (inputs.interleaved(), tiles::tiles(format)) {
                    self.in_tiles(format, bytes, row, interleaved, tokens, &products);
                    row += count;
                    continue;
                }
                // Four tokens at a time against every row of the run: the
                // four stay in the nearest cache while the rows stream
                // past (a piece's rows fit in the core's second-level
                // cache).
                for first in (0..tokens).step_by(4) {
                    if tokens - first >= 4 {
                        let four = side_by_side.get(first / 4).map(Vec::as_slice);
                        let group = [first, first + 1, first + 2, first + 3];
                        let with = With {
                            four,
                            ..With::default()
                        };
                        kernels.each_row(format, bytes, inputs.forms(), group, with, |r, p| {
                            for (n, p) in p.into_iter().enumerate() {
                                // SAFETY: this piece's rows are its own.
                                unsafe { products.slice((first + n) * rows + row + r, 1)[0] = p };
                            }
                        });
                    } else {
                        for token in first..tokens {
                            kernels.each_row(
                                format,
                                bytes,
                                inputs.forms(),
                                [token],
                                With::default(),
                                |r, [p]| {
                                    // SAFETY: as above.
                                    unsafe { products.slice(token * rows + row + r, 1)[0] = p };
                                },
                            );
                        }
                    }
                }
                row += count;
            }
        });
    }

    /// The products of `bytes` (rows of `format` from row `first_row`)
    /// and every token, in tiles: eight rows at a time unpacked, times
    /// each sixteen tokens, so the rows stay in the nearest cache.
    fn in_tiles(
        &self,
        format: Format,
        bytes: &[u8],
        first_row: usize,
        interleaved: &tiles::Interleaved,
        tokens: usize,
        products: &crate::team::Disjoint,
    ) {
        let (rows, row_bytes) = (self.rows(), format.row_bytes(self.columns));
        let mut band = tiles::Band::default();
        for (band_index, band_bytes) in bytes.chunks(tiles::ROWS * row_bytes).enumerate() {
            let (first, band_rows) = (
                first_row + band_index * tiles::ROWS,
                band_bytes.len() / row_bytes,
            );
            band.fill(format, band_bytes, self.columns / format.block_values());
            for token_band in 0..tokens.div_ceil(tiles::TOKENS) {
                // SAFETY: `interleaved` is made only where the CPU has
                // AVX-512 with VNNI.
                let tile = unsafe { tiles::tile(&band, interleaved, token_band) };
                let first_token = token_band * tiles::TOKENS;
                // Token by token, the band's rows side by side.
                for j in 0..(tokens - first_token).min(tiles::TOKENS) {
                    // SAFETY: the caller's piece owns these rows.
                    let out =
                        unsafe { products.slice((first_token + j) * rows + first, band_rows) };
                    for (out, products_of_row) in out.iter_mut().zip(&tile) {
                        *out = products_of_row[j];
                    }
                }
            }
        }
    }
}
