//! Where each interface the agent world exports sits in an instance of one
//! agent, found once when the agent is prepared.
//!
//! bindgen's `AgentCorePre::instantiate_async` looks up and type-checks the
//! functions of all four interfaces after every instantiation, but a call
//! uses one of them (a tool call only `tools`). Keeping the indices per
//! interface lets a call load just the one it uses.

use crate::capabilities::CallState;
use crate::capabilities::bindings::exports::agentsite::agent::{card, prompts, resources, tools};
use wasmtime::component::InstancePre;

pub(super) struct Exports {
    pub card: card::GuestIndices,
    pub tools: tools::GuestIndices,
    pub resources: resources::GuestIndices,
    pub prompts: prompts::GuestIndices,
}

impl Exports {
    /// Finds the four interfaces in `pre`'s component; fails when one is
    /// missing or has other types than the world's.
    pub fn new(pre: &InstancePre<CallState>) -> wasmtime::Result<Exports> {
        Ok(Exports {
            card: card::GuestIndices::new(pre)?,
            tools: tools::GuestIndices::new(pre)?,
            resources: resources::GuestIndices::new(pre)?,
            prompts: prompts::GuestIndices::new(pre)?,
        })
    }
}
