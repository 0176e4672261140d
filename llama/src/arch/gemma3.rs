//! Gemma 3 (text): GeGLU, embeddings scaled by √width, q/k norms, norms
//! after the attention and the feed-forward as well as before, and five
//! layers of sliding-window attention (rotary base 10,000) to every global
//! one (the file's base). The GGUF converter has already added the 1 that
//! Gemma's norms add to their weights.

use super::{Activation, Architecture, Dimensions, Rope, Sliding};

pub const GEMMA3: Architecture = Architecture {
    name: "gemma3",
    rope: Rope::Halves,
    qkv_bias: false,
    qk_norm: true,
    post_norms: true,
    activation: Activation::GeluTanh,
    scaled_embeddings: true,
    sliding: Some(Sliding {
        period: 6,
        rope_base: 10_000.0,
    }),
    attention_scale,
    scales_queries: true,
};

/// Gemma 3 scales queries by 1/√(head width), except the 27B model (62
/// layers), whose `query_pre_attn_scalar` is width / heads.
fn attention_scale(dimensions: &Dimensions) -> f32 {
    let scalar = match dimensions.layers {
        62 => dimensions.width / dimensions.heads,
        _ => dimensions.head_width,
    };
    1.0 / (scalar as f32).sqrt()
}
