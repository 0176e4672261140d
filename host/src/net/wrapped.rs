//! What a behaviour that wraps another, keeping its connection handler,
//! passes on unchanged: the connection checks and its handler's events.
//! The wrappers (`strikes::Watched`, `loopback::LocalLoopback`,
//! `dial_back::OwnAddressOnly`) write the
//! methods they change themselves.

/// The pass-through methods of `NetworkBehaviour` for a wrapper whose
/// wrapped behaviour is `self.$inner`.
macro_rules! pass_connections_to {
    ($inner:tt) => {
        fn handle_pending_inbound_connection(
            &mut self,
            connection_id: libp2p::swarm::ConnectionId,
            local_addr: &libp2p::Multiaddr,
            remote_addr: &libp2p::Multiaddr,
        ) -> Result<(), libp2p::swarm::ConnectionDenied> {
            self.$inner
                .handle_pending_inbound_connection(connection_id, local_addr, remote_addr)
        }

        fn handle_established_inbound_connection(
            &mut self,
            connection_id: libp2p::swarm::ConnectionId,
            peer: libp2p::PeerId,
            local_addr: &libp2p::Multiaddr,
            remote_addr: &libp2p::Multiaddr,
        ) -> Result<libp2p::swarm::THandler<Self>, libp2p::swarm::ConnectionDenied> {
            self.$inner.handle_established_inbound_connection(
                connection_id,
                peer,
                local_addr,
                remote_addr,
            )
        }

        fn handle_established_outbound_connection(
            &mut self,
            connection_id: libp2p::swarm::ConnectionId,
            peer: libp2p::PeerId,
            addr: &libp2p::Multiaddr,
            role_override: libp2p::core::Endpoint,
            port_use: libp2p::core::transport::PortUse,
        ) -> Result<libp2p::swarm::THandler<Self>, libp2p::swarm::ConnectionDenied> {
            self.$inner.handle_established_outbound_connection(
                connection_id,
                peer,
                addr,
                role_override,
                port_use,
            )
        }
    };
}

pub(super) use pass_connections_to;
