//! What an agent can reach outside its own memory: one module per import of
//! the agent world.
//!
//! Each capability owns its per-call state (a field of [`CallState`]), its
//! grant check, and the function that binds it into the linker. Adding a
//! capability means adding a module here and one line to [`add_to_linker`].
//!
//! What each import reaches is decided per call by the operator's policy
//! (see [`crate::policy`]): with no grant, the filesystem, environment and
//! outgoing HTTP see nothing, `kv`, `peers` and `llm` answer "not granted",
//! and only clocks, randomness and the agent's own log work. `user` asks
//! the person at the calling MCP client, when it offers elicitation.

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
