//! The node's HTTP surface beyond MCP: the control API that the command line
//! uses to drive a running node.

pub mod api;
pub mod control;
pub mod guard;
