//! Qwen 3 (dense): no biases, but each head's query and key RMS-normed
//! before rotation; heads may be wider than width / heads (`key_length`).

use super::{Activation, Architecture, Rope, per_head_width};

pub const QWEN3: Architecture = Architecture {
    name: "qwen3",
    rope: Rope::Halves,
    qkv_bias: false,
    qk_norm: true,
    post_norms: false,
    activation: Activation::Silu,
    scaled_embeddings: false,
    sliding: None,
    attention_scale: per_head_width,
    scales_queries: false,
};
