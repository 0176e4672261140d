//! Kademlia as agentsite uses it: which keys exist, how records are checked
//! before they are stored, and the settings that make lookups succeed.
//!
//! Two kinds of key live in the DHT: an agent's id, holding its signed
//! manifest as a record and its hosts as provider records; and one key per
//! keyword, holding as provider records the nodes that host an agent with
//! that keyword. A search for a word is therefore one provider lookup,
//! O(log n) hops in a network of n nodes.

use crate::AgentId;
use crate::store::manifest::{ManifestError, SignedManifest, normalize_keyword};
use libp2p::kad::{self, RecordKey, store::MemoryStore, store::MemoryStoreConfig};
use libp2p::{PeerId, StreamProtocol};
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
        .set_periodic_bootstrap_interval(table_refresh);
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
