//! The model families of llama.cpp's GGUF files the node runs, on the CPU,
//! for the node's embedded models.
//!
//! [`Model::map`] reads the weights where a GGUF file is mapped; a [`Session`] runs
//! tokens through them, one request's key-value cache at a time. What sets
//! each family apart is described in [`arch`], one file each.

pub mod arch;
mod ggml;
mod model;
mod ops;
mod quant;
#[cfg(target_arch = "x86_64")]
mod query_lanes;
mod session;
pub mod synthetic;
mod team;
mod vector;

pub use model::{Model, ReadError, Source};
pub use session::{PROMPT_CHUNK, Session};
