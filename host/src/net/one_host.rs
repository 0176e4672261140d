//! Few peers per host: this node connects out to at most
//! [`PEERS_PER_HOST`] peers at one public IP address at a time.
//!
//! Anyone can run identities by the thousand on one machine, and an identity
//! close to a given key is cheap to find by trying keys. A lookup learns
//! peers from the peers it asks: a sybil it reaches answers with its
//! siblings, all close to the key, and unchecked the lookup would end with
//! only them as the key's closest peers, the ones a publisher stores its
//! records at and a seeker asks. Refused connections count as unreachable
//! peers in the lookup, so the closest peers it ends with hold at most
//! [`PEERS_PER_HOST`] from one host and honest nodes beside them.
//!
//! A connection a peer opens is not refused: many honest nodes behind one
//! carrier NAT may dial in. But they cannot be dialed back, so they serve
//! the DHT as clients only; a peer that dialed in and turns out (by
//! identify) to answer DHT queries is one too many when this node is
//! connected to [`PEERS_PER_HOST`] other such peers at its IP already, and
//! is disconnected before Kademlia learns of it ([`Behaviour::dht_server_past_limit`]).
//! Without that, sybils that dial in first (their own lookups reach every
//! node) were all there for the next lookup to ask, and a publisher's
//! records went to them alone. Private and loopback addresses are exempt
//! (nodes on one machine or LAN are one operator's), and so are relayed
//! connections, whose IP is the relay's.

use super::reach::public_ip;
use libp2p::PeerId;
use libp2p::core::{Endpoint, Multiaddr, transport::PortUse};
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandler, THandlerInEvent,
    THandlerOutEvent, ToSwarm, dummy,
};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::task::{Context, Poll};

/// Peers at one public IP address this node keeps connections open to, at
/// most, for connections it opens itself.
pub const PEERS_PER_HOST: usize = 4;

#[derive(Debug, thiserror::Error)]
#[error("already connected to {PEERS_PER_HOST} peers at {0}")]
pub struct TooManyPeersAtHost(IpAddr);

/// Counts connections by public IP and refuses outbound ones past the limit.
#[derive(Default)]
pub struct Behaviour {
    connections: HashMap<IpAddr, Vec<(ConnectionId, PeerId)>>,
    /// Connected peers known to answer DHT queries.
    dht_servers: HashSet<PeerId>,
}

impl Behaviour {
    fn count(&mut self, connection: ConnectionId, peer: PeerId, remote: &Multiaddr) {
        if let Some(ip) = public_ip(remote) {
            self.connections
                .entry(ip)
                .or_default()
                .push((connection, peer));
        }
    }

    fn forget(&mut self, connection: ConnectionId) {
        let mut closed = None;
        self.connections.retain(|_, at| {
            at.retain(|(id, peer)| {
                let this = *id == connection;
                if this {
                    closed = Some(*peer);
                }
                !this
            });
            !at.is_empty()
        });
        if let Some(peer) = closed
            && !self.connections.values().flatten().any(|(_, p)| *p == peer)
        {
            self.dht_servers.remove(&peer);
        }
    }

    /// `peer` was found to answer DHT queries. Returns its IP address if it
    /// is one such peer too many there (this node is connected to
    /// [`PEERS_PER_HOST`] others at that IP, which is where it connected
    /// from): the caller disconnects it. Else it counts as one there from
    /// now on; a peer connected at no public address is not counted.
    pub fn dht_server_past_limit(&mut self, peer: PeerId) -> Option<IpAddr> {
        let ips: Vec<IpAddr> = self
            .connections
            .iter()
            .filter(|(_, at)| at.iter().any(|(_, p)| *p == peer))
            .map(|(ip, _)| *ip)
            .collect();
        if ips.is_empty() {
            return None;
        }
        for ip in ips {
            if self.others_at(&ip, peer, |p| self.dht_servers.contains(p)) >= PEERS_PER_HOST {
                return Some(ip);
            }
        }
        self.dht_servers.insert(peer);
        None
    }

    /// Other peers than `peer` this node is connected to at `ip`, of those
    /// `counted` picks.
    fn others_at(&self, ip: &IpAddr, peer: PeerId, counted: impl Fn(&PeerId) -> bool) -> usize {
        let mut others: Vec<PeerId> = self
            .connections
            .get(ip)
            .into_iter()
            .flatten()
            .map(|(_, p)| *p)
            .filter(|p| *p != peer && counted(p))
            .collect();
        others.sort_unstable();
        others.dedup();
        others.len()
    }
}

impl NetworkBehaviour for Behaviour {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = std::convert::Infallible;

    fn handle_established_inbound_connection(
        &mut self,
        connection: ConnectionId,
        peer: PeerId,
        _local: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.count(connection, peer, remote);
        Ok(dummy::ConnectionHandler)
    }

    fn handle_established_outbound_connection(
        &mut self,
        connection: ConnectionId,
        peer: PeerId,
        remote: &Multiaddr,
        _role: Endpoint,
        _port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        if let Some(ip) = public_ip(remote)
            && self.others_at(&ip, peer, |_| true) >= PEERS_PER_HOST
        {
            tracing::debug!(%peer, "not connecting: {}", TooManyPeersAtHost(ip));
            return Err(ConnectionDenied::new(TooManyPeersAtHost(ip)));
        }
        self.count(connection, peer, remote);
        Ok(dummy::ConnectionHandler)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ConnectionClosed(closed) => self.forget(closed.connection_id),
            // Another behaviour may refuse a connection this one counted.
            FromSwarm::DialFailure(failure) => self.forget(failure.connection_id),
            FromSwarm::ListenFailure(failure) => self.forget(failure.connection_id),
            _ => {}
        }
    }

    fn on_connection_handler_event(
        &mut self,
        _peer: PeerId,
        _connection: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        match event {}
    }

    fn poll(&mut self, _: &mut Context<'_>) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> Multiaddr {
        text.parse().unwrap()
    }

    fn outbound(b: &mut Behaviour, peer: PeerId, remote: &str) -> bool {
        b.handle_established_outbound_connection(
            next_connection(),
            peer,
            &address(remote),
            Endpoint::Dialer,
            PortUse::Reuse,
        )
        .is_ok()
    }

    fn next_connection() -> ConnectionId {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        ConnectionId::new_unchecked(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    #[test]
    fn a_fifth_peer_at_one_public_address_is_refused_and_others_are_not() {
        let mut limit = Behaviour::default();
        let host = "/ip4/198.51.100.7/tcp/4001";
        let sybils: Vec<PeerId> = (0..PEERS_PER_HOST + 3).map(|_| PeerId::random()).collect();
        let admitted = sybils
            .iter()
            .filter(|peer| outbound(&mut limit, **peer, host))
            .count();
        assert_eq!(admitted, PEERS_PER_HOST);
        // A second connection to a peer already connected is no new peer.
        assert!(outbound(&mut limit, sybils[0], host));
        // Another host, a LAN, loopback and a relayed address are not limited.
        assert!(outbound(
            &mut limit,
            PeerId::random(),
            "/ip4/198.51.100.8/tcp/4001"
        ));
        for other in [
            "/ip4/192.168.1.20/tcp/4001",
            "/ip4/127.0.0.1/tcp/4001",
            "/ip4/198.51.100.7/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit",
        ] {
            for _ in 0..PEERS_PER_HOST + 1 {
                assert!(outbound(&mut limit, PeerId::random(), other), "{other}");
            }
        }
        // Dialing in is never refused.
        assert!(
            limit
                .handle_established_inbound_connection(
                    next_connection(),
                    PeerId::random(),
                    &address("/ip4/0.0.0.0/tcp/4077"),
                    &address(host),
                )
                .is_ok()
        );
    }

    fn inbound(b: &mut Behaviour, peer: PeerId, remote: &str) -> ConnectionId {
        let connection = next_connection();
        b.handle_established_inbound_connection(
            connection,
            peer,
            &address("/ip4/0.0.0.0/tcp/4077"),
            &address(remote),
        )
        .unwrap();
        connection
    }

    #[test]
    fn a_fifth_dht_server_dialing_in_from_one_public_address_is_one_too_many() {
        let mut limit = Behaviour::default();
        let host = "/ip4/198.51.100.7/tcp/4001";
        let servers: Vec<PeerId> = (0..PEERS_PER_HOST + 2).map(|_| PeerId::random()).collect();
        let connections: Vec<ConnectionId> = servers
            .iter()
            .map(|peer| inbound(&mut limit, *peer, host))
            .collect();
        let refused: Vec<bool> = servers
            .iter()
            .map(|peer| limit.dht_server_past_limit(*peer).is_some())
            .collect();
        assert_eq!(refused, [false, false, false, false, true, true]);
        // Peers there that are DHT clients only (a carrier NAT's users) do
        // not count, and another host has room of its own.
        for _ in 0..10 {
            inbound(&mut limit, PeerId::random(), host);
        }
        let elsewhere = PeerId::random();
        inbound(&mut limit, elsewhere, "/ip4/198.51.100.8/tcp/4001");
        assert!(limit.dht_server_past_limit(elsewhere).is_none());
        // One of the four leaves: the next is welcome.
        limit.forget(connections[0]);
        assert!(limit.dht_server_past_limit(servers[4]).is_none());
        assert!(limit.dht_server_past_limit(servers[5]).is_some());
        // Loopback and LAN peers are one operator's.
        for _ in 0..PEERS_PER_HOST + 1 {
            let peer = PeerId::random();
            inbound(&mut limit, peer, "/ip4/127.0.0.1/tcp/4001");
            assert!(limit.dht_server_past_limit(peer).is_none());
        }
    }

    #[test]
    fn a_closed_or_refused_connection_frees_its_place() {
        let mut limit = Behaviour::default();
        let host = "/ip4/198.51.100.7/tcp/4001";
        let first = next_connection();
        limit
            .handle_established_outbound_connection(
                first,
                PeerId::random(),
                &address(host),
                Endpoint::Dialer,
                PortUse::Reuse,
            )
            .unwrap();
        for _ in 1..PEERS_PER_HOST {
            assert!(outbound(&mut limit, PeerId::random(), host));
        }
        assert!(!outbound(&mut limit, PeerId::random(), host));
        limit.forget(first);
        assert!(outbound(&mut limit, PeerId::random(), host));
    }
}
