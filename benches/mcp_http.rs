//! MCP over HTTP, end to end: `tools/call` of `calculator.add` against a real
//! `agentsite serve` on loopback, driven by the `oha` load generator. Every
//! call runs in a fresh wasm instance.
//!
//! Three ways in, each at concurrency 1 (latency) and 32 (throughput):
//!
//! * `stateless`: 2026-07-28 requests (no session) at `/agents/calculator/mcp`;
//! * `stateless, all agents`: the same at `/mcp`, tool `calculator.add`;
//! * `session`: a 2025-11-25 session (initialize once, then `tools/call`
//!   with its `Mcp-Session-Id`); each answer is plain JSON. Concurrency 1
//!   only: the load generator repeats one body, and requests in flight in
//!   one session must have distinct JSON-RPC ids.
//!
//! The server's CPU time (user + system, from /proc) over each run is
//! divided by the calls answered.
//!
//! Run with `cargo bench -p agentsite --bench mcp_http` after building the
//! examples. `oha` is installed into ~/.cache/agentsite-tools/oha on first
//! use (`cargo install oha`, a few minutes). Results are printed as a
//! Markdown table for BENCHMARKS.md.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{Cli, Server, cpu_time, micros, tools_dir};

/// Calls one after another: 20,000 unless `BENCH_CALLS` says otherwise.
fn calls_at_1() -> String {
    std::env::var("BENCH_CALLS").unwrap_or_else(|_| "20000".into())
}
const SECONDS_AT_32: &str = "10s";

/// The `oha` binary, installed on first use.
fn oha() -> PathBuf {
    let root = tools_dir().join("oha");
    let bin = root.join("bin/oha");
    if !bin.exists() {
        eprintln!(
            "installing oha into {} (cargo install, once)",
            root.display()
        );
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["install", "--locked", "--quiet", "--root"])
            .arg(&root)
            .arg("oha")
            .env("CARGO_TARGET_DIR", tools_dir().join("oha-build"))
            .status()
            .expect("cargo install runs");
        assert!(status.success(), "cargo install oha failed");
    }
    bin
}

/// One way of calling the tool: URL, headers and body.
struct Target {
    name: &'static str,
    url: String,
    headers: Vec<(String, String)>,
    body: String,
    /// Whether concurrent copies of `body` are valid requests.
    concurrent: bool,
}

fn stateless(name: &'static str, url: String, tool: &str) -> Target {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": {"a": 2, "b": 3},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "oha", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    });
    Target {
        name,
        url,
        headers: vec![
            ("mcp-protocol-version".into(), "2026-07-28".into()),
            ("mcp-method".into(), "tools/call".into()),
            ("mcp-name".into(), tool.into()),
        ],
        body: body.to_string(),
        concurrent: true,
    }
}

/// Opens a 2025-11-25 session and returns the target calling inside it.
fn session(url: String) -> Target {
    let client = reqwest::blocking_client();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "oha", "version": "1"}
        }
    });
    let response = client(&url, &[], &initialize.to_string());
    let id = response.0.expect("the server gives a session id");
    let version = vec![
        ("mcp-session-id".to_owned(), id),
        ("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    client(&url, &version, &initialized.to_string());
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 3}}
    });
    Target {
        name: "session (2025-11-25)",
        url,
        headers: version,
        body: body.to_string(),
        concurrent: false,
    }
}

/// A tiny blocking HTTP POST for setting up and checking targets.
mod reqwest {
    pub type Post = Box<dyn Fn(&str, &[(String, String)], &str) -> (Option<String>, String)>;

    pub fn blocking_client() -> Post {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = ::reqwest::Client::new();
        Box::new(move |url, headers, body| {
            runtime.block_on(async {
                let mut request = client
                    .post(url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(body.to_owned());
                for (name, value) in headers {
                    request = request.header(name, value);
                }
                let response = request.send().await.unwrap();
                let session = response
                    .headers()
                    .get("mcp-session-id")
                    .map(|v| v.to_str().unwrap().to_owned());
                (session, response.text().await.unwrap())
            })
        })
    }
}

/// Checks that the target really answers 5 before timing it: the load
/// generator only sees HTTP statuses.
fn check(target: &Target) {
    let post = reqwest::blocking_client();
    let (_, text) = post(&target.url, &target.headers, &target.body);
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{')))
        .unwrap_or(&text);
    let response: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(
        response["result"]["structuredContent"]["result"],
        json!(5.0),
        "{}: {response}",
        target.name
    );
}

struct Figures {
    requests_per_sec: f64,
    /// The server's CPU time over the run divided by the calls.
    cpu_per_call: Duration,
    p50: Duration,
    p99: Duration,
}

fn load(oha: &Path, server: u32, target: &Target, concurrency: &str, amount: [&str; 2]) -> Figures {
    let mut command = Command::new(oha);
    command
        .args([
            "--no-tui",
            "--output-format",
            "json",
            "-m",
            "POST",
            "-c",
            concurrency,
        ])
        .args(amount)
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"]);
    for (name, value) in &target.headers {
        command.args(["-H", &format!("{name}: {value}")]);
    }
    let cpu_before = cpu_time(server);
    let output = command
        .args(["-d", &target.body, &target.url])
        .output()
        .unwrap();
    let cpu = cpu_time(server) - cpu_before;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let statuses = &report["statusCodeDistribution"];
    let ok = statuses["200"].as_u64().unwrap_or(0);
    let all: u64 = statuses
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(ok, all, "{}: non-200 answers: {statuses}", target.name);
    let seconds =
        |key: &str| Duration::from_secs_f64(report["latencyPercentiles"][key].as_f64().unwrap());
    Figures {
        requests_per_sec: report["summary"]["requestsPerSec"].as_f64().unwrap(),
        cpu_per_call: cpu / all.max(1) as u32,
        p50: seconds("p50"),
        p99: seconds("p99"),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let oha = oha();
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let targets = [
        stateless(
            "stateless (2026-07-28), /agents/calculator/mcp",
            format!("{}/agents/calculator/mcp", server.base),
            "add",
        ),
        stateless(
            "stateless (2026-07-28), /mcp",
            format!("{}/mcp", server.base),
            "calculator.add",
        ),
        session(format!("{}/agents/calculator/mcp", server.base)),
    ];
    println!(
        "| endpoint | c=1 p50 | c=1 p99 | c=1 calls/s | c=1 server CPU/call | c=32 calls/s | c=32 p50 | c=32 p99 | c=32 server CPU/call |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let pid = server.pid();
    for target in &targets {
        check(target);
        // Warm up: first load of the agent, connection pools, caches.
        load(&oha, pid, target, "1", ["-n", "2000"]);
        let one = load(&oha, pid, target, "1", ["-n", &calls_at_1()]);
        let many = match target.concurrent {
            true => {
                let many = load(&oha, pid, target, "32", ["-z", SECONDS_AT_32]);
                format!(
                    "{:.0} | {} | {} | {}",
                    many.requests_per_sec,
                    micros(many.p50),
                    micros(many.p99),
                    micros(many.cpu_per_call),
                )
            }
            false => "— | — | — | —".to_owned(),
        };
        println!(
            "| {} | {} | {} | {:.0} | {} | {many} |",
            target.name,
            micros(one.p50),
            micros(one.p99),
            one.requests_per_sec,
            micros(one.cpu_per_call),
        );
    }
}
