//! AgentHub: the node's view of the network of agents. Publishes this node's
//! agents, searches for others (its own index first, then the DHT), fetches
//! them by id and verifies them, and calls tools where agents live.
//!
//! The hub is the one place that joins the node (store, runtime) and the
//! network ([`crate::net`]): the network layer knows nothing of agents
//! beyond manifests and bytes, and the node knows nothing of peers.

mod announced;
mod calls;
mod checks;
mod direct;
mod fetching;
mod index;
mod library;
pub(crate) mod metrics;
mod publishing;
pub mod remembered;
mod search;
mod served;
mod sharing;

pub use announced::Announced;
pub use calls::RanAt;
pub use checks::{CHECK_DEADLINE, Verdict, where_kept};
pub use fetching::{FetchProgress, Fetched};
pub use index::{Known, rank};

use crate::agent::tool::{AgentCard, ToolSpec};
use crate::net::fetch;
use crate::net::rpc::RpcError;
use crate::net::{Keypair, NetConfig, NetError, Network, PeerId};
use crate::store::StoreError;
use crate::store::manifest::SignedManifest;
use crate::{AgentId, Node};
use index::Index;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// How long one host may take to answer a search or manifest request.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// State shared by the hub and the library it offers the network.
pub(crate) struct Shared {
    node: Arc<Node>,
    /// Agents this node serves to others, with the manifests it serves.
    offered: RwLock<HashMap<AgentId, SignedManifest>>,
    index: Mutex<Index>,
    /// The node's models other nodes may use, if it shares any.
    sharing: Option<crate::llm::share::Sharing>,
    announcements: announced::Announcements,
    /// Chunks served lately, kept checked in memory.
    served: served::ServedChunks,
    metrics: Arc<metrics::NetworkMetrics>,
    /// How many peers the node is connected to.
    peers: tokio::sync::watch::Sender<usize>,
}

impl Shared {
    fn offered(&self, id: &AgentId) -> Option<SignedManifest> {
        self.offered
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    fn offers(&self) -> Vec<SignedManifest> {
        self.offered
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    fn offer(&self, manifest: SignedManifest) {
        self.offered
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(manifest.id(), manifest);
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, manifest: SignedManifest, host: PeerId) {
        self.index().insert(manifest, host);
    }
}

/// An agent found by a search.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Found {
    pub id: AgentId,
    pub card: AgentCard,
    pub tools: Vec<ToolSpec>,
    /// Nodes known to host it.
    pub providers: usize,
    /// Who signed its manifest (a peer id).
    pub publisher: String,
    /// The same key as a did:key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher_did: Option<String>,
    pub size: u64,
    /// The imports it asks a host for.
    pub capabilities: Vec<String>,
    /// For an attached server its publisher's node serves, what kind it is:
    /// it is not fetchable, only called there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Other ids of agents with the same card and tools (copies of it),
    /// which rank as this one result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<AgentId>,
}

impl Found {
    fn from_known(known: &Known) -> Found {
        Found::from_manifest(&known.manifest, known.hosts.len())
    }

    fn from_manifest(signed: &SignedManifest, providers: usize) -> Found {
        let manifest = signed.manifest();
        Found {
            id: manifest.id,
            card: manifest.card.clone(),
            tools: manifest.tools.clone(),
            providers,
            publisher: signed.publisher_id().to_string(),
            publisher_did: crate::did::of_peer(&signed.publisher_id()),
            size: manifest.size,
            capabilities: manifest.capabilities.clone(),
            service: manifest.service.clone(),
            also: Vec::new(),
        }
    }
}

/// Why a hub operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Resolve(#[from] crate::store::ResolveError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("no node on the network offers {0}")]
    NoProvider(AgentId),
    #[error(transparent)]
    Fetch(#[from] fetch::FetchError),
    #[error("the fetched agent was refused: {0}")]
    Add(#[from] crate::AddError),
    #[error("cannot sign the manifest: {0}")]
    Sign(#[from] crate::store::manifest::ManifestError),
    #[error("{0}")]
    Remote(#[from] RpcError),
    #[error(transparent)]
    Refused(#[from] crate::policy::Refused),
    #[error(
        "{name} ({id}) is an attached {kind} on the node that published it: it is not \
         fetchable by hash, only called there (`agentsite call --remote {id} TOOL ARGS`)"
    )]
    NotFetchable {
        name: String,
        id: AgentId,
        kind: String,
    },
}

/// Options of the hub beyond the network's own.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// Agents (name or id) published when the hub starts.
    pub public: Vec<String>,
    /// Offer fetched agents to other nodes too.
    pub seed_fetched: bool,
    /// The key that signs published manifests; the node's own when `None`.
    pub publisher: Option<Keypair>,
}

/// The node on the network.
pub struct Hub {
    shared: Arc<Shared>,
    network: Network,
    /// Signs the manifests this node publishes.
    publisher: Keypair,
    published_dir: PathBuf,
    seed_fetched: bool,
}

impl Hub {
    /// Joins the network with `keypair`, gives agents the `peers` import,
    /// and publishes again what this node published before (and the agents
    /// `options` marks public).
    pub async fn start(
        node: Arc<Node>,
        keypair: Keypair,
        mut config: NetConfig,
        options: HubOptions,
    ) -> anyhow::Result<Arc<Hub>> {
        let remembered_file = node.data_dir().remembered_peers();
        config.remembered = remembered::load(&remembered_file);
        let (shared_models, share_rate) = node.models().sharing();
        let shared_models = shared_models.to_vec();
        let sharing = (!shared_models.is_empty()).then(|| {
            crate::llm::share::Sharing::new(
                node.models().clone(),
                shared_models.clone(),
                share_rate,
            )
        });
        let shared = Arc::new(Shared {
            node: node.clone(),
            offered: RwLock::new(HashMap::new()),
            index: Mutex::new(Index::default()),
            sharing,
            announcements: Default::default(),
            served: Default::default(),
            metrics: node.audit().section(),
            peers: tokio::sync::watch::Sender::new(0),
        });
        // Gives back the memory of chunks no peer asks for any more, also
        // while no request comes to do it.
        let sweeping = Arc::downgrade(&shared);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(served::IDLE);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                match sweeping.upgrade() {
                    Some(shared) => shared.served.sweep(),
                    None => return,
                }
            }
        });
        let library = Arc::new(library::NodeLibrary {
            shared: shared.clone(),
            own: keypair.public().to_peer_id(),
        });
        let publisher = options.publisher.clone().unwrap_or_else(|| keypair.clone());
        let network = Network::start(keypair, config, library).await?;
        let hub = Arc::new(Hub {
            shared,
            network,
            publisher,
            published_dir: node.data_dir().published(),
            seed_fetched: options.seed_fetched,
        });
        node.runtime()?
            .set_peers(Arc::new(calls::HubLink(Arc::downgrade(&hub))));
        node.models()
            .set_network(Arc::new(sharing::ModelLink(Arc::downgrade(&hub))));
        for manifest in hub.load_published() {
            hub.shared.offer(manifest);
        }
        for agent in &options.public {
            let record = node.resolve(agent)?;
            if hub.shared.offered(&record.id).is_none() {
                hub.sign_and_offer(&record)?;
            }
        }
        // Announce in the background: with bootstrap peers still connecting,
        // waiting here would only delay the node's start.
        let announcer = hub.clone();
        tokio::spawn(async move {
            announcer.provide_shared_models(&shared_models).await;
        });
        hub.announce_when_peers_come();
        hub.remember_peers(remembered_file);
        Ok(hub)
    }

    /// Keeps the peers this node is connected to in `file`, for the next
    /// start, while the hub lives.
    fn remember_peers(self: &Arc<Self>, file: std::path::PathBuf) {
        let hub = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last = Vec::new();
            let mut ticks = tokio::time::interval(remembered::SAVE_EVERY);
            loop {
                ticks.tick().await;
                let Some(hub) = hub.upgrade() else { return };
                let Ok(peers) = hub.network.peers().await else {
                    return;
                };
                let now = remembered::of(&peers);
                // A node alone keeps what it knew: its peers may come back.
                if now.is_empty() || now == last {
                    continue;
                }
                match remembered::save(&file, now.clone()) {
                    Ok(()) => last = now,
                    Err(e) => tracing::warn!("cannot remember peers in {}: {e:#}", file.display()),
                }
            }
        });
    }

    /// How many peers the node is connected to now.
    pub fn peers_connected(&self) -> usize {
        *self.shared.peers.borrow()
    }

    pub fn network(&self) -> &Network {
        &self.network
    }

    pub fn peer_id(&self) -> PeerId {
        self.network.peer_id()
    }

    /// The agents peers announced last, newest first, and those that
    /// arrive from now on.
    pub fn announcements(&self) -> (Vec<Announced>, tokio::sync::broadcast::Receiver<Announced>) {
        self.shared.announcements.follow()
    }

    /// Runs `read` over every agent the index holds (this node's published
    /// ones, what was announced and what searches found), without copying
    /// them.
    /// The index is locked meanwhile: `read` must be quick and must not
    /// call back into the hub.
    pub fn with_known<T>(&self, read: impl FnOnce(&mut dyn Iterator<Item = &Known>) -> T) -> T {
        read(&mut self.shared.index().all())
    }

    /// The key this node signs what it publishes with, in peer-id form.
    pub fn publisher_id(&self) -> PeerId {
        self.publisher.public().to_peer_id()
    }

    /// The agent `id` as the index knows it, without asking the network.
    pub fn known_agent(&self, id: &AgentId) -> Option<Found> {
        self.shared.index().get(id).map(Found::from_known)
    }

    /// Whether this node offers `id` to the network (published or seeded).
    pub fn is_offered(&self, id: &AgentId) -> bool {
        self.shared.offered(id).is_some()
    }

    /// Whether this node published `id` itself (signed its manifest), not
    /// only serves a copy it fetched.
    pub fn is_published_here(&self, id: &AgentId) -> bool {
        self.shared
            .offered(id)
            .is_some_and(|signed| signed.publisher_id() == self.publisher_id())
    }

    /// How many nodes other than this one are known to host `id`.
    pub fn other_hosts(&self, id: &AgentId) -> usize {
        let own = self.peer_id();
        self.hosts_of(id)
            .iter()
            .filter(|host| **host != own)
            .count()
    }

    /// Nodes this node knows to host `id` (from announcements and searches).
    pub fn hosts_of(&self, id: &AgentId) -> Vec<PeerId> {
        self.shared
            .index()
            .get(id)
            .map(|known| known.hosts.iter().copied().collect())
            .unwrap_or_default()
    }
}
