//! A2A (the Agent2Agent protocol, v1.0) on this node, as a server: Agent
//! Cards for the node and each agent, and the JSON-RPC binding where a
//! message to an agent is a call of one of its tools (chosen by the node's
//! model) and a message to the node is a goal ([`server`], [`run`]). The
//! client side, an A2A agent attached as an agent of the node, is in
//! [`crate::bridge`].

pub mod card;
mod run;
pub mod server;
mod tasks;
pub mod wire;

pub use server::{A2a, router};
