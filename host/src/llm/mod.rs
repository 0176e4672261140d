//! The node's own language models.
//!
//! A model is anything that completes a chat: a server that speaks the
//! OpenAI chat-completions API ([`openai`]) or a GGUF file run inside the
//! node ([`embedded`]). Both sit behind [`ChatModel`], so every user of a
//! model (an agent's `llm` import, the node's `/v1` endpoint, a peer that
//! borrows a shared model, goals and chat) asks the same way and gets the
//! same shape back: a [`Completion`], with text arriving as [`Delta`]s on
//! the way when the caller wants them.
//!
//! [`Models`] holds a node's models by name, loads the embedded one on first
//! use, and bounds how many requests each runs at once.

pub mod config;
pub mod embedded;
pub mod ledger;
pub mod models;
pub mod openai;
pub mod serve;
pub mod share;
#[cfg_attr(not(feature = "embedded-model"), allow(dead_code))]
mod template;
pub mod wire;

pub use config::LlmConfig;

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Messages one request may carry, whoever sends it (an agent, a client of
/// `/v1`): the node builds no unbounded request.
pub const MAX_MESSAGES: usize = 1000;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// The output of a tool the model asked for.
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// With `Assistant`: the tools the model asked to call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// With `Tool`: the id of the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Message::new(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Message::new(Role::User, content)
    }
}

/// A tool the model may ask to call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A call of a tool, as the model asked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Unique within the conversation; a `Tool` message answers it by this id.
    pub id: String,
    pub name: String,
    /// The arguments, a JSON object as text (as the model wrote it).
    pub arguments: String,
}

/// Whether the model must, may or must not call the tools it is offered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides: text, tool calls, or text then tool calls.
    #[default]
    Auto,
    /// Text only; the tools are not shown to the model.
    None,
    /// At least one tool call, of any of the tools.
    Required,
    /// At least one call, of this tool.
    Named(String),
}

/// A chat completion request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    /// Tools the model may call instead of answering.
    pub tools: Vec<ToolSpec>,
    pub tool_choice: ToolChoice,
    /// The most tokens to generate; the model's own bound when `None`.
    pub max_tokens: Option<u32>,
    /// 0 (or `None`) is greedy decoding: the same answer every time.
    pub temperature: Option<f32>,
    /// The answer must be a JSON value matching this schema.
    pub response_schema: Option<serde_json::Value>,
    /// A seed for sampling at a temperature above 0.
    pub seed: Option<u64>,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The model ended its turn.
    EndTurn,
    /// `max_tokens` was reached.
    MaxTokens,
    /// The model asked for tool calls.
    ToolCalls,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end-turn",
            StopReason::MaxTokens => "max-tokens",
            StopReason::ToolCalls => "tool-calls",
        }
    }

    /// The OpenAI API's `finish_reason`.
    pub fn openai(self) -> &'static str {
        match self {
            StopReason::EndTurn => "stop",
            StopReason::MaxTokens => "length",
            StopReason::ToolCalls => "tool_calls",
        }
    }
}

/// Tokens a request used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

impl Usage {
    pub fn total(&self) -> u64 {
        u64::from(self.prompt_tokens) + u64::from(self.completion_tokens)
    }
}

/// A finished chat completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The reply's text (empty when the model only called tools).
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// The model that answered.
    pub model: String,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// From the request to the first generated token.
    pub time_to_first_token: Option<Duration>,
}

/// A piece of a completion as it is generated.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// More text of the reply.
    Text(String),
    /// A complete tool call.
    ToolCall(ToolCall),
}

/// Why a chat completion failed. Each is one line a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmFailure {
    /// The operator has not granted the model to the agent.
    #[error("{0}")]
    NotGranted(String),
    /// The request cannot be answered as asked (no messages, too long for
    /// the model's context, a schema the model cannot satisfy, ...).
    #[error("{0}")]
    InvalidRequest(String),
    /// The model declined.
    #[error("{0}")]
    Refused(String),
    /// A token budget is used up.
    #[error("{0}")]
    BudgetExceeded(String),
    /// The model ran as many requests as it may and the request's deadline
    /// passed while it waited, or its queue is full.
    #[error("{0}")]
    Busy(String),
    /// The deadline passed during generation.
    #[error("{0}")]
    DeadlineExceeded(String),
    /// The model could not be reached or failed; retrying may succeed.
    #[error("{0}")]
    Unavailable(String),
}

impl LlmFailure {
    /// A short label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmFailure::NotGranted(_) => "not-granted",
            LlmFailure::InvalidRequest(_) => "invalid-request",
            LlmFailure::Refused(_) => "refused",
            LlmFailure::BudgetExceeded(_) => "budget-exceeded",
            LlmFailure::Busy(_) => "busy",
            LlmFailure::DeadlineExceeded(_) => "deadline-exceeded",
            LlmFailure::Unavailable(_) => "unavailable",
        }
    }
}

/// Runs `f` when dropped: work that must happen however a future ends,
/// finished or dropped midway.
pub(crate) fn on_drop<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f()
            }
        }
    }
    Guard(Some(f))
}

/// Where generated pieces go while a completion runs, if anywhere.
pub type DeltaSink = Option<mpsc::Sender<Delta>>;

/// A completion that arrived whole (from a client's or another node's
/// model) as the pieces a streamed one would have sent. A receiver that
/// went away stops nobody: the completion is still returned whole.
pub(crate) async fn send_whole(completion: &Completion, sink: &mpsc::Sender<Delta>) {
    if !completion.content.is_empty() {
        let _ = sink.send(Delta::Text(completion.content.clone())).await;
    }
    for call in &completion.tool_calls {
        let _ = sink.send(Delta::ToolCall(call.clone())).await;
    }
}

/// A model's state, as `agentsite models` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelStatus {
    pub name: String,
    /// `openai` or `gguf`.
    pub kind: String,
    /// Where it is: a base URL or a file.
    pub location: String,
    /// `ready`, `loaded`, `not loaded`, `reachable`, or why it is not.
    pub state: String,
    /// Bytes of the model file, for embedded models.
    pub size: Option<u64>,
    pub default: bool,
}

/// A language model: completes chats.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// Its name in the node's configuration.
    fn name(&self) -> &str;

    /// Completes `request` before `deadline`, sending text to `sink` as it
    /// is generated.
    async fn complete(
        &self,
        request: ChatRequest,
        deadline: Instant,
        sink: DeltaSink,
    ) -> Result<Completion, LlmFailure>;

    /// Its state, checked now (a server is asked; a file is looked at).
    async fn status(&self) -> ModelStatus;

    /// Gets ready to answer (an embedded model reads its file), so that a
    /// first request does not wait for it.
    async fn prepare(&self) -> Result<(), LlmFailure> {
        Ok(())
    }
}
