//! The `llm` import: a language model for the agent.
//!
//! Only agents the policy grants `llm` may ask. A request goes first to the
//! calling MCP client's model when the client lends one (MCP sampling, which
//! its user approves), else to the node's own models (see [`crate::llm`]):
//! so an agent granted `llm` gets an answer from any caller, the command
//! line, another agent or another node.

use super::CallState;
use super::caller::CallerLink;
use crate::audit::Denials;
use crate::bindings::agentsite::agent::llm::{self, ChatRequest, ChatResponse, LlmError, Role};
use crate::llm::models::Models;
use crate::llm::{self as models, LlmFailure, Message};
use std::sync::Arc;
use wasmtime::component::{HasSelf, Linker};

/// Messages and characters a request may carry, so that a guest cannot make
/// the host build an unbounded request.
const MAX_MESSAGES: usize = 1000;
const MAX_REQUEST_CHARS: usize = 1 << 20;

/// Per-call state of the `llm` import.
pub struct LlmState {
    caller: CallerLink,
    granted: bool,
    /// The node's models, when it has any.
    models: Option<Arc<Models>>,
    denials: Denials,
}

impl LlmState {
    pub(crate) fn new(
        caller: CallerLink,
        granted: bool,
        models: Option<Arc<Models>>,
        denials: Denials,
    ) -> Self {
        LlmState {
            caller,
            granted,
            models,
            denials,
        }
    }

    /// Asks the node's own models.
    async fn ask_node(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let Some(models) = &self.models else {
            return Err(no_model());
        };
        // A hint that names one of the node's models picks it; any other
        // hint (a family the agent prefers) leaves the choice to the node.
        let model = request
            .model_hint
            .as_deref()
            .and_then(|hint| models.get(Some(hint)).ok())
            .map_or_else(|| models.get(None), Ok)
            .map_err(to_wit)?;
        let request = models::ChatRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| Message::new(role(m.role), m.content))
                .collect(),
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            ..models::ChatRequest::default()
        };
        let completion = model
            .complete(request, self.caller.deadline, None)
            .await
            .map_err(to_wit)?;
        Ok(ChatResponse {
            content: completion.content,
            model: completion.model,
            stop_reason: Some(completion.stop_reason.as_str().to_owned()),
        })
    }
}

fn role(role: Role) -> models::Role {
    match role {
        Role::System => models::Role::System,
        Role::User => models::Role::User,
        Role::Assistant => models::Role::Assistant,
    }
}

/// The `llm-error` of the 0.1 contract a failure of the node's model is.
fn to_wit(failure: LlmFailure) -> LlmError {
    match failure {
        LlmFailure::NotGranted(m) => LlmError::NotGranted(m),
        LlmFailure::InvalidRequest(m) => LlmError::InvalidRequest(m),
        LlmFailure::Refused(m) | LlmFailure::BudgetExceeded(m) => LlmError::Refused(m),
        LlmFailure::Busy(m) | LlmFailure::DeadlineExceeded(m) | LlmFailure::Unavailable(m) => {
            LlmError::Unavailable(m)
        }
    }
}

impl llm::Host for LlmState {
    async fn chat(
        &mut self,
        request: ChatRequest,
    ) -> wasmtime::Result<Result<ChatResponse, LlmError>> {
        if !self.granted {
            self.denials.record("llm", "no language model granted");
            return Ok(Err(LlmError::NotGranted(
                "the operator has not granted this agent a language model (`agentsite grant <agent> llm`)"
                    .into(),
            )));
        }
        if request.messages.is_empty() {
            return Ok(Err(LlmError::InvalidRequest(
                "a chat request needs at least one message".into(),
            )));
        }
        let chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
        if request.messages.len() > MAX_MESSAGES || chars > MAX_REQUEST_CHARS {
            return Ok(Err(LlmError::InvalidRequest(format!(
                "a chat request may carry at most {MAX_MESSAGES} messages and {MAX_REQUEST_CHARS} bytes of text"
            ))));
        }
        if let Some(caller) = &self.caller.caller {
            match self
                .caller
                .until_deadline(caller.sample(request.clone()))
                .await
            {
                Some(Some(result)) => return Ok(result),
                // The caller lends no model: the node's own answer.
                Some(None) => {}
                None => {
                    return Ok(Err(LlmError::Unavailable(
                        "the model did not answer before the call's deadline".into(),
                    )));
                }
            }
        }
        Ok(self.ask_node(request).await)
    }
}

fn no_model() -> LlmError {
    LlmError::Unavailable(
        "no language model: this node has none and the calling client does not offer sampling"
            .into(),
    )
}

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    llm::add_to_linker::<CallState, HasSelf<LlmState>>(linker, |state| &mut state.llm)
}
