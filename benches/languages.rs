//! Agents in other languages next to a Rust one: what adding them costs, a
//! first call in a fresh process, and a warm call through the node.
//!
//! * `add`: `agentsite add` of the component, from exec to exit (it
//!   compiles in the node's compiler process).
//! * `first call`: a fresh process opens the node, loads the precompiled
//!   agent, instantiates it and calls one tool (process start-up excluded),
//!   median of 7.
//! * `warm call`: `Node::call_record` on a serving node (pooled instances,
//!   the agent resolved once), a fresh instance per call, timed one by one:
//!   p50 and p90.
//!
//! Run with `cargo bench -p agentsite --bench languages` after building the
//! Rust examples (`cd examples && cargo build --release --target
//! wasm32-wasip2`) and installing the test tools (`bash scripts/tools.sh`):
//! the Python and JavaScript examples are built here with their SDKs.

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::NodeConfig;
use agentsite::config::DataDir;
use agentsite::runtime::Capacity;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{js_agent, python_agent, repo};

/// An agent to measure: its component, one tool call, how many warm calls.
struct Subject {
    label: &'static str,
    component: PathBuf,
    agent: &'static str,
    tool: &'static str,
    arguments: &'static str,
    calls: usize,
}

fn run_ok(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn subjects() -> Vec<Subject> {
    vec![
        Subject {
            label: "Rust (calculator.add)",
            component: repo().join("examples/target/wasm32-wasip2/release/calculator.wasm"),
            agent: "calculator",
            tool: "add",
            arguments: r#"{"a": 2, "b": 3}"#,
            calls: 5_000,
        },
        Subject {
            label: "Python (stats.summarize)",
            component: python_agent("python-stats"),
            agent: "stats",
            tool: "summarize",
            arguments: r#"{"values": [1, 2, 3, 4, 10]}"#,
            calls: 1_000,
        },
        // Components of plain functions (no agentsite SDK): their tools
        // are their exports, arguments and results converted from and to
        // JSON by the node (runtime::plain).
        Subject {
            label: "Rust, plain functions (shapes.translate)",
            component: repo().join("examples/target/wasm32-wasip2/release/shapes.wasm"),
            agent: "shapes",
            tool: "translate",
            arguments: r#"{"p": {"x": 1, "y": 2}, "by": [3, -4]}"#,
            calls: 5_000,
        },
        Subject {
            label: "Wassette's eval-py (eval.eval)",
            component: support::wassette::eval_py(),
            agent: "eval",
            tool: "eval",
            arguments: r#"{"expression": "sum(range(10)) * 2"}"#,
            calls: 1_000,
        },
        Subject {
            label: "Wassette's time-server-js (time.get-current-time)",
            component: support::wassette::time_server_js(),
            agent: "time",
            tool: "get-current-time",
            arguments: "{}",
            calls: 1_000,
        },
        Subject {
            label: "JavaScript (jsontools.flatten)",
            component: js_agent("js-json"),
            agent: "jsontools",
            tool: "flatten",
            arguments: r#"{"document": {"items": [{"price": 3}], "name": "x"}}"#,
            calls: 1_000,
        },
    ]
}

const FIRST_CALL_CHILD: &str = "--first-call-child";

/// In a child process: open the node, call once, print the nanoseconds.
fn first_call_child(data: &str, agent: &str, tool: &str, arguments: &str) {
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = agentsite::Node::open(DataDir::new(data), NodeConfig::default(), Capacity::OneShot)
        .unwrap();
    let output = rt
        .block_on(node.call(agent, tool, arguments, None))
        .unwrap();
    let elapsed = started.elapsed();
    assert!(!output.is_error);
    println!("{}", elapsed.as_nanos());
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == FIRST_CALL_CHILD) {
        return first_call_child(&args[i + 1], &args[i + 2], &args[i + 3], &args[i + 4]);
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_agentsite");
    let this = std::env::current_exe().unwrap();
    println!(
        "| agent | component | add | first call (fresh process) | warm call p50 | warm call p90 |"
    );
    println!("|---|---|---|---|---|---|");
    for subject in subjects() {
        let data = tempfile::tempdir().unwrap();
        let size = std::fs::metadata(&subject.component).unwrap().len();
        let started = Instant::now();
        run_ok(
            Command::new(bin)
                .arg("--data-dir")
                .arg(data.path())
                .arg("add")
                .arg(&subject.component),
        );
        let add = started.elapsed();

        let first = median(
            (0..7)
                .map(|_| {
                    let nanos = run_ok(
                        Command::new(&this)
                            .arg(FIRST_CALL_CHILD)
                            .arg(data.path())
                            .args([subject.agent, subject.tool, subject.arguments]),
                    );
                    Duration::from_nanos(nanos.trim().parse().unwrap())
                })
                .collect(),
        );

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let node = agentsite::Node::open(
            DataDir::new(data.path()),
            NodeConfig::default(),
            Capacity::SERVER,
        )
        .unwrap();
        // Resolved once, as a serving node resolves from its snapshot of
        // the catalog: `Node::call` by name reads and parses the agents'
        // records from disk each time, which would be most of what is
        // timed (and more for an agent whose record carries more schemas).
        let record = node.resolve(subject.agent).unwrap();
        let grants = node.grants(&record).unwrap();
        let call = || {
            let output = rt
                .block_on(node.call_record(
                    &record,
                    subject.tool,
                    subject.arguments,
                    grants.clone(),
                    None,
                ))
                .unwrap();
            assert!(!output.is_error);
        };
        for _ in 0..subject.calls / 10 {
            call();
        }
        let mut warm: Vec<Duration> = (0..subject.calls)
            .map(|_| {
                let started = Instant::now();
                call();
                started.elapsed()
            })
            .collect();
        warm.sort();
        println!(
            "| {} | {:.1} MiB | {:.2} s | {:.1} ms | {:.0} µs | {:.0} µs |",
            subject.label,
            size as f64 / (1024.0 * 1024.0),
            add.as_secs_f64(),
            first.as_secs_f64() * 1e3,
            warm[warm.len() / 2].as_secs_f64() * 1e6,
            warm[warm.len() * 9 / 10].as_secs_f64() * 1e6,
        );
    }
}
