//! Which dot products this CPU runs, and the choice of kernel for a
//! format: rows of weights times one to four tokens' inputs.

use super::activation::{Forms, Four, Q8Block};
use super::format::{Activation, Format};
use super::portable;

/// The dot products this CPU runs fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    Portable,
    /// AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// Those and AVX-VNNI (the VEX-encoded byte products of Alder Lake and
    /// later, Zen 5).
    #[cfg(target_arch = "x86_64")]
    AvxVnni,
    /// Those and AVX-512 VNNI, on 256-bit registers.
    #[cfg(target_arch = "x86_64")]
    Vnni512,
}

/// What a product may use beside the rows and the inputs.
#[derive(Clone, Copy, Default)]
pub struct With<'a> {
    /// The Q8 scales of four tokens side by side, when the tokens are
    /// those four.
    pub four: Option<&'a [Four]>,
    /// The order one token's product adds each row's blocks in.
    pub order: Order,
}

/// The order in which one token's product adds a row's blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Products in lanes across the row, summed across at its end:
    /// llama.cpp's dot products (`ggml_vec_dot_*`).
    #[default]
    Lanes,
    /// Each block's integers whole, then one float a row, block after
    /// block: llama.cpp's repacked product (`ggml_gemv_q4_K_8x8_q8_K`),
    /// which its x86 build keeps Q4_K matrices of a multiple of 8 rows in
    /// (not the embeddings, which it looks rows up in).
    Blockwise,
}

/// How many rows of a 32-value format the one-token kernels read at once:
/// a row's sum waits four cycles for each block's addition to the one
/// before, and the first tokens of a Q4_0 model ran at 0.79x llama.cpp's
/// (which reads eight rows at once from a copy of the weights interleaved
/// at load); four rows keep the additions under way without a copy.
const SIDE_BY_SIDE: usize = 4;

/// The bytes of a slice of f16, bf16 or f32 values, as a row of them is
/// stored (little-endian, as x86 is).
fn bytes_of<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: u16 and f32 have no padding and any alignment suits u8.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
    }
}

impl Kernels {
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") && has!("f16c") {
                if has!("avx512vnni") && has!("avx512vl") {
                    return Kernels::Vnni512;
                }
                if has!("avxvnni") {
                    return Kernels::AvxVnni;
                }
                return Kernels::Avx2;
            }
        }
        Kernels::Portable
    }

    /// Whether the CPU multiplies K-format weights in tiles
    /// ([`super::tiles`]): AVX-512 with VNNI.
    pub fn tiles(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self == Kernels::Vnni512 && std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Every kind this CPU can run, for tests that compare them.
    #[cfg(test)]
    pub fn available() -> Vec<Self> {
        let mut kinds = vec![Kernels::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if Kernels::detect() != Kernels::Portable {
                kinds.push(Kernels::Avx2);
                if has!("avxvnni") {
                    kinds.push(Kernels::AvxVnni);
                }
                if has!("avx512vnni") && has!("avx512vl") {
                    kinds.push(Kernels::Vnni512);
                }
            }
        }
        kinds
    }

    /// Each row of `rows` (rows of `format` as wide as the inputs, one
    /// after another) times the inputs of `tokens`: `put(r, products)` for
    /// the `r`th row, with what [`With`] gives.
    ///
    /// The kernel is chosen once for all the rows: a decode step's output
    /// product is a quarter of a million short rows, where choosing it row
    /// by row cost a fifth of the time.
    pub fn each_row<const N: usize>(
        self,
        format: Format,
        rows: &[u8],
        inputs: &Forms,
        tokens: [usize; N],
        with: With,
        mut put: impl FnMut(usize, [f32; N]),
    ) {
        let With { four, order } = with;
        let each = rows
            .chunks_exact(format.row_bytes(inputs.columns()))
            .enumerate();
        macro_rules! rows_with {
            ($kernel:expr) => {
                each.for_each(|(r, row)| put(r, $kernel(row)))
            };
        }
        // SAFETY (each x86 arm): `detect` found the CPU features the
        // kernel names; each input has a block per block of a row (the
        // inputs are as wide as the rows).
        match (format.activation(), self) {
            (Activation::Q8, _) if N == 4 && format == Format::Q4_1 && four.is_some() => {
                let x = std::array::from_fn(|n| inputs.q8(tokens[n.min(N - 1)]));
                let four = four.expect("checked");
                rows_with!(|row| {
                    let products = self.q4_1_four(row, x, four);
                    std::array::from_fn(|n| products[n])
                })
            }
            // One token: rows side by side (see `SIDE_BY_SIDE`).
            (Activation::Q8, _) if N == 1 => {
                let x = inputs.q8(tokens[0]);
                let row_bytes = format.row_bytes(inputs.columns());
                let groups = rows.chunks_exact(SIDE_BY_SIDE * row_bytes);
                let rest = groups.remainder();
                let grouped = (rows.len() - rest.len()) / row_bytes;
                for (g, group) in groups.enumerate() {
                    let side_by_side: [&[u8]; SIDE_BY_SIDE] =
                        std::array::from_fn(|i| &group[i * row_bytes..][..row_bytes]);
                    let products = self.small_rows(format, side_by_side, x);
                    for (i, p) in products.into_iter().enumerate() {
                        put(g * SIDE_BY_SIDE + i, [p; N])
                    }
                }
                for (r, row) in rest.chunks_exact(row_bytes).enumerate() {
                    let [p] = self.small_rows(format, [row], x);
                    put(grouped + r, [p; N])
                }
            }
            (Activation::Q8, Kernels::Portable) => {
                let x = tokens.map(|t| inputs.q8(t));
                rows_with!(|row| portable::small(format, row, x))
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8, Kernels::Avx2) => {
                let x = tokens.map(|t| inputs.q8(t));
                rows_with!(|row| unsafe { super::x86::avx2::small(format, [row], x)[0] })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8, Kernels::AvxVnni) => {
                let x = tokens.map(|t| inputs.q8(t));
                rows_with!(|row| unsafe { super::x86::avxvnni::small(format, [row], x)[0] })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8, Kernels::Vnni512) => {
                let x = tokens.map(|t| inputs.q8(t));
                rows_with!(|row| unsafe { super::x86::vnni512::small(format, [row], x)[0] })
            }
            (Activation::Q8K, Kernels::Portable) => {
                let x = tokens.map(|t| inputs.q8k(t));
                rows_with!(|row| portable::k(format, row, x))
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Avx2) if format == Format::Q6K => {
                let x = tokens.map(|t| inputs.q8k(t));
                rows_with!(|row| unsafe { super::x86::avx2::q6k(row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Avx2) => {
                let x = tokens.map(|t| inputs.q8k(t));
                rows_with!(|row| unsafe { super::x86::avx2::q45k(format, row, x, order) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::AvxVnni) if format == Format::Q6K => {
                let x = tokens.map(|t| inputs.q8k(t));
                rows_with!(|row| unsafe { super::x86::avxvnni::q6k(row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::AvxVnni) => {
                let x = tokens.map(|t| inputs.q8k(t));
                rows_with!(|row| unsafe { super::x86::avxvnni::q45k(format, row, x, order) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Vnni512) if format == Format::Q6K => {
                let x = tokens.map(|t| inputs.q8k(t));
                rows_with!(|row| unsafe { super::x86::vnni512::q6k(row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Vnni512) => {
                let x = tokens.map(|t| inputs.q8k(t));
                rows_with!(|row| unsafe { super::x86::vnni512::q45k(format, row, x, order) })
            }
            (Activation::F16 | Activation::BF16 | Activation::F32, _) => {
                let x: [&[u8]; N] = tokens.map(|t| match format.activation() {
                    Activation::F16 => bytes_of(inputs.f16(t)),
                    Activation::BF16 => bytes_of(inputs.bf16(t)),
                    _ => bytes_of(inputs.f32(t)),
                });
                match self {
                    Kernels::Portable => rows_with!(|row| portable::floats(format, row, x)),
                    // SAFETY: the CPU runs the format's wide kernels; the
                    // inputs are the rows' width, whole runs of `STEP`.
                    #[cfg(target_arch = "x86_64")]
                    Kernels::Vnni512
                        if super::floats::rows_run(format)
                            && inputs.columns().is_multiple_of(super::floats::STEP) =>
                    {
                        rows_with!(|row| unsafe { super::floats::row(format, row, x) })
                    }
                    // SAFETY: the CPU has AVX2, FMA and F16C; each input
                    // is the row's width, a multiple of 32 values.
                    #[cfg(target_arch = "x86_64")]
                    _ => rows_with!(|row| unsafe { super::x86::floats(format, row, x) }),
                }
            }
        }
    }

    /// `R` rows of a 32-value format times one token's input, side by
    /// side (the products each row alone gives, to the bit).
    fn small_rows<const R: usize>(
        self,
        format: Format,
        rows: [&[u8]; R],
        x: &[Q8Block],
    ) -> [f32; R] {
        // SAFETY (each x86 arm): `detect` found the CPU features the
        // kernel names; `x` has a block per block of each row.
        match self {
            Kernels::Portable => rows.map(|row| portable::small(format, row, [x])[0]),
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe { super::x86::avx2::small(format, rows, [x]).map(|[p]| p) },
            #[cfg(target_arch = "x86_64")]
            Kernels::AvxVnni => unsafe {
                super::x86::avxvnni::small(format, rows, [x]).map(|[p]| p)
            },
            #[cfg(target_arch = "x86_64")]
            Kernels::Vnni512 => unsafe {
                super::x86::vnni512::small(format, rows, [x]).map(|[p]| p)
            },
        }
    }

    fn q4_1_four(self, row: &[u8], x: [&[Q8Block]; 4], four: &[Four]) -> [f32; 4] {
        // SAFETY (each x86 arm): as in `dot`; `four` has an entry per
        // block.
        match self {
            Kernels::Portable => portable::small(Format::Q4_1, row, x),
            #[cfg(target_arch = "x86_64")]
            Kernels::Avx2 => unsafe { super::x86::avx2::q4_1_four(row, x, four) },
            #[cfg(target_arch = "x86_64")]
            Kernels::AvxVnni => unsafe { super::x86::avxvnni::q4_1_four(row, x, four) },
            #[cfg(target_arch = "x86_64")]
            Kernels::Vnni512 => unsafe { super::x86::vnni512::q4_1_four(row, x, four) },
        }
    }
}
