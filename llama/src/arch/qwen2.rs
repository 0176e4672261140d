//! Qwen 2 and 2.5: llama's layers with biases on q, k and v, and rotary
//! embeddings on the two halves of each head.

use super::{Activation, Architecture, Rope, per_head_width};

pub const QWEN2: Architecture = Architecture {
    name: "qwen2",
    rope: Rope::Halves,
    qkv_bias: true,
    qk_norm: false,
    post_norms: false,
    activation: Activation::Silu,
    scaled_embeddings: false,
    sliding: None,
    attention_scale: per_head_width,
    scales_queries: false,
};
