//! What an agent can reach outside its own memory: one module per import of
//! the agent world.
//!
//! A capability that can be granted is a folder (`wasi/`, `kv/`, `peers/`,
//! `llm/`) with two halves, each behind one small trait, as Spin's factors
//! are:
//!
//! - its grant (`grant.rs`, [`grant::Capability`]): the type a policy
//!   table holds, the command line's item, its checks, what a call gets,
//!   its description for `inspect` and the pages;
//! - its part of a call (`mod.rs`, [`CallPart`]): the state a call's store
//!   holds for it, made from the call's grants and the node's [`Services`],
//!   and the imports that reach it.
//!
//! Two lists name them all: the grants' in [`grant`] (`fs`, `http` and
//! `env` are three grants of WASI's one part) and the call's parts here
//! ([`call_parts!`]: `host` and `user` are parts that nothing grants).
//! Adding a capability is its folder and a line in each; one with a
//! node-wide half (a store, a network) also gives it a field of
//! [`Services`].
//!
//! What each import reaches is decided per call by the operator's policy
//! (see [`crate::policy`]): with no grant, the filesystem, environment and
//! outgoing HTTP see nothing, `kv`, `peers` and `llm` answer "not granted",
//! and only clocks, randomness and the agent's own log work. `user` asks
//! the person at the calling MCP client, when it offers elicitation.

pub mod bindings;
pub(crate) mod caller;
pub mod grant;
pub(crate) mod guest_log;
pub(crate) mod host;
pub mod kv;
pub(crate) mod limits;
pub mod llm;
pub mod peers;
pub mod sources;
pub(crate) mod user;
pub mod wasi;

use crate::AgentId;
use crate::agent::key::AgentKey;
use crate::audit::{Audit, Denials};
use crate::llm::models::Models;
use caller::{Caller, CallerLink};
use grant::Grants;
use guest_log::GuestLog;
use host::{HostState, ResourceUpdate};
use kv::{KvState, KvStores};
use llm::LlmState;
use peers::{PeerNetwork, PeersState};
use sources::Sources;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tokio::sync::broadcast;
use user::UserState;
use wasmtime::component::{Linker, ResourceTable};

/// What the capabilities of every call on a node share: the agents'
/// databases, the channel of resource updates, the network once joined,
/// and the audit that hears of denials.
pub struct Services {
    kv: Arc<KvStores>,
    updates: broadcast::Sender<ResourceUpdate>,
    peers: OnceLock<Arc<dyn PeerNetwork>>,
    models: OnceLock<Arc<Models>>,
    audit: Arc<Audit>,
}

impl Services {
    /// Services whose agents keep their kv databases in `kv_dir`.
    pub fn new(kv_dir: std::path::PathBuf, audit: Arc<Audit>) -> Self {
        Services {
            kv: Arc::new(KvStores::new(kv_dir)),
            updates: broadcast::channel(256).0,
            peers: OnceLock::new(),
            models: OnceLock::new(),
            audit,
        }
    }

    /// Announcements of agents whose resources changed (`host.resource-updated`).
    pub fn resource_updates(&self) -> broadcast::Receiver<ResourceUpdate> {
        self.updates.subscribe()
    }

    /// Gives agents the network (the `peers` import). Set once, when the
    /// node joins a network; returns false if one was already set.
    pub fn set_peers(&self, network: Arc<dyn PeerNetwork>) -> bool {
        self.peers.set(network).is_ok()
    }

    /// Gives agents the node's language models (the `llm` import). Set
    /// once; returns false if they were already set.
    pub fn set_models(&self, models: Arc<Models>) -> bool {
        self.models.set(models).is_ok()
    }

    /// The key-value databases of this node's agents.
    pub fn kv(&self) -> &Arc<KvStores> {
        &self.kv
    }
}

/// Who is called, how, and until when: what one call's state is made for.
pub(crate) struct CallSetup<'a> {
    pub agent: AgentId,
    pub name: Arc<str>,
    /// Whose stored data the call reads and writes (see [`AgentKey`]).
    pub store: &'a AgentKey,
    pub grants: &'a Grants,
    /// The MCP client or agent on whose behalf the call runs, if any.
    pub caller: Option<Arc<dyn Caller>>,
    pub deadline: Instant,
    /// Where the call's capabilities record the sources it reads.
    pub sources: Sources,
}

/// What a capability's part of a call is made from.
pub(crate) struct CallContext<'a> {
    pub agent: AgentId,
    pub store: &'a AgentKey,
    pub grants: &'a Grants,
    pub caller: &'a CallerLink,
    pub deadline: Instant,
    /// Where the capabilities report what they refused.
    pub denials: &'a Denials,
    /// The guest's log, which WASI's output and the host import write to.
    pub log: &'a GuestLog,
    pub services: &'a Services,
    /// Where the capabilities record the sources of nondeterminism the
    /// guest reaches.
    pub sources: &'a Sources,
}

/// A capability's part of one call: the state a call's store holds for it
/// and the imports that reach that state.
pub(crate) trait CallPart: Sized {
    /// The part for the call `call` describes; an error fails the call
    /// before it runs (a granted folder that cannot be opened).
    fn for_call(call: &CallContext<'_>) -> anyhow::Result<Self>;

    /// Binds the capability's imports, each reaching this part of the
    /// calling store's [`CallState`].
    fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()>;
}

/// The state of one call, with a field per part listed, and the function
/// that binds every part's imports.
macro_rules! call_parts {
    ($($field:ident: $part:ty),* $(,)?) => {
        /// The state of one call: each capability's part, the resources
        /// they share, the memory limiter and the deadline.
        pub struct CallState {
            $(pub(crate) $field: $part,)*
            pub(crate) table: ResourceTable,
            pub(crate) limiter: limits::CallLimiter,
            /// When the call must end: read by the store's epoch check.
            pub(crate) deadline: Instant,
            /// The sources of nondeterminism the guest reached.
            pub(crate) sources: Sources,
        }

        impl CallState {
            fn of_parts(
                call: &CallContext<'_>,
                table: ResourceTable,
                limiter: limits::CallLimiter,
            ) -> anyhow::Result<CallState> {
                Ok(CallState {
                    $($field: <$part as CallPart>::for_call(call)?,)*
                    table,
                    limiter,
                    deadline: call.deadline,
                    sources: call.sources.clone(),
                })
            }
        }

        /// Binds every capability's imports into the linker of calls of
        /// components of `mode`: WASI 0.3's too for the concurrent engine.
        pub(crate) fn add_to_linker(
            linker: &mut Linker<CallState>,
            mode: crate::runtime::mode::Mode,
        ) -> wasmtime::Result<()> {
            $(<$part as CallPart>::add_to_linker(linker)?;)*
            if mode == crate::runtime::mode::Mode::Concurrent {
                wasi::add_wasi_0_3_to_linker(linker)?;
            }
            Ok(())
        }
    };
}

call_parts! {
    wasi: wasi::Wasi,
    host: HostState,
    kv: KvState,
    peers: PeersState,
    llm: LlmState,
    user: UserState,
}

impl CallState {
    /// The state of one call under its grants; with it, the call's guest
    /// log (which the runtime flushes when the call ends).
    pub(crate) fn new(
        services: &Services,
        setup: CallSetup<'_>,
    ) -> anyhow::Result<(CallState, GuestLog)> {
        let CallSetup {
            agent,
            name,
            store,
            grants,
            caller,
            deadline,
            sources,
        } = setup;
        let call_limits = &grants.limits;
        let log = GuestLog::new(name.clone(), call_limits.max_log.as_u64());
        let caller = CallerLink::new(caller, deadline);
        let denials = Denials::new(services.audit.clone(), name);
        let mut table = ResourceTable::new();
        table.set_max_capacity(limits::MAX_HANDLES);
        let call = CallContext {
            agent,
            store,
            grants,
            caller: &caller,
            deadline,
            denials: &denials,
            log: &log,
            services,
            sources: &sources,
        };
        let limiter = limits::CallLimiter::new(call_limits.memory);
        let state = CallState::of_parts(&call, table, limiter)?;
        Ok((state, log))
    }
}
