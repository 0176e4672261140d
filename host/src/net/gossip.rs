//! Gossipsub announcements: when a node publishes an agent it tells the
//! network at once, so that nodes can list it without a DHT lookup.
//!
//! Messages are validated by the node before they are forwarded (a message
//! that is not a valid signed manifest is rejected, which lowers the score of
//! the peer that sent it). Peer scoring is on, without the IP-colocation
//! penalty: many honest nodes share an address on a LAN or in tests.

use libp2p::gossipsub::{self, IdentTopic, MessageId};
use libp2p::identity::Keypair;
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// The topic every node subscribes to.
pub fn topic() -> IdentTopic {
    IdentTopic::new("/agentsite/announce/1")
}

/// Peers each node forwards announcements to (its mesh): gossipsub's
/// defaults, spelled out because connections outside the mesh close when
/// idle, so a node holds at most [`MESH_N_HIGH`] connections for gossip.
pub const MESH_N: usize = 6;
pub const MESH_N_LOW: usize = 5;
pub const MESH_N_HIGH: usize = 12;

pub(super) fn behaviour(keypair: &Keypair) -> anyhow::Result<gossipsub::Behaviour> {
    let config = gossipsub::ConfigBuilder::default()
        .mesh_n(MESH_N)
        .mesh_n_low(MESH_N_LOW)
        .mesh_n_high(MESH_N_HIGH)
        .heartbeat_interval(Duration::from_millis(500))
        .validation_mode(gossipsub::ValidationMode::Strict)
        // Hold messages until the node has checked them.
        .validate_messages()
        // The same announcement relayed by many peers is one message.
        .message_id_fn(|message| MessageId::from(Sha256::digest(&message.data).to_vec()))
        .max_transmit_size(64 * 1024)
        .build()
        .map_err(|e| anyhow::anyhow!("gossipsub config: {e}"))?;
    let mut behaviour = gossipsub::Behaviour::new(
        gossipsub::MessageAuthenticity::Signed(keypair.clone()),
        config,
    )
    .map_err(|e| anyhow::anyhow!("gossipsub: {e}"))?;
    let mut params = gossipsub::PeerScoreParams {
        ip_colocation_factor_weight: 0.0,
        ..Default::default()
    };
    params.topics.insert(
        topic().hash(),
        gossipsub::TopicScoreParams {
            // One invalid announcement costs a peer much more than mere
            // silence would: it is proof of forgery or corruption.
            invalid_message_deliveries_weight: -100.0,
            invalid_message_deliveries_decay: 0.9,
            ..Default::default()
        },
    );
    behaviour
        .with_peer_score(params, gossipsub::PeerScoreThresholds::default())
        .map_err(|e| anyhow::anyhow!("gossipsub peer score: {e}"))?;
    behaviour
        .subscribe(&topic())
        .map_err(|e| anyhow::anyhow!("gossipsub subscribe: {e}"))?;
    Ok(behaviour)
}
