//! Kademlia as agentsite uses it: which keys exist, how records are checked
//! before they are stored, and the settings that make lookups succeed.
//!
//! Two kinds of key live in the DHT: an agent's id, holding its signed
//! manifest as a record and its hosts as provider records; and one key per
//! keyword, holding as provider records the nodes that host an agent with
//! that keyword. A search for a word is therefore one provider lookup,
//! O(log n) hops in a network of n nodes. Nodes that share language models
//! provide a key per model name and one key of all sharers.

use crate::AgentId;
use crate::store::manifest::{ManifestError, SignedManifest, normalize_keyword};
use libp2p::kad::{self, RecordKey, store::MemoryStore, store::MemoryStoreConfig};
use libp2p::{Multiaddr, PeerId, StreamProtocol};
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// Our own Kademlia protocol: agentsite nodes form their own DHT instead of
/// joining (and polluting) the IPFS one.
pub(super) const PROTOCOL: StreamProtocol = StreamProtocol::new("/agentsite/kad/1.0.0");

/// The DHT key under which an agent's manifest and hosts are found.
pub fn agent_key(id: &AgentId) -> RecordKey {
    RecordKey::new(&[b"/agentsite/agent/".as_slice(), id.digest()].concat())
}

/// The DHT key under which the hosts of agents with `keyword` are found.
pub fn keyword_key(keyword: &str) -> RecordKey {
    let digest = Sha256::digest(normalize_keyword(keyword).as_bytes());
    RecordKey::new(&[b"/agentsite/keyword/".as_slice(), &digest[..]].concat())
}

/// The DHT key under which the nodes that share a model called `name` are
/// found.
pub fn model_key(name: &str) -> RecordKey {
    let digest = Sha256::digest(name.as_bytes());
    RecordKey::new(&[b"/agentsite/llm/model/".as_slice(), &digest[..]].concat())
}

/// The DHT key under which every node that shares a model is found.
pub fn model_sharers_key() -> RecordKey {
    RecordKey::new(b"/agentsite/llm/sharers")
}

pub(super) fn behaviour(
    peer_id: PeerId,
    table_refresh: Option<Duration>,
) -> kad::Behaviour<MemoryStore> {
    let mut config = kad::Config::new(PROTOCOL);
    config
        // Inbound records and provider announcements come to us as events
        // and are stored only once checked (see `check_record`).
        .set_record_filtering(kad::StoreInserts::FilterBoth)
        // Manifests of agents with many tools exceed the 16 KiB default.
        .set_max_packet_size(128 * 1024)
        .set_query_timeout(Duration::from_secs(30))
        .set_periodic_bootstrap_interval(table_refresh)
        // Peers enter the routing table through `learn` only (see there).
        .set_kbucket_inserts(kad::BucketInserts::Manual);
    let store = MemoryStore::with_config(
        peer_id,
        MemoryStoreConfig {
            max_records: 64 * 1024,
            max_value_bytes: 64 * 1024,
            max_providers_per_key: kad::K_VALUE.get(),
            // A large host provides its agents and every keyword of each.
            max_provided_keys: 256 * 1024,
        },
    );
    let mut kad = kad::Behaviour::with_config(peer_id, store, config);
    // Every node serves the DHT; without this a node stays a client until an
    // external address is confirmed, and its records go nowhere.
    kad.set_mode(Some(kad::Mode::Server));
    kad
}

/// Adds `peer` at `address` to the routing table if its bucket has room
/// (or already holds it). A full bucket is left as it is.
///
/// kad's own insertion, when a bucket is full, dials the bucket's least
/// recently seen peer to see whether it is still alive, and keeps it if it
/// is. Connections close when idle, so that peer is nearly always
/// disconnected: every new peer a node met cost a dial, a noise handshake
/// and an identify exchange, which made other nodes meet it in turn. In a
/// 200-node network joins slowed from 15 ms to 700 ms each once buckets
/// filled (about 90 nodes), and queries timed out. Keeping the peers a full
/// bucket has is what Kademlia prefers anyway (long-lived peers stay);
/// dead ones leave the table when a query fails to reach them.
pub(super) fn learn(kad: &mut kad::Behaviour<MemoryStore>, peer: PeerId, address: Multiaddr) {
    let room = kad.kbucket(peer).is_some_and(|bucket| {
        bucket.num_entries() < kad::K_VALUE.get()
            || bucket
                .iter()
                .any(|entry| *entry.node.key.preimage() == peer)
    });
    if room {
        kad.add_address(&peer, address);
    }
}

/// Why an inbound record was refused.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("not an agentsite record key")]
    UnknownKey,
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("the manifest is for {manifest}, stored under another agent's key")]
    WrongKey { manifest: AgentId },
}

/// Checks a record before it is stored: only signed, consistent manifests
/// under their own agent's key.
pub fn check_record(record: &kad::Record) -> Result<SignedManifest, RecordError> {
    if !record.key.as_ref().starts_with(b"/agentsite/agent/") {
        return Err(RecordError::UnknownKey);
    }
    let manifest = SignedManifest::decode(&record.value)?;
    if agent_key(&manifest.id()) != record.key {
        return Err(RecordError::WrongKey {
            manifest: manifest.id(),
        });
    }
    Ok(manifest)
}
