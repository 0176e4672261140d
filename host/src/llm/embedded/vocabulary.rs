//! The tokenizer a GGUF file carries, built from its `tokenizer.ggml.*`
//! metadata the way llama.cpp reads it:
//!
//! - `gpt2`: byte-level BPE (SmolLM, Qwen, Llama 3), its merges as listed,
//!   the text first split by the regular expressions llama.cpp pairs with
//!   the file's `tokenizer.ggml.pre` (SmolLM's splits every digit, Llama 3's
//!   groups digits by three: a number tokenized otherwise is one the model
//!   never saw);
//! - `llama`: SentencePiece BPE (Gemma, Llama 2, TinyLlama), whose merges
//!   follow the pieces' scores: at each step the adjacent pair that makes
//!   the best-scored piece is joined, and text no piece covers falls back
//!   to `<0xNN>` byte pieces; spaces are written `▁`.
//!
//! Control tokens (`<|im_start|>`, `<start_of_turn>`) are matched in the
//! prompt's text as themselves, as the chat templates write them.

use super::super::call_format::CALL_MARKS;
use candle_core::quantized::gguf_file::{Content, Value};
use std::sync::LazyLock;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior,
    Tokenizer,
};

/// The tokens of a vocabulary no file of a runnable model exceeds (Gemma's
/// is 262,144): a header claiming more is refused before it is built.
const MAX_TOKENS: usize = 1 << 20;

/// What SentencePiece writes a space as.
const SPACE: &str = "\u{2581}";

/// A model's tokenizer, and how its entries spell the bytes they stand for.
pub struct Vocabulary {
    pub tokenizer: Tokenizer,
    spelling: Spelling,
    /// Per token id, its llama.cpp token type.
    types: Vec<TokenType>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spelling {
    /// GPT-2's: every byte one printable character.
    ByteLevel,
    /// SentencePiece's: the text itself with `▁` for spaces, bytes as `<0xNN>`.
    SentencePiece,
}

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TokenType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    fn from_number(n: i64) -> TokenType {
        match n {
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Normal,
        }
    }
}

impl Vocabulary {
    /// The tokenizer the GGUF header `content` describes.
    pub fn from_gguf(content: &Content) -> Result<Vocabulary, String> {
        let model = text(content, "tokenizer.ggml.model")?.ok_or("it names no tokenizer")?;
        let tokens = strings(content, "tokenizer.ggml.tokens")?.ok_or("it lists no tokens")?;
        if tokens.is_empty() || tokens.len() > MAX_TOKENS {
            return Err(format!(
                "its vocabulary of {} tokens is not one a model has",
                tokens.len()
            ));
        }
        let mut types: Vec<TokenType> = match numbers(content, "tokenizer.ggml.token_type")? {
            Some(types) if types.len() == tokens.len() => {
                types.into_iter().map(TokenType::from_number).collect()
            }
            Some(types) => {
                return Err(format!(
                    "it types {} tokens of {}",
                    types.len(),
                    tokens.len()
                ));
            }
            None => vec![TokenType::Normal; tokens.len()],
        };
        // A call's marks are text of the answer (see `CALL_MARKS`).
        for (kind, token) in types.iter_mut().zip(&tokens) {
            if *kind == TokenType::Control && CALL_MARKS.contains(&token.as_str()) {
                *kind = TokenType::UserDefined;
            }
        }
        let (mut tokenizer, spelling) = match model {
            "gpt2" => (byte_level(content, &tokens)?, Spelling::ByteLevel),
            "llama" => (
                sentence_piece(content, &tokens, &types)?,
                Spelling::SentencePiece,
            ),
            other => {
                return Err(format!(
                    "its tokenizer is of the {other:?} kind; the node reads gpt2 (byte-level BPE) and llama (SentencePiece) tokenizers"
                ));
            }
        };
        add_special_tokens(&mut tokenizer, &tokens, &types)?;
        Ok(Vocabulary {
            tokenizer,
            spelling,
            types,
        })
    }

    /// The bytes token `id` stands for in text; `None` for a control token
    /// (which stands for none) or an id outside the vocabulary.
    pub fn bytes_of(&self, id: u32) -> Option<Vec<u8>> {
        let kind = *self.types.get(id as usize)?;
        if matches!(
            kind,
            TokenType::Control | TokenType::Unknown | TokenType::Unused
        ) {
            return None;
        }
        let name = self.tokenizer.id_to_token(id)?;
        if kind == TokenType::UserDefined {
            return Some(name.into_bytes());
        }
        Some(match self.spelling {
            Spelling::ByteLevel => byte_level_bytes(&name),
            Spelling::SentencePiece if kind == TokenType::Byte => {
                byte_piece(&name).map_or_else(|| name.clone().into_bytes(), |b| vec![b])
            }
            Spelling::SentencePiece => name.replace(SPACE, " ").into_bytes(),
        })
    }

    /// Tokens in the vocabulary.
    pub fn size(&self) -> usize {
        self.types.len()
    }
}

/// GPT-2 style byte-level BPE, split first as llama.cpp splits for `pre`.
fn byte_level(content: &Content, tokens: &[String]) -> Result<Tokenizer, String> {
    let merges = strings(content, "tokenizer.ggml.merges")?
        .ok_or("its byte-level tokenizer lists no merges")?
        .into_iter()
        .map(|merge| {
            merge
                .split_once(' ')
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .ok_or_else(|| format!("its merge {merge:?} is not two tokens"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let pre = text(content, "tokenizer.ggml.pre")?.unwrap_or("default");
    let expressions = split_expressions(pre).ok_or_else(|| {
        format!(
            "its tokenizer splits text as {pre:?}, which the node does not know (it knows llama.cpp's llama3, qwen2, smollm, gpt-2 and default splits)"
        )
    })?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab_of(tokens), merges)
        .build()
        .map_err(|e| format!("its tokenizer does not build: {e}"))?;
    let mut tokenizer = Tokenizer::new(bpe);
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for expression in expressions {
        let split = Split::new(
            SplitPattern::Regex((*expression).to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| format!("the split {expression:?} does not compile: {e}"))?;
        steps.push(split.into());
    }
    // The bytes of each piece as the vocabulary's characters; no space is
    // put before a piece (llama.cpp puts none) and no further splitting.
    steps.push(ByteLevel::new(false, false, false).into());
    tokenizer.with_pre_tokenizer(Some(PreSequence::new(steps)));
    tokenizer.with_decoder(Some(tokenizers::decoders::byte_level::ByteLevel::new(
        false, false, false,
    )));
    Ok(tokenizer)
}

/// The regular expressions llama.cpp splits text by before byte-level BPE,
/// for the pre-tokenizer a GGUF file names (llama.cpp's `llama-vocab.cpp`:
/// each expression splits the pieces the one before left).
fn split_expressions(pre: &str) -> Option<&'static [&'static str]> {
    const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
    const LLAMA3: &[&str] = &[
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ];
    const QWEN2: &[&str] = &[
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ];
    const DIGITS_THEN_GPT2: &[&str] = &[r"\p{N}", GPT2];
    const ONLY_GPT2: &[&str] = &[GPT2];
    const DEFAULT: &[&str] = &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"];
    Some(match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" | "lfm2" | "smaug-bpe"
        | "dbrx" => LLAMA3,
        "qwen2" | "deepseek-r1-qwen" | "stablelm2" => QWEN2,
        "smollm" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
            DIGITS_THEN_GPT2
        }
        "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" => ONLY_GPT2,
        "default" => DEFAULT,
        _ => return None,
    })
}

/// SentencePiece BPE as llama.cpp runs it, in the form of a BPE whose
/// merges are every pair of pieces that joins into a piece, the best-scored
/// piece's first (as Hugging Face converts SentencePiece models).
fn sentence_piece(
    content: &Content,
    tokens: &[String],
    types: &[TokenType],
) -> Result<Tokenizer, String> {
    let scores = floats(content, "tokenizer.ggml.scores")?
        .ok_or("its SentencePiece tokenizer gives no scores")?;
    if scores.len() != tokens.len() {
        return Err(format!(
            "it scores {} tokens of {}",
            scores.len(),
            tokens.len()
        ));
    }
    let vocab = vocab_of(tokens);
    // Pieces text is made of: not the byte pieces, the turn marks or the
    // unknown piece, which no merge makes or uses.
    let mergeable = |id: u32| {
        matches!(
            types[id as usize],
            TokenType::Normal | TokenType::UserDefined
        )
    };
    let mut merges: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        if !mergeable(id as u32) {
            continue;
        }
        for (split, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(split);
            if let (Some(&l), Some(&r)) = (vocab.get(left), vocab.get(right))
                && mergeable(l)
                && mergeable(r)
            {
                merges.push((scores[id], l, r, id as u32));
            }
        }
    }
    // Best score first; among equals, as Hugging Face orders them.
    merges.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.3.cmp(&b.3))
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
    });
    let merges = merges
        .into_iter()
        .map(|(_, l, r, _)| (tokens[l as usize].clone(), tokens[r as usize].clone()))
        .collect();
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true)
        .fuse_unk(true);
    if let Some(unknown) = types.iter().position(|t| *t == TokenType::Unknown) {
        builder = builder.unk_token(tokens[unknown].clone());
    }
    let bpe = builder
        .build()
        .map_err(|e| format!("its tokenizer does not build: {e}"))?;
    let mut tokenizer = Tokenizer::new(bpe);
    // llama.cpp's default is a space before the text (Llama 2's habit);
    // Gemma's files say otherwise.
    let space_prefix = content
        .metadata
        .get("tokenizer.ggml.add_space_prefix")
        .and_then(|v| v.to_bool().ok())
        .unwrap_or(true);
    let spaces = Replace::new(" ", SPACE).map_err(|e| e.to_string())?;
    let normalizer: NormalizerWrapper = match space_prefix {
        true => {
            NormalizerSequence::new(vec![Prepend::new(SPACE.into()).into(), spaces.into()]).into()
        }
        false => spaces.into(),
    };
    tokenizer
        .with_normalizer(Some(normalizer))
        .map_err(|e| e.to_string())?;
    let mut decoders: Vec<DecoderWrapper> = vec![
        Replace::new(SPACE, " ").map_err(|e| e.to_string())?.into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if space_prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tokenizer)
}

/// Control and user-defined tokens are found in text as they are written
/// (`<|im_start|>` is one token, not twelve characters'); control ones are
/// special (left out of decoded text).
fn add_special_tokens(
    tokenizer: &mut Tokenizer,
    tokens: &[String],
    types: &[TokenType],
) -> Result<(), String> {
    let added: Vec<AddedToken> = tokens
        .iter()
        .zip(types)
        .filter_map(|(token, kind)| match kind {
            TokenType::Control => Some(AddedToken::from(token.clone(), true)),
            // Found in the text as written, before spaces become `▁`
            // (Gemma's runs of spaces and of newlines are such tokens), as
            // llama.cpp finds them.
            TokenType::UserDefined => {
                Some(AddedToken::from(token.clone(), false).normalized(false))
            }
            _ => None,
        })
        .collect();
    tokenizer
        .add_tokens(added)
        .map(|_| ())
        .map_err(|e| format!("its tokens do not build: {e}"))
}

fn vocab_of(tokens: &[String]) -> Vocab {
    // A later duplicate does not displace the first (llama.cpp keeps the
    // first id for a text).
    let mut vocab = Vocab::with_capacity(tokens.len());
    for (id, token) in tokens.iter().enumerate() {
        vocab.entry(token.clone()).or_insert(id as u32);
    }
    vocab
}

/// `<0x0A>`'s byte.
fn byte_piece(name: &str) -> Option<u8> {
    let hex = name.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// The bytes a byte-level entry stands for: each character one byte, the
/// unprintable bytes having been moved to U+0100 and up, in byte order. An
/// entry outside that alphabet stands for its own text.
fn byte_level_bytes(name: &str) -> Vec<u8> {
    name.chars()
        .map(byte_of_char)
        .collect::<Option<Vec<u8>>>()
        .unwrap_or_else(|| name.as_bytes().to_vec())
}

fn byte_of_char(c: char) -> Option<u8> {
    fn printable(b: u8) -> bool {
        matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
    }
    // The n-th unprintable byte is written as U+0100 + n.
    static MOVED: LazyLock<Vec<u8>> =
        LazyLock::new(|| (0..=255u8).filter(|b| !printable(*b)).collect());
    let code = c as u32;
    if code < 0x100 {
        return printable(code as u8).then_some(code as u8);
    }
    MOVED.get(code as usize - 0x100).copied()
}

fn text<'c>(content: &'c Content, key: &str) -> Result<Option<&'c str>, String> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("its {key} is not text")),
    }
}

fn array<'c>(content: &'c Content, key: &str) -> Result<Option<&'c [Value]>, String> {
    match content.metadata.get(key) {
        None => Ok(None),
        Some(Value::Array(values)) if values.len() <= MAX_TOKENS * 8 => Ok(Some(values)),
        Some(Value::Array(values)) => Err(format!(
            "its {key} holds {} entries, more than a tokenizer has",
            values.len()
        )),
        Some(_) => Err(format!("its {key} is not a list")),
    }
}

fn strings(content: &Content, key: &str) -> Result<Option<Vec<String>>, String> {
    let Some(values) = array(content, key)? else {
        return Ok(None);
    };
    values
        .iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(format!("its {key} holds something other than text")),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

fn numbers(content: &Content, key: &str) -> Result<Option<Vec<i64>>, String> {
    let Some(values) = array(content, key)? else {
        return Ok(None);
    };
    values
        .iter()
        .map(|v| match v {
            Value::I32(n) => Ok(*n as i64),
            Value::U32(n) => Ok(*n as i64),
            Value::I8(n) => Ok(*n as i64),
            Value::U8(n) => Ok(*n as i64),
            Value::I16(n) => Ok(*n as i64),
            Value::U16(n) => Ok(*n as i64),
            Value::I64(n) => Ok(*n),
            _ => Err(format!(
                "its {key} holds something other than whole numbers"
            )),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

fn floats(content: &Content, key: &str) -> Result<Option<Vec<f32>>, String> {
    let Some(values) = array(content, key)? else {
        return Ok(None);
    };
    values
        .iter()
        .map(|v| match v {
            Value::F32(x) => Ok(*x),
            Value::F64(x) => Ok(*x as f32),
            _ => Err(format!("its {key} holds something other than numbers")),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(entries: Vec<(&str, Value)>) -> Content {
        Content {
            magic: candle_core::quantized::gguf_file::VersionedMagic::GgufV3,
            metadata: entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            tensor_infos: std::collections::HashMap::new(),
            tensor_data_offset: 0,
        }
    }

    fn list(items: &[&str]) -> Value {
        Value::Array(items.iter().map(|s| Value::String((*s).into())).collect())
    }

    /// A SentencePiece vocabulary: byte pieces for the newline, pieces
    /// whose scores make "hello" split as a model's would.
    fn sentence_piece_header(space_prefix: bool) -> Content {
        let pieces = [
            ("<unk>", 0.0, 2),
            ("<bos>", 0.0, 3),
            ("<start_of_turn>", 0.0, 3),
            ("<0x0A>", 0.0, 6),
            ("\u{2581}", -1.0, 1),
            ("h", -2.0, 1),
            ("e", -2.0, 1),
            ("l", -2.0, 1),
            ("o", -2.0, 1),
            ("he", -5.0, 1),
            ("ll", -3.0, 1),
            ("llo", -4.0, 1),
            ("hello", -1.5, 1),
            ("\u{2581}hello", -1.2, 1),
        ];
        header(vec![
            ("tokenizer.ggml.model", Value::String("llama".into())),
            ("tokenizer.ggml.tokens", list(&pieces.map(|(p, _, _)| p))),
            (
                "tokenizer.ggml.scores",
                Value::Array(pieces.iter().map(|(_, s, _)| Value::F32(*s)).collect()),
            ),
            (
                "tokenizer.ggml.token_type",
                Value::Array(pieces.iter().map(|(_, _, t)| Value::I32(*t)).collect()),
            ),
            ("tokenizer.ggml.add_space_prefix", Value::Bool(space_prefix)),
        ])
    }

    fn ids(vocabulary: &Vocabulary, text: &str) -> Vec<u32> {
        vocabulary
            .tokenizer
            .encode(text, false)
            .unwrap()
            .get_ids()
            .to_vec()
    }

    #[test]
    fn sentence_piece_merges_by_score_falls_back_to_bytes_and_reads_its_marks() {
        let vocabulary = Vocabulary::from_gguf(&sentence_piece_header(false)).unwrap();
        // ll (-3) before llo (-4) before he (-5); then hello (-1.5).
        assert_eq!(ids(&vocabulary, "hello"), [12]);
        // A space is ▁, which joins into ▁hello.
        assert_eq!(ids(&vocabulary, "hello hello"), [12, 13]);
        // No piece holds a newline: its byte piece stands in.
        assert_eq!(ids(&vocabulary, "he\nhello"), [9, 3, 12]);
        // The turn's mark as the template writes it is one token.
        assert_eq!(ids(&vocabulary, "<start_of_turn>hello"), [2, 12]);
        let decoded = vocabulary.tokenizer.decode(&[2, 12, 3, 13], true).unwrap();
        assert_eq!(decoded, "hello\n hello");
        assert_eq!(vocabulary.bytes_of(13).unwrap(), b" hello");
        assert_eq!(vocabulary.bytes_of(3).unwrap(), b"\n");
        assert_eq!(vocabulary.bytes_of(2), None);
        assert_eq!(vocabulary.bytes_of(1), None);
    }

    #[test]
    fn sentence_piece_puts_a_space_first_where_the_file_says() {
        let vocabulary = Vocabulary::from_gguf(&sentence_piece_header(true)).unwrap();
        assert_eq!(ids(&vocabulary, "hello"), [13]);
        assert_eq!(vocabulary.tokenizer.decode(&[13], true).unwrap(), "hello");
    }

    /// A byte-level vocabulary in which "12" and "hi" are tokens.
    fn byte_level_header(pre: &str) -> Content {
        header(vec![
            ("tokenizer.ggml.model", Value::String("gpt2".into())),
            ("tokenizer.ggml.pre", Value::String(pre.into())),
            (
                "tokenizer.ggml.tokens",
                list(&[
                    "<|im_start|>",
                    "1",
                    "2",
                    "12",
                    "h",
                    "i",
                    "hi",
                    "\u{120}",
                    "\u{120}hi",
                ]),
            ),
            (
                "tokenizer.ggml.token_type",
                Value::Array([3, 1, 1, 1, 1, 1, 1, 1, 1].map(Value::I32).to_vec()),
            ),
            ("tokenizer.ggml.merges", list(&["1 2", "h i", "\u{120} hi"])),
        ])
    }

    #[test]
    fn byte_level_text_is_split_as_the_files_pre_tokenizer_says() {
        // SmolLM's splits every digit, as the model was trained.
        let smollm = Vocabulary::from_gguf(&byte_level_header("smollm")).unwrap();
        assert_eq!(ids(&smollm, "12"), [1, 2]);
        // Llama 3's keeps up to three digits together.
        let llama3 = Vocabulary::from_gguf(&byte_level_header("llama-bpe")).unwrap();
        assert_eq!(ids(&llama3, "12"), [3]);
        // No space is put before the text; one inside it is its own byte.
        assert_eq!(ids(&llama3, "hi hi"), [6, 8]);
        assert_eq!(ids(&llama3, "<|im_start|>hi"), [0, 6]);
        assert_eq!(llama3.bytes_of(8).unwrap(), b" hi");
        assert_eq!(llama3.tokenizer.decode(&[0, 6, 8], true).unwrap(), "hi hi");
    }

    #[test]
    fn a_tokenizer_the_node_cannot_run_is_refused_with_its_name() {
        let error = Vocabulary::from_gguf(&byte_level_header("tekken"))
            .err()
            .unwrap();
        assert!(error.contains("\"tekken\""), "{error}");
        let mut content = byte_level_header("gpt-2");
        content
            .metadata
            .insert("tokenizer.ggml.model".into(), Value::String("rwkv".into()));
        let error = Vocabulary::from_gguf(&content).err().unwrap();
        assert!(error.contains("\"rwkv\""), "{error}");
    }

    /// The vocabulary of the model file `name` in the models folder the
    /// set-up fills (scripts/model.sh).
    fn real_vocabulary(file: &str) -> Vocabulary {
        let dir = std::env::var_os("AGENTSITE_MODELS").map_or_else(
            || {
                std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                    .join(".cache/agentsite/models")
            },
            std::path::PathBuf::from,
        );
        let path = dir.join(file);
        let mut reader = std::fs::File::open(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (bash scripts/model.sh --gemma obtains it)",
                path.display()
            )
        });
        let content = Content::read(&mut reader).unwrap();
        Vocabulary::from_gguf(&content).unwrap()
    }

    /// Texts of every kind tokenized as llama.cpp tokenizes them, on the
    /// vocabularies of real models (tests/fixtures/tokens, made by its
    /// make_tokens.py with llama.cpp).
    fn agrees_with_llama_cpp(fixture: &str, file: &str) {
        let vocabulary = real_vocabulary(file);
        let path = format!(
            "{}/../tests/fixtures/tokens/{fixture}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for case in cases {
            let text = case["text"].as_str().unwrap();
            let expected: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
            assert_eq!(ids(&vocabulary, text), expected, "{fixture}: {text:?}");
            // What the grammar engine is told each token stands for spells
            // the text back (control tokens aside).
            let spelled: Vec<u8> = expected
                .iter()
                .flat_map(|id| vocabulary.bytes_of(*id).unwrap_or_default())
                .collect();
            let decoded = vocabulary.tokenizer.decode(&expected, true).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&spelled),
                decoded,
                "{fixture}: {text:?}"
            );
        }
    }

    #[test]
    fn smollm2s_byte_level_vocabulary_tokenizes_as_llama_cpp_does() {
        agrees_with_llama_cpp("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf");
    }

    #[test]
    fn gemma3s_sentence_piece_vocabulary_tokenizes_as_llama_cpp_does() {
        agrees_with_llama_cpp("gemma3", "gemma-3-270m-q4_k_m.gguf");
    }

    #[test]
    fn the_byte_level_alphabet_covers_every_byte_once() {
        let bytes: std::collections::HashSet<u8> = (0..0x200u32)
            .filter_map(char::from_u32)
            .filter_map(byte_of_char)
            .collect();
        assert_eq!(bytes.len(), 256);
        assert_eq!(byte_of_char('Ġ'), Some(b' '));
        assert_eq!(byte_of_char('Ċ'), Some(b'\n'));
        assert_eq!(byte_of_char('a'), Some(b'a'));
        assert_eq!(byte_of_char(' '), None);
    }
}
