//! Hostile libp2p peers, for the hostile-network tests: swarms of the
//! test's own, over TCP on loopback, that speak the protocols an agentsite
//! node speaks (identify, Kademlia, circuit relay v2, AutoNAT v2) and abuse
//! them: reservations and circuits from many peer ids at one host, dial-back
//! requests aimed at third parties, identify messages carrying thousands of
//! addresses, huge protocol lists and long names.
//!
//! [`target`] starts the node they attack: an agentsite node in this process
//! ([`agentsite::net::Network`]) on 127.0.0.1 that relays for others and
//! answers AutoNAT tests, as a public node does.

use super::liars::BlackHole;
use super::testnet::Shelf;
use agentsite::net::reach::RelayService;
use agentsite::net::{Keypair, Multiaddr, NetConfig, Network, PeerId, Transports};
use futures::StreamExt as _;
use libp2p::kad::{self, store::MemoryStore};
use libp2p::multiaddr::Protocol;
use libp2p::swarm::{NetworkBehaviour, Swarm, SwarmEvent, ToSwarm, behaviour::toggle::Toggle};
use libp2p::{
    StreamProtocol, autonat, identify, noise, relay, request_response, swarm::dummy, yamux,
};
use std::sync::Arc;
use std::time::Duration;

/// agentsite's Kademlia protocol and identify version, as a real node says.
pub const KAD: StreamProtocol = StreamProtocol::new("/agentsite/kad/1.0.0");
const VERSION: &str = "/agentsite/1.0.0";

/// How long one step of an attack may take before the test fails.
pub const STEP: Duration = Duration::from_secs(30);

/// The node under attack: relays for others whatever its reachability.
pub struct Target {
    pub network: Network,
    pub peer_id: PeerId,
    /// Its TCP address on 127.0.0.1, ending in `/p2p/<its id>`.
    pub address: Multiaddr,
    /// Its TCP address on ::1: a peer dialing it comes from another host
    /// (IPv6 loopback) than the peers at 127.0.0.1.
    pub address6: Multiaddr,
    _shelf: Arc<Shelf>,
}

/// Starts the node under attack on 127.0.0.1.
pub async fn target() -> Target {
    let keypair = Keypair::generate_ed25519();
    let peer_id = keypair.public().to_peer_id();
    let config = NetConfig {
        relay_service: RelayService::On,
        table_refresh: None,
        ..NetConfig::new(
            vec![
                "/ip4/127.0.0.1/tcp/0".parse().unwrap(),
                "/ip6/::1/tcp/0".parse().unwrap(),
            ],
            Vec::new(),
            Transports::Network,
        )
    };
    let shelf = Arc::new(Shelf::default());
    let network = Network::start(keypair, config, shelf.clone())
        .await
        .expect("the target node starts");
    let addresses = network.addresses().await.unwrap();
    let tcp_at = |ip4: bool| {
        addresses
            .iter()
            .find(|a| {
                a.iter().any(|p| matches!(p, Protocol::Tcp(_)))
                    && a.iter().any(|p| match p {
                        Protocol::Ip4(_) => ip4,
                        Protocol::Ip6(_) => !ip4,
                        _ => false,
                    })
            })
            .expect("a TCP address")
            .clone()
            .with_p2p(peer_id)
            .unwrap()
    };
    let (address, address6) = (tcp_at(true), tcp_at(false));
    Target {
        network,
        peer_id,
        address,
        address6,
        _shelf: shelf,
    }
}

/// What a hostile peer says about itself and speaks.
pub struct Disguise {
    /// Its identify agent version.
    pub name: String,
    /// Protocols it claims (request-response, inbound only), beside the
    /// ones it really speaks.
    pub claimed_protocols: usize,
    /// Whether it serves Kademlia (so the target puts it in its routing table).
    pub dht_server: bool,
}

impl Default for Disguise {
    fn default() -> Self {
        Disguise {
            name: "hostile/1.0".into(),
            claimed_protocols: 0,
            dht_server: false,
        }
    }
}

#[derive(NetworkBehaviour)]
pub struct HostileBehaviour {
    pub identify: identify::Behaviour,
    pub kad: kad::Behaviour<MemoryStore>,
    pub relay_client: relay::client::Behaviour,
    pub autonat: autonat::v2::client::Behaviour,
    pub claims: Toggle<request_response::Behaviour<BlackHole>>,
    pub candidates: Candidates,
}

/// Puts addresses forward as this peer's own, for AutoNAT to have tested.
#[derive(Default)]
pub struct Candidates(pub std::collections::VecDeque<Multiaddr>);

impl NetworkBehaviour for Candidates {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = std::convert::Infallible;

    fn handle_established_inbound_connection(
        &mut self,
        _: libp2p::swarm::ConnectionId,
        _: PeerId,
        _: &Multiaddr,
        _: &Multiaddr,
    ) -> Result<Self::ConnectionHandler, libp2p::swarm::ConnectionDenied> {
        Ok(dummy::ConnectionHandler)
    }

    fn handle_established_outbound_connection(
        &mut self,
        _: libp2p::swarm::ConnectionId,
        _: PeerId,
        _: &Multiaddr,
        _: libp2p::core::Endpoint,
        _: libp2p::core::transport::PortUse,
    ) -> Result<Self::ConnectionHandler, libp2p::swarm::ConnectionDenied> {
        Ok(dummy::ConnectionHandler)
    }

    fn on_swarm_event(&mut self, _: libp2p::swarm::FromSwarm) {}

    fn on_connection_handler_event(
        &mut self,
        _: PeerId,
        _: libp2p::swarm::ConnectionId,
        event: libp2p::swarm::THandlerOutEvent<Self>,
    ) {
        libp2p::core::util::unreachable(event)
    }

    fn poll(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<ToSwarm<Self::ToSwarm, libp2p::swarm::THandlerInEvent<Self>>> {
        match self.0.pop_front() {
            Some(address) => std::task::Poll::Ready(ToSwarm::NewExternalAddrCandidate(address)),
            None => std::task::Poll::Pending,
        }
    }
}

/// A hostile peer: its swarm, driven by the test.
pub struct Hostile {
    pub swarm: Swarm<HostileBehaviour>,
    pub peer_id: PeerId,
    /// Where it listens (ending in `/p2p/<its id>`).
    pub address: Multiaddr,
}

impl Hostile {
    /// A hostile peer listening at `listen` (such as `/ip4/127.0.0.1/tcp/0`).
    pub async fn start(listen: &str, disguise: Disguise) -> Hostile {
        let keypair = Keypair::generate_ed25519();
        let peer_id = keypair.public().to_peer_id();
        let behaviour = |key: &Keypair, relay_client| {
            let id = key.public().to_peer_id();
            let mut kad_config = kad::Config::new(KAD);
            kad_config
                .set_periodic_bootstrap_interval(None)
                .set_query_timeout(STEP);
            let mut kad = kad::Behaviour::with_config(id, MemoryStore::new(id), kad_config);
            kad.set_mode(Some(if disguise.dht_server {
                kad::Mode::Server
            } else {
                kad::Mode::Client
            }));
            let claims = (disguise.claimed_protocols > 0).then(|| {
                request_response::Behaviour::with_codec(
                    BlackHole,
                    (0..disguise.claimed_protocols).map(|n| {
                        let name = format!("/claimed/{n}");
                        (
                            StreamProtocol::try_from_owned(name).unwrap(),
                            request_response::ProtocolSupport::Inbound,
                        )
                    }),
                    request_response::Config::default(),
                )
            });
            HostileBehaviour {
                identify: identify::Behaviour::new(
                    identify::Config::new(VERSION.into(), key.public())
                        .with_agent_version(disguise.name.clone()),
                ),
                kad,
                relay_client,
                // Tests its candidates every 5 s.
                autonat: autonat::v2::client::Behaviour::default(),
                claims: claims.into(),
                candidates: Candidates::default(),
            }
        };
        let mut swarm = libp2p::SwarmBuilder::with_existing_identity(keypair)
            .with_tokio()
            // The node's TCP: dials survive a listening port taken elsewhere.
            .with_other_transport(agentsite::net::tcp::authenticated)
            .unwrap()
            .with_relay_client(noise::Config::new, yamux::Config::default)
            .unwrap()
            .with_behaviour(|key, relay_client| behaviour(key, relay_client))
            .unwrap()
            .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(120)))
            .build();
        swarm
            .listen_on(listen.parse().unwrap())
            .expect("the hostile peer listens");
        let address = tokio::time::timeout(STEP, async {
            loop {
                if let SwarmEvent::NewListenAddr { address, .. } = swarm.select_next_some().await {
                    break address.with_p2p(peer_id).unwrap();
                }
            }
        })
        .await
        .expect("the hostile peer listens in time");
        Hostile {
            swarm,
            peer_id,
            address,
        }
    }

    /// Connects to `target` and waits until this peer has the target's
    /// identify (the target's side may land later). The target refusing
    /// what this peer claims is no failure: a peer claiming too much sees
    /// its answer cut off (an identify error), and may see that before the
    /// target's own answer arrives.
    pub async fn connect(&mut self, target: &Multiaddr) {
        self.swarm.dial(target.clone()).expect("a dial starts");
        let event = self
            .run_until(|event| {
                matches!(
                    event,
                    SwarmEvent::Behaviour(HostileBehaviourEvent::Identify(
                        identify::Event::Received { .. }
                    )) | SwarmEvent::OutgoingConnectionError { .. }
                        | SwarmEvent::ConnectionClosed { .. }
                )
            })
            .await;
        // A connection that failed or closed first says why here, not as
        // a timeout.
        if !matches!(
            event,
            SwarmEvent::Behaviour(HostileBehaviourEvent::Identify(
                identify::Event::Received { .. }
            ))
        ) {
            panic!("connecting to {target} ended otherwise: {event:?}");
        }
    }

    /// Drives the swarm until `done` holds for one of its events; fails the
    /// test after [`STEP`].
    pub async fn run_until(
        &mut self,
        mut done: impl FnMut(&SwarmEvent<HostileBehaviourEvent>) -> bool,
    ) -> SwarmEvent<HostileBehaviourEvent> {
        tokio::time::timeout(STEP, async {
            loop {
                let event = self.swarm.select_next_some().await;
                if done(&event) {
                    return event;
                }
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the hostile peer's step did not end within {STEP:?}; it is connected to {:?}",
                self.swarm.connected_peers().collect::<Vec<_>>()
            )
        })
    }

    /// Asks `relay` for a reservation: what the relay answered.
    pub async fn reserve(&mut self, relay: &Multiaddr) -> Answer {
        let listener = self
            .swarm
            .listen_on(relay.clone().with(Protocol::P2pCircuit))
            .expect("listening through a relay starts");
        let event = self
            .run_until(|event| match event {
                SwarmEvent::Behaviour(HostileBehaviourEvent::RelayClient(
                    relay::client::Event::ReservationReqAccepted { .. },
                )) => true,
                SwarmEvent::ListenerClosed { listener_id, .. } => *listener_id == listener,
                _ => false,
            })
            .await;
        match event {
            SwarmEvent::ListenerClosed {
                reason: Err(error), ..
            } => relay_answer(
                &error,
                "ResourceLimitExceeded",
                // A relay on loopback has no public address to give; it
                // granted the reservation all the same.
                "NoAddressesInReservation",
            )
            .unwrap_or_else(|| panic!("the reservation failed otherwise: {error:?}")),
            SwarmEvent::ListenerClosed { .. } => panic!("the relay listener closed"),
            _ => Answer::Granted,
        }
    }

    /// Asks `relay` for a circuit to `destination` (a peer with no
    /// reservation there): the relay refuses past its limits, and says it
    /// holds no reservation for the destination otherwise.
    pub async fn open_circuit(&mut self, relay: &Multiaddr, destination: PeerId) -> Answer {
        let address = relay
            .clone()
            .with(Protocol::P2pCircuit)
            .with(Protocol::P2p(destination));
        self.swarm.dial(address).expect("a dial starts");
        let event = self
            .run_until(|event| {
                matches!(
                    event,
                    SwarmEvent::OutgoingConnectionError { peer_id: Some(p), .. }
                    | SwarmEvent::ConnectionEstablished { peer_id: p, .. } if *p == destination
                )
            })
            .await;
        let SwarmEvent::OutgoingConnectionError {
            error: libp2p::swarm::DialError::Transport(attempts),
            ..
        } = event
        else {
            panic!("the circuit was opened or failed otherwise: {event:?}");
        };
        relay_answer(&attempts, "ResourceLimitExceeded", "NoReservation")
            .unwrap_or_else(|| panic!("the circuit failed otherwise: {attempts:?}"))
    }
}

/// What a relay answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Past its limits.
    Refused,
    /// Within them.
    Granted,
}

/// What the relay answered, from the relay client's error: the swarm's
/// transports nest it in `Either`s and I/O errors whose types the test
/// does not name, so it is told by the variant's name.
fn relay_answer(error: &dyn std::fmt::Debug, refused: &str, granted: &str) -> Option<Answer> {
    let said = format!("{error:?}");
    if said.contains(refused) {
        Some(Answer::Refused)
    } else if said.contains(granted) {
        Some(Answer::Granted)
    } else {
        None
    }
}

/// Peers of `target` as it lists them, with the one with `id`.
pub async fn listed(target: &Target, id: PeerId) -> Option<agentsite::net::PeerInfo> {
    let id = id.to_string();
    target
        .network
        .peers()
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.peer_id == id)
}

/// Waits until `target` has `peer` in its routing table (it learns a DHT
/// server from identify); fails the test after [`STEP`].
pub async fn in_routing_table(target: &Target, peer: PeerId) {
    let deadline = tokio::time::Instant::now() + STEP;
    while !target
        .network
        .routing_table()
        .await
        .unwrap()
        .contains(&peer)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{peer} never entered the target's routing table"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
