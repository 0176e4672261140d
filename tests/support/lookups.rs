//! Batches of DHT lookups in a simulated network ([`Testnet`]): agents
//! published by chosen nodes, looked up by keyword and by id from random
//! others, with what they measured (success, latency, requests). Shared by
//! the lying-node and churn tests.

use super::testnet::{SplitMix, Testnet};
use agentsite::net::dht;
use futures::StreamExt as _;
use std::time::{Duration, Instant};

/// What a batch of lookups measured.
pub struct Lookups {
    pub succeeded: usize,
    pub latencies: Vec<Duration>,
    pub requests: Vec<u32>,
    pub first_miss: Option<String>,
}

impl Lookups {
    pub fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        sorted
            .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    }

    pub fn mean_requests(&self) -> f64 {
        self.requests.iter().map(|r| *r as f64).sum::<f64>() / self.requests.len().max(1) as f64
    }

    /// Fails unless at least 99% of the lookups succeeded.
    pub fn expect_99_percent(&self) {
        assert!(
            self.succeeded * 100 >= self.latencies.len() * 99,
            "{}; first miss: {:?}",
            self.summary(),
            self.first_miss
        );
    }

    pub fn summary(&self) -> String {
        format!(
            "{} of {} succeeded, p50 {:.0?}, p99 {:.0?}, {:.1} requests per keyword lookup",
            self.succeeded,
            self.latencies.len(),
            self.percentile(0.5),
            self.percentile(0.99),
            self.mean_requests()
        )
    }
}

/// Publishes an agent from each node of `net` at `publishers`, each with its
/// own skill word (`word` and a number); returns (publisher, skill, id) for
/// each.
pub async fn publish_agents(
    net: &Testnet,
    publishers: &[usize],
    word: &str,
) -> Vec<(usize, String, agentsite::AgentId)> {
    let mut published = Vec::new();
    for (i, publisher) in publishers.iter().enumerate() {
        let node = &net.nodes[*publisher];
        let skill = format!("{word}{i}");
        let manifest = node.make_agent(&format!("sim-agent-{word}-{i}"), &["planet", &skill], 2048);
        let report = node.network.publish(manifest.clone()).await.unwrap();
        assert!(report.record_replicas > 0, "{report:?}");
        assert_eq!(report.provider_keys_unconfirmed, 0, "{report:?}");
        published.push((*publisher, skill, manifest.id()));
    }
    published
}

/// `count` lookups from random seekers among `seekers` for random agents of
/// `published`: each finds the agent's host by its skill word and its
/// manifest by its id.
pub async fn look_up(
    net: &Testnet,
    seekers: &[usize],
    published: &[(usize, String, agentsite::AgentId)],
    count: usize,
    seed: u64,
) -> Lookups {
    let mut random = SplitMix(seed);
    let plan: Vec<(usize, usize)> = (0..count)
        .map(|_| {
            (
                seekers[random.below(seekers.len())],
                random.below(published.len()),
            )
        })
        .collect();
    let lookups = futures::stream::iter(plan)
        .map(|(seeker, agent)| async move {
            let (publisher, skill, id) = &published[agent];
            let publisher_id = net.nodes[*publisher].network.peer_id();
            let network = &net.nodes[seeker].network;
            let started = Instant::now();
            let by_word = network.providers(dht::keyword_key(skill), 1).await;
            let by_id = network.manifest(*id).await;
            let outcome = match (by_word, by_id) {
                (Ok(found), Ok(manifest))
                    if (found.providers.contains(&publisher_id) || seeker == *publisher)
                        && manifest.id() == *id =>
                {
                    Ok(found.requests)
                }
                (by_word, by_id) => Err(format!(
                    "node {seeker} looking for {id}: by word {:?}, by id {:?}",
                    by_word.map(|f| f.providers),
                    by_id.map(|m| m.id())
                )),
            };
            (outcome, started.elapsed())
        })
        // Lookups mostly wait (on requests that are never answered): many
        // at once, as many seekers would.
        .buffer_unordered(100)
        .collect();
    let results: Vec<(Result<u32, String>, Duration)> =
        tokio::time::timeout(Duration::from_secs(600), lookups)
            .await
            .expect("the lookups end within 10 min");
    let mut lookups = Lookups {
        succeeded: 0,
        latencies: Vec::new(),
        requests: Vec::new(),
        first_miss: None,
    };
    for (outcome, latency) in results {
        lookups.latencies.push(latency);
        match outcome {
            Ok(requests) => {
                lookups.succeeded += 1;
                lookups.requests.push(requests);
            }
            Err(miss) => {
                lookups.first_miss.get_or_insert(miss);
            }
        }
    }
    lookups
}
