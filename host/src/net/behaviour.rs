//! The protocols a node speaks, composed into one libp2p behaviour, and the
//! transports it speaks them over.
//!
//! Kademlia (records, providers), gossipsub (announcements), identify (who a
//! peer is and where it listens), two request-response protocols (chunk
//! fetch and JSON-RPC calls), an optional mDNS for a LAN, a block list for
//! peers caught lying, and what gets a node through NATs ([`super::reach`]):
//! AutoNAT v2 (client and server), circuit relay v2 (client and service) and
//! DCUtR hole punching.

use super::dial_back::OwnAddressOnly;
use super::keep_alive::OwnKeepAlive;
use super::loopback::LocalLoopback;
use super::{NetConfig, Transports, dht, fetch, gossip, one_host, rpc, strikes, tcp};
use libp2p::core::muxing::StreamMuxerBox;
use libp2p::core::transport::Boxed;
use libp2p::core::upgrade::Version;
use libp2p::swarm::behaviour::toggle::Toggle;
use libp2p::{
    PeerId, Swarm, SwarmBuilder, allow_block_list, autonat, dcutr, gossipsub, identify,
    identity::Keypair, mdns, noise, relay, swarm::NetworkBehaviour, yamux,
};

/// How long a new connection may take, from the first packet to a
/// multiplexed, authenticated connection. Under AutoNAT's ten seconds: a
/// node asked to dial a peer back through a NAT that drops what it did not
/// ask for must give up, and say so, before the peer stops waiting for the
/// answer (else the peer never learns it is unreachable).
const CONNECTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(8);

/// Sent to peers in identify: lets people tell agentsite nodes from others.
pub(super) const PROTOCOL_VERSION: &str = "/agentsite/1.0.0";

#[derive(NetworkBehaviour)]
pub(super) struct Behaviour {
    pub blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    /// No more than a few peers at one public IP (see [`one_host`]).
    pub one_host: one_host::Behaviour,
    /// Kademlia, telling which peers leave its requests unanswered.
    pub kad: strikes::Watched,
    /// Only mesh connections stay open for gossip's sake (see [`OwnKeepAlive`]).
    pub gossip: OwnKeepAlive<gossipsub::Behaviour>,
    /// Identify, not offering remote peers' loopback addresses for dials
    /// (see [`LocalLoopback`]).
    pub identify: LocalLoopback<identify::Behaviour>,
    pub fetch: fetch::Behaviour,
    pub rpc: rpc::Behaviour,
    pub mdns: Toggle<mdns::tokio::Behaviour>,
    /// Asks peers to dial this node back: is it reachable?
    pub autonat: Toggle<autonat::v2::client::Behaviour>,
    /// Dials peers back when they ask, at the IPs they are connected from
    /// only (see [`OwnAddressOnly`]).
    pub autonat_server: Toggle<OwnAddressOnly<autonat::v2::server::Behaviour>>,
    /// Reservations on relays, and connections through them.
    pub relay_client: relay::client::Behaviour,
    /// Relaying for others (its status follows [`super::reach::RelayService`]).
    pub relay: Toggle<relay::Behaviour>,
    /// Relayed connections upgraded to direct ones.
    pub dcutr: Toggle<dcutr::Behaviour>,
}

impl Behaviour {
    fn new(
        keypair: &Keypair,
        relay_client: relay::client::Behaviour,
        config: &NetConfig,
    ) -> anyhow::Result<Self> {
        let peer_id = keypair.public().to_peer_id();
        let reach = config.reachability;
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
            one_host: Default::default(),
            kad: strikes::Watched::new(dht::behaviour(
                peer_id,
                config.table_refresh,
                config.lifetimes,
            )),
            gossip: OwnKeepAlive(gossip::behaviour()?),
            identify: LocalLoopback::new(identify::Behaviour::new(
                identify::Config::new(PROTOCOL_VERSION.into(), keypair.public())
                    .with_agent_version(format!("agentsite/{}", env!("CARGO_PKG_VERSION")))
                    .with_push_listen_addr_updates(true),
            )),
            fetch: fetch::behaviour(),
            rpc: rpc::behaviour(),
            mdns: mdns.into(),
            autonat: reach.then(autonat::v2::client::Behaviour::default).into(),
            autonat_server: reach
                .then(|| OwnAddressOnly::new(autonat::v2::server::Behaviour::default()))
                .into(),
            relay_client,
            relay: reach
                .then(|| relay::Behaviour::new(peer_id, config.relay_limits.config()))
                .into(),
            dcutr: reach.then(|| dcutr::Behaviour::new(peer_id)).into(),
        })
    }
}

/// A swarm for `keypair` over the transports `config` asks for.
pub(super) fn swarm(keypair: Keypair, config: &NetConfig) -> anyhow::Result<Swarm<Behaviour>> {
    let behaviour = |key: &Keypair, relay_client| Behaviour::new(key, relay_client, config);
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
        Transports::Network => {
            let dns_config = system_resolver();
            SwarmBuilder::with_existing_identity(keypair)
                .with_tokio()
                .with_quic()
                // TCP as `with_tcp` builds it, its dials made again from a
                // fresh port where the listening one is taken (`tcp`).
                .with_other_transport(tcp::authenticated)?
                // `/dns4/…`, `/dns6/…` and `/dnsaddr/…` addresses, by the
                // system's resolver (or none, where the system has no
                // configuration: IP addresses still work).
                .with_dns_config(dns_config.0, dns_config.1)
                .with_relay_client(noise::Config::new, yamux::Config::default)?
                .with_behaviour(|key, relay_client| {
                    behaviour(key, relay_client).map_err(Into::into)
                })?
                .with_swarm_config(swarm_config)
                .with_connection_timeout(CONNECTION_TIMEOUT)
                .build()
        }
        Transports::Memory => SwarmBuilder::with_existing_identity(keypair)
            .with_tokio()
            .with_other_transport(memory_transport)?
            .with_relay_client(noise::Config::new, yamux::Config::default)?
            .with_behaviour(|key, relay_client| behaviour(key, relay_client).map_err(Into::into))?
            .with_swarm_config(swarm_config)
            .build(),
    };
    Ok(swarm)
}

/// The system's DNS configuration (`/etc/resolv.conf`, and `/etc/hosts`
/// for names such as `localhost`), or none where it cannot be read.
fn system_resolver() -> (libp2p::dns::ResolverConfig, libp2p::dns::ResolverOpts) {
    match hickory_resolver::system_conf::read_system_conf() {
        Ok(conf) => conf,
        Err(e) => {
            tracing::info!("no DNS configuration ({e}): /dns addresses will not resolve");
            (
                libp2p::dns::ResolverConfig::default(),
                libp2p::dns::ResolverOpts::default(),
            )
        }
    }
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

#[cfg(test)]
mod tests {
    use futures::task::{ArcWake, waker};
    use std::future::Future as _;
    use std::sync::{Arc, Mutex};
    use std::task::Context;
    use std::time::Duration;

    fn thread_name() -> String {
        let thread = std::thread::current();
        thread.name().unwrap_or("unnamed").to_owned()
    }

    /// Records the thread that woke it.
    struct WokenOn(Mutex<Option<String>>);

    impl ArcWake for WokenOn {
        fn wake_by_ref(this: &Arc<Self>) {
            *this.0.lock().unwrap() = Some(thread_name());
        }
    }

    /// libp2p's timers (gossip heartbeats, request and idle timeouts) are
    /// futures-timer delays; made on the node's runtime they fire from its
    /// own timer, not from futures-timer's helper thread, which each of
    /// them woke (the vendored futures-timer's `tokio` feature).
    #[tokio::test]
    async fn libp2p_timers_fire_on_the_nodes_runtime_not_on_a_helper_thread() {
        let woken_on = Arc::new(WokenOn(Mutex::new(None)));
        let waker = waker(woken_on.clone());
        let mut delay = futures_timer::Delay::new(Duration::from_millis(10));
        let mut cx = Context::from_waker(&waker);
        assert!(std::pin::Pin::new(&mut delay).poll(&mut cx).is_pending());
        let fired = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Some(thread) = woken_on.0.lock().unwrap().clone() {
                    return thread;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the delay fired within 10 s");
        assert_eq!(
            fired,
            thread_name(),
            "the delay was fired by another thread than the runtime's"
        );
        assert!(std::pin::Pin::new(&mut delay).poll(&mut cx).is_ready());
    }
}
