//! Whether other nodes can dial this one, and what the node does about it.
//!
//! AutoNAT v2 asks peers to dial back the addresses others see this node at
//! (identify's observed addresses). One that answers makes the node
//! *public*; tests that keep failing, with none passing, make it *private*:
//! behind a NAT or a firewall. A private node reserves a slot on up to
//! [`RELAYS_WANTED`] relays (circuit relay v2) among its peers that offer
//! it, and listens through them: its relayed addresses are what others dial.
//! A connection that arrives through a relay is upgraded to a direct one by
//! hole punching (DCUtR) where the two NATs allow it.
//!
//! A public node may relay for others ([`RelayService`]), within
//! [`RelayLimits`]. The default is to relay once AutoNAT has found the node
//! public, as kubo (IPFS) does: a network of home nodes needs the few public
//! ones to relay, and the limits keep the cost to an operator small.

use libp2p::multiaddr::Protocol;
use libp2p::{Multiaddr, PeerId, relay};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// How many relays a private node keeps a reservation on.
pub const RELAYS_WANTED: usize = 2;

/// How long a peer that refused or dropped a reservation is left alone.
const REFUSED_BACKOFF: Duration = Duration::from_secs(60);

/// Failed AutoNAT tests, with none passed, after which a node is private.
/// One is enough: a node behind a NAT usually has one public peer to ask
/// and one address it is seen at, and each address is tested once. A
/// server cannot fake a pass (it must dial back with the test's nonce); a
/// false failure only costs a relay reservation until a pass comes.
const FAILURES_FOR_PRIVATE: usize = 1;

/// Whether a node relays for others.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelayService {
    /// Once AutoNAT has found the node public (the default).
    #[default]
    Auto,
    /// Always: for a node known to be public, such as a bootstrap node.
    On,
    /// Never.
    Off,
}

/// What a relaying node grants others, per the circuit relay v2 protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RelayLimits {
    /// Reservations held at once, in all and per peer.
    pub reservations: usize,
    pub reservations_per_peer: usize,
    /// Live reservations per host (an IPv4 address, an IPv6 /64), whatever
    /// its peer ids (see [`super::relay_hosts`]).
    pub reservations_per_ip: usize,
    /// How long a reservation lasts before the peer must renew it.
    #[serde(with = "crate::config::humantime_serde_compat")]
    pub reservation_duration: Duration,
    /// Circuits (relayed connections) at once, in all and per peer.
    pub circuits: usize,
    pub circuits_per_peer: usize,
    /// Live circuits opened from one host.
    pub circuits_per_ip: usize,
    /// How long one circuit may last, and how many bytes it may carry each
    /// way, before the relay closes it: enough for a call and to punch a
    /// hole, not to serve as a free tunnel.
    #[serde(with = "crate::config::humantime_serde_compat")]
    pub circuit_duration: Duration,
    pub circuit_bytes: u64,
}

impl Default for RelayLimits {
    fn default() -> Self {
        RelayLimits {
            reservations: 128,
            reservations_per_peer: 2,
            reservations_per_ip: 8,
            reservation_duration: Duration::from_secs(60 * 60),
            circuits: 32,
            circuits_per_peer: 4,
            circuits_per_ip: 8,
            circuit_duration: Duration::from_secs(2 * 60),
            circuit_bytes: 4 << 20,
        }
    }
}

impl RelayLimits {
    /// libp2p's relay settings for these limits, with its per-peer and
    /// per-IP rate limits on new reservations and circuits, and the limits
    /// per host consulted last (when the relay is about to grant).
    pub(super) fn config(&self) -> relay::Config {
        use super::relay_hosts::{Counted, LiveAtHost};
        let per_minute = |n: u32| NonZeroU32::new(n).expect("a positive rate");
        let mut config = relay::Config {
            max_reservations: self.reservations,
            max_reservations_per_peer: self.reservations_per_peer,
            reservation_duration: self.reservation_duration,
            max_circuits: self.circuits,
            max_circuits_per_peer: self.circuits_per_peer,
            max_circuit_duration: self.circuit_duration,
            max_circuit_bytes: self.circuit_bytes,
            reservation_rate_limiters: Vec::new(),
            circuit_src_rate_limiters: Vec::new(),
        }
        .reservation_rate_per_peer(per_minute(30), Duration::from_secs(120))
        .reservation_rate_per_ip(per_minute(60), Duration::from_secs(60))
        .circuit_src_per_peer(per_minute(30), Duration::from_secs(120))
        .circuit_src_per_ip(per_minute(60), Duration::from_secs(60));
        config
            .reservation_rate_limiters
            .push(Box::new(LiveAtHost::new(
                self.reservations_per_ip,
                self.reservation_duration,
                Counted::Peers,
            )));
        config
            .circuit_src_rate_limiters
            .push(Box::new(LiveAtHost::new(
                self.circuits_per_ip,
                self.circuit_duration,
                Counted::Grants,
            )));
        config
    }
}

/// What a node knows of its own reachability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Reachability {
    /// No test has passed or failed enough yet.
    Unknown,
    /// Peers dialed it back at these addresses.
    Public { addresses: Vec<String> },
    /// Peers could not dial it back: it is reached through relays.
    Relayed {
        /// The relays it holds a reservation on (peer ids).
        relays: Vec<String>,
        /// The addresses through them, each ending in `/p2p-circuit/p2p/<id>`.
        addresses: Vec<String>,
    },
}

/// A reservation asked of a relay, by the listener made for it.
#[derive(Debug, Clone)]
struct Reservation {
    relay: PeerId,
    /// `<relay address>/p2p/<relay>/p2p-circuit`.
    address: Multiaddr,
    accepted: bool,
}

/// The reachability bookkeeping of one node.
#[derive(Debug, Default)]
pub(super) struct Reach {
    confirmed: HashSet<Multiaddr>,
    failed_tests: usize,
    reservations: HashMap<libp2p::core::transport::ListenerId, Reservation>,
    /// Peers that refused or dropped a reservation, and when: not asked
    /// again for [`REFUSED_BACKOFF`].
    refused: HashMap<PeerId, Instant>,
}

/// A peer that might relay for this node.
pub(super) struct RelayCandidate<'a> {
    pub peer: PeerId,
    /// Identify said it relays.
    pub offers_relay: bool,
    /// This node dialed it directly: it is reachable, and may relay though
    /// identify has not said so (a node that finds itself public starts
    /// relaying after its peers identified it, and not every peer hears).
    pub dialed: bool,
    pub addresses: &'a HashSet<Multiaddr>,
}

impl Reach {
    /// An AutoNAT test of `address` passed.
    pub fn passed(&mut self, address: Multiaddr) {
        self.confirmed.insert(address);
    }

    /// An AutoNAT test failed.
    pub fn failed(&mut self) {
        self.failed_tests += 1;
    }

    /// A confirmed address went away.
    pub fn expired(&mut self, address: &Multiaddr) {
        self.confirmed.remove(address);
    }

    /// Whether the node is known to be public.
    pub fn is_public(&self) -> bool {
        !self.confirmed.is_empty()
    }

    /// Whether the node is known to be unreachable without a relay.
    pub fn is_private(&self) -> bool {
        self.confirmed.is_empty() && self.failed_tests >= FAILURES_FOR_PRIVATE
    }

    /// What the node knows of itself now; `me` ends the relayed addresses.
    pub fn reachability(&self, me: PeerId) -> Reachability {
        if self.is_public() {
            let mut addresses: Vec<String> =
                self.confirmed.iter().map(ToString::to_string).collect();
            addresses.sort();
            return Reachability::Public { addresses };
        }
        let accepted: Vec<&Reservation> =
            self.reservations.values().filter(|r| r.accepted).collect();
        if self.is_private() || !accepted.is_empty() {
            let mut relays: Vec<String> = accepted.iter().map(|r| r.relay.to_string()).collect();
            let mut addresses: Vec<String> = accepted
                .iter()
                .map(|r| r.address.clone().with(Protocol::P2p(me)).to_string())
                .collect();
            relays.sort();
            addresses.sort();
            return Reachability::Relayed { relays, addresses };
        }
        Reachability::Unknown
    }

    /// Relays to ask for a reservation at `now`, with the circuit address to
    /// listen on for each: while the node is private and holds fewer than
    /// [`RELAYS_WANTED`], among `peers` that offer relaying (first) or that
    /// this node dialed, and have an address it can dial them at; not those
    /// that refused in the last [`REFUSED_BACKOFF`].
    pub fn relays_to_ask<'a>(
        &mut self,
        peers: impl Iterator<Item = RelayCandidate<'a>>,
        now: Instant,
    ) -> Vec<(PeerId, Multiaddr)> {
        if !self.is_private() {
            return Vec::new();
        }
        self.refused
            .retain(|_, when| now.duration_since(*when) < REFUSED_BACKOFF);
        let held: HashSet<PeerId> = self.reservations.values().map(|r| r.relay).collect();
        let mut wanted = RELAYS_WANTED.saturating_sub(held.len());
        let mut chosen = Vec::new();
        let mut candidates: Vec<RelayCandidate> = peers
            .filter(|p| {
                (p.offers_relay || p.dialed)
                    && !held.contains(&p.peer)
                    && !self.refused.contains_key(&p.peer)
            })
            .collect();
        // Those that say they relay first; otherwise the order is the
        // peers' ids, which spreads nodes over relays without coordination.
        candidates.sort_by_key(|p| (!p.offers_relay, p.peer));
        for candidate in candidates {
            if wanted == 0 {
                break;
            }
            let Some(address) = dialable(candidate.addresses) else {
                continue;
            };
            let circuit = address
                .with(Protocol::P2p(candidate.peer))
                .with(Protocol::P2pCircuit);
            chosen.push((candidate.peer, circuit));
            wanted -= 1;
        }
        chosen
    }

    /// A listener was made to reserve a slot on `relay`.
    pub fn asked(
        &mut self,
        listener: libp2p::core::transport::ListenerId,
        relay: PeerId,
        address: Multiaddr,
    ) {
        self.reservations.insert(
            listener,
            Reservation {
                relay,
                address,
                accepted: false,
            },
        );
    }

    /// `relay` accepted (or renewed) a reservation.
    pub fn accepted(&mut self, relay: PeerId) {
        for reservation in self.reservations.values_mut() {
            if reservation.relay == relay {
                reservation.accepted = true;
            }
        }
        self.refused.remove(&relay);
    }

    /// A listener closed at `now`: if it held a reservation (or asked for
    /// one), the relay is left alone for a while.
    pub fn closed(
        &mut self,
        listener: libp2p::core::transport::ListenerId,
        now: Instant,
    ) -> Option<PeerId> {
        let reservation = self.reservations.remove(&listener)?;
        self.refused.insert(reservation.relay, now);
        Some(reservation.relay)
    }
}

/// The address to dial a relay at: one that is not itself relayed, and not
/// a loopback one (a peer's loopback address is this machine's) unless
/// there is nothing else.
fn dialable(addresses: &HashSet<Multiaddr>) -> Option<Multiaddr> {
    addresses
        .iter()
        .filter(|a| !is_relayed(a))
        .min_by_key(|a| (is_loopback(a), a.to_vec()))
        .map(strip_peer)
}

/// Whether `address` is on this machine's loopback interface.
pub fn is_loopback(address: &Multiaddr) -> bool {
    address.iter().any(|p| match p {
        Protocol::Ip4(ip) => ip.is_loopback(),
        Protocol::Ip6(ip) => ip.is_loopback(),
        _ => false,
    })
}

/// Whether a connection that `remote` opened to this node at `local` shows
/// that others can dial the node there. A public node whose peers all sit
/// behind NATs never dials out, so it has nobody to ask for an AutoNAT test:
/// the peers dialing in are its proof. Only from a public address, not
/// through a relay, and to a definite address of this node: a peer on the
/// same LAN (or this machine) dialing in proves nothing about the internet.
pub fn dialed_in_at(local: &Multiaddr, remote: &Multiaddr) -> Option<Multiaddr> {
    if is_relayed(local) || is_relayed(remote) {
        return None;
    }
    (public_ip(local).is_some() && public_ip(remote).is_some()).then(|| strip_peer(local))
}

/// The public IP address `address` reaches a host at: none for a relayed
/// address (its IP is the relay's), a name, or a private, loopback, link-local
/// or carrier-grade NAT address, which many unrelated hosts share.
pub fn public_ip(address: &Multiaddr) -> Option<std::net::IpAddr> {
    if is_relayed(address) {
        return None;
    }
    address.iter().find_map(|p| match p {
        Protocol::Ip4(ip)
            if !(ip.is_private()
                || ip.is_loopback()
                || ip.is_link_local()
                || ip.is_unspecified()
                || ip.is_broadcast()
                // Carrier-grade NAT (100.64.0.0/10).
                || (ip.octets()[0] == 100 && ip.octets()[1] & 0xc0 == 64)) =>
        {
            Some(ip.into())
        }
        Protocol::Ip6(ip)
            if !(ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_unique_local()
                || ip.is_unicast_link_local()) =>
        {
            Some(ip.into())
        }
        _ => None,
    })
}

/// Whether `address` goes through a relay.
pub fn is_relayed(address: &Multiaddr) -> bool {
    address.iter().any(|p| p == Protocol::P2pCircuit)
}

/// The transport an address is over, as a person names it.
pub fn transport(address: &Multiaddr) -> &'static str {
    let mut name = "other";
    for protocol in address.iter() {
        match protocol {
            Protocol::P2pCircuit => return "relayed",
            Protocol::QuicV1 | Protocol::Quic => name = "quic",
            Protocol::Tcp(_) if name == "other" => name = "tcp",
            Protocol::Memory(_) => name = "memory",
            _ => {}
        }
    }
    name
}

/// `address` without a trailing `/p2p/<id>`.
fn strip_peer(address: &Multiaddr) -> Multiaddr {
    let mut bare = address.clone();
    if matches!(bare.iter().last(), Some(Protocol::P2p(_))) {
        bare.pop();
    }
    bare
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> Multiaddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_node_is_public_once_a_test_passes_and_private_after_failures_alone() {
        let me = PeerId::random();
        let mut reach = Reach::default();
        assert_eq!(reach.reachability(me), Reachability::Unknown);
        assert!(!reach.is_private() && !reach.is_public());
        reach.failed();
        assert!(reach.is_private());
        assert_eq!(
            reach.reachability(me),
            Reachability::Relayed {
                relays: vec![],
                addresses: vec![]
            }
        );
        reach.passed(address("/ip4/203.0.113.7/tcp/4077"));
        assert!(reach.is_public() && !reach.is_private());
        assert_eq!(
            reach.reachability(me),
            Reachability::Public {
                addresses: vec!["/ip4/203.0.113.7/tcp/4077".into()]
            }
        );
        reach.expired(&address("/ip4/203.0.113.7/tcp/4077"));
        assert!(reach.is_private());
    }

    #[test]
    fn a_private_node_asks_two_relays_that_offer_it_and_leaves_one_that_refused_alone() {
        let mut reach = Reach::default();
        let [a, b, c, d, e] = [(); 5].map(|_| PeerId::random());
        let direct: HashSet<Multiaddr> = [address("/ip4/198.51.100.1/tcp/4077")].into();
        let relayed_only: HashSet<Multiaddr> =
            [address("/ip4/198.51.100.2/tcp/4077/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA/p2p-circuit")].into();
        let start = Instant::now();
        let ask = |reach: &mut Reach, offering_e: bool, now: Instant| {
            reach.relays_to_ask(
                [
                    RelayCandidate {
                        peer: a,
                        offers_relay: true,
                        dialed: false,
                        addresses: &direct,
                    },
                    RelayCandidate {
                        peer: b,
                        offers_relay: false,
                        dialed: false,
                        addresses: &direct,
                    },
                    RelayCandidate {
                        peer: c,
                        offers_relay: true,
                        dialed: true,
                        addresses: &relayed_only,
                    },
                    RelayCandidate {
                        peer: d,
                        offers_relay: true,
                        dialed: false,
                        addresses: &direct,
                    },
                    RelayCandidate {
                        peer: e,
                        offers_relay: offering_e,
                        dialed: true,
                        addresses: &direct,
                    },
                ]
                .into_iter(),
                now,
            )
        };
        // Not known to be private: no relay.
        assert!(ask(&mut reach, false, start).is_empty());
        reach.failed();
        let asked = ask(&mut reach, false, start);
        let relays: HashSet<PeerId> = asked.iter().map(|(p, _)| *p).collect();
        assert_eq!(
            relays,
            [a, d].into(),
            "b offers no relay and was not dialed, c has no direct address, e only may relay"
        );
        let (relay, circuit) = &asked[0];
        assert_eq!(
            circuit.to_string(),
            format!("/ip4/198.51.100.1/tcp/4077/p2p/{relay}/p2p-circuit")
        );

        // One listener per reservation; an accepted one shows.
        let listeners: Vec<_> = asked
            .iter()
            .map(|(relay, circuit)| {
                let id = libp2p::core::transport::ListenerId::next();
                reach.asked(id, *relay, circuit.clone());
                id
            })
            .collect();
        assert!(
            ask(&mut reach, false, start).is_empty(),
            "two relays are enough"
        );
        reach.accepted(a);
        let me = PeerId::random();
        match reach.reachability(me) {
            Reachability::Relayed { relays, addresses } => {
                assert_eq!(relays, vec![a.to_string()]);
                assert!(addresses[0].ends_with(&format!("/p2p/{a}/p2p-circuit/p2p/{me}")));
            }
            other => panic!("{other:?}"),
        }

        // A relay that drops the reservation is left alone for a while; a
        // peer this node dialed is asked in its place.
        let dropped = asked.iter().position(|(p, _)| *p == d).unwrap();
        assert_eq!(reach.closed(listeners[dropped], start), Some(d));
        let again = ask(&mut reach, false, start + Duration::from_secs(1));
        assert_eq!(again.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![e]);
        let listener = libp2p::core::transport::ListenerId::next();
        reach.asked(listener, e, again[0].1.clone());
        assert_eq!(
            reach.closed(listener, start + Duration::from_secs(1)),
            Some(e)
        );
        assert!(ask(&mut reach, true, start + Duration::from_secs(2)).is_empty());
        // After the back-off, d is asked again.
        let later = ask(
            &mut reach,
            false,
            start + REFUSED_BACKOFF + Duration::from_secs(1),
        );
        assert_eq!(later.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![d]);
    }

    #[test]
    fn a_peer_dialing_in_from_a_public_address_shows_the_node_reachable() {
        let here = address("/ip4/203.0.113.1/tcp/4077");
        assert_eq!(
            dialed_in_at(&here, &address("/ip4/198.51.100.9/tcp/51000")),
            Some(here.clone())
        );
        for remote in [
            "/ip4/10.1.0.2/tcp/51000",
            "/ip4/192.168.1.5/tcp/51000",
            "/ip4/127.0.0.1/tcp/51000",
            "/ip4/100.64.1.1/tcp/51000",
        ] {
            assert_eq!(dialed_in_at(&here, &address(remote)), None, "{remote}");
        }
        assert_eq!(
            dialed_in_at(
                &address("/ip4/192.168.1.2/tcp/4077"),
                &address("/ip4/198.51.100.9/tcp/1")
            ),
            None,
            "a private address of this node is not where the internet reaches it"
        );
    }

    #[test]
    fn transports_are_named_as_a_person_reads_them() {
        assert_eq!(transport(&address("/ip4/1.2.3.4/tcp/1")), "tcp");
        assert_eq!(transport(&address("/ip4/1.2.3.4/udp/1/quic-v1")), "quic");
        assert_eq!(transport(&address("/memory/7")), "memory");
        assert_eq!(
            transport(&address(
                "/ip4/1.2.3.4/tcp/1/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA/p2p-circuit"
            )),
            "relayed"
        );
    }
}
