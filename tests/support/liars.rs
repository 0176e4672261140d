//! DHT nodes that lie, for the lying-node and sybil tests: libp2p swarms
//! that look like agentsite nodes to their peers (identify says so, and they
//! speak agentsite's Kademlia protocol) but harm every lookup that meets
//! them.
//!
//! - A [`Lie::Drop`] node accepts every DHT request and never answers: each
//!   request waits for its timeout.
//! - A [`Lie::Mislead`] node answers every request with its accomplices, the
//!   other misleading nodes (closest to the key of the request, as an honest
//!   node would pick), never with a record or a provider, and keeps none of
//!   what it is sent: it withholds what it was given to hold.
//!
//! Each joins as an honest node does: it dials its bootstrap peers and runs a
//! Kademlia bootstrap through them, so that the nodes it meets learn of it.
//! Then it turns liar.

use agentsite::net::{Keypair, Multiaddr, PeerId};
use futures::StreamExt as _;
use libp2p::core::upgrade::Version;
use libp2p::kad::{self, store::MemoryStore};
use libp2p::swarm::{NetworkBehaviour, SwarmEvent};
use libp2p::{StreamProtocol, Transport as _, identify, noise, request_response, yamux};
use std::time::Duration;
use tokio::sync::oneshot;

/// agentsite's Kademlia protocol and identify version, as a real node says.
const KAD: StreamProtocol = StreamProtocol::new("/agentsite/kad/1.0.0");
const VERSION: &str = "/agentsite/1.0.0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lie {
    Drop,
    Mislead,
}

#[derive(NetworkBehaviour)]
struct LiarBehaviour {
    identify: identify::Behaviour,
    kad: kad::Behaviour<MemoryStore>,
    black_hole: libp2p::swarm::behaviour::toggle::Toggle<request_response::Behaviour<BlackHole>>,
}

/// Takes a request's stream and never reads or answers it.
#[derive(Clone, Default)]
pub struct BlackHole;

impl request_response::Codec for BlackHole {
    type Protocol = StreamProtocol;
    type Request = ();
    type Response = ();

    async fn read_request<T>(&mut self, _: &StreamProtocol, _: &mut T) -> std::io::Result<()>
    where
        T: futures::AsyncRead + Unpin + Send,
    {
        futures::future::pending().await
    }

    async fn read_response<T>(&mut self, _: &StreamProtocol, _: &mut T) -> std::io::Result<()>
    where
        T: futures::AsyncRead + Unpin + Send,
    {
        futures::future::pending().await
    }

    async fn write_request<T>(
        &mut self,
        _: &StreamProtocol,
        _: &mut T,
        _: (),
    ) -> std::io::Result<()>
    where
        T: futures::AsyncWrite + Unpin + Send,
    {
        Ok(())
    }

    async fn write_response<T>(
        &mut self,
        _: &StreamProtocol,
        _: &mut T,
        _: (),
    ) -> std::io::Result<()>
    where
        T: futures::AsyncWrite + Unpin + Send,
    {
        Ok(())
    }
}

/// Where the liars run: the in-process memory transport, or TCP.
#[derive(Clone, Copy)]
pub enum Wire {
    Memory,
    Tcp,
}

/// A running liar; it stops when dropped.
pub struct Liar {
    pub peer_id: PeerId,
    pub address: Multiaddr,
    pub lie: Lie,
    accomplices: Option<tokio::sync::mpsc::UnboundedSender<(PeerId, Multiaddr)>>,
    _stop: oneshot::Sender<()>,
}

impl Liar {
    /// Starts a liar with `keypair` listening at `listen`, joining through
    /// `bootstrap` (addresses ending in `/p2p/<peer id>`); returns once its
    /// Kademlia bootstrap is over (or has run for 30 s).
    pub async fn start(
        lie: Lie,
        keypair: Keypair,
        wire: Wire,
        listen: Multiaddr,
        bootstrap: &[Multiaddr],
    ) -> Liar {
        let peer_id = keypair.public().to_peer_id();
        let behaviour = |key: &Keypair| {
            let mut config = kad::Config::new(KAD);
            config
                .set_record_filtering(kad::StoreInserts::FilterBoth)
                .set_kbucket_inserts(kad::BucketInserts::Manual)
                .set_periodic_bootstrap_interval(None);
            let mut kad = kad::Behaviour::with_config(
                key.public().to_peer_id(),
                MemoryStore::new(key.public().to_peer_id()),
                config,
            );
            // A dropping node's requests go out by Kademlia as a client's
            // (it joins as anyone does); what comes in goes to the black hole.
            kad.set_mode(Some(match lie {
                Lie::Drop => kad::Mode::Client,
                Lie::Mislead => kad::Mode::Server,
            }));
            let black_hole = (lie == Lie::Drop).then(|| {
                request_response::Behaviour::with_codec(
                    BlackHole,
                    [(KAD, request_response::ProtocolSupport::Inbound)],
                    request_response::Config::default()
                        .with_request_timeout(Duration::from_secs(3600))
                        .with_max_concurrent_streams(10_000),
                )
            });
            LiarBehaviour {
                identify: identify::Behaviour::new(identify::Config::new(
                    VERSION.into(),
                    key.public(),
                )),
                kad,
                black_hole: black_hole.into(),
            }
        };
        let idle =
            |c: libp2p::swarm::Config| c.with_idle_connection_timeout(Duration::from_secs(300));
        let mut swarm = match wire {
            Wire::Memory => libp2p::SwarmBuilder::with_existing_identity(keypair)
                .with_tokio()
                .with_other_transport(|key| {
                    Ok(libp2p::core::transport::MemoryTransport::default()
                        .upgrade(Version::V1Lazy)
                        .authenticate(noise::Config::new(key)?)
                        .multiplex(yamux::Config::default())
                        .boxed())
                })
                .unwrap()
                .with_behaviour(|key| behaviour(key))
                .unwrap()
                .with_swarm_config(idle)
                .build(),
            Wire::Tcp => libp2p::SwarmBuilder::with_existing_identity(keypair)
                .with_tokio()
                // The node's TCP: dials survive a listening port taken elsewhere.
                .with_other_transport(agentsite::net::tcp::authenticated)
                .unwrap()
                .with_behaviour(|key| behaviour(key))
                .unwrap()
                .with_swarm_config(idle)
                .build(),
        };
        swarm.listen_on(listen).expect("the liar listens");
        let address = loop {
            if let SwarmEvent::NewListenAddr { address, .. } = swarm.select_next_some().await {
                break address.with_p2p(peer_id).unwrap();
            }
        };
        let mut bootstrap_peers = Vec::new();
        for entry in bootstrap {
            let Some(libp2p::multiaddr::Protocol::P2p(peer)) = entry.iter().last() else {
                continue;
            };
            swarm.behaviour_mut().kad.add_address(&peer, entry.clone());
            bootstrap_peers.push(peer);
        }
        if swarm.behaviour_mut().kad.bootstrap().is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    if let SwarmEvent::Behaviour(LiarBehaviourEvent::Kad(
                        kad::Event::OutboundQueryProgressed {
                            result: kad::QueryResult::Bootstrap(_),
                            step,
                            ..
                        },
                    )) = swarm.select_next_some().await
                        && step.last
                    {
                        return;
                    }
                }
            })
            .await;
        }
        // Turned liar: it knows only its accomplices from now on.
        for peer in bootstrap_peers {
            swarm.behaviour_mut().kad.remove_peer(&peer);
        }
        let (stop, mut stopped) = oneshot::channel();
        let (accomplices, mut new_accomplices) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    Some((peer, address)) = new_accomplices.recv() => {
                        swarm.behaviour_mut().kad.add_address(&peer, address);
                    }
                    _ = swarm.select_next_some() => {}
                }
            }
        });
        Liar {
            peer_id,
            address,
            lie,
            accomplices: Some(accomplices),
            _stop: stop,
        }
    }

    /// Tells a misleading liar of its accomplices (itself excluded).
    pub fn know(&self, accomplices: &[(PeerId, Multiaddr)]) {
        if let Some(sender) = &self.accomplices {
            for (peer, address) in accomplices {
                if *peer != self.peer_id {
                    let _ = sender.send((*peer, address.clone()));
                }
            }
        }
    }
}
