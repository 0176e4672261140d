//! Asking the node's model on a goal's behalf: every request is counted
//! against the goal's budget, and answers that must be structured (a team,
//! a turn) are asked for with a JSON schema, parsed strictly and checked,
//! and asked for once more with the error before the step fails.

use super::budget::{Budget, Limit};
use crate::llm::models::Models;
use crate::llm::{ChatRequest, Completion, LlmFailure, Message};
use serde_json::Value;
use std::time::Instant;

/// Who the node's model requests are counted for in metrics.
pub const REQUESTER: &str = "goals";

/// The node's models as goals use them. The node's [`Models`] in a node;
/// a scripted double in tests of the controller.
#[async_trait::async_trait]
pub trait GoalModel: Send + Sync {
    /// Completes `request` with the model `model` (the node's default when
    /// `None`) before `deadline`.
    async fn complete(
        &self,
        model: Option<&str>,
        request: ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, LlmFailure>;

    /// The name of the model `model` resolves to, or why there is none.
    fn resolve(&self, model: Option<&str>) -> Result<String, String>;

    /// Tokens a request to `model` may fill, when known.
    fn context_window(&self, _model: Option<&str>) -> Option<usize> {
        None
    }
}

#[async_trait::async_trait]
impl GoalModel for Models {
    async fn complete(
        &self,
        model: Option<&str>,
        request: ChatRequest,
        deadline: Instant,
    ) -> Result<Completion, LlmFailure> {
        Models::complete(self, model, request, deadline, None, REQUESTER).await
    }

    fn resolve(&self, model: Option<&str>) -> Result<String, String> {
        self.get(model)
            .map(|gated| gated.name().to_owned())
            .map_err(|e| e.to_string())
    }

    fn context_window(&self, model: Option<&str>) -> Option<usize> {
        self.get(model).ok()?.context_window()
    }
}

/// Characters per token, counted low: English runs near four, JSON and
/// numbers nearer two or three.
const CHARS_PER_TOKEN: usize = 3;
/// Tokens a chat template adds around the messages, at most.
const TEMPLATE_TOKENS: usize = 64;

/// Why a step that asked the model did not get its answer.
#[derive(Debug, Clone, PartialEq)]
pub enum AskFailure {
    /// A limit of the goal stops further requests.
    Limit(Limit),
    /// The model failed, or answered badly twice.
    Failed(String),
}

impl std::fmt::Display for AskFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskFailure::Limit(limit) => write!(f, "the goal's {} limit was hit", limit.as_str()),
            AskFailure::Failed(why) => f.write_str(why),
        }
    }
}

/// The model a goal talks to, with its budget.
pub struct Asker<'a> {
    pub model: &'a dyn GoalModel,
    pub name: Option<&'a str>,
    pub budget: &'a Budget,
}

impl Asker<'_> {
    /// Characters of variable text (a transcript, results) a prompt may
    /// still hold besides `fixed` characters, leaving room for an answer of
    /// `answer_tokens`; unbounded when the model's window is unknown.
    pub fn room(&self, fixed: usize, answer_tokens: u32) -> usize {
        let Some(window) = self.model.context_window(self.name) else {
            return usize::MAX;
        };
        let used = fixed.div_ceil(CHARS_PER_TOKEN) + answer_tokens as usize + TEMPLATE_TOKENS;
        window.saturating_sub(used) * CHARS_PER_TOKEN
    }

    /// One request, within the budget's tokens and deadline: at most
    /// `max_tokens` generated.
    pub async fn complete(
        &self,
        mut request: ChatRequest,
        max_tokens: u32,
    ) -> Result<Completion, AskFailure> {
        let left = self.budget.tokens_left().map_err(AskFailure::Limit)?;
        request.max_tokens = Some(max_tokens.min(left.min(u64::from(u32::MAX)) as u32));
        let outcome = self
            .model
            .complete(self.name, request, self.budget.deadline)
            .await;
        match outcome {
            Ok(completion) => {
                self.budget.spend_tokens(completion.usage.total());
                Ok(completion)
            }
            Err(LlmFailure::DeadlineExceeded(_)) => Err(AskFailure::Limit(Limit::Deadline)),
            Err(failure) => Err(AskFailure::Failed(format!("the model failed: {failure}"))),
        }
    }

    /// An answer that is a JSON value of `schema` accepted by `check`:
    /// asked once, and once more with what was wrong.
    pub async fn structured<T>(
        &self,
        messages: Vec<Message>,
        schema: Value,
        max_tokens: u32,
        check: impl Fn(Value) -> Result<T, String>,
    ) -> Result<T, AskFailure> {
        let mut messages = messages;
        let mut last_error = String::new();
        for attempt in 0..2 {
            let request = ChatRequest {
                messages: messages.clone(),
                response_schema: Some(schema.clone()),
                temperature: Some(0.0),
                ..Default::default()
            };
            let completion = self.complete(request, max_tokens).await?;
            let parsed = if completion.stop_reason == crate::llm::StopReason::MaxTokens {
                Err(format!(
                    "the answer was cut off at {} tokens; keep it shorter",
                    completion.usage.completion_tokens
                ))
            } else {
                serde_json::from_str::<Value>(completion.content.trim())
                    .map_err(|e| format!("the answer is not JSON ({e})"))
                    .and_then(&check)
            };
            match parsed {
                Ok(value) => return Ok(value),
                Err(error) if attempt == 0 => {
                    // What was wrong, not the whole answer: a long wrong
                    // answer would crowd the model's window.
                    messages.push(Message::new(
                        crate::llm::Role::Assistant,
                        crate::text::excerpt(&completion.content, 300).into_owned(),
                    ));
                    messages.push(Message::user(format!(
                        "That answer cannot be used: {error}. Answer again with only a JSON value \
                         that matches the schema."
                    )));
                    last_error = error;
                }
                Err(error) => last_error = error,
            }
        }
        Err(AskFailure::Failed(format!(
            "the model's answer was not what was asked for, twice: {}",
            crate::text::one_line(&last_error, 300)
        )))
    }
}
