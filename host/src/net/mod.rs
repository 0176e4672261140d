//! The network: nodes publish, find, fetch and call agents over libp2p, with
//! no central server.
//!
//! One task owns the libp2p swarm and runs its event loop ([`event_loop`]);
//! the rest of the host talks to it only through a [`Network`] handle, whose
//! methods send typed commands and await their answers. What the node offers
//! others (manifests, chunks, search matches, tool calls) comes from a
//! [`Library`] the host supplies. One file per protocol: [`dht`], [`gossip`],
//! [`fetch`], [`rpc`].

mod behaviour;
mod command;
pub mod dht;
mod dial_back;
mod event_loop;
pub mod fetch;
mod fetch_codec;
pub mod gossip;
pub mod identity;
mod keep_alive;
mod listeners;
mod lookups;
mod loopback;
mod mesh;
mod one_host;
mod peer_table;
mod publishing;
pub mod reach;
mod relay_hosts;
mod relays;
mod requests;
pub mod rpc;
mod strikes;
pub mod tcp;
mod wrapped;

use crate::AgentId;
use crate::receipt::Ran;
use crate::store::manifest::SignedManifest;
use fetch::{FetchRequest, FetchResponse};
pub use libp2p::{Multiaddr, PeerId, identity::Keypair};
use rpc::{CallRequest, ChatRelay, RpcError};
use serde::Serialize;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Which transports a node uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transports {
    /// TCP (noise, yamux) and QUIC: real nodes.
    Network,
    /// In-process memory channels (`/memory/<n>` addresses): simulations and tests.
    Memory,
}

/// How a node joins the network.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// Addresses to listen on, such as `/ip4/0.0.0.0/tcp/4077`.
    pub listen: Vec<Multiaddr>,
    /// Peers to join through; with none, the node is the first of its network.
    /// An address may end in `/p2p/<peer id>`.
    pub bootstrap: Vec<Multiaddr>,
    /// Peers it knew before (each address ends in `/p2p/<peer id>`): dialed
    /// as well, and a failure to reach them is no error.
    pub remembered: Vec<Multiaddr>,
    /// Also find peers on the local network by mDNS.
    pub mdns: bool,
    pub transports: Transports,
    /// How long a connection with nothing to do stays open. Gossip keeps
    /// its mesh connections open regardless.
    pub idle_timeout: Duration,
    /// How often the node refreshes its routing table (a Kademlia bootstrap:
    /// a lookup of its own id and of a random id in each farther bucket).
    /// With `None` it does so only while its table is small, as when joining.
    pub table_refresh: Option<Duration>,
    /// Find out whether others can dial this node (AutoNAT), reserve relays
    /// when they cannot, punch holes through NATs, and relay for others as
    /// `relay_service` says (see [`reach`]). On for real nodes; off in
    /// simulations that do not test it.
    pub reachability: bool,
    pub relay_service: reach::RelayService,
    pub relay_limits: reach::RelayLimits,
    /// How long DHT records live and how often they are sent again.
    pub lifetimes: dht::Lifetimes,
}

impl NetConfig {
    /// A node listening on `listen` and joining through `bootstrap`, with the
    /// defaults of a real node: no mDNS, [`IDLE_TIMEOUT`], [`TABLE_REFRESH`].
    pub fn new(listen: Vec<Multiaddr>, bootstrap: Vec<Multiaddr>, transports: Transports) -> Self {
        NetConfig {
            listen,
            bootstrap,
            remembered: Vec::new(),
            mdns: false,
            transports,
            idle_timeout: IDLE_TIMEOUT,
            table_refresh: Some(TABLE_REFRESH),
            reachability: transports == Transports::Network,
            relay_service: reach::RelayService::default(),
            relay_limits: reach::RelayLimits::default(),
            lifetimes: dht::Lifetimes::default(),
        }
    }
}

/// Connections stay open this long while idle by default, so that routing
/// tables stay reachable and lookups rarely wait for a new connection.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// How often a node refreshes its routing table by default (libp2p's own
/// default): a refresh costs a few hundred requests, which is nothing every
/// five minutes.
pub const TABLE_REFRESH: Duration = Duration::from_secs(5 * 60);

/// What this node offers other nodes. Implemented by the host over its store
/// and runtime.
#[async_trait::async_trait]
pub trait Library: Send + Sync + 'static {
    /// Answers a request for a manifest, a chunk or keyword matches. Runs on
    /// a blocking thread: it may read the disk.
    fn answer(&self, from: PeerId, request: FetchRequest) -> FetchResponse;
    /// Answers on the event loop what needs no disk and no waiting (a
    /// manifest, matches, a chunk already in memory), or hands the request
    /// back for [`Library::answer`] on a blocking thread. Handing a request
    /// to another thread costs more than serving a chunk from memory.
    fn answer_now(
        &self,
        _from: PeerId,
        request: FetchRequest,
    ) -> Result<FetchResponse, FetchRequest> {
        Err(request)
    }
    /// Runs a tool call another node asked for: its result and what it
    /// ran under, which the network signs a receipt of.
    async fn call(&self, from: PeerId, request: &CallRequest) -> Result<Ran, RpcError>;
    /// Completes a chat with a model this node shares: the answer in the
    /// OpenAI chat-completions format.
    async fn chat(&self, _from: PeerId, request: ChatRelay) -> Result<serde_json::Value, RpcError> {
        Err(RpcError {
            code: rpc::code::NOT_SHARED,
            message: format!("this node shares no model {:?}", request.model),
        })
    }
    /// The models this node shares.
    fn shared_models(&self) -> Vec<String> {
        Vec::new()
    }
    /// A valid announcement arrived: `host` says it hosts the agent.
    fn announced(&self, manifest: SignedManifest, host: PeerId);
    /// The node is now connected to `peers` peers.
    fn connections_changed(&self, _peers: usize) {}
}

/// Tells a peer to drop a request unless it was answered (see [`rpc`]).
struct CancelUnanswered {
    commands: mpsc::Sender<command::Command>,
    peer: PeerId,
    /// The request's id until its answer came.
    id: Option<u64>,
}

impl Drop for CancelUnanswered {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        // Nobody waits for the acknowledgement. If the command queue is
        // full, the peer runs the work until its deadline, as it would
        // without this.
        let (reply, _) = oneshot::channel();
        let _ = self.commands.try_send(command::Command::Rpc {
            peer: self.peer,
            message: rpc::cancel_request(id),
            reply,
        });
    }
}

/// Why a network operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NetError {
    #[error("the network task has stopped")]
    Stopped,
    #[error("no agent {0} was found on the network")]
    NotFound(AgentId),
    #[error("the lookup of agent {0} ran out of time before the peers it asked answered")]
    LookupTimedOut(AgentId),
    #[error("request to {peer} failed: {reason}")]
    Request { peer: PeerId, reason: String },
    #[error("{0}")]
    Dht(String),
}

/// A connected peer.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct PeerInfo {
    pub peer_id: String,
    pub addresses: Vec<String>,
    /// What the peer calls itself (identify's agent version), once known.
    pub agent_version: Option<String>,
    /// Whether it speaks agentsite's DHT.
    pub agentsite: bool,
    /// Since when it is connected, in Unix milliseconds.
    #[serde(default)]
    pub connected_at: u64,
    /// Whether this node dialed it (else it dialed this node).
    #[serde(default)]
    pub dialed: bool,
    /// Its open connections: direct ones over TCP or QUIC, or relayed.
    #[serde(default)]
    pub connections: Vec<Connection>,
    /// Whether the last attempt to turn a relayed connection to it into a
    /// direct one (hole punching) failed: a NAT between does not allow it.
    #[serde(default)]
    pub hole_punch_failed: bool,
}

impl PeerInfo {
    /// The address a person is shown for this peer: the first it gave that
    /// is not loopback, unless it is reached over loopback (every node
    /// lists its loopback address first, which says nothing of a peer on
    /// another host); else where its connection goes.
    pub fn shown_address(&self) -> Option<&str> {
        let loopback = |address: &str| {
            address
                .parse::<Multiaddr>()
                .is_ok_and(|address| reach::is_loopback(&address))
        };
        let over_loopback = self.connections.iter().any(|c| loopback(&c.address));
        self.addresses
            .iter()
            .find(|address| over_loopback || !loopback(address))
            .or_else(|| self.connections.first().map(|c| &c.address))
            .or(self.addresses.first())
            .map(String::as_str)
    }
}

/// One connection to a peer.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Connection {
    /// The address at the other end.
    pub address: String,
    /// `tcp`, `quic`, `relayed` or `memory`.
    pub transport: String,
}

/// What publishing an agent did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct PublishReport {
    /// Peers that stored the manifest record (at least 1 once stored;
    /// 0 when every attempt failed).
    pub record_replicas: usize,
    /// Keys (the id and each keyword) this node is now a provider for.
    pub provider_keys: usize,
    /// Keys whose provider announcement could not be confirmed after every
    /// attempt (each publication query is sent up to three times).
    pub provider_keys_unconfirmed: usize,
    /// Peers the gossip announcement went to directly.
    pub gossip_peers: usize,
}

/// The hosts found for a key.
#[derive(Debug, Clone, Default)]
pub struct ProviderLookup {
    pub providers: Vec<PeerId>,
    /// Requests the lookup sent (a measure of its cost in hops).
    pub requests: u32,
}

/// A handle on the running network task. Cheap to clone; the task stops when
/// the last handle is dropped or [`Network::shutdown`] is called.
#[derive(Clone)]
pub struct Network {
    commands: mpsc::Sender<command::Command>,
    peer_id: PeerId,
}

impl Network {
    /// Starts a node with `keypair`, listening where `config` says, and
    /// returns once every listener has an address.
    pub async fn start(
        keypair: Keypair,
        config: NetConfig,
        library: std::sync::Arc<dyn Library>,
    ) -> anyhow::Result<Network> {
        let peer_id = keypair.public().to_peer_id();
        let swarm = behaviour::swarm(keypair.clone(), &config)?;
        let (commands, receiver) = mpsc::channel(1024);
        event_loop::EventLoop::start(swarm, keypair, config, library, receiver).await?;
        Ok(Network { commands, peer_id })
    }

    pub fn peer_id(&self) -> PeerId {
        self.peer_id
    }

    async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> command::Command,
    ) -> Result<T, NetError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(command(reply))
            .await
            .map_err(|_| NetError::Stopped)?;
        answer.await.map_err(|_| NetError::Stopped)
    }

    /// The addresses this node listens on, each ending in `/p2p/<peer id>`.
    pub async fn addresses(&self) -> Result<Vec<Multiaddr>, NetError> {
        self.ask(|reply| command::Command::Addresses { reply })
            .await
    }

    /// Whether other nodes can dial this one, as far as it knows.
    pub async fn reachability(&self) -> Result<reach::Reachability, NetError> {
        self.ask(|reply| command::Command::Reachability { reply })
            .await
    }

    /// The peers this node is connected to.
    pub async fn peers(&self) -> Result<Vec<PeerInfo>, NetError> {
        self.ask(|reply| command::Command::Peers { reply }).await
    }

    /// Dials `address` (which may end in `/p2p/<peer id>`).
    pub async fn dial(&self, address: Multiaddr) -> Result<(), NetError> {
        self.ask(|reply| command::Command::Dial { address, reply })
            .await?
    }

    /// How many peers this node's Kademlia routing table holds.
    pub async fn routing_table_size(&self) -> Result<usize, NetError> {
        self.ask(|reply| command::Command::RoutingTableSize { reply })
            .await
    }

    /// Closes the relayed connections to `peer` when it has a direct one, so
    /// that what goes to it next goes direct (a relay carries little);
    /// whether it has a direct connection.
    pub async fn prefer_direct(&self, peer: PeerId) -> Result<bool, NetError> {
        self.ask(|reply| command::Command::PreferDirect { peer, reply })
            .await
    }

    /// The peers this node's Kademlia routing table holds.
    pub async fn routing_table(&self) -> Result<Vec<PeerId>, NetError> {
        self.ask(|reply| command::Command::RoutingTable { reply })
            .await
    }

    /// Waits until this node has joined its network: its first routing-table
    /// bootstrap (a lookup of its own id and of a random id in each farther
    /// bucket) is over. At once for the first node of a network.
    pub async fn joined(&self) -> Result<(), NetError> {
        self.ask(|reply| command::Command::Joined { reply }).await
    }

    /// Publishes `manifest`: the record under its id, this node as a
    /// provider of the id and of each keyword, and a gossip announcement.
    pub async fn publish(&self, manifest: SignedManifest) -> Result<PublishReport, NetError> {
        self.ask(|reply| command::Command::Publish {
            manifest: Box::new(manifest),
            reply,
        })
        .await
    }

    /// Announces `manifest` by gossip only, as hosted by this node, without
    /// storing DHT records (a republication of an agent whose records are
    /// stored). Returns how many mesh peers it went to.
    pub async fn announce(&self, manifest: SignedManifest) -> Result<usize, NetError> {
        self.ask(|reply| command::Command::Announce {
            manifest: Box::new(manifest),
            reply,
        })
        .await
    }

    /// Makes this node a provider of `keys` in the DHT (as publishing an
    /// agent does for its id and keywords).
    pub async fn provide(
        &self,
        keys: Vec<libp2p::kad::RecordKey>,
    ) -> Result<PublishReport, NetError> {
        self.ask(|reply| command::Command::Provide { keys, reply })
            .await
    }

    /// Finds hosts of `key`, stopping once `want` are known (or the lookup
    /// has asked every close peer).
    pub async fn providers(
        &self,
        key: libp2p::kad::RecordKey,
        want: usize,
    ) -> Result<ProviderLookup, NetError> {
        self.ask(|reply| command::Command::Providers { key, want, reply })
            .await?
    }

    /// The signed manifest of `id`, from the DHT; checked before it is returned.
    pub async fn manifest(&self, id: AgentId) -> Result<SignedManifest, NetError> {
        self.ask(|reply| command::Command::Manifest { id, reply })
            .await?
    }

    /// Sends a fetch-protocol request to `peer`.
    pub async fn request(
        &self,
        peer: PeerId,
        request: FetchRequest,
    ) -> Result<FetchResponse, NetError> {
        self.ask(|reply| command::Command::Fetch {
            peer,
            request,
            reply,
        })
        .await?
    }

    /// Asks `peer` to run a tool call and waits up to `timeout` for its
    /// answer: the tool's output or the node's refusal. The outer error
    /// says the peer could not be asked or did not answer.
    ///
    /// The answer carries the peer's signed receipt when the peer gives
    /// one (nodes before receipts do not). A receipt that does not hold (not
    /// the peer's signature, or not of this call and result) makes the
    /// answer worthless: the peer is blocked, as for a chunk that does not
    /// match, and the call fails with [`rpc::code::BAD_RECEIPT`].
    pub async fn call(
        &self,
        peer: PeerId,
        request: CallRequest,
        timeout: Duration,
    ) -> Result<Result<rpc::Answer, RpcError>, NetError> {
        let message = self.rpc(peer, request.to_json(), timeout).await?;
        let answer = rpc::read_answer(message, peer, &request);
        if let Err(error) = &answer
            && error.code == rpc::code::BAD_RECEIPT
        {
            self.penalise(peer, &error.message);
        }
        Ok(answer)
    }

    /// Asks `peer` to complete a chat with a model it shares, waiting up to
    /// `timeout`: its answer (OpenAI format) or its refusal.
    pub async fn chat(
        &self,
        peer: PeerId,
        request: ChatRelay,
        timeout: Duration,
    ) -> Result<Result<serde_json::Value, RpcError>, NetError> {
        let message = self.rpc(peer, request.to_json(), timeout).await?;
        Ok(rpc::parse_result(message))
    }

    /// The names of the models `peer` shares.
    pub async fn shared_models(
        &self,
        peer: PeerId,
        timeout: Duration,
    ) -> Result<Result<serde_json::Value, RpcError>, NetError> {
        let message = self.rpc(peer, rpc::models_request(), timeout).await?;
        Ok(rpc::parse_result(message))
    }

    /// Sends `message` to `peer` under a fresh id and waits up to `timeout`
    /// for the answer. When this stops waiting without one (its caller was
    /// dropped, or the time ran out), `peer` is told to drop the work.
    async fn rpc(
        &self,
        peer: PeerId,
        mut message: serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, NetError> {
        let id = rpc::new_request_id();
        message["id"] = id.into();
        let mut waiting = CancelUnanswered {
            commands: self.commands.clone(),
            peer,
            id: Some(id),
        };
        let answer = self.ask(|reply| command::Command::Rpc {
            peer,
            message,
            reply,
        });
        let answer =
            tokio::time::timeout(timeout, answer)
                .await
                .map_err(|_| NetError::Request {
                    peer,
                    reason: format!("no answer within {}", humantime::format_duration(timeout)),
                })?;
        if answer.is_ok() {
            waiting.id = None;
        }
        answer?
    }

    /// Blocks `peer`: it sent data that fails verification.
    pub fn penalise(&self, peer: PeerId, reason: &str) {
        let _ = self.commands.try_send(command::Command::Penalise {
            peer,
            reason: reason.to_owned(),
        });
    }

    /// Stops the network task and waits until it has.
    pub async fn shutdown(&self) {
        let _ = self.ask(|reply| command::Command::Shutdown { reply }).await;
    }
}

#[cfg(test)]
mod tests {
    use super::{Connection, PeerInfo};

    fn peer_at(addresses: &[&str], connected_to: &str) -> PeerInfo {
        PeerInfo {
            peer_id: "12D3KooWPeer".into(),
            addresses: addresses.iter().map(|a| a.to_string()).collect(),
            agent_version: None,
            agentsite: true,
            connected_at: 0,
            dialed: true,
            connections: vec![Connection {
                address: connected_to.into(),
                transport: "tcp".into(),
            }],
            hole_punch_failed: false,
        }
    }

    #[test]
    fn a_peer_is_shown_at_an_address_that_reaches_it() {
        let given = ["/ip4/127.0.0.1/tcp/4077", "/ip4/10.1.0.7/tcp/4077"];
        // On another host: its loopback address would be this host's.
        let elsewhere = peer_at(&given, "/ip4/10.1.0.7/tcp/4077");
        assert_eq!(elsewhere.shown_address(), Some("/ip4/10.1.0.7/tcp/4077"));
        // On this host, its first address is as good as any.
        let here = peer_at(&given, "/ip4/127.0.0.1/tcp/4077");
        assert_eq!(here.shown_address(), Some("/ip4/127.0.0.1/tcp/4077"));
        // Nothing but loopback given: where the connection goes.
        let only_loopback = peer_at(&given[..1], "/ip4/10.1.0.7/tcp/50123");
        assert_eq!(
            only_loopback.shown_address(),
            Some("/ip4/10.1.0.7/tcp/50123")
        );
    }
}
