//! A product's inputs as the matrices take them: each form the weights
//! multiply with ([`Forms`]) and, for a prompt on a CPU that runs tiles,
//! the eight-bit forms laid out for them ([`Interleaved`]).

use super::activation::{Forms, Needs};
use super::format::Activation;
use super::kernels::Kernels;
use super::tiles::{self, Interleaved};

/// Some tokens' inputs to a product, in each form its weights take.
#[derive(Default)]
pub struct Inputs {
    forms: Forms,
    /// The eight-bit forms laid out for tiles, when there are enough
    /// tokens and the CPU runs them.
    interleaved: Option<Interleaved>,
}

impl Inputs {
    /// Takes `values`, `tokens` rows of equal width, in the forms `needs`
    /// names (see [`Forms::prepare`]).
    pub fn prepare(&mut self, values: &[f32], tokens: usize, needs: Needs) {
        self.forms.prepare(values, tokens, needs);
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

    /// The eight-bit inputs laid out for tiles, if [`Inputs::prepare`]
    /// made them.
    pub fn interleaved(&self) -> Option<&Interleaved> {
        self.interleaved.as_ref()
    }
}
