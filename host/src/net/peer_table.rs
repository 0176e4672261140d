//! The peers this node is connected to: their connections, what they said
//! of themselves in identify, and whether a hole punch to them failed. The
//! event loop tells the table what the swarm reports; the network page and
//! the relay search read it.

use super::reach::{self, RelayCandidate};
use super::{Connection, PeerInfo};
use libp2p::core::ConnectedPoint;
use libp2p::swarm::{ConnectionId, DialError};
use libp2p::{Multiaddr, PeerId, identify, relay};
use std::collections::{HashMap, HashSet};

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
    connections: HashMap<ConnectionId, (Multiaddr, bool)>,
    /// Whether the last hole punch to it failed (its NAT or this node's
    /// does not keep ports): its relayed connection stays relayed.
    hole_punch_failed: bool,
}

#[derive(Default)]
pub(super) struct PeerTable {
    peers: HashMap<PeerId, Peer>,
}

impl PeerTable {
    /// How many peers have an open connection.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// A connection to `peer` opened.
    pub fn connected(&mut self, peer: PeerId, connection: ConnectionId, endpoint: &ConnectedPoint) {
        let remote = endpoint.get_remote_address();
        let known = self.peers.entry(peer).or_insert_with(|| Peer {
            addresses: HashSet::new(),
            agent_version: None,
            agentsite: false,
            connected_at: crate::clock::unix_millis(),
            dialed: endpoint.is_dialer(),
            offers_relay: false,
            connections: HashMap::new(),
            hole_punch_failed: false,
        });
        if !reach::is_relayed(remote) {
            known.hole_punch_failed = false;
        }
        known
            .connections
            .insert(connection, (remote.clone(), !endpoint.is_dialer()));
        if endpoint.is_dialer() {
            known.addresses.insert(remote.clone());
        }
    }

    /// A connection to `peer` closed; `last` when it was its only one.
    pub fn closed(&mut self, peer: PeerId, connection: ConnectionId, last: bool) {
        if last {
            self.peers.remove(&peer);
        } else if let Some(known) = self.peers.get_mut(&peer) {
            known.connections.remove(&connection);
        }
    }

    pub fn forget(&mut self, peer: &PeerId) {
        self.peers.remove(peer);
    }

    /// The address at the other end of `connection`, if `peer` dialed it.
    pub fn dialed_by_peer(&self, peer: &PeerId, connection: &ConnectionId) -> Option<&Multiaddr> {
        match self.peers.get(peer)?.connections.get(connection)? {
            (remote, true) => Some(remote),
            (_, false) => None,
        }
    }

    /// Whether one of the connections to `peer` runs over loopback: it is
    /// on this machine.
    pub fn is_on_this_machine(&self, peer: &PeerId) -> bool {
        self.peers.get(peer).is_some_and(|p| {
            p.connections
                .values()
                .any(|(address, _)| reach::is_loopback(address))
        })
    }

    /// `peer` identified itself. An identification may arrive after the
    /// last connection closed: a peer that is gone is not listed again.
    pub fn identified(&mut self, peer: &PeerId, info: &identify::Info, agentsite: bool) {
        let Some(known) = self.peers.get_mut(peer) else {
            return;
        };
        known.agentsite = agentsite;
        known.offers_relay = info.protocols.contains(&relay::HOP_PROTOCOL_NAME);
        known.agent_version = Some(shown_agent_version(&info.agent_version));
        // What it says now (its first few addresses), and where this node
        // reached it: a peer that identifies itself again and again with
        // new addresses does not make the list grow.
        known.addresses = info
            .listen_addrs
            .iter()
            .take(super::dht::ADDRESSES_PER_PEER)
            .cloned()
            .collect();
        known.addresses.extend(
            known
                .connections
                .values()
                .filter(|(_, inbound)| !inbound)
                .map(|(address, _)| address.clone()),
        );
    }

    /// The table as the network page shows it, in peer id order.
    pub fn listing(&self) -> Vec<PeerInfo> {
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
                    .map(|(address, _)| Connection {
                        address: address.to_string(),
                        transport: reach::transport(address).to_owned(),
                    })
                    .collect(),
                hole_punch_failed: peer.hole_punch_failed,
            })
            .collect();
        peers.sort_by(|a, b| a.peer_id.cmp(&b.peer_id));
        peers
    }

    /// Each peer as a possible relay.
    pub fn relay_candidates(&self) -> impl Iterator<Item = RelayCandidate<'_>> {
        self.peers.iter().map(|(peer, info)| RelayCandidate {
            peer: *peer,
            offers_relay: info.offers_relay,
            dialed: info
                .connections
                .values()
                .any(|(address, inbound)| !inbound && !reach::is_relayed(address)),
            addresses: &info.addresses,
        })
    }

    /// The relayed connections to `peer`, when it also has a direct one:
    /// those to close so that what is sent to it next goes direct. `None`
    /// when it has no direct connection (or none at all).
    pub fn relayed_beside_direct(&self, peer: &PeerId) -> Option<Vec<ConnectionId>> {
        let known = self.peers.get(peer)?;
        let relayed: Vec<ConnectionId> = known
            .connections
            .iter()
            .filter(|(_, (address, _))| reach::is_relayed(address))
            .map(|(connection, _)| *connection)
            .collect();
        (relayed.len() < known.connections.len()).then_some(relayed)
    }

    /// How a hole punch to `peer` ended, as DCUtR reports it.
    pub fn hole_punched(&mut self, peer: &PeerId, failed: bool) {
        if let Some(known) = self.peers.get_mut(peer) {
            known.hole_punch_failed = failed;
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
    pub fn direct_dial_failed(&mut self, peer: &PeerId, error: &DialError) {
        let DialError::Transport(tried) = error else {
            return;
        };
        let at_public = !tried.is_empty()
            && tried
                .iter()
                .all(|(address, _)| reach::public_ip(address).is_some());
        let Some(info) = self.peers.get_mut(peer) else {
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
