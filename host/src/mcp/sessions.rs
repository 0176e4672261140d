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

use crate::requester::Requester;
use rmcp::transport::common::server_side_http::SessionId;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Sessions one requester keeps open at most.
pub const PER_REQUESTER: usize = 128;
/// Sessions the node keeps open at most.
pub const TOTAL: usize = 2048;

/// The open sessions of every endpoint.
#[derive(Default)]
pub struct SessionBook {
    open: Mutex<HashMap<SessionId, Open>>,
}

struct Open {
    requester: Requester,
    used: Instant,
    /// The endpoint's sessions, which closes it.
    manager: Arc<LocalSessionManager>,
}

/// A session to close, and the sessions it belongs to.
pub type ToClose = (SessionId, Arc<LocalSessionManager>);

impl SessionBook {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Open>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that session `id` was used now.
    pub fn touch(&self, id: &str) {
        if let Some(open) = self.open().get_mut(id) {
            open.used = Instant::now();
        }
    }

    /// Forgets session `id`, which its client ended.
    pub fn forget(&self, id: &str) {
        self.open().remove(id);
    }

    /// Forgets every session of `manager`, whose endpoint is gone.
    pub fn forget_all_of(&self, manager: &Arc<LocalSessionManager>) {
        self.open()
            .retain(|_, open| !Arc::ptr_eq(&open.manager, manager));
    }

    /// How many sessions are booked.
    pub fn len(&self) -> usize {
        self.open().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Books the new session `id` of `requester`, and says which sessions
    /// to close to keep within the bounds (they are no longer booked).
    pub fn opened(
        &self,
        id: SessionId,
        requester: Requester,
        manager: Arc<LocalSessionManager>,
    ) -> Vec<ToClose> {
        let mut open = self.open();
        let mut closing = Vec::new();
        let own = open.values().filter(|o| o.requester == requester).count();
        if own >= PER_REQUESTER
            && let Some(oldest) = least_recently_used(&open, |o| o.requester == requester)
        {
            closing.extend(open.remove(&oldest).map(|o| (oldest, o.manager)));
        }
        if open.len() >= TOTAL
            && let Some(oldest) = least_recently_used(&open, |_| true)
        {
            closing.extend(open.remove(&oldest).map(|o| (oldest, o.manager)));
        }
        open.insert(
            id,
            Open {
                requester,
                used: Instant::now(),
                manager,
            },
        );
        closing
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

/// Closes `sessions` (a session its idle timeout ended already is gone).
pub async fn close(sessions: Vec<ToClose>) {
    for (id, manager) in sessions {
        tracing::debug!(session = %id, "an MCP session closed to keep the node's bounds");
        let _ = manager.close_session(&id).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_closes_its_own_idle_sessions_and_others_only_when_the_node_is_full() {
        let book = SessionBook::default();
        let manager = Arc::new(LocalSessionManager::default());
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
        book.touch("s1");
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
