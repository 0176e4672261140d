//! Which dot products this CPU runs, and the choice of kernel for a
//! format: a row of weights times one to four tokens' inputs.

use super::activation::{Inputs, Q8Block};
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

/// The scales and scaled sums of four inputs' blocks, side by side: a
/// kernel scales the four products of a weight block in one step.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
pub struct Four {
    pub scales: [f32; 4],
    pub scaled_sums: [f32; 4],
}

impl Four {
    /// Fills `out` from four inputs, `blocks` blocks each, one after another.
    pub fn of(inputs: &[Q8Block], blocks: usize, out: &mut Vec<Four>) {
        out.clear();
        out.extend((0..blocks).map(|b| Four {
            scales: std::array::from_fn(|n| inputs[n * blocks + b].scale),
            scaled_sums: std::array::from_fn(|n| inputs[n * blocks + b].scaled_sum),
        }));
    }
}

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

    /// Row `row` (of `format`) times the inputs of tokens `first` to
    /// `first + out.len()` (at most four), into `out`. `four`: the Q8
    /// scales of those four tokens side by side, when there are four.
    pub fn products(
        self,
        format: Format,
        row: &[u8],
        inputs: &Inputs,
        first: usize,
        four: Option<&[Four]>,
        out: &mut [f32],
    ) {
        if out.len() == 4 {
            let tokens = [first, first + 1, first + 2, first + 3];
            if let (Format::Q4_1, Some(four)) = (format, four) {
                out.copy_from_slice(&self.q4_1_four(row, tokens.map(|t| inputs.q8(t)), four));
                return;
            }
            out.copy_from_slice(&self.dot(format, row, inputs, tokens));
            return;
        }
        for (n, out) in out.iter_mut().enumerate() {
            *out = self.dot(format, row, inputs, [first + n])[0];
        }
    }

    /// Each row of `rows` (rows of `format`, one after another) times the
    /// inputs of token `token`, into `out` (one product a row). One
    /// dispatch for all the rows: a decode step's output product is a
    /// quarter of a million short rows, where choosing the kernel row by
    /// row cost a fifth of the time.
    pub fn row_products(
        self,
        format: Format,
        rows: &[u8],
        inputs: &Inputs,
        token: usize,
        out: &mut [f32],
    ) {
        let row_bytes = rows.len() / out.len().max(1);
        let each = rows.chunks_exact(row_bytes).zip(out.iter_mut());
        macro_rules! rows_with {
            ($kernel:expr) => {
                each.for_each(|(row, out)| *out = $kernel(row)[0])
            };
        }
        match (format.activation(), self) {
            (Activation::Q8, Kernels::Portable) => {
                let x = [inputs.q8(token)];
                rows_with!(|row| portable::small(format, row, x))
            }
            // SAFETY (each x86 arm): `detect` found the CPU features the
            // kernel names; the input has a block per block of a row.
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8, Kernels::Avx2) => {
                let x = [inputs.q8(token)];
                rows_with!(|row| unsafe { super::x86::avx2::small(format, row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8, Kernels::AvxVnni) => {
                let x = [inputs.q8(token)];
                rows_with!(|row| unsafe { super::x86::avxvnni::small(format, row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8, Kernels::Vnni512) => {
                let x = [inputs.q8(token)];
                rows_with!(|row| unsafe { super::x86::vnni512::small(format, row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Vnni512) if format == Format::Q6K => {
                let x = [inputs.q8k(token)];
                rows_with!(|row| unsafe { super::x86::vnni512::q6k(row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Vnni512) => {
                let x = [inputs.q8k(token)];
                rows_with!(|row| unsafe { super::x86::vnni512::q45k(format, row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::AvxVnni) if format == Format::Q6K => {
                let x = [inputs.q8k(token)];
                rows_with!(|row| unsafe { super::x86::avxvnni::q6k(row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::AvxVnni) => {
                let x = [inputs.q8k(token)];
                rows_with!(|row| unsafe { super::x86::avxvnni::q45k(format, row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Avx2) if format == Format::Q6K => {
                let x = [inputs.q8k(token)];
                rows_with!(|row| unsafe { super::x86::avx2::q6k(row, x) })
            }
            #[cfg(target_arch = "x86_64")]
            (Activation::Q8K, Kernels::Avx2) => {
                let x = [inputs.q8k(token)];
                rows_with!(|row| unsafe { super::x86::avx2::q45k(format, row, x) })
            }
            _ => rows_with!(|row| self.dot(format, row, inputs, [token])),
        }
    }

    /// Row `row` times the inputs of `tokens`.
    pub fn dot<const N: usize>(
        self,
        format: Format,
        row: &[u8],
        inputs: &Inputs,
        tokens: [usize; N],
    ) -> [f32; N] {
        match format.activation() {
            Activation::Q8 => {
                let x = tokens.map(|t| inputs.q8(t));
                // SAFETY (each x86 arm): `detect` found the CPU features
                // the kernel names; each input has a block per block of
                // the row (the inputs are the matrix's width).
                match self {
                    Kernels::Portable => portable::small(format, row, x),
                    #[cfg(target_arch = "x86_64")]
                    Kernels::Avx2 => unsafe { super::x86::avx2::small(format, row, x) },
                    #[cfg(target_arch = "x86_64")]
                    Kernels::AvxVnni => unsafe { super::x86::avxvnni::small(format, row, x) },
                    #[cfg(target_arch = "x86_64")]
                    Kernels::Vnni512 => unsafe { super::x86::vnni512::small(format, row, x) },
                }
            }
            Activation::Q8K => {
                let x = tokens.map(|t| inputs.q8k(t));
                // SAFETY: as above.
                match (self, format) {
                    (Kernels::Portable, _) => portable::k(format, row, x),
                    #[cfg(target_arch = "x86_64")]
                    (Kernels::Avx2, Format::Q6K) => unsafe { super::x86::avx2::q6k(row, x) },
                    #[cfg(target_arch = "x86_64")]
                    (Kernels::Avx2, _) => unsafe { super::x86::avx2::q45k(format, row, x) },
                    #[cfg(target_arch = "x86_64")]
                    (Kernels::AvxVnni, Format::Q6K) => unsafe { super::x86::avxvnni::q6k(row, x) },
                    #[cfg(target_arch = "x86_64")]
                    (Kernels::AvxVnni, _) => unsafe { super::x86::avxvnni::q45k(format, row, x) },
                    #[cfg(target_arch = "x86_64")]
                    (Kernels::Vnni512, Format::Q6K) => unsafe { super::x86::vnni512::q6k(row, x) },
                    #[cfg(target_arch = "x86_64")]
                    (Kernels::Vnni512, _) => unsafe { super::x86::vnni512::q45k(format, row, x) },
                }
            }
            Activation::F16 | Activation::BF16 | Activation::F32 => {
                let x: [&[u8]; N] = tokens.map(|t| match format.activation() {
                    Activation::F16 => bytes_of(inputs.f16(t)),
                    Activation::BF16 => bytes_of(inputs.bf16(t)),
                    _ => bytes_of(inputs.f32(t)),
                });
                match self {
                    Kernels::Portable => portable::floats(format, row, x),
                    // SAFETY: the CPU has AVX2, FMA and F16C; each input
                    // is the row's width, a multiple of 32 values.
                    #[cfg(target_arch = "x86_64")]
                    _ => unsafe { super::x86::floats(format, row, x) },
                }
            }
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
