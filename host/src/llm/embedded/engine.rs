//! The engine of embedded models: the node's llama forward pass
//! (`agentsite_llama`), with the tokenizer and chat template the GGUF file
//! carries.

use super::super::template::{self, ChatTemplate};
use super::super::{
    ChatRequest, Completion, Delta, DeltaSink, LlmFailure, StopReason, ToolChoice, ToolSpec, Usage,
};
use super::constraint::{Constraint, Grammars};
use super::vocabulary::Vocabulary;
use agentsite_llama::{Model, PROMPT_CHUNK, ReadError, Session};
use candle_core::quantized::gguf_file;
use rand::{Rng as _, SeedableRng as _};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Tokens generated when a request does not say.
const DEFAULT_MAX_TOKENS: usize = 512;

/// A model read into memory.
pub struct Loaded {
    weights: Model,
    vocabulary: Vocabulary,
    /// The token a prompt starts with, for models that were trained so.
    begin: Option<u32>,
    template: ChatTemplate,
    /// Holds answers to a schema or to the tool-call form.
    grammars: Grammars,
    /// Tokens that end the assistant's turn.
    stop_tokens: Vec<u32>,
    /// The smaller of the model's trained context and the configured one.
    context: usize,
    /// The most bytes of text one token stands for (its vocabulary's
    /// longest entry, as written): a prompt of `n` bytes is at least
    /// `n / longest_token` tokens, known before it is tokenized.
    longest_token: usize,
}

/// What a GGUF file holds, read from its header without its weights.
pub struct FileFacts {
    /// Parameters of all its tensors.
    pub parameters: u64,
    /// The context the model was trained for, in tokens.
    pub trained_context: Option<usize>,
}

/// Checks that the GGUF file at `path` holds a model of a family the
/// engine runs, with a tokenizer the node can run, reading only its header.
pub fn inspect(path: &Path) -> Result<FileFacts, String> {
    let mut file = open(path)?;
    let content = read_header(path, &mut file)?;
    facts_of(&path.display().to_string(), &content)
}

/// [`inspect`] of a file still being written: `None` while its header is
/// not all there. Messages call the file `called` (the URL it comes from).
pub fn inspect_partial(path: &Path, called: &str) -> Option<Result<FileFacts, String>> {
    fn cut_short(error: &candle_core::Error) -> bool {
        match error {
            candle_core::Error::Io(e) => e.kind() == std::io::ErrorKind::UnexpectedEof,
            candle_core::Error::WithBacktrace { inner, .. }
            | candle_core::Error::Context { inner, .. }
            | candle_core::Error::WithPath { inner, .. } => cut_short(inner),
            _ => false,
        }
    }
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) => return Some(Err(format!("cannot open {}: {e}", path.display()))),
    };
    match gguf_file::Content::read(&mut file) {
        Err(e) if cut_short(&e) => None,
        Err(e) => Some(Err(not_gguf(called, e))),
        Ok(content) => Some(facts_of(called, &content)),
    }
}

/// What the header `content` of the file `called` says, once its family
/// and tokenizer are known to run.
fn facts_of(called: &str, content: &gguf_file::Content) -> Result<FileFacts, String> {
    check_family(called, content)?;
    vocabulary_of(called, content)?;
    Ok(FileFacts {
        parameters: content
            .tensor_infos
            .values()
            .map(|info| info.shape.elem_count() as u64)
            .sum(),
        trained_context: trained_context(content),
    })
}

/// The context the model was trained for, in tokens, as its family's
/// metadata says.
fn trained_context(content: &gguf_file::Content) -> Option<usize> {
    let family = Model::family_of(content).ok()?;
    content
        .metadata
        .get(&format!("{family}.context_length"))
        .and_then(|v| v.to_u32().ok())
        .map(|n| n as usize)
}

fn open(path: &Path) -> Result<std::fs::File, String> {
    std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "no model file at {} (the set-up scripts put the default model there: bash scripts/model.sh)",
            path.display()
        ),
        _ => format!("cannot open {}: {e}", path.display()),
    })
}

/// The header of the GGUF file at `path`, refused unless of a family the
/// engine runs.
fn read_header(path: &Path, file: &mut std::fs::File) -> Result<gguf_file::Content, String> {
    let called = path.display().to_string();
    let content = gguf_file::Content::read(file).map_err(|e| not_gguf(&called, e))?;
    check_family(&called, &content)?;
    Ok(content)
}

fn not_gguf(called: &str, error: candle_core::Error) -> String {
    format!("{called} is not a complete GGUF file: {error}")
}

fn check_family(called: &str, content: &gguf_file::Content) -> Result<(), String> {
    Model::family_of(content)
        .map(|_| ())
        .map_err(|why| format!("{called} cannot be run: {why}"))
}

/// Reads and checks the GGUF file at `path`.
pub fn read_model(
    path: &Path,
    expected_sha256: Option<&str>,
    context: usize,
) -> Result<Loaded, String> {
    let mut file = open(path)?;
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
    let content = read_header(path, &mut file)?;
    let vocabulary = vocabulary_of(&path.display().to_string(), &content)?;
    let tokenizer = &vocabulary.tokenizer;
    let token_id = |key: &str| {
        content
            .metadata
            .get(key)
            .and_then(|v| v.to_u32().ok())
            .filter(|id| (*id as usize) < vocabulary.size())
    };
    let token_text = |id: Option<u32>| {
        id.and_then(|id| tokenizer.id_to_token(id))
            .unwrap_or_default()
    };
    let chat_template = content
        .metadata
        .get("tokenizer.chat_template")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .or_else(|| {
            tokenizer
                .token_to_id("<start_of_turn>")
                .map(|_| template::GEMMA_TURNS.to_owned())
        });
    let template = ChatTemplate::new(chat_template.as_deref())?.with_special_tokens(
        token_text(token_id("tokenizer.ggml.bos_token_id")),
        token_text(token_id("tokenizer.ggml.eos_token_id")),
    );
    let begins_with_bos = content
        .metadata
        .get("tokenizer.ggml.add_bos_token")
        .and_then(|v| v.to_bool().ok())
        .unwrap_or(false);
    let begin = token_id("tokenizer.ggml.bos_token_id").filter(|_| begins_with_bos);
    let trained_context = trained_context(&content).unwrap_or(context);
    let mut stop_tokens = Vec::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        if let Some(id) = token_id(key)
            && !stop_tokens.contains(&id)
        {
            stop_tokens.push(id);
        }
    }
    // Each family's end of a turn, for files whose header names only the
    // end of the text.
    for marker in [
        "<|im_end|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<end_of_turn>",
        "<|end|>",
        "</s>",
    ] {
        if let Some(id) = tokenizer.token_to_id(marker)
            && !stop_tokens.contains(&id)
        {
            stop_tokens.push(id);
        }
    }
    let grammars = Grammars::new(&vocabulary, &stop_tokens, template.format())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let weights = Model::map(&content, &file).map_err(|e| match e {
        ReadError::CutShort(why) => {
            format!("{} is not a complete GGUF file: {why}", path.display())
        }
        ReadError::Unfit(why) => format!("{} cannot be run: {why}", path.display()),
    })?;
    // An entry's text as the vocabulary writes it is at least as long as
    // the bytes it stands for (byte-level entries spell each byte as one
    // character, SentencePiece ones the text itself with a wider space).
    let longest_token = tokenizer
        .get_vocab(true)
        .keys()
        .map(String::len)
        .max()
        .unwrap_or(1)
        .max(1);
    Ok(Loaded {
        weights,
        vocabulary,
        begin,
        template,
        grammars,
        stop_tokens,
        context: context.min(trained_context),
        longest_token,
    })
}

/// The tokenizer the GGUF file `called` carries.
fn vocabulary_of(called: &str, content: &gguf_file::Content) -> Result<Vocabulary, String> {
    Vocabulary::from_gguf(content)
        .map_err(|why| format!("{called} carries no usable tokenizer: {why}"))
}

fn sha256_of(file: &mut std::fs::File) -> std::io::Result<String> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Runs one request to the end; called on a blocking thread, which waits
/// while the model's threads do the work.
pub fn generate(
    loaded: &Loaded,
    model_name: &str,
    request: ChatRequest,
    started: Instant,
    deadline: Instant,
    sink: DeltaSink,
    abandoned: &AtomicBool,
) -> Result<Completion, LlmFailure> {
    {
        // The tools a call may be made of, as the prompt shows them.
        let offered: Vec<ToolSpec> = if request.tool_choice == ToolChoice::None {
            Vec::new()
        } else {
            super::call_grammar::usable_tools(&request)
                .into_iter()
                .cloned()
                .collect()
        };
        let tools: &[ToolSpec] = &offered;
        let prompt = loaded
            .template
            .render(&request.messages, tools, request.response_schema.as_ref())
            .map_err(LlmFailure::InvalidRequest)?;
        // Tokenizing costs many times the text's size in memory: a prompt
        // too long for the window by its bytes alone is refused before.
        let fewest_tokens = prompt.len().div_ceil(loaded.longest_token);
        if fewest_tokens + 1 > loaded.context {
            return Err(LlmFailure::InvalidRequest(format!(
                "the conversation is at least {fewest_tokens} tokens long ({} bytes); model {model_name:?} takes at most {} tokens",
                prompt.len(),
                loaded.context
            )));
        }
        let mut constraint = loaded.grammars.for_request(&request)?;
        let encoding = loaded
            .vocabulary
            .tokenizer
            .encode(prompt, false)
            .map_err(|e| {
                LlmFailure::InvalidRequest(format!("cannot tokenize the conversation: {e}"))
            })?;
        // One begin-of-text token, whether or not the template wrote it.
        let prompt_ids: Vec<u32> = match loaded.begin {
            Some(begin) if encoding.get_ids().first() != Some(&begin) => std::iter::once(begin)
                .chain(encoding.get_ids().iter().copied())
                .collect(),
            _ => encoding.get_ids().to_vec(),
        };
        let prompt_ids = prompt_ids.as_slice();
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
        let failed =
            |e: String| LlmFailure::Unavailable(format!("model {model_name:?} failed: {e}"));
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

        // The cache holds what this request can fill, and no more.
        let mut session = Session::new(&loaded.weights, prompt_ids.len() + max_tokens);
        for chunk in prompt_ids.chunks(PROMPT_CHUNK) {
            if must_stop() {
                return Err(stopped());
            }
            session.forward(chunk).map_err(failed)?;
        }

        let mut sampler = Sampler::new(request.temperature, request.seed.unwrap_or(0));
        let mut penalties = Penalties::new(request.frequency_penalty, request.presence_penalty);
        let mut generated: Vec<u32> = Vec::new();
        let mut text = String::new();
        let mut time_to_first_token = None;
        let mut stop_reason = StopReason::MaxTokens;
        // Text is sent when it is whole: a token may end inside a character.
        let mut sent = 0;
        while generated.len() < max_tokens {
            let logits = session.logits();
            penalties.apply(logits);
            if let Some(constraint) = &mut constraint {
                constraint.mask(logits)?;
            }
            let next = sampler.sample(logits);
            time_to_first_token.get_or_insert_with(|| started.elapsed());
            if loaded.stop_tokens.contains(&next) {
                stop_reason = StopReason::EndTurn;
                break;
            }
            if let Some(constraint) = &mut constraint {
                constraint.advance(next)?;
            }
            generated.push(next);
            penalties.count(next);
            text = loaded
                .vocabulary
                .tokenizer
                .decode(&generated, true)
                .map_err(|e| LlmFailure::Unavailable(format!("cannot decode the answer: {e}")))?;
            if let Some(sink) = &sink
                && !text.ends_with('\u{FFFD}')
                && text.len() > sent
                && tools.is_empty()
            {
                // A receiver that went away stops nobody: the answer is
                // still returned whole.
                let _ = sink.blocking_send(Delta::Text(text[sent..].to_owned()));
                sent = text.len();
            }
            if constraint.as_ref().is_some_and(Constraint::is_finished) {
                stop_reason = StopReason::EndTurn;
                break;
            }
            // Free text that has fallen into a loop ends with its first
            // round: a small model decoding greedily can otherwise repeat
            // a phrase until its tokens run out.
            if constraint.is_none()
                && let Some(keep) = looping(&generated)
            {
                generated.truncate(keep);
                text = loaded
                    .vocabulary
                    .tokenizer
                    .decode(&generated, true)
                    .map_err(|e| {
                        LlmFailure::Unavailable(format!("cannot decode the answer: {e}"))
                    })?;
                stop_reason = StopReason::EndTurn;
                break;
            }
            if generated.len() == max_tokens {
                break;
            }
            if must_stop() {
                return Err(stopped());
            }
            session.forward(&[next]).map_err(failed)?;
        }

        let mut call_number = 0;
        let parsed = loaded.template.format().parse(&text, tools, || {
            call_number += 1;
            format!("call_{call_number}")
        });
        let (content, tool_calls) = match parsed {
            Ok(parsed) => parsed,
            // A call cut off by `max_tokens` is no call: the text is the answer,
            // and the stop reason says why it is unfinished.
            Err(_) if stop_reason == StopReason::MaxTokens => (text.clone(), Vec::new()),
            Err(why) => return Err(LlmFailure::Unavailable(why)),
        };
        if let Some(sink) = &sink {
            if tools.is_empty() && text.len() > sent {
                let _ = sink.blocking_send(Delta::Text(text[sent..].to_owned()));
            } else if !tools.is_empty() {
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
}

/// Tokens a loop's rounds must cover before it counts as one: a phrase of
/// a few tokens said twice is ordinary text, said a dozen times a loop.
const LOOP_SPAN: usize = 24;
/// The longest round of a loop looked for, in tokens.
const LOOP_ROUND: usize = 64;

/// Whether `tokens` end in a loop: one round of tokens repeated back to
/// back, at least twice and over at least [`LOOP_SPAN`] tokens. The tokens
/// to keep (up to the end of the first round) when they do.
fn looping(tokens: &[u32]) -> Option<usize> {
    for round in 1..=LOOP_ROUND.min(tokens.len() / 2) {
        let rounds = LOOP_SPAN.div_ceil(round).max(2);
        let span = rounds * round;
        if span > tokens.len() {
            continue;
        }
        let mut start = tokens.len() - span;
        let tail = &tokens[start..];
        if tail
            .chunks_exact(round)
            .all(|chunk| chunk == &tail[..round])
        {
            // The loop began where its rounds began.
            while start >= round && tokens[start - round..start] == tokens[start..start + round] {
                start -= round;
            }
            return Some(start + round);
        }
    }
    None
}

/// The OpenAI API's frequency and presence penalties: each token already
/// generated loses `frequency` per time it was, and `presence` once.
struct Penalties {
    frequency: f32,
    presence: f32,
    counts: HashMap<u32, u32>,
}

impl Penalties {
    fn new(frequency: Option<f32>, presence: Option<f32>) -> Self {
        let valid = |p: Option<f32>| p.filter(|p| p.is_finite()).unwrap_or(0.0);
        Penalties {
            frequency: valid(frequency),
            presence: valid(presence),
            counts: HashMap::new(),
        }
    }

    fn count(&mut self, token: u32) {
        if self.frequency != 0.0 || self.presence != 0.0 {
            *self.counts.entry(token).or_default() += 1;
        }
    }

    fn apply(&self, logits: &mut [f32]) {
        for (&token, &count) in &self.counts {
            if let Some(logit) = logits.get_mut(token as usize) {
                *logit -= self.frequency * count as f32 + self.presence;
            }
        }
    }
}

/// Chooses each next token: the likeliest (greedy, reproducible), or drawn
/// from the distribution at a temperature with a seeded generator.
struct Sampler {
    temperature: Option<f32>,
    random: rand::rngs::StdRng,
    weights: Vec<f32>,
}

impl Sampler {
    fn new(temperature: Option<f32>, seed: u64) -> Self {
        Sampler {
            temperature: temperature.filter(|t| *t > 0.0 && t.is_finite()),
            random: rand::rngs::StdRng::seed_from_u64(seed),
            weights: Vec::new(),
        }
    }

    fn sample(&mut self, logits: &[f32]) -> u32 {
        let likeliest = logits
            .iter()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |best, (i, &l)| {
                if l > best.1 { (i, l) } else { best }
            });
        let Some(temperature) = self.temperature else {
            return likeliest.0 as u32;
        };
        self.weights.clear();
        self.weights.extend(
            logits
                .iter()
                .map(|l| ((l - likeliest.1) / temperature).exp()),
        );
        let total: f32 = self.weights.iter().sum();
        let mut point = self.random.random::<f32>() * total;
        for (token, weight) in self.weights.iter().enumerate() {
            if point < *weight {
                return token as u32;
            }
            point -= weight;
        }
        likeliest.0 as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_is_cut_after_its_first_round() {
        // "Parisian weather" forty times: two tokens a round.
        let mut tokens = vec![7, 8, 9];
        for _ in 0..40 {
            tokens.extend([1, 2]);
        }
        assert_eq!(looping(&tokens), Some(5));
        // A sentence of fifteen tokens said twice.
        let sentence: Vec<u32> = (100..115).collect();
        let twice = [sentence.clone(), sentence.clone()].concat();
        assert_eq!(looping(&twice), Some(15));
        // Ordinary text, and a short phrase said twice, are not loops.
        assert_eq!(looping(&(0..200).collect::<Vec<u32>>()), None);
        assert_eq!(looping(&[5, 6, 5, 6, 1, 2, 3]), None);
        assert_eq!(looping(&[1, 2, 1, 2]), None);
    }

    #[test]
    fn penalties_lower_tokens_by_how_often_they_came() {
        let mut penalties = Penalties::new(Some(0.5), Some(1.0));
        for token in [2, 2, 3] {
            penalties.count(token);
        }
        let mut logits = vec![4.0; 5];
        penalties.apply(&mut logits);
        assert_eq!(logits, [4.0, 4.0, 2.0, 2.5, 4.0]);
        // Off unless asked for: nothing is even counted.
        let mut off = Penalties::new(None, Some(f32::NAN));
        off.count(1);
        let mut logits = vec![1.0; 3];
        off.apply(&mut logits);
        assert_eq!(logits, [1.0; 3]);
    }
}
