//! A peer's loopback addresses are this machine's.
//!
//! Identify hands the swarm the addresses a peer says it listens at, for
//! dialing it later, and a node listening on all interfaces listens on
//! 127.0.0.1 too, at the same port as every other node by default. Dialed,
//! a remote peer's loopback address reaches this node itself (or another
//! node on this machine): the handshake names the wrong peer, and the swarm
//! fails the whole dial, with the attempts at the peer's other addresses (a
//! relay circuit) still under way. Over QUIC the handshake with itself won
//! that race every time, and a node behind a NAT could not be dialed again
//! once its first connection closed. [`LocalLoopback`] wraps a behaviour so
//! that the loopback addresses it offers for a dial, and those it tells the
//! other behaviours of (request-response keeps them for its own dials), are
//! kept only for peers this node has reached over loopback: nodes on this
//! machine.

use libp2p::PeerId;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandlerInEvent, THandlerOutEvent,
    ToSwarm,
};
use std::collections::HashSet;
use std::task::{Context, Poll};

/// Peers remembered as being on this machine, at most; past it, loopback
/// addresses are offered for no new peer (a test network of thousands on
/// one machine dials them through Kademlia, which keeps its own).
const LOCAL_PEERS: usize = 1024;

/// `B`, offering a peer's loopback addresses only when that peer is on this
/// machine.
pub struct LocalLoopback<B> {
    inner: B,
    local: HashSet<PeerId>,
}

impl<B> LocalLoopback<B> {
    pub fn new(inner: B) -> Self {
        LocalLoopback {
            inner,
            local: HashSet::new(),
        }
    }
}

impl<B: NetworkBehaviour> NetworkBehaviour for LocalLoopback<B> {
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
        let mut offered = self.inner.handle_pending_outbound_connection(
            connection_id,
            maybe_peer,
            addresses,
            effective_role,
        )?;
        let local = maybe_peer.is_some_and(|peer| self.local.contains(&peer));
        if !local {
            offered.retain(|address| !super::reach::is_loopback(address));
        }
        Ok(offered)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        if let FromSwarm::ConnectionEstablished(established) = &event
            && super::reach::is_loopback(established.endpoint.get_remote_address())
            && self.local.len() < LOCAL_PEERS
        {
            self.local.insert(established.peer_id);
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
        loop {
            match self.inner.poll(cx) {
                // Identify tells the other behaviours what a peer listens at
                // (request-response keeps it for dialing): not a remote
                // peer's loopback.
                Poll::Ready(ToSwarm::NewExternalAddrOfPeer { peer_id, address })
                    if super::reach::is_loopback(&address) && !self.local.contains(&peer_id) => {}
                polled => return polled,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libp2p::core::transport::PortUse;
    use libp2p::swarm::{THandler, dummy};

    /// A behaviour that offers every dial the addresses it was given, and
    /// tells the swarm of the peer addresses queued in it.
    struct Offers(Vec<Multiaddr>, Vec<(PeerId, Multiaddr)>);

    impl NetworkBehaviour for Offers {
        type ConnectionHandler = dummy::ConnectionHandler;
        type ToSwarm = std::convert::Infallible;

        fn handle_established_inbound_connection(
            &mut self,
            _: ConnectionId,
            _: PeerId,
            _: &Multiaddr,
            _: &Multiaddr,
        ) -> Result<THandler<Self>, ConnectionDenied> {
            Ok(dummy::ConnectionHandler)
        }

        fn handle_pending_outbound_connection(
            &mut self,
            _: ConnectionId,
            _: Option<PeerId>,
            _: &[Multiaddr],
            _: Endpoint,
        ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
            Ok(self.0.clone())
        }

        fn handle_established_outbound_connection(
            &mut self,
            _: ConnectionId,
            _: PeerId,
            _: &Multiaddr,
            _: Endpoint,
            _: PortUse,
        ) -> Result<THandler<Self>, ConnectionDenied> {
            Ok(dummy::ConnectionHandler)
        }

        fn on_swarm_event(&mut self, _: FromSwarm) {}

        fn on_connection_handler_event(
            &mut self,
            _: PeerId,
            _: ConnectionId,
            event: THandlerOutEvent<Self>,
        ) {
            match event {}
        }

        fn poll(
            &mut self,
            _: &mut Context<'_>,
        ) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
            match self.1.pop() {
                Some((peer_id, address)) => {
                    Poll::Ready(ToSwarm::NewExternalAddrOfPeer { peer_id, address })
                }
                None => Poll::Pending,
            }
        }
    }

    fn offered(behaviour: &mut LocalLoopback<Offers>, peer: PeerId) -> Vec<String> {
        behaviour
            .handle_pending_outbound_connection(
                ConnectionId::new_unchecked(1),
                Some(peer),
                &[],
                Endpoint::Dialer,
            )
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_remote_peers_loopback_address_is_not_dialed() {
        let addresses = [
            "/ip4/127.0.0.1/udp/4077/quic-v1",
            "/ip4/10.1.0.2/udp/4077/quic-v1",
            "/ip4/203.0.113.1/udp/4077/quic-v1/p2p/12D3KooWJ8Rnxwm4tTJfJpTdadahxNYfWhLMWqa6uPbfC8j6ySsT/p2p-circuit",
        ]
        .map(|a| a.parse().unwrap());
        let mut behaviour = LocalLoopback::new(Offers(addresses.to_vec(), Vec::new()));
        let remote = PeerId::random();
        assert_eq!(
            offered(&mut behaviour, remote),
            addresses[1..]
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
        // A peer reached over loopback is on this machine: its loopback
        // address is its own.
        let local = PeerId::random();
        let endpoint = libp2p::core::ConnectedPoint::Listener {
            local_addr: "/ip4/127.0.0.1/udp/4077/quic-v1".parse().unwrap(),
            send_back_addr: "/ip4/127.0.0.1/udp/4078/quic-v1".parse().unwrap(),
        };
        behaviour.on_swarm_event(FromSwarm::ConnectionEstablished(
            libp2p::swarm::behaviour::ConnectionEstablished {
                peer_id: local,
                connection_id: ConnectionId::new_unchecked(2),
                endpoint: &endpoint,
                failed_addresses: &[],
                other_established: 0,
            },
        ));
        assert_eq!(offered(&mut behaviour, local).len(), 3);
        assert_eq!(offered(&mut behaviour, remote).len(), 2);

        // Nor is a remote peer's loopback address passed on to the other
        // behaviours; a local peer's is, and so are other addresses.
        behaviour.inner.1 = vec![
            (local, addresses[0].clone()),
            (remote, addresses[1].clone()),
            (remote, addresses[0].clone()),
        ];
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut told = Vec::new();
        while let Poll::Ready(ToSwarm::NewExternalAddrOfPeer { peer_id, address }) =
            behaviour.poll(&mut cx)
        {
            told.push((peer_id, address));
        }
        assert_eq!(
            told,
            vec![
                (remote, addresses[1].clone()),
                (local, addresses[0].clone())
            ]
        );
    }
}
