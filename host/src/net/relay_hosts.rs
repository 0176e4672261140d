//! Relaying shared between hosts: no host holds more than its share of a
//! relay's reservations or circuits, however many peer ids it runs.
//!
//! libp2p's relay limits reservations and circuits in all and per peer id,
//! and their *rate* per IP. Peer ids cost nothing, and a rate only slows a
//! flood: at 60 a minute, one machine could take all 128 reservations of
//! a relay in little over two minutes, each for an hour, and every node
//! behind a NAT that came later would be refused. [`LiveAtHost`] is a limiter the relay consults
//! last, when it is about to grant: it grants a host (an IPv4 address, an
//! IPv6 /64, which one machine usually has whole) at most `limit` grants
//! within `window`, the time one grant lives: a reservation's duration, a
//! circuit's. Reservations count peers, so that a peer renewing its
//! reservation keeps its place; circuits count each grant.

use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Hosts with live grants tracked at most; past it a new host is refused
/// until grants expire (more hosts than a relay has places for).
const HOSTS: usize = 4096;

/// What one grant counts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Each peer once, renewals included (reservations).
    Peers,
    /// Each grant (circuits).
    Grants,
}

/// At most `limit` live grants per host.
pub struct LiveAtHost {
    limit: usize,
    window: Duration,
    counted: Counted,
    granted: HashMap<IpAddr, VecDeque<(Instant, PeerId)>>,
}

impl LiveAtHost {
    pub fn new(limit: usize, window: Duration, counted: Counted) -> Self {
        LiveAtHost {
            limit,
            window,
            counted,
            granted: HashMap::new(),
        }
    }

    /// Whether `peer`, connected from `address`, may be granted one more at
    /// `now`; if so, the grant is counted.
    pub fn grant(&mut self, peer: PeerId, address: &Multiaddr, now: Instant) -> bool {
        // Without an IP (an in-process network) there is no host to count.
        let Some(host) = host_of(address) else {
            return true;
        };
        let window = self.window;
        let live = |(at, _): &(Instant, PeerId)| now.saturating_duration_since(*at) < window;
        if !self.granted.contains_key(&host) && self.granted.len() >= HOSTS {
            self.granted.retain(|_, grants| {
                grants.retain(live);
                !grants.is_empty()
            });
            if self.granted.len() >= HOSTS {
                return false;
            }
        }
        let grants = self.granted.entry(host).or_default();
        grants.retain(live);
        if self.counted == Counted::Peers
            && let Some(held) = grants.iter().position(|(_, p)| *p == peer)
        {
            // A renewal: the peer's place moves to now.
            grants.remove(held);
            grants.push_back((now, peer));
            return true;
        }
        if grants.len() >= self.limit {
            return false;
        }
        grants.push_back((now, peer));
        true
    }
}

impl libp2p::relay::RateLimiter for LiveAtHost {
    fn try_next(&mut self, peer: PeerId, address: &Multiaddr, now: Instant) -> bool {
        self.grant(peer, address, now)
    }
}

/// The host an address is at: its IPv4 address, or its IPv6 /64.
fn host_of(address: &Multiaddr) -> Option<IpAddr> {
    address.iter().find_map(|p| match p {
        Protocol::Ip4(ip) => Some(ip.into()),
        Protocol::Ip6(ip) => {
            let prefix = u128::from(ip) & !((1u128 << 64) - 1);
            Some(std::net::Ipv6Addr::from(prefix).into())
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Multiaddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_host_gets_its_share_and_no_more_whatever_its_peer_ids() {
        let mut limiter = LiveAtHost::new(3, Duration::from_secs(60), Counted::Peers);
        let now = Instant::now();
        let flood = at("/ip4/203.0.113.5/tcp/1");
        let granted = (0..100)
            .filter(|_| limiter.grant(PeerId::random(), &flood, now))
            .count();
        assert_eq!(granted, 3);
        // Another host still gets its own.
        assert!(limiter.grant(PeerId::random(), &at("/ip4/198.51.100.1/tcp/1"), now));
        // An IPv6 /64 is one host.
        let v6 = |tail: &str| at(&format!("/ip6/2001:db8:1:2:{tail}/tcp/1"));
        let granted = ["1:1:1:1", "2:2:2:2", "3:3:3:3", "4:4:4:4"]
            .iter()
            .filter(|tail| limiter.grant(PeerId::random(), &v6(tail), now))
            .count();
        assert_eq!(granted, 3);
        // Once the window has passed, the host has its share again.
        assert!(limiter.grant(PeerId::random(), &flood, now + Duration::from_secs(61)));
    }

    #[test]
    fn a_renewing_peer_keeps_its_place_when_peers_are_counted() {
        let mut limiter = LiveAtHost::new(2, Duration::from_secs(60), Counted::Peers);
        let now = Instant::now();
        let host = at("/ip4/203.0.113.5/tcp/1");
        let (a, b) = (PeerId::random(), PeerId::random());
        assert!(limiter.grant(a, &host, now));
        assert!(limiter.grant(b, &host, now));
        assert!(limiter.grant(a, &host, now + Duration::from_secs(30)));
        assert!(!limiter.grant(PeerId::random(), &host, now));

        let mut circuits = LiveAtHost::new(2, Duration::from_secs(60), Counted::Grants);
        assert!(circuits.grant(a, &host, now));
        assert!(circuits.grant(a, &host, now));
        assert!(!circuits.grant(a, &host, now));
    }
}
