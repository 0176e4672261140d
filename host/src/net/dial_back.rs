//! AutoNAT dial-backs go only to the asker's own address.
//!
//! An AutoNAT v2 server dials whatever address a client asks it to test;
//! the protocol only makes a client send 30–100 KB first when the address is
//! not the one its connection came from. That still lets anyone point a
//! node at a third party: every node of the network becomes a dialer for
//! hire, aimed at a host that never asked. [`OwnAddressOnly`] wraps the
//! server so that a dial-back to an IP address the client is not connected
//! from is refused before it leaves the node: the client hears that the
//! dial-back failed, which is all a client at that address deserves to
//! hear. A client behind a NAT tests the address its peers saw it at, which
//! is the IP its connection comes from, so honest tests are unaffected.

use libp2p::PeerId;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::multiaddr::Protocol;
use libp2p::swarm::{
    ConnectionClosed, ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandlerInEvent,
    THandlerOutEvent, ToSwarm,
};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::task::{Context, Poll};

/// Dial-backs waiting for the swarm to ask about their connection, at most:
/// the server sends one per test, and tests run one at a time per
/// connection; past it the oldest is forgotten (and its dial refused).
const PENDING: usize = 1024;

#[derive(Debug, thiserror::Error)]
#[error("refusing to dial {target} back for {client}: it is not connected from there")]
pub struct NotTheAsker {
    client: PeerId,
    target: Multiaddr,
}

/// `B` (an AutoNAT server), dialing back only the IPs a client is connected from.
pub struct OwnAddressOnly<B> {
    inner: B,
    /// Each connected peer's inbound connections, and the IP of each.
    from: HashMap<PeerId, HashMap<ConnectionId, IpAddr>>,
    /// Dials the server asked for: which client each is for.
    dial_backs: HashMap<ConnectionId, PeerId>,
    dial_order: std::collections::VecDeque<ConnectionId>,
}

impl<B> OwnAddressOnly<B> {
    pub fn new(inner: B) -> Self {
        OwnAddressOnly {
            inner,
            from: HashMap::new(),
            dial_backs: HashMap::new(),
            dial_order: Default::default(),
        }
    }

    /// Whether a dial-back for `client` to `addresses` stays at the IPs it
    /// is connected from.
    fn allowed(&self, client: &PeerId, addresses: &[Multiaddr]) -> bool {
        let Some(connections) = self.from.get(client) else {
            return false;
        };
        let own: HashSet<&IpAddr> = connections.values().collect();
        !addresses.is_empty()
            && addresses
                .iter()
                .all(|address| ip_of(address).is_some_and(|ip| own.contains(&ip)))
    }
}

/// The IP address a multiaddress starts with (none for DNS names, memory
/// and relayed addresses: a dial-back there could land anywhere).
fn ip_of(address: &Multiaddr) -> Option<IpAddr> {
    if super::reach::is_relayed(address) {
        return None;
    }
    match address.iter().next()? {
        Protocol::Ip4(ip) => Some(ip.into()),
        Protocol::Ip6(ip) => Some(ip.into()),
        _ => None,
    }
}

impl<B: NetworkBehaviour> NetworkBehaviour for OwnAddressOnly<B> {
    type ConnectionHandler = B::ConnectionHandler;
    type ToSwarm = B::ToSwarm;

    super::wrapped::pass_connections_to!(inner);

    fn handle_pending_outbound_connection(
        &mut self,
        connection_id: ConnectionId,
        maybe_peer: Option<PeerId>,
        addresses: &[Multiaddr],
        effective_role: Endpoint,
    ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
        if let Some(client) = self.dial_backs.remove(&connection_id)
            && !self.allowed(&client, addresses)
        {
            let target = addresses.first().cloned().unwrap_or_else(Multiaddr::empty);
            tracing::debug!(%client, "refused an AutoNAT dial-back to {target}");
            return Err(ConnectionDenied::new(NotTheAsker { client, target }));
        }
        self.inner.handle_pending_outbound_connection(
            connection_id,
            maybe_peer,
            addresses,
            effective_role,
        )
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match &event {
            FromSwarm::ConnectionEstablished(established) if established.endpoint.is_listener() => {
                if let Some(ip) = ip_of(established.endpoint.get_remote_address()) {
                    self.from
                        .entry(established.peer_id)
                        .or_default()
                        .insert(established.connection_id, ip);
                }
            }
            FromSwarm::ConnectionClosed(ConnectionClosed {
                peer_id,
                connection_id,
                ..
            }) => {
                if let Some(connections) = self.from.get_mut(peer_id) {
                    connections.remove(connection_id);
                    if connections.is_empty() {
                        self.from.remove(peer_id);
                    }
                }
            }
            _ => {}
        }
        self.inner.on_swarm_event(event)
    }

    fn on_connection_handler_event(
        &mut self,
        peer: PeerId,
        connection: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        self.inner
            .on_connection_handler_event(peer, connection, event)
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<ToSwarm<B::ToSwarm, THandlerInEvent<Self>>> {
        let event = std::task::ready!(self.inner.poll(cx));
        if let ToSwarm::Dial { opts } = &event
            && let Some(client) = opts.get_peer_id()
        {
            if self.dial_order.len() >= PENDING
                && let Some(oldest) = self.dial_order.pop_front()
            {
                self.dial_backs.remove(&oldest);
            }
            self.dial_backs.insert(opts.connection_id(), client);
            self.dial_order.push_back(opts.connection_id());
        }
        Poll::Ready(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> Multiaddr {
        text.parse().unwrap()
    }

    #[test]
    fn only_the_ips_a_client_is_connected_from_are_dialed_back() {
        let mut guard = OwnAddressOnly::new(libp2p::swarm::dummy::Behaviour);
        let client = PeerId::random();
        guard.from.entry(client).or_default().insert(
            ConnectionId::new_unchecked(1),
            "198.51.100.7".parse().unwrap(),
        );
        assert!(guard.allowed(&client, &[address("/ip4/198.51.100.7/tcp/4077")]));
        assert!(guard.allowed(&client, &[address("/ip4/198.51.100.7/udp/9/quic-v1")]));
        for elsewhere in [
            "/ip4/203.0.113.9/tcp/4077",
            "/ip4/169.254.169.254/tcp/80",
            "/dns4/example.com/tcp/443",
            "/ip4/198.51.100.7/tcp/1/p2p-circuit",
        ] {
            assert!(
                !guard.allowed(&client, &[address(elsewhere)]),
                "{elsewhere}"
            );
        }
        // A peer that is not connected in has no address to be dialed at.
        assert!(!guard.allowed(&PeerId::random(), &[address("/ip4/198.51.100.7/tcp/1")]));
    }
}
