//! The MCP sessions the node's endpoints keep, bounded per requester and
//! overall.
//!
//! A session is made by an `initialize` alone and kept until its client
//! ends it or it idles out (5 minutes), so one client that initializes
//! without end would make the node keep sessions without end: 30,007 in 7 s
//! took 1.7 GB. Each session is booked with who opened it (see
//! [`crate::requester`]) and when it was last used; one requester keeps at
//! most [`PER_REQUESTER`] and all together at most [`TOTAL`]. Past either,
//! the session used least recently (the requester's own first) is closed:
//! a flood ends its own idle sessions, never refuses anyone, and touches
//! another's only when the node is full, idle-first.
//!
//! A session with no request open for [`DORMANT_AFTER`] is put to sleep
//! (see [`super::dormant`]): its tasks end, its `initialize` stays, and the
//! next request wakes it. One that set a log level or subscribed to a
//! resource keeps that state in its handler and stays awake. A session
//! idle for [`ENDS_AFTER`] ends, asleep or not.

use super::dormant::Hibernating;
use crate::requester::Requester;
use rmcp::transport::common::server_side_http::SessionId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Sessions one requester keeps open at most.
pub const PER_REQUESTER: usize = 128;
/// Sessions the node keeps open at most.
pub const TOTAL: usize = 2048;
/// How long a session idles before it is put to sleep, by default.
pub const DORMANT_AFTER: Duration = Duration::from_secs(30);
/// How long a session idles, asleep or not, before it ends.
pub const ENDS_AFTER: Duration = Duration::from_secs(60 * 60);

/// The open sessions of every endpoint.
#[derive(Default)]
pub struct SessionBook {
    open: Mutex<HashMap<SessionId, Open>>,
}

struct Open {
    requester: Requester,
    used: Instant,
    /// The endpoint's sessions, which serve it.
    sessions: Arc<Hibernating>,
    /// Requests of the session whose response is still being sent (a
    /// stream open for the server's messages is one).
    in_flight: usize,
    /// Whether the session keeps state of its own beyond its `initialize`
    /// (a log level, subscriptions): it is never put to sleep, which
    /// would lose it.
    pinned: bool,
    asleep: bool,
    /// While it is being put to sleep: a request for it waits for that
    /// to end, then wakes it.
    falling_asleep: Option<watch::Receiver<bool>>,
}

/// A session to end, and the sessions it belongs to.
pub type ToClose = (SessionId, Arc<Hibernating>);

/// A request of a session, counted until its response has been sent.
pub struct InFlight {
    book: Arc<SessionBook>,
    id: SessionId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(open) = self.book.open().get_mut(&self.id) {
            open.in_flight = open.in_flight.saturating_sub(1);
            open.used = Instant::now();
        }
    }
}

/// What a sweep found to do.
#[derive(Default)]
pub struct Sweep {
    /// Sessions to put to sleep, and who waits for that to end.
    pub to_sleep: Vec<(SessionId, Arc<Hibernating>, watch::Sender<bool>)>,
    pub to_end: Vec<ToClose>,
}

impl SessionBook {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Open>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a request of session `id`, counted until the returned guard
    /// drops; waits first while the session is being put to sleep. None
    /// for a session not booked here.
    pub async fn began(self: &Arc<Self>, id: &str) -> Option<InFlight> {
        loop {
            let mut waiting = {
                let mut open = self.open();
                let open = open.get_mut(id)?;
                match &open.falling_asleep {
                    Some(falling) => falling.clone(),
                    None => {
                        open.in_flight += 1;
                        open.used = Instant::now();
                        open.asleep = false;
                        return Some(InFlight {
                            book: self.clone(),
                            id: Arc::from(id),
                        });
                    }
                }
            };
            let _ = waiting.wait_for(|asleep| *asleep).await;
        }
    }

    /// Notes that session `id` keeps state of its own: it stays awake.
    pub fn pin(&self, id: &str) {
        if let Some(open) = self.open().get_mut(id) {
            open.pinned = true;
        }
    }

    /// Forgets session `id`, which its client ended.
    pub fn forget(&self, id: &str) {
        self.open().remove(id);
    }

    /// Forgets every session of `sessions`, whose endpoint is gone.
    pub fn forget_all_of(&self, sessions: &Arc<Hibernating>) {
        self.open()
            .retain(|_, open| !Arc::ptr_eq(&open.sessions, sessions));
    }

    /// How many sessions are booked.
    pub fn len(&self) -> usize {
        self.open().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many booked sessions are awake, and how many asleep.
    pub fn awake_and_asleep(&self) -> (usize, usize) {
        let open = self.open();
        let asleep = open.values().filter(|open| open.asleep).count();
        (open.len() - asleep, asleep)
    }

    /// Books the new session `id` of `requester`, and says which sessions
    /// to end to keep within the bounds (they are no longer booked).
    pub fn opened(
        &self,
        id: SessionId,
        requester: Requester,
        sessions: Arc<Hibernating>,
    ) -> Vec<ToClose> {
        let mut open = self.open();
        let mut closing = Vec::new();
        let own = open.values().filter(|o| o.requester == requester).count();
        if own >= PER_REQUESTER
            && let Some(oldest) = least_recently_used(&open, |o| o.requester == requester)
        {
            closing.extend(open.remove(&oldest).map(|o| (oldest, o.sessions)));
        }
        if open.len() >= TOTAL
            && let Some(oldest) = least_recently_used(&open, |_| true)
        {
            closing.extend(open.remove(&oldest).map(|o| (oldest, o.sessions)));
        }
        open.insert(
            id,
            Open {
                requester,
                used: Instant::now(),
                sessions,
                in_flight: 0,
                pinned: false,
                asleep: false,
                falling_asleep: None,
            },
        );
        closing
    }

    /// Finds the sessions idle for `dormant_after` with no request open,
    /// to put to sleep (those that can be restored), and those idle for
    /// [`ENDS_AFTER`], to end (no longer booked).
    pub fn sweep(&self, now: Instant, dormant_after: Duration) -> Sweep {
        let mut open = self.open();
        let mut sweep = Sweep::default();
        let idle = |o: &Open, longer_than: Duration| {
            o.in_flight == 0
                && o.falling_asleep.is_none()
                && now.saturating_duration_since(o.used) >= longer_than
        };
        let ending: Vec<SessionId> = open
            .iter()
            .filter(|(_, o)| idle(o, ENDS_AFTER))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ending {
            sweep
                .to_end
                .extend(open.remove(&id).map(|o| (id, o.sessions)));
        }
        for (id, o) in open.iter_mut() {
            if !o.asleep && !o.pinned && idle(o, dormant_after) && o.sessions.dormant().contains(id)
            {
                let (done, falling) = watch::channel(false);
                o.falling_asleep = Some(falling);
                sweep.to_sleep.push((id.clone(), o.sessions.clone(), done));
            }
        }
        sweep
    }

    /// Session `id` is asleep: requests waiting for it go on.
    fn fell_asleep(&self, id: &SessionId) {
        if let Some(open) = self.open().get_mut(id) {
            open.falling_asleep = None;
            open.asleep = true;
        }
    }
}

fn least_recently_used(
    open: &HashMap<SessionId, Open>,
    which: impl Fn(&Open) -> bool,
) -> Option<SessionId> {
    open.iter()
        .filter(|(_, o)| which(o))
        .min_by_key(|(_, o)| o.used)
        .map(|(id, _)| id.clone())
}

/// Ends `sessions`, asleep or not.
pub async fn close(sessions: Vec<ToClose>) {
    for (id, sessions) in sessions {
        tracing::debug!(session = %id, "an MCP session ends (bounds, or idle)");
        sessions.end(&id).await;
    }
}

/// Every `dormant_after / 4` (at least every 100 ms), puts the sessions
/// idle that long to sleep and ends those idle for [`ENDS_AFTER`], until
/// `stop`.
pub async fn keep_tidy(
    book: Arc<SessionBook>,
    dormant_after: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let every = (dormant_after / 4).max(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let sweep = book.sweep(Instant::now(), dormant_after);
        for (id, sessions, done) in sweep.to_sleep {
            sessions.put_to_sleep(&id).await;
            book.fell_asleep(&id);
            let _ = done.send(true);
        }
        close(sweep.to_end).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_flood_closes_its_own_idle_sessions_and_others_only_when_the_node_is_full() {
        let book = Arc::new(SessionBook::default());
        let manager = Arc::new(Hibernating::new(Default::default()));
        let calm = Requester::new("mcp", Some("10.0.0.1".parse().unwrap()));
        let flood = Requester::new("mcp", Some("10.0.0.2".parse().unwrap()));
        let id = |n: usize| -> SessionId { Arc::from(format!("s{n}")) };
        assert!(book.opened(id(0), calm.clone(), manager.clone()).is_empty());
        for n in 1..=PER_REQUESTER {
            assert!(
                book.opened(id(n), flood.clone(), manager.clone())
                    .is_empty()
            );
        }
        // At its share, the flood's least recently used goes: its first,
        // unless it was used since.
        drop(book.began("s1").await);
        let closed = book.opened(id(1000), flood.clone(), manager.clone());
        assert_eq!(closed.len(), 1);
        assert_eq!(&*closed[0].0, "s2");
        assert_eq!(book.len(), PER_REQUESTER + 1);
        // Full: the least recently used of anyone's goes, the calm one's
        // first session being the oldest.
        let mut n = 2000;
        let mut others = 0;
        while book.len() < TOTAL {
            let requester = Requester::new(
                "mcp",
                Some(format!("10.1.{}.{}", n / 250, n % 250).parse().unwrap()),
            );
            assert!(book.opened(id(n), requester, manager.clone()).is_empty());
            n += 1;
            others += 1;
        }
        assert!(others > 0);
        let closed = book.opened(id(n), calm.clone(), manager.clone());
        assert_eq!(closed.len(), 1);
        assert_eq!(&*closed[0].0, "s0");
        assert_eq!(book.len(), TOTAL);
        book.forget_all_of(&manager);
        assert!(book.is_empty());
    }
}
