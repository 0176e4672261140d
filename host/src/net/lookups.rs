//! The DHT lookups a caller waits for (an agent's providers, its manifest
//! record) and the routing-table bootstrap that joins the network.

use super::behaviour::Behaviour;
use super::strikes::{Excuses, Strikes};
use super::{NetError, ProviderLookup, dht};
use crate::AgentId;
use crate::store::manifest::SignedManifest;
use libp2p::kad::{self, QueryId, QueryResult, RecordKey};
use libp2p::swarm::dial_opts::DialOpts;
use libp2p::{PeerId, Swarm};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

type Reply<T> = oneshot::Sender<T>;

/// How many times a lookup that ended without what it sought is started
/// again when it ran out of time, or had requests fail, while this node's
/// own loop ran late (see [`Excuses`]).
const EXCUSED_LOOKUPS: u32 = 2;

/// Whether a lookup that ended without what it sought is sent again: its
/// caller still waits, and it fell short (ran out of time, or requests
/// of it failed) while this node ran late, with an excuse left.
fn sent_again_for_lateness<T>(
    excuses: &mut Excuses,
    reply: &Reply<T>,
    fell_short: bool,
    strikes: &Strikes,
    now: Instant,
) -> bool {
    let again = !reply.is_closed() && fell_short && excuses.excuse(strikes, EXCUSED_LOOKUPS, now);
    if again {
        tracing::debug!("a lookup fell short while this node ran late; sending it again");
    }
    again
}

/// A lookup of an agent's hosts.
struct ProvidersLookup {
    key: RecordKey,
    want: usize,
    found: HashSet<PeerId>,
    /// Requests made by the attempts before the current one.
    requests: u32,
    excuses: Excuses,
    reply: Reply<Result<ProviderLookup, NetError>>,
}

/// A lookup of an agent's manifest record.
struct ManifestLookup {
    agent: AgentId,
    excuses: Excuses,
    reply: Reply<Result<SignedManifest, NetError>>,
}

/// Where a lookup's query stands, as kad reported it with a result.
struct Progress {
    query: QueryId,
    stats: kad::QueryStats,
    /// Whether the query is over.
    last: bool,
}

/// A DHT query someone waits for.
enum Pending {
    Providers(ProvidersLookup),
    Manifest(ManifestLookup),
    /// The routing-table bootstrap of joining the network.
    Join(Joining),
}

/// How the joining bootstrap goes, step by step (a lookup of this node's
/// own id, then one for each farther bucket of its routing table): what the
/// line saying the node joined reports, and what tells a join held up by
/// one slow lookup (requests timing out, an answer waited for) from one
/// with much to do (many requests).
struct Joining {
    started: Instant,
    steps: u32,
    requests: u32,
    failures: u32,
    slowest_step: Duration,
}

impl Joining {
    fn new(now: Instant) -> Self {
        Joining {
            started: now,
            steps: 0,
            requests: 0,
            failures: 0,
            slowest_step: Duration::ZERO,
        }
    }

    /// One step of the bootstrap ended, with its own query's `stats`.
    fn step(&mut self, stats: &kad::QueryStats) {
        self.steps += 1;
        self.requests += stats.num_requests();
        self.failures += stats.num_failures();
        self.slowest_step = self.slowest_step.max(stats.duration().unwrap_or_default());
    }

    fn report(&self, routing_table: usize) {
        tracing::info!(
            "joined the network in {:.1?}: {routing_table} peers in the routing table; \
             {} lookups, {} requests ({} failed or timed out), the slowest lookup {:.1?}",
            self.started.elapsed(),
            self.steps,
            self.requests,
            self.failures,
            self.slowest_step,
        );
    }
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
        let lookup = ProvidersLookup {
            key,
            want: want.max(1),
            found: HashSet::new(),
            requests: 0,
            excuses: Excuses::new(Instant::now()),
            reply,
        };
        self.send_providers(swarm, lookup);
    }

    /// Looks up the manifest record of agent `id`.
    pub fn manifest(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        agent: AgentId,
        reply: Reply<Result<SignedManifest, NetError>>,
    ) {
        let lookup = ManifestLookup {
            agent,
            excuses: Excuses::new(Instant::now()),
            reply,
        };
        self.send_manifest(swarm, lookup);
    }

    fn send_providers(&mut self, swarm: &mut Swarm<Behaviour>, mut lookup: ProvidersLookup) {
        lookup.excuses.sent(Instant::now());
        let query = swarm.behaviour_mut().kad.get_providers(lookup.key.clone());
        self.queries.insert(query, Pending::Providers(lookup));
    }

    fn send_manifest(&mut self, swarm: &mut Swarm<Behaviour>, mut lookup: ManifestLookup) {
        lookup.excuses.sent(Instant::now());
        let key = dht::agent_key(&lookup.agent);
        let query = swarm.behaviour_mut().kad.get_record(key);
        self.queries.insert(query, Pending::Manifest(lookup));
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
                self.queries
                    .insert(query, Pending::Join(Joining::new(Instant::now())));
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
    /// and why. A lookup that fell short while this node ran late
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
        let progress = Progress {
            query: id,
            stats,
            last,
        };
        match (pending, result) {
            (Pending::Providers(lookup), QueryResult::GetProviders(outcome)) => {
                self.providers_found(swarm, lookup, outcome, progress, strikes);
                None
            }
            (Pending::Manifest(lookup), QueryResult::GetRecord(outcome)) => {
                self.manifest_found(swarm, lookup, outcome, progress, strikes)
            }
            (Pending::Join(mut joining), QueryResult::Bootstrap(_)) => {
                joining.step(&progress.stats);
                if last {
                    joining.report(dht::routing_table_size(&mut swarm.behaviour_mut().kad));
                    self.finish_join();
                } else {
                    self.queries.insert(id, Pending::Join(joining));
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

    /// A provider lookup heard from a peer: answered once enough hosts are
    /// known or its query is over.
    fn providers_found(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        mut lookup: ProvidersLookup,
        outcome: kad::GetProvidersResult,
        Progress { query, stats, last }: Progress,
        strikes: &Strikes,
    ) {
        let timed_out = matches!(outcome, Err(kad::GetProvidersError::Timeout { .. }));
        if let Ok(kad::GetProvidersOk::FoundProviders { providers, .. }) = outcome {
            // Dial new providers now, while the query still knows their
            // addresses.
            for provider in &providers {
                if !swarm.is_connected(provider) && provider != swarm.local_peer_id() {
                    let _ = swarm.dial(DialOpts::peer_id(*provider).build());
                }
            }
            lookup.found.extend(providers);
        }
        let enough = lookup.found.len() >= lookup.want;
        // Responses come one by one, empty ones included: answer once
        // enough hosts are known or the lookup is over.
        if !enough && !last {
            self.queries.insert(query, Pending::Providers(lookup));
            return;
        }
        let fell_short = timed_out || stats.num_failures() > 0;
        if !enough
            && sent_again_for_lateness(
                &mut lookup.excuses,
                &lookup.reply,
                fell_short,
                strikes,
                Instant::now(),
            )
        {
            lookup.requests += stats.num_requests();
            self.send_providers(swarm, lookup);
            return;
        }
        if !last && let Some(mut running) = swarm.behaviour_mut().kad.query_mut(&query) {
            running.finish();
        }
        let _ = lookup.reply.send(Ok(ProviderLookup {
            providers: lookup.found.into_iter().collect(),
            requests: lookup.requests + stats.num_requests(),
        }));
    }

    /// A manifest lookup heard from a peer: the first record that is the
    /// agent's manifest answers it; a peer that sent anything else is
    /// returned, to block.
    fn manifest_found(
        &mut self,
        swarm: &mut Swarm<Behaviour>,
        mut lookup: ManifestLookup,
        outcome: kad::GetRecordResult,
        Progress { query, stats, last }: Progress,
        strikes: &Strikes,
    ) -> Option<(PeerId, String)> {
        let mut liar = None;
        let mut timed_out = false;
        match outcome {
            Ok(kad::GetRecordOk::FoundRecord(found)) => match dht::check_record(&found.record) {
                Ok(manifest) if manifest.id() == lookup.agent => {
                    if let Some(mut running) = swarm.behaviour_mut().kad.query_mut(&query) {
                        running.finish();
                    }
                    let _ = lookup.reply.send(Ok(manifest));
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
        let fell_short = timed_out || stats.num_failures() > 0;
        if !last {
            self.queries.insert(query, Pending::Manifest(lookup));
        } else if sent_again_for_lateness(
            &mut lookup.excuses,
            &lookup.reply,
            fell_short,
            strikes,
            Instant::now(),
        ) {
            self.send_manifest(swarm, lookup);
        } else if timed_out {
            let _ = lookup
                .reply
                .send(Err(NetError::LookupTimedOut(lookup.agent)));
        } else {
            let _ = lookup.reply.send(Err(NetError::NotFound(lookup.agent)));
        }
        liar
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_lookup_is_sent_again_only_when_it_fell_short_in_this_nodes_time_for_a_waiting_caller() {
        let second = Duration::from_secs(1);
        let start = Instant::now();
        let mut strikes = Strikes::default();
        strikes.checked(start, start, start + second);
        // The loop ran 3 s late while the query was out.
        strikes.checked(
            start + second * 10,
            start + second * 13,
            start + second * 14,
        );
        let now = start + second * 20;
        let (reply, waiting) = oneshot::channel::<()>();
        let again = |excuses: &mut Excuses, fell_short: bool, reply: &Reply<()>| {
            sent_again_for_lateness(excuses, reply, fell_short, &strikes, now)
        };
        let mut excuses = Excuses::new(start);
        // Nothing failed: the record is not where the lookup asked.
        assert!(!again(&mut excuses, false, &reply));
        // Requests failed, or it ran out of time: sent again, twice at most.
        assert!(again(&mut excuses, true, &reply));
        assert!(again(&mut excuses, true, &reply));
        assert!(!again(&mut excuses, true, &reply));
        // A caller that went away is not looked up for.
        let mut excuses = Excuses::new(start);
        drop(waiting);
        assert!(!again(&mut excuses, true, &reply));
        assert_eq!(excuses.used(), 0);
    }
}
