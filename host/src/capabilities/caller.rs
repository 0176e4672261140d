//! The client a call serves, as the guest's imports reach it.
//!
//! A call made for an MCP client can report progress, send log messages,
//! borrow the client's language model (MCP sampling) and ask the person at
//! the client for input (MCP elicitation). The runtime knows none of MCP: it
//! hands these to a [`Caller`], which the MCP server implements per request.
//! Calls from the command line or from other agents have no caller, or one
//! that only reports progress.

use super::guest_log::Level;
use crate::llm::{ChatRequest, Completion, LlmFailure};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// A progress report from a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// What the person did with an elicitation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

/// The person's answer to an elicitation request.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    pub action: ElicitAction,
    /// With `Accept`: the submitted values, a JSON object.
    pub content: Option<Value>,
}

/// Why an elicitation request got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ElicitFailure {
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    InvalidRequest(String),
}

/// Where a call's progress, log messages, sampling and elicitation requests go.
#[async_trait::async_trait]
pub trait Caller: Send + Sync {
    /// A progress report of the call.
    fn progress(&self, report: Progress);

    /// A message the agent logged (already within its log budget).
    fn log(&self, agent: &str, level: Level, message: &str);

    /// Completes `request` with the caller's language model (`model_hint`:
    /// the one the agent prefers), or `None` when the caller lends no model
    /// able to answer it.
    async fn sample(
        &self,
        request: &ChatRequest,
        model_hint: Option<&str>,
    ) -> Option<Result<Completion, LlmFailure>>;

    /// Asks the person at the caller to fill in a form described by `schema`.
    async fn elicit(&self, message: String, schema: Value) -> Result<Elicitation, ElicitFailure>;

    /// How many agent-to-agent hops led to this call: 0 for a call from a
    /// person or an MCP client, n + 1 for a call made by an agent at hop n.
    fn depth(&self) -> u32 {
        0
    }
}

/// A call's link to its caller, shared by the imports that use it.
#[derive(Clone)]
pub struct CallerLink {
    pub(crate) caller: Option<Arc<dyn Caller>>,
    /// Waiting on the caller counts toward the call's deadline.
    pub(crate) deadline: Instant,
}

impl CallerLink {
    pub(crate) fn new(caller: Option<Arc<dyn Caller>>, deadline: Instant) -> Self {
        CallerLink { caller, deadline }
    }

    /// The hop count of the call (see [`Caller::depth`]).
    pub(crate) fn depth(&self) -> u32 {
        self.caller.as_ref().map_or(0, |c| c.depth())
    }

    /// Waits for `future` until the call's deadline.
    pub(crate) async fn until_deadline<T>(
        &self,
        future: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::time::timeout_at(self.deadline.into(), future)
            .await
            .ok()
    }
}

/// The caller of a call made by another agent (here or on another node) or
/// by a goal's member: it has nobody to ask and no model to lend; only the
/// hop count travels on.
pub struct ChainCaller {
    pub depth: u32,
}

#[async_trait::async_trait]
impl Caller for ChainCaller {
    fn progress(&self, _report: Progress) {}

    fn log(&self, _agent: &str, _level: Level, _message: &str) {}

    async fn sample(
        &self,
        _request: &ChatRequest,
        _model_hint: Option<&str>,
    ) -> Option<Result<Completion, LlmFailure>> {
        None
    }

    async fn elicit(&self, _message: String, _schema: Value) -> Result<Elicitation, ElicitFailure> {
        Err(ElicitFailure::Unavailable(
            "the call came from another agent; there is nobody to ask".into(),
        ))
    }

    fn depth(&self) -> u32 {
        self.depth
    }
}
