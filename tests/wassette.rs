//! Components no one here wrote: Wassette's own examples
//! (tests/fixtures/wassette), built from their source with the tools their
//! authors use, become agents whose tools are their exported functions,
//! with input schemas from their WIT types; they are called through the
//! command line and MCP, under the same sandbox and grants as any agent.

use crate::support;

use serde_json::json;
use support::{Cli, Server, wassette};

/// The tools a running node lists on /mcp, with their input schemas.
async fn listed(url: String) -> Vec<(String, serde_json::Value)> {
    use rmcp::ServiceExt as _;
    let client = ()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
            url,
        ))
        .await
        .expect("MCP client connects");
    let tools = client.list_all_tools().await.expect("tools/list answers");
    client.cancel().await.ok();
    tools
        .into_iter()
        .map(|t| {
            (
                t.name.to_string(),
                serde_json::Value::Object((*t.input_schema).clone()),
            )
        })
        .collect()
}

/// A fresh node with the example `build` makes added (with `options`);
/// `add` must say `says`.
async fn added(build: fn() -> std::path::PathBuf, options: &[&str], says: &str) -> Cli {
    let wasm = tokio::task::spawn_blocking(build).await.unwrap();
    let cli = Cli::new();
    let mut args = vec!["add", wasm.to_str().unwrap()];
    args.extend_from_slice(options);
    let added = cli.run(&args);
    added.success();
    assert!(added.stderr().contains(says), "{}", added.stderr());
    cli
}

#[tokio::test(flavor = "multi_thread")]
async fn wassettes_rust_filesystem_component_reads_only_what_it_is_granted() {
    let says = "added filesystem unversioned (4 tools: list-directory, read-file, search-file, get-file-info)";
    let cli = added(wassette::filesystem_rs, &[], says).await;
    let tools = cli.run(&["tools", "filesystem", "--json"]).json();
    let read = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read-file")
        .expect("read-file");
    assert_eq!(
        read["inputSchema"],
        json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"],
            "additionalProperties": false,
        })
    );
    assert_eq!(
        read["description"],
        "read-file(path: string) -> result<string, string>"
    );

    // Deny by default: no folder is there until one is granted.
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("notes.txt"), "granted words\n").unwrap();
    cli.call("filesystem", "read-file", r#"{"path": "/data/notes.txt"}"#)
        .failure("filesystem.read-file failed: Failed to read file");
    let grant = format!("fs={}:/data", folder.path().display());
    cli.grant("filesystem", &[&grant]);
    let read = cli
        .call("filesystem", "read-file", r#"{"path": "/data/notes.txt"}"#)
        .json();
    assert_eq!(read["structuredContent"]["result"], "granted words\n");
    assert_eq!(read["content"][0]["text"], "granted words\n");
    // The `err` of its result is the tool's error, in its own words.
    cli.call(
        "filesystem",
        "read-file",
        r#"{"path": "/data/missing.txt"}"#,
    )
    .failure("filesystem.read-file failed: Failed to read file");
    // Arguments are checked against the schema before the component runs.
    cli.call("filesystem", "read-file", r#"{"path": 7}"#)
        .failure("invalid arguments: path: expected a string, got 7");
    cli.call("filesystem", "search-file", r#"{"path": "/data"}"#)
        .failure("invalid arguments: missing argument `pattern`");

    // Over MCP, with a list as its structured result.
    let server = Server::start(cli.data(), &[]);
    let tools = listed(server.url("/mcp")).await;
    assert!(
        tools
            .iter()
            .any(|(name, _)| name == "filesystem.list-directory"),
        "{tools:?}"
    );
    let listing = support::mcp_call(
        server.url("/mcp"),
        "filesystem.list-directory",
        json!({ "path": "/data" }),
    )
    .await;
    assert_eq!(listing, json!({ "result": ["[FILE] notes.txt\n"] }));
}

#[tokio::test(flavor = "multi_thread")]
async fn wassettes_python_eval_component_evaluates_and_reports_errors() {
    // componentize-py's own pre-initialization export is not a tool.
    let says = "added eval unversioned (2 tools: eval, exec)";
    let cli = added(wassette::eval_py, &[], says).await;
    let sum = cli
        .call("eval", "eval", r#"{"expression": "sum(range(10)) * 2"}"#)
        .json();
    assert_eq!(sum["structuredContent"]["result"], "90");
    cli.call("eval", "eval", r#"{"expression": "1/0"}"#)
        .failure("eval.eval failed: ZeroDivisionError: division by zero");
    cli.call(
        "eval",
        "exec",
        r#"{"statements": "raise ValueError('no')"}"#,
    )
    .failure("eval.exec failed: ValueError: no");
    // The sandbox holds: no environment, the deadline stops a loop.
    let environment = cli
        .call(
            "eval",
            "eval",
            r#"{"expression": "dict(__import__('os').environ)"}"#,
        )
        .json();
    assert_eq!(environment["structuredContent"]["result"], "{}");
    cli.run(&[
        "call",
        "eval",
        "eval",
        r#"{"expression": "sum(1 for _ in iter(int, 1))"}"#,
        "--deadline",
        "2s",
    ])
    .failure("deadline exceeded after 2s");

    let server = Server::start(cli.data(), &[]);
    let result = support::mcp_call(
        server.url("/agents/eval/mcp"),
        "eval",
        json!({ "expression": "'-'.join(['a', 'b'])" }),
    )
    .await;
    assert_eq!(result, json!({ "result": "\"a-b\"" }));
}

#[tokio::test(flavor = "multi_thread")]
async fn wassettes_javascript_time_component_tells_the_time_over_mcp() {
    let says = "added time-server unversioned (1 tool: get-current-time)";
    let cli = added(wassette::time_server_js, &["--name", "time-server"], says).await;
    let server = Server::start(cli.data(), &[]);
    let tools = listed(server.url("/mcp")).await;
    let (_, schema) = tools
        .iter()
        .find(|(name, _)| name == "time-server.get-current-time")
        .unwrap_or_else(|| panic!("{tools:?}"));
    assert_eq!(schema["properties"], json!({}));
    let now = support::mcp_call(
        server.url("/mcp"),
        "time-server.get-current-time",
        json!({}),
    )
    .await;
    let shown = now["result"].as_str().expect("a time");
    // An ISO 8601 time of this minute, from the component's clock.
    let told = chrono::DateTime::parse_from_rfc3339(shown).expect("an RFC 3339 time");
    let off = (chrono::Utc::now() - told.to_utc()).num_seconds().abs();
    assert!(off < 60, "{shown} is {off} s off");
}
