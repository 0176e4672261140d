//! Who asked for something the node keeps, and each one's share of the
//! room kept for it.
//!
//! Stores of records that clients create (goals, A2A tasks) are bounded by
//! count. Dropping the oldest finished record when full would let one client
//! push everyone else's history out in seconds, so a store asks
//! [`make_room`] instead: a requester holds at most its share, gives up its
//! own oldest finished records first, and takes another's only when that one
//! is older than the minimum age; otherwise the newcomer is refused.
//!
//! A requester is the way in and the network address the request came
//! from (an IPv6 address by its /64, which one host is handed whole): not
//! something a client can mint per request, as it can a session or a
//! context id. Holders of the one token are told apart by where they are.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::time::Duration;

/// Who asked: `"<way in> <address>"`, e.g. `a2a 203.0.113.7`, or
/// `operator`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Requester(String);

/// Marks a request that presented the node's token or its command line's
/// control token: the operator's, whatever address it came from.
#[derive(Debug, Clone, Copy)]
pub struct Operator;

impl Requester {
    /// The node's operator: its command line, or a client holding its
    /// token. Its records are never dropped for another's.
    pub fn operator() -> Requester {
        Requester("operator".to_owned())
    }

    pub fn is_operator(&self) -> bool {
        self.0 == "operator"
    }

    /// A request that came in through `way` (`a2a`, `mcp`, `http`, ...)
    /// from `address` (`None`: not over the network, or not known).
    pub fn new(way: &str, address: Option<IpAddr>) -> Requester {
        match address.map(|a| a.to_canonical()) {
            Some(IpAddr::V6(v6)) => {
                let s = v6.segments();
                Requester(format!(
                    "{way} {:x}:{:x}:{:x}:{:x}::/64",
                    s[0], s[1], s[2], s[3]
                ))
            }
            Some(address) => Requester(format!("{way} {address}")),
            None => Requester(format!("{way} local")),
        }
    }

    /// The operator when `operator` (the request presented a token), else
    /// the requester of `way` at `address`.
    pub fn of(way: &str, address: Option<IpAddr>, operator: bool) -> Requester {
        if operator {
            Requester::operator()
        } else {
            Requester::new(way, address)
        }
    }

    /// Who sent a request, as the front end recorded it: the operator when
    /// it presented a token, else the address it came in from.
    pub fn from_extensions(way: &str, extensions: &http::Extensions) -> Requester {
        let (address, operator) = sender(extensions);
        Requester::of(way, address, operator)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The address a request came in from and whether it presented a token,
/// as the front end recorded them: what names its requester, read without
/// building the name (a path that keeps nothing need not).
pub fn sender(extensions: &http::Extensions) -> (Option<IpAddr>, bool) {
    let address = extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip());
    (address, extensions.get::<Operator>().is_some())
}

impl std::fmt::Display for Requester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            // Records kept before requesters were.
            f.write_str("an earlier version of the node")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// How a store's room is shared.
#[derive(Debug, Clone, Copy)]
pub struct Shares {
    /// Records kept at most.
    pub total: usize,
    /// Records one requester keeps at most.
    pub per_requester: usize,
    /// A finished record younger than this is never dropped for another
    /// requester's.
    pub min_age: Duration,
    /// What the store keeps, for its error ("goals", "A2A tasks").
    pub what: &'static str,
}

/// One kept record, as [`make_room`] weighs it.
#[derive(Debug, Clone)]
pub struct Kept<'a, Id> {
    pub id: Id,
    pub requester: &'a Requester,
    /// Milliseconds since the epoch of its last change.
    pub changed: u64,
    pub finished: bool,
}

/// What a store does to take a newcomer's record.
#[derive(Debug, PartialEq, Eq)]
pub enum Room<Id> {
    /// There is room.
    Free,
    /// Drop this record first.
    Drop(Id),
}

impl<Id> Room<Id> {
    pub fn map_id<Other>(self, f: impl FnOnce(Id) -> Other) -> Room<Other> {
        match self {
            Room::Free => Room::Free,
            Room::Drop(id) => Room::Drop(f(id)),
        }
    }
}

/// Why a newcomer's record was refused: one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Whether `newcomer` may add a record to a store holding `kept`, and
/// which record goes to make room, at `now` (milliseconds).
pub fn make_room<'a, Id: Clone>(
    kept: &[Kept<'a, Id>],
    newcomer: &Requester,
    shares: &Shares,
    now: u64,
) -> Result<Room<Id>, Refused> {
    let own_oldest_finished = || {
        kept.iter()
            .filter(|k| k.requester == newcomer && k.finished)
            .min_by_key(|k| k.changed)
            .map(|k| Room::Drop(k.id.clone()))
    };
    let own = kept.iter().filter(|k| k.requester == newcomer).count();
    if own >= shares.per_requester {
        return own_oldest_finished().ok_or_else(|| {
            Refused(format!(
                "{newcomer} keeps {own} {what} on this node, its most, and none of them has ended; try again when one has",
                what = shares.what
            ))
        });
    }
    if kept.len() < shares.total {
        return Ok(Room::Free);
    }
    if let Some(room) = own_oldest_finished() {
        return Ok(room);
    }
    // Another's: the oldest finished record old enough to go, of whoever
    // keeps the most, so that a small history outlasts a flood. The
    // operator's are never another's to drop.
    let min_age = u64::try_from(shares.min_age.as_millis()).unwrap_or(u64::MAX);
    let old_enough = |k: &&Kept<'a, Id>| {
        k.finished && !k.requester.is_operator() && now.saturating_sub(k.changed) >= min_age
    };
    let mut counts: std::collections::HashMap<&Requester, usize> = Default::default();
    for k in kept {
        *counts.entry(k.requester).or_default() += 1;
    }
    kept.iter()
        .filter(old_enough)
        .max_by_key(|k| (counts[k.requester], std::cmp::Reverse(k.changed)))
        .map(|k| Room::Drop(k.id.clone()))
        .ok_or_else(|| {
            Refused(format!(
                "this node keeps {total} {what}, its most, and none it could drop for a new one is older than {age}; try again later",
                total = kept.len(),
                what = shares.what,
                age = humantime::format_duration(shares.min_age),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;

    fn shares() -> Shares {
        Shares {
            total: 4,
            per_requester: 3,
            min_age: Duration::from_secs(3600),
            what: "goals",
        }
    }

    fn kept<'a>(id: u32, requester: &'a Requester, changed: u64, finished: bool) -> Kept<'a, u32> {
        Kept {
            id,
            requester,
            changed,
            finished,
        }
    }

    #[test]
    fn the_operators_records_are_never_dropped_for_anothers() {
        let operator = Requester::operator();
        let flood = Requester::new("http", Some("127.0.0.1".parse().unwrap()));
        let other = Requester::new("a2a", Some("10.0.0.9".parse().unwrap()));
        // The store is full with the operator's old finished records and
        // one of another's: that one goes, never the operator's.
        let store = [
            kept(1, &operator, 0, true),
            kept(2, &operator, 1, true),
            kept(3, &operator, 2, true),
            kept(4, &other, 5, true),
        ];
        let now = 100 * HOUR;
        assert_eq!(make_room(&store, &flood, &shares(), now), Ok(Room::Drop(4)));
        let all_operators = [
            kept(1, &operator, 0, true),
            kept(2, &operator, 1, true),
            kept(3, &operator, 2, true),
            kept(4, &operator, 3, false),
        ];
        let mut big = shares();
        big.per_requester = 10;
        let refused = make_room(&all_operators, &flood, &big, now).unwrap_err();
        assert!(refused.0.contains("none it could drop"), "{refused}");
        // The operator makes room among its own.
        assert_eq!(
            make_room(&all_operators, &operator, &big, now),
            Ok(Room::Drop(1))
        );
        // A request that presented a token is the operator's, whatever
        // its address.
        let mut extensions = http::Extensions::new();
        extensions.insert(Operator);
        assert!(Requester::from_extensions("http", &extensions).is_operator());
    }

    #[test]
    fn a_requester_at_its_share_gives_up_its_own_oldest_finished_record() {
        let flood = Requester::new("a2a", Some("10.0.0.9".parse().unwrap()));
        let operator = Requester::new("http", Some("127.0.0.1".parse().unwrap()));
        let store = [
            kept(1, &operator, 0, true),
            kept(2, &flood, 5, true),
            kept(3, &flood, 3, true),
            kept(4, &flood, 4, false),
        ];
        let now = 10 * HOUR;
        assert_eq!(make_room(&store, &flood, &shares(), now), Ok(Room::Drop(3)));
        // Its own first even when the operator's is older.
        assert_eq!(
            make_room(&store, &operator, &shares(), now),
            Ok(Room::Drop(1))
        );
        let running = [
            kept(2, &flood, 5, false),
            kept(3, &flood, 3, false),
            kept(4, &flood, 4, false),
        ];
        let refused = make_room(&running, &flood, &shares(), now).unwrap_err();
        assert!(
            refused.0.contains("a2a 10.0.0.9 keeps 3 goals"),
            "{refused}"
        );
    }

    #[test]
    fn another_requesters_records_go_only_when_old_enough_and_most_numerous() {
        let a = Requester::new("a2a", Some("10.0.0.1".parse().unwrap()));
        let b = Requester::new("a2a", Some("10.0.0.2".parse().unwrap()));
        let newcomer = Requester::new("mcp", None);
        let young = [
            kept(1, &a, HOUR, true),
            kept(2, &b, HOUR, true),
            kept(3, &b, HOUR, true),
            kept(4, &a, HOUR, true),
        ];
        let refused = make_room(&young, &newcomer, &shares(), HOUR + 1000).unwrap_err();
        assert!(refused.0.contains("older than 1h"), "{refused}");
        let store = [
            kept(1, &a, 0, true),
            kept(2, &b, 2, true),
            kept(3, &b, 1, true),
            kept(4, &b, 0, false),
        ];
        assert_eq!(
            make_room(&store, &newcomer, &shares(), 2 * HOUR),
            Ok(Room::Drop(3)),
            "b keeps the most; its oldest finished goes, not a's older one"
        );
        assert_eq!(
            make_room(&store[..3], &newcomer, &shares(), 0),
            Ok(Room::Free)
        );
    }

    #[test]
    fn an_ipv6_host_is_one_requester_for_its_whole_prefix() {
        let one = Requester::new("a2a", Some("2001:db8:1:2::5".parse().unwrap()));
        let other = Requester::new("a2a", Some("2001:db8:1:2:ffff::9".parse().unwrap()));
        assert_eq!(one, other);
        assert_eq!(one.as_str(), "a2a 2001:db8:1:2::/64");
        let mapped = Requester::new("a2a", Some("::ffff:10.0.0.1".parse().unwrap()));
        assert_eq!(mapped.as_str(), "a2a 10.0.0.1");
    }
}
