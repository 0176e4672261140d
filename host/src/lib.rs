//! agentsite: a node that hosts AI agents compiled to WebAssembly components.
//!
//! An agent is a WASI 0.2 component of the `agentsite:agent` world (see
//! `wit/agent.wit`): it exports a card and MCP-style tools. This crate stores
//! agents by the sha256 of their bytes ([`store`]), runs each tool call in a
//! fresh, limited wasmtime instance ([`runtime`]) with deny-by-default
//! capabilities ([`capabilities`]), and ties them together in a [`Node`].
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use agentsite::{Node, NodeConfig, config::DataDir, runtime::Capacity};
//!
//! let node = Node::open(DataDir::new("/tmp/agentsite"), NodeConfig::default(), Capacity::OneShot)?;
//! let bytes = std::fs::read("calculator.wasm")?;
//! let record = node.add(&bytes).await?;
//! let output = node.call("calculator", "add", r#"{"a": 2, "b": 3}"#, None).await?;
//! assert_eq!(output.structured_content.unwrap().to_value()["result"], 5.0);
//! # let _ = record; Ok(()) }
//! ```

pub(crate) mod a2a;
pub mod agent;
pub(crate) mod answers;
pub mod audit;
pub mod bridge;
pub mod capabilities;
pub mod chat;
pub mod cli;
pub(crate) mod clock;
pub mod config;
pub mod did;
pub mod goals;
pub mod http;
pub mod hub;
pub mod llm;
pub mod mcp;
pub mod net;
mod node;
pub mod oci;
pub mod policy;
pub mod receipt;
pub mod requester;
pub mod runtime;
pub mod server;
pub mod store;
pub mod text;
pub mod v1;
pub(crate) mod web;

/// What the integration tests, benches and fuzz targets check against
/// inside the node: its limits. Not an API; the modules these come from are
/// the crate's own.
#[doc(hidden)]
pub mod testing {
    pub use crate::a2a::client::read_card as read_a2a_card;
    pub use crate::capabilities::guest_log::FRAMING;
    pub use crate::capabilities::kv::ENTRY_OVERHEAD;
    pub use crate::capabilities::limits::{MAX_FIELDS_BYTES, MAX_HANDLES};
    pub use crate::runtime::complexity::{
        MAX_BLOCKS, MAX_FUNCTION_SIZE, MAX_LOCALS, TooComplex, check as check_complexity,
    };
}

pub use agent::id::{AgentId, ParseAgentIdError};
pub use agent::key::AgentKey;
pub use node::{
    AddError, AttachError, Installed, Node, NodeCallError, NodeConfig, Removed, SameName,
};
