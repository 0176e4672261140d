//! The node's web pages (AgentHub, AgentChat, the network) and the control
//! API that the command line uses to drive a running node. The HTTP edge
//! they stand on (rules, tokens, connections, streams) is [`crate::http`].

pub(crate) mod api;
pub(crate) mod control;
pub(crate) mod site;
