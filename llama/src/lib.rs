//! The llama architecture run on the CPU, for the node's embedded models.
//!
//! [`Llama::read`] takes the weights from a GGUF file; a [`Session`] runs
//! tokens through them, one request's key-value cache at a time.

mod model;
mod quant;

pub use model::{Llama, ReadError, Session};
