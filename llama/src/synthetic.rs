//! Small models of random weights, of any family the engine runs and any
//! format candle writes, as GGUF files llama.cpp loads too: the engine's
//! logits on one are checked against llama.cpp's on the same file (the
//! fixtures under `llama/tests/fixtures`, made by `make_reference.py`).
//! The same recipe gives the same bytes on every machine.

use crate::arch::{self, Architecture};
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use candle_core::{Device, Tensor};

/// What a synthetic model is made of.
#[derive(Clone, Debug)]
pub struct Recipe {
    pub family: &'static str,
    /// The matrices' format (norms and biases stay f32).
    pub format: GgmlDType,
    pub width: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_width: usize,
    pub feed_forward: usize,
    pub vocabulary: usize,
    /// Positions a windowed layer sees (for families with windowed layers).
    pub window: usize,
    /// The context the file says the model was trained for.
    pub context: usize,
    pub seed: u64,
    /// The vocabulary: numbered pieces, or one a chat can be spelled in.
    pub tokens: Tokens,
}

/// What a synthetic model's vocabulary holds.
#[derive(Clone, Debug)]
pub enum Tokens {
    /// `vocabulary` pieces `t0`, `t1`, …: enough for llama.cpp to load the
    /// file and run given token ids.
    Numbered,
    /// Every byte (byte-level BPE as `gpt2` files write it, or SentencePiece
    /// `<0xNN>` pieces), then the chat's control tokens; the file carries
    /// the chat template. Any text can be written in it, so a test can hold
    /// a model of random weights to a tool call and read the call back.
    Chat(Chat),
}

/// A synthetic chat vocabulary.
#[derive(Clone, Debug)]
pub struct Chat {
    /// SentencePiece (as Gemma's files) rather than byte-level BPE.
    pub sentence_piece: bool,
    /// Control tokens (turn marks), in id order after the bytes.
    pub controls: Vec<String>,
    /// Tokens matched in text as written (Qwen's `<tool_call>`).
    pub user_defined: Vec<String>,
    /// Which of the controls begins a text (written first when `add_bos`),
    /// and which ends a turn.
    pub bos: String,
    pub eos: String,
    pub add_bos: bool,
    pub template: Option<String>,
}

impl Chat {
    /// The token count of this vocabulary.
    pub fn size(&self) -> usize {
        256 + usize::from(self.sentence_piece) + self.controls.len() + self.user_defined.len()
    }
}

impl Recipe {
    /// A model of `family` small enough for a test, in `format`: blocks of
    /// 256 values fit every row, six layers give gemma3 a global one.
    pub fn small(family: &'static str, format: GgmlDType) -> Self {
        Recipe {
            family,
            format,
            width: 256,
            layers: 6,
            heads: 4,
            kv_heads: 2,
            head_width: 64,
            feed_forward: 512,
            vocabulary: 512,
            window: 4,
            context: 256,
            seed: 0x5eed,
            tokens: Tokens::Numbered,
        }
    }

    /// A model of `family` at the shape of Qwen3 0.6B (width 1,024, 28
    /// layers, 16 heads of 128 over 8 key-value heads, 3,072 wide feed
    /// forward, 151,936 tokens, the embedding tied to the output), in
    /// `format`: what speed is measured on, since the time of a step is
    /// the bytes of weights it reads, not what they say. Every row is a
    /// whole number of 256-value blocks, so each format fits it; gemma3's
    /// windowed layers see 512 positions, as Gemma 3's files say; qwen2
    /// has 8 heads (llama.cpp takes its query width to be the model's, as
    /// Qwen 2.5's are).
    pub fn sub_billion(family: &'static str, format: GgmlDType) -> Self {
        Recipe {
            width: 1024,
            layers: 28,
            heads: if family == "qwen2" { 8 } else { 16 },
            kv_heads: 8,
            head_width: 128,
            feed_forward: 3072,
            vocabulary: 151_936,
            window: 512,
            context: 4096,
            ..Recipe::small(family, format)
        }
    }

    /// [`Recipe::small`] with a chat vocabulary.
    pub fn chatting(family: &'static str, format: GgmlDType, chat: Chat) -> Self {
        Recipe {
            vocabulary: chat.size(),
            tokens: Tokens::Chat(chat),
            // A chat's prompt spelled byte by byte, tools and all.
            context: 4096,
            ..Recipe::small(family, format)
        }
    }
}

/// A stream of numbers fixed by its seed (xorshift64*).
struct Random(u64);

impl Random {
    /// Uniform in [-1, 1).
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        bits as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn values(&mut self, count: usize, scale: f32, offset: f32) -> Vec<f32> {
        (0..count).map(|_| offset + scale * self.next()).collect()
    }
}

/// Writes the model `recipe` describes to `out` as a GGUF file.
pub fn write(recipe: &Recipe, out: &mut std::fs::File) -> Result<(), String> {
    let family = arch::named(recipe.family)
        .ok_or_else(|| format!("the engine runs no family {:?}", recipe.family))?;
    let mut random = Random(recipe.seed.max(1));
    let tensors = tensors(recipe, family, &mut random).map_err(|e| e.to_string())?;
    let metadata = metadata(recipe, family);
    let metadata: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(out, &metadata, &tensors).map_err(|e| e.to_string())
}

fn metadata(recipe: &Recipe, family: &Architecture) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value::{Array, F32, String as Text, U32};
    let key = |name: &str| format!("{}.{name}", family.name);
    let count = |n: usize| U32(n as u32);
    // Gemma's global layers turn slowly, as its files say.
    let rope_base = match family.sliding {
        Some(_) => 1_000_000.0,
        None => 10_000.0,
    };
    let mut metadata = vec![
        (
            "general.architecture".to_owned(),
            Text(family.name.to_owned()),
        ),
        (
            "general.name".to_owned(),
            Text(format!("synthetic {}", family.name)),
        ),
        (key("context_length"), count(recipe.context)),
        (key("embedding_length"), count(recipe.width)),
        (key("block_count"), count(recipe.layers)),
        (key("feed_forward_length"), count(recipe.feed_forward)),
        (key("attention.head_count"), count(recipe.heads)),
        (key("attention.head_count_kv"), count(recipe.kv_heads)),
        (key("attention.key_length"), count(recipe.head_width)),
        (key("attention.value_length"), count(recipe.head_width)),
        (key("attention.layer_norm_rms_epsilon"), F32(1e-6)),
        (key("rope.dimension_count"), count(recipe.head_width)),
        (key("rope.freq_base"), F32(rope_base)),
    ];
    match &recipe.tokens {
        Tokens::Numbered => metadata.extend([
            // A vocabulary llama.cpp loads: distinct pieces, one merge.
            ("tokenizer.ggml.model".to_owned(), Text("gpt2".to_owned())),
            ("tokenizer.ggml.pre".to_owned(), Text("default".to_owned())),
            (
                "tokenizer.ggml.tokens".to_owned(),
                Array(
                    (0..recipe.vocabulary)
                        .map(|n| Text(format!("t{n}")))
                        .collect(),
                ),
            ),
            (
                "tokenizer.ggml.merges".to_owned(),
                Array(vec![Text("t 1".to_owned())]),
            ),
            ("tokenizer.ggml.bos_token_id".to_owned(), count(0)),
            ("tokenizer.ggml.eos_token_id".to_owned(), count(1)),
        ]),
        Tokens::Chat(chat) => metadata.extend(chat_metadata(chat)),
    }
    if family.sliding.is_some() {
        metadata.push((key("attention.sliding_window"), count(recipe.window)));
    }
    metadata
}

/// The tokenizer keys of a chat vocabulary (see [`Tokens::Chat`]).
fn chat_metadata(chat: &Chat) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value::{Array, Bool, F32, I32, String as Text, U32};
    let mut tokens: Vec<String> = Vec::with_capacity(chat.size());
    let mut types: Vec<i32> = Vec::with_capacity(chat.size());
    if chat.sentence_piece {
        tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
        types.extend([6; 256]);
        tokens.push("\u{2581}".to_owned());
        types.push(1);
    } else {
        tokens.extend((0..=255u8).map(byte_level_char).map(String::from));
        types.extend([1; 256]);
    }
    for control in &chat.controls {
        tokens.push(control.clone());
        types.push(3);
    }
    for text in &chat.user_defined {
        tokens.push(text.clone());
        types.push(4);
    }
    let id = |text: &str| U32(tokens.iter().position(|t| t == text).unwrap_or_default() as u32);
    let mut metadata = vec![
        ("tokenizer.ggml.bos_token_id".to_owned(), id(&chat.bos)),
        ("tokenizer.ggml.eos_token_id".to_owned(), id(&chat.eos)),
        (
            "tokenizer.ggml.add_bos_token".to_owned(),
            Bool(chat.add_bos),
        ),
        (
            "tokenizer.ggml.token_type".to_owned(),
            Array(types.into_iter().map(I32).collect()),
        ),
    ];
    if chat.sentence_piece {
        metadata.extend([
            ("tokenizer.ggml.model".to_owned(), Text("llama".to_owned())),
            (
                "tokenizer.ggml.scores".to_owned(),
                Array(tokens.iter().map(|_| F32(0.0)).collect()),
            ),
            ("tokenizer.ggml.add_space_prefix".to_owned(), Bool(false)),
        ]);
    } else {
        metadata.extend([
            ("tokenizer.ggml.model".to_owned(), Text("gpt2".to_owned())),
            ("tokenizer.ggml.pre".to_owned(), Text("qwen2".to_owned())),
            ("tokenizer.ggml.merges".to_owned(), Array(Vec::new())),
        ]);
    }
    metadata.push((
        "tokenizer.ggml.tokens".to_owned(),
        Array(tokens.into_iter().map(Text).collect()),
    ));
    if let Some(template) = &chat.template {
        metadata.push(("tokenizer.chat_template".to_owned(), Text(template.clone())));
    }
    metadata
}

/// GPT-2's byte-level character for `byte`: printable bytes stand for
/// themselves, the others are moved to U+0100 and up, in byte order.
fn byte_level_char(byte: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(byte) {
        return byte as char;
    }
    let moved = (0..byte).filter(|b| !printable(*b)).count() as u32;
    char::from_u32(0x100 + moved).expect("below the surrogates")
}

fn tensors(
    recipe: &Recipe,
    family: &Architecture,
    random: &mut Random,
) -> candle_core::Result<Vec<(String, QTensor)>> {
    let device = Device::Cpu;
    let q_width = recipe.heads * recipe.head_width;
    let kv_width = recipe.kv_heads * recipe.head_width;
    let mut out = Vec::new();
    // Weights of a row scaled to keep each product's values near one.
    let mut matrix = |name: String, rows: usize, columns: usize, random: &mut Random| {
        let scale = 1.7 / (columns as f32).sqrt();
        let values = Tensor::from_vec(
            random.values(rows * columns, scale, 0.0),
            (rows, columns),
            &device,
        )?;
        out.push((name, QTensor::quantize(&values, recipe.format)?));
        Ok::<_, candle_core::Error>(())
    };
    matrix(
        "token_embd.weight".into(),
        recipe.vocabulary,
        recipe.width,
        random,
    )?;
    for n in 0..recipe.layers {
        let name = |part: &str| format!("blk.{n}.{part}.weight");
        matrix(name("attn_q"), q_width, recipe.width, random)?;
        matrix(name("attn_k"), kv_width, recipe.width, random)?;
        matrix(name("attn_v"), kv_width, recipe.width, random)?;
        matrix(name("attn_output"), recipe.width, q_width, random)?;
        matrix(name("ffn_gate"), recipe.feed_forward, recipe.width, random)?;
        matrix(name("ffn_up"), recipe.feed_forward, recipe.width, random)?;
        matrix(name("ffn_down"), recipe.width, recipe.feed_forward, random)?;
    }
    let mut vectors = Vec::new();
    let mut vector = |name: String, length: usize, scale: f32, offset: f32| {
        vectors.push((name, random.values(length, scale, offset)));
    };
    vector("output_norm.weight".into(), recipe.width, 0.2, 1.0);
    for n in 0..recipe.layers {
        let name = |part: &str| format!("blk.{n}.{part}.weight");
        vector(name("attn_norm"), recipe.width, 0.2, 1.0);
        vector(name("ffn_norm"), recipe.width, 0.2, 1.0);
        if family.qk_norm {
            vector(name("attn_q_norm"), recipe.head_width, 0.2, 1.0);
            vector(name("attn_k_norm"), recipe.head_width, 0.2, 1.0);
        }
        if family.post_norms {
            vector(name("post_attention_norm"), recipe.width, 0.2, 1.0);
            vector(name("post_ffw_norm"), recipe.width, 0.2, 1.0);
        }
        if family.qkv_bias {
            vector(format!("blk.{n}.attn_q.bias"), q_width, 0.5, 0.0);
            vector(format!("blk.{n}.attn_k.bias"), kv_width, 0.5, 0.0);
            vector(format!("blk.{n}.attn_v.bias"), kv_width, 0.5, 0.0);
        }
    }
    for (name, values) in vectors {
        let length = values.len();
        let values = Tensor::from_vec(values, length, &device)?;
        out.push((name, QTensor::quantize(&values, GgmlDType::F32)?));
    }
    Ok(out)
}
