//! What an agent can reach outside its own memory: one module per import of
//! the agent world.
//!
//! A capability that can be granted is a folder (`wasi/`, `kv/`, `peers/`,
//! `llm/`): its grant (`grant.rs`: the type a policy table holds, the
//! command line's item, its checks, what a call gets, its description, as
//! the [`grant::Capability`] trait asks), its per-call state (a field of
//! [`CallState`]) and the function that binds it into the linker. This
//! module and [`grant`]'s list are the places that know them all:
//! [`CallState::new`] builds a call's state from its grants and the node's
//! [`Services`], and [`add_to_linker`] binds every import.
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
pub(crate) mod user;
pub mod wasi;

use crate::AgentId;
use crate::audit::{Audit, Denials};
use crate::llm::models::Models;
use caller::{Caller, CallerLink};
use grant::Grants;
use guest_log::GuestLog;
use host::{HostState, ResourceUpdate};
use kv::{KvState, KvStores};
use llm::LlmState;
use peers::{PeerNetwork, PeersState};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use tokio::sync::broadcast;
use user::UserState;
use wasi::HttpPolicy;
use wasmtime::component::{Linker, ResourceTable};

/// The state of one call: what every capability keeps while the guest runs.
pub struct CallState {
    pub(crate) wasi: wasi::WasiState,
    pub(crate) http: wasmtime_wasi_http::WasiHttpCtx,
    pub(crate) http_hooks: HttpPolicy,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: limits::CallLimiter,
    pub(crate) host: HostState,
    pub(crate) kv: KvState,
    pub(crate) peers: PeersState,
    pub(crate) llm: LlmState,
    pub(crate) user: UserState,
    /// When the call must end: read by the store's epoch check.
    pub(crate) deadline: Instant,
}

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
    pub grants: &'a Grants,
    /// The MCP client or agent on whose behalf the call runs, if any.
    pub caller: Option<Arc<dyn Caller>>,
    pub deadline: Instant,
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
            grants,
            caller,
            deadline,
        } = setup;
        let call_limits = &grants.limits;
        let log = GuestLog::new(name.clone(), call_limits.max_log.as_u64());
        let wasi = wasi::WasiState::new(&log, grants)?;
        let caller = CallerLink::new(caller, deadline);
        let denials = Denials::new(services.audit.clone(), name);
        let mut table = ResourceTable::new();
        table.set_max_capacity(limits::MAX_HANDLES);
        let state = CallState {
            wasi,
            http: wasi::new_http_context(limits::MAX_FIELDS_BYTES),
            http_hooks: HttpPolicy::new(grants.http.clone(), deadline, denials.clone()),
            table,
            limiter: limits::CallLimiter::new(call_limits.memory),
            host: HostState::new(log.clone(), agent, caller.clone(), services.updates.clone()),
            kv: KvState::new(services.kv.clone(), agent, grants.kv).reporting(denials.clone()),
            peers: PeersState::new(
                services.peers.get().cloned(),
                caller.clone(),
                grants.peers,
                denials.clone(),
            ),
            llm: LlmState::new(
                caller.clone(),
                agent,
                grants.llm.clone(),
                services.models.get().cloned(),
                denials,
            ),
            user: UserState::new(caller),
            deadline,
        };
        Ok((state, log))
    }
}

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
