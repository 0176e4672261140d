//! A large download waits for direct connections.
//!
//! A relay carries only a circuit's first bytes: libp2p's relays 128 KiB
//! in two minutes by default, this node's 4 MiB (see `net::reach`). An agent
//! larger than [`RELAYED_AT_MOST`] is therefore downloaded from providers
//! this node reaches directly: those connected directly come first, their
//! relayed connections closed so that the chunks do not take them. While
//! every connected provider is reached only through a relay, the download
//! waits up to [`WAIT_FOR_DIRECT`] for hole punching to connect one directly
//! (a round trip or two, where the NATs allow it), unless hole punching to
//! each of them has failed already. Then it goes through the relay anyway,
//! and says so: the relay may cut a circuit short, and the download goes on
//! over the next one.

use crate::net::{Connection, Network, PeerId, PeerInfo};
use std::time::Duration;

/// The largest agent downloaded through a relay without waiting for a
/// direct connection.
pub const RELAYED_AT_MOST: u64 = 1024 * 1024;
/// How long a large download waits for a provider to be connected directly.
pub const WAIT_FOR_DIRECT: Duration = Duration::from_secs(15);
/// How often it looks.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How this node is connected to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Direct,
    RelayedOnly,
    Unconnected,
}

/// What this node's peer list says of `peer`.
fn info<'a>(peer: &PeerId, peers: &'a [PeerInfo]) -> Option<&'a PeerInfo> {
    let id = peer.to_string();
    peers.iter().find(|p| p.peer_id == id)
}

fn is_relayed(connection: &Connection) -> bool {
    connection.transport == "relayed"
}

fn path(peer: &PeerId, peers: &[PeerInfo]) -> Path {
    match info(peer, peers) {
        Some(info) if !info.connections.iter().all(is_relayed) => Path::Direct,
        Some(info) if !info.connections.is_empty() => Path::RelayedOnly,
        _ => Path::Unconnected,
    }
}

/// Splits `providers` by how this node reaches them: direct, through a
/// relay only, not connected.
fn by_path(providers: &[PeerId], peers: &[PeerInfo]) -> [Vec<PeerId>; 3] {
    let mut split: [Vec<PeerId>; 3] = Default::default();
    for provider in providers {
        let slot = match path(provider, peers) {
            Path::Direct => 0,
            Path::RelayedOnly => 1,
            Path::Unconnected => 2,
        };
        split[slot].push(*provider);
    }
    split
}

/// The providers to download an agent of `size` bytes from, in the order
/// to ask them.
pub async fn providers_for(network: &Network, size: u64, providers: Vec<PeerId>) -> Vec<PeerId> {
    if size <= RELAYED_AT_MOST {
        return providers;
    }
    let deadline = tokio::time::Instant::now() + WAIT_FOR_DIRECT;
    loop {
        let Ok(peers) = network.peers().await else {
            return providers;
        };
        let [mut direct, relayed, unconnected] = by_path(&providers, &peers);
        if !direct.is_empty() {
            for provider in &direct {
                let _ = network.prefer_direct(*provider).await;
            }
            relayed_gone(network, &direct).await;
            direct.extend(unconnected);
            return direct;
        }
        if relayed.is_empty() {
            return providers;
        }
        let hopeless = relayed
            .iter()
            .all(|provider| info(provider, &peers).is_some_and(|i| i.hole_punch_failed));
        if hopeless || tokio::time::Instant::now() >= deadline {
            tracing::info!(
                "downloading {:.1} MiB through a relay ({}), which may cut the download short",
                size as f64 / (1024.0 * 1024.0),
                match hopeless {
                    true => "hole punching to its providers failed".to_owned(),
                    false => format!(
                        "no provider connected directly within {} s",
                        WAIT_FOR_DIRECT.as_secs()
                    ),
                }
            );
            return unconnected.into_iter().chain(relayed).collect();
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// Waits (a second at most) until the relayed connections to `peers` that
/// [`Network::prefer_direct`] closes are gone: closing takes a moment, and
/// a chunk asked meanwhile could take the closing connection and fail.
async fn relayed_gone(network: &Network, peers: &[PeerId]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while tokio::time::Instant::now() < deadline {
        let Ok(connected) = network.peers().await else {
            return;
        };
        let closing = peers.iter().any(|peer| {
            info(peer, &connected).is_some_and(|i| i.connections.iter().any(is_relayed))
        });
        if !closing {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(id: PeerId, transports: &[&str]) -> PeerInfo {
        PeerInfo {
            peer_id: id.to_string(),
            addresses: Vec::new(),
            agent_version: None,
            agentsite: true,
            connected_at: 0,
            dialed: true,
            hole_punch_failed: false,
            connections: transports
                .iter()
                .map(|t| Connection {
                    address: String::new(),
                    transport: t.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn providers_are_told_apart_by_how_they_are_reached() {
        let [a, b, c, d] = [(); 4].map(|_| PeerId::random());
        let peers = [
            peer(a, &["relayed", "tcp"]),
            peer(b, &["relayed"]),
            peer(c, &["quic"]),
        ];
        assert_eq!(
            by_path(&[a, b, c, d], &peers),
            [vec![a, c], vec![b], vec![d]]
        );
    }
}
