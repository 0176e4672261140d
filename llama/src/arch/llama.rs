//! Llama (1, 2, 3.x), SmolLM, TinyLlama, Mistral's dense models: SwiGLU,
//! RMS norms, rotary pairs of adjacent dimensions. Llama 3.1 and 3.2 scale
//! their rotary frequencies by the `rope_freqs` tensor the file carries,
//! which the engine reads for every family.

use super::{Activation, Architecture, Rope, per_head_width};

pub const LLAMA: Architecture = Architecture {
    name: "llama",
    rope: Rope::Adjacent,
    qkv_bias: false,
    qk_norm: false,
    post_norms: false,
    activation: Activation::Silu,
    scaled_embeddings: false,
    sliding: None,
    attention_scale: per_head_width,
    scales_queries: false,
};
