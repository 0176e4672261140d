//! Connections that close when idle, despite gossipsub.
//!
//! The swarm keeps a connection open for as long as any of its streams is
//! open. Gossipsub holds a long-lived stream each way on every connection
//! to a subscriber, so every connection a node ever made (each Kademlia
//! lookup makes several) stayed open for good: nodes ended up connected to
//! the whole network and spent about 100 KB per connection
//! (rust-libp2p#5190). [`OwnKeepAlive`] wraps a behaviour so that its streams
//! do not count, and only its handler's own verdict does: gossipsub keeps
//! its mesh peers, and every other connection closes after the idle timeout.

use libp2p::PeerId;
use libp2p::core::upgrade::{InboundUpgrade, OutboundUpgrade, UpgradeInfo};
use libp2p::core::{Endpoint, Multiaddr, transport::PortUse};
use libp2p::swarm::handler::{
    ConnectionEvent, ConnectionHandler, ConnectionHandlerEvent, DialUpgradeError,
    FullyNegotiatedInbound, FullyNegotiatedOutbound, ListenUpgradeError, SubstreamProtocol,
};
use libp2p::swarm::handler::{InboundUpgradeSend, OutboundUpgradeSend, UpgradeInfoSend};
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, Stream, THandler, THandlerInEvent,
    THandlerOutEvent, ToSwarm,
};
use std::task::{Context, Poll};

/// `B`, whose streams do not keep connections open.
pub struct OwnKeepAlive<B>(pub B);

impl<B: NetworkBehaviour> NetworkBehaviour for OwnKeepAlive<B> {
    type ConnectionHandler = Handler<B::ConnectionHandler>;
    type ToSwarm = B::ToSwarm;

    fn handle_pending_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        self.0
            .handle_pending_inbound_connection(connection_id, local_addr, remote_addr)
    }

    fn handle_established_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        peer: PeerId,
        local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.0
            .handle_established_inbound_connection(connection_id, peer, local_addr, remote_addr)
            .map(Handler)
    }

    fn handle_pending_outbound_connection(
        &mut self,
        connection_id: ConnectionId,
        maybe_peer: Option<PeerId>,
        addresses: &[Multiaddr],
        effective_role: Endpoint,
    ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
        self.0.handle_pending_outbound_connection(
            connection_id,
            maybe_peer,
            addresses,
            effective_role,
        )
    }

    fn handle_established_outbound_connection(
        &mut self,
        connection_id: ConnectionId,
        peer: PeerId,
        addr: &Multiaddr,
        role_override: Endpoint,
        port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.0
            .handle_established_outbound_connection(
                connection_id,
                peer,
                addr,
                role_override,
                port_use,
            )
            .map(Handler)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        self.0.on_swarm_event(event)
    }

    fn on_connection_handler_event(
        &mut self,
        peer_id: PeerId,
        connection_id: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        self.0
            .on_connection_handler_event(peer_id, connection_id, event)
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<ToSwarm<B::ToSwarm, THandlerInEvent<Self>>> {
        self.0.poll(cx)
    }
}

/// The wrapped behaviour's handler, its streams marked as not keeping the
/// connection alive.
pub struct Handler<H>(H);

impl<H: ConnectionHandler> ConnectionHandler for Handler<H> {
    type FromBehaviour = H::FromBehaviour;
    type ToBehaviour = H::ToBehaviour;
    type InboundProtocol = Quiet<H::InboundProtocol>;
    type OutboundProtocol = Quiet<H::OutboundProtocol>;
    type InboundOpenInfo = H::InboundOpenInfo;
    type OutboundOpenInfo = H::OutboundOpenInfo;

    fn listen_protocol(&self) -> SubstreamProtocol<Self::InboundProtocol, Self::InboundOpenInfo> {
        self.0.listen_protocol().map_upgrade(Quiet)
    }

    fn connection_keep_alive(&self) -> bool {
        self.0.connection_keep_alive()
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<
        ConnectionHandlerEvent<Self::OutboundProtocol, Self::OutboundOpenInfo, Self::ToBehaviour>,
    > {
        self.0.poll(cx).map(|event| event.map_protocol(Quiet))
    }

    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Option<Self::ToBehaviour>> {
        self.0.poll_close(cx)
    }

    fn on_behaviour_event(&mut self, event: Self::FromBehaviour) {
        self.0.on_behaviour_event(event)
    }

    fn on_connection_event(
        &mut self,
        event: ConnectionEvent<
            Self::InboundProtocol,
            Self::OutboundProtocol,
            Self::InboundOpenInfo,
            Self::OutboundOpenInfo,
        >,
    ) {
        // The same event, retyped: the upgrades' outputs and errors are the
        // wrapped ones.
        let event = match event {
            ConnectionEvent::FullyNegotiatedInbound(FullyNegotiatedInbound { protocol, info }) => {
                ConnectionEvent::FullyNegotiatedInbound(FullyNegotiatedInbound { protocol, info })
            }
            ConnectionEvent::FullyNegotiatedOutbound(FullyNegotiatedOutbound {
                protocol,
                info,
            }) => {
                ConnectionEvent::FullyNegotiatedOutbound(FullyNegotiatedOutbound { protocol, info })
            }
            ConnectionEvent::AddressChange(change) => ConnectionEvent::AddressChange(change),
            ConnectionEvent::DialUpgradeError(DialUpgradeError { info, error }) => {
                ConnectionEvent::DialUpgradeError(DialUpgradeError { info, error })
            }
            ConnectionEvent::ListenUpgradeError(ListenUpgradeError { info, error }) => {
                ConnectionEvent::ListenUpgradeError(ListenUpgradeError { info, error })
            }
            ConnectionEvent::LocalProtocolsChange(change) => {
                ConnectionEvent::LocalProtocolsChange(change)
            }
            ConnectionEvent::RemoteProtocolsChange(change) => {
                ConnectionEvent::RemoteProtocolsChange(change)
            }
            // libp2p-swarm 0.48 has no other kind of event; a later one must
            // be added here when the dependency is upgraded.
            _ => return,
        };
        self.0.on_connection_event(event)
    }
}

/// An upgrade whose negotiated stream does not keep the connection alive.
#[derive(Debug, Clone)]
pub struct Quiet<U>(U);

impl<U: UpgradeInfoSend> UpgradeInfo for Quiet<U> {
    type Info = U::Info;
    type InfoIter = U::InfoIter;

    fn protocol_info(&self) -> Self::InfoIter {
        self.0.protocol_info()
    }
}

impl<U: InboundUpgradeSend> InboundUpgrade<Stream> for Quiet<U> {
    type Output = U::Output;
    type Error = U::Error;
    type Future = U::Future;

    fn upgrade_inbound(self, mut stream: Stream, info: Self::Info) -> Self::Future {
        stream.ignore_for_keep_alive();
        self.0.upgrade_inbound(stream, info)
    }
}

impl<U: OutboundUpgradeSend> OutboundUpgrade<Stream> for Quiet<U> {
    type Output = U::Output;
    type Error = U::Error;
    type Future = U::Future;

    fn upgrade_outbound(self, mut stream: Stream, info: Self::Info) -> Self::Future {
        stream.ignore_for_keep_alive();
        self.0.upgrade_outbound(stream, info)
    }
}
