//! Two hundred nodes in one process (memory transport, full libp2p stack):
//! agents published at scattered nodes are found by every node, by keyword
//! through the DHT, by id with a verified manifest, and by announcement.

use crate::support;

use agentsite::AgentId;
use agentsite::net::dht;
use futures::StreamExt as _;
use std::time::Duration;
use support::testnet::Testnet;

const NODES: usize = 200;
const PUBLISHERS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_finds_every_published_agent() {
    let _alone = support::testnet::alone().await;
    // A bound for a network that never settles, not a measure of speed
    // (the join time is printed; each node's join is bounded by the
    // testnet): 146 s here, on two cores, alone; beside a build 128 of the
    // nodes had joined after 123 s.
    let net = tokio::time::timeout(Duration::from_secs(900), Testnet::start(NODES, 7))
        .await
        .expect("the network settles");
    let (smallest, median, _) = net.routing;
    assert!(smallest > 0, "a node has an empty routing table");
    eprintln!("routing tables: {:?} (min, median, max)", net.routing);
    assert!(
        median >= 20,
        "routing tables stayed small: {:?}",
        net.routing
    );

    // Publishers spread over the network, each with its own skill word.
    let mut published = Vec::new();
    for i in 0..PUBLISHERS {
        let publisher = i * NODES / PUBLISHERS;
        let node = &net.nodes[publisher];
        let skill = format!("skill{i}");
        let manifest = node.make_agent(&format!("sim-agent-{i}"), &["planet", &skill], 4096);
        let report = node.network.publish(manifest.clone()).await.unwrap();
        assert_eq!(report.provider_keys_unconfirmed, 0, "{report:?}");
        assert!(report.record_replicas > 0, "{report:?}");
        published.push((publisher, skill, manifest.id()));
    }

    // Every node looks every agent up by its skill word and by its id.
    let lookups = net.nodes.iter().enumerate().flat_map(|(seeker, node)| {
        let nodes = &net.nodes;
        published
            .iter()
            .map(move |(publisher, skill, id)| async move {
                let publisher_id = nodes[*publisher].network.peer_id();
                let by_word = node
                    .network
                    .providers(dht::keyword_key(skill), 1)
                    .await
                    .map(|found| found.providers.contains(&publisher_id) || seeker == *publisher);
                let by_id = node.network.manifest(*id).await.map(|m| m.id() == *id);
                match (by_word, by_id) {
                    (Ok(true), Ok(true)) => None,
                    miss => Some(format!("node {seeker} looking for {id}: {miss:?}")),
                }
            })
    });
    let misses: Vec<String> = tokio::time::timeout(
        Duration::from_secs(300),
        futures::stream::iter(lookups)
            .buffer_unordered(64)
            .filter_map(|miss| async move { miss })
            .collect(),
    )
    .await
    .expect("the lookups end");
    assert!(
        misses.is_empty(),
        "{} of {} lookups missed, first: {:?}",
        misses.len(),
        NODES * PUBLISHERS,
        misses.first()
    );

    // The gossip announcements reached every node too.
    let ids: Vec<AgentId> = published.iter().map(|(_, _, id)| *id).collect();
    net.until_everyone_heard(&ids, Duration::from_secs(30))
        .await;
    net.shutdown().await;
}
