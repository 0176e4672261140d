//! Nodes on an internet of network namespaces (`netns`): starting them,
//! and what they say of their reachability and connections. Shared by the
//! NAT tests and the NAT benchmark.

use super::netns::Host;
use super::{Cli, Server, eventually};
use serde_json::Value;
use std::time::Duration;

/// The port every node listens on, in its own namespace.
pub const PORT: u16 = 4077;

/// How a test's nodes reach each other.
#[derive(Clone, Copy)]
pub enum Transport {
    Tcp,
    Quic,
}

impl Transport {
    pub fn listen(self) -> String {
        match self {
            Transport::Tcp => format!("/ip4/0.0.0.0/tcp/{PORT}"),
            Transport::Quic => format!("/ip4/0.0.0.0/udp/{PORT}/quic-v1"),
        }
    }

    pub fn address(self, host: &Host, peer: &str) -> String {
        match self {
            Transport::Tcp => format!("/ip4/{}/tcp/{PORT}/p2p/{peer}", host.ip),
            Transport::Quic => format!("/ip4/{}/udp/{PORT}/quic-v1/p2p/{peer}", host.ip),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Quic => "quic",
        }
    }
}

/// A node serving on `host`, joining through `bootstrap` if given.
pub fn node(host: &Host, cli: &Cli, transport: Transport, bootstrap: Option<&str>) -> Server {
    let listen = transport.listen();
    // At info, the log says how a large fetch went (tests read it).
    let mut args = vec!["-v", "--p2p-listen", listen.as_str()];
    if let Some(bootstrap) = bootstrap {
        args.extend(["--bootstrap", bootstrap]);
    }
    let server = Server::start_on(Some(host), cli.data(), &args);
    assert!(server.p2p.is_some(), "the node printed no libp2p address");
    server
}

/// What `agentsite id --json` says on `host`, once its reachability is `state`.
pub fn reachable_as(cli: &Cli, host: &Host, state: &str, what: &str) -> Value {
    eventually(Duration::from_secs(90), what, || {
        let id = cli.run_on(host, &["id", "--json"]).json();
        match id["reachability"]["state"].as_str() {
            Some(s)
                if s == state
                    && (state != "relayed" || id["reachability"]["relays"][0].is_string()) =>
            {
                Ok(id)
            }
            _ => Err(id.to_string()),
        }
    })
}

/// The transports of `cli`'s connections to `peer` on `host`.
pub fn connections_to(cli: &Cli, host: &Host, peer: &str) -> Vec<String> {
    let peers = cli.run_on(host, &["peers", "--json"]).json();
    peers
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["peer_id"] == peer)
        .flat_map(|p| p["connections"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["transport"].as_str().map(str::to_owned))
        .collect()
}

/// Fetches the agent `id` with `cli` on `host` and checks it is installed.
pub fn fetched(cli: &Cli, host: &Host, id: &str) {
    cli.run_on(host, &["fetch", id]).success();
    let installed = cli.run_on(host, &["ls", "--json"]).json();
    assert!(
        installed.as_array().unwrap().iter().any(|a| a["id"] == id),
        "{installed}"
    );
}

/// `agentsite call --remote calculator add {"a": 2, "b": 3} --json` with
/// `cli` on `host`: the calculator found on the network and called where
/// it lives.
pub fn remote_add(cli: &Cli, host: &Host) -> Value {
    let arguments = r#"{"a": 2, "b": 3}"#;
    cli.run_on(
        host,
        &["call", "--remote", "calculator", "add", arguments, "--json"],
    )
    .json()
}
