//! The network's speed: how lookups scale with the number of nodes, how fast
//! an announcement reaches everyone, how fast an agent moves between two
//! processes, and how long a fresh node takes from a search to a first call.
//!
//! ```sh
//! cargo bench -p agentsite --bench planet              # everything
//! cargo bench -p agentsite --bench planet -- lookup    # or: gossip, fetch, e2e
//! ```
//!
//! * `lookup`: networks of 16, 64, 256 and 1024 in-process nodes (memory
//!   transport, with noise and yamux as on TCP). Agents are published at
//!   random nodes; once their announcements and records have settled, random
//!   other nodes look them up by keyword, one lookup at a time, each on a
//!   calm network (the previous lookup's trailing work done). Latency,
//!   Kademlia requests per lookup, the CPU time a lookup costs the whole
//!   process, and success rate per size; the curve is drawn to
//!   `benches/plots/provider-lookup.svg`.
//! * `gossip`: in the largest (1024-node) network, announcements from random
//!   nodes, each sent on a calm network: the time until each node has checked
//!   and taken in each one. First by gossip alone (`Network::announce`), then
//!   as part of a whole publication (which stores DHT records meanwhile).
//! * `fetch`: a 16 MiB agent published by an `agentsite serve` process,
//!   downloaded by this process over loopback TCP in verified chunks.
//! * `e2e`: a 50-node network; a fresh node searches for an agent, fetches
//!   its 1 MiB component, verifies, compiles and calls it.
//! * `nat`: on an internet of network namespaces (as root; skipped where
//!   namespaces cannot be made), a public relay node and two homes behind
//!   NATs, once behind a symmetric NAT (everything relayed) and once behind
//!   port-keeping ones (hole punched, direct): the time each node takes to
//!   know it is public or relayed, remote calls and fetches from one home to
//!   the other as a person runs them (`agentsite call --remote`,
//!   `agentsite fetch`, each a process of its own).
//!
//! Figures are printed as Markdown for BENCHMARKS.md. Needs the example
//! agents (`cd examples && cargo build --release --target wasm32-wasip2`).

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::AgentId;
use agentsite::net::{Keypair, NetConfig, Network, PeerId, Transports, dht, fetch};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::testnet::{SplitMix, Testnet, cpu_time, manifest_from_dht, node_with_hub};

const LOOKUP_SIZES: [usize; 4] = [16, 64, 256, 1024];
const LOOKUPS: usize = 2000;
const AGENTS_PER_NETWORK: usize = 16;
/// After each lookup the network is let calm down, judged over windows this
/// short, for at most this long.
const CALM_WINDOW: Duration = Duration::from_millis(20);
const CALM_AT_MOST: Duration = Duration::from_secs(2);
const ANNOUNCEMENTS: usize = 20;
const FETCH_BYTES: usize = 16 * 1024 * 1024;
const FETCH_ROUNDS: usize = 20;
const E2E_NETWORK: usize = 50;
const E2E_ROUNDS: usize = 20;

fn main() {
    let chosen: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |name: &str| chosen.is_empty() || chosen.iter().any(|c| c == name);
    // RUST_LOG=agentsite=info prints each simulated node's join report.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        if wants("lookup") || wants("gossip") {
            // On a worker thread, as a node's own requests run: each command
            // to a node's network task and each answer is then handed over
            // within the runtime rather than woken across to this thread.
            let (lookup, gossip) = (wants("lookup"), wants("gossip"));
            tokio::spawn(lookups_and_gossip(lookup, gossip))
                .await
                .expect("the network benchmarks ran");
        }
        if wants("fetch") {
            fetch_between_processes().await;
        }
        if wants("e2e") {
            search_to_first_call().await;
        }
        if wants("nat") {
            tokio::task::spawn_blocking(through_nats).await.unwrap();
        }
    });
}

/// Percentile `p` (0..=100) of sorted `values`.
fn percentile<T: Copy>(sorted: &[T], p: f64) -> T {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Latency percentiles of one kind of lookup.
#[derive(Clone, Copy)]
struct Spread {
    p50: Duration,
    p90: Duration,
    p99: Duration,
}

impl Spread {
    fn of(mut latencies: Vec<Duration>) -> Spread {
        latencies.sort_unstable();
        Spread {
            p50: percentile(&latencies, 50.0),
            p90: percentile(&latencies, 90.0),
            p99: percentile(&latencies, 99.0),
        }
    }
}

struct LookupRow {
    nodes: usize,
    /// First lookups: the seeker opens the connections it needs.
    cold: Spread,
    /// The same lookups again at once, over the connections now open.
    warm: Spread,
    requests_mean: f64,
    requests_p99: u32,
    /// Process CPU time per first and per repeated lookup, less what the
    /// idle network uses meanwhile (heartbeats, timers).
    cpu_per_cold: Duration,
    cpu_per_warm: Duration,
    /// What the idle network uses, in CPU time per second.
    idle_cpu: Duration,
    /// Lookups (first and repeated) that found the publisher, in percent.
    success: f64,
    routing_median: usize,
    build: Duration,
    /// The process's resident memory once the network was built.
    memory_mb: u64,
}

async fn lookups_and_gossip(lookup: bool, gossip: bool) {
    // PLANET_SIZES=16,64 picks other network sizes (the largest also
    // carries the gossip measurement).
    let all: Vec<usize> = match std::env::var("PLANET_SIZES") {
        Ok(list) => list
            .split(',')
            .map(|n| n.trim().parse().expect("PLANET_SIZES lists numbers"))
            .collect(),
        Err(_) => LOOKUP_SIZES.to_vec(),
    };
    let largest = *all.iter().max().expect("at least one size");
    let sizes: Vec<usize> = if lookup { all } else { vec![largest] };
    let mut rows = Vec::new();
    for &nodes in &sizes {
        let started = Instant::now();
        let mut net = Testnet::start(nodes, nodes as u64).await;
        let quiet = net.quiet().await;
        let build = started.elapsed();
        let memory_mb = support::testnet::resident_mb();
        let (closing, connections) = net.at_rest(AT_REST_AT_MOST).await;
        eprintln!(
            "{nodes} nodes at rest after {closing:.1?} more: connections a node {connections:?} \
             (min, median, max), {} MB resident",
            support::testnet::resident_mb()
        );
        let idle = Spread::of(idle_seconds().await);
        let idle_cpu = idle.p50;
        eprintln!(
            "{nodes} nodes idle: {:.0} ms of CPU per second (median of {IDLE_SECONDS} seconds; \
             p90 {:.0} ms, max {:.0} ms)",
            ms(idle.p50),
            ms(idle.p90),
            ms(idle.p99),
        );
        eprintln!(
            "{nodes} nodes up in {build:.1?} (quiet after {quiet:.1?}), {memory_mb} MB resident; \
             routing tables {:?} (min, median, max)",
            net.routing
        );
        if lookup {
            rows.push(measure_lookups(&net, build, memory_mb, idle_cpu).await);
            print_lookup_rows(&rows);
            // Redrawn after each size, so a run cut short still leaves a plot.
            draw_lookup_plot(&rows);
        }
        if gossip && nodes == largest {
            measure_gossip(&net, idle_cpu).await;
        }
        net.shutdown().await;
    }
}

/// How long the joins' connections get to close before the idle network is
/// measured: a bound for a count that never settles, not a wait.
const AT_REST_AT_MOST: Duration = Duration::from_secs(120);

/// Seconds over which the idle network's CPU is measured.
const IDLE_SECONDS: usize = 10;

/// The CPU time the whole process uses in each of [`IDLE_SECONDS`] seconds
/// while nothing is asked of the network. Their median is the idle figure:
/// a single window swings two- to four-fold between runs of one binary,
/// when it catches the trailing work of the last joins.
async fn idle_seconds() -> Vec<Duration> {
    let mut seconds = Vec::with_capacity(IDLE_SECONDS);
    for _ in 0..IDLE_SECONDS {
        let used = support::testnet::cpu_used_over(Duration::from_secs(1)).await;
        seconds.push(used.unwrap_or_default());
    }
    seconds
}

/// The process CPU time `busy` used over `wall`, less the idle network's share.
fn own_cpu(busy: Duration, wall: Duration, idle_cpu: Duration) -> Duration {
    busy.saturating_sub(idle_cpu.mul_f64(wall.as_secs_f64()))
}

async fn measure_lookups(
    net: &Testnet,
    build: Duration,
    memory_mb: u64,
    idle_cpu: Duration,
) -> LookupRow {
    let nodes = net.nodes.len();
    let mut random = SplitMix(0xA6E7 + nodes as u64);
    let mut agents = Vec::new();
    for i in 0..AGENTS_PER_NETWORK {
        let publisher = random.below(nodes);
        let word = format!("skill{i}");
        let manifest = net.nodes[publisher].make_agent(&format!("bench-{i}"), &[&word], 4096);
        net.nodes[publisher]
            .network
            .publish(manifest)
            .await
            .expect("publish");
        agents.push((publisher, word));
    }
    // The announcements and DHT records of those agents keep the CPU busy
    // for a while (at 1024 nodes, many seconds): lookups are measured after.
    let waited = support::testnet::calm(calm_below(idle_cpu), Duration::from_secs(300)).await;
    eprintln!("{nodes} nodes: the publications settled in {waited:.1?}");
    let mut cold = Vec::with_capacity(LOOKUPS);
    let mut warm = Vec::with_capacity(LOOKUPS);
    let mut requests = Vec::with_capacity(LOOKUPS);
    let mut found = 0usize;
    // CPU time and wall time spent in first and in repeated lookups, each
    // until the network was calm again.
    let mut spent = [(Duration::ZERO, Duration::ZERO); 2];
    for _ in 0..LOOKUPS {
        let (publisher, word) = &agents[random.below(agents.len())];
        let mut seeker = random.below(nodes);
        if seeker == *publisher {
            seeker = (seeker + 1) % nodes;
        }
        let expected = net.nodes[*publisher].network.peer_id();
        for (first, latencies) in [(true, &mut cold), (false, &mut warm)] {
            let cpu_before = cpu_time().unwrap_or_default();
            let started = Instant::now();
            let answer = tokio::time::timeout(
                Duration::from_secs(10),
                net.nodes[seeker]
                    .network
                    .providers(dht::keyword_key(word), 1),
            )
            .await;
            latencies.push(started.elapsed());
            // A lookup's work goes on after its answer: the connections it
            // opened still exchange who they are, and the seeker connects
            // to the host it found. On one machine that work would slow the
            // next lookup (on a real network it runs on other nodes' cores
            // or while the node is otherwise idle), so it is waited out, and
            // counted in the lookup's CPU time.
            support::testnet::calm_over(CALM_WINDOW, calm_below(idle_cpu), CALM_AT_MOST).await;
            let phase = &mut spent[usize::from(!first)];
            phase.0 += cpu_time().unwrap_or_default().saturating_sub(cpu_before);
            phase.1 += started.elapsed();
            if let Ok(Ok(lookup)) = answer {
                if lookup.providers.contains(&expected) {
                    found += 1;
                }
                if first {
                    requests.push(lookup.requests);
                }
            }
        }
    }
    requests.sort_unstable();
    LookupRow {
        nodes,
        cold: Spread::of(cold),
        warm: Spread::of(warm),
        requests_mean: requests.iter().map(|&r| f64::from(r)).sum::<f64>()
            / requests.len().max(1) as f64,
        requests_p99: if requests.is_empty() {
            0
        } else {
            percentile(&requests, 99.0)
        },
        success: found as f64 / (2 * LOOKUPS) as f64 * 100.0,
        cpu_per_cold: own_cpu(spent[0].0, spent[0].1, idle_cpu) / LOOKUPS as u32,
        cpu_per_warm: own_cpu(spent[1].0, spent[1].1, idle_cpu) / LOOKUPS as u32,
        idle_cpu,
        routing_median: net.routing.1,
        build,
        memory_mb,
    }
}

fn print_lookup_rows(rows: &[LookupRow]) {
    println!(
        "\n| nodes | first lookup p50 | p90 | p99 | repeated p50 | p90 | p99 | requests (mean) | requests (p99) | success | CPU per first lookup | per repeated | idle network CPU | routing table (median) | network built in | resident memory |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.1} | {} | {:.2}% | {:.2} ms | {:.2} ms | {:.0} ms/s | {} | {:.0} s | {} MB |",
            row.nodes,
            ms(row.cold.p50),
            ms(row.cold.p90),
            ms(row.cold.p99),
            ms(row.warm.p50),
            ms(row.warm.p90),
            ms(row.warm.p99),
            row.requests_mean,
            row.requests_p99,
            row.success,
            ms(row.cpu_per_cold),
            ms(row.cpu_per_warm),
            ms(row.idle_cpu),
            row.routing_median,
            row.build.as_secs_f64(),
            row.memory_mb
        );
    }
}

/// Lookup latency and requests against network size, on a log₂ axis: a
/// straight line is O(log n).
fn draw_lookup_plot(rows: &[LookupRow]) {
    use plotters::prelude::*;
    let path = support::repo().join("benches/plots/provider-lookup.svg");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let root = SVGBackend::new(&path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let (left, right) = root.split_horizontally(450);
    let x_range = 3.5f64..10.5f64;
    let log2 = |n: usize| (n as f64).log2();

    let top_ms = rows.iter().map(|r| ms(r.cold.p90)).fold(0.0, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&left)
        .caption("Provider lookup latency", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(x_range.clone(), 0f64..top_ms.max(0.5))
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("nodes (log₂ scale)")
        .y_desc("ms")
        .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round()))
        .draw()
        .unwrap();
    for (label, pick, color) in [
        (
            "first lookup p50",
            (|r: &LookupRow| r.cold.p50) as fn(&LookupRow) -> Duration,
            BLUE,
        ),
        ("first lookup p90", |r: &LookupRow| r.cold.p90, RED),
        ("repeated p50", |r: &LookupRow| r.warm.p50, MAGENTA),
    ] {
        let points: Vec<(f64, f64)> = rows.iter().map(|r| (log2(r.nodes), ms(pick(r)))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .unwrap()
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .unwrap();
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .draw()
        .unwrap();

    let top_requests = rows.iter().map(|r| r.requests_mean).fold(0.0, f64::max) * 1.3;
    let mut chart = ChartBuilder::on(&right)
        .caption("Kademlia requests per lookup", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(x_range, 0f64..top_requests.max(1.0))
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("nodes (log₂ scale)")
        .y_desc("requests (mean)")
        .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round()))
        .draw()
        .unwrap();
    let points: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (log2(r.nodes), r.requests_mean))
        .collect();
    chart
        .draw_series(LineSeries::new(points.clone(), GREEN.stroke_width(2)))
        .unwrap();
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 3, GREEN.filled())))
        .unwrap();
    root.present().unwrap();
    eprintln!("plot written to {}", path.display());
}

/// The CPU time per second below which the network counts as calm again
/// after a measured operation: its idle use and a little.
fn calm_below(idle_cpu: Duration) -> Duration {
    idle_cpu.mul_f64(1.5) + Duration::from_millis(30)
}

async fn measure_gossip(net: &Testnet, idle_cpu: Duration) {
    println!(
        "\n| nodes | sent by | announcements | reached every node | per-node delivery p50 | p99 | max | time to reach all: p50 | max | CPU until all had it (p50) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    reach(net, Sending::Announce, ANNOUNCEMENTS, idle_cpu).await;
    reach(net, Sending::Publish, ANNOUNCEMENTS / 2, idle_cpu).await;
}

#[derive(Clone, Copy)]
enum Sending {
    /// `Network::announce`: gossip alone.
    Announce,
    /// `Network::publish`: gossip, and DHT records stored meanwhile.
    Publish,
}

/// `rounds` announcements from random nodes, each sent once the network is
/// calm; prints a row of how fast they reached every node.
async fn reach(net: &Testnet, sending: Sending, rounds: usize, idle_cpu: Duration) {
    let nodes = net.nodes.len();
    let mut random = SplitMix(0x6055 + rounds as u64);
    let mut deliveries = Vec::new();
    let mut full_reach = Vec::new();
    let mut reached_all = 0;
    let mut cpu = Vec::new();
    let label = match sending {
        Sending::Announce => "announce",
        Sending::Publish => "publish",
    };
    eprintln!("gossip: {rounds} announcements ({label}) in {nodes} nodes");
    for i in 0..rounds {
        support::testnet::calm(calm_below(idle_cpu), Duration::from_secs(60)).await;
        let publisher = &net.nodes[random.below(nodes)];
        let manifest = publisher.make_agent(&format!("news-{label}-{i}"), &["news"], 4096);
        let id = manifest.id();
        let cpu_before = cpu_time().unwrap_or_default();
        let sent = Instant::now();
        let network = publisher.network.clone();
        tokio::spawn(async move {
            match sending {
                Sending::Announce => network.announce(manifest).await.map(drop),
                Sending::Publish => network.publish(manifest).await.map(drop),
            }
        });
        let deadline = sent + Duration::from_secs(5);
        while Instant::now() < deadline && !net.nodes.iter().all(|n| n.shelf.heard(&id).is_some()) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The CPU time the whole network spent until every node had it,
        // the idle network's share included.
        cpu.push(cpu_time().unwrap_or_default().saturating_sub(cpu_before));
        let heard: Vec<Duration> = net
            .nodes
            .iter()
            .filter_map(|n| n.shelf.heard(&id))
            .map(|at| at.saturating_duration_since(sent))
            .collect();
        if heard.len() == nodes {
            reached_all += 1;
            full_reach.push(heard.iter().copied().max().unwrap());
        }
        deliveries.extend(heard);
    }
    deliveries.sort_unstable();
    full_reach.sort_unstable();
    cpu.sort_unstable();
    println!(
        "| {nodes} | {label} | {rounds} | {reached_all} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} ms |",
        ms(percentile(&deliveries, 50.0)),
        ms(percentile(&deliveries, 99.0)),
        ms(*deliveries.last().unwrap()),
        full_reach
            .first()
            .map_or(f64::NAN, |_| ms(percentile(&full_reach, 50.0))),
        full_reach.last().map_or(f64::NAN, |d| ms(*d)),
        ms(percentile(&cpu, 50.0)),
    );
}

/// The address both ends of the fetch listen on: TCP (noise, yamux) unless
/// `FETCH_TRANSPORT=quic`.
fn fetch_listen_address() -> &'static str {
    match std::env::var("FETCH_TRANSPORT").as_deref() {
        Ok("quic") => "/ip4/127.0.0.1/udp/0/quic-v1",
        Ok("tcp") | Err(_) => "/ip4/127.0.0.1/tcp/0",
        Ok(other) => panic!("FETCH_TRANSPORT is tcp or quic, not {other}"),
    }
}

async fn fetch_between_processes() {
    let provider = support::Cli::new();
    let bytes = support::padded_agent("calculator", FETCH_BYTES);
    let file = provider.data().join("big.wasm");
    std::fs::write(&file, &bytes).unwrap();
    let id = provider
        .run(&["add", file.to_str().unwrap()])
        .success()
        .trim()
        .to_owned();
    let listen = fetch_listen_address();
    let server = support::Server::start(provider.data(), &["--p2p-listen", listen]);
    provider.run(&["publish", &id]).success();
    let address: agentsite::net::Multiaddr = server.p2p.clone().unwrap().parse().unwrap();
    let peer: PeerId = match address.iter().last() {
        Some(libp2p::multiaddr::Protocol::P2p(peer)) => peer,
        _ => panic!("{address} does not end in a peer id"),
    };

    let library = Arc::new(support::testnet::Shelf::default());
    let network = Network::start(
        Keypair::generate_ed25519(),
        NetConfig::new(
            vec![listen.parse().unwrap()],
            vec![address],
            Transports::Network,
        ),
        library,
    )
    .await
    .unwrap();
    let id: AgentId = id.parse().unwrap();
    let manifest = manifest_from_dht(&network, id).await;
    let mut times = Vec::new();
    // CPU time of both processes over the measured rounds (the check of
    // each result below is left out).
    let (mut fetcher_cpu, mut provider_cpu) = (Duration::ZERO, Duration::ZERO);
    for round in 0..=FETCH_ROUNDS {
        let cpu_before = (
            support::cpu_time(std::process::id()),
            support::cpu_time(server.pid()),
        );
        let started = Instant::now();
        let (fetched, _) = fetch::download(&network, &manifest, &[peer], &|_| {})
            .await
            .expect("the download succeeds");
        let elapsed = started.elapsed();
        let cpu_after = (
            support::cpu_time(std::process::id()),
            support::cpu_time(server.pid()),
        );
        // The first round warms both sides' page cache and allocator.
        if round > 0 {
            times.push(elapsed);
            fetcher_cpu += cpu_after.0 - cpu_before.0;
            provider_cpu += cpu_after.1 - cpu_before.1;
        }
        assert_eq!(AgentId::of(&fetched), id);
    }
    times.sort_unstable();
    let mib = FETCH_BYTES as f64 / (1024.0 * 1024.0);
    let rate = |d: Duration| mib / d.as_secs_f64();
    let per_round = |cpu: Duration| ms(cpu / FETCH_ROUNDS as u32);
    println!(
        "\n| agent | transport | rounds | time p50 | min | max | throughput at p50 | best | CPU per round: fetcher | provider |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {mib:.0} MiB, {} chunks | {listen} | {FETCH_ROUNDS} | {:.1} ms | {:.1} ms | {:.1} ms | **{:.0} MiB/s** | {:.0} MiB/s | {:.1} ms | {:.1} ms |",
        manifest.manifest().chunk_count(),
        ms(percentile(&times, 50.0)),
        ms(times[0]),
        ms(*times.last().unwrap()),
        rate(percentile(&times, 50.0)),
        rate(times[0]),
        per_round(fetcher_cpu),
        per_round(provider_cpu),
    );
    network.shutdown().await;
    drop(server);
}

async fn search_to_first_call() {
    let mut net = Testnet::start(E2E_NETWORK - 1, 50).await;
    net.quiet().await;
    // The publisher: a full node hosting a 1 MiB calculator.
    let publisher_dir = tempfile::tempdir().unwrap();
    let (publisher_node, publisher) =
        node_with_hub(publisher_dir.path(), &net.nodes[0].addresses).await;
    let bytes = support::padded_agent("calculator", 1024 * 1024);
    let record = publisher_node.add(&bytes).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    publisher.publish(&record.id.to_string()).await.unwrap();

    let mut random = SplitMix(0xE2E);
    let mut totals = Vec::new();
    let mut steps: [Vec<Duration>; 3] = Default::default();
    for _ in 0..E2E_ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let through = random.below(net.nodes.len());
        let (node, hub) = node_with_hub(dir.path(), &net.nodes[through].addresses).await;
        // Joined: its first bootstrap is done.
        while hub.network().routing_table_size().await.unwrap() < 10 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let started = Instant::now();
        let found = hub.search("arithmetic", 5).await.unwrap();
        let id = found.first().expect("the search finds the calculator").id;
        let searched = started.elapsed();
        let fetched = hub.fetch(id, &|_| {}).await.unwrap();
        assert!(fetched.downloaded);
        let installed = started.elapsed();
        let sum = node
            .call(&id.to_string(), "add", r#"{"a": 40, "b": 2}"#, None)
            .await
            .unwrap();
        let total = started.elapsed();
        assert_eq!(sum.structured_content.unwrap().to_value()["result"], 42.0);
        steps[0].push(searched);
        steps[1].push(installed - searched);
        steps[2].push(total - installed);
        totals.push(total);
        hub.network().shutdown().await;
    }
    totals.sort_unstable();
    for step in &mut steps {
        step.sort_unstable();
    }
    println!(
        "\n| network | rounds | search | fetch 1 MiB + verify + store + compile | first call | total p50 | total p90 | total max |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {E2E_NETWORK} nodes | {E2E_ROUNDS} | {:.1} ms | {:.1} ms | {:.2} ms | **{:.1} ms** | {:.1} ms | {:.1} ms |",
        ms(percentile(&steps[0], 50.0)),
        ms(percentile(&steps[1], 50.0)),
        ms(percentile(&steps[2], 50.0)),
        ms(percentile(&totals, 50.0)),
        ms(percentile(&totals, 90.0)),
        ms(*totals.last().unwrap()),
    );
    publisher.network().shutdown().await;
    net.shutdown().await;
}

const NAT_CALLS: usize = 20;
/// A relayed fetch must fit in one circuit of the relay (4 MiB).
const NAT_SMALL_FETCH: usize = 3 * 1024 * 1024;
const NAT_FETCHES: usize = 3;

/// Polls `agentsite id --json` on `host` until its reachability is `state`;
/// how long that took from `since`.
fn known_as(
    cli: &support::Cli,
    host: &support::netns::Host,
    state: &str,
    since: Instant,
) -> Duration {
    loop {
        let id = cli.run_on(host, &["id", "--json"]).json();
        if id["reachability"]["state"] == state {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "never {state}: {id}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn through_nats() {
    use support::behind_nat::{Transport, connections_to, node};
    use support::netns::{Internet, Nat};
    println!(
        "\n| transport | NATs | public known | relayed known (home 1, home 2) | remote call p50 (min, max) | fetch 3 MiB p50 | fetch 16 MiB p50 |"
    );
    println!("|---|---|---|---|---|---|---|");
    let setups = [Transport::Tcp, Transport::Quic]
        .into_iter()
        .flat_map(|transport| {
            [(Nat::Symmetric, "relayed"), (Nat::PortPreserving, "direct")]
                .map(|(second, path)| (transport, second, path))
        });
    for (transport, second, path) in setups {
        let Some(mut internet) = Internet::new() else {
            println!("nat: skipped (no network namespaces here)");
            return;
        };
        let public = internet.public_host(1);
        let home1 = internet.home(1, Nat::PortPreserving);
        let home2 = internet.home(2, second);
        let [p, h1, h2] = [(); 3].map(|_| support::Cli::new());
        h1.add(&["calculator"]);
        let add_padded = |size: usize, n: usize| {
            let file = h1.data().join(format!("padded-{size}-{n}.wasm"));
            let mut bytes = support::padded_agent("text", size);
            // Each its own agent (a distinct id), fetched once.
            bytes.extend(support::numbered_section(n));
            std::fs::write(&file, bytes).unwrap();
            h1.run(&["add", file.to_str().unwrap()])
                .success()
                .trim()
                .to_owned()
        };
        let small: Vec<String> = (0..NAT_FETCHES)
            .map(|n| add_padded(NAT_SMALL_FETCH, n))
            .collect();
        let large: Vec<String> = match second {
            Nat::PortPreserving => (0..NAT_FETCHES)
                .map(|n| add_padded(FETCH_BYTES, n))
                .collect(),
            Nat::Symmetric => Vec::new(),
        };

        let relay_started = Instant::now();
        let relay = node(&public, &p, transport, None);
        let relay_id = relay.peer_id().unwrap().to_owned();
        let bootstrap = transport.address(&public, &relay_id);
        let homes_started = Instant::now();
        let node1 = node(&home1, &h1, transport, Some(&bootstrap));
        let node2 = node(&home2, &h2, transport, Some(&bootstrap));
        let id1 = node1.peer_id().unwrap().to_owned();
        let public_known = known_as(&p, &public, "public", relay_started);
        let relayed_known = [
            known_as(&h1, &home1, "relayed", homes_started),
            known_as(&h2, &home2, "relayed", homes_started),
        ];
        for id in small.iter().chain(&large) {
            h1.run_on(&home1, &["publish", id]).success();
        }
        h1.run_on(&home1, &["publish", "calculator"]).success();
        // The first call finds the agent and connects (through the relay).
        let call = || support::behind_nat::remote_add(&h2, &home2);
        let started = Instant::now();
        while call()["content"][0]["text"] != "5.0" {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "home 2 never called home 1"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let wanted = if path == "direct" {
            transport.name()
        } else {
            "relayed"
        };
        let started = Instant::now();
        loop {
            let via = connections_to(&h2, &home2, &id1);
            let settled = match path {
                "direct" => via.iter().any(|t| t == transport.name()),
                _ => !via.is_empty() && via.iter().all(|t| t == "relayed"),
            };
            if settled {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "never {wanted}: {via:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut calls: Vec<Duration> = (0..NAT_CALLS)
            .map(|_| {
                let started = Instant::now();
                assert_eq!(call()["content"][0]["text"], "5.0");
                started.elapsed()
            })
            .collect();
        calls.sort_unstable();
        let fetch_all = |ids: &[String]| -> Option<Duration> {
            let mut times: Vec<Duration> = ids
                .iter()
                .map(|id| {
                    let started = Instant::now();
                    h2.run_on(&home2, &["fetch", id]).success();
                    started.elapsed()
                })
                .collect();
            times.sort_unstable();
            (!times.is_empty()).then(|| percentile(&times, 50.0))
        };
        let small_p50 = fetch_all(&small);
        let large_p50 = fetch_all(&large);
        let shown = |d: Option<Duration>| match d {
            Some(d) => format!("{:.0} ms", ms(d)),
            None => "— (more than a relay circuit carries)".to_owned(),
        };
        println!(
            "| {} | {} ({path}) | {:.1} s | {:.1} s, {:.1} s | {:.0} ms ({:.0}, {:.0}) | {} | {} |",
            transport.name(),
            match second {
                Nat::Symmetric => "symmetric",
                Nat::PortPreserving => "port-keeping",
            },
            public_known.as_secs_f64(),
            relayed_known[0].as_secs_f64(),
            relayed_known[1].as_secs_f64(),
            ms(percentile(&calls, 50.0)),
            ms(calls[0]),
            ms(*calls.last().unwrap()),
            shown(small_p50),
            shown(large_p50),
        );
        drop((node1, node2, relay));
    }
}
