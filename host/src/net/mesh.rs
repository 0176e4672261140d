//! Keeping gossip's mesh supplied with peers.
//!
//! Gossipsub builds its mesh only from peers the node is already connected
//! to; it never dials. Connections outside the mesh close when idle (see
//! `keep_alive`), so a node whose mesh peers leave, or prune it, can end up
//! with too few connections to rebuild its mesh, and announcements then
//! reach it only by the slow IHAVE/IWANT gossip of each heartbeat. Once a
//! second, the node checks its mesh and, when it is smaller than gossipsub's
//! lower bound, dials peers it is not connected to from its Kademlia routing
//! table; gossipsub grafts them at its next heartbeat.

use super::gossip::{MESH_N, MESH_N_LOW};
use libp2p::PeerId;
use std::time::Duration;

/// How often the node checks its gossip connections.
pub(super) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The peers to dial, given the size of this node's mesh and the
/// routing-table peers it is not connected to: none while the mesh has at
/// least [`MESH_N_LOW`] peers, else enough to bring it up to [`MESH_N`],
/// taken from `known` starting at `start` (a random number, so that nodes
/// do not all pick the same peers).
pub(super) fn peers_to_dial(in_mesh: usize, known: &[PeerId], start: usize) -> Vec<PeerId> {
    if in_mesh >= MESH_N_LOW || known.is_empty() {
        return Vec::new();
    }
    let wanted = (MESH_N - in_mesh).min(known.len());
    (0..wanted)
        .map(|i| known[(start + i) % known.len()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(n: usize) -> Vec<PeerId> {
        (0..n).map(|_| PeerId::random()).collect()
    }

    #[test]
    fn a_node_with_a_full_enough_mesh_dials_nobody() {
        assert!(peers_to_dial(MESH_N_LOW, &peers(50), 7).is_empty());
        assert!(peers_to_dial(MESH_N + 3, &peers(50), 7).is_empty());
    }

    #[test]
    fn a_short_node_dials_up_to_the_mesh_size() {
        let known = peers(50);
        let chosen = peers_to_dial(1, &known, 48);
        assert_eq!(chosen.len(), MESH_N - 1);
        // Distinct peers, wrapping around the end of the list.
        assert_eq!(chosen[0], known[48]);
        assert_eq!(chosen[2], known[0]);
        let distinct: std::collections::HashSet<_> = chosen.iter().collect();
        assert_eq!(distinct.len(), chosen.len());
    }

    #[test]
    fn a_node_that_knows_few_peers_dials_those_it_knows() {
        let known = peers(2);
        assert_eq!(peers_to_dial(0, &known, 5).len(), 2);
        assert!(peers_to_dial(0, &[], 5).is_empty());
    }
}
