//! The web pages' figures: the hub page's time with 1,000 agents known to
//! the node, a search for one word on a 50-node network as the page runs
//! it, and what a first visit to the hub transfers.
//!
//! The network is in-process (real libp2p over the memory transport, as the
//! planet and search benchmarks run it); the node serves as `agentsite serve`
//! does (`server::Server`, on loopback HTTP) and is asked with reqwest, so each
//! time is the server's work plus a loopback round trip.
//!
//! `cargo bench -p agentsite --bench web` prints the table for
//! BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};
use support::percentile;
use support::testnet::{SplitMix, Testnet, node_with_hub};

/// Simulated nodes publishing agents.
const NODES: usize = 50;
/// Agents they publish, all of which the measured node comes to know.
const AGENTS: usize = 1000;
/// Requests of each page timed, after as many to warm up.
const SAMPLES: usize = 200;
/// Words searched for, each once per node.
const SEARCHES: usize = 30;

/// Words agents are described with: each card takes three, so a word is
/// in about thirty cards.
const TOPICS: &[&str] = &[
    "weather",
    "forecast",
    "currency",
    "exchange",
    "translate",
    "language",
    "calendar",
    "meeting",
    "invoice",
    "billing",
    "email",
    "inbox",
    "summarize",
    "article",
    "image",
    "resize",
    "audio",
    "transcribe",
    "video",
    "subtitle",
    "chess",
    "puzzle",
    "recipe",
    "cooking",
    "fitness",
    "workout",
    "travel",
    "flight",
    "hotel",
    "stocks",
    "portfolio",
    "crypto",
    "wallet",
    "map",
    "route",
    "traffic",
    "parking",
    "music",
    "playlist",
    "lyrics",
    "poetry",
    "story",
    "grammar",
    "spelling",
    "dictionary",
    "thesaurus",
    "math",
    "algebra",
    "geometry",
    "statistics",
    "chart",
    "spreadsheet",
    "database",
    "query",
    "backup",
    "archive",
    "compress",
    "encrypt",
    "password",
    "security",
    "scanner",
    "network",
    "ping",
    "dns",
    "domain",
    "website",
    "crawler",
    "search",
    "news",
    "headline",
    "sports",
    "score",
    "garden",
    "plant",
    "pets",
    "veterinary",
    "health",
    "symptom",
    "medicine",
    "pharmacy",
    "legal",
    "contract",
    "tax",
    "payroll",
    "shipping",
    "tracking",
    "inventory",
    "warehouse",
    "recruiting",
    "resume",
    "interview",
    "survey",
    "poll",
    "quiz",
    "flashcard",
    "astronomy",
    "planet",
    "chemistry",
    "molecule",
    "genome",
];

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(measure());
}

/// `node` served as `agentsite serve` serves it (the same builder), on a
/// loopback port; its base URL.
async fn serve(node: Arc<agentsite::Node>, hub: Arc<agentsite::hub::Hub>) -> String {
    let options = agentsite::http::HttpOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: None,
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        connections: Default::default(),
    };
    let server = agentsite::server::Server::on_network(
        node,
        &agentsite::server::config::Config::default(),
        options,
        hub,
    )
    .await
    .unwrap();
    let address = server.address();
    tokio::spawn(server.serve());
    format!("http://{address}")
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Times `SAMPLES` loads of `url` (after as many unmeasured): p50, p90.
async fn time_page(client: &reqwest::Client, url: &str) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(SAMPLES);
    let mut size = 0;
    for n in 0..SAMPLES * 2 {
        let started = Instant::now();
        let response = client.get(url).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        let body = response.bytes().await.unwrap();
        if n >= SAMPLES {
            times.push(started.elapsed());
        }
        size = body.len();
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.9), size)
}

/// Runs the page's search for `word` to its end: the time to the `done`
/// line, and the cards it streamed.
async fn search(client: &reqwest::Client, base: &str, word: &str) -> (Duration, usize) {
    use futures::StreamExt as _;
    let started = Instant::now();
    let response = client
        .get(format!("{base}/hub/search"))
        .query(&[("q", word)])
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let mut body = response.bytes_stream();
    let (mut text, mut cards) = (String::new(), 0);
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = text.find('\n') {
            let line: serde_json::Value = serde_json::from_str(&text[..end]).unwrap();
            text.drain(..=end);
            if line.get("card").is_some() {
                cards += 1;
            }
            if line["done"] == true {
                return (started.elapsed(), cards);
            }
        }
    }
    panic!("the search for {word} ended without its done line");
}

/// Bytes a first visit to `base`'s hub transfers, uncompressed: the page
/// and every style sheet, icon and script module it loads, with headers.
async fn first_visit(client: &reqwest::Client, base: &str) -> (usize, Vec<(String, usize)>) {
    let mut pending = vec!["/".to_owned()];
    let mut seen = std::collections::HashSet::new();
    let mut parts = Vec::new();
    while let Some(path) = pending.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let response = client.get(format!("{base}{path}")).send().await.unwrap();
        let headers: usize = response
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum();
        let body = response.text().await.unwrap();
        for (start, end) in [
            ("src=\"/assets/", "\""),
            ("href=\"/assets/", "\""),
            ("from \"./", "\""),
        ] {
            for piece in body.split(start).skip(1) {
                if let Some(name) = piece.split(end).next() {
                    pending.push(format!("/assets/{name}"));
                }
            }
        }
        parts.push((path, body.len() + headers + 17));
    }
    (parts.iter().map(|(_, size)| size).sum(), parts)
}

async fn measure() {
    let mut net = Testnet::start(NODES, 0x3EB).await;
    println!(
        "{NODES} nodes; routing tables (min, median, max): {:?}",
        net.routing
    );

    // The measured node joins first, so it hears every announcement.
    let dir = tempfile::tempdir().unwrap();
    let (node, hub) = node_with_hub(dir.path(), &net.nodes[0].addresses).await;
    while hub.network().routing_table_size().await.unwrap() < 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut random = SplitMix(0xA6E7);
    for n in 0..AGENTS {
        let topics: Vec<&str> = (0..3).map(|_| TOPICS[random.below(TOPICS.len())]).collect();
        let description = format!(
            "Helps with {}, {} and {}: answers questions and does the work for you.",
            topics[0], topics[1], topics[2]
        );
        let tools: Vec<(String, String)> = topics
            .iter()
            .map(|t| (format!("{t}_{n}"), format!("Does {t} things.")))
            .collect();
        let tools: Vec<(&str, &str)> = tools
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let publisher = &net.nodes[n % NODES];
        let manifest =
            publisher.make_described_agent(&format!("agent-{n}"), &description, &topics, &tools);
        publisher.network.publish(manifest).await.unwrap();
    }
    let started = Instant::now();
    let known = || hub.with_known(|agents| agents.count());
    while known() < AGENTS && started.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let known = known();
    println!("the measured node knows {known} agents");
    net.quiet().await;

    let base = serve(node.clone(), hub.clone()).await;
    let client = reqwest::Client::new();
    println!("\n| page | p50 | p90 | body |\n|---|---:|---:|---:|");
    for (what, path) in [
        ("hub, first page (60 cards)", "/".to_owned()),
        ("hub, page 10", "/?page=10".to_owned()),
        (
            "hub, a word's matches from the index",
            "/?q=weather".to_owned(),
        ),
        (
            "an agent's page",
            format!(
                "/hub/agents/{}",
                hub.with_known(|agents| agents.next().map(|a| a.manifest.id()))
                    .unwrap()
            ),
        ),
    ] {
        let (p50, p90, size) = time_page(&client, &format!("{base}{path}")).await;
        println!(
            "| {what} | {} | {} | {} KB |",
            ms(p50),
            ms(p90),
            size / 1024
        );
    }

    // Searching: on the node that knows every agent, and on one that joins
    // and knows none, each word once.
    let fresh_dir = tempfile::tempdir().unwrap();
    let (fresh_node, fresh_hub) = node_with_hub(fresh_dir.path(), &net.nodes[7].addresses).await;
    while fresh_hub.network().routing_table_size().await.unwrap() < 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fresh = serve(fresh_node, fresh_hub).await;
    println!(
        "\n| search for one word, to its last card | p50 | p90 | max | cards (median) |\n|---|---:|---:|---:|---:|"
    );
    for (what, base) in [
        ("on the node that knows all 1,000", &base),
        ("on a node that just joined", &fresh),
    ] {
        let mut times = Vec::new();
        let mut cards = Vec::new();
        for word in TOPICS
            .iter()
            .step_by(TOPICS.len() / SEARCHES)
            .take(SEARCHES)
        {
            let (time, found) = search(&client, base, word).await;
            times.push(time);
            cards.push(found);
        }
        times.sort();
        cards.sort();
        println!(
            "| {what} | {} | {} | {} | {} |",
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.9)),
            ms(*times.last().unwrap()),
            cards[cards.len() / 2]
        );
    }

    let (total, parts) = first_visit(&client, &base).await;
    println!(
        "\nfirst visit to the hub: {:.1} KB in {} requests (uncompressed)",
        total as f64 / 1024.0,
        parts.len()
    );
    for (path, size) in parts {
        println!("  {path}: {:.1} KB", size as f64 / 1024.0);
    }
    net.shutdown().await;
}
