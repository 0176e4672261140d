//! The HTTP front end's connections: how many it holds, from whom, and how
//! long a client may keep one without sending a request.
//!
//! A client that opens a connection and never finishes its request line
//! and headers costs the node a socket, a buffer and a task, and is never
//! refused by the token or the Host guard, which read the headers it does
//! not send. So the front end bounds connections where they are accepted:
//!
//! - a request's line and headers must arrive within `head_timeout` of the
//!   connection's start or of the end of the previous response (which is
//!   also how long an idle keep-alive connection is kept), and within
//!   [`MAX_HEAD_BUFFER`] bytes;
//! - a request body that stops arriving for `body_idle_timeout` ends the
//!   request;
//! - at most `total` connections are open, and at most `per_address` from
//!   one address, both below the process's file-descriptor limit. A
//!   connection past a cap takes the place of the oldest one (of its
//!   address, or of all) that has not yet sent a whole request, or else of
//!   the one whose client has left a response unread longest (for at least
//!   [`STALLED_FOR`]); when every open connection is busy and read, the
//!   newcomer is closed. A flood of unfinished requests or unread
//!   responses therefore pushes out only its own kind, and a client that
//!   sends its request and reads its answer is served while it lasts;
//! - a response its client leaves unread for `write_idle_timeout` ends
//!   its connection ([`super::write_idle`]).

use super::guard::Rules;
use super::write_idle::{Stalled, WriteIdle};
use axum::Router;
use axum::response::IntoResponse;
use futures::future::Either;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The most a request's line and headers may take (hyper's read buffer,
/// which never holds more than a head before the head is whole).
pub const MAX_HEAD_BUFFER: usize = 64 * 1024;

/// File descriptors kept for everything else the node opens (its store,
/// peers, agents' files, attached servers) when connections are capped
/// below the process's limit.
const RESERVED_DESCRIPTORS: usize = 256;

/// How long a failed `accept` (the process out of descriptors, say) waits
/// before the next: the connections it has may end meanwhile.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How long a response must have waited on its client before its
/// connection makes way for a newcomer: a client reading at all keeps the
/// socket's buffer from staying full this long.
pub const STALLED_FOR: Duration = Duration::from_secs(1);

/// The bounds on the front end's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once, in all.
    pub total: usize,
    /// Connections open at once from one address.
    pub per_address: usize,
    /// Time a client has to send a request's line and headers.
    pub head_timeout: Duration,
    /// Time a request body may go without a byte arriving.
    pub body_idle_timeout: Duration,
    /// Time a response may wait on a client that reads none of it.
    pub write_idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            total: 1024,
            per_address: 128,
            head_timeout: Duration::from_secs(15),
            body_idle_timeout: Duration::from_secs(30),
            write_idle_timeout: Duration::from_secs(30),
        }
    }
}

impl ConnectionLimits {
    /// These limits with the caps lowered to fit the process's
    /// file-descriptor limit, keeping [`RESERVED_DESCRIPTORS`] (or half the
    /// limit, when it is small) for the rest of the node.
    pub fn within_descriptors(self) -> Self {
        let Some(descriptors) = descriptor_limit() else {
            return self;
        };
        let spare = descriptors
            .saturating_sub(RESERVED_DESCRIPTORS)
            .max(descriptors / 2)
            .max(1);
        let total = self.total.clamp(1, spare);
        ConnectionLimits {
            total,
            per_address: self.per_address.clamp(1, total),
            ..self
        }
    }
}

/// The process's soft limit on open file descriptors, if it has one.
fn descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    usize::try_from(limit.rlim_cur).ok()
}

/// A connection the front end holds.
struct Held {
    id: u64,
    /// Whether a whole request head has arrived on it.
    requested: Arc<AtomicBool>,
    /// Since when its response waits on the client, if it does.
    stalled: Stalled,
    /// Closes it.
    close: CancellationToken,
}

/// The connections open, by address, oldest first.
#[derive(Default)]
struct Open {
    by_address: HashMap<IpAddr, Vec<Held>>,
    total: usize,
    next_id: u64,
}

impl Open {
    /// Makes room for a connection from `address` within `limits`: nothing
    /// to do under the caps; else the oldest connection without a request,
    /// or failing that the one whose response has waited longest on its
    /// client (of `address` when its own cap is reached, of any address
    /// when the total is) is closed. False when no connection can make way.
    fn make_room(&mut self, address: IpAddr, limits: &ConnectionLimits) -> bool {
        let own = self.by_address.get(&address).map_or(0, Vec::len);
        let in_scope = if own >= limits.per_address {
            Some(address)
        } else if self.total >= limits.total {
            None
        } else {
            return true;
        };
        let candidates = || {
            self.by_address
                .iter()
                .filter(|(a, _)| in_scope.is_none_or(|scope| **a == scope))
                .flat_map(|(a, held)| held.iter().map(move |h| (*a, h)))
        };
        let unrequested = candidates()
            .filter(|(_, h)| !h.requested.load(Ordering::Relaxed))
            .min_by_key(|(_, h)| h.id)
            .map(|(a, h)| (a, h.id));
        let stalled = || {
            candidates()
                .filter_map(|(a, h)| Some((a, h.id, h.stalled.for_how_long()?)))
                .filter(|(_, _, stalled)| *stalled >= STALLED_FOR)
                .max_by_key(|(_, _, stalled)| *stalled)
                .map(|(a, id, _)| (a, id))
        };
        let victim = unrequested.or_else(stalled);
        match victim {
            Some((victim_address, id)) => {
                if let Some(held) = self.remove(victim_address, id) {
                    held.close.cancel();
                }
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, address: IpAddr) -> (u64, Arc<AtomicBool>, CancellationToken, Stalled) {
        let id = self.next_id;
        self.next_id += 1;
        let held = Held {
            id,
            requested: Arc::new(AtomicBool::new(false)),
            stalled: Stalled::new(),
            close: CancellationToken::new(),
        };
        let handles = (
            id,
            held.requested.clone(),
            held.close.clone(),
            held.stalled.clone(),
        );
        self.by_address.entry(address).or_default().push(held);
        self.total += 1;
        handles
    }

    fn remove(&mut self, address: IpAddr, id: u64) -> Option<Held> {
        let held = self.by_address.get_mut(&address)?;
        let at = held.iter().position(|h| h.id == id)?;
        let removed = held.remove(at);
        if held.is_empty() {
            self.by_address.remove(&address);
        }
        self.total -= 1;
        Some(removed)
    }
}

/// A connection's place among the open ones, given up when it ends.
struct Slot {
    open: Arc<Mutex<Open>>,
    address: IpAddr,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.remove(self.address, self.id);
    }
}

/// Serves `router` on `listener` within `limits` until `stop`, then lets
/// the connections finish their requests. Every request is first held to
/// `rules` (the Host and Origin rules against DNS rebinding and cross-site
/// requests): here, once, before any route, so that no route, today's or a
/// later one, answers a name that is not this node's; a request refused
/// never reaches the router.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    rules: Arc<Rules>,
    limits: ConnectionLimits,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let limits = limits.within_descriptors();
    let open = Arc::new(Mutex::new(Open::default()));
    // Each connection holds a receiver; the server waits for all to drop.
    let (finished_tx, finished_rx) = tokio::sync::watch::channel(());
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!("cannot accept a connection: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let address = peer.ip().to_canonical();
        let (slot, requested, close, stalled) = {
            let mut table = open.lock().unwrap_or_else(|e| e.into_inner());
            if !table.make_room(address, &limits) {
                tracing::debug!("refused a connection from {address}: too many open");
                continue;
            }
            let (id, requested, close, stalled) = table.insert(address);
            let slot = Slot {
                open: open.clone(),
                address,
                id,
            };
            (slot, requested, close, stalled)
        };
        // Responses go out in several writes (headers, SSE event, end of
        // stream); without TCP_NODELAY, Nagle's algorithm and the client's
        // delayed ACK can hold the last one back for 40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let service = TowerToHyperService::new(router.clone());
        let rules = rules.clone();
        let stop = stop.clone();
        let finished = finished_rx.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let _finished = finished;
            let body_idle_timeout = limits.body_idle_timeout;
            let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                requested.store(true, Ordering::Relaxed);
                if let Err(refusal) = rules.check(request.headers()) {
                    return Either::Left(std::future::ready(Ok(refusal.into_response())));
                }
                let mut request =
                    request.map(|body| super::idle_body::IdleBody::new(body, body_idle_timeout));
                // Where it came from, for the shares of what clients keep
                // (see crate::requester).
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                Either::Right(hyper::service::Service::call(&service, request))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.head_timeout)
                .max_buf_size(MAX_HEAD_BUFFER)
                .serve_connection(
                    TokioIo::new(WriteIdle::new(stream, limits.write_idle_timeout, stalled)),
                    service,
                );
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::trace!("connection from {peer} ended: {e}");
                    }
                }
                () = close.cancelled() => {
                    tracing::debug!("closed a connection from {peer} that sent no request or left its response unread, for a newer one");
                }
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    drop(finished_rx);
    drop(listener);
    finished_tx.closed().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_address: usize) -> ConnectionLimits {
        ConnectionLimits {
            total,
            per_address,
            ..ConnectionLimits::default()
        }
    }

    #[test]
    fn a_connection_past_a_cap_replaces_the_oldest_that_sent_no_request() {
        let mut open = Open::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let limits = limits(3, 2);
        let mut connect = |address: IpAddr| {
            assert!(open.make_room(address, &limits));
            open.insert(address)
        };
        let (_, _, a1, _) = connect(a);
        let (_, _, a2, _) = connect(a);
        // a's own cap: a's oldest without a request makes way.
        let (_, a3_requested, a3, _) = connect(a);
        assert!(a1.is_cancelled() && !a2.is_cancelled());
        a3_requested.store(true, Ordering::Relaxed);
        let (_, _, b1, _) = connect(b);
        assert!(!a2.is_cancelled() && !b1.is_cancelled());
        // The total: the oldest without a request, whoever it is from.
        let (_, _, b2, _) = connect(b);
        assert!(a2.is_cancelled() && !b1.is_cancelled());
        // b's own cap: b's oldest goes; a's, which sent a request, stays.
        connect(b);
        assert!(b1.is_cancelled() && !b2.is_cancelled() && !a3.is_cancelled());
        assert_eq!(open.total, 3);
    }

    #[test]
    fn when_every_connection_sent_a_request_the_newcomer_is_refused() {
        let mut open = Open::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let limits = limits(2, 2);
        for _ in 0..2 {
            assert!(open.make_room(a, &limits));
            let (_, requested, _, _) = open.insert(a);
            requested.store(true, Ordering::Relaxed);
        }
        assert!(!open.make_room(a, &limits));
        assert!(!open.make_room("10.0.0.9".parse().unwrap(), &limits));
        assert_eq!(open.total, 2);
    }

    #[test]
    fn caps_stay_below_the_descriptor_limit() {
        let capped = limits(usize::MAX, usize::MAX).within_descriptors();
        if let Some(descriptors) = descriptor_limit() {
            assert!(
                capped.total < descriptors,
                "{capped:?} against {descriptors}"
            );
        }
        assert!(capped.per_address <= capped.total);
    }
}
