//! Hostile agents that turn the `peers` capability on the node: an agent
//! calling itself forever, and one whose every call calls itself several
//! times (exponential fan-out). A serving node on the network runs them;
//! the grant's depth and fan-out end both, and calls from clients beside
//! them keep being answered.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::{Cli, Server};

/// Calls `tool` through the node's MCP endpoint (stateless, protocol
/// 2026-07-28) and returns the structured result.
async fn call(server: &Server, tool: &str, arguments: Value) -> Value {
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .timeout(Duration::from_secs(60))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": tool,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": { "name": "hostile-peers", "version": "1" },
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    let result = &body["result"];
    assert_eq!(result["isError"], false, "{tool}: {body}");
    let structured = &result["structuredContent"];
    // Values that are not objects come wrapped as {"result": ...}.
    structured.get("result").unwrap_or(structured).clone()
}

/// The agent `spiral` served on a node of its own network, with `grant`
/// for peers (none when empty).
fn serve_spiral(grant: &[&str]) -> (Cli, Server, String) {
    let cli = Cli::new();
    let ids = cli.add(&["calculator", "hostile_spiral"]);
    if !grant.is_empty() {
        cli.grant("hostile-spiral", grant);
    }
    let server = Server::start(cli.data(), &["--p2p-listen", "/ip4/127.0.0.1/tcp/0"]);
    (cli, server, ids[1].clone())
}

/// Normal calls go on while `attack` runs, and each succeeds; returns the
/// attack's result.
async fn while_serving(server: &Server, attack: impl std::future::Future<Output = Value>) -> Value {
    let done = std::sync::atomic::AtomicBool::new(false);
    let normal_calls = async {
        let mut served = 0;
        while served == 0 || !done.load(std::sync::atomic::Ordering::SeqCst) {
            let sum = call(server, "calculator.add", json!({"a": 20, "b": 22})).await;
            assert_eq!(sum, json!(42.0));
            served += 1;
        }
    };
    let attack = async {
        let result = attack.await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        result
    };
    let (result, ()) = tokio::join!(attack, normal_calls);
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_calling_itself_stops_at_its_depth() {
    let (_cli, server, id) = serve_spiral(&[]);
    let chain = call(&server, "hostile-spiral.recurse", json!({ "self_id": id })).await;
    assert_eq!(chain["hops"], 0, "{chain}");
    assert!(
        chain["stopped_by"].as_str().unwrap().contains("NotGranted"),
        "{chain}"
    );
    drop(server);

    let (_cli, server, id) = serve_spiral(&["peers=3/8"]);
    let chain = while_serving(
        &server,
        call(&server, "hostile-spiral.recurse", json!({ "self_id": id })),
    )
    .await;
    // The client's call is hop 0; hops 1 to 3 ran, hop 4 was refused.
    assert_eq!(chain["hops"], 3, "{chain}");
    let stopped_by = chain["stopped_by"].as_str().unwrap();
    assert!(stopped_by.contains("DepthExceeded"), "{chain}");
    assert!(stopped_by.contains("at most 3 deep"), "{chain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exponential_fan_out_is_bounded_by_fan_out_and_depth() {
    let (_cli, server, id) = serve_spiral(&["peers=2/3"]);
    let tree = while_serving(
        &server,
        call(
            &server,
            "hostile-spiral.fan_out",
            json!({ "self_id": id, "width": 5 }),
        ),
    )
    .await;
    // Asked for 5 + 25 + 125 + ... calls; granted 3 per call, 2 deep:
    // 3 at hop 1 and 3 × 3 at hop 2.
    assert_eq!(tree["calls"], 3 + 9, "{tree}");
    // Refused: 2 of 5 at the top, 2 of 5 in each of the 3 hop-1 calls, and
    // all 5 in each of the 9 hop-2 calls (too deep).
    assert_eq!(tree["refused"], 2 + 3 * 2 + 9 * 5, "{tree}");
    let refusal = tree["refusal"].as_str().unwrap();
    assert!(
        refusal.contains("at most 3 calls") || refusal.contains("at most 2 deep"),
        "{tree}"
    );

    // The audit counted every call and every refusal.
    let metrics = server.metrics().await;
    for line in [
        "agentsite_calls_total{agent=\"hostile-spiral\"} 13",
        "agentsite_denials_total{agent=\"hostile-spiral\",capability=\"peers\"} 53",
        "agentsite_call_duration_seconds_count{agent=\"hostile-spiral\"} 13",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
}
