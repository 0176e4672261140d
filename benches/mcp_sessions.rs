//! What an idle MCP session costs a node: the memory (resident set) a
//! real `agentsite serve` on loopback gains per session opened with
//! `initialize` and `notifications/initialized` and then left alone, while
//! the sessions are awake (each with its tasks and channels) and once they
//! are asleep (only their `initialize` kept; see `mcp::dormant`).
//!
//! Sessions come from 16 loopback addresses (128 each, one requester's
//! share), 2,048 in all, the most a node keeps. Awake, they are opened
//! with `mcp_session_dormant_after` at an hour. Asleep, at 200 ms, they are
//! opened 16 at a time and each batch is left to fall asleep (the node's
//! `/metrics` says so) before the next: what the awake ones of a batch
//! took is reused by the next, as it is on a node whose sessions come and
//! go. The resident set is read from /proc after 50 sessions opened and
//! ended first (the allocator's first arenas, the endpoint's first use).
//!
//! Run with `cargo bench -p agentsite --bench mcp_sessions`; prints a
//! Markdown table for BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;
use support::{Cli, Server};

const ADDRESSES: u8 = 16;
const PER_ADDRESS: usize = 128;
const BATCH: usize = 16;

/// The server's resident set, in bytes.
fn resident(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kib * 1024
}

/// Sessions asleep, as the node's `/metrics` says.
async fn asleep(server: &Server) -> usize {
    let prefix = "agentsite_mcp_sessions{state=\"asleep\"} ";
    server
        .metrics()
        .await
        .lines()
        .find_map(|line| line.strip_prefix(prefix))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Bytes of resident set per idle session, with sessions falling asleep
/// after `dormant_after`.
async fn per_session(dormant_after: &str, wait_for_sleep: bool) -> (usize, u64) {
    let cli = Cli::new();
    std::fs::write(
        cli.data().join("config.toml"),
        format!("[serve]\nmcp_session_dormant_after = \"{dormant_after}\"\n"),
    )
    .unwrap();
    let server = Server::start(cli.data(), &[]);
    let url = server.url("/mcp");
    let from = |address: String| {
        reqwest::Client::builder()
            .local_address(address.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let warm = from("127.0.3.1".into());
    for _ in 0..50 {
        let id = support::mcp_session(&warm, &url).await;
        warm.delete(&url)
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = resident(&server);
    let mut opened = 0;
    for address in 1..=ADDRESSES {
        let client = from(format!("127.0.2.{address}"));
        for _ in 0..PER_ADDRESS / BATCH {
            for _ in 0..BATCH {
                support::mcp_session(&client, &url).await;
            }
            opened += BATCH;
            while wait_for_sleep && asleep(&server).await < opened {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = resident(&server);
    (opened, after.saturating_sub(before) / opened as u64)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (awake_n, awake) = runtime.block_on(per_session("1h", false));
    let (asleep_n, asleep) = runtime.block_on(per_session("200ms", true));
    println!("| idle MCP sessions | sessions | resident set per session |");
    println!("|---|---:|---:|");
    println!("| awake | {awake_n} | {:.1} KiB |", awake as f64 / 1024.0);
    println!(
        "| asleep | {asleep_n} | {:.1} KiB |",
        asleep as f64 / 1024.0
    );
}
