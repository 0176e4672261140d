//! The `llm` import: a language model for the agent.
//!
//! Only agents the policy grants `llm` may ask. When the call serves an MCP
//! client that lends its model (MCP sampling), the request goes to that
//! client, whose user approves it. Otherwise the node has no model to offer
//! and the answer is "not granted".

use super::CallState;
use super::caller::CallerLink;
use crate::audit::Denials;
use crate::bindings::agentsite::agent::llm::{self, ChatRequest, ChatResponse, LlmError};
use wasmtime::component::{HasSelf, Linker};

/// Messages and characters a request may carry, so that a guest cannot make
/// the host build an unbounded request.
const MAX_MESSAGES: usize = 1000;
const MAX_REQUEST_CHARS: usize = 1 << 20;

/// Per-call state of the `llm` import.
pub struct LlmState {
    caller: CallerLink,
    granted: bool,
    denials: Denials,
}

impl LlmState {
    pub(crate) fn new(caller: CallerLink, granted: bool, denials: Denials) -> Self {
        LlmState {
            caller,
            granted,
            denials,
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
        let Some(caller) = &self.caller.caller else {
            return Ok(Err(not_granted()));
        };
        let answer = self.caller.until_deadline(caller.sample(request)).await;
        Ok(match answer {
            Some(Some(result)) => result,
            Some(None) => Err(not_granted()),
            None => Err(LlmError::Unavailable(
                "the model did not answer before the call's deadline".into(),
            )),
        })
    }
}

fn not_granted() -> LlmError {
    LlmError::NotGranted(
        "no language model: this node grants none and the calling client does not offer sampling"
            .into(),
    )
}

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    llm::add_to_linker::<CallState, HasSelf<LlmState>>(linker, |state| &mut state.llm)
}
