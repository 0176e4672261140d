//! The official MCP Python SDK (`mcp` on PyPI, pinned in
//! tests/python/requirements.txt) as a client of agentsite, over streamable
//! HTTP and over stdio. The checks live in tests/python/mcp_client.py.

mod support;

use std::process::Command;
use std::time::Duration;
use support::{Cli, Server, installed_tool, repo, run_bounded};

fn python_client(args: &[&str]) {
    let python = installed_tool("venv/bin/python");
    let output = run_bounded(
        Command::new(python)
            .arg(repo().join("tests/python/mcp_client.py"))
            .args(args),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python client failed:\n{stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
    print!("{stdout}");
}

#[test]
fn python_sdk_lists_and_calls_tools_over_http() {
    let cli = Cli::new();
    cli.add(&["calculator", "text", "conformance"]);
    cli.grant("conformance", &["llm"]);
    let server = Server::start(cli.data(), &[]);
    python_client(&["http", &server.base]);
}

#[test]
fn python_sdk_lists_and_calls_tools_over_stdio() {
    let cli = Cli::new();
    cli.add(&["calculator", "text"]);
    python_client(&[
        "stdio",
        env!("CARGO_BIN_EXE_agentsite"),
        cli.data().to_str().unwrap(),
    ]);
}
