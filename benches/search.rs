//! Finding agents by what they do: recall of the network search.
//!
//! `benches/search/agents.json` holds agents with cards and tools written
//! as their authors would; `benches/search/queries.json` holds requests
//! written as a person or a model would ask, each with the agent that
//! should answer it. Each agent is published by a different simulated node
//! of an in-process network (real libp2p: Kademlia provider records per
//! keyword, request-response for the matches); each query is searched by a
//! node that joins afterwards and has heard of nothing, as `agentsite
//! search` does (a provider lookup per query term, the hosts' matches,
//! BM25 over what came back).
//!
//! Then the same again on a poisoned network: one more node publishes, under
//! one key, the same card stuffed with every word of the queries under
//! [`COPIES`] ids (a byte appended each time) and [`VARIANTS`] cards that
//! differ by a word, as a publisher gaming the rank would.
//!
//! `cargo bench -p agentsite --bench search` prints recall@1 and recall@3
//! of both and the queries that missed, for BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use serde::Deserialize;
use std::time::{Duration, Instant};
use support::testnet::{Testnet, node_with_hub};

/// Simulated nodes publishing the agents.
const NODES: usize = 32;
/// Copies of the stuffed card the poisoner publishes, and variants of it.
const COPIES: usize = 20;
const VARIANTS: usize = 8;

#[derive(Deserialize)]
struct Agent {
    name: String,
    description: String,
    tags: Vec<String>,
    tools: Vec<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    description: String,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    expect: String,
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            measure(false).await;
            measure(true).await;
        });
}

/// Publishes the poisoner's agents from `node`: the queries' words stuffed
/// into one card's name, tags, description and tool names.
async fn poison(node: &support::testnet::SimNode, queries: &[Query]) {
    let mut words: Vec<String> = queries
        .iter()
        .flat_map(|q| q.query.split_whitespace())
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| w.len() > 3)
        .collect();
    words.sort();
    words.dedup();
    let description = words.join(" ");
    let tags: Vec<&str> = words.iter().take(24).map(String::as_str).collect();
    let tools: Vec<(&str, &str)> = words
        .iter()
        .take(40)
        .map(|w| (w.as_str(), description.as_str()))
        .collect();
    for copy in 0..COPIES {
        let mut bytes = b"best agent".to_vec();
        bytes.extend(std::iter::repeat_n(0, copy));
        let manifest = node.offer_agent(&bytes, "best-agent", &description, &tags, &tools);
        node.network.publish(manifest).await.unwrap();
    }
    for variant in 0..VARIANTS {
        let name = format!("best-agent-{variant}");
        let manifest = node.offer_agent(name.as_bytes(), &name, &description, &tags, &tools);
        node.network.publish(manifest).await.unwrap();
    }
}

async fn measure(poisoned: bool) {
    let agents: Vec<Agent> = serde_json::from_str(include_str!("search/agents.json")).unwrap();
    let queries: Vec<Query> = serde_json::from_str(include_str!("search/queries.json")).unwrap();
    let mut net = Testnet::start(NODES, 0x5EA4C4).await;
    for (n, agent) in agents.iter().enumerate() {
        let node = &net.nodes[n % NODES];
        let tools: Vec<(&str, &str)> = agent
            .tools
            .iter()
            .map(|t| (t.name.as_str(), t.description.as_str()))
            .collect();
        let tags: Vec<&str> = agent.tags.iter().map(String::as_str).collect();
        let manifest = node.make_described_agent(&agent.name, &agent.description, &tags, &tools);
        node.network.publish(manifest).await.unwrap();
    }
    if poisoned {
        poison(&net.nodes[NODES - 1], &queries).await;
    }
    net.quiet().await;

    let (mut first, mut top_three) = (0, 0);
    let mut misses = Vec::new();
    let mut times = Vec::new();
    for (n, query) in queries.iter().enumerate() {
        // A node that has heard of nothing: what it finds, the network gave it.
        let dir = tempfile::tempdir().unwrap();
        let through = &net.nodes[n % NODES].addresses;
        let (_node, hub) = node_with_hub(dir.path(), through).await;
        while hub.network().routing_table_size().await.unwrap() < 10 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started = Instant::now();
        let found = hub.search(&query.query, 3).await.unwrap();
        times.push(started.elapsed());
        let names: Vec<&str> = found.iter().map(|f| f.card.name.as_str()).collect();
        match names.iter().position(|name| *name == query.expect) {
            Some(0) => {
                first += 1;
                top_three += 1;
            }
            Some(_) => top_three += 1,
            None => {}
        }
        if names.first() != Some(&query.expect.as_str()) {
            misses.push(format!(
                "| {} | {} | {} |",
                query.query,
                query.expect,
                names.join(", ")
            ));
        }
        hub.network().shutdown().await;
    }
    times.sort_unstable();
    let count = queries.len() as f64;
    let poison = if poisoned {
        format!(
            ", poisoned: one publisher's stuffed card under {COPIES} ids and {VARIANTS} variants"
        )
    } else {
        String::new()
    };
    println!(
        "\n{} agents on {NODES} nodes, {} queries, each from a node that joined afterwards{poison}",
        agents.len(),
        queries.len()
    );
    println!("\n| recall@1 | recall@3 | search p50 | search max |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {:.1}% ({first}) | {:.1}% ({top_three}) | {:.1} ms | {:.1} ms |",
        100.0 * f64::from(first) / count,
        100.0 * f64::from(top_three) / count,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3
    );
    println!("\nNot first:\n\n| query | expected | found (best first) |\n|---|---|---|");
    for miss in misses {
        println!("{miss}");
    }
    net.shutdown().await;
}
