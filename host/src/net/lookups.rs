//! The DHT lookups a caller waits for (an agent's providers, its manifest
//! record) and the routing-table bootstrap that joins the network.

use super::behaviour::Behaviour;
use super::{NetError, ProviderLookup, dht};
use crate::AgentId;
use crate::store::manifest::SignedManifest;
use libp2p::kad::{self, QueryId, QueryResult, RecordKey};
use libp2p::swarm::dial_opts::DialOpts;
use libp2p::{PeerId, Swarm};
use std::collections::{HashMap, HashSet};
use tokio::sync::oneshot;

type Reply<T> = oneshot::Sender<T>;

/// A DHT query someone waits for.
enum Pending {
    Providers {
        want: usize,
        found: HashSet<PeerId>,
        reply: Reply<Result<ProviderLookup, NetError>>,
    },
    Manifest {
        id: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
    },
    /// The routing-table bootstrap of joining the network.
    Join,
}

pub(super) struct Lookups {
    queries: HashMap<QueryId, Pending>,
    /// Whether the joining bootstrap was started.
    bootstrapped: bool,
    /// Whether joining is over: the first routing-table bootstrap ended
    /// (or there was nobody to join through).
    joined: bool,
    join_waiters: Vec<Reply<()>>,
}

impl Lookups {
    /// `alone`: the node has nobody to join through.
    pub fn new(alone: bool) -> Self {
        Lookups {
            queries: HashMap::new(),
            bootstrapped: false,
            joined: alone,
            join_waiters: Vec::new(),
        }
    }

    /// Looks `key` up until `want` providers are known or the lookup ends.
    pub fn providers(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        key: RecordKey,
        want: usize,
        reply: Reply<Result<ProviderLookup, NetError>>,
    ) {
        let id = swarm.behaviour_mut().kad.get_providers(key);
        let found = HashSet::new();
        let want = want.max(1);
        self.queries
            .insert(id, Pending::Providers { want, found, reply });
    }

    /// Looks up the manifest record of agent `id`.
    pub fn manifest(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        id: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
    ) {
        let query = swarm.behaviour_mut().kad.get_record(dht::agent_key(&id));
        self.queries.insert(query, Pending::Manifest { id, reply });
    }

    /// Answers `reply` once joining is over.
    pub fn when_joined(&mut self, reply: Reply<()>) {
        if self.joined {
            let _ = reply.send(());
        } else {
            self.join_waiters.push(reply);
        }
    }

    /// A peer that serves the DHT identified itself: the first one starts
    /// the bootstrap that joins the network through it.
    pub fn met_dht_peer(&mut self, swarm: &mut Swarm<Behaviour>) {
        if self.bootstrapped {
            return;
        }
        self.bootstrapped = true;
        match swarm.behaviour_mut().kad.bootstrap() {
            Ok(query) => {
                self.queries.insert(query, Pending::Join);
            }
            Err(_) => self.finish_join(),
        }
    }

    /// Joining is over: tells whoever waits for it.
    fn finish_join(&mut self) {
        self.joined = true;
        for waiter in self.join_waiters.drain(..) {
            let _ = waiter.send(());
        }
    }

    /// A DHT query made progress: if it is one of these lookups, takes its
    /// result; returns a peer that answered with a bad record, to block,
    /// and why.
    pub fn progressed(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        id: QueryId,
        result: QueryResult,
        stats: kad::QueryStats,
        last: bool,
    ) -> Option<(PeerId, String)> {
        let pending = self.queries.remove(&id)?;
        match (pending, result) {
            (
                Pending::Providers {
                    want,
                    mut found,
                    reply,
                },
                QueryResult::GetProviders(outcome),
            ) => {
                if let Ok(kad::GetProvidersOk::FoundProviders { providers, .. }) = outcome {
                    // Dial new providers now, while the query still knows
                    // their addresses.
                    for provider in &providers {
                        if !swarm.is_connected(provider) && provider != swarm.local_peer_id() {
                            let _ = swarm.dial(DialOpts::peer_id(*provider).build());
                        }
                    }
                    found.extend(providers);
                }
                // Responses come one by one, empty ones included: answer
                // once enough hosts are known or the lookup is over.
                if found.len() >= want || last {
                    if !last && let Some(mut query) = swarm.behaviour_mut().kad.query_mut(&id) {
                        query.finish();
                    }
                    let _ = reply.send(Ok(ProviderLookup {
                        providers: found.into_iter().collect(),
                        requests: stats.num_requests(),
                    }));
                } else {
                    self.queries
                        .insert(id, Pending::Providers { want, found, reply });
                }
                None
            }
            (Pending::Manifest { id: agent, reply }, QueryResult::GetRecord(outcome)) => {
                self.manifest_found(swarm, id, agent, reply, outcome, last)
            }
            (Pending::Join, QueryResult::Bootstrap(_)) => {
                if last {
                    self.finish_join();
                } else {
                    self.queries.insert(id, Pending::Join);
                }
                None
            }
            (pending, _) => {
                if !last {
                    self.queries.insert(id, pending);
                }
                None
            }
        }
    }

    /// A manifest lookup heard from a peer: the first record that is the
    /// agent's manifest answers it; a peer that sent anything else is
    /// returned, to block.
    fn manifest_found(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        query: QueryId,
        agent: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
        outcome: kad::GetRecordResult,
        last: bool,
    ) -> Option<(PeerId, String)> {
        let mut liar = None;
        if let Ok(kad::GetRecordOk::FoundRecord(found)) = outcome {
            match dht::check_record(&found.record) {
                Ok(manifest) if manifest.id() == agent => {
                    if let Some(mut running) = swarm.behaviour_mut().kad.query_mut(&query) {
                        running.finish();
                    }
                    let _ = reply.send(Ok(manifest));
                    return None;
                }
                outcome => {
                    liar = found.peer.map(|peer| {
                        let reason = match outcome {
                            Err(e) => e.to_string(),
                            Ok(_) => "returned another agent's manifest".into(),
                        };
                        (peer, format!("returned a bad record: {reason}"))
                    });
                }
            }
        }
        if last {
            let _ = reply.send(Err(NetError::NotFound(agent)));
        } else {
            self.queries
                .insert(query, Pending::Manifest { id: agent, reply });
        }
        liar
    }
}
