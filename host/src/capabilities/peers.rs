//! The `peers` import: other agents on the network. Part of the contract
//! already; until the network layer lands every call answers "not granted".

use crate::runtime::CallState;
use crate::runtime::bindings::agentsite::agent::peers::{self, AgentRef, PeerError};
use crate::runtime::bindings::types::ToolResult;
use wasmtime::component::{HasSelf, Linker};

/// Per-call state of the `peers` import.
#[derive(Default)]
pub struct PeersState;

fn not_granted() -> PeerError {
    PeerError::NotGranted("this node has not granted the peers capability to this agent".into())
}

impl peers::Host for PeersState {
    async fn discover(
        &mut self,
        _query: String,
        _limit: u32,
    ) -> wasmtime::Result<Result<Vec<AgentRef>, PeerError>> {
        Ok(Err(not_granted()))
    }

    async fn call(
        &mut self,
        _agent_id: String,
        _tool: String,
        _arguments: String,
    ) -> wasmtime::Result<Result<ToolResult, PeerError>> {
        Ok(Err(not_granted()))
    }
}

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    peers::add_to_linker::<CallState, HasSelf<PeersState>>(linker, |state| &mut state.peers)
}
