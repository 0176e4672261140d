//! AgentHub: the node's view of the network of agents. Publishes this node's
//! agents, searches for others (its own index first, then the DHT), fetches
//! them by id and verifies them, and calls tools where agents live.
//!
//! The hub is the one place that joins the node (store, runtime) and the
//! network ([`crate::net`]): the network layer knows nothing of agents
//! beyond manifests and bytes, and the node knows nothing of peers.

mod announced;
mod direct;
mod index;
mod library;
pub(crate) mod metrics;
pub mod remembered;
mod served;
mod sharing;

pub use announced::Announced;
pub use index::{Known, rank};

use crate::agent::tool::{AgentCard, ToolOutput, ToolSpec};
use crate::capabilities::peers::{Discovered, Hop, PeerFailure, PeerNetwork};
use crate::net::fetch::{self, DownloadReport, FetchRequest, FetchResponse};
use crate::net::rpc::{CallRequest, RpcError, code};
use crate::net::{Keypair, NetConfig, NetError, Network, PeerId, PublishReport, dht};
use crate::store::Origin;
use crate::store::manifest::{Manifest, SignedManifest};
use crate::store::{AgentRecord, StoreError};
use crate::{AgentId, Node};
use index::Index;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

/// Words of one search sent to the DHT at most.
const MAX_SEARCH_WORDS: usize = 8;
/// Hosts asked for their matches per keyword.
const HOSTS_ASKED_PER_WORD: usize = 8;
/// How long one host may take to answer a search or manifest request.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The distinct search terms of `query`, at most [`MAX_SEARCH_WORDS`].
fn search_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = crate::store::terms::terms(query).collect();
    // The same word twice would be looked up twice.
    let mut seen = std::collections::HashSet::new();
    words.retain(|word| seen.insert(word.clone()));
    words.truncate(MAX_SEARCH_WORDS);
    words
}

/// How often, and how many times, an agent that no peer heard announced
/// is announced again once the node has peers (gossipsub's heartbeat,
/// at which its mesh forms, is 500 ms).
const REANNOUNCE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);
const REANNOUNCE_ATTEMPTS: usize = 20;
/// The shortest time between two rounds of publishing on peers' return.
const REPUBLISH_FLOOR: std::time::Duration = std::time::Duration::from_secs(30);

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

/// What a fetch did.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Fetched {
    pub record: AgentRecord,
    /// False when the agent was already installed and nothing moved.
    pub downloaded: bool,
    /// Providers that sent chunks that were kept.
    pub providers_used: usize,
    /// Providers caught sending corrupt chunks (now blocked).
    pub liars: Vec<String>,
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
            .set_peers(Arc::new(HubLink(Arc::downgrade(&hub))));
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

    /// Publishes what this node offers each time it has peers again after
    /// having none (at start, too: the first node of a network has none
    /// until another joins), once its routing table has them. A publication
    /// made alone reaches nobody; this one is what makes it known.
    fn announce_when_peers_come(self: &Arc<Self>) {
        let mut peers = self.shared.peers.subscribe();
        let hub = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last_round: Option<tokio::time::Instant> = None;
            loop {
                // The first round waits only for peers: the node may have
                // connected to its bootstrap peers before this task began,
                // and waiting for a first "none" would skip publishing
                // after a restart until the node happened to lose them all.
                if last_round.is_some() && peers.wait_for(|n| *n == 0).await.is_err() {
                    return;
                }
                if peers.wait_for(|n| *n > 0).await.is_err() {
                    return;
                }
                // A peer that keeps connecting and leaving gets a round at
                // most every REPUBLISH_FLOOR, not one per connection.
                if let Some(last) = last_round {
                    tokio::time::sleep_until(last + REPUBLISH_FLOOR).await;
                    if *peers.borrow() == 0 {
                        continue;
                    }
                }
                last_round = Some(tokio::time::Instant::now());
                let Some(hub) = hub.upgrade() else { return };
                if hub.network.joined().await.is_err() {
                    return;
                }
                let mut unheard = Vec::new();
                for manifest in hub.shared.offers() {
                    match hub.network.publish(manifest.clone()).await {
                        Ok(report) if report.gossip_peers == 0 => unheard.push(manifest),
                        Ok(_) => {}
                        Err(e) => tracing::warn!("cannot announce a published agent: {e}"),
                    }
                }
                // Gossip reaches only the peers of the node's mesh, which
                // forms at gossipsub's heartbeats after the first peer
                // connects: what no peer heard is announced again, a
                // heartbeat apart, until someone does.
                for _ in 0..REANNOUNCE_ATTEMPTS {
                    if unheard.is_empty() || *peers.borrow() == 0 {
                        break;
                    }
                    tokio::time::sleep(REANNOUNCE_EVERY).await;
                    let mut still = Vec::new();
                    for manifest in unheard {
                        if matches!(hub.network.announce(manifest.clone()).await, Ok(0)) {
                            still.push(manifest);
                        }
                    }
                    unheard = still;
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

    /// The agents this node offers the network, by name.
    pub fn published(&self) -> Vec<Found> {
        let mut offers: Vec<Found> = self
            .shared
            .offers()
            .iter()
            .map(|manifest| Found::from_manifest(manifest, 1))
            .collect();
        offers.sort_by(|a, b| a.card.name.cmp(&b.card.name));
        offers
    }

    /// Publishes the installed agent meant by `query`: signs its manifest,
    /// offers it, and announces it on the network.
    pub async fn publish(&self, query: &str) -> Result<(SignedManifest, PublishReport), HubError> {
        let record = self.shared.node.resolve(query)?;
        let signed = self.sign_and_offer(&record)?;
        let report = self.network.publish(signed.clone()).await?;
        Ok((signed, report))
    }

    fn sign_and_offer(&self, record: &AgentRecord) -> Result<SignedManifest, HubError> {
        let publisher = self.publisher.public();
        let manifest = match &record.attached {
            // A service: reached here by remote call, never fetched.
            Some(attachment) => Manifest::service(record, attachment.kind(), &publisher),
            None => {
                let bytes = self.shared.node.blobs().get(&record.id)?;
                Manifest::describe(record, &bytes, &publisher)
            }
        };
        let signed = SignedManifest::sign(manifest, &self.publisher)?;
        self.save_published(&signed)?;
        self.shared.offer(signed.clone());
        Ok(signed)
    }

    fn save_published(&self, signed: &SignedManifest) -> Result<(), StoreError> {
        let path = self.published_dir.join(signed.id().hex());
        crate::store::write_atomic(&path, signed.encoded())
    }

    /// Manifests this node offered before it last stopped, still backed by
    /// an installed agent.
    fn load_published(&self) -> Vec<SignedManifest> {
        let Ok(entries) = std::fs::read_dir(&self.published_dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let bytes = std::fs::read(entry.path()).ok()?;
                match SignedManifest::decode(&bytes) {
                    Ok(manifest) if self.still_here(&manifest) => Some(manifest),
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!("ignoring {}: {e}", entry.path().display());
                        None
                    }
                }
            })
            .collect()
    }

    /// Whether the agent of a manifest this node published is still here:
    /// its bytes, or for a service its attached server.
    fn still_here(&self, manifest: &SignedManifest) -> bool {
        let node = &self.shared.node;
        if manifest.manifest().is_service() {
            return node
                .resolve(&manifest.id().to_string())
                .is_ok_and(|record| record.is_attached());
        }
        node.blobs().verify(&manifest.id()).is_ok()
    }

    /// Agents matching `query`, best first: any of its terms (words, stemmed,
    /// without common ones) found in this node's index, completed by a DHT
    /// provider lookup per term and the matches those hosts return.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<Found>, HubError> {
        let words = search_words(query);
        let lookups = words.iter().map(|word| self.search_network(word));
        futures::future::join_all(lookups).await;
        Ok(self.ranked(&words, limit, &self.signals()).0)
    }

    /// [`Hub::search`] as it goes: `found` gets the ranking of what the
    /// index holds at once, then again each time the network's answers for
    /// one word have come in. Each ranking is the best `limit` of all hits
    /// so far, with how many there are in all.
    pub async fn search_live(
        &self,
        query: &str,
        limit: usize,
        found: &(dyn Fn(Vec<Found>, usize) + Send + Sync),
    ) {
        use futures::StreamExt as _;
        let words = search_words(query);
        if words.is_empty() {
            return found(Vec::new(), 0);
        }
        // What the node knows of agents is read once for the whole search.
        let signals = self.signals();
        let (ranked, total) = self.ranked(&words, limit, &signals);
        found(ranked, total);
        let mut lookups: futures::stream::FuturesUnordered<_> =
            words.iter().map(|word| self.search_network(word)).collect();
        while lookups.next().await.is_some() {
            let (ranked, total) = self.ranked(&words, limit, &signals);
            found(ranked, total);
        }
    }

    /// The best `limit` agents of the index for `query`, without asking
    /// the network, and how many match.
    pub fn search_index(&self, query: &str, limit: usize) -> (Vec<Found>, usize) {
        self.ranked(&search_words(query), limit, &self.signals())
    }

    /// The best `limit` agents of the index for `words` by what `signals`
    /// add to their terms, and how many match.
    fn ranked(
        &self,
        words: &[String],
        limit: usize,
        signals: &index::Signals,
    ) -> (Vec<Found>, usize) {
        let index = self.shared.index();
        let hits = index.search(words, signals);
        let total = hits.len();
        let best = hits
            .into_iter()
            .take(limit)
            .map(|hit| Found {
                also: hit.also,
                ..Found::from_known(hit.known)
            })
            .collect();
        (best, total)
    }

    /// What this node knows of agents besides what their publishers say,
    /// for the rank: the publishers its operator trusts (and its own), and
    /// the agents installed here.
    fn signals(&self) -> index::Signals {
        let node = &self.shared.node;
        let mut trusted: std::collections::HashSet<PeerId> =
            node.policy().current().publishers.keys().copied().collect();
        trusted.insert(self.publisher_id());
        let installed = node
            .list()
            .map(|records| records.iter().map(|r| r.id).collect())
            .unwrap_or_default();
        index::Signals { trusted, installed }
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

    /// Finds the hosts of `word` and asks each for its matching manifests,
    /// which go into the index.
    async fn search_network(&self, word: &str) {
        let lookup = match self
            .network
            .providers(dht::keyword_key(word), HOSTS_ASKED_PER_WORD)
            .await
        {
            Ok(lookup) => lookup,
            Err(e) => {
                tracing::debug!("keyword lookup for {word:?} failed: {e}");
                return;
            }
        };
        let me = self.peer_id();
        let asks = lookup
            .providers
            .into_iter()
            .filter(|host| *host != me)
            .take(HOSTS_ASKED_PER_WORD)
            .map(|host| async move {
                let request = FetchRequest::Matching {
                    keyword: word.to_owned(),
                };
                let answer =
                    tokio::time::timeout(ASK_TIMEOUT, self.network.request(host, request)).await;
                (host, answer)
            });
        for (host, answer) in futures::future::join_all(asks).await {
            let Ok(Ok(FetchResponse::Matching(manifests))) = answer else {
                continue;
            };
            for bytes in manifests {
                match SignedManifest::decode(&bytes) {
                    Ok(manifest) if manifest.keywords().iter().any(|k| k == word) => {
                        self.shared.remember(manifest, host)
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.network
                            .penalise(host, &format!("answered a search with a bad manifest: {e}"));
                        self.shared.index().forget_host(&host);
                        break;
                    }
                }
            }
        }
    }

    /// Nodes this node knows to host `id` (from announcements and searches).
    pub fn hosts_of(&self, id: &AgentId) -> Vec<PeerId> {
        self.shared
            .index()
            .get(id)
            .map(|known| known.hosts.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The agent `id` as the network knows it (its signed manifest, from
    /// this node's index or the DHT) and other nodes that host it.
    pub async fn lookup(&self, id: AgentId) -> Result<(Found, Vec<PeerId>), HubError> {
        let manifest = self.manifest(id).await?;
        let hosts = self.providers(id, 3).await?;
        Ok((Found::from_manifest(&manifest, hosts.len()), hosts))
    }

    /// The signed manifest of `id`: from the index, else from the DHT.
    async fn manifest(&self, id: AgentId) -> Result<SignedManifest, HubError> {
        if let Some(known) = self.shared.index().get(&id) {
            return Ok(known.manifest.clone());
        }
        Ok(self.network.manifest(id).await?)
    }

    /// Hosts of `id` other than this node, from the DHT and the index.
    async fn providers(&self, id: AgentId, want: usize) -> Result<Vec<PeerId>, HubError> {
        let me = self.peer_id();
        let mut providers: Vec<PeerId> = self
            .network
            .providers(dht::agent_key(&id), want)
            .await?
            .providers;
        if let Some(known) = self.shared.index().get(&id) {
            providers.extend(known.hosts.iter().copied());
        }
        providers.sort();
        providers.dedup();
        providers.retain(|p| *p != me);
        Ok(providers)
    }

    /// Fetches the agent `id` from the network: manifest, hosts, chunks in
    /// parallel (each checked), the whole checked against the id, then
    /// installed (compiled and validated) like `agentsite add`.
    pub async fn fetch(
        &self,
        id: AgentId,
        progress: &(dyn Fn(FetchProgress) + Send + Sync),
    ) -> Result<Fetched, HubError> {
        let node = &self.shared.node;
        if let Ok(record) = node.resolve(&id.to_string())
            && (record.is_attached() || node.blobs().verify(&id).is_ok())
        {
            return Ok(Fetched {
                record,
                downloaded: false,
                providers_used: 0,
                liars: Vec::new(),
            });
        }
        let manifest = self.manifest(id).await?;
        if let Some(kind) = &manifest.manifest().service {
            return Err(HubError::NotFetchable {
                name: manifest.manifest().card.name.clone(),
                id,
                kind: crate::text::one_line(kind, 64),
            });
        }
        let origin = Origin::Network {
            publisher: manifest.publisher_id(),
        };
        // An agent the policy would not run is not downloaded either.
        let name = &manifest.manifest().card.name;
        node.policy().current().grant_for(&id, name, &origin)?;
        let providers = self.providers(id, 8).await?;
        if providers.is_empty() {
            return Err(HubError::NoProvider(id));
        }
        let size = manifest.manifest().size;
        progress(FetchProgress::Started {
            size,
            providers: providers.len(),
        });
        let providers = direct::providers_for(&self.network, size, providers).await;
        let on_bytes = |done: u64| progress(FetchProgress::Bytes { done, size });
        let (bytes, report) =
            fetch::download(&self.network, &manifest, &providers, &on_bytes).await?;
        let DownloadReport { chunks_from, liars } = report;
        for liar in &liars {
            self.shared.index().forget_host(liar);
        }
        progress(FetchProgress::Verified);
        // A component of plain functions is named as its publisher named it.
        let name = manifest.manifest().card.name.clone();
        let record = node.add_named(&bytes, origin, Some(&name)).await?;
        if self.seed_fetched {
            self.shared.offer(manifest.clone());
            let _ = self.save_published(&manifest);
            let network = self.network.clone();
            tokio::spawn(async move {
                if let Err(e) = network.publish(manifest).await {
                    tracing::warn!("cannot announce a fetched agent: {e}");
                }
            });
        }
        Ok(Fetched {
            record,
            downloaded: true,
            providers_used: chunks_from.len(),
            liars: liars.iter().map(ToString::to_string).collect(),
        })
    }

    /// Calls `tool` of the agent `id` on a node that hosts it, trying hosts
    /// in turn until one answers.
    pub async fn call_remote(
        &self,
        id: AgentId,
        tool: &str,
        arguments: serde_json::Value,
        hop: Hop,
    ) -> Result<ToolOutput, HubError> {
        Ok(self.call_remote_at(id, tool, arguments, hop).await?.0)
    }

    /// [`Hub::call_remote`], also saying which node answered.
    pub async fn call_remote_at(
        &self,
        id: AgentId,
        tool: &str,
        arguments: serde_json::Value,
        hop: Hop,
    ) -> Result<(ToolOutput, PeerId), HubError> {
        let providers = self.providers(id, 3).await?;
        if providers.is_empty() {
            return Err(HubError::NoProvider(id));
        }
        let mut last_error = HubError::NoProvider(id);
        for provider in providers {
            let request = CallRequest {
                agent: id,
                tool: tool.to_owned(),
                arguments: arguments.clone(),
                depth: hop.depth,
                deadline: hop.remaining(),
            };
            match self.network.call(provider, request, hop.remaining()).await {
                Ok(Ok(output)) => return Ok((output, provider)),
                // That host no longer offers it: try the next.
                Ok(Err(error)) if error.code == code::NOT_FOUND => last_error = error.into(),
                Ok(Err(error)) => return Err(error.into()),
                Err(error) => {
                    tracing::debug!(%provider, "remote call failed: {error}");
                    last_error = error.into();
                }
            }
        }
        Err(last_error)
    }

    /// Calls `tool` of the agent `agent` for an agent or a goal at `hop`:
    /// here if it is installed here (under this node's limits), else on a
    /// node that hosts it. Also says which node ran it (`None`: this one).
    pub async fn call_agent(
        &self,
        agent: AgentId,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<(ToolOutput, Option<PeerId>), PeerFailure> {
        if let Ok(record) = self.shared.node.resolve(&agent.to_string()) {
            let output = self
                .shared
                .node
                .call_at_hop(&record, tool, arguments, hop)
                .await?;
            return Ok((output, None));
        }
        let arguments: serde_json::Value = serde_json::from_str(arguments)
            .map_err(|e| PeerFailure::InvalidArguments(format!("arguments are not JSON: {e}")))?;
        match self.call_remote_at(agent, tool, arguments, hop).await {
            Ok((output, host)) => Ok((output, Some(host))),
            Err(HubError::NoProvider(id)) => {
                Err(PeerFailure::NotFound(format!("no node offers {id}")))
            }
            Err(HubError::Remote(error)) => Err(library::from_wire(error)),
            Err(e) => Err(PeerFailure::Unavailable(e.to_string())),
        }
    }
}

/// Progress of a fetch, for a progress bar.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FetchProgress {
    Started { size: u64, providers: usize },
    Bytes { done: u64, size: u64 },
    Verified,
}

/// The hub as agents reach it through `peers`; weak, so that the runtime
/// holding it does not keep the hub alive.
struct HubLink(Weak<Hub>);

impl HubLink {
    fn hub(&self) -> Result<Arc<Hub>, PeerFailure> {
        self.0
            .upgrade()
            .ok_or_else(|| PeerFailure::Unavailable("the node is leaving the network".into()))
    }
}

#[async_trait::async_trait]
impl PeerNetwork for HubLink {
    async fn discover(&self, query: &str, limit: u32) -> Result<Vec<Discovered>, PeerFailure> {
        let hub = self.hub()?;
        let found = hub
            .search(query, limit as usize)
            .await
            .map_err(|e| PeerFailure::Unavailable(e.to_string()))?;
        Ok(found
            .into_iter()
            .map(|f| Discovered {
                id: f.id,
                card: f.card,
                tools: f.tools,
                providers: f.providers as u32,
            })
            .collect())
    }

    async fn call(
        &self,
        agent: AgentId,
        tool: &str,
        arguments: &str,
        hop: Hop,
    ) -> Result<ToolOutput, PeerFailure> {
        Ok(self.hub()?.call_agent(agent, tool, arguments, hop).await?.0)
    }
}
