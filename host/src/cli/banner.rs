//! What `agentsite serve` says as it starts: every address it listens on,
//! for HTTP and for peers, and which of them other machines can reach.
//!
//! A node listens for peers on every interface by default (a peer-to-peer
//! node others cannot dial serves nobody), while HTTP stays on loopback:
//! the banner says so, and how to keep peers on this machine, instead of
//! leaving an operator to find out from `ss`.

use crate::net::Multiaddr;
use libp2p::multiaddr::Protocol;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// What the node listens on.
pub struct Listening<'a> {
    /// Its peer id and addresses, when it is on the network.
    pub peers: Option<Peers<'a>>,
    /// Where its HTTP surfaces listen.
    pub http: SocketAddr,
    pub agents: usize,
}

/// Where a node on the network listens for peers.
pub struct Peers<'a> {
    pub peer_id: String,
    /// The addresses it listens at, as it found them (an unspecified
    /// address stands for each of the machine's interfaces).
    pub addresses: &'a [String],
    /// The addresses it was told to listen on.
    pub listen: &'a [Multiaddr],
}

/// The banner's lines, in order. The `peer id … listening on …` line and
/// the first line with `at http://` are the ones scripts wait for.
pub fn lines(listening: &Listening) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(peers) = &listening.peers {
        lines.push(format!(
            "peer id {} listening on {}",
            peers.peer_id,
            peers.addresses.join(" ")
        ));
        let open: Vec<&Multiaddr> = peers.listen.iter().filter(|a| !on_loopback(a)).collect();
        if open.is_empty() {
            lines.push(
                "  peers: this machine only (--p2p-listen /ip4/0.0.0.0/tcp/4077 lets other machines connect)"
                    .to_owned(),
            );
        } else {
            let shown: Vec<String> = open.iter().map(|a| a.to_string()).collect();
            let kept: Vec<String> = open
                .iter()
                .map(|a| format!("--p2p-listen {}", on_own_loopback(a)))
                .collect();
            lines.push(format!(
                "  peers: other machines can connect ({}); to keep peers on this machine: agentsite serve {} (or `listen` under [p2p] in the config); --no-p2p keeps the node off the network",
                shown.join(", "),
                kept.join(" ")
            ));
        }
    }
    let http = listening.http;
    lines.push(format!(
        "serving {} over MCP at http://{http}/mcp and the node's models at http://{http}/v1 (health: /health); pages at http://{http}/",
        super::counted(listening.agents, "agent")
    ));
    lines.push(if http.ip().is_loopback() {
        "  HTTP: this machine only (--listen 0.0.0.0:7777 with --token opens it to others)".to_owned()
    } else {
        format!(
            "  HTTP: other machines can connect ({http}); --listen 127.0.0.1:{} keeps it on this machine",
            http.port()
        )
    });
    lines
}

/// Whether only this machine can reach `address`.
fn on_loopback(address: &Multiaddr) -> bool {
    match address.iter().next() {
        Some(Protocol::Ip4(ip)) => ip.is_loopback(),
        Some(Protocol::Ip6(ip)) => ip.is_loopback(),
        Some(Protocol::Dns(name) | Protocol::Dns4(name) | Protocol::Dns6(name)) => {
            name.eq_ignore_ascii_case("localhost")
        }
        // A memory address, say: not on any network.
        Some(Protocol::Memory(_)) => true,
        _ => false,
    }
}

/// `address` with its host made this machine's loopback of the same
/// family: the same port and transport, reachable from here only.
fn on_own_loopback(address: &Multiaddr) -> Multiaddr {
    let mut protocols = address.iter();
    let first = match protocols.next() {
        Some(Protocol::Ip6(_) | Protocol::Dns6(_)) => Protocol::Ip6(Ipv6Addr::LOCALHOST),
        _ => Protocol::Ip4(Ipv4Addr::LOCALHOST),
    };
    std::iter::once(first).chain(protocols).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening<'a>(addresses: &'a [String], listen: &'a [Multiaddr], http: &str) -> Vec<String> {
        lines(&Listening {
            peers: Some(Peers {
                peer_id: "12D3KooWexample".into(),
                addresses,
                listen,
            }),
            http: http.parse().unwrap(),
            agents: 2,
        })
    }

    #[test]
    fn the_default_says_peers_are_open_and_how_to_keep_them_here() {
        let listen: Vec<Multiaddr> = ["/ip4/0.0.0.0/tcp/4077", "/ip4/0.0.0.0/udp/4077/quic-v1"]
            .map(|a| a.parse().unwrap())
            .into();
        let addresses = [
            "/ip4/127.0.0.1/tcp/4077/p2p/12D3KooWexample".to_owned(),
            "/ip4/192.0.2.5/tcp/4077/p2p/12D3KooWexample".to_owned(),
        ];
        let said = listening(&addresses, &listen, "127.0.0.1:7777");
        assert_eq!(
            said,
            [
                "peer id 12D3KooWexample listening on /ip4/127.0.0.1/tcp/4077/p2p/12D3KooWexample /ip4/192.0.2.5/tcp/4077/p2p/12D3KooWexample",
                "  peers: other machines can connect (/ip4/0.0.0.0/tcp/4077, /ip4/0.0.0.0/udp/4077/quic-v1); to keep peers on this machine: agentsite serve --p2p-listen /ip4/127.0.0.1/tcp/4077 --p2p-listen /ip4/127.0.0.1/udp/4077/quic-v1 (or `listen` under [p2p] in the config); --no-p2p keeps the node off the network",
                "serving 2 agents over MCP at http://127.0.0.1:7777/mcp and the node's models at http://127.0.0.1:7777/v1 (health: /health); pages at http://127.0.0.1:7777/",
                "  HTTP: this machine only (--listen 0.0.0.0:7777 with --token opens it to others)",
            ]
        );
    }

    #[test]
    fn loopback_peers_and_open_http_are_told_apart() {
        let listen: Vec<Multiaddr> = ["/ip6/::1/tcp/0", "/ip4/127.0.0.1/tcp/0"]
            .map(|a| a.parse().unwrap())
            .into();
        let said = listening(&[], &listen, "0.0.0.0:8080");
        assert_eq!(
            said[1],
            "  peers: this machine only (--p2p-listen /ip4/0.0.0.0/tcp/4077 lets other machines connect)"
        );
        assert_eq!(
            said[3],
            "  HTTP: other machines can connect (0.0.0.0:8080); --listen 127.0.0.1:8080 keeps it on this machine"
        );
        let v6: Multiaddr = "/ip6/::/udp/9/quic-v1".parse().unwrap();
        assert_eq!(on_own_loopback(&v6).to_string(), "/ip6/::1/udp/9/quic-v1");
    }
}
