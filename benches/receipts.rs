//! What a receipt costs: signing one (the node that runs a remote call) and
//! checking one (the caller: the signature and two hashes), next to the
//! remote call they ride on, and what checking an answer by running the
//! call again costs (a goal's sampled check).
//!
//! ```sh
//! cargo bench -p agentsite --bench receipts
//! ```
//!
//! Two in-process nodes on the memory transport (noise and yamux as on
//! TCP); `calculator.add`. Each figure is the median (and p90) of single
//! timings, printed as Markdown for BENCHMARKS.md. Needs the example agents
//! (`cd examples && cargo build --release --target wasm32-wasip2`).

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::AgentId;
use agentsite::capabilities::peers::Hop;
use agentsite::capabilities::sources::Used;
use agentsite::receipt::{Receipt, Statement};
use serde_json::json;
use std::time::{Duration, Instant};
use support::testnet::node_with_hub;

const SIGNS: usize = 5_000;
const CALLS: usize = 1_000;
const CHECKS: usize = 300;

/// Median and p90 of `timings`, in microseconds.
fn spread(mut timings: Vec<Duration>) -> (f64, f64) {
    timings.sort_unstable();
    let at = |p: f64| timings[((timings.len() - 1) as f64 * p).round() as usize];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(at(0.5)), us(at(0.9)))
}

fn timed(times: usize, mut work: impl FnMut()) -> (f64, f64) {
    spread(
        (0..times)
            .map(|_| {
                let started = Instant::now();
                work();
                started.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let keypair = agentsite::net::Keypair::generate_ed25519();
    let node = keypair.public().to_peer_id();
    let agent = AgentId::of(b"calculator");
    let arguments = json!({"a": 40, "b": 2});
    let result = json!({
        "content": [{"type": "text", "text": "42.0"}],
        "structuredContent": {"result": 42.0},
        "isError": false,
    });
    let sign = || {
        Receipt::sign(
            &keypair,
            Statement {
                agent,
                tool: "add",
                arguments: &arguments,
                result: &result,
                grants: &[],
                used: Used::empty(),
                at: agentsite::receipt::now_ms(),
            },
        )
    };
    let receipt = sign();
    let signing = timed(SIGNS, || {
        std::hint::black_box(sign());
    });
    let checking = timed(SIGNS, || {
        receipt
            .check(&node, &agent, "add", &arguments, &result)
            .unwrap();
    });

    // A remote call between two nodes, and a check of its answer.
    let (host_dir, caller_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (host_node, host) = node_with_hub(host_dir.path(), &[]).await;
    let bytes = std::fs::read(support::wasm("calculator")).unwrap();
    let calculator = AgentId::of(&bytes);
    host_node.add(&bytes).await.unwrap();
    host.publish(&calculator.to_string()).await.unwrap();
    let entry = host.network().addresses().await.unwrap();
    let (_caller_node, caller) = node_with_hub(caller_dir.path(), &entry).await;
    let hop = || Hop {
        depth: 0,
        deadline: Instant::now() + Duration::from_secs(30),
    };
    // Warm: the connection open, the agent compiled on the host.
    let (answer, ran_on) = caller
        .call_remote_at(calculator, "add", arguments.clone(), hop())
        .await
        .unwrap();
    assert!(answer.receipt.is_some());
    let mut calls = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        caller
            .call_remote_at(calculator, "add", arguments.clone(), hop())
            .await
            .unwrap();
        calls.push(started.elapsed());
    }
    let calls = spread(calls);
    let deadline = || Instant::now() + Duration::from_secs(60);
    let started = Instant::now();
    let verdict = caller
        .check_answer(calculator, "add", &arguments, &answer, ran_on, deadline())
        .await;
    let first_check = started.elapsed();
    assert!(
        matches!(verdict, agentsite::hub::Verdict::Confirmed { .. }),
        "{verdict:?}"
    );
    let mut checks = Vec::with_capacity(CHECKS);
    for _ in 0..CHECKS {
        let started = Instant::now();
        caller
            .check_answer(calculator, "add", &arguments, &answer, ran_on, deadline())
            .await;
        checks.push(started.elapsed());
    }
    let checks = spread(checks);

    println!("| what | p50 | p90 |");
    println!("|---|---:|---:|");
    println!(
        "| sign a receipt (host, per call) | {:.1} µs | {:.1} µs |",
        signing.0, signing.1
    );
    println!(
        "| check a receipt (caller, per call: signature, two hashes) | {:.1} µs | {:.1} µs |",
        checking.0, checking.1
    );
    println!(
        "| the remote call they ride on (`calculator.add`, memory transport, round trip) | {:.1} µs | {:.1} µs |",
        calls.0, calls.1
    );
    println!(
        "| check an answer by running it again, agent already fetched | {:.1} µs | {:.1} µs |",
        checks.0, checks.1
    );
    println!(
        "| the first check (the agent fetched by hash and compiled) | {:.1} ms | |",
        first_check.as_secs_f64() * 1e3
    );
    println!(
        "\nsign + check: {:.1}% of the remote call's median",
        (signing.0 + checking.0) / calls.0 * 100.0
    );
    host.network().shutdown().await;
    caller.network().shutdown().await;
}
