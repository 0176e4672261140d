//! The integration suite, one test binary: each module drives the node as
//! its users do (the `agentsite` binary, MCP and A2A clients, browsers,
//! networks of nodes) and names what it proves in its own opening comment.
//! One binary links wasmtime, libp2p and the rest once, and its tests share
//! the set-up that `support` does once per process (the example agents
//! built, tools found).
//!
//! Run one part with a filter: `cargo test --test suite mcp::`.

mod support;

mod a2a;
mod attached;
mod churn;
mod cli;
mod conformance;
mod crash;
mod fuzz_regressions;
mod goals;
mod goals_planet;
mod hostile;
mod hostile_grants;
mod hostile_network;
mod hostile_peers;
mod hostile_reach;
mod hostile_requests;
mod idle_connections;
mod image;
mod languages;
mod layers;
mod lying_nodes;
mod lying_provider;
mod many_nodes;
mod mcp;
mod mcp_apps;
mod models;
mod nat;
mod oci;
mod oci_signatures;
mod planet;
mod python_client;
mod receipts;
mod sybil;
mod trust;
mod typescript_client;
mod wasi_0_3;
mod wassette;
mod web;
