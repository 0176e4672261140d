//! The DHT lookups a caller waits for (an agent's providers, its manifest
//! record) and the routing-table bootstrap that joins the network.

use super::behaviour::Behaviour;
use super::strikes::Strikes;
use super::{NetError, ProviderLookup, dht};
use crate::AgentId;
use crate::store::manifest::SignedManifest;
use libp2p::kad::{self, QueryId, QueryResult, RecordKey};
use libp2p::swarm::dial_opts::DialOpts;
use libp2p::{PeerId, Swarm};
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use tokio::sync::oneshot;

type Reply<T> = oneshot::Sender<T>;

/// How many times a lookup that ran out of time is started again when it
/// did so while this node's own loop ran late: its timeout then measured
/// this node's lateness (a busy machine), not the peers it asked. Bounded,
/// so that a node that is always late still answers its caller.
const EXCUSED_LOOKUPS: u32 = 2;

/// When a lookup's current query was sent, and how many were sent again
/// for this node's lateness (see [`EXCUSED_LOOKUPS`]).
#[derive(Clone, Copy)]
struct Attempt {
    sent_at: Instant,
    excused: u32,
}

impl Attempt {
    fn first() -> Self {
        Attempt {
            sent_at: Instant::now(),
            excused: 0,
        }
    }

    /// The attempt to make after this one ran out of time, if the time it
    /// ran out of was this node's: `None` when it was the peers' (or the
    /// excuses are used up).
    fn excused_again(self, strikes: &Strikes, now: Instant) -> Option<Attempt> {
        (self.excused < EXCUSED_LOOKUPS && strikes.ran_late_since(self.sent_at, now)).then(|| {
            tracing::debug!("a lookup ran out of time while this node ran late; sending it again");
            Attempt {
                sent_at: now,
                excused: self.excused + 1,
            }
        })
    }
}

/// A DHT query someone waits for.
enum Pending {
    Providers {
        key: RecordKey,
        want: usize,
        found: HashSet<PeerId>,
        attempt: Attempt,
        reply: Reply<Result<ProviderLookup, NetError>>,
    },
    Manifest {
        id: AgentId,
        attempt: Attempt,
        reply: Reply<Result<SignedManifest, NetError>>,
    },
    /// The routing-table bootstrap of joining the network.
    Join,
}

/// A manifest lookup whose query made progress.
struct ManifestLookup {
    query: QueryId,
    agent: AgentId,
    attempt: Attempt,
    reply: Reply<Result<SignedManifest, NetError>>,
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
        let pending = Pending::Providers {
            want: want.max(1),
            found: HashSet::new(),
            attempt: Attempt::first(),
            key,
            reply,
        };
        self.send(swarm, pending);
    }

    /// Looks up the manifest record of agent `id`.
    pub fn manifest(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        id: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
    ) {
        let attempt = Attempt::first();
        self.send(swarm, Pending::Manifest { id, attempt, reply });
    }

    /// Starts the DHT query of a lookup.
    fn send(&mut self, swarm: &mut Swarm<Behaviour>, pending: Pending) {
        let kad = &mut swarm.behaviour_mut().kad;
        let query = match &pending {
            Pending::Providers { key, .. } => kad.get_providers(key.clone()),
            Pending::Manifest { id, .. } => kad.get_record(dht::agent_key(id)),
            Pending::Join => return,
        };
        self.queries.insert(query, pending);
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
    /// and why. A lookup that ran out of time while this node ran late
    /// (`strikes`) is started again (see [`EXCUSED_LOOKUPS`]).
    pub fn progressed(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        id: QueryId,
        result: QueryResult,
        stats: kad::QueryStats,
        last: bool,
        strikes: &Strikes,
    ) -> Option<(PeerId, String)> {
        let pending = self.queries.remove(&id)?;
        match (pending, result) {
            (
                Pending::Providers {
                    key,
                    want,
                    mut found,
                    attempt,
                    reply,
                },
                QueryResult::GetProviders(outcome),
            ) => {
                let timed_out = matches!(outcome, Err(kad::GetProvidersError::Timeout { .. }));
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
                let enough = found.len() >= want;
                if last
                    && !enough
                    && timed_out
                    && let Some(attempt) = attempt.excused_again(strikes, Instant::now())
                {
                    let again = Pending::Providers {
                        key,
                        want,
                        found,
                        attempt,
                        reply,
                    };
                    self.send(swarm, again);
                    return None;
                }
                // Responses come one by one, empty ones included: answer
                // once enough hosts are known or the lookup is over.
                if enough || last {
                    if !last && let Some(mut query) = swarm.behaviour_mut().kad.query_mut(&id) {
                        query.finish();
                    }
                    let _ = reply.send(Ok(ProviderLookup {
                        providers: found.into_iter().collect(),
                        requests: stats.num_requests(),
                    }));
                } else {
                    let pending = Pending::Providers {
                        key,
                        want,
                        found,
                        attempt,
                        reply,
                    };
                    self.queries.insert(id, pending);
                }
                None
            }
            (
                Pending::Manifest {
                    id: agent,
                    attempt,
                    reply,
                },
                QueryResult::GetRecord(outcome),
            ) => {
                let lookup = ManifestLookup {
                    query: id,
                    agent,
                    attempt,
                    reply,
                };
                self.manifest_found(swarm, lookup, outcome, last, strikes)
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
        lookup: ManifestLookup,
        outcome: kad::GetRecordResult,
        last: bool,
        strikes: &Strikes,
    ) -> Option<(PeerId, String)> {
        let ManifestLookup {
            query,
            agent,
            attempt,
            reply,
        } = lookup;
        let mut liar = None;
        let mut timed_out = false;
        match outcome {
            Ok(kad::GetRecordOk::FoundRecord(found)) => match dht::check_record(&found.record) {
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
            },
            Err(kad::GetRecordError::Timeout { .. }) => timed_out = true,
            _ => {}
        }
        if !last {
            let pending = Pending::Manifest {
                id: agent,
                attempt,
                reply,
            };
            self.queries.insert(query, pending);
        } else if !timed_out {
            let _ = reply.send(Err(NetError::NotFound(agent)));
        } else if let Some(attempt) = attempt.excused_again(strikes, Instant::now()) {
            let again = Pending::Manifest {
                id: agent,
                attempt,
                reply,
            };
            self.send(swarm, again);
        } else {
            let _ = reply.send(Err(NetError::LookupTimedOut(agent)));
        }
        liar
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_lookup_out_of_this_nodes_time_is_sent_again_a_bounded_number_of_times() {
        let second = Duration::from_secs(1);
        let start = Instant::now();
        let mut strikes = Strikes::default();
        strikes.checked(start, start, start + second);
        let at = |s: u64| start + second * s as u32;
        let first = Attempt {
            sent_at: start,
            excused: 0,
        };
        // This node's loop kept time: the peers were slow, no excuse.
        strikes.checked(at(29), at(29), at(30));
        assert!(first.excused_again(&strikes, at(30)).is_none());
        // It ran 3 s late while the query was out: sent again, and the
        // next attempt is excused only by a late run of its own.
        let mut attempt = first;
        for round in 0..EXCUSED_LOOKUPS {
            let sent = attempt.sent_at;
            strikes.checked(sent + second * 10, sent + second * 13, sent + second * 14);
            strikes.checked(sent + second * 29, sent + second * 29, sent + second * 30);
            let now = sent + second * 30;
            attempt = attempt
                .excused_again(&strikes, now)
                .unwrap_or_else(|| panic!("excused in round {round}"));
            assert_eq!(attempt.sent_at, now);
            strikes.checked(now + second * 29, now + second * 29, now + second * 30);
            assert!(attempt.excused_again(&strikes, now + second * 30).is_none());
        }
        // Late again, but the excuses are used up: the caller is answered.
        let sent = attempt.sent_at;
        strikes.checked(sent + second * 10, sent + second * 13, sent + second * 14);
        assert!(
            attempt
                .excused_again(&strikes, sent + second * 30)
                .is_none()
        );
    }
}
