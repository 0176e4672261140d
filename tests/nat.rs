//! Nodes behind NATs, on an internet of network namespaces this test makes
//! (`support::netns`): a public node, bootstrap peer and relay of the
//! others, and homes behind routers that translate their addresses, unable
//! to dial each other at first. Each home node finds out it is not
//! reachable, reserves a slot on the public node's relay and is reached
//! through it: the other home finds its agent, calls it and fetches it.
//! Where the routers keep ports, the relayed connection becomes a direct
//! one (hole punching), over TCP and over QUIC; behind a symmetric NAT
//! everything still works, relayed.
//!
//! Skipped, saying why, where the machine does not let a test make
//! network namespaces.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;
use support::behind_nat::{Transport, connections_to, fetched, node, reachable_as, remote_add};
use support::dns::Dns;
use support::netns::{Internet, Nat};
use support::{Cli, eventually};

/// The whole journey over `transport`, the second home behind `second`.
fn homes_behind_nats(transport: Transport, second: Nat) {
    let Some(mut internet) = Internet::new() else {
        return;
    };
    let public = internet.public_host(1);
    let home1 = internet.home(1, Nat::PortPreserving);
    let home2 = internet.home(2, second);
    let [p, h1, h2] = [(); 3].map(|_| Cli::new());
    let calculator = h1.add(&["calculator"]).remove(0);
    // Where holes can be punched, an agent larger than a relay carries in
    // one circuit (4 MiB here), even split between a relayed and a direct
    // connection; where they cannot, one that a circuit carries but that
    // is too large to go through a relay without waiting for a direct
    // connection first.
    let large_file = tempfile::NamedTempFile::new().unwrap();
    let large_size = match second {
        Nat::PortPreserving => 12 << 20,
        Nat::Symmetric => 3 << 20,
    };
    std::fs::write(large_file.path(), support::padded_agent("text", large_size)).unwrap();
    let large = h1
        .run(&["add", large_file.path().to_str().unwrap()])
        .success()
        .trim()
        .to_owned();

    let relay = node(&public, &p, transport, None);
    let relay_id = relay.peer_id().unwrap().to_owned();
    let bootstrap = transport.address(&public, &relay_id);
    let node1 = node(&home1, &h1, transport, Some(&bootstrap));
    let node2 = node(&home2, &h2, transport, Some(&bootstrap));
    let id1 = node1.peer_id().unwrap().to_owned();

    // The public node is found public (the homes dial it back); each home
    // is found unreachable and reserves a slot on the public node's relay.
    let said = reachable_as(&p, &public, "public", "the public node is found public");
    assert!(
        said["reachability"]["addresses"][0]
            .as_str()
            .is_some_and(|a| a.contains(&public.ip.to_string())),
        "{said}"
    );
    for (cli, host, name) in [(&h1, &home1, "home 1"), (&h2, &home2, "home 2")] {
        let said = reachable_as(cli, host, "relayed", &format!("{name} is relayed"));
        assert_eq!(
            said["reachability"]["relays"][0],
            relay_id.as_str(),
            "{said}"
        );
        assert!(
            said["reachability"]["addresses"][0]
                .as_str()
                .is_some_and(|a| a.contains("/p2p-circuit/")),
            "{said}"
        );
    }

    // Home 1 publishes; home 2 finds the agent, calls it where it lives and
    // fetches it, all through the relay at first.
    h1.run_on(&home1, &["publish", &calculator]).success();
    eventually(
        Duration::from_secs(60),
        "home 2 finds the calculator",
        || {
            let found = h2.run_on(&home2, &["search", "add", "--json"]).json();
            match found
                .as_array()
                .is_some_and(|found| found.iter().any(|f| f["id"] == calculator.as_str()))
            {
                true => Ok(()),
                false => Err(found.to_string()),
            }
        },
    );
    let answer = remote_add(&h2, &home2);
    assert_eq!(answer["content"][0]["text"], "5.0", "{answer}");
    fetched(&h2, &home2, &calculator);

    // Where both routers keep ports, the homes end up connected directly,
    // and the large agent, fetched at once, waits for that connection and
    // comes whole. Behind a symmetric NAT the large agent waits for no
    // direct connection once hole punching has failed: home 2 sees its own
    // direct dials fail (DCUtR tells only home 1, which started the punch).
    h1.run_on(&home1, &["publish", &large]).success();
    fetched(&h2, &home2, &large);
    match second {
        Nat::PortPreserving => {
            let direct = transport.name();
            eventually(
                Duration::from_secs(60),
                "the homes connect directly",
                || {
                    let via = connections_to(&h2, &home2, &id1);
                    match via.iter().any(|t| t == direct) {
                        true => Ok(()),
                        false => Err(format!("home 2 reaches home 1 over {via:?}")),
                    }
                },
            );
        }
        Nat::Symmetric => {
            // A second agent of 3 MiB: the two are more than one circuit
            // carries, and the fetch goes on over the next one.
            let second_file = tempfile::NamedTempFile::new().unwrap();
            let mut bytes = support::padded_agent("text", 3 << 20);
            bytes.extend(support::numbered_section(1));
            std::fs::write(second_file.path(), bytes).unwrap();
            let second_id = h1
                .run(&["add", second_file.path().to_str().unwrap(), "--keep-both"])
                .success()
                .trim()
                .to_owned();
            h1.run_on(&home1, &["publish", &second_id]).success();
            fetched(&h2, &home2, &second_id);
            let via = connections_to(&h2, &home2, &id1);
            assert!(
                via.iter().all(|t| t == "relayed"),
                "behind a symmetric NAT no hole is punched: {via:?}"
            );
            let log = node2.log();
            assert!(
                log.contains("through a relay (hole punching to its providers failed)"),
                "home 2 did not go through the relay for hole punching having failed:\n{log}"
            );
        }
    }
    drop((node1, node2, relay));
}

#[test]
fn homes_behind_nats_reach_each_other_through_a_relay_and_then_directly_over_tcp() {
    homes_behind_nats(Transport::Tcp, Nat::PortPreserving);
}

#[test]
fn homes_behind_nats_reach_each_other_through_a_relay_and_then_directly_over_quic() {
    homes_behind_nats(Transport::Quic, Nat::PortPreserving);
}

#[test]
fn a_home_behind_a_symmetric_nat_is_reached_through_the_relay() {
    homes_behind_nats(Transport::Tcp, Nat::Symmetric);
}

#[test]
fn a_home_behind_a_symmetric_nat_is_reached_through_the_relay_over_quic() {
    homes_behind_nats(Transport::Quic, Nat::Symmetric);
}

/// A node joins through a bootstrap peer named in DNS, as the IPFS
/// bootstrap list names its peers: `/dnsaddr/NAME/p2p/ID` resolves, through
/// the system's resolver, to the addresses in the TXT records of
/// `_dnsaddr.NAME`. The name server is the test's own, on a host of its
/// internet; the joining host's resolver asks it.
#[test]
fn a_node_joins_through_a_bootstrap_peer_named_in_dns() {
    let Some(mut internet) = Internet::new() else {
        return;
    };
    let public = internet.public_host(1);
    let name_server = internet.public_host(53);
    let joining = internet.public_host(2);
    internet.resolver(&joining, name_server.ip);
    let [b, j] = [(); 2].map(|_| Cli::new());
    let boot = node(&public, &b, Transport::Tcp, None);
    let boot_id = boot.peer_id().unwrap().to_owned();
    let _dns = Dns::serve(
        &name_server,
        HashMap::from([(
            "_dnsaddr.boot.agentsite.test".to_owned(),
            vec![format!(
                "dnsaddr={}",
                Transport::Tcp.address(&public, &boot_id)
            )],
        )]),
    );
    let bootstrap = format!("/dnsaddr/boot.agentsite.test/p2p/{boot_id}");
    let joined = node(&joining, &j, Transport::Tcp, Some(&bootstrap));
    eventually(
        Duration::from_secs(30),
        "the node joins through the bootstrap peer's name",
        || match connections_to(&j, &joining, &boot_id).as_slice() {
            [] => Err("not connected to the bootstrap peer".to_owned()),
            _ => Ok(()),
        },
    );
    drop((joined, boot));
}
