//! The one task that owns the swarm: turns commands from [`Network`] handles
//! into swarm calls, and swarm events into answers, stored records and
//! announcements.
//!
//! [`Network`]: super::Network

use super::behaviour::{Behaviour, BehaviourEvent};
use super::fetch::{FetchRequest, FetchResponse};
use super::listeners;
use super::reach::{self, Reach, RelayCandidate, RelayService};
use super::rpc;
use super::{
    Library, NetConfig, NetError, PeerInfo, ProviderLookup, PublishReport, dht, gossip, mesh,
    one_host, strikes,
};
use crate::AgentId;
use crate::store::manifest::SignedManifest;
use futures::StreamExt as _;
use libp2p::identity::Keypair;
use libp2p::kad::{self, QueryId, QueryResult, RecordKey};
use libp2p::multiaddr::Protocol;
use libp2p::request_response::{self, OutboundRequestId, ResponseChannel};
use libp2p::swarm::{
    DialError, SwarmEvent,
    dial_opts::{DialOpts, PeerCondition},
};
use libp2p::{Multiaddr, PeerId, Swarm, gossipsub, identify, mdns, relay};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

type Reply<T> = oneshot::Sender<T>;

pub(super) enum Command {
    Addresses {
        reply: Reply<Vec<Multiaddr>>,
    },
    Peers {
        reply: Reply<Vec<PeerInfo>>,
    },
    Reachability {
        reply: Reply<reach::Reachability>,
    },
    Dial {
        address: Multiaddr,
        reply: Reply<Result<(), NetError>>,
    },
    RoutingTableSize {
        reply: Reply<usize>,
    },
    RoutingTable {
        reply: Reply<Vec<PeerId>>,
    },
    PreferDirect {
        peer: PeerId,
        reply: Reply<bool>,
    },
    Joined {
        reply: Reply<()>,
    },
    Publish {
        manifest: Box<SignedManifest>,
        reply: Reply<PublishReport>,
    },
    Announce {
        manifest: Box<SignedManifest>,
        reply: Reply<usize>,
    },
    /// Makes this node a provider of `keys` (no record, no announcement).
    Provide {
        keys: Vec<RecordKey>,
        reply: Reply<PublishReport>,
    },
    Providers {
        key: RecordKey,
        want: usize,
        reply: Reply<Result<ProviderLookup, NetError>>,
    },
    Manifest {
        id: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
    },
    Fetch {
        peer: PeerId,
        request: FetchRequest,
        reply: Reply<Result<FetchResponse, NetError>>,
    },
    Rpc {
        peer: PeerId,
        message: Value,
        reply: Reply<Result<Value, NetError>>,
    },
    Penalise {
        peer: PeerId,
        reason: String,
    },
    Shutdown {
        reply: Reply<()>,
    },
}

/// An answer the library computed off the event loop, to send back.
enum Answer {
    Fetch(ResponseChannel<FetchResponse>, FetchResponse),
    /// The answer to a request, and the key under which it could be
    /// cancelled while it ran.
    Rpc(ResponseChannel<Value>, Value, Option<(PeerId, u64)>),
}

/// A DHT query someone waits for.
enum Pending {
    Providers {
        want: usize,
        found: HashSet<PeerId>,
        reply: Reply<Result<ProviderLookup, NetError>>,
    },
    Manifest {
        id: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
    },
    /// One of the queries of a publication (see `publications`), and what
    /// to send again if it fails.
    Publish(u64, PublishStep),
    /// The routing-table bootstrap of joining the network.
    Join,
}

/// One query of a publication, as it can be started again, and how many
/// times it was.
#[derive(Clone)]
struct PublishStep {
    query: PublishQuery,
    attempt: u32,
}

#[derive(Clone)]
enum PublishQuery {
    Record(kad::Record),
    Provide(RecordKey),
}

impl PublishStep {
    fn first(query: PublishQuery) -> Self {
        PublishStep { query, attempt: 1 }
    }
}

/// How many times a publication query is sent before the publication says
/// it could not be done: a query times out when the peers it picked were
/// busy or gone, and a new one picks again.
const PUBLISH_ATTEMPTS: u32 = 3;

/// How long a node that leaves keeps its connections after it last
/// announced itself a provider. Kademlia reports an `ADD_PROVIDER` done
/// as soon as it is queued (the messages are one-way, and libp2p-kad does
/// not wait for them to be sent); over QUIC, closing the connection then
/// throws away what the other side has not read yet, so a publisher that
/// left right after `publish` returned lost its provider records on a
/// busy machine. Leaving waits until this long after the announcement,
/// driving the connections meanwhile, and not at all when none was made
/// lately.
const LINGER: Duration = Duration::from_secs(2);

/// A publication waiting for its record and provider queries.
struct Publication {
    remaining: usize,
    report: PublishReport,
    reply: Reply<PublishReport>,
}

/// What is known of a connected peer.
struct Peer {
    addresses: HashSet<Multiaddr>,
    agent_version: Option<String>,
    agentsite: bool,
    /// When its first open connection was made, in Unix milliseconds.
    connected_at: u64,
    /// Whether this node dialed that connection (else the peer did).
    dialed: bool,
    /// Whether it relays for others (identify lists the relay's hop protocol).
    offers_relay: bool,
    /// Its open connections: the address at the other end, and whether
    /// the peer dialed it.
    connections: HashMap<libp2p::swarm::ConnectionId, (Multiaddr, bool)>,
    /// Whether the last hole punch to it failed (its NAT or this node's
    /// does not keep ports): its relayed connection stays relayed.
    hole_punch_failed: bool,
}

pub(super) struct EventLoop {
    swarm: Swarm<Behaviour>,
    /// The node's identity, which signs its announcements.
    keypair: Keypair,
    library: Arc<dyn Library>,
    commands: mpsc::Receiver<Command>,
    answers: mpsc::UnboundedSender<Answer>,
    answered: mpsc::UnboundedReceiver<Answer>,
    queries: HashMap<QueryId, Pending>,
    publications: HashMap<u64, Publication>,
    next_publication: u64,
    /// When the last provider announcement was handed to Kademlia, which
    /// reports it done before its messages are sent (see [`LINGER`]).
    provided_at: Option<tokio::time::Instant>,
    fetches: HashMap<OutboundRequestId, Reply<Result<FetchResponse, NetError>>>,
    rpcs: HashMap<OutboundRequestId, Reply<Result<Value, NetError>>>,
    /// Requests of other nodes being worked on, by their sender and id, so
    /// that their sender can cancel them. Bounded by the streams a
    /// connection may have open.
    serving: HashMap<(PeerId, u64), CancellationToken>,
    peers: HashMap<PeerId, Peer>,
    listen_addresses: Vec<Multiaddr>,
    bootstrapped: bool,
    /// Whether joining is over: the first routing-table bootstrap ended
    /// (or there was nobody to join through).
    joined: bool,
    join_waiters: Vec<Reply<()>>,
    /// What the node knows of its reachability, and its relay reservations.
    reach: Reach,
    reach_enabled: bool,
    relay_service: RelayService,
    /// Peers that left DHT requests unanswered, and those avoided for it.
    strikes: strikes::Strikes,
}

impl EventLoop {
    /// Listens, dials the bootstrap peers, and spawns the loop once every
    /// listener has an address.
    pub(super) async fn start(
        mut swarm: Swarm<Behaviour>,
        keypair: Keypair,
        config: NetConfig,
        library: Arc<dyn Library>,
        commands: mpsc::Receiver<Command>,
    ) -> anyhow::Result<()> {
        let interfaces = listeners::interface_addresses();
        let mut startup = listeners::Startup::default();
        for address in &config.listen {
            refuse_if_taken(address)?;
            let listener = swarm
                .listen_on(address.clone())
                .map_err(|e| anyhow::anyhow!("cannot listen on {address}: {e}"))?;
            startup.opened(listener, address, &interfaces);
        }
        let (answers, answered) = mpsc::unbounded_channel();
        let mut event_loop = EventLoop {
            swarm,
            keypair,
            library,
            commands,
            answers,
            answered,
            queries: HashMap::new(),
            publications: HashMap::new(),
            next_publication: 0,
            provided_at: None,
            fetches: HashMap::new(),
            rpcs: HashMap::new(),
            serving: HashMap::new(),
            peers: HashMap::new(),
            listen_addresses: Vec::new(),
            bootstrapped: false,
            joined: config.bootstrap.is_empty() && !config.mdns,
            join_waiters: Vec::new(),
            reach: Reach::default(),
            reach_enabled: config.reachability,
            relay_service: config.relay_service,
            strikes: strikes::Strikes::default(),
        };
        // The relay service's status is the node's to set, not the
        // external addresses' (every listen address counts as one).
        event_loop.reachability_changed();
        event_loop.wait_for_listeners(startup).await?;
        for address in &config.bootstrap {
            event_loop.join_through(address.clone())?;
        }
        let me = *event_loop.swarm.local_peer_id();
        for address in config.remembered {
            if address.iter().last() == Some(Protocol::P2p(me)) {
                continue;
            }
            if let Err(e) = event_loop.join_through(address) {
                tracing::debug!("{e}");
            }
        }
        tokio::spawn(event_loop.run());
        Ok(())
    }

    /// Waits until every listener has reported its addresses (see
    /// [`listeners`]), so that what the node says it listens on is whole.
    /// A listener with no address within 10 s is an error; one that has
    /// some but not yet each interface's within 3 s more (an interface went
    /// away since they were read, say) is left to report the rest later.
    async fn wait_for_listeners(&mut self, mut startup: listeners::Startup) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut rest_by = None;
        while !startup.complete() {
            if rest_by.is_none() && startup.each_has_an_address() {
                rest_by = Some(tokio::time::Instant::now() + Duration::from_secs(3));
            }
            let event = match tokio::time::timeout_at(
                rest_by.unwrap_or(deadline),
                self.swarm.select_next_some(),
            )
            .await
            {
                Ok(event) => event,
                Err(_) if rest_by.is_some() => {
                    tracing::debug!("not every interface's listen address reported at start");
                    break;
                }
                Err(_) => anyhow::bail!("the network listeners did not start within 10 s"),
            };
            match &event {
                SwarmEvent::NewListenAddr {
                    listener_id,
                    address,
                } => startup.reported(*listener_id, address),
                SwarmEvent::ListenerError { error, .. } => {
                    anyhow::bail!("cannot listen: {error}");
                }
                SwarmEvent::ListenerClosed {
                    reason: Err(error), ..
                } => {
                    anyhow::bail!("cannot listen: {error}");
                }
                _ => {}
            }
            self.on_swarm_event(event);
        }
        Ok(())
    }

    /// Adds a bootstrap address and dials it.
    fn join_through(&mut self, address: Multiaddr) -> anyhow::Result<()> {
        if let Some(Protocol::P2p(peer)) = address.iter().last() {
            let mut bare = address.clone();
            bare.pop();
            dht::learn(&mut self.swarm.behaviour_mut().kad, peer, bare);
        }
        self.swarm
            .dial(address.clone())
            .map_err(|e| anyhow::anyhow!("cannot dial bootstrap peer {address}: {e}"))
    }

    async fn run(mut self) {
        let mut mesh_check = tokio::time::interval(mesh::CHECK_EVERY);
        mesh_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm_event(event),
                due = mesh_check.tick() => {
                    let now = std::time::Instant::now();
                    self.strikes.checked(due.into_std(), now, now + mesh::CHECK_EVERY);
                    self.supply_gossip_mesh();
                    self.seek_relays();
                }
                command = self.commands.recv() => match command {
                    Some(Command::Shutdown { reply }) => {
                        self.linger().await;
                        let _ = reply.send(());
                        break;
                    }
                    Some(command) => self.on_command(command),
                    None => break,
                },
                Some(answer) = self.answered.recv() => self.send_answer(answer),
            }
        }
        tracing::debug!("network task stopped");
    }

    /// Drives the connections until [`LINGER`] after the last provider
    /// announcement, so that its messages are sent and read before the
    /// node leaves.
    async fn linger(&mut self) {
        let Some(until) = self.provided_at.map(|at| at + LINGER) else {
            return;
        };
        let deadline = tokio::time::sleep_until(until);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm_event(event),
                _ = &mut deadline => return,
            }
        }
    }

    /// Dials routing-table peers when gossip has too few to build its mesh
    /// from (see [`mesh`]).
    fn supply_gossip_mesh(&mut self) {
        let behaviour = self.swarm.behaviour_mut();
        let in_mesh = behaviour
            .gossip
            .0
            .mesh_peers(&gossip::topic().hash())
            .count();
        let wanted = mesh::shortfall(in_mesh);
        if wanted == 0 {
            return;
        }
        let connected: HashSet<PeerId> = behaviour.gossip.0.all_peers().map(|(p, _)| *p).collect();
        let mut known = dht::routing_table(&mut behaviour.kad);
        known.retain(|peer| !connected.contains(peer));
        let start = getrandom::u64().unwrap_or(0) as usize;
        for peer in mesh::peers_to_dial(wanted, &known, start) {
            let dial = DialOpts::peer_id(peer)
                .condition(PeerCondition::DisconnectedAndNotDialing)
                .build();
            if let Err(e) = self.swarm.dial(dial) {
                tracing::debug!(%peer, "cannot dial a gossip candidate: {e}");
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Addresses { reply } => {
                let me = self.swarm.local_peer_id().to_owned();
                let addresses = self
                    .listen_addresses
                    .iter()
                    .map(|a| a.clone().with(Protocol::P2p(me)))
                    .collect();
                let _ = reply.send(addresses);
            }
            Command::Reachability { reply } => {
                let me = *self.swarm.local_peer_id();
                let _ = reply.send(self.reach.reachability(me));
            }
            Command::Peers { reply } => {
                let mut peers: Vec<PeerInfo> = self
                    .peers
                    .iter()
                    .map(|(id, peer)| PeerInfo {
                        peer_id: id.to_string(),
                        addresses: peer.addresses.iter().map(|a| a.to_string()).collect(),
                        agent_version: peer.agent_version.clone(),
                        agentsite: peer.agentsite,
                        connected_at: peer.connected_at,
                        dialed: peer.dialed,
                        connections: peer
                            .connections
                            .values()
                            .map(|(address, _)| super::Connection {
                                address: address.to_string(),
                                transport: reach::transport(address).to_owned(),
                            })
                            .collect(),
                        hole_punch_failed: peer.hole_punch_failed,
                    })
                    .collect();
                peers.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
                let _ = reply.send(peers);
            }
            Command::Dial { address, reply } => {
                let result = self
                    .join_through(address)
                    .map_err(|e| NetError::Dht(e.to_string()));
                let _ = reply.send(result);
            }
            Command::RoutingTableSize { reply } => {
                let kad = &mut self.swarm.behaviour_mut().kad;
                let _ = reply.send(kad.kbuckets().map(|bucket| bucket.num_entries()).sum());
            }
            Command::PreferDirect { peer, reply } => {
                let _ = reply.send(self.prefer_direct(peer));
            }
            Command::RoutingTable { reply } => {
                let _ = reply.send(dht::routing_table(&mut self.swarm.behaviour_mut().kad));
            }
            Command::Joined { reply } => {
                if self.joined {
                    let _ = reply.send(());
                } else {
                    self.join_waiters.push(reply);
                }
            }
            Command::Publish { manifest, reply } => {
                tracing::debug!(
                    "publishing; the addresses peers are given: {}",
                    self.swarm
                        .external_addresses()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                self.publish(*manifest, reply)
            }
            Command::Announce { manifest, reply } => {
                let _ = reply.send(self.announce(&manifest));
            }
            Command::Provide { keys, reply } => self.provide(keys, reply),
            Command::Providers { key, want, reply } => {
                let id = self.swarm.behaviour_mut().kad.get_providers(key);
                self.queries.insert(
                    id,
                    Pending::Providers {
                        want: want.max(1),
                        found: HashSet::new(),
                        reply,
                    },
                );
            }
            Command::Manifest { id, reply } => {
                let query = self
                    .swarm
                    .behaviour_mut()
                    .kad
                    .get_record(dht::agent_key(&id));
                self.queries.insert(query, Pending::Manifest { id, reply });
            }
            Command::Fetch {
                peer,
                request,
                reply,
            } => {
                let id = self
                    .swarm
                    .behaviour_mut()
                    .fetch
                    .send_request(&peer, request);
                self.fetches.insert(id, reply);
            }
            Command::Rpc {
                peer,
                message,
                reply,
            } => {
                let id = self.swarm.behaviour_mut().rpc.send_request(&peer, message);
                self.rpcs.insert(id, reply);
            }
            Command::Penalise { peer, reason } => self.block(peer, &reason),
            Command::Shutdown { .. } => unreachable!("handled by run"),
        }
    }

    fn publish(&mut self, manifest: SignedManifest, reply: Reply<PublishReport>) {
        // The announcement goes first: it reaches every node at once, while
        // the DHT records take a few round trips.
        let gossip_peers = self.announce(&manifest);
        let record = kad::Record::new(dht::agent_key(&manifest.id()), manifest.encoded().to_vec());
        let keywords = manifest.keywords();
        let keys = std::iter::once(dht::agent_key(&manifest.id()))
            .chain(keywords.iter().map(|k| dht::keyword_key(k)))
            .collect();
        self.start_publication(Some(record), keys, gossip_peers, reply);
    }

    /// Provides `keys`, as a publication without a record or announcement.
    fn provide(&mut self, keys: Vec<RecordKey>, reply: Reply<PublishReport>) {
        self.start_publication(None, keys, 0, reply);
    }

    /// Stores `record` and provides `keys`, answering `reply` once every
    /// query is over.
    fn start_publication(
        &mut self,
        record: Option<kad::Record>,
        keys: Vec<RecordKey>,
        gossip_peers: usize,
        reply: Reply<PublishReport>,
    ) {
        let number = self.next_publication;
        self.next_publication += 1;
        let mut publication = Publication {
            remaining: 0,
            report: PublishReport {
                gossip_peers,
                ..PublishReport::default()
            },
            reply,
        };
        if let Some(record) = record
            && self.send_publish_step(number, PublishStep::first(PublishQuery::Record(record)))
        {
            publication.remaining += 1;
        }
        for key in keys {
            if self.send_publish_step(number, PublishStep::first(PublishQuery::Provide(key))) {
                publication.remaining += 1;
                publication.report.provider_keys += 1;
            }
        }
        if publication.remaining == 0 {
            let _ = publication.reply.send(publication.report);
        } else {
            self.publications.insert(number, publication);
        }
    }

    /// Starts the query of one publication step; false if it could not even
    /// be started (the local store refused it).
    fn send_publish_step(&mut self, number: u64, step: PublishStep) -> bool {
        let kad = &mut self.swarm.behaviour_mut().kad;
        let started = match &step.query {
            PublishQuery::Record(record) => kad
                .put_record(record.clone(), kad::Quorum::One)
                .map_err(|e| format!("cannot store the manifest record locally: {e}")),
            PublishQuery::Provide(key) => kad
                .start_providing(key.clone())
                .map_err(|e| format!("cannot provide a key: {e}")),
        };
        match started {
            Ok(query) => {
                self.queries.insert(query, Pending::Publish(number, step));
                true
            }
            Err(e) => {
                tracing::warn!("{e}");
                false
            }
        }
    }

    /// A publication query failed: sends it again while attempts are left;
    /// false when none are.
    fn retry_publish_step(&mut self, number: u64, mut step: PublishStep) -> bool {
        if step.attempt >= PUBLISH_ATTEMPTS {
            return false;
        }
        step.attempt += 1;
        tracing::debug!("a publication query failed; sending it again");
        self.publications.contains_key(&number) && self.send_publish_step(number, step)
    }

    /// Joining is over: tells whoever waits for it.
    fn finish_join(&mut self) {
        self.joined = true;
        for waiter in self.join_waiters.drain(..) {
            let _ = waiter.send(());
        }
    }

    /// Tells the network of `manifest` as hosted here, by gossip, and lists it
    /// in this node's own index. Returns how many mesh peers it went to.
    fn announce(&mut self, manifest: &SignedManifest) -> usize {
        let gossip = &mut self.swarm.behaviour_mut().gossip.0;
        let mut mesh_peers = gossip.mesh_peers(&gossip::topic().hash()).count();
        let announcement = gossip::Announcement::encode(manifest, &self.keypair);
        match gossip.publish(gossip::topic(), announcement) {
            Ok(_) => {}
            Err(gossipsub::PublishError::Duplicate) => {}
            Err(gossipsub::PublishError::NoPeersSubscribedToTopic) => mesh_peers = 0,
            Err(e) => tracing::warn!("cannot announce {}: {e}", manifest.id()),
        }
        self.library
            .announced(manifest.clone(), *self.swarm.local_peer_id());
        mesh_peers
    }

    fn publication_step(&mut self, number: u64, step: impl FnOnce(&mut PublishReport)) {
        let Some(publication) = self.publications.get_mut(&number) else {
            return;
        };
        step(&mut publication.report);
        publication.remaining -= 1;
        if publication.remaining == 0
            && let Some(publication) = self.publications.remove(&number)
        {
            let _ = publication.reply.send(publication.report);
        }
    }

    fn send_answer(&mut self, answer: Answer) {
        let behaviour = self.swarm.behaviour_mut();
        // A failure here means the requester went away; nothing to do.
        match answer {
            Answer::Fetch(channel, response) => {
                let _ = behaviour.fetch.send_response(channel, response);
            }
            Answer::Rpc(channel, response, key) => {
                let _ = behaviour.rpc.send_response(channel, response);
                if let Some(key) = key {
                    self.serving.remove(&key);
                }
            }
        }
    }

    /// What follows from a change in what the node knows of its
    /// reachability: a private node serves the DHT as a client only (peers
    /// could not dial it back for their queries) and seeks relays; a public
    /// one relays for others if its operator lets it.
    fn reachability_changed(&mut self) {
        let public = self.reach.is_public();
        let private = self.reach.is_private();
        let behaviour = self.swarm.behaviour_mut();
        behaviour.kad.set_mode(Some(if private {
            kad::Mode::Client
        } else {
            kad::Mode::Server
        }));
        let relaying = match self.relay_service {
            RelayService::On => true,
            RelayService::Off => false,
            RelayService::Auto => public,
        };
        if let Some(relay) = behaviour.relay.as_mut() {
            // Identify tells peers of the change itself; one that does not
            // hear of it in time finds the relay anyway (`RelayCandidate::dialed`).
            relay.set_status(Some(if relaying {
                relay::Status::Enable
            } else {
                relay::Status::Disable
            }));
        }
        self.seek_relays();
    }

    /// A peer that dialed this node says where it sees it: the address it
    /// dialed. From a public address, that shows others can dial the node
    /// there (see [`reach::dialed_in_at`]).
    fn dialed_in(&mut self, peer: PeerId, connection: libp2p::swarm::ConnectionId, at: &Multiaddr) {
        if !self.reach_enabled || self.reach.is_private() || self.reach.is_public() {
            return;
        }
        let Some((remote, true)) = self
            .peers
            .get(&peer)
            .and_then(|p| p.connections.get(&connection))
        else {
            return;
        };
        if let Some(here) = reach::dialed_in_at(at, remote) {
            tracing::info!("reachable at {here}: {peer} dialed in from {remote}");
            self.swarm.add_external_address(here.clone());
            self.reach.passed(here);
            self.reachability_changed();
        }
    }

    /// Asks relays among the peers for a reservation, while the node is
    /// private and holds fewer than it wants.
    fn seek_relays(&mut self) {
        let candidates = self.peers.iter().map(|(peer, info)| RelayCandidate {
            peer: *peer,
            offers_relay: info.offers_relay,
            dialed: info
                .connections
                .values()
                .any(|(address, inbound)| !inbound && !reach::is_relayed(address)),
            addresses: &info.addresses,
        });
        let asked = self
            .reach
            .relays_to_ask(candidates, std::time::Instant::now());
        for (relay, circuit) in asked {
            match self.swarm.listen_on(circuit.clone()) {
                Ok(listener) => {
                    tracing::debug!("asking {relay} for a relay reservation");
                    self.reach.asked(listener, relay, circuit);
                }
                Err(e) => tracing::debug!("cannot listen through relay {relay}: {e}"),
            }
        }
    }

    /// Closes the relayed connections to `peer` if it has a direct one, so
    /// that what is sent to it next goes direct; whether it has one.
    fn prefer_direct(&mut self, peer: PeerId) -> bool {
        let Some(known) = self.peers.get(&peer) else {
            return false;
        };
        let relayed: Vec<libp2p::swarm::ConnectionId> = known
            .connections
            .iter()
            .filter(|(_, (address, _))| reach::is_relayed(address))
            .map(|(connection, _)| *connection)
            .collect();
        if relayed.len() == known.connections.len() {
            return false;
        }
        for connection in relayed {
            tracing::debug!(%peer, "closing a relayed connection: a direct one is open");
            self.swarm.close_connection(connection);
        }
        true
    }

    /// Adds `peer` at `address` to the routing table, unless it is being
    /// avoided (see [`dht::learn`] for when a bucket has room).
    fn learn(&mut self, peer: PeerId, address: Multiaddr) {
        if self.strikes.is_avoided(&peer, std::time::Instant::now()) {
            return;
        }
        dht::learn(&mut self.swarm.behaviour_mut().kad, peer, address);
    }

    /// A dial to `peer` failed: a peer that could not be reached at any of
    /// its addresses, or was another peer there, leaves the routing table,
    /// so that a node that left stops taking a place in a bucket and a path
    /// in lookups. Not while this node has no connection at all: then the
    /// fault is more likely its own, and a table emptied by it would leave
    /// the node nobody to rejoin through. A peer that comes back is learned
    /// again when it connects.
    fn dial_failed(&mut self, peer: PeerId, error: &DialError) {
        let gone = matches!(
            error,
            DialError::Transport(_) | DialError::WrongPeerId { .. } | DialError::NoAddresses
        );
        if gone && !self.swarm.is_connected(&peer) && self.swarm.connected_peers().next().is_some()
        {
            tracing::debug!(%peer, "unreachable: out of the routing table ({error})");
            self.swarm.behaviour_mut().kad.remove_peer(&peer);
        }
    }

    /// A dial to `peer` failed: if every address tried was public and the
    /// peer is reached only through a relay, that was this side of a hole
    /// punch (DCUtR dials the addresses the peer observed for itself), or a
    /// dial just as hopeless. DCUtR reports a punch that gave up only to
    /// the side that started it, which is the provider when this node
    /// fetches from a peer behind a NAT, and only after its third attempt
    /// (each one a dial that may wait out its timeout). One failure is
    /// taken as the answer: libp2p's hole-punching measurements found
    /// almost every punch that succeeds to succeed at its first attempt.
    /// That lets a large fetch stop waiting for a direct connection that
    /// will not come.
    fn direct_dial_failed(&mut self, peer: PeerId, error: &DialError) {
        let DialError::Transport(tried) = error else {
            return;
        };
        let at_public = !tried.is_empty()
            && tried
                .iter()
                .all(|(address, _)| reach::public_ip(address).is_some());
        let Some(info) = self.peers.get_mut(&peer) else {
            return;
        };
        let relayed_only = !info.connections.is_empty()
            && info
                .connections
                .values()
                .all(|(address, _)| reach::is_relayed(address));
        if at_public && relayed_only && !info.hole_punch_failed {
            tracing::debug!(%peer, "hole punching failed: a direct dial to a peer reached through a relay failed");
            info.hole_punch_failed = true;
        }
    }

    fn block(&mut self, peer: PeerId, reason: &str) {
        tracing::warn!(%peer, "blocking peer: {reason}");
        let behaviour = self.swarm.behaviour_mut();
        behaviour.blocked.block_peer(peer);
        behaviour.kad.remove_peer(&peer);
        self.peers.remove(&peer);
    }

    fn on_swarm_event(&mut self, event: SwarmEvent<BehaviourEvent>) {
        match event {
            SwarmEvent::NewListenAddr { address, .. } => {
                tracing::info!("listening on {address}");
                // Where the node learns its reachability, AutoNAT confirms
                // the addresses others can dial it at (the relay client
                // confirms relayed ones): a listen address counted as
                // external would not be tested, and one behind a NAT is
                // no use to anyone outside. In simulations, every listen
                // address is reachable: confirmed at once, for Kademlia's
                // records to carry.
                if !self.reach_enabled {
                    self.swarm.add_external_address(address.clone());
                }
                self.listen_addresses.push(address);
            }
            SwarmEvent::ExpiredListenAddr { address, .. } => {
                self.swarm.remove_external_address(&address);
                self.listen_addresses.retain(|a| *a != address);
            }
            SwarmEvent::ConnectionEstablished {
                peer_id,
                connection_id,
                endpoint,
                ..
            } => {
                let peer = self.peers.entry(peer_id).or_insert_with(|| Peer {
                    addresses: HashSet::new(),
                    agent_version: None,
                    agentsite: false,
                    connected_at: crate::clock::unix_millis(),
                    dialed: endpoint.is_dialer(),
                    offers_relay: false,
                    connections: HashMap::new(),
                    hole_punch_failed: false,
                });
                if !reach::is_relayed(endpoint.get_remote_address()) {
                    peer.hole_punch_failed = false;
                }
                peer.connections.insert(
                    connection_id,
                    (endpoint.get_remote_address().clone(), !endpoint.is_dialer()),
                );
                if endpoint.is_dialer() {
                    peer.addresses.insert(endpoint.get_remote_address().clone());
                }
                self.library.connections_changed(self.peers.len());
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                num_established: 0,
                ..
            } => {
                self.peers.remove(&peer_id);
                self.library.connections_changed(self.peers.len());
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                connection_id,
                ..
            } => {
                if let Some(peer) = self.peers.get_mut(&peer_id) {
                    peer.connections.remove(&connection_id);
                }
            }
            SwarmEvent::ListenerClosed {
                listener_id,
                reason,
                ..
            } => {
                if let Some(relay) = self.reach.closed(listener_id, std::time::Instant::now()) {
                    let why = reason.err().map(|e| format!(": {e}")).unwrap_or_default();
                    tracing::info!(%relay, "the reservation on relay {relay} ended{why}");
                    self.seek_relays();
                }
            }
            SwarmEvent::ExternalAddrExpired { address } => {
                self.reach.expired(&address);
                self.reachability_changed();
            }
            SwarmEvent::OutgoingConnectionError {
                peer_id: Some(peer),
                error,
                ..
            } => {
                self.direct_dial_failed(peer, &error);
                self.dial_failed(peer, &error);
            }
            SwarmEvent::Behaviour(event) => self.on_behaviour_event(event),
            _ => {}
        }
    }

    fn on_behaviour_event(&mut self, event: BehaviourEvent) {
        match event {
            BehaviourEvent::Kad(strikes::Event::Kad(event)) => self.on_kad_event(event),
            BehaviourEvent::Kad(strikes::Event::Unanswered(peer)) => {
                if self.strikes.strike(peer, std::time::Instant::now()) {
                    tracing::info!(
                        %peer,
                        "avoiding peer for {} min: it left {} DHT requests unanswered",
                        strikes::AVOID_FOR.as_secs() / 60,
                        strikes::STRIKES_TO_AVOID
                    );
                    self.swarm.behaviour_mut().kad.remove_peer(&peer);
                }
            }
            BehaviourEvent::Gossip(event) => self.on_gossip_event(event),
            BehaviourEvent::Identify(identify::Event::Received {
                peer_id,
                connection_id,
                info,
            }) => {
                self.dialed_in(peer_id, connection_id, &info.observed_addr);
                let speaks_dht = info.protocols.contains(&dht::PROTOCOL);
                // A node behind a NAT serves the DHT as a client only: still
                // an agentsite node.
                let agentsite =
                    speaks_dht || info.protocol_version == super::behaviour::PROTOCOL_VERSION;
                if !speaks_dht && agentsite {
                    // It stopped answering DHT queries (it found itself
                    // unreachable): peers must not be sent to it.
                    self.swarm.behaviour_mut().kad.remove_peer(&peer_id);
                }
                if speaks_dht
                    && let Some(ip) = self
                        .swarm
                        .behaviour_mut()
                        .one_host
                        .dht_server_past_limit(peer_id)
                {
                    tracing::debug!(
                        %peer_id,
                        "disconnecting: already connected to {} DHT peers at {ip}",
                        one_host::PEERS_PER_HOST
                    );
                    self.swarm.behaviour_mut().kad.remove_peer(&peer_id);
                    let _ = self.swarm.disconnect_peer_id(peer_id);
                    return;
                }
                if speaks_dht {
                    // A peer's loopback addresses are this machine's unless
                    // it is on this machine: not worth keeping, nor handing
                    // to others who would dial themselves.
                    let local_peer = self.peers.get(&peer_id).is_some_and(|p| {
                        p.connections
                            .values()
                            .any(|(address, _)| reach::is_loopback(address))
                    });
                    for address in info.listen_addrs.iter().take(dht::ADDRESSES_PER_PEER) {
                        if reach::is_loopback(address) && !local_peer {
                            continue;
                        }
                        self.learn(peer_id, address.clone());
                    }
                    if !self.bootstrapped {
                        self.bootstrapped = true;
                        match self.swarm.behaviour_mut().kad.bootstrap() {
                            Ok(query) => {
                                self.queries.insert(query, Pending::Join);
                            }
                            Err(_) => self.finish_join(),
                        }
                    }
                }
                tracing::debug!(%peer_id, "identified; it sees this node at {}", info.observed_addr);
                // An identification may arrive after the last connection
                // closed: a peer that is gone is not listed again.
                if let Some(peer) = self.peers.get_mut(&peer_id) {
                    peer.agentsite = agentsite;
                    peer.offers_relay = info.protocols.contains(&relay::HOP_PROTOCOL_NAME);
                    peer.agent_version = Some(shown_agent_version(&info.agent_version));
                    // What it says now (its first few addresses), and where
                    // this node reached it: a peer that identifies itself
                    // again and again with new addresses does not make the
                    // list grow.
                    peer.addresses = info
                        .listen_addrs
                        .into_iter()
                        .take(dht::ADDRESSES_PER_PEER)
                        .collect();
                    peer.addresses.extend(
                        peer.connections
                            .values()
                            .filter(|(_, inbound)| !inbound)
                            .map(|(address, _)| address.clone()),
                    );
                }
                self.seek_relays();
            }
            BehaviourEvent::Identify(identify::Event::Pushed { peer_id, info, .. }) => {
                tracing::debug!(
                    %peer_id,
                    "told it what this node offers: {}",
                    info.protocols.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
                );
            }
            BehaviourEvent::Identify(identify::Event::Error { peer_id, error, .. }) => {
                tracing::debug!(%peer_id, "identify failed: {error}");
            }
            BehaviourEvent::Identify(_) => {}
            BehaviourEvent::Fetch(event) => self.on_fetch_event(event),
            BehaviourEvent::Rpc(event) => self.on_rpc_event(event),
            BehaviourEvent::Mdns(mdns::Event::Discovered(found)) => {
                for (peer, address) in found {
                    self.learn(peer, address.clone());
                    let _ = self
                        .swarm
                        .dial(DialOpts::peer_id(peer).addresses(vec![address]).build());
                }
            }
            BehaviourEvent::Mdns(_) => {}
            BehaviourEvent::Blocked(never) => match never {},
            BehaviourEvent::Autonat(event) => {
                match event.result {
                    Ok(()) => {
                        tracing::info!(
                            "reachable at {}: {} dialed it back",
                            event.tested_addr,
                            event.server
                        );
                        self.reach.passed(event.tested_addr);
                    }
                    Err(e) => {
                        tracing::debug!(
                            "not reachable at {} ({} could not dial it back: {e})",
                            event.tested_addr,
                            event.server
                        );
                        self.reach.failed();
                    }
                }
                self.reachability_changed();
            }
            BehaviourEvent::AutonatServer(event) => {
                tracing::debug!(
                    client = %event.client,
                    "dial-back to {}: {:?}",
                    event.tested_addr,
                    event.result
                );
            }
            BehaviourEvent::RelayClient(relay::client::Event::ReservationReqAccepted {
                relay_peer_id,
                renewal,
                ..
            }) => {
                if !renewal {
                    tracing::info!("reachable through relay {relay_peer_id}");
                }
                self.reach.accepted(relay_peer_id);
            }
            BehaviourEvent::RelayClient(event) => tracing::debug!("relay client: {event:?}"),
            BehaviourEvent::Relay(event) => tracing::debug!("relay service: {event:?}"),
            BehaviourEvent::Dcutr(event) => {
                let failed = event.result.is_err();
                match event.result {
                    Ok(_) => tracing::info!(
                        peer = %event.remote_peer_id,
                        "relayed connection upgraded to a direct one"
                    ),
                    Err(e) => tracing::debug!(peer = %event.remote_peer_id, "{e}"),
                }
                if let Some(peer) = self.peers.get_mut(&event.remote_peer_id) {
                    peer.hole_punch_failed = failed;
                }
            }
        }
    }

    fn on_kad_event(&mut self, event: kad::Event) {
        match event {
            // A connected peer speaks the DHT and can be reached at `address`.
            kad::Event::RoutablePeer { peer, address }
            | kad::Event::PendingRoutablePeer { peer, address } => {
                self.learn(peer, address);
            }
            kad::Event::OutboundQueryProgressed {
                id,
                result,
                stats,
                step,
            } => self.on_query_progress(id, result, stats, step.last),
            kad::Event::InboundRequest { request } => match request {
                kad::InboundRequest::PutRecord {
                    source,
                    record: Some(record),
                    ..
                } => match dht::check_record(&record) {
                    Ok(_) => {
                        dht::keep_longest(self.swarm.behaviour_mut().kad.store_mut(), record);
                    }
                    Err(e) => self.block(source, &format!("sent an invalid DHT record: {e}")),
                },
                kad::InboundRequest::AddProvider {
                    record: Some(record),
                } => {
                    // kad has checked that the provider is the sender; we
                    // keep only keys of our own kinds.
                    let key = record.key.as_ref();
                    if key.starts_with(b"/agentsite/agent/")
                        || key.starts_with(b"/agentsite/keyword/")
                        || key.starts_with(b"/agentsite/llm/")
                    {
                        tracing::debug!(
                            provider = %record.provider,
                            "provider record at {}",
                            record.addresses.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
                        );
                        let store = self.swarm.behaviour_mut().kad.store_mut();
                        if let Err(e) = kad::store::RecordStore::add_provider(store, record) {
                            tracing::debug!("provider record not stored: {e}");
                        }
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn on_query_progress(
        &mut self,
        id: QueryId,
        result: QueryResult,
        stats: kad::QueryStats,
        last: bool,
    ) {
        let Some(pending) = self.queries.remove(&id) else {
            return;
        };
        match (pending, result) {
            (
                Pending::Providers {
                    want,
                    mut found,
                    reply,
                },
                QueryResult::GetProviders(outcome),
            ) => {
                if let Ok(kad::GetProvidersOk::FoundProviders { providers, .. }) = outcome {
                    // Dial new providers now, while the query still knows
                    // their addresses.
                    for provider in &providers {
                        if !self.swarm.is_connected(provider)
                            && provider != self.swarm.local_peer_id()
                        {
                            let _ = self.swarm.dial(DialOpts::peer_id(*provider).build());
                        }
                    }
                    found.extend(providers);
                }
                // Responses come one by one, empty ones included: answer
                // once enough hosts are known or the lookup is over.
                if found.len() >= want || last {
                    if !last && let Some(mut query) = self.swarm.behaviour_mut().kad.query_mut(&id)
                    {
                        query.finish();
                    }
                    let _ = reply.send(Ok(ProviderLookup {
                        providers: found.into_iter().collect(),
                        requests: stats.num_requests(),
                    }));
                } else {
                    self.queries
                        .insert(id, Pending::Providers { want, found, reply });
                }
            }
            (Pending::Manifest { id: agent, reply }, QueryResult::GetRecord(outcome)) => {
                match outcome {
                    Ok(kad::GetRecordOk::FoundRecord(found)) => {
                        match dht::check_record(&found.record) {
                            Ok(manifest) if manifest.id() == agent => {
                                if let Some(mut query) =
                                    self.swarm.behaviour_mut().kad.query_mut(&id)
                                {
                                    query.finish();
                                }
                                let _ = reply.send(Ok(manifest));
                                return;
                            }
                            outcome => {
                                if let Some(peer) = found.peer {
                                    let reason = match outcome {
                                        Err(e) => e.to_string(),
                                        Ok(_) => "returned another agent's manifest".into(),
                                    };
                                    self.block(peer, &format!("returned a bad record: {reason}"));
                                }
                            }
                        }
                        if last {
                            let _ = reply.send(Err(NetError::NotFound(agent)));
                        } else {
                            self.queries
                                .insert(id, Pending::Manifest { id: agent, reply });
                        }
                    }
                    _ if !last => {
                        self.queries
                            .insert(id, Pending::Manifest { id: agent, reply });
                    }
                    _ => {
                        let _ = reply.send(Err(NetError::NotFound(agent)));
                    }
                }
            }
            (Pending::Publish(number, step), QueryResult::PutRecord(outcome)) => {
                let replicas = match outcome {
                    Ok(_) => 1,
                    Err(kad::PutRecordError::QuorumFailed { success, .. })
                    | Err(kad::PutRecordError::Timeout { success, .. }) => success.len(),
                };
                if replicas == 0 && self.retry_publish_step(number, step) {
                    return;
                }
                self.publication_step(number, |r| r.record_replicas = replicas);
            }
            (Pending::Publish(number, step), QueryResult::StartProviding(outcome)) => {
                self.provided_at = Some(tokio::time::Instant::now());
                let confirmed = outcome.is_ok();
                if !confirmed && self.retry_publish_step(number, step) {
                    return;
                }
                self.publication_step(number, |r| {
                    if !confirmed {
                        r.provider_keys_unconfirmed += 1
                    }
                });
            }
            (Pending::Join, QueryResult::Bootstrap(_)) => {
                if last {
                    self.finish_join();
                } else {
                    self.queries.insert(id, Pending::Join);
                }
            }
            (pending, _) => {
                if !last {
                    self.queries.insert(id, pending);
                }
            }
        }
    }

    fn on_gossip_event(&mut self, event: gossipsub::Event) {
        let gossipsub::Event::Message {
            propagation_source,
            message_id,
            message,
        } = event
        else {
            return;
        };
        let verdict = gossip::Announcement::decode(&message.data);
        let acceptance = if verdict.is_ok() {
            gossipsub::MessageAcceptance::Accept
        } else {
            gossipsub::MessageAcceptance::Reject
        };
        self.swarm
            .behaviour_mut()
            .gossip
            .0
            .report_message_validation_result(&message_id, &propagation_source, acceptance);
        match verdict {
            Ok(announcement) => self
                .library
                .announced(announcement.manifest, announcement.host),
            Err(e) => tracing::warn!(peer = %propagation_source, "rejected an announcement: {e}"),
        }
    }

    fn on_fetch_event(&mut self, event: request_response::Event<FetchRequest, FetchResponse>) {
        let Some((peer, request, channel)) = settle(&mut self.fetches, event) else {
            return;
        };
        let request = match self.library.answer_now(peer, request) {
            Ok(response) => {
                self.send_answer(Answer::Fetch(channel, response));
                return;
            }
            Err(request) => request,
        };
        let library = self.library.clone();
        let answers = self.answers.clone();
        // The library may read the disk: keep that off the event loop.
        tokio::task::spawn_blocking(move || {
            let response = library.answer(peer, request);
            let _ = answers.send(Answer::Fetch(channel, response));
        });
    }

    fn on_rpc_event(&mut self, event: request_response::Event<Value, Value>) {
        let Some((peer, message, channel)) = settle(&mut self.rpcs, event) else {
            return;
        };
        // A message that is no request of ours, and a cancel, are answered
        // here; the others reach the library.
        let request = match rpc::Inbound::from_json(&message) {
            Ok(rpc::Inbound::Cancel(id)) => {
                if let Some(work) = self.serving.get(&(peer, id)) {
                    work.cancel();
                }
                Err(Ok(serde_json::json!({})))
            }
            Ok(request) => Ok(request),
            Err(error) => Err(Err(error)),
        };
        let request = match request {
            Ok(request) => request,
            Err(answer) => {
                let response = rpc::response(answer);
                let _ = self
                    .swarm
                    .behaviour_mut()
                    .rpc
                    .send_response(channel, response);
                return;
            }
        };
        // A request with an id its sender does not use already can be
        // cancelled by it.
        let id = rpc::request_id(&message);
        let cancel = CancellationToken::new();
        let key = (id != 0 && !self.serving.contains_key(&(peer, id))).then(|| {
            self.serving.insert((peer, id), cancel.clone());
            (peer, id)
        });
        let library = self.library.clone();
        let answers = self.answers.clone();
        tokio::spawn(async move {
            let work = async {
                match request {
                    rpc::Inbound::Call(call) => rpc::response(library.call(peer, call).await),
                    rpc::Inbound::Chat(chat) => rpc::response(library.chat(peer, chat).await),
                    rpc::Inbound::Models => rpc::response(Ok(serde_json::json!({
                        "models": library.shared_models(),
                    }))),
                    rpc::Inbound::Cancel(_) => unreachable!("answered above"),
                }
            };
            // Dropping the work stops it (an agent at its next epoch check).
            let response = tokio::select! {
                response = work => response,
                _ = cancel.cancelled() => rpc::response::<()>(Err(rpc::RpcError {
                    code: rpc::code::CANCELLED,
                    message: "cancelled by the caller".into(),
                })),
            };
            let _ = answers.send(Answer::Rpc(channel, response, key));
        });
    }
}

/// Hands a response or failure of a request-response protocol to whoever
/// waits for it in `waiting`; returns an inbound request for the caller to
/// answer.
fn settle<Request, Response>(
    waiting: &mut HashMap<OutboundRequestId, Reply<Result<Response, NetError>>>,
    event: request_response::Event<Request, Response>,
) -> Option<(PeerId, Request, ResponseChannel<Response>)> {
    match event {
        request_response::Event::Message { peer, message, .. } => match message {
            request_response::Message::Request {
                request, channel, ..
            } => return Some((peer, request, channel)),
            request_response::Message::Response {
                request_id,
                response,
            } => {
                if let Some(reply) = waiting.remove(&request_id) {
                    let _ = reply.send(Ok(response));
                }
            }
        },
        request_response::Event::OutboundFailure {
            peer,
            request_id,
            error,
            ..
        } => {
            if let Some(reply) = waiting.remove(&request_id) {
                let _ = reply.send(Err(NetError::Request {
                    peer,
                    reason: error.to_string(),
                }));
            }
        }
        _ => {}
    }
    None
}

/// Refuses a TCP listen address whose port another process holds.
/// libp2p's TCP listeners set SO_REUSEPORT (so that dials can leave from
/// the listening port, which hole punching needs), and so a second node
/// given the same port would bind it beside the first, the kernel sharing
/// connections between them. A plain bind, as the HTTP listener's, is
/// refused while another socket holds the port: it is tried first and
/// dropped. QUIC's UDP socket is bound plainly and refused by itself.
fn refuse_if_taken(address: &Multiaddr) -> anyhow::Result<()> {
    let mut parts = address.iter();
    let ip: std::net::IpAddr = match parts.next() {
        Some(Protocol::Ip4(ip)) => ip.into(),
        Some(Protocol::Ip6(ip)) => ip.into(),
        _ => return Ok(()),
    };
    let Some(Protocol::Tcp(port)) = parts.next() else {
        return Ok(());
    };
    if port == 0 {
        return Ok(());
    }
    std::net::TcpListener::bind((ip, port))
        .map(drop)
        .map_err(|e| crate::http::options::cannot_listen(&address.to_string(), &e, "--p2p-listen"))
}

/// What a peer calls itself (identify's agent version), as this node keeps
/// and shows it: at most [`AGENT_VERSION_CHARS`] characters, control
/// characters left out. Identify lets a peer say up to 4 KiB of anything,
/// and the name is shown on the network page and in logs.
fn shown_agent_version(said: &str) -> String {
    let mut shown: String = said
        .chars()
        .filter(|c| !c.is_control())
        .take(AGENT_VERSION_CHARS + 1)
        .collect();
    if shown.chars().count() > AGENT_VERSION_CHARS {
        shown = shown.chars().take(AGENT_VERSION_CHARS - 1).collect();
        shown.push('…');
    }
    shown
}

/// Characters of a peer's agent version kept, at most ("agentsite/0.1.0"
/// is 15, "rust-libp2p/0.57.0" 18, kubo's a few dozen).
const AGENT_VERSION_CHARS: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_s_name_is_kept_short_and_printable() {
        assert_eq!(shown_agent_version("agentsite/0.1.0"), "agentsite/0.1.0");
        assert_eq!(shown_agent_version("evil\u{1b}[2J\r\nname"), "evil[2Jname");
        let long = shown_agent_version(&"x".repeat(4000));
        assert_eq!(long.chars().count(), AGENT_VERSION_CHARS);
        assert!(long.ends_with('…'));
    }
}
