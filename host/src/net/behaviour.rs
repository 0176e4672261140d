//! The protocols a node speaks, composed into one libp2p behaviour, and the
//! transports it speaks them over.
//!
//! Kademlia (records, providers), gossipsub (announcements), identify (who a
//! peer is and where it listens), two request-response protocols (chunk
//! fetch and JSON-RPC calls), an optional mDNS for a LAN, and a block list for
//! peers caught lying.

use super::keep_alive::OwnKeepAlive;
use super::{NetConfig, Transports, dht, fetch, gossip, rpc};
use libp2p::core::muxing::StreamMuxerBox;
use libp2p::core::transport::Boxed;
use libp2p::core::upgrade::Version;
use libp2p::swarm::behaviour::toggle::Toggle;
use libp2p::{
    PeerId, Swarm, SwarmBuilder, allow_block_list, gossipsub, identify, identity::Keypair, kad,
    mdns, noise, swarm::NetworkBehaviour, tcp, yamux,
};

/// Sent to peers in identify: lets people tell agentsite nodes from others.
pub(super) const PROTOCOL_VERSION: &str = "/agentsite/1.0.0";

#[derive(NetworkBehaviour)]
pub(super) struct Behaviour {
    pub blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    pub kad: kad::Behaviour<kad::store::MemoryStore>,
    /// Only mesh connections stay open for gossip's sake (see [`OwnKeepAlive`]).
    pub gossip: OwnKeepAlive<gossipsub::Behaviour>,
    pub identify: identify::Behaviour,
    pub fetch: fetch::Behaviour,
    pub rpc: rpc::Behaviour,
    pub mdns: Toggle<mdns::tokio::Behaviour>,
}

impl Behaviour {
    fn new(keypair: &Keypair, config: &NetConfig) -> anyhow::Result<Self> {
        let peer_id = keypair.public().to_peer_id();
        let mdns = if config.mdns {
            Some(mdns::tokio::Behaviour::new(
                mdns::Config::default(),
                peer_id,
            )?)
        } else {
            None
        };
        Ok(Behaviour {
            blocked: Default::default(),
            kad: dht::behaviour(peer_id, config.table_refresh),
            gossip: OwnKeepAlive(gossip::behaviour()?),
            identify: identify::Behaviour::new(
                identify::Config::new(PROTOCOL_VERSION.into(), keypair.public())
                    .with_agent_version(format!("agentsite/{}", env!("CARGO_PKG_VERSION")))
                    .with_push_listen_addr_updates(true),
            ),
            fetch: fetch::behaviour(),
            rpc: rpc::behaviour(),
            mdns: mdns.into(),
        })
    }
}

/// A swarm for `keypair` over the transports `config` asks for.
pub(super) fn swarm(keypair: Keypair, config: &NetConfig) -> anyhow::Result<Swarm<Behaviour>> {
    let behaviour = |key: &Keypair| Behaviour::new(key, config);
    let idle_timeout = config.idle_timeout;
    // Substreams negotiate their protocol lazily: a dialer proposing one
    // protocol (a Kademlia request, a fetch, a call) sends its request with
    // the proposal instead of waiting a round trip for the answer. The wire
    // is the same multistream-select 1.0 (a listener cannot tell), and a
    // refusal still surfaces, on the first read.
    let swarm_config = |c: libp2p::swarm::Config| {
        c.with_idle_connection_timeout(idle_timeout)
            .with_substream_upgrade_protocol_override(Version::V1Lazy)
    };
    let swarm = match config.transports {
        Transports::Network => SwarmBuilder::with_existing_identity(keypair)
            .with_tokio()
            .with_tcp(
                tcp::Config::default().nodelay(true),
                noise::Config::new,
                yamux::Config::default,
            )?
            .with_quic()
            .with_behaviour(|key| behaviour(key).map_err(Into::into))?
            .with_swarm_config(swarm_config)
            .build(),
        Transports::Memory => SwarmBuilder::with_existing_identity(keypair)
            .with_tokio()
            .with_other_transport(memory_transport)?
            .with_behaviour(|key| behaviour(key).map_err(Into::into))?
            .with_swarm_config(swarm_config)
            .build(),
    };
    Ok(swarm)
}

/// The in-process transport of simulated networks, authenticated with noise
/// and multiplexed with yamux, both negotiated lazily as the TCP transport of
/// `SwarmBuilder::with_tcp` does: the simulation must not pay round trips a
/// real node does not.
pub(super) fn memory_transport(
    key: &Keypair,
) -> Result<Boxed<(PeerId, StreamMuxerBox)>, Box<dyn std::error::Error + Send + Sync>> {
    use libp2p::Transport as _;
    let noise = noise::Config::new(key).map_err(Box::new)?;
    Ok(libp2p::core::transport::MemoryTransport::default()
        .upgrade(Version::V1Lazy)
        .authenticate(noise)
        .multiplex(yamux::Config::default())
        .boxed())
}
