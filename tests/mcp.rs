//! MCP clients against a real `agentsite serve` (streamable HTTP) and
//! `agentsite mcp` (stdio) process, using rmcp's client.

use crate::support;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use std::time::Duration;
use support::{Cli, Server, eventually_async, tool_text as text};

pub(crate) async fn http_client(url: String) -> RunningService<RoleClient, ()> {
    ().serve(StreamableHttpClientTransport::from_uri(url))
        .await
        .expect("MCP client connects and initializes")
}

fn arguments(value: Value) -> rmcp::model::JsonObject {
    value.as_object().unwrap().clone()
}

async fn call<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments(args)))
        .await
}

/// A raw POST to `url` with the headers a streamable HTTP client sends.
fn mcp_post(url: String) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
}

/// The `_meta` a 2026-07-28 request carries in place of a session.
fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// A raw 2026-07-28 request (id 7) to `url`, needing no session.
fn stateless_post(url: String, method: &str, params: Value) -> reqwest::RequestBuilder {
    // SEP-2243: the method, and a tool call's name, also travel as headers.
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    mcp_post(url)
        .header("mcp-name", name)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
}

/// The JSON-RPC error a request failed with; panics on any other failure.
fn jsonrpc_error(error: ServiceError) -> rmcp::ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// The URIs of every resource the client's server lists.
pub(crate) async fn resource_uris<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
) -> Vec<String> {
    let resources = client.list_all_resources().await.unwrap();
    resources.iter().map(|r| r.uri.clone()).collect()
}

/// The names of every prompt the client's server lists.
pub(crate) async fn prompt_names<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
) -> Vec<String> {
    let prompts = client.list_all_prompts().await.unwrap();
    prompts.iter().map(|p| p.name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_lists_and_calls_every_agents_tools() {
    let cli = Cli::new();
    cli.add(&["calculator", "text"]);
    let server = Server::start(cli.data(), &[]);
    // A scraper sees every family before the first call, and the node's size.
    let metrics = server.metrics().await;
    for line in [
        "# TYPE agentsite_calls counter",
        "# TYPE agentsite_call_duration_seconds histogram",
        "agentsite_agents_installed 2",
        "agentsite_peers_connected 0",
        "agentsite_build_info{version=",
    ] {
        assert!(metrics.contains(line), "{line} not in:\n{metrics}");
    }
    let client = http_client(server.url("/mcp")).await;

    let info = client.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().unwrap().name, "agentsite");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "calculator.add",
        "calculator.divide",
        "text.word_count",
        "text.sha256",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let add = tools.iter().find(|t| t.name == "calculator.add").unwrap();
    assert_eq!(add.input_schema["type"], "object");
    assert!(add.output_schema.is_some());

    let result = call(&client, "calculator.add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(result.structured_content, Some(json!({"result": 5.0})));

    let result = call(&client, "text.sha256", json!({"text": "abc"}))
        .await
        .unwrap();
    assert!(
        text(&result).contains("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        "{result:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_failures_are_results_and_unknown_tools_are_protocol_errors() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let client = http_client(server.url("/mcp")).await;

    let result = call(&client, "calculator.divide", json!({"a": 1, "b": 0}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("zero"), "{result:?}");

    // Arguments that break the input schema: a result with isError.
    let result = call(&client, "calculator.add", json!({"a": "two", "b": 3}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("invalid arguments"), "{result:?}");

    let error = call(&client, "calculator.cube_root", json!({}))
        .await
        .unwrap_err();
    let error = jsonrpc_error(error);
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(error.message.contains("unknown tool"), "{error:?}");

    // The server keeps serving correct calls.
    let result = call(&client, "calculator.multiply", json!({"a": 6, "b": 7}))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(json!({"result": 42.0})));
    client.cancel().await.unwrap();

    // The client's mistake is not the operator's warning: nothing at warn,
    // no debug text; with -v, one plain line.
    let log = server.log();
    assert!(!log.contains("WARN"), "{log}");
    assert!(!log.contains("ErrorData"), "{log}");
    // One node serves a data directory at a time.
    drop(server);
    let verbose = Server::start(cli.data(), &["-v"]);
    let client = http_client(verbose.url("/mcp")).await;
    call(&client, "calculator.cube_root", json!({}))
        .await
        .unwrap_err();
    client.cancel().await.unwrap();
    // The reader of the node's stderr may trail the answer.
    let log = eventually_async(Duration::from_secs(10), "the refusal is logged", async || {
        let log = verbose.log();
        let line = "tools/call calculator.cube_root refused (-32602): unknown tool: calculator.cube_root";
        if log.contains(line) { Ok(log) } else { Err(log) }
    })
    .await;
    assert!(!log.contains("ErrorData"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_agent_is_served_under_its_own_tool_names() {
    let cli = Cli::new();
    let ids = cli.add(&["calculator", "text"]);
    let server = Server::start(cli.data(), &[]);

    for agent in [ids[0].as_str(), "calculator"] {
        let client = http_client(server.url(&format!("/agents/{agent}/mcp"))).await;
        let tools = client.list_all_tools().await.unwrap();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort();
        assert_eq!(names, ["add", "divide", "multiply", "subtract"]);
        let result = call(&client, "subtract", json!({"a": 5, "b": 3}))
            .await
            .unwrap();
        assert_eq!(result.structured_content, Some(json!({"result": 2.0})));
        client.cancel().await.unwrap();
    }

    let response = reqwest::get(server.url("/agents/nosuchagent/mcp"))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_hear_when_agents_are_added_or_removed() {
    use std::sync::{Arc, Mutex};

    /// A client that counts `tools/list_changed` notifications.
    #[derive(Clone, Default)]
    struct Listener(Arc<Mutex<u32>>);
    impl rmcp::ClientHandler for Listener {
        async fn on_tool_list_changed(
            &self,
            _context: rmcp::service::NotificationContext<RoleClient>,
        ) {
            *self.0.lock().unwrap() += 1;
        }
    }

    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let listener = Listener::default();
    let client = listener
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(server.url("/mcp")))
        .await
        .unwrap();
    // The calculator's four, and the node's own `goal`.
    let names = async || -> Vec<String> {
        let mut names: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        names.sort();
        names
    };
    let before = [
        "calculator.add",
        "calculator.divide",
        "calculator.multiply",
        "calculator.subtract",
        "goal",
    ];
    assert_eq!(names().await, before);

    let heard = &listener.0;
    let wait_for = |count: u32| {
        eventually_async(
            Duration::from_secs(5),
            "tools/list_changed arrives",
            async move || {
                let heard = *heard.lock().unwrap();
                if heard >= count {
                    Ok(())
                } else {
                    Err(format!("{heard} of {count} heard"))
                }
            },
        )
    };
    cli.add(&["text"]);
    wait_for(1).await;
    assert!(names().await.iter().any(|t| t == "text.upper"));

    cli.run(&["rm", "text"]).success();
    wait_for(2).await;
    assert_eq!(names().await, before);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_serves_the_same_tools() {
    let cli = Cli::new();
    cli.add(&["calculator", "text"]);
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentsite"));
    command.arg("--data-dir").arg(cli.data()).arg("mcp");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "calculator.add"));
    let result = call(&client, "calculator.add", json!({"a": 1.5, "b": 2}))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(json!({"result": 3.5})));
    let result = call(&client, "calculator.divide", json!({"a": 1, "b": 0}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    client.cancel().await.unwrap();

    // Naming one agent serves its tools under their own names.
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentsite"));
    command
        .arg("--data-dir")
        .arg(cli.data())
        .args(["mcp", "text"]);
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let result = call(&client, "upper", json!({"text": "shout"}))
        .await
        .unwrap();
    assert!(text(&result).contains("SHOUT"), "{result:?}");
    client.cancel().await.unwrap();
}

/// Beside a running node of the same data directory, `agentsite mcp` (the
/// README's line for Claude Desktop and Claude Code) reaches the agents
/// through it: an agent whose key-value store the node holds works, and the
/// node's `goal` tool is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_beside_a_running_node_goes_through_it() {
    let cli = Cli::new();
    cli.add(&["notes", "calculator"]);
    cli.grant("notes", &["kv=1MiB"]);
    let server = Server::start(cli.data(), &[]);
    // The node serves a call that opens the agent's store.
    let over_http = http_client(server.url("/mcp")).await;
    let saved = call(
        &over_http,
        "notes.put",
        json!({"title": "served", "text": "kept by the node"}),
    )
    .await
    .unwrap();
    assert_ne!(saved.is_error, Some(true), "{saved:?}");
    over_http.cancel().await.unwrap();

    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentsite"));
    command.arg("--data-dir").arg(cli.data()).arg("mcp");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "goal"), "{tools:?}");
    let note = call(&client, "notes.get", json!({"title": "served"}))
        .await
        .unwrap();
    assert_eq!(text(&note), "kept by the node", "{note:?}");
    let put = call(
        &client,
        "notes.put",
        json!({"title": "relayed", "text": "through"}),
    )
    .await
    .unwrap();
    assert_ne!(put.is_error, Some(true), "{put:?}");
    client.cancel().await.unwrap();

    // One agent, under its own tool names, as without a node.
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentsite"));
    command
        .arg("--data-dir")
        .arg(cli.data())
        .args(["mcp", "notes"]);
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let note = call(&client, "get", json!({"title": "relayed"}))
        .await
        .unwrap();
    assert_eq!(text(&note), "through", "{note:?}");
    client.cancel().await.unwrap();

    // Several agents: their tools under the agents' names, as without a node.
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentsite"));
    command
        .arg("--data-dir")
        .arg(cli.data())
        .args(["mcp", "notes", "calculator"]);
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    names.sort();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("notes.") || n.starts_with("calculator.")),
        "{names:?}"
    );
    let note = call(&client, "notes.get", json!({"title": "relayed"}))
        .await
        .unwrap();
    assert_eq!(text(&note), "through", "{note:?}");
    client.cancel().await.unwrap();

    // A name the node does not have is refused with its words.
    let refused = cli.run(&["mcp", "calculater"]);
    refused.failure("no installed agent matches \"calculater\"; did you mean \"calculator\"?");

    // Through the node, the node's policy applies: another one named on the
    // command line is refused rather than ignored.
    let other_policy = cli.data().join("other-policy.toml");
    std::fs::write(&other_policy, "").unwrap();
    cli.run(&[
        "--policy",
        other_policy.to_str().unwrap(),
        "call",
        "notes",
        "get",
        r#"{"title": "relayed"}"#,
    ])
    .failure(&format!("not {}", other_policy.display()));
    // Naming the node's own policy is no conflict.
    let own_policy = cli.data().join("policy.toml");
    let note = cli
        .run(&[
            "--policy",
            own_policy.to_str().unwrap(),
            "call",
            "notes",
            "get",
            r#"{"title": "relayed"}"#,
            "--json",
        ])
        .json();
    assert_eq!(note["content"][0]["text"], "through", "{note}");

    // `agentsite call` goes through the node too, and reads as it does alone.
    let note = cli.call("notes", "get", r#"{"title": "relayed"}"#).json();
    assert_eq!(note["content"][0]["text"], "through", "{note}");
    cli.call("calculator", "divide", r#"{"a": 1, "b": 0}"#)
        .failure("error: calculator.divide failed: division by zero");
    cli.call("calculater", "add", "{}")
        .failure("no installed agent matches \"calculater\"; did you mean \"calculator\"?");
    cli.run(&[
        "call",
        "calculator",
        "add",
        r#"{"a": 1, "b": 2}"#,
        "--deadline",
        "0s",
    ])
    .failure("deadline");
    drop(server);
}

/// The stdio server answers every request as soon as it can, and a client
/// that reads its answers late only makes them wait: the server goes on
/// reading requests while its stdout is full. (The node's rmcp sends an
/// answer from the serve loop when the pipe takes it at once and from a task
/// of its own otherwise; see vendor/README.md.)
#[test]
fn responses_keep_flowing_to_a_client_that_reads_late() {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::os::fd::AsRawFd as _;
    use std::sync::mpsc;

    /// Kills the server if the test fails half-way.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    let cli = Cli::new();
    cli.add(&["calculator"]);
    let mut server = Kill(
        std::process::Command::new(env!("CARGO_BIN_EXE_agentsite"))
            .arg("--data-dir")
            .arg(cli.data())
            .args(["mcp", "calculator"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("agentsite mcp starts"),
    );
    let mut stdin = server.0.stdin.take().unwrap();
    let stdout = server.0.stdout.take().unwrap();
    let stdout_fd = stdout.as_raw_fd();
    let mut answers = BufReader::new(stdout);
    let mut line = String::new();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"late-reader","version":"1"}}}}}}"#
    )
    .unwrap();
    answers.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":0"#), "{line}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();

    // Every answer is longer than 64 bytes, so the first batch of answers
    // overfills the pipe to the client; the second batch of requests is
    // larger than the pipe from the client, so it can only be written while
    // the server goes on reading.
    // SAFETY: F_GETPIPE_SZ only reads the size of the pipe behind the fd.
    let capacity = unsafe { libc::fcntl(stdout_fd, libc::F_GETPIPE_SZ) };
    let capacity = usize::try_from(capacity).expect("stdout is a pipe");
    let first = capacity / 64 + 64;
    let total = first + capacity / 32;
    let request = |id: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"add","arguments":{{"a":{id},"b":1}}}}}}"#
        )
    };
    let (written, batches) = mpsc::channel();
    let (go_on, second_batch) = mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let mut write = |ids: std::ops::Range<usize>| {
            for id in ids {
                writeln!(stdin, "{}", request(id))?;
            }
            stdin.flush()
        };
        let outcome = write(1..first + 1);
        let _ = written.send(outcome.is_ok());
        if second_batch.recv().is_ok() {
            let outcome = write(first + 1..total + 1);
            let _ = written.send(outcome.is_ok());
        }
        stdin
    });
    let limit = Duration::from_secs(120);
    assert_eq!(batches.recv_timeout(limit), Ok(true), "first batch written");
    // Wait until the answers fill the pipe to the client. A pipe stores
    // whole writes page by page, so it is full while a sixteenth of it (a
    // page's worth of slack per page) may still read as free.
    support::eventually(limit, "the server's answers fill its stdout", || {
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes the count of unread bytes into `unread`.
        let status = unsafe { libc::ioctl(stdout_fd, libc::FIONREAD, &mut unread) };
        assert_eq!(status, 0, "FIONREAD on the server's stdout");
        let unread = usize::try_from(unread).unwrap();
        if unread + capacity / 16 >= capacity {
            Ok(())
        } else {
            Err(format!("{unread} of {capacity} bytes"))
        }
    });
    go_on.send(()).unwrap();
    assert_eq!(
        batches.recv_timeout(limit),
        Ok(true),
        "the server stopped reading requests while its answers were unread"
    );

    // Every request gets its own answer, however late the client reads.
    let mut seen = vec![false; total + 1];
    for _ in 0..total {
        line.clear();
        answers.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        let id = answer["id"].as_u64().unwrap() as usize;
        assert!(
            !std::mem::replace(&mut seen[id], true),
            "answered twice: {line}"
        );
        assert_eq!(
            answer["result"]["structuredContent"]["result"].as_f64(),
            Some((id + 1) as f64),
            "{line}"
        );
    }
    assert!(seen[1..].iter().all(|&answered| answered));
    drop(writer.join().unwrap());
    let status = support::eventually(limit, "the server ends with its input", || {
        match server.0.try_wait() {
            Ok(Some(status)) => Ok(status),
            Ok(None) => Err("still running".to_string()),
            Err(error) => Err(error.to_string()),
        }
    });
    assert!(status.success(), "the server ends with its input: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_and_hosts_are_refused() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    });
    let post = |origin: Option<&str>, host: Option<&str>| {
        let mut request = mcp_post(server.url("/mcp")).json(&initialize);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        request.send()
    };
    assert_eq!(
        post(Some("http://evil.example"), None)
            .await
            .unwrap()
            .status(),
        403
    );
    assert!(
        post(None, Some("evil.example"))
            .await
            .unwrap()
            .status()
            .is_client_error()
    );
    assert_eq!(
        post(Some("http://localhost:6274"), None)
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(post(None, None).await.unwrap().status(), 200);

    // The node's models over the OpenAI API follow the same rules.
    let models = |origin: Option<&str>, host: Option<&str>| {
        let mut request = reqwest::Client::new().get(server.url("/v1/models"));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        request.send()
    };
    let refused = models(Some("http://evil.example"), None).await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "permission_error", "{body}");
    assert_eq!(
        models(None, Some("evil.example")).await.unwrap().status(),
        403
    );
    assert_eq!(
        models(Some("http://localhost:6274"), None)
            .await
            .unwrap()
            .status(),
        200
    );

    let health = server.health().await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["agents"], 1);
}

/// The DNS-rebinding rule covers the whole front end (issue 41): a Host or
/// Origin that is not this node's is refused on every route it serves, and
/// on paths it does not, before anything is read or named; nothing is
/// exempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_or_origin_is_refused_on_every_route() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let client = reqwest::Client::new();
    let paths = [
        "/health",
        "/metrics",
        "/",
        "/hub/search",
        "/hub/agents/calculator",
        "/chat",
        "/network",
        "/login",
        "/assets/site.css",
        "/v1/models",
        "/mcp",
        "/agents/calculator/mcp",
        "/a2a",
        "/.well-known/agent-card.json",
        "/agents/calculator/.well-known/agent-card.json",
        "/api/goals",
        "/no/such/path",
    ];
    for path in paths {
        for (header, value) in [
            ("host", "rebound.example"),
            ("origin", "http://rebound.example"),
        ] {
            let response = client
                .get(server.url(path))
                .header(header, value)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 403, "GET {path} with {header}: {value}");
            let body = response.text().await.unwrap();
            assert!(
                !body.contains("calculator"),
                "GET {path} named an agent to {value}: {body}"
            );
        }
    }
    // The node's own name still reaches every route.
    for path in ["/health", "/metrics", "/", "/.well-known/agent-card.json"] {
        let response = client.get(server.url(path)).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_the_mcp_endpoints() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &["--token", "open-sesame"]);
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);

    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            server.url("/mcp"),
        )
        .auth_header("open-sesame"),
    );
    let client = ().serve(transport).await.unwrap();
    let result = call(&client, "calculator.add", json!({"a": 1, "b": 1}))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(json!({"result": 2.0})));
    client.cancel().await.unwrap();

    // Beyond loopback, a token is mandatory.
    let run = cli.run(&["serve", "--listen", "0.0.0.0:0"]);
    run.failure("without a bearer token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_2026_07_28_requests_need_no_session() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let meta = stateless_meta();
    let post =
        |method: &str, params: Value| stateless_post(server.url("/mcp"), method, params).send();
    // The body may be JSON or one SSE event; either way it holds the response.
    let response_of = |body: String| -> Value {
        let json = body
            .lines()
            .find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{')))
            .map(str::to_owned)
            .unwrap_or(body);
        serde_json::from_str(&json).unwrap()
    };

    let discover = post("server/discover", json!({"_meta": meta}))
        .await
        .unwrap();
    assert_eq!(discover.status(), 200);
    let discover = response_of(discover.text().await.unwrap());
    assert!(
        discover["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28")),
        "{discover}"
    );

    let call = post(
        "tools/call",
        json!({"name": "calculator.add", "arguments": {"a": 2, "b": 3}, "_meta": meta}),
    )
    .await
    .unwrap();
    assert_eq!(call.status(), 200);
    let call = response_of(call.text().await.unwrap());
    assert_eq!(
        call["result"]["structuredContent"],
        json!({"result": 5.0}),
        "{call}"
    );
    assert_eq!(call["result"]["resultType"], "complete", "{call}");
}

/// SEP-2243: a request's method, and the name it routes on, travel as
/// headers too, and headers that disagree with the body are refused (HTTP
/// 400, JSON-RPC -32020) before anything runs: a tool call's name, a
/// resource's URI, a prompt's name, the method itself, and the name of a
/// tool call whose params are not a tool call's (read as a custom request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_headers_that_disagree_with_the_body_are_refused() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let meta = stateless_meta();
    let send = |headers: [&str; 2], method: &str, params: Value| {
        mcp_post(server.url("/mcp"))
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", headers[0])
            .header("mcp-name", headers[1])
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
            .send()
    };
    let add = json!({"name": "calculator.add", "arguments": {"a": 2, "b": 3}, "_meta": meta});
    let refused = [
        (
            ["tools/call", "calculator.subtract"],
            "tools/call",
            add.clone(),
            "Mcp-Name header `calculator.subtract` does not match body value `calculator.add`",
        ),
        (
            ["tools/list", "calculator.add"],
            "tools/call",
            add.clone(),
            "Mcp-Method header `tools/list` does not match body method `tools/call`",
        ),
        (
            ["resources/read", "agentsite://a"],
            "resources/read",
            json!({"uri": "agentsite://b", "_meta": meta}),
            "does not match body value `agentsite://b`",
        ),
        (
            ["prompts/get", "calculator.a"],
            "prompts/get",
            json!({"name": "calculator.b", "_meta": meta}),
            "does not match body value `calculator.b`",
        ),
        (
            ["tools/call", "calculator.subtract"],
            "tools/call",
            json!({"name": "calculator.add", "arguments": "not an object", "_meta": meta}),
            "does not match body value `calculator.add`",
        ),
    ];
    for (headers, method, params, reason) in refused {
        let response = send(headers, method, params).await.unwrap();
        assert_eq!(response.status(), 400, "{headers:?}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["id"], 7, "{error}");
        assert_eq!(error["error"]["code"], -32020, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(reason), "{headers:?}: {message}");
    }
    // Headers that agree are let through to the tool.
    let response = send(["tools/call", "calculator.add"], "tools/call", add)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(
        text.contains(r#""structuredContent":{"result":5.0}"#),
        "{text}"
    );
}

/// A stateless call whose agent reports progress is answered as a stream in
/// the one response: the progress first, in order, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_call_streams_its_progress_before_its_result() {
    let cli = Cli::new();
    cli.add(&["hostile_flood"]);
    let server = Server::start(cli.data(), &[]);
    let mut meta = stateless_meta();
    meta["progressToken"] = json!("nagging");
    let params = json!({
        "name": "hostile-flood.nag",
        "arguments": {"count": 3, "kib": 1},
        "_meta": meta
    });
    let response = stateless_post(server.url("/mcp"), "tools/call", params)
        .send()
        .await
        .unwrap();
    assert_progress_then_result(response, 7).await;
}

/// In a session too, a call that sends nothing before its result is
/// answered with plain JSON, and one whose agent reports progress is
/// streamed: a priming event a client can resume from, the progress in
/// order, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_call_is_plain_json_unless_it_reports_progress() {
    let cli = Cli::new();
    cli.add(&["calculator", "hostile_flood"]);
    let server = Server::start(cli.data(), &[]);
    let url = server.url("/mcp");
    let session = support::mcp_session(&reqwest::Client::new(), &url).await;
    let in_session = |body: Value| {
        mcp_post(url.clone())
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body)
    };

    let add = in_session(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "calculator.add", "arguments": {"a": 2, "b": 3}}}))
    .send()
    .await
    .unwrap();
    assert_eq!(add.status(), 200);
    assert_eq!(
        add.headers()[reqwest::header::CONTENT_TYPE],
        "application/json"
    );
    let answer: Value = add.json().await.unwrap();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["result"],
        json!(5.0),
        "{answer}"
    );

    let nag = in_session(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "hostile-flood.nag", "arguments": {"count": 3, "kib": 1},
                   "_meta": {"progressToken": "nagging"}}}))
    .send()
    .await
    .unwrap();
    let body = assert_progress_then_result(nag, 3).await;
    let first = body.split("\n\n").next().unwrap();
    assert!(
        first.lines().any(|l| l.starts_with("id:")) && !first.contains('{'),
        "the stream does not open with a priming event: {body}"
    );
}

/// Checks that `response` is an event stream of progress reports
/// (`progressToken` "nagging", in order) and then the result of the
/// `hostile-flood.nag` call with JSON-RPC id `id`; its body.
async fn assert_progress_then_result(response: reqwest::Response, id: u64) -> String {
    assert_eq!(response.status(), 200);
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let body = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("the stream ends with the result")
        .unwrap();
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| data.starts_with('{'))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let (result, progress) = messages.split_last().expect("messages");
    assert_eq!(result["id"], id, "{body}");
    assert_eq!(
        result["result"]["content"][0]["text"], "reported 3 times",
        "{body}"
    );
    assert!(
        !progress.is_empty(),
        "no progress before the result: {body}"
    );
    let mut reported = Vec::new();
    for message in progress {
        assert_eq!(message["method"], "notifications/progress", "{body}");
        assert_eq!(message["params"]["progressToken"], "nagging", "{body}");
        reported.push(message["params"]["progress"].as_f64().unwrap());
    }
    assert!(
        reported.is_sorted() && reported.len() <= 3,
        "progress out of order or repeated: {reported:?}"
    );
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_specs_errors_and_serving_goes_on() {
    let cli = Cli::new();
    cli.add(&["calculator"]);
    let server = Server::start(cli.data(), &[]);
    let client = http_client(server.url("/mcp")).await;
    let post = |body: Vec<u8>| mcp_post(server.url("/mcp")).body(body).send();
    let cases: [(&str, Vec<u8>, u16, i64); 7] = [
        (
            "malformed JSON",
            br#"{"jsonrpc":"2.0","id":1,"method":"#.to_vec(),
            400,
            -32700,
        ),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_vec(),
            400,
            -32600,
        ),
        (
            "wrong jsonrpc version",
            br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#.to_vec(),
            400,
            -32600,
        ),
        (
            "a jsonrpc that is not a string",
            br#"{"jsonrpc":2,"id":1,"method":"ping"}"#.to_vec(),
            400,
            -32600,
        ),
        ("JSON that is not an object", b"42".to_vec(), 400, -32600),
        ("a batch that is not even JSON", b"[{".to_vec(), 400, -32700),
        ("a 10 MB body", vec![b' '; 10 << 20], 413, -32600),
    ];
    for (what, body, status, code) in cases {
        let response = post(body).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{what}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], code, "{what}: {error}");
        assert_eq!(error["id"], Value::Null, "{what}");
    }

    // An unknown method inside a session: -32601.
    let error = client
        .send_request(rmcp::model::ClientRequest::CustomRequest(
            rmcp::model::CustomRequest::new("bogus/method", None),
        ))
        .await
        .unwrap_err();
    assert_eq!(jsonrpc_error(error).code, ErrorCode::METHOD_NOT_FOUND);

    // After all that, correct calls still work.
    let result = call(&client, "calculator.add", json!({"a": 20, "b": 22}))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(json!({"result": 42.0})));
    client.cancel().await.unwrap();
}

/// The first text of a resource read.
fn resource_text(result: &rmcp::model::ReadResourceResult) -> String {
    match &result.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("expected text contents, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_of_several_agents_share_one_endpoint() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};

    let cli = Cli::new();
    cli.add(&["notes", "conformance", "calculator"]);
    cli.grant("notes", &["kv=1MiB"]);
    cli.call(
        "notes",
        "put",
        r#"{"title": "shopping list", "text": "eggs"}"#,
    )
    .success();
    let server = Server::start(cli.data(), &[]);
    let client = http_client(server.url("/mcp")).await;

    // Resources keep the URIs their agents give them; notes lists its notes.
    let uris = resource_uris(&client).await;
    assert!(
        uris.contains(&"note://shopping%20list".to_owned()),
        "{uris:?}"
    );
    assert!(uris.contains(&"test://static-text".to_owned()), "{uris:?}");
    let templates: Vec<String> = client
        .list_all_resource_templates()
        .await
        .unwrap()
        .iter()
        .map(|t| t.uri_template.clone())
        .collect();
    assert!(
        templates.contains(&"note://{title}".to_owned()),
        "{templates:?}"
    );

    // A read goes to the agent that lists the URI or a matching template.
    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
    assert_eq!(
        resource_text(&read("note://shopping%20list").await.unwrap()),
        "eggs"
    );
    assert!(resource_text(&read("test://template/7/data").await.unwrap()).contains("\"id\":\"7\""));
    let missing = jsonrpc_error(read("nowhere://at-all").await.unwrap_err());
    assert_eq!(missing.code, ErrorCode::RESOURCE_NOT_FOUND);
    // The notes agent itself says a note is gone.
    let gone = jsonrpc_error(read("note://no-such-note").await.unwrap_err());
    assert_eq!(gone.code, ErrorCode::RESOURCE_NOT_FOUND);

    // Prompts are named like tools, `<agent>.<prompt>`.
    let prompts = prompt_names(&client).await;
    assert!(
        prompts.contains(&"notes.summarize".to_owned()),
        "{prompts:?}"
    );
    assert!(
        prompts.contains(&"conformance.test_simple_prompt".to_owned()),
        "{prompts:?}"
    );
    let summary = client
        .get_prompt(
            GetPromptRequestParams::new("notes.summarize")
                .with_arguments(arguments(json!({"focus": "food"}))),
        )
        .await
        .unwrap();
    let text = &summary.messages[0]
        .content
        .as_text()
        .expect("a text message")
        .text;
    assert!(
        text.contains("focusing on food") && text.contains("eggs"),
        "{text}"
    );
    let unknown = client
        .get_prompt(GetPromptRequestParams::new("notes.nope"))
        .await
        .unwrap_err();
    assert_eq!(jsonrpc_error(unknown).code, ErrorCode::INVALID_PARAMS);
    let missing_argument = client
        .get_prompt(GetPromptRequestParams::new(
            "conformance.test_prompt_with_arguments",
        ))
        .await
        .unwrap_err();
    let missing_argument = jsonrpc_error(missing_argument);
    assert_eq!(missing_argument.code, ErrorCode::INVALID_PARAMS);
    assert!(
        missing_argument.message.contains("arg1"),
        "{missing_argument:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // logging and resources/subscribe: legacy in 2026-07-28, current in 2025-11-25
async fn subscribers_hear_when_an_agent_updates_a_resource_and_see_its_logs() {
    use rmcp::model::{
        LoggingMessageNotificationParam, ResourceUpdatedNotificationParam, SubscribeRequestParams,
    };
    use rmcp::service::NotificationContext;
    use std::sync::{Arc, Mutex};

    /// A client that records resource updates and log messages.
    #[derive(Clone, Default)]
    struct Recorder {
        updated: Arc<Mutex<Vec<String>>>,
        logs: Arc<Mutex<Vec<String>>>,
    }
    impl rmcp::ClientHandler for Recorder {
        async fn on_resource_updated(
            &self,
            params: ResourceUpdatedNotificationParam,
            _context: NotificationContext<RoleClient>,
        ) {
            self.updated.lock().unwrap().push(params.uri);
        }
        async fn on_logging_message(
            &self,
            params: LoggingMessageNotificationParam,
            _context: NotificationContext<RoleClient>,
        ) {
            let logger = params.logger.unwrap_or_default();
            self.logs
                .lock()
                .unwrap()
                .push(format!("{logger}: {}", params.data));
        }
    }

    let cli = Cli::new();
    cli.add(&["notes", "conformance"]);
    cli.grant("notes", &["kv=1MiB"]);
    let server = Server::start(cli.data(), &[]);
    let recorder = Recorder::default();
    let client = recorder
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(server.url("/mcp")))
        .await
        .unwrap();

    client
        .subscribe(SubscribeRequestParams::new("note://todo"))
        .await
        .unwrap();
    call(&client, "notes.put", json!({"title": "other", "text": "x"}))
        .await
        .unwrap();
    call(
        &client,
        "notes.put",
        json!({"title": "todo", "text": "ship it"}),
    )
    .await
    .unwrap();
    eventually_async(
        Duration::from_secs(5),
        "the update is announced",
        async || {
            let updated = recorder.updated.lock().unwrap();
            if updated.is_empty() {
                Err("none yet")
            } else {
                Ok(())
            }
        },
    )
    .await;
    // Only the subscribed note is announced.
    assert_eq!(*recorder.updated.lock().unwrap(), ["note://todo"]);

    // The agent's host.log messages arrive as notifications/message, in
    // order. In a session rmcp sends them on the standalone GET stream, so
    // they may land just after the result.
    call(&client, "conformance.test_tool_with_logging", json!({}))
        .await
        .unwrap();
    eventually_async(
        Duration::from_secs(5),
        "3 log messages arrive",
        async || {
            let heard = recorder.logs.lock().unwrap().len();
            if heard >= 3 {
                Ok(())
            } else {
                Err(format!("{heard} heard"))
            }
        },
    )
    .await;
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(
        logs,
        [
            "conformance: \"Tool execution started\"",
            "conformance: \"Tool processing data\"",
            "conformance: \"Tool execution completed\""
        ]
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sampling_the_nodes_model_answers_and_elicitation_needs_a_client() {
    let cli = Cli::new();
    cli.add(&["conformance"]);
    let server = Server::start(cli.data(), &[]);
    // rmcp's default client offers neither a model nor a person to ask.
    let client = http_client(server.url("/mcp")).await;

    // First the operator's policy: no model for an agent not granted one.
    let refused = call(
        &client,
        "conformance.test_sampling",
        json!({"prompt": "hi"}),
    )
    .await
    .unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("has not granted this agent a language model"),
        "{}",
        text(&refused)
    );
    // A grant applies to the running server's next call. The client lends
    // no model, so the node's own (the embedded default) answers.
    cli.grant("conformance", &["llm"]);
    let sampled = call(
        &client,
        "conformance.test_sampling",
        json!({"prompt": "What is the capital of France? Answer in one sentence."}),
    )
    .await
    .unwrap();
    assert_ne!(sampled.is_error, Some(true), "{}", text(&sampled));
    assert!(
        text(&sampled).starts_with("LLM response: ") && text(&sampled).contains("Paris"),
        "{}",
        text(&sampled)
    );

    let elicited = call(
        &client,
        "conformance.test_elicitation",
        json!({"message": "who?"}),
    )
    .await
    .unwrap();
    assert_eq!(elicited.is_error, Some(true));
    assert!(
        text(&elicited).contains("does not support elicitation"),
        "{}",
        text(&elicited)
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // logging: legacy in 2026-07-28, current in 2025-11-25
async fn an_agent_cannot_flood_its_client_with_notifications() {
    use rmcp::model::{LoggingMessageNotificationParam, ProgressNotificationParam};
    use rmcp::service::NotificationContext;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A client that counts log messages and the bytes of progress messages.
    #[derive(Clone, Default)]
    struct Counter {
        logs: Arc<AtomicUsize>,
        progress_bytes: Arc<AtomicUsize>,
    }
    impl rmcp::ClientHandler for Counter {
        async fn on_logging_message(
            &self,
            _params: LoggingMessageNotificationParam,
            _context: NotificationContext<RoleClient>,
        ) {
            self.logs.fetch_add(1, Ordering::Relaxed);
        }
        async fn on_progress(
            &self,
            params: ProgressNotificationParam,
            _context: NotificationContext<RoleClient>,
        ) {
            let size = params.message.map_or(0, |m| m.len());
            self.progress_bytes.fetch_add(size, Ordering::Relaxed);
        }
    }

    let cli = Cli::new();
    cli.add(&["hostile_flood"]);
    let server = Server::start(cli.data(), &[]);
    let counter = Counter::default();
    let client = counter
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(server.url("/mcp")))
        .await
        .unwrap();
    let budget = 64 * 1024 / agentsite::testing::FRAMING;

    // 200,000 empty warnings (and empty stderr lines, which share the budget).
    let result = call(&client, "hostile-flood.whisper", json!({"count": 200000}))
        .await
        .unwrap();
    assert_eq!(text(&result), "whispered 200000 times");

    // 1,000 progress reports of 256 KiB each (rmcp sends a progress token
    // with every request).
    let result = call(
        &client,
        "hostile-flood.nag",
        json!({"count": 1000, "kib": 256}),
    )
    .await
    .unwrap();
    assert_eq!(text(&result), "reported 1000 times");

    // Notifications of a session may trail its results: wait until the
    // counts stop growing.
    let mut last = (usize::MAX, usize::MAX);
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = (
            counter.logs.load(Ordering::Relaxed),
            counter.progress_bytes.load(Ordering::Relaxed),
        );
        if now == last && now.0 > 0 {
            break;
        }
        last = now;
    }
    let logs = counter.logs.load(Ordering::Relaxed);
    assert!(logs > 0 && logs <= budget, "{logs} log notifications");
    let progress_bytes = counter.progress_bytes.load(Ordering::Relaxed);
    assert!(
        progress_bytes > 0 && progress_bytes <= 64 * 1024,
        "{progress_bytes} bytes of progress messages"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_never_lists_does_not_hold_up_the_others() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
    use std::time::Instant;

    let cli = Cli::new();
    cli.add(&["notes", "conformance", "hostile_stall"]);
    cli.grant("notes", &["kv=1MiB"]);
    cli.call("notes", "put", r#"{"title": "todo", "text": "ship it"}"#)
        .success();
    // A long call deadline, a short listing deadline: a listing that waited
    // on the stalling agent would take the former.
    std::fs::write(
        cli.data().join("config.toml"),
        "[limits]\ndeadline = \"60s\"\nlisting_deadline = \"1s\"\n",
    )
    .unwrap();
    let server = Server::start(cli.data(), &[]);
    let client = http_client(server.url("/mcp")).await;
    let well_within = Duration::from_secs(20);

    for round in 0..2 {
        let started = Instant::now();
        let uris = resource_uris(&client).await;
        assert!(uris.contains(&"note://todo".to_owned()), "{uris:?}");
        assert!(uris.contains(&"test://static-text".to_owned()), "{uris:?}");
        let templates = client.list_all_resource_templates().await.unwrap();
        assert!(templates.iter().any(|t| t.uri_template == "note://{title}"));
        let prompts = prompt_names(&client).await;
        assert!(
            prompts.contains(&"notes.summarize".to_owned()),
            "{prompts:?}"
        );
        let read = client
            .read_resource(ReadResourceRequestParams::new("note://todo"))
            .await
            .unwrap();
        assert_eq!(resource_text(&read), "ship it");
        client
            .get_prompt(GetPromptRequestParams::new("notes.summarize"))
            .await
            .unwrap();
        let took = started.elapsed();
        assert!(took < well_within, "round {round} took {took:?}");
    }

    // The stalling agent was asked once per list, not once per request,
    // and counted.
    let metrics = server.metrics().await;
    for list in ["resources", "prompts"] {
        let line = format!(
            "agentsite_listing_failures_total{{agent=\"hostile-stall\",list=\"{list}\"}} 1"
        );
        assert!(metrics.contains(&line), "{line} not in:\n{metrics}");
    }
    // Its tools still work.
    let pong = call(&client, "hostile-stall.ping", json!({}))
        .await
        .unwrap();
    assert_eq!(text(&pong), "pong");

    // When its failure is old enough to ask again (issue 41), it is asked
    // in the background: the listings answer from what the others said,
    // without waiting out its listing deadline again.
    tokio::time::sleep(agentsite::mcp::listing::RETRY_AFTER).await;
    let started = Instant::now();
    let uris = resource_uris(&client).await;
    assert!(uris.contains(&"note://todo".to_owned()), "{uris:?}");
    let prompts = prompt_names(&client).await;
    assert!(
        prompts.contains(&"notes.summarize".to_owned()),
        "{prompts:?}"
    );
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "listing after the retry window took {took:?}: it waited for the stalling agent"
    );
    // It was asked again all the same, and failed again.
    let line = "agentsite_listing_failures_total{agent=\"hostile-stall\",list=\"resources\"} 2";
    support::eventually_async(
        Duration::from_secs(10),
        "the stalling agent asked again",
        async || {
            if server.metrics().await.contains(line) {
                Ok(())
            } else {
                Err("not yet")
            }
        },
    )
    .await;
    client.cancel().await.unwrap();
}
