//! MCP servers no one here wrote, attached to a node: servers made with
//! the MCP Python SDK's MCPServer (FastMCP before mcp 2) over stdio and
//! over streamable HTTP, listed and called through the CLI and the node's
//! `/mcp`, published as a service another node calls (by remote call and
//! by an agent's `peers.call`) but cannot fetch, a member of a goal's team,
//! and held to the call's deadline, output cap and concurrency when it
//! crashes, hangs, floods or lies.

use crate::support;

use agentsite::NodeCallError;
use agentsite::bridge::Attachment;
use agentsite::config::Limits;
use agentsite::runtime::CallError;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;
use support::{Cli, Server, eventually, eventually_async, installed_tool, mcp_call, node, repo};

fn python() -> String {
    installed_tool("venv/bin/python").display().to_string()
}

/// The example: unit conversion, written for MCP only.
fn units_server() -> String {
    repo()
        .join("examples/python-mcp-units/server.py")
        .display()
        .to_string()
}

/// The test server: arithmetic, and misbehaviour on request.
fn testkit() -> String {
    repo()
        .join("tests/python/mcp_server.py")
        .display()
        .to_string()
}

/// A streamable-HTTP MCP server process on a free loopback port, killed
/// when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(script: &str) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(python())
            .args([script, "http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the MCP server starts");
        let server = HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        eventually(Duration::from_secs(30), "the MCP server listens", || {
            std::net::TcpStream::connect(("127.0.0.1", port))
        });
        server
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tool names listed over MCP at `url`.
async fn mcp_tools(url: String) -> Vec<String> {
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(url))
            .await
            .expect("MCP client connects");
    let tools = client.list_all_tools().await.expect("tools/list answers");
    client.cancel().await.ok();
    tools.into_iter().map(|t| t.name.into_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_mcp_server_is_an_agent_listed_called_and_detached() {
    let cli = Cli::new();
    let python = python();
    let id = cli
        .run(&["attach", "units", "--", &python, &units_server()])
        .success()
        .trim()
        .to_owned();
    assert!(id.starts_with("sha256:"), "{id}");

    // Listed as an agent, marked as what it is.
    let table = cli.run(&["ls"]).success();
    assert!(
        table.contains("units") && table.contains("attached"),
        "{table}"
    );
    let records = cli.run(&["ls", "--json"]).json();
    assert_eq!(records[0]["attached"]["transport"], "stdio");
    assert_eq!(records[0]["origin"]["kind"], "attached");
    let inspect = cli.run(&["inspect", "units"]).success();
    assert!(
        inspect.contains("MCP server (stdio)")
            && inspect.contains("not sandboxed by this node, not fetchable by hash"),
        "{inspect}"
    );

    // Called from the command line: the node starts it for the call.
    let miles = cli
        .call(
            "units",
            "convert",
            r#"{"value": 10, "from_unit": "km", "to_unit": "mi"}"#,
        )
        .json();
    assert_eq!(miles["structuredContent"]["result"], 6.213711922, "{miles}");
    // Its own errors come back as the tool's errors.
    cli.call(
        "units",
        "convert",
        r#"{"value": 1, "from_unit": "km", "to_unit": "C"}"#,
    )
    .failure("cannot convert 'km' to 'C'");
    cli.call("units", "weigh", "{}")
        .failure("units has no tool named \"weigh\"");

    // Nothing to grant, the name is taken.
    cli.run(&["grant", "units", "kv=1MiB"])
        .failure("runs outside the sandbox");
    cli.run(&["attach", "units", "--", &python, &units_server()])
        .failure("an agent named units is installed already");

    // Served with the components' tools, on /mcp and on its own endpoint.
    let server = Server::start(cli.data(), &[]);
    assert!(
        mcp_tools(server.url("/mcp"))
            .await
            .contains(&"units.convert".to_owned())
    );
    let kelvin = mcp_call(
        server.url("/agents/units/mcp"),
        "convert",
        json!({"value": 100, "from_unit": "C", "to_unit": "K"}),
    )
    .await;
    assert_eq!(kelvin["result"], 373.15, "{kelvin}");

    // Detached, it is gone, from the running node too.
    cli.run(&["detach", "units"]).success();
    assert!(
        cli.run(&["ls", "--json"])
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    eventually_async(Duration::from_secs(30), "units leaves /mcp", async || {
        let tools = mcp_tools(server.url("/mcp")).await;
        match tools.iter().any(|t| t.starts_with("units.")) {
            false => Ok(()),
            true => Err(format!("{tools:?}")),
        }
    })
    .await;
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(server.url("/mcp")))
            .await
            .unwrap();
    let gone = client
        .call_tool(CallToolRequestParams::new("units.convert"))
        .await
        .unwrap_err();
    assert!(gone.to_string().contains("unknown tool"), "{gone}");
    client.cancel().await.ok();
    drop(server);
}

#[test]
fn an_http_mcp_server_is_an_agent_and_an_unreachable_one_a_clear_error() {
    let cli = Cli::new();
    let http = HttpServer::start(&units_server());
    cli.run(&["attach", "units", &http.url]).success();
    let records = cli.run(&["ls", "--json"]).json();
    assert_eq!(records[0]["attached"]["url"], http.url.as_str());
    let pounds = cli
        .call(
            "units",
            "convert",
            r#"{"value": 2, "from_unit": "kg", "to_unit": "lb"}"#,
        )
        .json();
    assert_eq!(pounds["structuredContent"]["result"], 4.409245244);

    // The server goes away: the call says so, within its deadline.
    drop(http);
    cli.run(&["call", "units", "units", "{}", "--deadline", "5s"])
        .failure("cannot reach units at http://127.0.0.1:");
    // Nothing is attached that cannot be reached.
    cli.run(&["attach", "nobody", "http://127.0.0.1:1/mcp"])
        .failure("Connection refused");
    cli.run(&["attach", "nobody", "--", "/no/such/server"])
        .failure("cannot start nobody");
    cli.run(&["attach", "nobody", "--", "false"])
        .failure("did not complete the MCP handshake (it exited with status 1)");
}

/// A node in a temporary directory with `limits`.
fn stdio(script: &str, extra: &[&str]) -> Attachment {
    let mut target = vec![python(), script.to_owned()];
    target.extend(extra.iter().map(|s| s.to_string()));
    Attachment::from_command_line(&target, None, repo()).unwrap()
}

/// The failure of a call that did not return a result.
fn failure(outcome: Result<agentsite::agent::tool::ToolOutput, NodeCallError>) -> CallError {
    match outcome {
        Err(NodeCallError::Call(failure)) => failure,
        other => panic!("expected a failed call, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_server_is_contained_and_a_crashed_one_restarted() {
    let limits = Limits {
        deadline: Duration::from_secs(3),
        max_output: bytesize::ByteSize::kib(64),
        max_concurrent_calls: 2,
        ..Limits::default()
    };
    let (node, _dir) = node(limits);

    // A server whose tool list breaks the contract is not attached.
    let lie = node
        .attach("liar", stdio(&testkit(), &["--lie"]))
        .await
        .unwrap_err();
    assert!(
        lie.to_string().contains("\"not a tool name!\" is invalid"),
        "{lie}"
    );
    let many = node
        .attach("many", stdio(&testkit(), &["--many"]))
        .await
        .unwrap_err();
    assert!(
        many.to_string().contains("lists more than 256 tools"),
        "{many}"
    );
    assert!(node.list().unwrap().is_empty());

    node.attach("kit", stdio(&testkit(), &[])).await.unwrap();
    let pid = |output: agentsite::agent::tool::ToolOutput| {
        output.structured_content.unwrap().to_value()["result"].clone()
    };
    let first = pid(node.call("kit", "pid", "{}", None).await.unwrap());

    // It crashes: the call says how, and the node starts it again.
    let crashed = failure(node.call("kit", "crash", "{}", None).await).to_string();
    assert!(
        crashed.contains("kit exited with status 3") && crashed.contains("crashing on request"),
        "{crashed}"
    );
    let second = eventually_async(Duration::from_secs(30), "kit runs again", async || {
        node.call("kit", "pid", "{}", None).await.map(pid)
    })
    .await;
    assert_ne!(first, second, "a new process");

    // It hangs: the deadline ends the call. With both call slots taken
    // by hanging calls, a third (with a shorter deadline) waits for a slot
    // until its deadline.
    let record = node.resolve("kit").unwrap();
    let mut short = node.grants(&record).unwrap();
    short.limits.deadline = Duration::from_secs(1);
    let hanging = futures::future::join_all((0..2).map(|_| node.call("kit", "hang", "{}", None)));
    let waiting = node.call_record(&record, "hang", "{}", short, None);
    let (hung, waited) = tokio::join!(hanging, waiting);
    for outcome in hung {
        assert!(matches!(failure(outcome), CallError::DeadlineExceeded(_)));
    }
    assert!(matches!(failure(waited), CallError::Busy(2)));

    // It floods: a result over the output cap is refused; a message too
    // large for any result within it stops the server, which is restarted.
    assert!(matches!(
        failure(node.call("kit", "flood", r#"{"kib": 100}"#, None).await),
        CallError::OutputTooLarge { .. }
    ));
    let flooded = failure(node.call("kit", "flood", r#"{"kib": 2048}"#, None).await).to_string();
    assert!(flooded.contains("sent a message larger than"), "{flooded}");
    let sum = eventually_async(Duration::from_secs(30), "kit adds again", async || {
        node.call("kit", "add", r#"{"a": 2, "b": 3}"#, None).await
    })
    .await;
    assert_eq!(sum.structured_content.unwrap().to_value()["result"], 5.0);

    // It says its tools changed: the node lists them again into its record.
    node.call("kit", "grow", r#"{"name": "grown"}"#, None)
        .await
        .unwrap();
    eventually_async(
        Duration::from_secs(30),
        "kit's record lists grown",
        async || {
            let tools = node.resolve("kit").unwrap().tools;
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            match names.contains(&"grown") {
                true => Ok(()),
                false => Err(format!("{names:?}")),
            }
        },
    )
    .await;
    let grown = node.call("kit", "grown", "{}", None).await.unwrap();
    assert_eq!(grown.text(), "grown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_server_is_a_service_others_call_but_never_fetch() {
    let (a, b) = (Cli::new(), Cli::new());
    let python = python();
    let service = a
        .run(&["attach", "arithmetic", "--", &python, &testkit()])
        .success()
        .trim()
        .to_owned();
    b.add(&["accountant"]);
    b.grant("accountant", &["peers=2/4"]);
    let node_a = Server::join(a.data(), None);
    let node_b = Server::join(b.data(), Some(&node_a));
    assert_eq!(a.run(&["publish", "arithmetic"]).success().trim(), service);

    // B finds it, as a service of A's.
    let found = eventually(Duration::from_secs(30), "B finds the service", || {
        let found = b.run(&["search", "arithmetic", "--json"]).json();
        found
            .as_array()
            .and_then(|found| found.iter().find(|f| f["id"] == service.as_str()))
            .cloned()
            .ok_or(found)
    });
    assert_eq!(found["service"], "MCP server (stdio)");
    assert_eq!(found["size"], 0);
    let table = b.run(&["search", "arithmetic"]).success();
    assert!(table.contains("remote call only"), "{table}");

    // Called there by id; never fetched.
    let sum = b
        .run(&["call", &service, "add", r#"{"a": 20, "b": 22}"#, "--remote"])
        .json();
    assert_eq!(sum["structuredContent"]["result"], 42.0, "{sum}");
    b.run(&["fetch", &service]).failure("not fetchable by hash");

    // B's accountant finds it and sums through it with peers.call.
    let total = mcp_call(
        node_b.url("/mcp"),
        "accountant.total",
        json!({"amounts": [1.5, 2.5, 38]}),
    )
    .await;
    assert_eq!(total["total"], 42.0, "{total}");
    assert_eq!(total["calculator"], service.as_str());
    drop((node_a, node_b));
}

/// The attached example's path as the goal test's working directory sees it.
fn units_attachment() -> Attachment {
    stdio(&units_server(), &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_server_does_a_task_in_a_goal() {
    use agentsite::goals::ask::GoalModel;
    use agentsite::goals::config::GoalsConfig;
    use agentsite::goals::{GoalState, NewGoal};
    use agentsite::llm::{ChatRequest, Completion, LlmFailure};
    use support::scripted::{Answer, Asked, completion, first_call, goals_for, read, run_goal};

    /// The team's one member converts with the attached server's tool
    /// (its unit codes are words of the tool's description), and the
    /// conclusion states the exact result.
    struct Scripted;

    #[async_trait::async_trait]
    impl GoalModel for Scripted {
        async fn complete(
            &self,
            _model: Option<&str>,
            request: ChatRequest,
            _deadline: std::time::Instant,
        ) -> Result<Completion, LlmFailure> {
            let answer = match read(&request).asked {
                Asked::Call => Answer::Call(
                    "convert",
                    json!({"value": 42, "from_unit": "km", "to_unit": "mi"}),
                ),
                // Rounded: a number no tool gave, so the node states the
                // result itself.
                Asked::Answer => Answer::Text("42 km is about 26.1 miles.".into()),
                _ => Answer::Text("Convert the units.".into()),
            };
            Ok(completion(answer, 10))
        }

        fn resolve(&self, model: Option<&str>) -> Result<String, String> {
            Ok(model.unwrap_or("scripted").to_owned())
        }
    }

    let (node, dir) = node(Limits::default());
    node.attach("units", units_attachment()).await.unwrap();
    let goals = goals_for(
        dir.path(),
        &node,
        None,
        Arc::new(Scripted),
        GoalsConfig::default(),
    );
    let new = NewGoal {
        text: "How far is 42 km in miles?".into(),
        team: vec!["units".into()],
        ..Default::default()
    };
    let (record, messages) = run_goal(&goals, new, Duration::from_secs(60)).await;
    assert_eq!(record.state, GoalState::Concluded, "{messages:#?}");
    let call = first_call(&messages);
    assert_eq!(call.tool, "convert");
    assert!(call.result.contains("26.09"), "{}", call.result);
    let conclusion = record.conclusion.unwrap();
    assert!(
        conclusion.starts_with("convert(42, \"km\", \"mi\") = 26.09"),
        "{conclusion}"
    );
}
