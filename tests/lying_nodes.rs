//! A hundred nodes of which a fifth lie: half drop every DHT request, half
//! answer every request with each other and keep nothing they are sent.
//! Agents published by honest nodes are still found by keyword and by id in
//! at least 99% of a thousand lookups; the nodes that drop requests are
//! struck out of routing tables. The same lookups among the honest nodes
//! before the liars join are the baseline the figures printed compare with
//! (BENCHMARKS.md). In-process nodes on the memory transport;
//! the liars are libp2p swarms of their own (`support::liars`).

use crate::support;

use agentsite::net::{Keypair, PeerId};
use std::collections::HashSet;
use std::time::Duration;
use support::liars::{Liar, Lie, Wire};
use support::lookups::{look_up, publish_agents};
use support::testnet::{SplitMix, Testnet};

const HONEST: usize = 80;
const LIARS: usize = 20;
const AGENTS: usize = 20;
const LOOKUPS: usize = 1000;

/// Entries of `peers` in the routing tables of `net`'s nodes at `nodes`.
pub async fn entries_of(net: &Testnet, nodes: &[usize], peers: &HashSet<PeerId>) -> usize {
    let mut entries = 0;
    for node in nodes {
        let table = net.nodes[*node].network.routing_table().await.unwrap();
        entries += table.iter().filter(|peer| peers.contains(peer)).count();
    }
    entries
}

/// Starts `count` liars, alternately dropping and misleading, each joining
/// through three random nodes of `net`; the misleading ones know each other.
pub async fn join_liars(net: &Testnet, count: usize, seed: u64) -> Vec<Liar> {
    let mut random = SplitMix(seed);
    let joining = (0..count).map(|i| {
        let lie = if i % 2 == 0 { Lie::Drop } else { Lie::Mislead };
        let bootstrap: Vec<_> = (0..3)
            .map(|_| net.nodes[random.below(net.nodes.len())].addresses[0].clone())
            .collect();
        async move {
            Liar::start(
                lie,
                Keypair::generate_ed25519(),
                Wire::Memory,
                "/memory/0".parse().unwrap(),
                &bootstrap,
            )
            .await
        }
    });
    let liars = futures::future::join_all(joining.collect::<Vec<_>>()).await;
    let misleading: Vec<_> = liars
        .iter()
        .filter(|l| l.lie == Lie::Mislead)
        .map(|l| (l.peer_id, l.address.clone()))
        .collect();
    for liar in &liars {
        liar.know(&misleading);
    }
    liars
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_found_when_a_fifth_of_the_nodes_lie() {
    let _alone = support::testnet::alone().await;
    let net = tokio::time::timeout(Duration::from_secs(180), Testnet::start(HONEST, 11))
        .await
        .expect("the honest nodes join");
    let honest: Vec<usize> = (0..HONEST).collect();
    let publishers: Vec<usize> = (0..AGENTS).map(|i| i * HONEST / AGENTS).collect();

    // The same lookups among honest nodes alone, to compare with.
    let published = publish_agents(&net, &publishers, "honest").await;
    let lookups = look_up(&net, &honest, &published, LOOKUPS, 3).await;
    eprintln!("{HONEST} honest nodes: {}", lookups.summary());
    lookups.expect_99_percent();

    let liars = join_liars(&net, LIARS, 5).await;
    let dropping: HashSet<PeerId> = liars
        .iter()
        .filter(|l| l.lie == Lie::Drop)
        .map(|l| l.peer_id)
        .collect();
    let all_liars: HashSet<PeerId> = liars.iter().map(|l| l.peer_id).collect();
    let liar_entries = entries_of(&net, &honest, &all_liars).await;
    let dropping_before = entries_of(&net, &honest, &dropping).await;
    eprintln!(
        "liars in honest routing tables: {liar_entries} entries ({dropping_before} of droppers)"
    );
    assert!(
        liar_entries >= LIARS,
        "the liars barely joined ({liar_entries} routing-table entries): the test would prove nothing"
    );

    // Published while the liars are there: some of each key's closest
    // nodes are liars, which keep nothing.
    let published = publish_agents(&net, &publishers, "skill").await;

    let lookups = look_up(&net, &honest, &published, LOOKUPS, 3).await;
    eprintln!(
        "with {LIARS} liars among {} nodes: {}",
        HONEST + LIARS,
        lookups.summary()
    );
    lookups.expect_99_percent();

    // The nodes that drop requests were struck out of routing tables.
    let dropping_after = entries_of(&net, &honest, &dropping).await;
    eprintln!(
        "droppers in honest routing tables: {dropping_before} before the lookups, {dropping_after} after"
    );
    assert!(
        dropping_after < dropping_before,
        "no dropping node was struck out: {dropping_before} entries before, {dropping_after} after"
    );
    drop(liars);
    net.shutdown().await;
}
