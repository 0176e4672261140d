//! Host-side bindings of the `apps-agent-core` world (`agent-core` and the
//! optional `apps` export), generated from `wit/`.
//!
//! WASI is linked separately (from `wasmtime-wasi` and `wasmtime-wasi-http`),
//! so only the agentsite interfaces are generated here. Imports are
//! `trappable` so that a host function can end a misbehaving call; `peers`,
//! `llm`, `chat` and `user` are `async` because they wait on the network, a
//! model or a client.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "apps-agent-core",
    imports: {
        "agentsite:agent/peers": async | trappable,
        "agentsite:agent/llm": async | trappable,
        "agentsite:agent/chat": async | trappable,
        "agentsite:agent/user": async | trappable,
        default: trappable,
    },
    exports: { default: async },
    with: {
        "agentsite:agent/chat.generation": crate::capabilities::llm::Generation,
    },
});

pub use self::agentsite::agent::types;
