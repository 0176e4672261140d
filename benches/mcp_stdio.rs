//! MCP over stdio, end to end: a Rust client drives `agentsite mcp` (the
//! bench build) through its stdin and stdout with `tools/call` of
//! `calculator.add`, each in a fresh wasm instance.
//!
//! * c=1: 20,000 calls one after another: round-trip p50 and p99, and the
//!   server's CPU time (user + system, from /proc) divided by the calls;
//! * c=8: 8 calls in flight for 20,000 calls: calls per second, and CPU.
//!
//! Run with `cargo bench -p agentsite --bench mcp_stdio` after building the
//! examples. Prints a Markdown table for BENCHMARKS.md. `BENCH_CALLS` sets
//! the number of calls.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;
use support::{Cli, cpu_time, micros, percentile};

struct Server {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    line: String,
}

impl Server {
    fn start(cli: &Cli) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentsite"))
            .arg("--data-dir")
            .arg(cli.data())
            .arg("mcp")
            .env_remove("AGENTSITE_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("agentsite mcp starts");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            input,
            output,
            line: String::new(),
        };
        server.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#);
        assert!(
            server.receive().contains("\"serverInfo\""),
            "{}",
            server.line
        );
        server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server
    }

    fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).unwrap();
        self.input.write_all(b"\n").unwrap();
        self.input.flush().unwrap();
    }

    fn receive(&mut self) -> &str {
        self.line.clear();
        self.output.read_line(&mut self.line).unwrap();
        &self.line
    }

    fn call(&mut self, id: u64) {
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"calculator.add","arguments":{{"a":2,"b":3}}}}}}"#
        ));
    }

    /// Reads one answer and checks it is the sum.
    fn answer(&mut self) {
        let line = self.receive();
        assert!(line.contains(r#""result":5.0"#), "unexpected answer {line}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    let calls: u64 = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let mut server = Server::start(&cli);
    let pid = server.child.id();
    // Warm: the first call loads the agent.
    for id in 1..=200 {
        server.call(id);
        server.answer();
    }

    let cpu = cpu_time(pid);
    let mut times = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for id in 1..=calls {
        let sent = Instant::now();
        server.call(id);
        server.answer();
        times.push(sent.elapsed());
    }
    let elapsed = started.elapsed();
    let cpu_1 = (cpu_time(pid) - cpu) / calls as u32;
    times.sort();

    let in_flight = 8;
    let cpu = cpu_time(pid);
    let started = Instant::now();
    let mut sent = 0;
    for _ in 0..in_flight {
        sent += 1;
        server.call(sent);
    }
    for _ in 0..calls {
        server.answer();
        if sent < calls {
            sent += 1;
            server.call(sent);
        }
    }
    let elapsed_8 = started.elapsed();
    let cpu_8 = (cpu_time(pid) - cpu) / calls as u32;

    println!(
        "| `agentsite mcp` over stdio, {calls} calls | p50 | p99 | calls/s | server CPU per call |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| c=1 | {} | {} | {:.0} | {} |",
        micros(percentile(&times, 0.5)),
        micros(percentile(&times, 0.99)),
        calls as f64 / elapsed.as_secs_f64(),
        micros(cpu_1)
    );
    println!(
        "| c={in_flight} | — | — | {:.0} | {} |",
        calls as f64 / elapsed_8.as_secs_f64(),
        micros(cpu_8)
    );
}
