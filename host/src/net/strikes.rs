//! Peers that leave DHT requests unanswered are struck, and after
//! [`STRIKES_TO_AVOID`] strikes avoided for [`AVOID_FOR`].
//!
//! A peer that accepts a lookup's request and never answers holds one of
//! the lookup's paths until the request times out (ten seconds): a node that
//! drops every query slows every lookup that meets it. Kademlia (libp2p-kad
//! 0.49) tells a failed request to the query and to its debug log only, so
//! [`Watched`] looks at what kad's connection handlers report before kad
//! does and reports the peers whose requests timed out or were answered
//! with the wrong message. The event loop strikes them ([`Strikes`]) and
//! takes an avoided peer out of its routing table, so that lookups stop
//! being sent to it, and leaves it out until its time is served.
//!
//! A request also times out when the answer waited here, on a node too busy
//! to read it: then every peer seems silent at once, and striking them
//! would empty the routing table of honest peers for half an hour (a busy
//! machine turned a slow network into a broken one: lookups that no longer
//! found records still stored). So strikes do not count while this node's
//! own event loop runs late ([`Strikes::checked`]).

use libp2p::PeerId;
use libp2p::core::{Endpoint, Multiaddr};
use libp2p::kad;
use libp2p::swarm::{
    ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandlerInEvent, THandlerOutEvent,
    ToSwarm,
};
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Unanswered requests within [`STRIKES_LAST`] after which a peer is avoided.
/// One is not enough: an honest peer can lose a request to a busy moment.
pub const STRIKES_TO_AVOID: u32 = 3;
/// How long a strike counts.
pub const STRIKES_LAST: Duration = Duration::from_secs(10 * 60);
/// How long an avoided peer stays out of the routing table.
pub const AVOID_FOR: Duration = Duration::from_secs(30 * 60);
/// Peers struck at once, at most: past it the oldest record is forgotten.
const TRACKED: usize = 4096;
/// How late this node's event loop may run its periodic check and still
/// tell a peer's silence from its own. An answer that waits a second here
/// has used a fifth of the request's time.
pub const OWN_LATENESS: Duration = Duration::from_secs(1);
/// How long a late run of this node's loop excuses the peers: a request
/// that times out now was sent one request timeout ago.
const LATENESS_EXCUSES: Duration = super::dht::REQUEST_TIMEOUT;

/// Kademlia, with the peers that left its requests unanswered reported.
pub struct Watched(
    pub kad::Behaviour<kad::store::MemoryStore>,
    VecDeque<PeerId>,
);

impl Watched {
    pub fn new(kad: kad::Behaviour<kad::store::MemoryStore>) -> Self {
        Watched(kad, VecDeque::new())
    }
}

/// What [`Watched`] reports: kad's own events, and peers that did not answer.
#[derive(Debug)]
// kad's events are this large in the swarm's own event type already; boxing
// them here would cost an allocation per event for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Event {
    Kad(kad::Event),
    Unanswered(PeerId),
}

/// The unanswered peers not yet handed to the swarm, at most this many
/// (a burst beyond it loses strikes, not memory).
const QUEUED: usize = 256;

impl std::ops::Deref for Watched {
    type Target = kad::Behaviour<kad::store::MemoryStore>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Watched {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Whether a kad handler event says a request to the peer timed out or was
/// answered with something else. The event's type is private to libp2p-kad,
/// so it is told by its name as `Debug` writes it; the writer stops after
/// the first few dozen characters, so a large record is never formatted.
fn is_unanswered(event: &impl std::fmt::Debug) -> bool {
    const TIMED_OUT: &str = "QueryError { error: Io(Kind(TimedOut))";
    const WRONG_ANSWER: &str = "QueryError { error: UnexpectedMessage";
    struct Prefix(String);
    impl std::fmt::Write for Prefix {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = TIMED_OUT.len().saturating_sub(self.0.len());
            self.0.extend(s.chars().take(room));
            if self.0.len() >= TIMED_OUT.len() {
                Err(std::fmt::Error)
            } else {
                Ok(())
            }
        }
    }
    let mut prefix = Prefix(String::with_capacity(TIMED_OUT.len()));
    let _ = write!(prefix, "{event:?}");
    prefix.0.starts_with(TIMED_OUT) || prefix.0.starts_with(WRONG_ANSWER)
}

impl NetworkBehaviour for Watched {
    type ConnectionHandler =
        <kad::Behaviour<kad::store::MemoryStore> as NetworkBehaviour>::ConnectionHandler;
    type ToSwarm = Event;

    super::wrapped::pass_connections_to!(0);

    fn handle_pending_outbound_connection(
        &mut self,
        connection_id: ConnectionId,
        maybe_peer: Option<PeerId>,
        addresses: &[Multiaddr],
        effective_role: Endpoint,
    ) -> Result<Vec<Multiaddr>, ConnectionDenied> {
        // Kademlia offers the routing table's addresses first, then those
        // its running queries heard from other peers, which any peer can
        // fill: a dial tries the first few only.
        let mut offered = self.0.handle_pending_outbound_connection(
            connection_id,
            maybe_peer,
            addresses,
            effective_role,
        )?;
        offered.truncate(super::dht::ADDRESSES_PER_PEER);
        Ok(offered)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        self.0.on_swarm_event(event)
    }

    fn on_connection_handler_event(
        &mut self,
        peer: PeerId,
        connection: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        if self.1.len() < QUEUED && is_unanswered(&event) {
            self.1.push_back(peer);
        }
        self.0.on_connection_handler_event(peer, connection, event)
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<ToSwarm<Event, THandlerInEvent<Self>>> {
        if let Some(peer) = self.1.pop_front() {
            return Poll::Ready(ToSwarm::GenerateEvent(Event::Unanswered(peer)));
        }
        self.0.poll(cx).map(|event| event.map_out(Event::Kad))
    }
}

/// The excuses of a DHT query this node sends again when it failed while
/// this node's own loop ran late: its timeouts then measured this node's
/// lateness (a busy machine), not the peers it asked. Publications and
/// lookups keep one each, and bound how many times they use it, so that a
/// node that is always late still answers whoever waits.
#[derive(Clone, Copy, Debug)]
pub struct Excuses {
    /// When the query's current attempt was sent.
    sent_at: Instant,
    /// Attempts sent again for this node's lateness.
    used: u32,
}

impl Excuses {
    /// A query's first attempt, sent at `now`.
    pub fn new(now: Instant) -> Self {
        Excuses {
            sent_at: now,
            used: 0,
        }
    }

    /// Another attempt of the query was sent at `now`.
    pub fn sent(&mut self, now: Instant) {
        self.sent_at = now;
    }

    /// Whether the attempt that just failed may be sent again at `now`
    /// without counting against the query's own attempts: this node ran
    /// late since it was sent, and fewer than `bound` were excused. An
    /// excuse given is used up.
    pub fn excuse(&mut self, strikes: &Strikes, bound: u32, now: Instant) -> bool {
        let excused = self.used < bound && strikes.ran_late_since(self.sent_at, now);
        if excused {
            self.used += 1;
        }
        excused
    }

    /// How many attempts were sent again for this node's lateness.
    pub fn used(&self) -> u32 {
        self.used
    }
}

/// Strikes against peers, and the peers avoided for them.
#[derive(Default)]
pub struct Strikes {
    /// Each struck peer's strikes still counting, oldest first.
    struck: HashMap<PeerId, VecDeque<Instant>>,
    avoided: HashMap<PeerId, Instant>,
    /// When this node's loop last ran its check later than [`OWN_LATENESS`].
    ran_late_at: Option<Instant>,
    /// When the loop's next check is due.
    next_check: Option<Instant>,
}

impl Strikes {
    /// The event loop's periodic check, due at `due`, ran at `now`; the
    /// next one is due at `next`.
    pub fn checked(&mut self, due: Instant, now: Instant, next: Instant) {
        if now.saturating_duration_since(due) > OWN_LATENESS {
            self.ran_late_at = Some(now);
        }
        self.next_check = Some(next);
    }

    /// Whether this node's loop ran late recently or is late now (its
    /// check overdue): an unanswered request may have been answered.
    fn running_late(&self, now: Instant) -> bool {
        self.ran_late_at
            .is_some_and(|at| now.saturating_duration_since(at) <= LATENESS_EXCUSES)
            || self.overdue(now)
    }

    /// Whether the loop's periodic check is late at `now` (not run yet).
    fn overdue(&self, now: Instant) -> bool {
        self.next_check
            .is_some_and(|due| now.saturating_duration_since(due) > OWN_LATENESS)
    }

    /// Whether this node's loop ran late at any time since `since`, or is
    /// late at `now`: a DHT query sent then that ran out of time may have
    /// run out of this node's time, not the network's.
    pub fn ran_late_since(&self, since: Instant, now: Instant) -> bool {
        self.ran_late_at.is_some_and(|at| at >= since) || self.overdue(now)
    }

    /// Strikes `peer` at `now`; true when this strike makes it avoided.
    /// No strike counts while this node is [`running_late`](Self::running_late).
    pub fn strike(&mut self, peer: PeerId, now: Instant) -> bool {
        if self.is_avoided(&peer, now) || self.running_late(now) {
            return false;
        }
        if self.struck.len() >= TRACKED && !self.struck.contains_key(&peer) {
            self.forget_old(now);
            if self.struck.len() >= TRACKED {
                return false;
            }
        }
        let strikes = self.struck.entry(peer).or_default();
        while strikes
            .front()
            .is_some_and(|at| now.duration_since(*at) > STRIKES_LAST)
        {
            strikes.pop_front();
        }
        strikes.push_back(now);
        if strikes.len() as u32 >= STRIKES_TO_AVOID {
            self.struck.remove(&peer);
            if self.avoided.len() >= TRACKED {
                self.avoided.retain(|_, until| *until > now);
            }
            if self.avoided.len() < TRACKED {
                self.avoided.insert(peer, now + AVOID_FOR);
                return true;
            }
        }
        false
    }

    /// Whether `peer` is being avoided at `now`.
    pub fn is_avoided(&self, peer: &PeerId, now: Instant) -> bool {
        self.avoided.get(peer).is_some_and(|until| *until > now)
    }

    fn forget_old(&mut self, now: Instant) {
        self.struck.retain(|_, strikes| {
            strikes
                .back()
                .is_some_and(|at| now.duration_since(*at) <= STRIKES_LAST)
        });
        self.avoided.retain(|_, until| *until > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_avoided_after_its_third_strike_and_forgiven_later() {
        let mut strikes = Strikes::default();
        let peer = PeerId::random();
        let start = Instant::now();
        assert!(!strikes.strike(peer, start));
        assert!(!strikes.strike(peer, start + Duration::from_secs(1)));
        assert!(!strikes.is_avoided(&peer, start));
        assert!(strikes.strike(peer, start + Duration::from_secs(2)));
        assert!(strikes.is_avoided(&peer, start + Duration::from_secs(3)));
        assert!(!strikes.is_avoided(&PeerId::random(), start));
        assert!(!strikes.is_avoided(&peer, start + AVOID_FOR + Duration::from_secs(3)));
    }

    #[test]
    fn strikes_do_not_count_while_this_node_runs_late() {
        let mut strikes = Strikes::default();
        let peer = PeerId::random();
        let start = Instant::now();
        let second = Duration::from_secs(1);
        // On time: checks a second apart, each run at most a second late.
        strikes.checked(start, start + second, start + 2 * second);
        assert!(!strikes.running_late(start + 2 * second));
        // A check two seconds late: the strikes of the requests that were
        // in flight then do not count, later ones do.
        let late = start + 5 * second;
        strikes.checked(start + 3 * second, late, late + second);
        for i in 0..3 {
            assert!(!strikes.strike(peer, late + second * i), "strike {i}");
        }
        let after = late + LATENESS_EXCUSES + second;
        strikes.checked(after, after, after + second);
        assert!(!strikes.strike(peer, after));
        assert!(!strikes.strike(peer, after));
        // A check overdue by more than OWN_LATENESS: the loop is late now,
        // before the check has run.
        let overdue = after + second + OWN_LATENESS + second;
        assert!(strikes.running_late(overdue));
        assert!(!strikes.strike(peer, overdue));
        // Back on time once the excuse has run out: the third strike counts.
        let back = overdue + LATENESS_EXCUSES + second;
        strikes.checked(back, back, back + second);
        assert!(strikes.strike(peer, back));
        assert!(strikes.is_avoided(&peer, back));
    }

    #[test]
    fn a_query_that_failed_in_this_nodes_time_is_excused_a_bounded_number_of_times() {
        let second = Duration::from_secs(1);
        let start = Instant::now();
        let at = |s: u32| start + second * s;
        let mut strikes = Strikes::default();
        strikes.checked(start, start, at(1));
        let mut excuses = Excuses::new(start);
        // This node's loop kept time: the peers were slow, no excuse.
        strikes.checked(at(29), at(29), at(30));
        assert!(!excuses.excuse(&strikes, 2, at(30)));
        // It ran 3 s late while the query was out: excused, and the next
        // attempt is excused only by a late run of its own.
        for round in 0..2 {
            let sent = excuses.sent_at;
            strikes.checked(sent + second * 10, sent + second * 13, sent + second * 14);
            strikes.checked(sent + second * 29, sent + second * 29, sent + second * 30);
            let now = sent + second * 30;
            assert!(excuses.excuse(&strikes, 2, now), "excused in round {round}");
            excuses.sent(now);
            strikes.checked(now + second * 29, now + second * 29, now + second * 30);
            let mut kept_time = excuses;
            assert!(!kept_time.excuse(&strikes, 2, now + second * 30));
        }
        assert_eq!(excuses.used(), 2);
        // Late again, but the excuses are used up: whoever waits is answered.
        let sent = excuses.sent_at;
        strikes.checked(sent + second * 10, sent + second * 13, sent + second * 14);
        assert!(!excuses.excuse(&strikes, 2, sent + second * 30));
        assert_eq!(excuses.used(), 2);
    }

    #[test]
    fn a_late_run_is_seen_by_what_was_sent_before_it() {
        let mut strikes = Strikes::default();
        let start = Instant::now();
        let second = Duration::from_secs(1);
        strikes.checked(start, start, start + second);
        assert!(!strikes.ran_late_since(start, start + second));
        // A check three seconds late, 20 s after `start`.
        let late = start + 20 * second;
        strikes.checked(late - 3 * second, late, late + second);
        // A query sent before it saw it, however long ago it ended...
        let much_later = late + 60 * second;
        strikes.checked(much_later, much_later, much_later + second);
        assert!(strikes.ran_late_since(start, much_later));
        // ...one sent after it did not.
        assert!(!strikes.ran_late_since(late + second, much_later));
        // Overdue now: late for anything in flight.
        let overdue = much_later + second + OWN_LATENESS + second;
        assert!(strikes.ran_late_since(much_later, overdue));
    }

    #[test]
    fn strikes_far_apart_do_not_add_up() {
        let mut strikes = Strikes::default();
        let peer = PeerId::random();
        let start = Instant::now();
        for i in 0..10 {
            let at = start + (STRIKES_LAST + Duration::from_secs(1)) * i;
            assert!(!strikes.strike(peer, at), "strike {i}");
        }
    }

    #[test]
    fn a_timed_out_request_is_told_from_other_events() {
        #[derive(Debug)]
        #[allow(dead_code)]
        enum Like {
            QueryError { error: Error, query_id: u32 },
            GetRecordRes { record: Vec<u8> },
        }
        #[derive(Debug)]
        #[allow(dead_code)]
        enum Error {
            UnexpectedMessage,
            Io(std::io::Error),
        }
        let timed_out = Like::QueryError {
            error: Error::Io(std::io::ErrorKind::TimedOut.into()),
            query_id: 1,
        };
        assert!(is_unanswered(&timed_out));
        let wrong = Like::QueryError {
            error: Error::UnexpectedMessage,
            query_id: 1,
        };
        assert!(is_unanswered(&wrong));
        let closed = Like::QueryError {
            error: Error::Io(std::io::ErrorKind::ConnectionReset.into()),
            query_id: 1,
        };
        assert!(!is_unanswered(&closed));
        assert!(!is_unanswered(&Like::GetRecordRes {
            record: vec![0; 1 << 20]
        }));
    }
}
