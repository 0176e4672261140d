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
    cli.call("filesystem", "read-file", r#"{"path": "/data/notes.txt"}"#)
        .failure("filesystem.read-file failed: Failed to read file");
    // Its own policy.yaml names its author's folders, which are not here:
    // refused with the reason, and nothing granted.
    let theirs = wassette::source("filesystem-rs").join("policy.yaml");
    cli.run(&["grant", "filesystem", "--from-policy", theirs.to_str().unwrap()])
        .failure("cannot be imported as grants (nothing was granted): storage.allow[0] fs:///Users/USERNAME/github/wassette: is not a folder here");
    // The same form, naming a folder of this machine and mounting it at
    // /data as the component expects: granted.
    let policy = folder.path().join("policy.yaml");
    let data = folder.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("notes.txt"), "granted words\n").unwrap();
    std::fs::write(
        &policy,
        "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"fs://data\"\n        access: [\"read\"]\n",
    )
    .unwrap();
    let granted = cli.run(&[
        "grant",
        "filesystem",
        "--from-policy",
        policy.to_str().unwrap(),
    ]);
    granted.success();
    assert!(
        granted
            .stderr()
            .contains(&format!("allows: fs={}:/data", data.display())),
        "{}",
        granted.stderr()
    );
    cli.call("filesystem", "read-file", r#"{"path": "data/notes.txt"}"#)
        .success();
    let grant = format!("fs={}:/data", data.display());
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
    // Its policy.yaml allows nothing: nothing to grant.
    let policy = wassette::source("time-server-js").join("policy.yaml");
    let imported = cli.run(&[
        "grant",
        "time-server",
        "--from-policy",
        policy.to_str().unwrap(),
    ]);
    imported.success();
    assert!(
        imported.stderr().contains("allows: nothing"),
        "{}",
        imported.stderr()
    );
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

/// `agentsite call shapes TOOL ARGUMENTS`: the structured result, or the
/// failure's one line.
fn shapes(cli: &Cli, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    cli.call("shapes", tool, &arguments.to_string()).json()["structuredContent"]["result"].clone()
}

#[test]
fn every_kind_of_wit_type_is_a_tool_argument_and_result_in_its_json_form() {
    // examples/shapes: wit-bindgen alone, no agentsite SDK.
    let cli = Cli::new();
    cli.add(&["shapes"]);
    let tools = cli.run(&["tools", "shapes", "--json"]).json();
    let schema = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {tools}"))["inputSchema"]
            .clone()
    };
    let area = schema("area");
    assert_eq!(
        area["required"],
        json!(["shape"]),
        "an option may be left out"
    );
    assert_eq!(
        area["properties"]["shape"]["oneOf"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        area["properties"]["unit"],
        json!({ "anyOf": [{ "type": "string", "enum": ["metres", "feet"] }, { "type": "null" }] })
    );
    assert_eq!(
        schema("check-even")["properties"]["n"],
        json!({ "type": "integer", "minimum": 0, "maximum": 255 })
    );

    // record and tuple
    let moved = shapes(
        &cli,
        "translate",
        json!({ "p": { "x": 1, "y": 2 }, "by": [3, -4] }),
    );
    assert_eq!(moved, json!({ "x": 4, "y": -2 }));
    // variant, enum, option, result
    let circle = shapes(
        &cli,
        "area",
        json!({ "shape": { "tag": "circle", "val": 1.0 } }),
    );
    assert!(
        (circle.as_f64().unwrap() - std::f64::consts::PI).abs() < 1e-9,
        "{circle}"
    );
    let feet = shapes(
        &cli,
        "area",
        json!({ "shape": { "tag": "rectangle", "val": { "x": 2, "y": 3 } }, "unit": "feet" }),
    );
    assert!(
        (feet.as_f64().unwrap() - 64.583_462_5).abs() < 1e-6,
        "{feet}"
    );
    let empty = shapes(
        &cli,
        "area",
        json!({ "shape": { "tag": "empty" }, "unit": null }),
    );
    assert_eq!(empty, json!(0.0));
    cli.call(
        "shapes",
        "area",
        r#"{"shape": {"tag": "circle", "val": -1}}"#,
    )
    .failure("shapes.area failed: a circle of radius -1");
    // flags
    let styled = shapes(
        &cli,
        "styled",
        json!({ "text": "hi", "style": { "bold": true, "italic": true } }),
    );
    assert_eq!(styled, "***hi***");
    assert_eq!(
        shapes(&cli, "styled", json!({ "text": "hi", "style": {} })),
        "hi"
    );
    // list of tuples
    let tally = shapes(&cli, "tally", json!({ "words": ["a", "b", "a"] }));
    assert_eq!(tally, json!([["a", 2], ["b", 1]]));
    // option<char>
    assert_eq!(shapes(&cli, "initial", json!({ "name": "Zoë" })), "Z");
    assert_eq!(shapes(&cli, "initial", json!({ "name": "" })), json!(null));
    // result<_, string>
    assert_eq!(shapes(&cli, "check-even", json!({ "n": 4 })), json!(null));
    cli.call("shapes", "check-even", r#"{"n": 3}"#)
        .failure("shapes.check-even failed: 3 is odd");

    // What does not fit is refused naming where, before the component runs.
    for (tool, arguments, expected) in [
        (
            "check-even",
            r#"{"n": 256}"#,
            "n: expected an integer from 0 to 255, got 256",
        ),
        (
            "area",
            r#"{"shape": {"tag": "hexagon"}}"#,
            "shape.tag: expected one of circle, rectangle, empty",
        ),
        (
            "area",
            r#"{"shape": {"tag": "circle"}}"#,
            "shape.val: missing",
        ),
        (
            "area",
            r#"{"shape": {"tag": "empty"}, "unit": "yards"}"#,
            "unit: expected one of metres, feet",
        ),
        (
            "translate",
            r#"{"p": {"x": 1}, "by": [0, 0]}"#,
            "p.y: missing",
        ),
        (
            "translate",
            r#"{"p": {"x": 1, "y": 2, "z": 3}, "by": [0, 0]}"#,
            "p.z: not a field of this record",
        ),
        (
            "translate",
            r#"{"p": {"x": 1, "y": 2}, "by": [0]}"#,
            "by: expected an array of 2 items",
        ),
        (
            "styled",
            r#"{"text": "hi", "style": {"bold": 1}}"#,
            "style.bold: expected true or false, got 1",
        ),
        (
            "styled",
            r#"{"text": "hi", "style": {"underline": true}}"#,
            "style.underline: not a flag",
        ),
        (
            "initial",
            r#"{"name": "a", "extra": 1}"#,
            "unknown argument `extra`",
        ),
        (
            "tally",
            r#"{"words": ["a", 2]}"#,
            "words[1]: expected a string, got 2",
        ),
    ] {
        cli.call("shapes", tool, arguments)
            .failure(&format!("invalid arguments: {expected}"));
    }
}
