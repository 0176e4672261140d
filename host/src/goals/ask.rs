//! Asking the node's model on a goal's behalf: every request is counted
//! against the goal's budget and bounded by its deadline.

use super::budget::{Budget, Limit};
use crate::llm::models::Models;
use crate::llm::{ChatRequest, Completion, LlmFailure};
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
}

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
    /// The goal, whose requests take their turns at the model together.
    pub goal: &'a str,
}

impl Asker<'_> {
    /// One request, within the budget's tokens and deadline: at most
    /// `max_tokens` generated.
    pub async fn complete(
        &self,
        mut request: ChatRequest,
        max_tokens: u32,
    ) -> Result<Completion, AskFailure> {
        let left = self.budget.tokens_left().map_err(AskFailure::Limit)?;
        request.max_tokens = Some(max_tokens.min(left.min(u64::from(u32::MAX)) as u32));
        request.caller = Some(format!("goal {}", self.goal));
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
}
