//! Gossipsub announcements: when a node publishes an agent it tells the
//! network at once, so that nodes can list it without a DHT lookup.
//!
//! Messages are validated by the node before they are forwarded (a message
//! that is not a valid [`Announcement`] is rejected, which lowers the score
//! of the peer that sent it). Peer scoring is on, without the IP-colocation
//! penalty: many honest nodes share an address on a LAN or in tests.

use crate::store::manifest::{MAX_MANIFEST_BYTES, ManifestError, SignedManifest};
use libp2p::PeerId;
use libp2p::gossipsub::{self, IdentTopic, MessageId};
use libp2p::identity::{Keypair, PublicKey};
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// The topic every node subscribes to.
pub fn topic() -> IdentTopic {
    IdentTopic::new("/agentsite/announce/2")
}

/// Peers each node forwards announcements to (its mesh): gossipsub's
/// defaults, spelled out because connections outside the mesh close when
/// idle, so a node holds at most [`MESH_N_HIGH`] connections for gossip.
pub const MESH_N: usize = 6;
pub const MESH_N_LOW: usize = 5;
pub const MESH_N_HIGH: usize = 12;

/// How often gossipsub keeps its mesh and offers what it has to peers
/// outside it (gossipsub's default). Each heartbeat scores every connected
/// peer: at twice a second it was a sixth of a resting node's CPU
/// (BENCHMARKS.md, "where a network at rest spends its CPU").
/// Announcements do not wait for it; mesh peers forward them as they come.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long an announcement is kept to be sent on request, and how long its
/// id is offered to peers outside the mesh (gossipsub counts both in
/// heartbeats).
const HISTORY: Duration = Duration::from_secs(20);
const GOSSIP: Duration = Duration::from_secs(10);

/// The whole heartbeats in `span`.
pub const fn heartbeats(span: Duration) -> usize {
    (span.as_millis() / HEARTBEAT.as_millis()) as usize
}

/// How long a departed peer's score is kept. A peer's worst penalty, its
/// count of invalid announcements, decays by 0.9 a second while it stays
/// connected and falls below gossipsub's zero (0.1) in 44 s after ten of
/// them, 87 s after a thousand: kept 120 s, a departed peer's score keeps
/// it from a clean slate about as long as staying would have. Gossipsub's
/// default (an hour) holds, and walks every second, the stats of every
/// peer a node met while joining.
const RETAIN_SCORE: Duration = Duration::from_secs(120);

pub(super) fn behaviour() -> anyhow::Result<gossipsub::Behaviour> {
    let config = gossipsub::ConfigBuilder::default()
        .mesh_n(MESH_N)
        .mesh_n_low(MESH_N_LOW)
        .mesh_n_high(MESH_N_HIGH)
        .heartbeat_interval(HEARTBEAT)
        // A node outside every mesh for a while (its mesh peers pruned it,
        // or its connections closed when idle) catches up by gossip: each
        // heartbeat, peers offer the ids of the last 10 s of announcements
        // (IHAVE) to a few others they are connected to, and the node asks
        // for those it missed (IWANT). The default window is 1.5 s.
        .history_length(heartbeats(HISTORY))
        .history_gossip(heartbeats(GOSSIP))
        // Announcements carry their own signatures (see [`Announcement`]).
        .validation_mode(gossipsub::ValidationMode::Anonymous)
        // Hold messages until the node has checked them.
        .validate_messages()
        // The same announcement relayed by many peers is one message.
        .message_id_fn(|message| MessageId::from(Sha256::digest(&message.data).to_vec()))
        .max_transmit_size(MAX_ANNOUNCEMENT + 1024)
        .build()
        .map_err(|e| anyhow::anyhow!("gossipsub config: {e}"))?;
    let mut behaviour =
        gossipsub::Behaviour::new(gossipsub::MessageAuthenticity::Anonymous, config)
            .map_err(|e| anyhow::anyhow!("gossipsub: {e}"))?;
    let mut params = gossipsub::PeerScoreParams {
        ip_colocation_factor_weight: 0.0,
        retain_score: RETAIN_SCORE,
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

/// Announcements are signed over this prefix and the manifest's bytes.
const ANNOUNCE_DOMAIN: &[u8] = b"agentsite-announce-v1\0";
/// An ed25519 key in libp2p's protobuf encoding is 36 bytes; nothing longer
/// is read.
const MAX_HOST_KEY: usize = 64;
const SIGNATURE: usize = 64;

/// The largest announcement: a manifest at its limit, its host's key and
/// signature.
pub const MAX_ANNOUNCEMENT: usize = MAX_MANIFEST_BYTES + 1 + MAX_HOST_KEY + SIGNATURE;

/// What gossip carries: a publisher-signed manifest, and the node that hosts
/// the agent, which signs that it does.
///
/// Gossipsub's own message signatures are off (`Anonymous`): gossipsub
/// checks those on every copy a node receives, one per mesh peer that relays
/// it, before it drops duplicates, and that was most of an announcement's
/// cost across a network. These signatures are checked once per node, on the
/// first copy, by the node's validation. Wire form: the host key's length
/// (one byte), the host key (libp2p protobuf), the host's signature (64
/// bytes), the manifest as it travels.
pub struct Announcement {
    pub manifest: SignedManifest,
    pub host: PeerId,
}

/// Why gossip bytes are not a valid announcement.
#[derive(Debug, thiserror::Error)]
pub enum AnnouncementError {
    #[error("announcement is malformed: {0}")]
    Malformed(&'static str),
    #[error("announcement's host signature does not verify")]
    BadSignature,
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl Announcement {
    /// The bytes announcing `manifest` as hosted by the node with `host`'s key.
    pub fn encode(manifest: &SignedManifest, host: &Keypair) -> Vec<u8> {
        let key = host.public().encode_protobuf();
        let signature = host
            .sign(&[ANNOUNCE_DOMAIN, manifest.encoded()].concat())
            .expect("an ed25519 node key signs");
        let mut bytes =
            Vec::with_capacity(1 + key.len() + signature.len() + manifest.encoded().len());
        bytes.push(key.len() as u8);
        bytes.extend_from_slice(&key);
        bytes.extend_from_slice(&signature);
        bytes.extend_from_slice(manifest.encoded());
        bytes
    }

    /// Reads and checks an announcement: its host's signature, then the
    /// manifest and its publisher's signature.
    pub fn decode(bytes: &[u8]) -> Result<Announcement, AnnouncementError> {
        let (&key_len, rest) = bytes
            .split_first()
            .ok_or(AnnouncementError::Malformed("empty"))?;
        let key_len = usize::from(key_len);
        if key_len > MAX_HOST_KEY || rest.len() < key_len + SIGNATURE {
            return Err(AnnouncementError::Malformed(
                "truncated host key or signature",
            ));
        }
        let (key, rest) = rest.split_at(key_len);
        let (signature, manifest) = rest.split_at(SIGNATURE);
        let key = PublicKey::try_decode_protobuf(key)
            .map_err(|_| AnnouncementError::Malformed("host key is not a libp2p key"))?;
        if key.clone().try_into_ed25519().is_err() {
            return Err(AnnouncementError::Malformed("host key is not ed25519"));
        }
        if !key.verify(&[ANNOUNCE_DOMAIN, manifest].concat(), signature) {
            return Err(AnnouncementError::BadSignature);
        }
        Ok(Announcement {
            manifest: SignedManifest::decode(manifest)?,
            host: key.to_peer_id(),
        })
    }
}

/// A message came by gossip: an announcement that checks out is taken
/// and passed on, anything else refused (gossipsub then scores its sender
/// down and does not forward it).
pub(super) fn received(
    gossip: &mut gossipsub::Behaviour,
    event: gossipsub::Event,
) -> Option<Announcement> {
    let gossipsub::Event::Message {
        propagation_source,
        message_id,
        message,
    } = event
    else {
        return None;
    };
    let verdict = Announcement::decode(&message.data);
    let acceptance = if verdict.is_ok() {
        gossipsub::MessageAcceptance::Accept
    } else {
        gossipsub::MessageAcceptance::Reject
    };
    gossip.report_message_validation_result(&message_id, &propagation_source, acceptance);
    verdict
        .inspect_err(
            |e| tracing::warn!(peer = %propagation_source, "rejected an announcement: {e}"),
        )
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::manifest::tests::sample;

    #[test]
    fn an_announcement_names_its_host_and_carries_the_manifest() {
        let publisher = Keypair::generate_ed25519();
        let host = Keypair::generate_ed25519();
        let manifest = sample(b"an agent", &publisher);
        let read = Announcement::decode(&Announcement::encode(&manifest, &host)).unwrap();
        assert_eq!(read.host, host.public().to_peer_id());
        assert_eq!(read.manifest, manifest);
    }

    #[test]
    fn a_claimed_host_must_have_signed() {
        let manifest = sample(b"an agent", &Keypair::generate_ed25519());
        let liar = Keypair::generate_ed25519();
        let honest = Keypair::generate_ed25519();
        // The liar puts the honest node's key in front of its own signature.
        let mut forged = Announcement::encode(&manifest, &liar);
        let key = honest.public().encode_protobuf();
        forged[1..1 + key.len()].copy_from_slice(&key);
        assert!(matches!(
            Announcement::decode(&forged),
            Err(AnnouncementError::BadSignature)
        ));
        // A host's signature covers the manifest: another manifest under it fails.
        let mut swapped = Announcement::encode(&manifest, &honest);
        let other = sample(b"another agent", &Keypair::generate_ed25519());
        let start = swapped.len() - manifest.encoded().len();
        swapped.truncate(start);
        swapped.extend_from_slice(other.encoded());
        assert!(matches!(
            Announcement::decode(&swapped),
            Err(AnnouncementError::BadSignature)
        ));
    }

    #[test]
    fn broken_bytes_are_refused_with_a_reason() {
        let manifest = sample(b"an agent", &Keypair::generate_ed25519());
        let bytes = Announcement::encode(&manifest, &Keypair::generate_ed25519());
        for cut in [0, 1, 20, 37, 37 + 63] {
            let error = Announcement::decode(&bytes[..cut]).err().unwrap();
            assert!(
                matches!(error, AnnouncementError::Malformed(_)),
                "{cut} bytes: {error}"
            );
        }
        let mut long_key = bytes.clone();
        long_key[0] = 200;
        assert!(Announcement::decode(&long_key).is_err());
        // A host that signs a manifest that is not one is still refused.
        let host = Keypair::generate_ed25519();
        let key = host.public().encode_protobuf();
        let junk = b"{\"body\": 1}";
        let signature = host.sign(&[ANNOUNCE_DOMAIN, junk].concat()).unwrap();
        let bytes = [&[key.len() as u8][..], &key, &signature, junk].concat();
        assert!(matches!(
            Announcement::decode(&bytes),
            Err(AnnouncementError::Manifest(_))
        ));
    }
}
