//! A whole agentsite network in one process: many nodes on libp2p's memory
//! transport (noise and yamux included, as on TCP), for the planet-scale
//! test and the network benchmarks.
//!
//! Each node runs the real network stack ([`Network`]) over a [`Shelf`]: a
//! library that offers signed manifests and notes when each announcement
//! reached it. Nodes join one after another, each through a few random
//! earlier nodes and once the one before has joined; each fills its routing
//! table with its own Kademlia bootstrap (a lookup of its own id and of a
//! random id per bucket), and the nodes it meets learn of it in turn.

use agentsite::NodeConfig;
use agentsite::agent::tool::AgentCard;
use agentsite::config::DataDir;
use agentsite::hub::{Hub, HubOptions};
use agentsite::net::fetch::{FetchRequest, FetchResponse};
use agentsite::net::rpc::{self, CallRequest, RpcError};
use agentsite::net::{Keypair, Library, Multiaddr, NetConfig, Network, PeerId, Transports};
use agentsite::receipt::Ran;
use agentsite::runtime::Capacity;
use agentsite::store::AgentRecord;
use agentsite::store::manifest::{Manifest, SignedManifest};
use agentsite::{AgentId, Node};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bootstrap peers per joining node.
const JOIN_THROUGH: usize = 3;
/// Idle connections close sooner than on a real node (300 s). A real node
/// keeps a connection to each peer it spoke with in the last five minutes,
/// about 100 KB each; a thousand nodes in one process cannot (joining, each
/// node's bootstrap meets a few hundred peers). Gossip keeps its mesh
/// connections open regardless; lookups open the connections they need, as
/// on a node that has been quiet.
const SIM_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time the last joiners get to start their Kademlia bootstrap.
const SETTLE: Duration = Duration::from_secs(2);
/// How long one node may take to join: a bound for a join that never
/// ends, not a measure of speed. Its bootstrap is a lookup of its own id
/// and then one in each farther bucket, one after another, each ending
/// when the closest peers it met answered or timed out; beside one other
/// busy process a node joining the churned network of 70 took over 60 s.
const JOIN_AT_MOST: Duration = Duration::from_secs(180);
/// The network counts as quiet once the process uses less CPU than this
/// per second (gossip heartbeats and idle connections closing go on)...
const QUIET: Duration = Duration::from_millis(250);
/// ... or after this long regardless.
const QUIET_AT_MOST: Duration = Duration::from_secs(900);

/// What a simulated node offers, and when announcements reached it.
#[derive(Default)]
pub struct Shelf {
    offered: Mutex<HashMap<AgentId, SignedManifest>>,
    heard: Mutex<HashMap<AgentId, Instant>>,
}

impl Shelf {
    pub fn offer(&self, manifest: SignedManifest) {
        self.offered.lock().unwrap().insert(manifest.id(), manifest);
    }

    /// When the first announcement of `id` reached this node.
    pub fn heard(&self, id: &AgentId) -> Option<Instant> {
        self.heard.lock().unwrap().get(id).copied()
    }
}

#[async_trait::async_trait]
impl Library for Shelf {
    fn answer(&self, _from: PeerId, request: FetchRequest) -> FetchResponse {
        let offered = self.offered.lock().unwrap();
        match request {
            FetchRequest::Manifest { id } => match offered.get(&id) {
                Some(manifest) => FetchResponse::Manifest(manifest.encoded().to_vec()),
                None => FetchResponse::NotFound,
            },
            FetchRequest::Matching { keyword } => FetchResponse::Matching(
                offered
                    .values()
                    .filter(|m| m.keywords().contains(&keyword))
                    .map(|m| serde_bytes::ByteBuf::from(m.encoded().to_vec()))
                    .collect(),
            ),
            // Simulated agents are manifests without bytes.
            FetchRequest::Chunk { .. } => FetchResponse::NotFound,
        }
    }

    async fn call(&self, _from: PeerId, _request: &CallRequest) -> Result<Ran, RpcError> {
        Err(RpcError {
            code: rpc::code::NOT_FOUND,
            message: "a simulated node runs no agents".into(),
        })
    }

    fn announced(&self, manifest: SignedManifest, _host: PeerId) {
        self.heard
            .lock()
            .unwrap()
            .entry(manifest.id())
            .or_insert_with(Instant::now);
    }
}

pub struct SimNode {
    pub network: Network,
    pub shelf: Arc<Shelf>,
    pub keypair: Keypair,
    pub addresses: Vec<Multiaddr>,
}

impl SimNode {
    /// Signs a manifest for an agent of `size` made-up bytes, named `name`
    /// and tagged `tags`, as published by this node, and offers it.
    pub fn make_agent(&self, name: &str, tags: &[&str], size: usize) -> SignedManifest {
        let bytes: Vec<u8> = name.bytes().cycle().take(size.max(1)).collect();
        let description = format!("{name}, a simulated agent");
        self.offer_agent(&bytes, name, &description, tags, &[])
    }

    /// Signs and offers a manifest for a simulated agent with a card as an
    /// author would write it, and `tools` (name, description).
    pub fn make_described_agent(
        &self,
        name: &str,
        description: &str,
        tags: &[&str],
        tools: &[(&str, &str)],
    ) -> SignedManifest {
        self.offer_agent(name.as_bytes(), name, description, tags, tools)
    }

    /// Signs and offers a manifest for the component `bytes` (its id is
    /// theirs) with the card and tools given.
    pub fn offer_agent(
        &self,
        bytes: &[u8],
        name: &str,
        description: &str,
        tags: &[&str],
        tools: &[(&str, &str)],
    ) -> SignedManifest {
        let record = AgentRecord {
            id: AgentId::of(bytes),
            card: AgentCard {
                name: name.to_owned(),
                version: "1.0.0".into(),
                description: description.to_owned(),
                tags: tags.iter().map(|t| t.to_string()).collect(),
                homepage: None,
            },
            tools: tools
                .iter()
                .map(|(name, description)| agentsite::agent::tool::ToolSpec {
                    name: name.to_string(),
                    title: None,
                    description: description.to_string(),
                    input_schema: serde_json::json!({"type": "object"}),
                    output_schema: None,
                    annotations: Default::default(),
                    app: None,
                })
                .collect(),
            imports: Vec::new(),
            size: bytes.len() as u64,
            origin: agentsite::store::Origin::Local,
            added_at: 0,
            attached: None,
        };
        let manifest = Manifest::describe(&record, bytes, &self.keypair.public());
        let signed = SignedManifest::sign(manifest, &self.keypair).expect("the manifest signs");
        self.shelf.offer(signed.clone());
        signed
    }
}

/// Listening on a fresh in-memory address, joining through `bootstrap`.
pub fn memory_config(bootstrap: Vec<Multiaddr>) -> NetConfig {
    NetConfig::new(
        vec!["/memory/0".parse().unwrap()],
        bootstrap,
        Transports::Memory,
    )
}

/// A full node (store, runtime, hub) with its data in `dir`, on the memory
/// transport, joining through `bootstrap`.
pub async fn node_with_hub(dir: &Path, bootstrap: &[Multiaddr]) -> (Arc<Node>, Arc<Hub>) {
    node_with_hub_config(dir, bootstrap, NodeConfig::default()).await
}

/// [`node_with_hub`] with `config`.
pub async fn node_with_hub_config(
    dir: &Path,
    bootstrap: &[Multiaddr],
    config: NodeConfig,
) -> (Arc<Node>, Arc<Hub>) {
    let network = memory_config(bootstrap.to_vec());
    node_with_hub_on(dir, config, network, Keypair::generate_ed25519()).await
}

/// A full node with its data in `dir`, `config`, its network configured by
/// `network` and its peer identity `keypair` (the same keypair again for a
/// node restarting).
pub async fn node_with_hub_on(
    dir: &Path,
    config: NodeConfig,
    network: NetConfig,
    keypair: Keypair,
) -> (Arc<Node>, Arc<Hub>) {
    let node = Arc::new(Node::open(DataDir::new(dir), config, Capacity::OneShot).unwrap());
    let options = HubOptions {
        public: Vec::new(),
        seed_fetched: false,
        publisher: None,
    };
    let hub = Hub::start(node.clone(), keypair, network, options)
        .await
        .unwrap();
    (node, hub)
}

/// The signed manifest of `id`, once the DHT holds it (within 20 s).
pub async fn manifest_from_dht(network: &Network, id: AgentId) -> SignedManifest {
    super::eventually_async(
        Duration::from_secs(20),
        "the manifest reaches the DHT",
        async || network.manifest(id).await,
    )
    .await
}

pub struct Testnet {
    pub nodes: Vec<SimNode>,
    /// Routing-table sizes once the network settled (min, median, max).
    pub routing: (usize, usize, usize),
    settings: Settings,
}

/// What the simulated nodes are configured with, beyond a real node's
/// defaults.
#[derive(Clone, Copy)]
pub struct Settings {
    pub idle_timeout: Duration,
    pub lifetimes: agentsite::net::dht::Lifetimes,
    pub wire: SimWire,
}

/// What simulated nodes listen on and dial over.
#[derive(Clone, Copy)]
pub enum SimWire {
    /// libp2p's in-process memory transport (noise and yamux included).
    Memory,
    /// QUIC on loopback, the network's transports of a real node.
    Quic,
    /// TCP, node `n` at the address and port the function gives (which
    /// the test makes: see `netns::Internet::room`).
    Tcp(fn(usize) -> std::net::SocketAddrV4),
}

impl SimWire {
    /// The network configuration of node `n`, joining through `bootstrap`.
    fn config(self, n: usize, bootstrap: Vec<Multiaddr>) -> NetConfig {
        let on_network = |listen: String| NetConfig {
            // Every listen address is reachable here: confirmed at once,
            // as on the memory transport.
            reachability: false,
            ..NetConfig::new(
                vec![listen.parse().unwrap()],
                bootstrap.clone(),
                Transports::Network,
            )
        };
        match self {
            SimWire::Memory => memory_config(bootstrap),
            SimWire::Quic => on_network("/ip4/127.0.0.1/udp/0/quic-v1".into()),
            SimWire::Tcp(address_of) => {
                let at = address_of(n);
                on_network(format!("/ip4/{}/tcp/{}", at.ip(), at.port()))
            }
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            idle_timeout: SIM_IDLE_TIMEOUT,
            lifetimes: Default::default(),
            wire: SimWire::Memory,
        }
    }
}

/// Waits until no other simulated network of the suite runs, and holds
/// that until the guard is dropped. A network of hundreds of nodes
/// keeps both cores busy while it joins and settles; two at once
/// (the suite runs two tests at a time) starve each other past their
/// time limits. Taken before a test's time limit starts. The README's
/// test command (`scripts/test.sh`) also runs the modules whose tests take
/// it after the rest of the suite, one test at a time: beside any other
/// test (a model answering, agents compiling) a 200-node network took 92 s
/// to join its first 128 nodes, 81 s alone.
pub async fn alone() -> tokio::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ONE_AT_A_TIME.lock().await
}

impl Testnet {
    /// Starts `size` nodes and lets the network settle. `seed` picks who
    /// joins through whom, so that runs are repeatable.
    pub async fn start(size: usize, seed: u64) -> Testnet {
        Self::start_with(size, seed, SIM_IDLE_TIMEOUT).await
    }

    /// [`Testnet::start`], with connections closing after `idle_timeout`.
    pub async fn start_with(size: usize, seed: u64, idle_timeout: Duration) -> Testnet {
        let settings = Settings {
            idle_timeout,
            ..Settings::default()
        };
        Self::start_configured(size, seed, settings).await
    }

    /// [`Testnet::start`], with its nodes configured by `settings`.
    pub async fn start_configured(size: usize, seed: u64, settings: Settings) -> Testnet {
        let mut random = SplitMix(seed);
        let started = Instant::now();
        let mut nodes: Vec<SimNode> = Vec::with_capacity(size);
        for _ in 0..size {
            let bootstrap = (0..JOIN_THROUGH.min(nodes.len()))
                .map(|_| {
                    let through = &nodes[random.below(nodes.len())];
                    through.addresses[0].clone()
                })
                .collect();
            nodes.push(Self::join(nodes.len(), bootstrap, settings, None).await);
            if nodes.len().is_multiple_of(128) && nodes.len() < size {
                eprintln!(
                    "testnet: {} of {size} nodes joined in {:.1?} (resident memory {} MB)",
                    nodes.len(),
                    started.elapsed(),
                    resident_mb()
                );
            }
        }
        let joined = started.elapsed();
        let routing = Self::settle(&nodes).await;
        eprintln!(
            "testnet: {size} nodes joined in {joined:.1?}, settled in {:.1?}",
            started.elapsed() - joined
        );
        Testnet {
            nodes,
            routing,
            settings,
        }
    }

    /// Starts one more node that joins through the node at `through`.
    pub async fn join_one(&self, through: usize) -> SimNode {
        let n = self.nodes.len();
        Self::join(
            n,
            self.nodes[through].addresses.clone(),
            self.settings,
            None,
        )
        .await
    }

    /// Starts a node with `keypair` (a node restarting) that joins through
    /// the node at `through`.
    pub async fn rejoin(&self, through: usize, keypair: Keypair) -> SimNode {
        let bootstrap = self.nodes[through].addresses.clone();
        Self::join(self.nodes.len(), bootstrap, self.settings, Some(keypair)).await
    }

    /// Starts node `n` (which picks its address on some wires).
    async fn join(
        n: usize,
        bootstrap: Vec<Multiaddr>,
        settings: Settings,
        keypair: Option<Keypair>,
    ) -> SimNode {
        let keypair = keypair.unwrap_or_else(Keypair::generate_ed25519);
        let shelf = Arc::new(Shelf::default());
        let config = NetConfig {
            idle_timeout: settings.idle_timeout,
            lifetimes: settings.lifetimes,
            // Routing tables are filled only while joining: on a real
            // machine a node's five-minutely refresh (a few hundred
            // requests) costs nothing, but a thousand nodes sharing two
            // cores, each refreshing on its own, would keep both cores busy
            // with little else (the 1024-node network took 20 minutes to
            // build with it on and had not finished).
            table_refresh: None,
            ..settings.wire.config(n, bootstrap)
        };
        let network = Network::start(keypair.clone(), config, shelf.clone())
            .await
            .expect("a simulated node starts");
        // One join at a time, as in a real network, where nodes do not join
        // dozens a second: a join's bootstrap opens a few hundred
        // connections once routing tables fill (about 90 nodes), and joins
        // started faster than they finish overlap until both cores are
        // busy with handshakes and lookups time out.
        tokio::time::timeout(JOIN_AT_MOST, network.joined())
            .await
            .expect("a simulated node joins in time")
            .expect("the node answers");
        let addresses = network.addresses().await.expect("the node answers");
        SimNode {
            network,
            shelf,
            keypair,
            addresses,
        }
    }

    /// Gives the last joiners time to start their Kademlia bootstrap, then
    /// returns the routing-table sizes.
    async fn settle(nodes: &[SimNode]) -> (usize, usize, usize) {
        tokio::time::sleep(SETTLE).await;
        Self::routing_tables(nodes).await
    }

    /// Waits until the joins' Kademlia bootstraps have finished, for
    /// measurements: they run on well after the last node has joined, and
    /// anything measured meanwhile would measure a busy CPU (in a real
    /// network each node has its own). Done when the whole process is nearly
    /// idle; returns how long that took.
    pub async fn quiet(&mut self) -> Duration {
        let waited = calm(QUIET, QUIET_AT_MOST).await;
        self.routing = Self::routing_tables(&self.nodes).await;
        waited
    }

    /// Waits until the connections the joins and bootstraps opened have
    /// closed, for measurements of a network at rest: once the process is
    /// quiet they still close together when their idle timeout runs out,
    /// and a measurement that catches that wave measures the allocator.
    /// Done when the number of open connections has not fallen for longer
    /// than the idle timeout, or after `at_most`; returns how long that took
    /// and the connections each node then has (min, median, max).
    pub async fn at_rest(&self, at_most: Duration) -> (Duration, (usize, usize, usize)) {
        let started = Instant::now();
        let mut fewest = usize::MAX;
        let mut fewest_since = Instant::now();
        let mut per_node = self.connected_peers().await;
        while started.elapsed() < at_most {
            let open: usize = per_node.iter().sum();
            if open < fewest {
                fewest = open;
                fewest_since = Instant::now();
            } else if fewest_since.elapsed() > self.settings.idle_timeout + Duration::from_secs(1) {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            per_node = self.connected_peers().await;
        }
        (started.elapsed(), min_median_max(per_node))
    }

    async fn routing_tables(nodes: &[SimNode]) -> (usize, usize, usize) {
        let sizes =
            futures::future::join_all(nodes.iter().map(|node| node.network.routing_table_size()))
                .await
                .into_iter()
                .map(|size| size.unwrap_or(0))
                .collect::<Vec<usize>>();
        min_median_max(sizes)
    }

    /// How many peers each node is connected to.
    pub async fn connected_peers(&self) -> Vec<usize> {
        futures::future::join_all(self.nodes.iter().map(|node| node.network.peers()))
            .await
            .into_iter()
            .map(|peers| peers.map_or(0, |p| p.len()))
            .collect()
    }

    /// Waits up to `limit` until every node heard the announcement of
    /// every agent in `ids`; fails saying how many nodes missed one.
    pub async fn until_everyone_heard(&self, ids: &[AgentId], limit: Duration) {
        super::eventually_async(limit, "the announcements reach every node", async || {
            let deaf = self
                .nodes
                .iter()
                .filter(|node| ids.iter().any(|id| node.shelf.heard(id).is_none()))
                .count();
            if deaf == 0 {
                Ok(())
            } else {
                Err(format!("{deaf} nodes missed an announcement"))
            }
        })
        .await;
    }

    pub async fn shutdown(self) {
        futures::future::join_all(self.nodes.iter().map(|n| n.network.shutdown())).await;
    }
}

/// The smallest, the median and the largest of `counts` (zeros if empty).
fn min_median_max(mut counts: Vec<usize>) -> (usize, usize, usize) {
    counts.sort_unstable();
    match counts.as_slice() {
        [] => (0, 0, 0),
        all => (all[0], all[all.len() / 2], all[all.len() - 1]),
    }
}

/// Waits until the whole process uses less than `busy` of CPU time per
/// second, or for `at_most`; returns how long that took.
pub async fn calm(busy: Duration, at_most: Duration) -> Duration {
    calm_over(Duration::from_secs(1), busy, at_most).await
}

/// [`calm`], judged over windows of `window` instead of a second: short
/// windows tell sooner that the work of one operation is over.
pub async fn calm_over(window: Duration, busy: Duration, at_most: Duration) -> Duration {
    let started = Instant::now();
    let allowed = busy.mul_f64(window.as_secs_f64());
    while let Some(used) = cpu_used_over(window).await {
        if used < allowed || started.elapsed() > at_most {
            break;
        }
    }
    started.elapsed()
}

/// The CPU time the whole process uses while this waits for `window`, where
/// it can be read.
pub async fn cpu_used_over(window: Duration) -> Option<Duration> {
    let before = cpu_time()?;
    tokio::time::sleep(window).await;
    Some(cpu_time()?.saturating_sub(before))
}

/// This process's resident memory, in MB (0 where /proc is missing).
pub fn resident_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// The CPU time (user and system, all threads) this process has used so
/// far, to the nanosecond.
pub fn cpu_time() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill in.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    (status == 0).then(|| Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

/// A small, seeded generator: enough to pick bootstrap peers repeatably.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}
