//! Components built for WASI 0.3 (the `wasip3` bindings, the SDK's
//! `async fn` tools) run beside WASI 0.2 ones: the same grants, limits and
//! instance per call, their streams and futures bounded by the call's
//! deadline and output cap.

use crate::support;

use agentsite::runtime::Mode;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use std::time::{Duration, Instant};
use support::hostile::{assert_serving, error_of, grant, node_with, result_of, test_limits};
use support::{Cli, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_calls_a_wasi_0_3_agent_of_a_served_node() {
    let cli = Cli::new();
    cli.add(&["calculator", "courier"]);
    let server = Server::start(cli.data(), &[]);
    let client = crate::mcp::http_client(server.url("/mcp")).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in ["calculator.add", "courier.wait", "courier.greet"] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    let call = |name: &str, args: serde_json::Value| {
        client.call_tool(
            CallToolRequestParams::new(name.to_owned())
                .with_arguments(args.as_object().unwrap().clone()),
        )
    };
    let greeted = call("courier.greet", json!({"name": "MCP"})).await.unwrap();
    assert_eq!(greeted.is_error, Some(false), "{greeted:?}");
    assert_eq!(support::tool_text(&greeted), "Hello, MCP!");
    let waited = call("courier.wait", json!({"millis": 5})).await.unwrap();
    assert_eq!(waited.is_error, Some(false), "{waited:?}");
    // The WASI 0.2 agent beside it answers as before.
    let added = call("calculator.add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(added.structured_content, Some(json!({"result": 5.0})));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasi_0_3_agent_is_added_and_called_beside_wasi_0_2_ones() {
    let (node, _dir) = node_with(&["calculator", "courier"], test_limits()).await;
    let record = node.resolve("courier").unwrap();
    assert!(
        record
            .imports
            .iter()
            .any(|i| i.starts_with("wasi:clocks/monotonic-clock@0.3")),
        "{:?}",
        record.imports
    );
    // WASI 0.3's HTTP client asks for the same grant as WASI 0.2's.
    assert_eq!(
        agentsite::capabilities::grant::asked_for(&record.imports),
        ["http"]
    );
    assert_eq!(node.load(&record).unwrap().mode(), Mode::Concurrent);
    let calculator = node.resolve("calculator").unwrap();
    assert_eq!(node.load(&calculator).unwrap().mode(), Mode::Synchronous);

    let tools: Vec<&str> = record.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["wait", "fetch", "read", "greet"]);

    // An async wait on WASI 0.3's clock.
    let waited = result_of(&node, "courier", "wait", json!({"millis": 30})).await;
    assert!(waited.as_u64().unwrap() >= 30, "{waited}");
    // WASI 0.3's stdout stream is written and the call returns.
    assert_eq!(
        result_of(&node, "courier", "greet", json!({"name": "Ada"})).await,
        json!("Hello, Ada!")
    );
    // Arguments are checked as for any agent.
    let error = error_of(&node, "courier", "wait", r#"{"millis": "soon"}"#).await;
    assert!(error.contains("millis"), "{error}");
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_0_3_files_and_http_reach_only_what_is_granted() {
    let (node, _dir) = node_with(&["calculator", "courier"], test_limits()).await;
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("note.txt"), "from the granted folder").unwrap();
    std::fs::write(folder.path().join("../wasi-0-3-secret.txt"), "secret").ok();

    // Nothing granted: no folder, no origin.
    let error = error_of(&node, "courier", "read", r#"{"path": "/data/note.txt"}"#).await;
    assert!(error.contains("in no folder"), "{error}");
    let server = hello_server().await;
    let error = error_of(
        &node,
        "courier",
        "fetch",
        &json!({ "url": format!("{server}/hello") }).to_string(),
    )
    .await;
    assert!(error.contains("HttpRequestDenied"), "{error}");

    grant(
        &node,
        "courier",
        &[
            &format!("fs={}:/data:ro", folder.path().display()),
            &format!("http={server}"),
        ],
    );
    assert_eq!(
        result_of(&node, "courier", "read", json!({"path": "/data/note.txt"})).await,
        json!("from the granted folder")
    );
    // The folder cannot be left.
    let error = error_of(
        &node,
        "courier",
        "read",
        r#"{"path": "/data/../wasi-0-3-secret.txt"}"#,
    )
    .await;
    assert!(error.contains("cannot open"), "{error}");
    let fetched = result_of(
        &node,
        "courier",
        "fetch",
        json!({ "url": format!("{server}/hello") }),
    )
    .await;
    assert_eq!(
        fetched,
        json!({"status": 200, "body": "hello", "truncated": false})
    );
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_future_never_resolved_and_a_stream_without_end_stop_at_the_deadline() {
    let (node, _dir) = node_with(&["calculator", "hostile_async"], test_limits()).await;
    for tool in ["forever", "endless"] {
        let started = Instant::now();
        let error = error_of(&node, "hostile-async", tool, "{}").await;
        assert_eq!(error, "deadline exceeded after 1s", "{tool}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{tool}: {:?}",
            started.elapsed()
        );
        assert_serving(&node).await;
    }
    // One write as large as the guest's memory allows is taken by the
    // host in bounded pieces: the call finishes, its output log is cut.
    let answer = result_of(&node, "hostile-async", "gulp", json!({"mib": 24})).await;
    assert_eq!(answer, json!("0 bytes were not taken"));
    assert_serving(&node).await;
}

/// A loopback HTTP server answering `/hello`; its address.
async fn hello_server() -> String {
    use axum::routing::get;
    let app = axum::Router::new().route("/hello", get(|| async { "hello" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasi_0_3_agent_cannot_plant_a_link_out_of_its_folder() {
    let (node, _dir) = node_with(&["calculator", "hostile_async"], test_limits()).await;
    let folder = tempfile::tempdir().unwrap();
    grant(
        &node,
        "hostile-async",
        &[&format!("fs={}:/data:rw", folder.path().display())],
    );
    for (target, link) in [("/etc/passwd", "abs"), ("../../etc/passwd", "up")] {
        let error = error_of(
            &node,
            "hostile-async",
            "link",
            &json!({"target": target, "link": link}).to_string(),
        )
        .await;
        assert!(error.contains("NotPermitted"), "{target}: {error}");
        assert!(!folder.path().join(link).exists(), "{target}");
    }
    // A link that stays inside is made.
    std::fs::write(folder.path().join("note.txt"), "x").unwrap();
    assert_eq!(
        result_of(
            &node,
            "hostile-async",
            "link",
            json!({"target": "note.txt", "link": "alias"})
        )
        .await,
        json!("linked alias to note.txt")
    );
    assert!(folder.path().join("alias").is_symlink());
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasi_0_3_agents_resources_and_prompts_are_served_over_mcp() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams, ResourceContents};
    let cli = Cli::new();
    cli.add(&["courier"]);
    let server = Server::start(cli.data(), &[]);
    let client = crate::mcp::http_client(server.url("/agents/courier/mcp")).await;

    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(
        resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
        ["courier://about"]
    );
    assert_eq!(resources[0].mime_type.as_deref(), Some("text/plain"));
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "courier://route/{place}");
    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
    match &read("courier://about").await.unwrap().contents[..] {
        [ResourceContents::TextResourceContents { text, .. }] => {
            assert_eq!(text, "waits, fetches and reads, on WASI 0.3");
        }
        other => panic!("text expected: {other:?}"),
    }
    match &read("courier://route/paris").await.unwrap().contents[..] {
        [ResourceContents::BlobResourceContents { blob, .. }] => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(blob)
                .unwrap();
            assert_eq!(bytes, b"paris");
        }
        other => panic!("a blob expected: {other:?}"),
    }
    let missing = read("courier://nowhere").await.unwrap_err().to_string();
    assert!(missing.contains("courier://nowhere"), "{missing}");

    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "deliver");
    assert_eq!(
        prompts[0].arguments.as_ref().unwrap()[0].required,
        Some(true)
    );
    let mut arguments = serde_json::Map::new();
    arguments.insert("place".into(), json!("Lyon"));
    let prompt = client
        .get_prompt(GetPromptRequestParams::new("deliver").with_arguments(arguments))
        .await
        .unwrap();
    assert_eq!(prompt.description.as_deref(), Some("A delivery to Lyon"));
    let messages = serde_json::to_value(&prompt.messages).unwrap();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"]["text"], "Deliver this to Lyon.");
    assert_eq!(messages[1]["role"], "assistant");
    let refused = client
        .get_prompt(GetPromptRequestParams::new("deliver"))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("place"), "{refused}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasi_0_3_agent_cannot_open_a_tcp_socket_even_with_an_http_grant() {
    let (node, _dir) = node_with(&["calculator", "hostile_async"], test_limits()).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dial = json!({"port": port}).to_string();
    // No grant at all, then HTTP to that very port: sockets are never granted.
    let error = error_of(&node, "hostile-async", "dial", &dial).await;
    assert!(error.contains("AccessDenied"), "{error}");
    grant(
        &node,
        "hostile-async",
        &[&format!("http=http://127.0.0.1:{port}")],
    );
    let error = error_of(&node, "hostile-async", "dial", &dial).await;
    assert!(error.contains("AccessDenied"), "{error}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "no connection reached the listener"
    );
    assert_serving(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_wasi_0_3_functions_sync_and_async_are_tools() {
    let (node, _dir) = node_with(&["calculator"], test_limits()).await;
    let bytes = std::fs::read(support::wasm("ticker")).unwrap();
    let record = node
        .add_named(&bytes, agentsite::store::Origin::Local, Some("ticker"))
        .await
        .unwrap();
    let tools: Vec<&str> = record.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["wait-then-tell", "double"]);
    assert_eq!(
        result_of(&node, "ticker", "double", json!({"n": 21})).await,
        json!(42)
    );
    let waited = result_of(&node, "ticker", "wait-then-tell", json!({"millis": 20})).await;
    assert!(waited.as_u64().unwrap() >= 20, "{waited}");
    assert_serving(&node).await;
}
