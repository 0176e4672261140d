//! A2A (the Agent2Agent protocol, v1.0), both of its sides on this node.
//!
//! - [`wire`]: the protocol's messages, as both sides read and write them:
//!   the types of the protocol's own Rust SDK (`a2a-lf`), JSON-RPC
//!   envelope and error codes included.
//! - [`v0_3`]: A2A 0.3's JSON-RPC binding (its method names and JSON),
//!   converted to and from [`wire`]'s types: the server answers 0.3
//!   clients at the same endpoints, the client talks to 0.3 agents.
//! - [`client`]: an A2A agent attached to this node (`agentsite attach NAME
//!   URL`), called as an agent of the node through [`crate::bridge`].
//! - [`server`]: Agent Cards for the node and each agent, and the JSON-RPC
//!   binding, where a message to an agent is a call of one of its tools
//!   (chosen by the node's model) and a message to the node is a goal.
//!
//! The SDK's server and client crates (`a2a-server-lf`, `a2a-client-lf`)
//! are not used: their task store is handed whole tasks without who asked,
//! so it could keep no per-requester shares or byte budget (see
//! `server::tasks`), and their client reads a peer's card and answers
//! whole, with no bound on their size.
//!
//! The wire types and the client stand low (the bridge, below the node,
//! calls through them); the server stands with the other protocol surfaces.

pub(crate) mod client;
pub(crate) mod server;
pub(crate) mod signed;
pub(crate) mod v0_3;
pub(crate) mod wire;
