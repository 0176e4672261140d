//! Official Python clients as clients of agentsite (pinned in
//! tests/python/requirements.txt): the MCP SDK (`mcp`) over streamable HTTP
//! and over stdio, with its checks in tests/python/mcp_client.py; and the
//! OpenAI client (`openai`) against the node's `/v1` endpoint, with its
//! checks in tests/python/openai_client.py.

use crate::support;

use std::time::Duration;
use support::{Cli, Server};

fn python_client(args: &[&str]) {
    python_script("mcp_client.py", args, Duration::from_secs(120));
}

fn python_script(script: &str, args: &[&str], limit: Duration) {
    let stdout = support::python_script(script, args, limit);
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

#[test]
fn openai_python_client_uses_the_nodes_models() {
    let cli = Cli::new();
    let server = Server::start(cli.data(), &["--token", "s3cret"]);
    // Four answers of the embedded model on a debug build of the node.
    python_script(
        "openai_client.py",
        &[&server.base, "s3cret"],
        Duration::from_secs(600),
    );
}
