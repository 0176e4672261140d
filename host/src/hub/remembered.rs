//! The peers a node knew, kept in `<data-dir>/peers.json`, so that after a
//! restart it rejoins the network through them, with no bootstrap peer
//! given. The file is the node's own memory, not configuration: a damaged
//! one is set aside with a warning and rewritten.

use crate::net::{Multiaddr, PeerInfo};
use libp2p::multiaddr::Protocol;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Peers remembered at most.
pub const MAX_PEERS: usize = 32;

/// Addresses remembered per peer at most.
const ADDRESSES_PER_PEER: usize = 4;

/// How often the node checks whether its peers changed, and writes the
/// file if they did.
pub const SAVE_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// Addresses, each ending in `/p2p/<peer id>`.
    peers: Vec<String>,
}

/// The remembered addresses in `path`; none if there is no file, and none
/// (with a warning) if it cannot be read.
pub fn load(path: &Path) -> Vec<Multiaddr> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!(
                "cannot read {}: {e}; rejoining through bootstrap peers only",
                path.display()
            );
            return Vec::new();
        }
    };
    let file: File = match serde_json::from_slice(&bytes) {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(
                "{} is damaged ({e}); rejoining through bootstrap peers only, and writing it anew",
                path.display()
            );
            return Vec::new();
        }
    };
    file.peers
        .iter()
        .filter_map(|text| text.parse::<Multiaddr>().ok())
        .filter(|address| matches!(address.iter().last(), Some(Protocol::P2p(_))))
        .take(MAX_PEERS * ADDRESSES_PER_PEER)
        .collect()
}

/// The addresses worth remembering of `peers`: agentsite nodes, those
/// connected longest first (the likeliest to stay), a few addresses each,
/// each ending in the peer's id.
pub fn of(peers: &[PeerInfo]) -> Vec<String> {
    let mut nodes: Vec<&PeerInfo> = peers.iter().filter(|p| p.agentsite).collect();
    nodes.sort_by_key(|p| (p.connected_at, p.peer_id.clone()));
    let mut remembered = Vec::new();
    for peer in nodes.into_iter().take(MAX_PEERS) {
        let Ok(id) = peer.peer_id.parse::<libp2p::PeerId>() else {
            continue;
        };
        let mut addresses: Vec<Multiaddr> = peer
            .addresses
            .iter()
            .filter_map(|a| a.parse::<Multiaddr>().ok()?.with_p2p(id).ok())
            .collect();
        addresses.sort();
        addresses.dedup();
        remembered.extend(
            addresses
                .into_iter()
                .take(ADDRESSES_PER_PEER)
                .map(|a| a.to_string()),
        );
    }
    remembered
}

/// Writes `addresses` to `path`.
pub fn save(path: &Path, addresses: Vec<String>) -> anyhow::Result<()> {
    let text = serde_json::to_vec_pretty(&File { peers: addresses })?;
    crate::store::write_private(path, &text, crate::store::Existing::Replace)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(id: &libp2p::PeerId, at: u64, agentsite: bool, addresses: &[&str]) -> PeerInfo {
        PeerInfo {
            peer_id: id.to_string(),
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
            agent_version: None,
            agentsite,
            connected_at: at,
            dialed: true,
            connections: Vec::new(),
            hole_punch_failed: false,
        }
    }

    #[test]
    fn agentsite_peers_are_remembered_with_their_ids_and_read_back() {
        let [old, new, other] = [(); 3].map(|_| libp2p::PeerId::random());
        let peers = [
            peer(&new, 20, true, &["/ip4/192.0.2.2/tcp/4077"]),
            peer(&other, 5, false, &["/ip4/192.0.2.9/tcp/4001"]),
            peer(
                &old,
                10,
                true,
                &["/ip4/192.0.2.1/tcp/4077", "/ip4/192.0.2.1/udp/4077/quic-v1"],
            ),
        ];
        let remembered = of(&peers);
        assert_eq!(
            remembered,
            vec![
                format!("/ip4/192.0.2.1/tcp/4077/p2p/{old}"),
                format!("/ip4/192.0.2.1/udp/4077/quic-v1/p2p/{old}"),
                format!("/ip4/192.0.2.2/tcp/4077/p2p/{new}"),
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peers.json");
        assert!(load(&path).is_empty(), "no file, no peers");
        save(&path, remembered.clone()).unwrap();
        let loaded: Vec<String> = load(&path).iter().map(ToString::to_string).collect();
        assert_eq!(loaded, remembered);

        // A damaged file, or addresses without an id, are not dialed.
        std::fs::write(
            &path,
            "{\"peers\": [\"/ip4/192.0.2.1/tcp/4077\", \"nonsense\"]}",
        )
        .unwrap();
        assert!(load(&path).is_empty());
        std::fs::write(&path, "not json").unwrap();
        assert!(load(&path).is_empty());
    }

    #[test]
    fn at_most_so_many_peers_and_addresses_are_kept() {
        let addresses: Vec<String> = (0..10)
            .map(|i| format!("/ip4/192.0.2.{i}/tcp/4077"))
            .collect();
        let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
        let peers: Vec<PeerInfo> = (0..MAX_PEERS + 10)
            .map(|i| peer(&libp2p::PeerId::random(), i as u64, true, &addresses))
            .collect();
        assert_eq!(of(&peers).len(), MAX_PEERS * ADDRESSES_PER_PEER);
    }
}
