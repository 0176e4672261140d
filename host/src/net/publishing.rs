//! Publishing agents: an announcement by gossip, the manifest's record in
//! the DHT and a provider record for each of its keys, each DHT query sent
//! again when it fails, and one report when all are over.

use super::behaviour::Behaviour;
use super::strikes::{Excuses, Strikes};
use super::{Library, PublishReport, dht, gossip};
use crate::store::manifest::SignedManifest;
use libp2p::identity::Keypair;
use libp2p::kad::{self, QueryId, QueryResult, RecordKey};
use libp2p::{Swarm, gossipsub};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How many times a publication query is sent before the publication says
/// it could not be done: a query times out when the peers it picked were
/// busy or gone, and a new one picks again.
const PUBLISH_ATTEMPTS: u32 = 3;

/// How many more times a publication query is sent when the ones that ran
/// out of time did so while this node's own loop ran late: their timeout
/// measured this node's lateness (a busy machine), not the network, and
/// does not count against [`PUBLISH_ATTEMPTS`]. Bounded, so that a node
/// that is always late still answers its publisher.
const EXCUSED_ATTEMPTS: u32 = 6;

/// How long a node that leaves keeps its connections after it last
/// announced itself a provider. Kademlia reports an `ADD_PROVIDER` done
/// as soon as it is queued (the messages are one-way, and libp2p-kad does
/// not wait for them to be sent); over QUIC, closing the connection then
/// throws away what the other side has not read yet, so a publisher that
/// left right after `publish` returned lost its provider records on a
/// busy machine. Leaving waits until this long after the announcement,
/// driving the connections meanwhile, and not at all when none was made
/// lately.
const LINGER: Duration = Duration::from_secs(2);

/// One query of a publication, as it can be started again, and how many
/// times it was.
#[derive(Clone)]
struct PublishStep {
    query: PublishQuery,
    attempt: u32,
    /// Attempts sent again without counting (see [`EXCUSED_ATTEMPTS`]).
    excuses: Excuses,
}

#[derive(Clone)]
enum PublishQuery {
    Record(kad::Record),
    Provide(RecordKey),
}

impl PublishStep {
    fn first(query: PublishQuery) -> Self {
        PublishStep {
            query,
            attempt: 1,
            excuses: Excuses::new(Instant::now()),
        }
    }
}

/// A publication waiting for its record and provider queries.
struct Publication {
    remaining: usize,
    report: PublishReport,
    reply: oneshot::Sender<PublishReport>,
}

pub(super) struct Publishing {
    /// The node's identity, which signs its announcements.
    keypair: Keypair,
    library: Arc<dyn Library>,
    publications: HashMap<u64, Publication>,
    next_publication: u64,
    /// The DHT queries of the publications, by the publication they serve.
    queries: HashMap<QueryId, (u64, PublishStep)>,
    /// When the last provider announcement was handed to Kademlia, which
    /// reports it done before its messages are sent (see [`LINGER`]).
    provided_at: Option<tokio::time::Instant>,
}

impl Publishing {
    pub fn new(keypair: Keypair, library: Arc<dyn Library>) -> Self {
        Publishing {
            keypair,
            library,
            publications: HashMap::new(),
            next_publication: 0,
            queries: HashMap::new(),
            provided_at: None,
        }
    }

    /// Until when a node that leaves should keep driving its connections
    /// (see [`LINGER`]); `None` when it announced nothing lately.
    pub fn linger_until(&self) -> Option<tokio::time::Instant> {
        self.provided_at.map(|at| at + LINGER)
    }

    /// Publishes `manifest`: announces it, stores its record and provides
    /// its keys, answering `reply` once every query is over.
    pub fn publish(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        manifest: SignedManifest,
        reply: oneshot::Sender<PublishReport>,
    ) {
        tracing::debug!(
            "publishing; the addresses peers are given: {}",
            swarm
                .external_addresses()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
        // The announcement goes first: it reaches every node at once, while
        // the DHT records take a few round trips.
        let gossip_peers = self.announce(swarm, &manifest);
        let record = kad::Record::new(dht::agent_key(&manifest.id()), manifest.encoded().to_vec());
        let keys = std::iter::once(dht::agent_key(&manifest.id()))
            .chain(manifest.keywords().iter().map(|k| dht::keyword_key(k)))
            .collect();
        self.start(swarm, Some(record), keys, gossip_peers, reply);
    }

    /// Provides `keys`, as a publication without a record or announcement.
    pub fn provide(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        keys: Vec<RecordKey>,
        reply: oneshot::Sender<PublishReport>,
    ) {
        self.start(swarm, None, keys, 0, reply);
    }

    /// Tells the network of `manifest` as hosted here, by gossip, and lists it
    /// in this node's own index. Returns how many mesh peers it went to.
    pub fn announce(&self, swarm: &mut Swarm<Behaviour>, manifest: &SignedManifest) -> usize {
        let gossip = &mut swarm.behaviour_mut().gossip.0;
        let mut mesh_peers = gossip.mesh_peers(&gossip::topic().hash()).count();
        let announcement = gossip::Announcement::encode(manifest, &self.keypair);
        match gossip.publish(gossip::topic(), announcement) {
            Ok(_) => {}
            Err(gossipsub::PublishError::Duplicate) => {}
            Err(gossipsub::PublishError::NoPeersSubscribedToTopic) => mesh_peers = 0,
            Err(e) => tracing::warn!("cannot announce {}: {e}", manifest.id()),
        }
        self.library
            .announced(manifest.clone(), *swarm.local_peer_id());
        mesh_peers
    }

    /// Stores `record` and provides `keys`, answering `reply` once every
    /// query is over.
    fn start(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        record: Option<kad::Record>,
        keys: Vec<RecordKey>,
        gossip_peers: usize,
        reply: oneshot::Sender<PublishReport>,
    ) {
        let number = self.next_publication;
        self.next_publication += 1;
        let mut publication = Publication {
            remaining: 0,
            report: PublishReport {
                gossip_peers,
                ..PublishReport::default()
            },
            reply,
        };
        if let Some(record) = record
            && self.send(
                swarm,
                number,
                PublishStep::first(PublishQuery::Record(record)),
            )
        {
            publication.remaining += 1;
        }
        for key in keys {
            if self.send(
                swarm,
                number,
                PublishStep::first(PublishQuery::Provide(key)),
            ) {
                publication.remaining += 1;
                publication.report.provider_keys += 1;
            }
        }
        if publication.remaining == 0 {
            let _ = publication.reply.send(publication.report);
        } else {
            self.publications.insert(number, publication);
        }
    }

    /// Starts the query of one publication step; false if it could not even
    /// be started (the local store refused it).
    fn send(&mut self, swarm: &mut Swarm<Behaviour>, number: u64, mut step: PublishStep) -> bool {
        step.excuses.sent(Instant::now());
        let kad = &mut swarm.behaviour_mut().kad;
        let started = match &step.query {
            PublishQuery::Record(record) => kad
                .put_record(record.clone(), kad::Quorum::One)
                .map_err(|e| format!("cannot store the manifest record locally: {e}")),
            PublishQuery::Provide(key) => kad
                .start_providing(key.clone())
                .map_err(|e| format!("cannot provide a key: {e}")),
        };
        match started {
            Ok(query) => {
                self.queries.insert(query, (number, step));
                true
            }
            Err(e) => {
                tracing::warn!("{e}");
                false
            }
        }
    }

    /// A publication query failed: sends it again while attempts are left;
    /// false when none are. An attempt that failed while this node ran
    /// late is not counted (up to [`EXCUSED_ATTEMPTS`]).
    fn retry(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        number: u64,
        mut step: PublishStep,
        strikes: &Strikes,
    ) -> bool {
        if step
            .excuses
            .excuse(strikes, EXCUSED_ATTEMPTS, Instant::now())
        {
            tracing::debug!(
                "a publication query failed while this node ran late; sending it again"
            );
        } else if step.attempt < PUBLISH_ATTEMPTS {
            step.attempt += 1;
            tracing::debug!("a publication query failed; sending it again");
        } else {
            tracing::info!(
                "a publication query failed {} times ({} more while this node ran late)",
                step.attempt,
                step.excuses.used()
            );
            return false;
        }
        self.publications.contains_key(&number) && self.send(swarm, number, step)
    }

    /// A DHT query made progress: if it is one of a publication's, takes
    /// its result (and `None` is returned); else hands the result back.
    pub fn progressed(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        id: QueryId,
        result: QueryResult,
        last: bool,
        strikes: &Strikes,
    ) -> Option<QueryResult> {
        let Some((number, step)) = self.queries.remove(&id) else {
            return Some(result);
        };
        match result {
            QueryResult::PutRecord(outcome) => {
                let replicas = match outcome {
                    Ok(_) => 1,
                    Err(kad::PutRecordError::QuorumFailed { success, .. })
                    | Err(kad::PutRecordError::Timeout { success, .. }) => success.len(),
                };
                if replicas == 0 && self.retry(swarm, number, step, strikes) {
                    return None;
                }
                self.step_done(number, |r| r.record_replicas = replicas);
            }
            QueryResult::StartProviding(outcome) => {
                self.provided_at = Some(tokio::time::Instant::now());
                let confirmed = outcome.is_ok();
                if !confirmed && self.retry(swarm, number, step, strikes) {
                    return None;
                }
                self.step_done(number, |r| {
                    if !confirmed {
                        r.provider_keys_unconfirmed += 1
                    }
                });
            }
            _ => {
                if !last {
                    self.queries.insert(id, (number, step));
                }
            }
        }
        None
    }

    fn step_done(&mut self, number: u64, step: impl FnOnce(&mut PublishReport)) {
        let Some(publication) = self.publications.get_mut(&number) else {
            return;
        };
        step(&mut publication.report);
        publication.remaining -= 1;
        if publication.remaining == 0
            && let Some(publication) = self.publications.remove(&number)
        {
            let _ = publication.reply.send(publication.report);
        }
    }
}
