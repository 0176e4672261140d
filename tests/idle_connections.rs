//! Connections a node no longer uses close. Joining and looking things up,
//! a node meets much of the network; once idle it keeps open only the
//! connections gossip forwards announcements over (its mesh), however many
//! peers it has met. Before this, gossipsub's streams kept every connection
//! open for good, and in-process networks of a few hundred nodes ran out of
//! memory.

use crate::support;

use agentsite::net::{dht, gossip};
use std::time::Duration;
use support::eventually_async;
use support::testnet::Testnet;

const NODES: usize = 24;
const IDLE_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_close_but_the_gossip_mesh_stays() {
    let _alone = support::testnet::alone().await;
    let net = tokio::time::timeout(
        Duration::from_secs(60),
        Testnet::start_with(NODES, 3, IDLE_TIMEOUT),
    )
    .await
    .expect("the network starts");

    // Each node looks something up: more connections.
    for node in &net.nodes {
        node.network
            .providers(dht::keyword_key("nothing-here"), 1)
            .await
            .unwrap();
    }
    let busiest = net.connected_peers().await.into_iter().max().unwrap();
    assert!(
        busiest > gossip::MESH_N_HIGH,
        "no node met more peers than a gossip mesh holds ({busiest}): the test proves nothing"
    );

    // Once idle, every node is down to its mesh.
    let connected = eventually_async(
        Duration::from_secs(30),
        "idle connections close",
        async || {
            let connected = net.connected_peers().await;
            if connected.iter().all(|&n| n <= gossip::MESH_N_HIGH) {
                Ok(connected)
            } else {
                Err(format!("peers per node {connected:?}"))
            }
        },
    )
    .await;
    assert!(
        connected.iter().all(|&n| n >= 1),
        "a node lost all its connections: {connected:?}"
    );

    // And the mesh still carries announcements to every node.
    let manifest = net.nodes[5].make_agent("late-news", &["news"], 1024);
    net.nodes[5]
        .network
        .publish(manifest.clone())
        .await
        .unwrap();
    net.until_everyone_heard(&[manifest.id()], Duration::from_secs(10))
        .await;
    net.shutdown().await;
}
