//! Agents written in other languages with the SDKs of guest-sdk/: built from
//! their source in examples/ by the test suite, added with `agentsite add`
//! like any component, called through the command line and MCP, and held to
//! the same limits when they misbehave.

use crate::support;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Cli, installed_tool, js_agent, python_agent, repo, run_bounded, tool_text as text};

fn add(cli: &Cli, component: &Path) -> String {
    cli.run(&["add", component.to_str().unwrap()]).success()
}

/// The MCP descriptor of `tool` as `agentsite tools AGENT --json` lists it.
fn listed_tool(cli: &Cli, agent: &str, tool: &str) -> Value {
    let tools = cli.run(&["tools", agent, "--json"]).json();
    tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("{agent} lists no {tool}: {tools}"))
        .clone()
}

async fn stdio_client(cli: &Cli) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentsite"));
    command.arg("--data-dir").arg(cli.data()).arg("mcp");
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .expect("agentsite mcp starts")
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_agent_built_from_source_serves_the_cli_and_mcp() {
    let cli = Cli::new();
    let id = add(&cli, &python_agent("python-stats"));
    assert!(id.trim().starts_with("sha256:"), "{id}");
    let listed = cli.run(&["ls", "--json"]).json();
    assert_eq!(listed[0]["card"]["name"], "stats");

    // The schema comes from the type hints and docstrings.
    let summarize = listed_tool(&cli, "stats", "summarize");
    assert_eq!(
        summarize["inputSchema"]["properties"]["values"],
        json!({"type": "array", "items": {"type": "number"}, "description": "the numbers"})
    );
    assert_eq!(summarize["outputSchema"]["title"], "Summary");
    assert_eq!(summarize["annotations"]["readOnlyHint"], true);

    let summary = cli
        .call("stats", "summarize", r#"{"values": [1, 2, 3, 4, 10]}"#)
        .json();
    assert_eq!(summary["structuredContent"]["median"], json!(3.0));
    assert_eq!(summary["structuredContent"]["mean"], json!(4.0));
    assert_eq!(
        summary["structuredContent"]["quartiles"],
        json!([2.0, 3.0, 4.0])
    );
    cli.call("stats", "summarize", r#"{"values": [1, "two"]}"#)
        .failure("invalid arguments: values[1]: expected a number, got a string");
    cli.call(
        "stats",
        "correlate",
        r#"{"x": [1, 2], "y": [1, 2], "method": "kendall"}"#,
    )
    .failure("method: expected one of 'pearson', 'spearman', got 'kendall'");
    cli.call("stats", "summarize", r#"{"values": []}"#)
        .failure("a summary needs at least 1 numbers, got 0");

    let client = stdio_client(&cli).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    for tool in [
        "stats.summarize",
        "stats.correlate",
        "stats.regress",
        "stats.histogram",
    ] {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing from {names:?}"
        );
    }
    let line = call(
        &client,
        "stats.regress",
        json!({"x": [1, 2, 3], "y": [3, 5, 7]}),
    )
    .await;
    let fit = line.structured_content.expect("structured");
    assert!((fit["slope"].as_f64().unwrap() - 2.0).abs() < 1e-9, "{fit}");
    assert!(
        (fit["intercept"].as_f64().unwrap() - 1.0).abs() < 1e-9,
        "{fit}"
    );
    let histogram = call(
        &client,
        "stats.histogram",
        json!({"values": [1, 1, 2, 9], "bins": 2}),
    )
    .await;
    assert_eq!(text(&histogram).lines().count(), 2, "{}", text(&histogram));
    let refused = call(
        &client,
        "stats.histogram",
        json!({"values": [1], "bins": 99}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("bins must be from 1 to 50, got 99"),
        "{refused:?}"
    );
    client.cancel().await.unwrap();
}

/// Adds a misbehaving agent under a 2 s deadline and the default 64 MiB
/// memory, then calls each of `cases` (tool, reason) through one serving
/// node, checking after each that its well-behaved `shout` still works.
async fn contained(component: &Path, agent: &str, cases: &[(&str, &str)]) {
    let cli = Cli::new();
    add(&cli, component);
    std::fs::write(
        cli.data().join("config.toml"),
        "[limits]\ndeadline = \"2s\"\nmemory = \"64 MiB\"\n",
    )
    .unwrap();
    let client = stdio_client(&cli).await;
    for (tool, reason) in cases {
        let tool = format!("{agent}.{tool}");
        let started = Instant::now();
        let result = call(&client, &tool, json!({})).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
        assert!(text(&result).contains(reason), "{tool}: {}", text(&result));
        // Within the call's deadline, with room for a busy machine.
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{tool} took {:?}",
            started.elapsed()
        );
        let shout = call(
            &client,
            &format!("{agent}.shout"),
            json!({"text": "still here"}),
        )
        .await;
        assert_eq!(text(&shout), "STILL HERE", "after {tool}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_python_agent_is_contained_and_the_node_keeps_serving() {
    contained(
        &python_agent("python-hostile"),
        "py-hostile",
        &[
            ("spin", "deadline exceeded after 2s"),
            ("bloat", "memory limit of 64.0 MiB exceeded"),
            ("throw", "KeyError: 'the key that was never there'"),
            (
                "nonsense",
                "the tool returned a set, which is not text, content or JSON",
            ),
            (
                "recurse",
                "RecursionError: maximum recursion depth exceeded",
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_agent_built_from_source_serves_the_cli_and_mcp() {
    let cli = Cli::new();
    add(&cli, &js_agent("js-json"));
    let diff = listed_tool(&cli, "jsontools", "diff");
    assert_eq!(diff["inputSchema"]["required"], json!(["before", "after"]));
    assert_eq!(
        diff["inputSchema"]["properties"]["limit"],
        json!({"type": "integer", "default": 200, "description": "the most changes to list"})
    );
    assert_eq!(
        diff["outputSchema"]["required"],
        json!(["changes", "total"])
    );

    let changed = cli
        .call(
            "jsontools",
            "diff",
            r#"{"before": {"a": 1, "b": [1, 2], "c": "x"}, "after": {"a": 2, "b": [1], "d": true}}"#,
        )
        .json();
    assert_eq!(
        changed["structuredContent"],
        json!({"changes": [
            {"op": "changed", "path": "a", "before": 1, "after": 2},
            {"op": "removed", "path": "b[1]", "before": 2},
            {"op": "removed", "path": "c", "before": "x"},
            {"op": "added", "path": "d", "after": true},
        ], "total": 4})
    );
    cli.call("jsontools", "diff", r#"{"before": 1}"#)
        .failure("invalid arguments: missing argument `after`");
    cli.call(
        "jsontools",
        "diff",
        r#"{"before": 1, "after": 2, "limit": "all"}"#,
    )
    .failure("invalid arguments: limit: expected an integer, got a string");

    let client = stdio_client(&cli).await;
    let picked = call(
        &client,
        "jsontools.pick",
        json!({"document": {"users": [{"email": "a@x"}, {"email": "b@x"}]}, "path": "users[*].email"}),
    )
    .await;
    assert_eq!(
        picked.structured_content,
        Some(json!({"path": "users[*].email", "values": ["a@x", "b@x"]}))
    );
    let flat = call(
        &client,
        "jsontools.flatten",
        json!({"document": {"items": [{"price": 3}], "name": "x"}}),
    )
    .await;
    assert_eq!(
        flat.structured_content,
        Some(json!({"items[0].price": 3, "name": "x"}))
    );
    let refused = call(
        &client,
        "jsontools.pick",
        json!({"document": {}, "path": "a]"}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("cannot read the path"),
        "{refused:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_javascript_agent_is_contained_and_the_node_keeps_serving() {
    contained(
        &js_agent("js-hostile"),
        "js-hostile",
        &[
            ("spin", "deadline exceeded after 2s"),
            ("bloat", "memory limit of 64.0 MiB exceeded"),
            ("throw", "TypeError: the value that was never there"),
            (
                "nonsense",
                "the tool returned a function, which is not text, content or JSON",
            ),
            ("recurse", "InternalError: too much recursion"),
        ],
    )
    .await;
}

#[test]
fn the_python_sdks_own_tests_pass() {
    let output = run_bounded(
        std::process::Command::new(installed_tool("venv/bin/python"))
            .args(["-m", "unittest", "discover", "-s", "tests"])
            .current_dir(repo().join("guest-sdk/python")),
        Duration::from_secs(120),
    );
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    assert!(report.contains("OK"), "{report}");
}
