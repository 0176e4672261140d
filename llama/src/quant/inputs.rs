//! A product's inputs as the matrices take them: each form the weights
//! multiply with ([`Forms`]) and, for a prompt on a CPU that runs tiles,
//! the eight-bit forms laid out for them ([`Interleaved`]) or the float
//! ones widened and laid out ([`super::floats`]).

use super::activation::{Forms, Needs};
use super::format::{Activation, Format};
use super::kernels::Kernels;
use super::tiles::{self, Interleaved};

/// Some tokens' inputs to a product, in each form its weights take.
#[derive(Default)]
pub struct Inputs {
    forms: Forms,
    /// The eight-bit forms laid out for tiles, when there are enough
    /// tokens and the CPU runs them.
    interleaved: Option<Interleaved>,
    /// A prompt's F16 or BF16 inputs widened and laid out for tiles, when
    /// its products with float weights run in them ([`super::floats`]),
    /// and the format of those weights.
    floats_laid_out: Vec<f32>,
    laid_out_for: Option<Format>,
}

impl Inputs {
    /// Takes `values`, `tokens` rows of equal width, in the forms `needs`
    /// names (see [`Forms::prepare`]).
    pub fn prepare(&mut self, values: &[f32], tokens: usize, needs: Needs) {
        self.forms.prepare(values, tokens, needs);
        // One float form laid out: a matrix of the other (no file mixes
        // them) takes its products a few tokens at a time.
        let laid_out_for = [Format::F16, Format::BF16]
            .into_iter()
            .find(|&f| needs.has(f.activation()) && self.float_tiles_run(f));
        #[cfg(target_arch = "x86_64")]
        if let Some(format) = laid_out_for {
            let halves = match format {
                Format::F16 => self.forms.all_f16(),
                _ => self.forms.all_bf16(),
            };
            let (tokens, columns) = (self.tokens(), self.columns());
            super::floats::lay_out(format, halves, tokens, columns, &mut self.floats_laid_out);
        }
        self.laid_out_for = laid_out_for;
        let (small, k) = (needs.has(Activation::Q8), needs.has(Activation::Q8K));
        let tiled = tokens >= tiles::LEAST_TOKENS && (small || k) && Kernels::detect().tiles();
        if !tiled {
            self.interleaved = None;
            return;
        }
        let (forms, interleaved) = (&self.forms, self.interleaved.get_or_insert_default());
        if k {
            let per_token = forms.columns() / super::activation::SUPER_BLOCK;
            interleaved.fill_k(tokens, per_token, |t| forms.q8k(t));
        }
        if small {
            let per_token = forms.columns() / super::activation::BLOCK;
            interleaved.fill_small(tokens, per_token, |t| forms.q8(t));
        }
    }

    pub fn tokens(&self) -> usize {
        self.forms.tokens()
    }

    pub fn columns(&self) -> usize {
        self.forms.columns()
    }

    /// The inputs in each form the weights multiply with.
    pub fn forms(&self) -> &Forms {
        &self.forms
    }

    /// Whether `format`'s products with these inputs run in tiles of
    /// floats ([`super::floats`]).
    pub fn float_tiles(&self, format: Format) -> bool {
        self.laid_out_for == Some(format)
    }

    /// Whether a product of `format` with these inputs could run in tiles
    /// of floats: a prompt, rows of whole runs of the tiles' step, on a
    /// CPU with AVX-512.
    fn float_tiles_run(&self, format: Format) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.tokens() >= tiles::LEAST_TOKENS
                && self.columns().is_multiple_of(super::floats::STEP)
                && super::floats::tiles_run(format)
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// The inputs laid out for tiles of the format
    /// [`Inputs::float_tiles`] names.
    pub fn laid_out(&self) -> &[f32] {
        &self.floats_laid_out
    }

    /// The eight-bit inputs laid out for tiles, if [`Inputs::prepare`]
    /// made them.
    pub fn interleaved(&self) -> Option<&Interleaved> {
        self.interleaved.as_ref()
    }
}
