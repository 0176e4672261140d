//! When a node's listeners have started: each has reported an address, and
//! one on an unspecified address (`0.0.0.0`, `::`) has reported one for each
//! of the machine's interface addresses of its family.
//!
//! A transport reports the interfaces of an unspecified listener one event
//! at a time, as its interface watcher hears of them, so "each listener has
//! an address" is not yet "the node knows where it listens": the start
//! banner printed then names some interfaces for TCP and fewer for QUIC.

use libp2p::Multiaddr;
use libp2p::core::transport::ListenerId;
use libp2p::multiaddr::Protocol;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// The listeners a node opened and the addresses they have reported.
#[derive(Default)]
pub(super) struct Startup {
    listeners: HashMap<ListenerId, Listener>,
}

#[derive(Default)]
struct Listener {
    heard: HashSet<IpAddr>,
    /// The interface addresses it will report, for one on an unspecified
    /// address; `None` for one on a single address.
    awaited: Option<HashSet<IpAddr>>,
}

impl Startup {
    /// Notes a listener opened on `address`, on a machine whose interfaces
    /// have `interfaces`.
    pub(super) fn opened(&mut self, id: ListenerId, address: &Multiaddr, interfaces: &[IpAddr]) {
        let awaited = match address.iter().next() {
            Some(Protocol::Ip4(ip)) if ip.is_unspecified() => {
                Some(interfaces.iter().filter(|i| i.is_ipv4()).copied().collect())
            }
            Some(Protocol::Ip6(ip)) if ip.is_unspecified() => {
                Some(interfaces.iter().filter(|i| i.is_ipv6()).copied().collect())
            }
            _ => None,
        };
        self.listeners.insert(
            id,
            Listener {
                heard: HashSet::new(),
                awaited,
            },
        );
    }

    /// Notes that listener `id` reported `address`.
    pub(super) fn reported(&mut self, id: ListenerId, address: &Multiaddr) {
        let Some(listener) = self.listeners.get_mut(&id) else {
            return;
        };
        let ip = match address.iter().next() {
            Some(Protocol::Ip4(ip)) => IpAddr::V4(ip),
            Some(Protocol::Ip6(ip)) => IpAddr::V6(ip),
            // Not an IP address (a memory transport's, say): it counts as
            // the listener's address all the same.
            _ => IpAddr::from([0, 0, 0, 0]),
        };
        listener.heard.insert(ip);
    }

    /// Whether every listener has reported an address.
    pub(super) fn each_has_an_address(&self) -> bool {
        self.listeners.values().all(|l| !l.heard.is_empty())
    }

    /// Whether every listener has reported every address it will.
    pub(super) fn complete(&self) -> bool {
        self.listeners.values().all(|l| match &l.awaited {
            Some(awaited) => !l.heard.is_empty() && awaited.is_subset(&l.heard),
            None => !l.heard.is_empty(),
        })
    }
}

/// The machine's interface addresses; none when they cannot be read (then
/// the node waits for one address per listener only).
pub(super) fn interface_addresses() -> Vec<IpAddr> {
    match if_addrs::get_if_addrs() {
        Ok(interfaces) => interfaces.iter().map(|i| i.ip()).collect(),
        Err(e) => {
            tracing::debug!("cannot read the interface addresses: {e}");
            Vec::new()
        }
    }
}

/// Refuses a TCP listen address whose port another process holds.
/// libp2p's TCP listeners set SO_REUSEPORT (so that dials can leave from
/// the listening port, which hole punching needs), and so a second node
/// given the same port would bind it beside the first, the kernel sharing
/// connections between them. A plain bind, as the HTTP listener's, is
/// refused while another socket holds the port: it is tried first and
/// dropped. QUIC's UDP socket is bound plainly and refused by itself.
pub(super) fn refuse_if_taken(address: &Multiaddr) -> anyhow::Result<()> {
    let mut parts = address.iter();
    let ip: std::net::IpAddr = match parts.next() {
        Some(Protocol::Ip4(ip)) => ip.into(),
        Some(Protocol::Ip6(ip)) => ip.into(),
        _ => return Ok(()),
    };
    let Some(Protocol::Tcp(port)) = parts.next() else {
        return Ok(());
    };
    if port == 0 {
        return Ok(());
    }
    std::net::TcpListener::bind((ip, port))
        .map(drop)
        .map_err(|e| crate::http::options::cannot_listen(&address.to_string(), &e, "--p2p-listen"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Multiaddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_unspecified_listener_is_complete_once_each_interface_of_its_family_reported() {
        let interfaces: Vec<IpAddr> = ["127.0.0.1", "203.0.113.1", "::1"]
            .iter()
            .map(|ip| ip.parse().unwrap())
            .collect();
        let (tcp, quic) = (ListenerId::next(), ListenerId::next());
        let mut startup = Startup::default();
        startup.opened(tcp, &at("/ip4/0.0.0.0/tcp/4077"), &interfaces);
        startup.opened(quic, &at("/ip4/0.0.0.0/udp/4077/quic-v1"), &interfaces);
        assert!(!startup.each_has_an_address());
        startup.reported(tcp, &at("/ip4/127.0.0.1/tcp/4077"));
        startup.reported(tcp, &at("/ip4/203.0.113.1/tcp/4077"));
        startup.reported(quic, &at("/ip4/127.0.0.1/udp/4077/quic-v1"));
        assert!(startup.each_has_an_address());
        assert!(!startup.complete(), "QUIC has not reported 203.0.113.1");
        startup.reported(quic, &at("/ip4/203.0.113.1/udp/4077/quic-v1"));
        assert!(
            startup.complete(),
            "::1 is not an IPv4 listener's to report"
        );
    }

    #[test]
    fn a_listener_on_one_address_is_complete_with_it() {
        let mut startup = Startup::default();
        let id = ListenerId::next();
        startup.opened(id, &at("/ip4/127.0.0.1/tcp/0"), &[]);
        assert!(!startup.complete());
        startup.reported(id, &at("/ip4/127.0.0.1/tcp/40123"));
        assert!(startup.complete());
        // A report from a listener it did not open (a relay circuit's)
        // changes nothing.
        startup.reported(ListenerId::next(), &at("/ip4/10.0.0.1/tcp/1"));
        assert!(startup.complete());
    }
}
