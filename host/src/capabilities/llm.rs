//! The `llm` import: a language model for the agent. Part of the contract
//! already; until a model can be granted every call answers "not granted".

use crate::runtime::CallState;
use crate::runtime::bindings::agentsite::agent::llm::{self, ChatRequest, ChatResponse, LlmError};
use wasmtime::component::{HasSelf, Linker};

/// Per-call state of the `llm` import.
#[derive(Default)]
pub struct LlmState;

impl llm::Host for LlmState {
    async fn chat(
        &mut self,
        _request: ChatRequest,
    ) -> wasmtime::Result<Result<ChatResponse, LlmError>> {
        Ok(Err(LlmError::NotGranted(
            "this node has not granted a language model to this agent".into(),
        )))
    }
}

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    llm::add_to_linker::<CallState, HasSelf<LlmState>>(linker, |state| &mut state.llm)
}
