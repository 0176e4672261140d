//! The engine of embedded models: candle's quantized llama, with the
//! tokenizer and chat template the GGUF file carries.

use super::super::template::{self, ChatTemplate};
use super::super::{ChatRequest, Completion, Delta, DeltaSink, LlmFailure, StopReason, Usage};
use candle_core::quantized::gguf_file;
use candle_core::quantized::tokenizer::TokenizerFromGguf;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::generation::LogitsProcessor;
use candle_transformers::models::quantized_llama::ModelWeights;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokenizers::Tokenizer;

/// Tokens generated when a request does not say.
const DEFAULT_MAX_TOKENS: usize = 512;
/// Prompt tokens run through the model at once: longer prompts go in
/// pieces so that attention never holds a prompt-squared matrix.
const PREFILL_CHUNK: usize = 128;

/// A model read into memory.
pub struct Loaded {
    weights: ModelWeights,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    /// Tokens that end the assistant's turn.
    stop_tokens: Vec<u32>,
    /// The smaller of the model's trained context and the configured one.
    context: usize,
}

/// Reads and checks the GGUF file at `path`.
pub fn read_model(
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

/// Runs one request to the end, on a blocking thread.
pub fn generate(
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
