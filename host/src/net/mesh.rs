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

/// How many peers to dial for a mesh of `in_mesh` peers: none while it has
/// at least [`MESH_N_LOW`], else enough to bring it up to [`MESH_N`].
pub(super) fn shortfall(in_mesh: usize) -> usize {
    if in_mesh >= MESH_N_LOW {
        0
    } else {
        MESH_N - in_mesh
    }
}

/// `wanted` distinct peers of `known` (the routing-table peers this node is
/// not connected to), starting at `start`: a random number, so that nodes
/// do not all pick the same peers.
pub(super) fn peers_to_dial(wanted: usize, known: &[PeerId], start: usize) -> Vec<PeerId> {
    if known.is_empty() {
        return Vec::new();
    }
    let wanted = wanted.min(known.len());
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
        assert_eq!(shortfall(MESH_N_LOW), 0);
        assert_eq!(shortfall(MESH_N + 3), 0);
    }

    #[test]
    fn a_short_node_dials_up_to_the_mesh_size() {
        assert_eq!(shortfall(1), MESH_N - 1);
        let known = peers(50);
        let chosen = peers_to_dial(shortfall(1), &known, 48);
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
        assert_eq!(peers_to_dial(shortfall(0), &known, 5).len(), 2);
        assert!(peers_to_dial(shortfall(0), &[], 5).is_empty());
    }
}
