//! A GGUF model of the llama family, run inside the node with candle.
//!
//! The file is read once, on first use, into weights every request shares;
//! each request gets its own key-value cache (a clone of the weights is a
//! clone of reference-counted tensors plus an empty cache) and runs on a
//! blocking thread, sending text as it is generated. The tokenizer and the
//! chat template come from the file's own metadata: a GGUF file needs
//! nothing beside it.
//!
//! With no model configured, a node runs SmolLM2-135M-Instruct
//! ([`DEFAULT_FILE`]), which the set-up scripts put in [`models_dir`].

use super::template::{self, ChatTemplate};
use super::{ChatModel, ChatRequest, Completion, Delta, DeltaSink, LlmFailure, ModelStatus};
use super::{StopReason, Usage};
use candle_core::quantized::gguf_file;
use candle_core::quantized::tokenizer::TokenizerFromGguf;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokenizers::Tokenizer;

/// The embedded default model's file name.
pub const DEFAULT_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Its sha256, checked when the set-up scripts obtain it and when it loads.
pub const DEFAULT_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The name the default model goes by.
pub const DEFAULT_NAME: &str = "local";

/// Tokens of context a request may fill unless configured otherwise: the
/// cache grows with it, so it bounds a request's memory.
pub const DEFAULT_CONTEXT: usize = 2048;
/// Tokens generated when a request does not say.
const DEFAULT_MAX_TOKENS: usize = 512;
/// Prompt tokens run through the model at once: longer prompts go in
/// pieces so that attention never holds a prompt-squared matrix.
const PREFILL_CHUNK: usize = 128;

/// Where the node looks for model files it was not told about:
/// `$AGENTSITE_MODELS`, else `~/.cache/agentsite/models`.
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("AGENTSITE_MODELS") {
        return PathBuf::from(dir);
    }
    directories::BaseDirs::new()
        .map(|dirs| dirs.cache_dir().join("agentsite").join("models"))
        .unwrap_or_else(|| PathBuf::from(".agentsite-models"))
}

/// A GGUF model run in the node.
pub struct EmbeddedModel {
    name: String,
    path: PathBuf,
    /// The file's sha256, when it must be one particular file.
    expected_sha256: Option<&'static str>,
    context: usize,
    loaded: Mutex<Option<Arc<Loaded>>>,
    /// Held while loading, so that two first requests load once.
    loading: tokio::sync::Mutex<()>,
}

/// A model read into memory.
struct Loaded {
    weights: ModelWeights,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    /// Tokens that end the assistant's turn.
    stop_tokens: Vec<u32>,
    /// The smaller of the model's trained context and the configured one.
    context: usize,
}

impl EmbeddedModel {
    /// The model in the GGUF file at `path`, called `name`, filling at most
    /// `context` tokens per request.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>, context: usize) -> Self {
        EmbeddedModel {
            name: name.into(),
            path: path.into(),
            expected_sha256: None,
            context,
            loaded: Mutex::new(None),
            loading: tokio::sync::Mutex::new(()),
        }
    }

    /// The embedded default model (SmolLM2-135M-Instruct) from [`models_dir`].
    pub fn default_model() -> Self {
        let mut model = EmbeddedModel::new(
            DEFAULT_NAME,
            models_dir().join(DEFAULT_FILE),
            DEFAULT_CONTEXT,
        );
        model.expected_sha256 = Some(DEFAULT_SHA256);
        model
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the model is in memory.
    pub fn is_loaded(&self) -> bool {
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The model in memory, reading it first if needed.
    async fn load(&self) -> Result<Arc<Loaded>, LlmFailure> {
        if let Some(loaded) = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(loaded);
        }
        let _guard = self.loading.lock().await;
        if let Some(loaded) = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(loaded);
        }
        let path = self.path.clone();
        let expected = self.expected_sha256;
        let context = self.context;
        let loaded = tokio::task::spawn_blocking(move || read_model(&path, expected, context))
            .await
            .map_err(|e| LlmFailure::Unavailable(format!("loading the model failed: {e}")))?
            .map_err(|reason| {
                LlmFailure::Unavailable(format!("model {:?}: {reason}", self.name))
            })?;
        let loaded = Arc::new(loaded);
        *self.loaded.lock().unwrap_or_else(|e| e.into_inner()) = Some(loaded.clone());
        Ok(loaded)
    }
}

#[async_trait::async_trait]
impl ChatModel for EmbeddedModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(
        &self,
        request: ChatRequest,
        deadline: Instant,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure> {
        let started = Instant::now();
        let loaded = self.load().await?;
        let name = self.name.clone();
        // A requester that stops waiting (a client gone, a call cancelled)
        // drops this future; the flag then stops generation at the next
        // token, so an abandoned request does not hold a core.
        let abandoned = Arc::new(AtomicBool::new(false));
        let _abandon_on_drop = AbandonOnDrop(abandoned.clone());
        tokio::task::spawn_blocking(move || {
            generate(&loaded, &name, request, started, deadline, sink, &abandoned)
        })
        .await
        .map_err(|e| LlmFailure::Unavailable(format!("generation failed: {e}")))?
    }

    async fn prepare(&self) -> Result<(), LlmFailure> {
        self.load().await.map(drop)
    }

    async fn status(&self) -> ModelStatus {
        let size = std::fs::metadata(&self.path).ok().map(|m| m.len());
        let state = match (self.is_loaded(), size) {
            (true, _) => "loaded".to_owned(),
            (false, Some(_)) => "not loaded (loads on first use)".to_owned(),
            (false, None) => format!("missing: no file at {}", self.path.display()),
        };
        ModelStatus {
            name: self.name.clone(),
            kind: "gguf".into(),
            location: self.path.display().to_string(),
            state,
            size,
            default: false,
        }
    }
}

/// Reads and checks the GGUF file at `path`.
fn read_model(
    path: &Path,
    expected_sha256: Option<&str>,
    context: usize,
) -> Result<Loaded, String> {
    let mut file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "no model file at {} (the set-up scripts put the default model there: bash scripts/model.sh)",
            path.display()
        ),
        _ => format!("cannot open {}: {e}", path.display()),
    })?;
    if let Some(expected) = expected_sha256 {
        let actual =
            sha256_of(&mut file).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if actual != expected {
            return Err(format!(
                "{} is not the expected file (sha256 {actual}, expected {expected}); obtain it again with bash scripts/model.sh",
                path.display()
            ));
        }
        std::io::Seek::rewind(&mut file).map_err(|e| e.to_string())?;
    }
    let not_gguf =
        |e: candle_core::Error| format!("{} is not a complete GGUF file: {e}", path.display());
    let content = gguf_file::Content::read(&mut file).map_err(not_gguf)?;
    let architecture = content
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    if architecture != "llama" {
        return Err(format!(
            "{} holds a model of the {architecture:?} family; the node runs the llama family",
            path.display()
        ));
    }
    let tokenizer = Tokenizer::from_gguf(&content)
        .map_err(|e| format!("{} carries no usable tokenizer: {e}", path.display()))?;
    let chat_template = content
        .metadata
        .get("tokenizer.chat_template")
        .and_then(|v| v.to_string().ok())
        .cloned();
    let template = ChatTemplate::new(chat_template.as_deref())?;
    let trained_context = content
        .metadata
        .get("llama.context_length")
        .and_then(|v| v.to_u32().ok())
        .map_or(context, |n| n as usize);
    let mut stop_tokens = Vec::new();
    if let Some(eos) = content
        .metadata
        .get("tokenizer.ggml.eos_token_id")
        .and_then(|v| v.to_u32().ok())
    {
        stop_tokens.push(eos);
    }
    for marker in ["<|im_end|>", "<|eot_id|>", "<|end|>", "</s>"] {
        if let Some(id) = tokenizer.token_to_id(marker)
            && !stop_tokens.contains(&id)
        {
            stop_tokens.push(id);
        }
    }
    let (content, mut reader) = requantized(content, &mut file).map_err(not_gguf)?;
    let weights = ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).map_err(not_gguf)?;
    Ok(Loaded {
        weights,
        tokenizer,
        template,
        stop_tokens,
        context: context
            .min(trained_context)
            .min(candle_transformers::models::quantized_llama::MAX_SEQ_LEN),
    })
}

/// The file's tensors with Q4_1 ones turned into Q8_0, as a GGUF in memory.
///
/// candle 0.11 multiplies Q4_1 blocks with its portable scalar code only,
/// while Q8_0 has an AVX2 kernel: about 3.5 times the speed here (see
/// BENCHMARKS.md). Eight-bit blocks hold four-bit values with room to
/// spare, so the answers are those of the file.
fn requantized(
    content: gguf_file::Content,
    file: &mut std::fs::File,
) -> candle_core::Result<(gguf_file::Content, std::io::Cursor<Vec<u8>>)> {
    let device = Device::Cpu;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(file, name, &device)?;
        let tensor = if tensor.dtype() == GgmlDType::Q4_1 {
            QTensor::quantize(&tensor.dequantize(&device)?, GgmlDType::Q8_0)?
        } else {
            tensor
        };
        tensors.push((name.as_str(), tensor));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (*k, v)).collect();
    let mut buffer = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut buffer, &metadata, &refs)?;
    drop(refs);
    drop(tensors);
    buffer.set_position(0);
    let content = gguf_file::Content::read(&mut buffer)?;
    Ok((content, buffer))
}

fn sha256_of(file: &mut std::fs::File) -> std::io::Result<String> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Sets its flag when dropped.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs one request to the end, on a blocking thread.
fn generate(
    loaded: &Loaded,
    model_name: &str,
    request: ChatRequest,
    started: Instant,
    deadline: Instant,
    sink: DeltaSink,
    abandoned: &AtomicBool,
) -> Result<Completion, LlmFailure> {
    let prompt = loaded
        .template
        .render(&request.messages, &request.tools)
        .map_err(LlmFailure::InvalidRequest)?;
    let encoding = loaded.tokenizer.encode(prompt, false).map_err(|e| {
        LlmFailure::InvalidRequest(format!("cannot tokenize the conversation: {e}"))
    })?;
    let prompt_ids = encoding.get_ids();
    let max_tokens = request
        .max_tokens
        .map_or(DEFAULT_MAX_TOKENS, |n| n as usize)
        .max(1);
    if prompt_ids.len() + 1 > loaded.context {
        return Err(LlmFailure::InvalidRequest(format!(
            "the conversation is {} tokens long; model {model_name:?} takes at most {} tokens",
            prompt_ids.len(),
            loaded.context
        )));
    }
    let max_tokens = max_tokens.min(loaded.context - prompt_ids.len());
    let failed = |e: candle_core::Error| {
        LlmFailure::Unavailable(format!("model {model_name:?} failed: {e}"))
    };
    let stopped = || {
        if abandoned.load(Ordering::Relaxed) {
            LlmFailure::DeadlineExceeded(format!(
                "model {model_name:?} stopped: the requester went away"
            ))
        } else {
            LlmFailure::DeadlineExceeded(format!(
                "model {model_name:?} did not finish before the deadline"
            ))
        }
    };
    let must_stop = || Instant::now() >= deadline || abandoned.load(Ordering::Relaxed);

    let mut model = loaded.weights.clone();
    let mut logits = None;
    for (index, chunk) in prompt_ids.chunks(PREFILL_CHUNK).enumerate() {
        if must_stop() {
            return Err(stopped());
        }
        let input = Tensor::new(chunk, &Device::Cpu)
            .and_then(|t| t.unsqueeze(0))
            .map_err(failed)?;
        logits = Some(
            model
                .forward(&input, index * PREFILL_CHUNK)
                .map_err(failed)?,
        );
    }
    let mut logits = logits
        .expect("a prompt has tokens")
        .squeeze(0)
        .map_err(failed)?;

    let temperature = request.temperature.filter(|t| *t > 0.0).map(f64::from);
    let mut sampler = LogitsProcessor::new(request.seed.unwrap_or(0), temperature, None);
    let mut generated: Vec<u32> = Vec::new();
    let mut text = String::new();
    let mut time_to_first_token = None;
    let mut stop_reason = StopReason::MaxTokens;
    // Text is sent when it is whole: a token may end inside a character.
    let mut sent = 0;
    while generated.len() < max_tokens {
        let next = sampler.sample(&logits).map_err(failed)?;
        time_to_first_token.get_or_insert_with(|| started.elapsed());
        if loaded.stop_tokens.contains(&next) {
            stop_reason = StopReason::EndTurn;
            break;
        }
        generated.push(next);
        text = loaded
            .tokenizer
            .decode(&generated, true)
            .map_err(|e| LlmFailure::Unavailable(format!("cannot decode the answer: {e}")))?;
        if let Some(sink) = &sink
            && !text.ends_with('\u{FFFD}')
            && text.len() > sent
            && request.tools.is_empty()
        {
            // A receiver that went away stops nobody: the answer is
            // still returned whole.
            let _ = sink.blocking_send(Delta::Text(text[sent..].to_owned()));
            sent = text.len();
        }
        if must_stop() {
            return Err(stopped());
        }
        let position = prompt_ids.len() + generated.len() - 1;
        let input = Tensor::new(&[next], &Device::Cpu)
            .and_then(|t| t.unsqueeze(0))
            .map_err(failed)?;
        logits = model
            .forward(&input, position)
            .map_err(failed)?
            .squeeze(0)
            .map_err(failed)?;
    }

    let mut call_number = 0;
    let (content, tool_calls) = template::parse_answer(&text, &request.tools, || {
        call_number += 1;
        format!("call_{call_number}")
    })
    .map_err(LlmFailure::Unavailable)?;
    if let Some(sink) = &sink {
        if request.tools.is_empty() && text.len() > sent {
            let _ = sink.blocking_send(Delta::Text(text[sent..].to_owned()));
        } else if !request.tools.is_empty() {
            if !content.is_empty() {
                let _ = sink.blocking_send(Delta::Text(content.clone()));
            }
            for call in &tool_calls {
                let _ = sink.blocking_send(Delta::ToolCall(call.clone()));
            }
        }
    }
    if !tool_calls.is_empty() {
        stop_reason = StopReason::ToolCalls;
    }
    Ok(Completion {
        content,
        tool_calls,
        model: model_name.to_owned(),
        stop_reason,
        usage: Usage {
            prompt_tokens: prompt_ids.len() as u32,
            completion_tokens: generated.len() as u32,
        },
        time_to_first_token,
    })
}
