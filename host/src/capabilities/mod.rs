//! What an agent can reach outside its own memory: one module per import of
//! the agent world.
//!
//! Each capability owns its per-call state (a field of [`CallState`]), its
//! grant check, and the function that binds it into the linker. Adding a
//! capability means adding a module here and one line to [`add_to_linker`].
//!
//! Until operators can grant capabilities (a later stage), the defaults are:
//! clocks and randomness work; the filesystem, environment, sockets and
//! outgoing HTTP see nothing; `kv` is a per-agent store; `peers` reaches
//! other agents when the node is on a network (hop-limited, within the
//! caller's deadline) and answers "not granted" otherwise; `llm` and `user` reach the calling MCP client when it offers
//! sampling and elicitation, and answer "not granted" otherwise.

pub mod caller;
pub mod guest_log;
pub mod host;
pub mod kv;
pub mod llm;
pub mod peers;
pub mod user;
pub mod wasi;

use crate::runtime::CallState;
use wasmtime::component::Linker;

/// Binds every capability into `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasi::add_to_linker(linker)?;
    host::add_to_linker(linker)?;
    kv::add_to_linker(linker)?;
    peers::add_to_linker(linker)?;
    llm::add_to_linker(linker)?;
    user::add_to_linker(linker)?;
    Ok(())
}
