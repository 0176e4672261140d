//! What sets one model family apart from another, each in a file of its
//! own: how its rotary embeddings pair a head's dimensions, which extra
//! tensors its layers carry (biases, q/k norms, post-norms), its
//! feed-forward activation, and how its attention is scaled and windowed.
//! The tensor names are llama.cpp's, shared by every family; the forward
//! pass ([`crate::session`]) is one for all, switched by this description.
//! A new family is a new file here and a line in [`FAMILIES`].

mod gemma3;
mod llama;
mod qwen2;
mod qwen3;

/// One family of models, as its GGUF `general.architecture` names it.
pub struct Architecture {
    pub name: &'static str,
    pub rope: Rope,
    /// `blk.N.attn_{q,k,v}.bias`: q, k and v have biases (qwen2).
    pub qkv_bias: bool,
    /// `blk.N.attn_{q,k}_norm`: each head's query and key are RMS-normed
    /// before they are turned (qwen3, gemma3).
    pub qk_norm: bool,
    /// `blk.N.{attn,ffn}_post_norm`: the attention's and the
    /// feed-forward's outputs are RMS-normed before they join the residual
    /// stream (gemma3).
    pub post_norms: bool,
    pub activation: Activation,
    /// The embeddings are scaled by √width as they are read (gemma).
    pub scaled_embeddings: bool,
    /// Layers that attend within a window only, between global ones.
    pub sliding: Option<Sliding>,
    /// What the queries are scaled by before their dot products.
    pub attention_scale: fn(&Dimensions) -> f32,
    /// Whether the scale multiplies each query (after its rotation), as
    /// Gemma's graph in llama.cpp does, rather than each score: the same
    /// product, rounded elsewhere.
    pub scales_queries: bool,
}

/// How rotary embeddings pair the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rope {
    /// Dimension `2i` with `2i + 1` (llama: the GGUF converter permutes q
    /// and k for it).
    Adjacent,
    /// Dimension `i` with `i + d/2` (GPT-NeoX's, which qwen and gemma keep).
    Halves,
}

/// The gate's activation in the gated feed-forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// x·σ(x): SwiGLU.
    Silu,
    /// GELU in its tanh approximation: GeGLU.
    GeluTanh,
}

/// Layers of sliding-window attention: all but every `period`th.
pub struct Sliding {
    pub period: usize,
    /// The rotary base of the windowed layers (the global ones take the
    /// file's `rope.freq_base`).
    pub rope_base: f32,
}

impl Sliding {
    /// Whether layer `n` attends within the window.
    pub fn windowed(&self, n: usize) -> bool {
        n % self.period != self.period - 1
    }
}

/// The sizes an attention scale may depend on.
pub struct Dimensions {
    pub layers: usize,
    pub width: usize,
    pub heads: usize,
    pub head_width: usize,
}

/// 1/√(head width): the scale of "Attention Is All You Need", which most
/// families keep.
pub fn per_head_width(dimensions: &Dimensions) -> f32 {
    1.0 / (dimensions.head_width as f32).sqrt()
}

/// The families the engine runs.
pub const FAMILIES: [&Architecture; 4] =
    [&llama::LLAMA, &qwen2::QWEN2, &qwen3::QWEN3, &gemma3::GEMMA3];

/// The family called `name`.
pub fn named(name: &str) -> Option<&'static Architecture> {
    FAMILIES.iter().copied().find(|family| family.name == name)
}

/// "llama, qwen2, qwen3 and gemma3".
pub fn names() -> String {
    let names: Vec<&str> = FAMILIES.iter().map(|family| family.name).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}
