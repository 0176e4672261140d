//! The agent contract's types, as the rest of the host sees them: an
//! agent's content id ([`id`]), its card, tools and their results
//! ([`tool`]), its resources ([`resource`]) and prompts ([`prompt`]). Plain
//! Rust types that serialize to MCP's JSON shapes, checked once where they
//! cross out of a guest; every floor above speaks them.

pub(crate) mod id;
pub mod key;
pub(crate) mod prompt;
pub(crate) mod resource;
pub mod tool;
