//! Serving hosted agents over MCP, with rmcp: streamable HTTP ([`http`]) and
//! stdio ([`stdio`]). Every installed agent's tools are MCP tools; each call
//! runs in a fresh WebAssembly instance under the node's limits.

mod apps;
mod caller;
mod dormant;
pub(crate) mod exposed;
pub mod hosted;
pub mod http;
pub mod listing;
mod metrics;
pub(crate) mod relay;
pub(crate) mod server;
pub mod sessions;
pub(crate) mod stdio;

pub use exposed::Scope;
pub use hosted::Hosted;
pub use server::AgentServer;
