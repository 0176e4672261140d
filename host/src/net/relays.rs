//! What the event loop does about this node's reachability (see [`reach`]
//! for what it knows): it confirms addresses others dial it at, serves the
//! DHT as a client only while private, reserves slots on relays among its
//! peers, and relays for others when its operator lets it.

use super::behaviour::Behaviour;
use super::peer_table::PeerTable;
use super::reach::{self, Reach, RelayService};
use libp2p::core::transport::ListenerId;
use libp2p::swarm::ConnectionId;
use libp2p::{Multiaddr, PeerId, Swarm, autonat, kad, relay};

pub(super) struct Relays {
    reach: Reach,
    /// Whether the node learns its reachability at all (off in
    /// simulations, where every listen address is taken as reachable).
    enabled: bool,
    service: RelayService,
}

impl Relays {
    pub fn new(enabled: bool, service: RelayService) -> Self {
        Relays {
            reach: Reach::default(),
            enabled,
            service,
        }
    }

    pub fn reachability(&self, me: PeerId) -> reach::Reachability {
        self.reach.reachability(me)
    }

    /// The swarm listens at a new address. Where the node learns its
    /// reachability, AutoNAT confirms the addresses others can dial it at
    /// (the relay client confirms relayed ones): a listen address counted
    /// as external would not be tested, and one behind a NAT is no use to
    /// anyone outside. In simulations, every listen address is reachable:
    /// confirmed at once, for Kademlia's records to carry.
    pub fn listening(&self, swarm: &mut Swarm<Behaviour>, address: &Multiaddr) {
        if !self.enabled {
            swarm.add_external_address(address.clone());
        }
    }

    /// What follows from a change in what the node knows of its
    /// reachability: a private node serves the DHT as a client only (peers
    /// could not dial it back for their queries) and seeks relays; a public
    /// one relays for others if its operator lets it.
    pub fn changed(&mut self, swarm: &mut Swarm<Behaviour>, peers: &PeerTable) {
        let public = self.reach.is_public();
        let private = self.reach.is_private();
        let behaviour = swarm.behaviour_mut();
        behaviour.kad.set_mode(Some(if private {
            kad::Mode::Client
        } else {
            kad::Mode::Server
        }));
        let relaying = match self.service {
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
        self.seek(swarm, peers);
    }

    /// A peer that dialed this node says where it sees it: the address it
    /// dialed. From a public address, that shows others can dial the node
    /// there (see [`reach::dialed_in_at`]).
    pub fn dialed_in(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        peers: &PeerTable,
        (peer, connection): (PeerId, ConnectionId),
        at: &Multiaddr,
    ) {
        if !self.enabled || self.reach.is_private() || self.reach.is_public() {
            return;
        }
        let Some(remote) = peers.dialed_by_peer(&peer, &connection) else {
            return;
        };
        if let Some(here) = reach::dialed_in_at(at, remote) {
            tracing::info!("reachable at {here}: {peer} dialed in from {remote}");
            swarm.add_external_address(here.clone());
            self.reach.passed(here);
            self.changed(swarm, peers);
        }
    }

    /// Asks relays among the peers for a reservation, while the node is
    /// private and holds fewer than it wants.
    pub fn seek(&mut self, swarm: &mut Swarm<Behaviour>, peers: &PeerTable) {
        let asked = self
            .reach
            .relays_to_ask(peers.relay_candidates(), std::time::Instant::now());
        for (relay, circuit) in asked {
            match swarm.listen_on(circuit.clone()) {
                Ok(listener) => {
                    tracing::debug!("asking {relay} for a relay reservation");
                    self.reach.asked(listener, relay, circuit);
                }
                Err(e) => tracing::debug!("cannot listen through relay {relay}: {e}"),
            }
        }
    }

    /// A listener closed: if it held a reservation, another relay is sought.
    pub fn listener_closed(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        peers: &PeerTable,
        listener: ListenerId,
        why: Option<String>,
    ) {
        if let Some(relay) = self.reach.closed(listener, std::time::Instant::now()) {
            let why = why.map(|e| format!(": {e}")).unwrap_or_default();
            tracing::info!(%relay, "the reservation on relay {relay} ended{why}");
            self.seek(swarm, peers);
        }
    }

    /// An address others could dial this node at went away.
    pub fn expired(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        peers: &PeerTable,
        address: &Multiaddr,
    ) {
        self.reach.expired(address);
        self.changed(swarm, peers);
    }

    /// An AutoNAT test ended.
    pub fn tested(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        peers: &PeerTable,
        event: autonat::v2::client::Event,
    ) {
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
        self.changed(swarm, peers);
    }

    /// `relay` accepted (or renewed) a reservation.
    pub fn accepted(&mut self, relay: PeerId, renewal: bool) {
        if !renewal {
            tracing::info!("reachable through relay {relay}");
        }
        self.reach.accepted(relay);
    }
}
