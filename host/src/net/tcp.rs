//! The node's TCP transport: libp2p's, with its port reuse made to survive a
//! port shared across addresses.
//!
//! A dial that reuses the listening port (libp2p's default, so that peers
//! see the port the node listens on) binds the *unspecified* address at that
//! port — 0.0.0.0:P, the route choosing the source address. Since Linux 6.1
//! (the second bind hash), `bind` hands a socket at another address the
//! port a node listens on at one: the node on 127.0.0.1:P, another program
//! on 127.0.0.2:P, or on a second interface's address. The wildcard bind
//! then collides with that socket, and every dial of the node failed with
//! "Address already in use"; libp2p-tcp 0.45 falls back to a fresh port only
//! on "Cannot assign requested address" (a connection with the same four
//! addresses and ports exists). [`FreshPortWhenTaken`] falls back on both.

use futures::FutureExt as _;
use libp2p::core::muxing::StreamMuxerBox;
use libp2p::core::transport::{
    Boxed, DialOpts, ListenerId, PortUse, Transport, TransportError, TransportEvent,
};
use libp2p::core::upgrade::Version;
use libp2p::{Multiaddr, PeerId, identity::Keypair, noise, tcp, yamux};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// TCP with nodelay, authenticated with noise and multiplexed with yamux,
/// both negotiated lazily as `SwarmBuilder::with_tcp` does; its dials
/// leave from a fresh port where the listening port is taken (see the
/// module's comment).
pub fn authenticated(
    key: &Keypair,
) -> Result<Boxed<(PeerId, StreamMuxerBox)>, Box<dyn std::error::Error + Send + Sync>> {
    let noise = noise::Config::new(key).map_err(Box::new)?;
    Ok(
        FreshPortWhenTaken::new(tcp::Config::default().nodelay(true))
            .upgrade(Version::V1Lazy)
            .authenticate(noise)
            .multiplex(yamux::Config::default())
            .map(|(peer, muxer), _| (peer, StreamMuxerBox::new(muxer)))
            .boxed(),
    )
}

/// libp2p's tokio TCP transport, whose port-reusing dials are made again
/// from a fresh port when binding the listening port fails.
pub struct FreshPortWhenTaken {
    inner: tcp::tokio::Transport,
    /// For the second dial, made outside the first dial's transport.
    config: tcp::Config,
}

impl FreshPortWhenTaken {
    pub fn new(config: tcp::Config) -> Self {
        FreshPortWhenTaken {
            inner: tcp::tokio::Transport::new(config.clone()),
            config,
        }
    }
}

impl Transport for FreshPortWhenTaken {
    type Output = <tcp::tokio::Transport as Transport>::Output;
    type Error = io::Error;
    type ListenerUpgrade = <tcp::tokio::Transport as Transport>::ListenerUpgrade;
    type Dial = <tcp::tokio::Transport as Transport>::Dial;

    fn listen_on(
        &mut self,
        id: ListenerId,
        addr: Multiaddr,
    ) -> Result<(), TransportError<io::Error>> {
        self.inner.listen_on(id, addr)
    }

    fn remove_listener(&mut self, id: ListenerId) -> bool {
        self.inner.remove_listener(id)
    }

    fn dial(
        &mut self,
        addr: Multiaddr,
        opts: DialOpts,
    ) -> Result<Self::Dial, TransportError<io::Error>> {
        let first = self.inner.dial(addr.clone(), opts)?;
        if opts.port_use != PortUse::Reuse {
            return Ok(first);
        }
        let config = self.config.clone();
        Ok(async move {
            match first.await {
                Err(taken) if taken.kind() == io::ErrorKind::AddrInUse => {
                    tracing::debug!(%addr, "the listening port is taken at another address: dialing from a fresh port");
                    let fresh = DialOpts {
                        port_use: PortUse::New,
                        ..opts
                    };
                    // A transport without listeners: nothing to reuse.
                    let second = tcp::tokio::Transport::new(config)
                        .dial(addr, fresh)
                        .map_err(|e| match e {
                            TransportError::Other(e) => e,
                            TransportError::MultiaddrNotSupported(_) => taken,
                        })?;
                    second.await
                }
                first => first,
            }
        }
        .boxed())
    }

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<TransportEvent<Self::ListenerUpgrade, io::Error>> {
        Pin::new(&mut self.inner).poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libp2p::core::Endpoint;
    use libp2p::multiaddr::Protocol;

    const REUSE: DialOpts = DialOpts {
        role: Endpoint::Dialer,
        port_use: PortUse::Reuse,
    };

    /// The port `transport` listens on at 127.0.0.1.
    async fn listening<T: Transport + Unpin>(transport: &mut T) -> u16 {
        transport
            .listen_on(ListenerId::next(), "/ip4/127.0.0.1/tcp/0".parse().unwrap())
            .unwrap_or_else(|_| panic!("the transport listens"));
        loop {
            let event = futures::future::poll_fn(|cx| Pin::new(&mut *transport).poll(cx)).await;
            if let TransportEvent::NewAddress { listen_addr, .. } = event {
                return listen_addr
                    .iter()
                    .find_map(|p| match p {
                        Protocol::Tcp(port) => Some(port),
                        _ => None,
                    })
                    .unwrap();
            }
        }
    }

    /// Another program's listener at 127.0.0.2 on `port`, without
    /// SO_REUSEPORT, as most programs listen.
    fn taken_elsewhere(port: u16) -> std::net::TcpListener {
        std::net::TcpListener::bind(("127.0.0.2", port))
            .expect("127.0.0.2 takes the port a transport listens on at 127.0.0.1")
    }

    fn address_of(peer: &tokio::net::TcpListener) -> Multiaddr {
        format!("/ip4/127.0.0.1/tcp/{}", peer.local_addr().unwrap().port())
            .parse()
            .unwrap()
    }

    /// The port `transport`'s port-reusing dial of `peer` left from.
    async fn dialed_from(
        transport: &mut FreshPortWhenTaken,
        peer: &tokio::net::TcpListener,
    ) -> u16 {
        let stream = transport
            .dial(address_of(peer), REUSE)
            .unwrap()
            .await
            .expect("the dial connects");
        let (_, from) = peer.accept().await.unwrap();
        assert_eq!(from, stream.0.local_addr().unwrap());
        from.port()
    }

    #[tokio::test]
    async fn libp2p_alone_cannot_dial_while_its_listening_port_is_taken_elsewhere() {
        let peer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut plain = tcp::tokio::Transport::new(tcp::Config::default());
        let _elsewhere = taken_elsewhere(listening(&mut plain).await);
        let refused = plain.dial(address_of(&peer), REUSE).unwrap().await;
        // If libp2p-tcp learns to fall back here too, FreshPortWhenTaken
        // is no longer needed.
        assert_eq!(
            refused.err().map(|e| e.kind()),
            Some(io::ErrorKind::AddrInUse)
        );
    }

    #[tokio::test]
    async fn a_dial_leaves_from_a_fresh_port_when_the_listening_port_is_taken_elsewhere() {
        let peer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut transport = FreshPortWhenTaken::new(tcp::Config::default());
        let port = listening(&mut transport).await;
        let _elsewhere = taken_elsewhere(port);
        assert_ne!(dialed_from(&mut transport, &peer).await, port);
    }

    #[tokio::test]
    async fn a_dial_leaves_from_the_listening_port_while_it_is_free() {
        let peer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut transport = FreshPortWhenTaken::new(tcp::Config::default());
        let port = listening(&mut transport).await;
        assert_eq!(dialed_from(&mut transport, &peer).await, port);
    }
}
