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
use std::net::IpAddr;
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

/// How long records live and how often they are sent again, by the node
/// that published them and by the nodes that hold them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// A provider record or manifest record is dropped this long after it
    /// was last sent: the records of a node that left go with it.
    pub record: Duration,
    /// A node sends its own provider records and manifests again this often,
    /// to whichever nodes are closest to each key by then (nodes leave and
    /// join; the record must stay on the closest live ones).
    pub republish: Duration,
    /// A node holding another's manifest sends it on to the key's closest
    /// nodes this often, so that a record outlives the departure of the
    /// nodes that held it between two republications.
    pub replicate: Duration,
}

impl Default for Lifetimes {
    /// A node gone for six hours is gone: libp2p's 48 h would send seekers
    /// to it for two days. Republishing every two hours keeps a record alive
    /// through two missed rounds; a node providing 100 keys pays 100 lookups
    /// per round, about one a minute.
    fn default() -> Self {
        Lifetimes {
            record: Duration::from_secs(6 * 3600),
            republish: Duration::from_secs(2 * 3600),
            replicate: Duration::from_secs(3600),
        }
    }
}

/// How long a peer has to answer one DHT request on an open connection. An
/// honest node answers in a round trip or two (well under a second across
/// the world, a little more through a relay); libp2p's 10 s let each node
/// that never answers hold a lookup's path for 10 s, and a lookup meeting
/// three of them ran into its 30 s limit, which for a publication means no
/// provider record stored at all.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) fn behaviour(
    peer_id: PeerId,
    table_refresh: Option<Duration>,
    lifetimes: Lifetimes,
) -> kad::Behaviour<MemoryStore> {
    let mut config = kad::Config::new(PROTOCOL);
    config
        // Each lookup follows as many paths as it asks peers at once, no
        // peer on two of them: a node that drops queries or answers with
        // its accomplices leads one path astray, not the lookup.
        .disjoint_query_paths(true)
        .set_record_ttl(Some(lifetimes.record))
        .set_provider_record_ttl(Some(lifetimes.record))
        .set_publication_interval(Some(lifetimes.republish))
        .set_provider_publication_interval(Some(lifetimes.republish))
        .set_replication_interval(Some(lifetimes.replicate))
        // Inbound records and provider announcements come to us as events
        // and are stored only once checked (see `check_record`).
        .set_record_filtering(kad::StoreInserts::FilterBoth)
        // Manifests of agents with many tools exceed the 16 KiB default.
        .set_max_packet_size(128 * 1024)
        .set_query_timeout(Duration::from_secs(30))
        .set_substreams_timeout(REQUEST_TIMEOUT)
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

/// How many peers `kad`'s routing table holds.
pub(super) fn routing_table_size(kad: &mut kad::Behaviour<MemoryStore>) -> usize {
    kad.kbuckets().map(|bucket| bucket.num_entries()).sum()
}

/// Every peer in `kad`'s routing table.
pub(super) fn routing_table(kad: &mut kad::Behaviour<MemoryStore>) -> Vec<PeerId> {
    kad.kbuckets()
        .flat_map(|bucket| {
            bucket
                .iter()
                .map(|entry| *entry.node.key.preimage())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// At most this many peers at one public IP address share a bucket.
pub const PEERS_PER_IP_IN_BUCKET: usize = 2;

/// At most this many peers at one public IP address are in the routing
/// table, whatever their buckets: as many as this node keeps connections
/// open to at one address ([`super::one_host::PEERS_PER_HOST`]). The
/// bucket limit alone protects a key only while this node is far from it:
/// identities ground close to a key then all fall in one bucket. A node
/// whose own id is close to the key (one in a thousand, for forty
/// identities that are the closest of twenty thousand) sees them spread
/// over a bucket each by how many leading bits they share with it, two a
/// bucket, and took 13 of the key's 20 closest peers from one host.
pub const PEERS_PER_IP_IN_TABLE: usize = super::one_host::PEERS_PER_HOST;

/// Addresses kept and dialed per peer, at most. A node has a few: TCP and
/// QUIC over IPv4 and IPv6, one through each of its relays, a LAN address
/// or two. A peer naming thousands (in identify, or for others in its
/// Kademlia answers) would make each dial to it a scan of whatever hosts it
/// names, and its routing-table entry grow with every identify it sends.
pub const ADDRESSES_PER_PEER: usize = 16;

/// Adds `peer` at `address` to the routing table if its bucket has room
/// (or already holds it). A full bucket is left as it is, and so is a bucket
/// holding [`PEERS_PER_IP_IN_BUCKET`] peers at `address`'s public IP, or a
/// table holding [`PEERS_PER_IP_IN_TABLE`]: one host making identities by
/// the thousand fills no bucket, and so cannot decide whom this node sends
/// a lookup to. (Private and loopback addresses are exempt: nodes on one
/// machine or LAN are one operator's.) A peer already holding
/// [`ADDRESSES_PER_PEER`] addresses gets no more.
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
    let ip = super::reach::public_ip(&address);
    let Some(bucket) = kad.kbucket(peer) else {
        return; // this node itself
    };
    let held = bucket
        .iter()
        .find(|entry| *entry.node.key.preimage() == peer)
        .map(|entry| entry.node.value.len());
    if let Some(addresses) = held {
        if addresses < ADDRESSES_PER_PEER {
            kad.add_address(&peer, address);
        }
        return;
    }
    if bucket.num_entries() >= kad::K_VALUE.get() {
        return;
    }
    if let Some(ip) = ip {
        if peers_at(&bucket, ip) >= PEERS_PER_IP_IN_BUCKET {
            return;
        }
        let in_table: usize = kad.kbuckets().map(|bucket| peers_at(&bucket, ip)).sum();
        if in_table >= PEERS_PER_IP_IN_TABLE {
            return;
        }
    }
    kad.add_address(&peer, address);
}

/// How many peers in `bucket` have an address at public IP `ip`.
fn peers_at(
    bucket: &kad::KBucketRef<'_, kad::KBucketKey<PeerId>, kad::Addresses>,
    ip: IpAddr,
) -> usize {
    bucket
        .iter()
        .filter(|entry| {
            entry
                .node
                .value
                .iter()
                .any(|address| super::reach::public_ip(address) == Some(ip))
        })
        .count()
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

/// Stores `record`, a checked manifest another node sent, unless this
/// node holds a copy of it that lives longer; true if stored.
///
/// kad gives a copy the earlier of the expiry it came with and its own
/// lifetime for it (shorter on nodes farther from the key), and a node
/// replicating what it holds sends its own expiry along. So one far holder,
/// whose copy lives a quarter of the lifetime, cut every holder's copy to
/// that when it replicated between two republications, and the manifest
/// was on no node until the publisher sent it again (the churn test saw
/// 14 of 1000 lookups by id miss on a busy machine while every lookup by
/// keyword, whose provider records are not replicated, succeeded). A
/// replica only ever says less than the copy held; the publisher's
/// republication (with a fresh lifetime) is what extends it, and a record
/// whose publisher left still expires one lifetime after it last came.
pub(super) fn keep_longest(store: &mut MemoryStore, record: kad::Record) -> bool {
    use kad::store::RecordStore as _;
    let lives_longer = |held: &kad::Record| match (held.expires, record.expires) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(held), Some(new)) => held >= new,
    };
    if store
        .get(&record.key)
        .is_some_and(|held| lives_longer(&held))
    {
        return false;
    }
    match store.put(record) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("record not stored: {e}");
            false
        }
    }
}

/// What a peer asked to store here: a record, kept only when it is a
/// valid manifest (see [`keep_longest`]), or a provider record, kept only
/// for this network's own kinds of key. A peer that sent an invalid record
/// is returned, with why, to block.
pub(super) fn on_inbound(
    store: &mut MemoryStore,
    request: kad::InboundRequest,
) -> Result<(), (PeerId, String)> {
    match request {
        kad::InboundRequest::PutRecord {
            source,
            record: Some(record),
            ..
        } => match check_record(&record) {
            Ok(_) => {
                keep_longest(store, record);
            }
            Err(e) => return Err((source, format!("sent an invalid DHT record: {e}"))),
        },
        kad::InboundRequest::AddProvider {
            record: Some(record),
        } => {
            // kad has checked that the provider is the sender.
            let key = record.key.as_ref();
            if key.starts_with(b"/agentsite/agent/")
                || key.starts_with(b"/agentsite/keyword/")
                || key.starts_with(b"/agentsite/llm/")
            {
                tracing::debug!(
                    provider = %record.provider,
                    "provider record at {}",
                    record.addresses.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
                );
                if let Err(e) = kad::store::RecordStore::add_provider(store, record) {
                    tracing::debug!("provider record not stored: {e}");
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use libp2p::kad::KBucketKey;

    /// How many of `key`'s 20 closest peers in `local`'s routing table are
    /// `sybils`, all at one public address, once `local` has learned them
    /// (closest to the key first) and a hundred honest nodes at addresses
    /// of their own.
    fn sybils_among_closest(local: PeerId, key: &RecordKey, sybils: &[PeerId]) -> usize {
        let mut kad = behaviour(local, None, Lifetimes::default());
        for (n, sybil) in sybils.iter().enumerate() {
            let port = 4001 + n as u16;
            let address = format!("/ip4/198.51.100.66/tcp/{port}");
            learn(&mut kad, *sybil, address.parse().unwrap());
        }
        for n in 0..100u32 {
            let address = format!("/ip4/203.0.{}.{}/tcp/4001", n / 200, 1 + n % 200);
            learn(&mut kad, PeerId::random(), address.parse().unwrap());
        }
        let closest: Vec<PeerId> = kad
            .get_closest_local_peers(&KBucketKey::new(key.clone()))
            .map(|key| *key.preimage())
            .take(kad::K_VALUE.get())
            .collect();
        assert_eq!(closest.len(), kad::K_VALUE.get());
        closest.iter().filter(|peer| sybils.contains(peer)).count()
    }

    #[test]
    fn forty_identities_at_one_address_do_not_take_a_keys_closest_peers() {
        let key = agent_key(&AgentId::of(b"a sought-after agent"));
        let target = KBucketKey::new(key.clone());
        // One host tries identities until it has 40 closer to the key than
        // nearly every honest node: the closest of 20,000 tried.
        let mut tried: Vec<PeerId> = (0..20_001).map(|_| PeerId::random()).collect();
        tried.sort_by_key(|peer| target.distance(&KBucketKey::from(*peer)));

        // A node far from the key (nearly every node) has them all in one
        // bucket, which takes two.
        let far = std::iter::repeat_with(PeerId::random)
            .find(|peer| target.distance(&KBucketKey::from(*peer)).ilog2() == Some(255))
            .unwrap();
        let taken = sybils_among_closest(far, &key, &tried[1..41]);
        assert!(
            taken <= PEERS_PER_IP_IN_BUCKET,
            "{taken} of a far node's 20 closest peers to the key are one host's"
        );

        // A node closer to the key than any of them has them spread over a
        // bucket each by how many leading bits they share with it; the
        // table as a whole takes four.
        let near = tried[0];
        let taken = sybils_among_closest(near, &key, &tried[1..41]);
        assert!(
            taken <= PEERS_PER_IP_IN_TABLE,
            "{taken} of a near node's 20 closest peers to the key are one host's"
        );
    }

    #[test]
    fn peers_on_one_machine_or_lan_are_not_limited() {
        let mut kad = behaviour(PeerId::random(), None, Lifetimes::default());
        let peers: Vec<PeerId> = (0..10).map(|_| PeerId::random()).collect();
        for (n, peer) in peers.iter().enumerate() {
            let address = if n % 2 == 0 {
                format!("/ip4/127.0.0.1/tcp/{}", 5000 + n)
            } else {
                format!("/ip4/192.168.1.7/tcp/{}", 5000 + n)
            };
            learn(&mut kad, *peer, address.parse().unwrap());
        }
        assert_eq!(routing_table_size(&mut kad), peers.len());
    }

    #[test]
    fn a_replica_never_shortens_the_life_of_the_copy_held() {
        use kad::store::RecordStore as _;
        use std::time::Instant;
        let mut store = MemoryStore::new(PeerId::random());
        let key = RecordKey::new(b"/agentsite/agent/anything");
        let copy = |lives: u64| kad::Record {
            key: key.clone(),
            value: b"manifest".to_vec(),
            publisher: Some(PeerId::random()),
            expires: Some(Instant::now() + Duration::from_secs(lives)),
        };
        let expiry = |store: &MemoryStore| store.get(&key).unwrap().expires.unwrap();
        // The publisher's copy: a full lifetime.
        assert!(keep_longest(&mut store, copy(40)));
        let full = expiry(&store);
        // A far holder's replica, living a quarter of that: the copy held stays.
        assert!(!keep_longest(&mut store, copy(10)));
        assert_eq!(expiry(&store), full);
        // The publisher's next republication extends it.
        assert!(keep_longest(&mut store, copy(60)));
        assert!(expiry(&store) > full);
    }
}
